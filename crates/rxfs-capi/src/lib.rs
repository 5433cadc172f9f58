//! The C ABI of rxfs (`librxfs`, `rxfs.h`): the operations of
//! [`rxfs::volume::Volume`] behind opaque handles.
//!
//! Conventions, for every function:
//! - the return value is 0 on success or a positive errno (`ENOENT`,
//!   `EUCLEAN` for corrupt metadata, `EINVAL` for a null or malformed
//!   argument, `EIO` for an internal error); `rxfs_last_error()` gives the
//!   calling thread's last failure as text;
//! - no panic crosses the boundary: one is caught and returned as `EIO`;
//! - paths are NUL-terminated byte strings from the image's root;
//! - a handle (`rxfs_fs`, `rxfs_file`, `rxfs_dir`) is freed by its close
//!   function exactly once; `rxfs_close` commits and unmounts cleanly.
//!
//! Handles may be used from several threads at once, except that one
//! `rxfs_dir` belongs to one thread at a time.

#![allow(non_camel_case_types)]
// Every function checks its pointers for null; the rest is the C caller's
// contract, written in each function's doc.
#![allow(clippy::missing_safety_doc)]

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use rxfs::format::inode::Timestamp;
use rxfs::volume::{DirEntry, FileRef, OpenFlags, Stat, Volume, VolumeOptions};

/// Open for reading.
pub const RXFS_OPEN_READ: u32 = 1;
/// Open for writing.
pub const RXFS_OPEN_WRITE: u32 = 2;
/// Create the file if it does not exist.
pub const RXFS_OPEN_CREATE: u32 = 4;
/// With RXFS_OPEN_CREATE: fail with EEXIST if it exists.
pub const RXFS_OPEN_EXCL: u32 = 8;
/// Cut the file to length 0.
pub const RXFS_OPEN_TRUNCATE: u32 = 16;
/// Fail with ELOOP on a symbolic link at the end of the path.
pub const RXFS_OPEN_NOFOLLOW: u32 = 32;

/// An open image.
pub struct rxfs_fs {
    vol: Volume,
}

/// An open file of an image.
pub struct rxfs_file {
    fs: *const rxfs_fs,
    f: Option<FileRef>,
}

/// A directory listing being read.
pub struct rxfs_dir {
    entries: Vec<DirEntry>,
    next: usize,
    name: CString,
}

/// How `rxfs_open` opens an image (zero-initialized: read-only, whole
/// file, no realtime device).
#[repr(C)]
pub struct rxfs_open_options {
    /// Non-zero: read-write (a dirty log is replayed first).
    pub writable: c_int,
    /// The realtime device's path, or NULL.
    pub rtdev: *const c_char,
    /// Byte offset of the filesystem in the file (a multiple of 512).
    pub offset: u64,
    /// Partition number (from 1) of a GPT or DOS table, or 0.
    pub partition: u32,
}

/// A timestamp: seconds since 1970 and nanoseconds.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rxfs_timespec {
    pub sec: i64,
    pub nsec: u32,
}

/// What `stat` reports of a file, birth time included.
#[repr(C)]
pub struct rxfs_stat {
    pub ino: u64,
    pub mode: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    /// 512-byte units.
    pub blocks: u64,
    pub blksize: u32,
    pub rdev_major: u32,
    pub rdev_minor: u32,
    pub generation: u32,
    pub atime: rxfs_timespec,
    pub mtime: rxfs_timespec,
    pub ctime: rxfs_timespec,
    pub btime: rxfs_timespec,
}

/// One directory entry; `name` stays valid until the next
/// `rxfs_readdir` or `rxfs_closedir` on the same handle.
#[repr(C)]
pub struct rxfs_dirent {
    pub name: *const c_char,
    pub ino: u64,
    /// DT_REG, DT_DIR... (DT_UNKNOWN if the directory does not record it).
    pub dtype: u8,
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_error(msg: String) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|l| *l.borrow_mut() = c);
}

/// Run `f`, turning an error into its errno (message kept) and a panic
/// into EIO.
fn guard(f: impl FnOnce() -> Result<(), Fail>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => 0,
        Ok(Err(Fail(errno, msg))) => {
            set_error(msg);
            errno
        }
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            set_error(format!("internal error (a bug in rxfs): {what}"));
            libc::EIO
        }
    }
}

/// An errno and its message.
struct Fail(c_int, String);

impl From<rxfs::Error> for Fail {
    fn from(e: rxfs::Error) -> Fail {
        Fail(e.errno(), e.to_string())
    }
}

fn invalid(what: &str) -> Fail {
    Fail(libc::EINVAL, format!("invalid argument: {what}"))
}

unsafe fn cstr<'a>(p: *const c_char, what: &str) -> Result<&'a [u8], Fail> {
    if p.is_null() {
        return Err(invalid(&format!("{what} is NULL")));
    }
    // SAFETY: the caller passes a NUL-terminated string.
    Ok(unsafe { CStr::from_ptr(p) }.to_bytes())
}

unsafe fn fs_ref<'a>(fs: *const rxfs_fs) -> Result<&'a Volume, Fail> {
    // SAFETY: the caller passes a handle from rxfs_open, not yet closed.
    unsafe { fs.as_ref() }
        .map(|f| &f.vol)
        .ok_or_else(|| invalid("filesystem handle is NULL"))
}

unsafe fn out<'a, T>(p: *mut T, what: &str) -> Result<&'a mut T, Fail> {
    // SAFETY: the caller passes a valid, writable pointer.
    unsafe { p.as_mut() }.ok_or_else(|| invalid(&format!("{what} is NULL")))
}

fn ts(t: Timestamp) -> rxfs_timespec {
    rxfs_timespec {
        sec: t.sec,
        nsec: t.nsec,
    }
}

fn fill_stat(s: &Stat, o: &mut rxfs_stat) {
    *o = rxfs_stat {
        ino: s.ino,
        mode: s.mode,
        nlink: s.nlink,
        uid: s.uid,
        gid: s.gid,
        size: s.size,
        blocks: s.blocks,
        blksize: s.blksize,
        rdev_major: s.rdev.0,
        rdev_minor: s.rdev.1,
        generation: s.generation,
        atime: ts(s.atime),
        mtime: ts(s.mtime),
        ctime: ts(s.ctime),
        btime: ts(s.btime),
    };
}

/// The calling thread's last failure, as text (empty before any). Valid
/// until the thread's next failing call.
#[no_mangle]
pub extern "C" fn rxfs_last_error() -> *const c_char {
    LAST_ERROR.with(|l| l.borrow().as_ptr())
}

/// The library's version, e.g. "0.1.0".
#[no_mangle]
pub extern "C" fn rxfs_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// Open the image (file or block device) at `path`; `opts` may be NULL
/// (read-only). On success `*out` is the handle.
#[no_mangle]
pub unsafe extern "C" fn rxfs_open(
    path: *const c_char,
    opts: *const rxfs_open_options,
    out_fs: *mut *mut rxfs_fs,
) -> c_int {
    guard(|| {
        let p = unsafe { cstr(path, "path") }?;
        let slot = unsafe { out(out_fs, "out_fs") }?;
        let mut o = VolumeOptions::default();
        // SAFETY: NULL or a valid options struct.
        if let Some(opts) = unsafe { opts.as_ref() } {
            o.writable = opts.writable != 0;
            if !opts.rtdev.is_null() {
                let r = unsafe { cstr(opts.rtdev, "rtdev") }?;
                o.rtdev = Some(Path::new(std::ffi::OsStr::from_bytes(r)).to_path_buf());
            }
            o.offset = opts.offset;
            o.partition = (opts.partition != 0).then_some(opts.partition);
        }
        let vol = Volume::open(Path::new(std::ffi::OsStr::from_bytes(p)), &o)?;
        *slot = Box::into_raw(Box::new(rxfs_fs { vol }));
        Ok(())
    })
}

/// Commit every change, unmount cleanly (read-write) and free `fs`. Every
/// file and directory handle of it must be closed first. `fs` is freed
/// even when this fails.
#[no_mangle]
pub unsafe extern "C" fn rxfs_close(fs: *mut rxfs_fs) -> c_int {
    guard(|| {
        if fs.is_null() {
            return Err(invalid("filesystem handle is NULL"));
        }
        // SAFETY: a handle from rxfs_open, closed once.
        let b = unsafe { Box::from_raw(fs) };
        b.vol.close()?;
        Ok(())
    })
}

/// `stat` (`follow` non-zero) or `lstat` of `path`.
#[no_mangle]
pub unsafe extern "C" fn rxfs_stat(
    fs: *const rxfs_fs,
    path: *const c_char,
    follow: c_int,
    st: *mut rxfs_stat,
) -> c_int {
    guard(|| {
        let v = unsafe { fs_ref(fs) }?;
        let p = unsafe { cstr(path, "path") }?;
        let o = unsafe { out(st, "st") }?;
        fill_stat(&v.stat(p, follow != 0)?, o);
        Ok(())
    })
}

/// Start reading the directory `path` (its entries but `.` and `..`).
#[no_mangle]
pub unsafe extern "C" fn rxfs_opendir(
    fs: *const rxfs_fs,
    path: *const c_char,
    out_dir: *mut *mut rxfs_dir,
) -> c_int {
    guard(|| {
        let v = unsafe { fs_ref(fs) }?;
        let p = unsafe { cstr(path, "path") }?;
        let slot = unsafe { out(out_dir, "out_dir") }?;
        let entries = v.read_dir(p)?;
        *slot = Box::into_raw(Box::new(rxfs_dir {
            entries,
            next: 0,
            name: CString::default(),
        }));
        Ok(())
    })
}

/// The next entry into `*ent`; at the end `ent->name` is NULL.
#[no_mangle]
pub unsafe extern "C" fn rxfs_readdir(dir: *mut rxfs_dir, ent: *mut rxfs_dirent) -> c_int {
    guard(|| {
        // SAFETY: a handle from rxfs_opendir, used by one thread.
        let d = unsafe { dir.as_mut() }.ok_or_else(|| invalid("directory handle is NULL"))?;
        let e = unsafe { out(ent, "ent") }?;
        let Some(de) = d.entries.get(d.next) else {
            *e = rxfs_dirent {
                name: std::ptr::null(),
                ino: 0,
                dtype: 0,
            };
            return Ok(());
        };
        d.next += 1;
        d.name = CString::new(de.name.clone()).map_err(|_| invalid("a name with a NUL byte"))?;
        use rxfs::types::FileType as F;
        let dtype = match de.file_type {
            Some(F::Regular) => libc::DT_REG,
            Some(F::Directory) => libc::DT_DIR,
            Some(F::Symlink) => libc::DT_LNK,
            Some(F::CharDev) => libc::DT_CHR,
            Some(F::BlockDev) => libc::DT_BLK,
            Some(F::Fifo) => libc::DT_FIFO,
            Some(F::Socket) => libc::DT_SOCK,
            None => libc::DT_UNKNOWN,
        };
        *e = rxfs_dirent {
            name: d.name.as_ptr(),
            ino: de.ino,
            dtype,
        };
        Ok(())
    })
}

/// Free a directory handle.
#[no_mangle]
pub unsafe extern "C" fn rxfs_closedir(dir: *mut rxfs_dir) -> c_int {
    guard(|| {
        if !dir.is_null() {
            // SAFETY: a handle from rxfs_opendir, closed once.
            drop(unsafe { Box::from_raw(dir) });
        }
        Ok(())
    })
}

/// Copy into `buf` (`len` bytes) what `copy` gives, setting `*needed` to
/// its full length; ERANGE if it does not fit (buf may be NULL with len 0
/// to ask the size).
unsafe fn give(data: &[u8], buf: *mut u8, len: usize, needed: *mut usize) -> Result<(), Fail> {
    // SAFETY: NULL or a writable size_t.
    if let Some(n) = unsafe { needed.as_mut() } {
        *n = data.len();
    }
    if buf.is_null() && len == 0 {
        return Ok(());
    }
    if data.len() > len {
        return Err(Fail(libc::ERANGE, format!("needs {} bytes", data.len())));
    }
    if buf.is_null() {
        return Err(invalid("buf is NULL"));
    }
    // SAFETY: buf holds len >= data.len() writable bytes.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), buf, data.len()) };
    Ok(())
}

/// The target of the symbolic link `path` (not NUL-terminated), its
/// length in `*needed`.
#[no_mangle]
pub unsafe extern "C" fn rxfs_readlink(
    fs: *const rxfs_fs,
    path: *const c_char,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> c_int {
    guard(|| {
        let v = unsafe { fs_ref(fs) }?;
        let p = unsafe { cstr(path, "path") }?;
        let t = v.readlink(p)?;
        unsafe { give(&t, buf.cast(), len, needed) }
    })
}

/// The extended attribute names of `path`, each NUL-terminated, as
/// listxattr(2) gives them.
#[no_mangle]
pub unsafe extern "C" fn rxfs_listxattr(
    fs: *const rxfs_fs,
    path: *const c_char,
    follow: c_int,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> c_int {
    guard(|| {
        let v = unsafe { fs_ref(fs) }?;
        let p = unsafe { cstr(path, "path") }?;
        let mut list = Vec::new();
        for n in v.listxattr(p, follow != 0)? {
            list.extend_from_slice(&n);
            list.push(0);
        }
        unsafe { give(&list, buf.cast(), len, needed) }
    })
}

/// The value of the extended attribute `name` (ENODATA if absent).
#[no_mangle]
pub unsafe extern "C" fn rxfs_getxattr(
    fs: *const rxfs_fs,
    path: *const c_char,
    name: *const c_char,
    follow: c_int,
    buf: *mut u8,
    len: usize,
    needed: *mut usize,
) -> c_int {
    guard(|| {
        let v = unsafe { fs_ref(fs) }?;
        let p = unsafe { cstr(path, "path") }?;
        let n = unsafe { cstr(name, "name") }?;
        let val = v.getxattr(p, n, follow != 0)?;
        unsafe { give(&val, buf, len, needed) }
    })
}

/// Set an extended attribute; `flags` 0, XATTR_CREATE (1) or
/// XATTR_REPLACE (2).
#[no_mangle]
pub unsafe extern "C" fn rxfs_setxattr(
    fs: *const rxfs_fs,
    path: *const c_char,
    name: *const c_char,
    value: *const u8,
    len: usize,
    flags: c_int,
    follow: c_int,
) -> c_int {
    guard(|| {
        let v = unsafe { fs_ref(fs) }?;
        let p = unsafe { cstr(path, "path") }?;
        let n = unsafe { cstr(name, "name") }?;
        let val: &[u8] = if len == 0 {
            &[]
        } else if value.is_null() {
            return Err(invalid("value is NULL"));
        } else {
            // SAFETY: value holds len readable bytes.
            unsafe { std::slice::from_raw_parts(value, len) }
        };
        let how = match flags {
            0 => rxfs::attr::XattrSet::Any,
            1 => rxfs::attr::XattrSet::Create,
            2 => rxfs::attr::XattrSet::Replace,
            _ => return Err(invalid("flags")),
        };
        v.setxattr(p, n, val, how, follow != 0)?;
        Ok(())
    })
}

/// Remove an extended attribute (ENODATA if absent).
#[no_mangle]
pub unsafe extern "C" fn rxfs_removexattr(
    fs: *const rxfs_fs,
    path: *const c_char,
    name: *const c_char,
    follow: c_int,
) -> c_int {
    guard(|| {
        let v = unsafe { fs_ref(fs) }?;
        let p = unsafe { cstr(path, "path") }?;
        let n = unsafe { cstr(name, "name") }?;
        v.removexattr(p, n, follow != 0)?;
        Ok(())
    })
}

/// Open (or create: `mode` is then its permission bits, minus the umask)
/// the file `path`; `flags` are RXFS_OPEN_* bits.
#[no_mangle]
pub unsafe extern "C" fn rxfs_file_open(
    fs: *const rxfs_fs,
    path: *const c_char,
    flags: u32,
    mode: u32,
    out_file: *mut *mut rxfs_file,
) -> c_int {
    guard(|| {
        let v = unsafe { fs_ref(fs) }?;
        let p = unsafe { cstr(path, "path") }?;
        let slot = unsafe { out(out_file, "out_file") }?;
        let fl = OpenFlags::from_bits(flags).ok_or_else(|| invalid("flags"))?;
        let f = v.open_file(p, fl, mode)?;
        *slot = Box::into_raw(Box::new(rxfs_file { fs, f: Some(f) }));
        Ok(())
    })
}

unsafe fn file_ref<'a>(f: *const rxfs_file) -> Result<(&'a Volume, &'a FileRef), Fail> {
    // SAFETY: a handle from rxfs_file_open whose filesystem is open.
    let f = unsafe { f.as_ref() }.ok_or_else(|| invalid("file handle is NULL"))?;
    let v = unsafe { fs_ref(f.fs) }?;
    let r = f.f.as_ref().ok_or_else(|| invalid("file is closed"))?;
    Ok((v, r))
}

/// Read up to `len` bytes at `off` into `buf`; `*done` is the count (0 at
/// end of file).
#[no_mangle]
pub unsafe extern "C" fn rxfs_file_read(
    file: *const rxfs_file,
    off: u64,
    buf: *mut u8,
    len: usize,
    done: *mut usize,
) -> c_int {
    guard(|| {
        let (v, f) = unsafe { file_ref(file) }?;
        let d = unsafe { out(done, "done") }?;
        *d = 0;
        if len == 0 {
            return Ok(());
        }
        if buf.is_null() {
            return Err(invalid("buf is NULL"));
        }
        // SAFETY: buf holds len writable bytes.
        let b = unsafe { std::slice::from_raw_parts_mut(buf, len) };
        let mut n = 0;
        while n < len {
            let r = v.read_at(f, off + n as u64, &mut b[n..])?;
            if r == 0 {
                break;
            }
            n += r;
        }
        *d = n;
        Ok(())
    })
}

/// Write `len` bytes of `buf` at `off`; `*done` is the count written
/// (all of it on success).
#[no_mangle]
pub unsafe extern "C" fn rxfs_file_write(
    file: *const rxfs_file,
    off: u64,
    buf: *const u8,
    len: usize,
    done: *mut usize,
) -> c_int {
    guard(|| {
        let (v, f) = unsafe { file_ref(file) }?;
        let d = unsafe { out(done, "done") }?;
        *d = 0;
        if len == 0 {
            return Ok(());
        }
        if buf.is_null() {
            return Err(invalid("buf is NULL"));
        }
        // SAFETY: buf holds len readable bytes.
        let b = unsafe { std::slice::from_raw_parts(buf, len) };
        *d = v.write_at(f, off, b)?;
        Ok(())
    })
}

/// The stat of an open file.
#[no_mangle]
pub unsafe extern "C" fn rxfs_file_stat(file: *const rxfs_file, st: *mut rxfs_stat) -> c_int {
    guard(|| {
        let (v, f) = unsafe { file_ref(file) }?;
        let o = unsafe { out(st, "st") }?;
        fill_stat(&v.fstat(f)?, o);
        Ok(())
    })
}

/// Set an open file's length.
#[no_mangle]
pub unsafe extern "C" fn rxfs_file_truncate(file: *const rxfs_file, len: u64) -> c_int {
    guard(|| {
        let (v, f) = unsafe { file_ref(file) }?;
        v.ftruncate(f, len)?;
        Ok(())
    })
}

/// Make an open file's data and metadata durable (fsync(2)).
#[no_mangle]
pub unsafe extern "C" fn rxfs_file_fsync(file: *const rxfs_file) -> c_int {
    guard(|| {
        let (v, f) = unsafe { file_ref(file) }?;
        v.fsync_file(f)?;
        Ok(())
    })
}

/// Close and free an open file (an unlinked file is freed now).
#[no_mangle]
pub unsafe extern "C" fn rxfs_file_close(file: *mut rxfs_file) -> c_int {
    guard(|| {
        if file.is_null() {
            return Err(invalid("file handle is NULL"));
        }
        // SAFETY: a handle from rxfs_file_open, closed once.
        let mut b = unsafe { Box::from_raw(file) };
        let v = unsafe { fs_ref(b.fs) }?;
        if let Some(f) = b.f.take() {
            v.close_file(f)?;
        }
        Ok(())
    })
}

/// One-path operations.
unsafe fn one(
    fs: *const rxfs_fs,
    path: *const c_char,
    op: impl FnOnce(&Volume, &[u8]) -> rxfs::Result<()>,
) -> c_int {
    guard(|| {
        let v = unsafe { fs_ref(fs) }?;
        let p = unsafe { cstr(path, "path") }?;
        op(v, p)?;
        Ok(())
    })
}

/// Make the directory `path` (`mode` minus the umask).
#[no_mangle]
pub unsafe extern "C" fn rxfs_mkdir(fs: *const rxfs_fs, path: *const c_char, mode: u32) -> c_int {
    unsafe { one(fs, path, |v, p| v.mkdir(p, mode).map(|_| ())) }
}

/// Remove the file name `path`.
#[no_mangle]
pub unsafe extern "C" fn rxfs_unlink(fs: *const rxfs_fs, path: *const c_char) -> c_int {
    unsafe { one(fs, path, |v, p| v.unlink(p)) }
}

/// Remove the empty directory `path`.
#[no_mangle]
pub unsafe extern "C" fn rxfs_rmdir(fs: *const rxfs_fs, path: *const c_char) -> c_int {
    unsafe { one(fs, path, |v, p| v.rmdir(p)) }
}

/// Set the permission bits of `path`.
#[no_mangle]
pub unsafe extern "C" fn rxfs_chmod(
    fs: *const rxfs_fs,
    path: *const c_char,
    mode: u32,
    follow: c_int,
) -> c_int {
    unsafe { one(fs, path, |v, p| v.chmod(p, mode, follow != 0)) }
}

/// Set the length of the file `path`.
#[no_mangle]
pub unsafe extern "C" fn rxfs_truncate(fs: *const rxfs_fs, path: *const c_char, len: u64) -> c_int {
    unsafe { one(fs, path, |v, p| v.truncate(p, len)) }
}

/// Make a device node, FIFO, socket or empty file (`mode` holds the
/// S_IF* type bits and the permissions).
#[no_mangle]
pub unsafe extern "C" fn rxfs_mknod(
    fs: *const rxfs_fs,
    path: *const c_char,
    mode: u32,
    major: u32,
    minor: u32,
) -> c_int {
    unsafe { one(fs, path, |v, p| v.mknod(p, mode, major, minor).map(|_| ())) }
}

/// Set the owner of `path`; `(uint32_t)-1` leaves an id.
#[no_mangle]
pub unsafe extern "C" fn rxfs_chown(
    fs: *const rxfs_fs,
    path: *const c_char,
    uid: u32,
    gid: u32,
    follow: c_int,
) -> c_int {
    guard(|| {
        let v = unsafe { fs_ref(fs) }?;
        let p = unsafe { cstr(path, "path") }?;
        let id = |x: u32| (x != u32::MAX).then_some(x);
        v.chown(p, id(uid), id(gid), follow != 0)?;
        Ok(())
    })
}

/// Set access and modification times; a NULL time is left as it is.
#[no_mangle]
pub unsafe extern "C" fn rxfs_utime(
    fs: *const rxfs_fs,
    path: *const c_char,
    atime: *const rxfs_timespec,
    mtime: *const rxfs_timespec,
    follow: c_int,
) -> c_int {
    guard(|| {
        let v = unsafe { fs_ref(fs) }?;
        let p = unsafe { cstr(path, "path") }?;
        let t = |x: *const rxfs_timespec| {
            // SAFETY: NULL or a valid timespec.
            unsafe { x.as_ref() }.map(|t| Timestamp {
                sec: t.sec,
                nsec: t.nsec.min(999_999_999),
            })
        };
        v.utime(p, t(atime), t(mtime), follow != 0)?;
        Ok(())
    })
}

/// Two-path operations: rename(2), link(2), symlink(2).
unsafe fn two(
    fs: *const rxfs_fs,
    a: *const c_char,
    b: *const c_char,
    op: impl FnOnce(&Volume, &[u8], &[u8]) -> rxfs::Result<()>,
) -> c_int {
    guard(|| {
        let v = unsafe { fs_ref(fs) }?;
        let a = unsafe { cstr(a, "first path") }?;
        let b = unsafe { cstr(b, "second path") }?;
        op(v, a, b)?;
        Ok(())
    })
}

/// Rename `from` to `to` (replacing `to`, as rename(2)).
#[no_mangle]
pub unsafe extern "C" fn rxfs_rename(
    fs: *const rxfs_fs,
    from: *const c_char,
    to: *const c_char,
) -> c_int {
    unsafe { two(fs, from, to, |v, a, b| v.rename(a, b)) }
}

/// A new name `new_path` for `existing`.
#[no_mangle]
pub unsafe extern "C" fn rxfs_link(
    fs: *const rxfs_fs,
    existing: *const c_char,
    new_path: *const c_char,
) -> c_int {
    unsafe { two(fs, existing, new_path, |v, a, b| v.link(a, b)) }
}

/// A symbolic link `path` pointing at `target`.
#[no_mangle]
pub unsafe extern "C" fn rxfs_symlink(
    fs: *const rxfs_fs,
    target: *const c_char,
    path: *const c_char,
) -> c_int {
    unsafe { two(fs, target, path, |v, a, b| v.symlink(a, b).map(|_| ())) }
}

/// Make every change so far durable (one log force).
#[no_mangle]
pub unsafe extern "C" fn rxfs_sync(fs: *const rxfs_fs) -> c_int {
    guard(|| {
        unsafe { fs_ref(fs) }?.sync()?;
        Ok(())
    })
}

/// statvfs(2) of an open image.
#[repr(C)]
pub struct rxfs_statvfs {
    pub bsize: u32,
    pub frsize: u32,
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    pub files: u64,
    pub ffree: u64,
    pub namemax: u32,
}

/// The space and inode counts of an open image.
#[no_mangle]
pub unsafe extern "C" fn rxfs_statvfs(fs: *const rxfs_fs, out_st: *mut rxfs_statvfs) -> c_int {
    guard(|| {
        let v = unsafe { fs_ref(fs) }?;
        let o = unsafe { out(out_st, "out_st") }?;
        let s = v.statfs()?;
        *o = rxfs_statvfs {
            bsize: s.bsize,
            frsize: s.frsize,
            blocks: s.blocks,
            bfree: s.bfree,
            bavail: s.bavail,
            files: s.files,
            ffree: s.ffree,
            namemax: s.namelen,
        };
        Ok(())
    })
}

/// Copy the host directory tree `source` into the directory `dest` of
/// the open read-write image (modes, owners, times, xattrs, ACLs, hard
/// links, devices, holes; as `rxfs populate`); `*paths` and `*bytes`
/// (either may be NULL) count what was copied.
#[no_mangle]
pub unsafe extern "C" fn rxfs_populate(
    fs: *const rxfs_fs,
    source: *const c_char,
    dest: *const c_char,
    paths: *mut u64,
    bytes: *mut u64,
) -> c_int {
    guard(|| {
        let v = unsafe { fs_ref(fs) }?;
        let src = unsafe { cstr(source, "source") }?;
        let d = unsafe { cstr(dest, "dest") }?;
        if !v.is_writable() {
            return Err(rxfs::Error::ReadOnly("the image was opened read-only".into()).into());
        }
        let ino = v.lookup(d, true)?;
        let sum = rxfs::populate::populate(
            v.filesystem(),
            Path::new(std::ffi::OsStr::from_bytes(src)),
            rxfs::populate::Dest::Into(rxfs::types::Ino(ino)),
            &rxfs::populate::Options::default(),
            &|_| {},
        )
        .map_err(|e| {
            let errno = match &e.cause {
                rxfs::populate::Cause::Source(io) => io.raw_os_error().unwrap_or(libc::EIO),
                rxfs::populate::Cause::Image(fe) => fe.errno(),
            };
            Fail(errno, e.to_string())
        })?;
        // SAFETY: NULL or writable u64s.
        if let Some(p) = unsafe { paths.as_mut() } {
            *p = sum.files;
        }
        if let Some(b) = unsafe { bytes.as_mut() } {
            *b = sum.bytes;
        }
        Ok(())
    })
}

/// Make an XFS v5 filesystem on `path` (an image file, created sparse or
/// grown to `size` bytes when `size` is non-zero, or a block device),
/// with mkfs.xfs's defaults; `label` may be NULL. A device holding a
/// filesystem is refused (EEXIST) unless `force` is non-zero.
#[no_mangle]
pub unsafe extern "C" fn rxfs_mkfs(
    path: *const c_char,
    size: u64,
    label: *const c_char,
    force: c_int,
) -> c_int {
    guard(|| {
        let p = unsafe { cstr(path, "path") }?;
        let mut o = rxfs::mkfs::MkfsOptions {
            dsize: (size != 0).then_some(size),
            ..Default::default()
        };
        if !label.is_null() {
            let l = unsafe { cstr(label, "label") }?;
            o.label = Some(String::from_utf8_lossy(l).into_owned());
        }
        rxfs::mkfs::image::make_image(Path::new(std::ffi::OsStr::from_bytes(p)), &o, force != 0)?;
        Ok(())
    })
}

/// Check the image at `path` as it is on disk (read-only); `*findings`
/// is the number of inconsistencies found (0: clean). The first is in
/// `rxfs_last_error()` when there is one.
#[no_mangle]
pub unsafe extern "C" fn rxfs_check(path: *const c_char, findings: *mut u64) -> c_int {
    guard(|| {
        let p = unsafe { cstr(path, "path") }?;
        let n = unsafe { out(findings, "findings") }?;
        let opts = rxfs::fs::MountOptions {
            read_only: true,
            norecovery: true,
            ..Default::default()
        };
        let fs =
            rxfs::Filesystem::open_path(Path::new(std::ffi::OsStr::from_bytes(p)), None, opts)?;
        let report = rxfs::check::check(&fs, &mut |_, _, _| {});
        *n = report.stats.findings;
        if let Some(f) = report.findings.first() {
            set_error(f.to_string());
        }
        Ok(())
    })
}
