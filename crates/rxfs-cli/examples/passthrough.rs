//! A bare FUSE passthrough: the cost of FUSE round trips alone, the
//! "ceiling" target of `scripts/bench-dio`. A measuring tool, not a product.
//!
//! Usage: passthrough SRC MNT [--threads N] [--no-parallel-dio]
//!
//! Serves the directory SRC (meant to be a tmpfs) read-write at MNT until
//! MNT is unmounted (`fusermount3 -u MNT` or `umount MNT`), in the
//! foreground. Requests: lookup, forget, getattr, setattr (mode, owner,
//! size, times), open, create, read, write, flush, release, fsync, mkdir,
//! unlink, rmdir, rename (flags 0 only), opendir, readdir, releasedir,
//! statfs, fallocate.
//!
//! How it serves:
//! - fuser runs `--threads` event loops (default 16), each reading its own
//!   clone of the `/dev/fuse` descriptor, the transport rxfs's daemon
//!   uses; every request is answered on the loop that read it (pread and
//!   pwrite on the file's descriptor: no shared file position).
//! - Inodes are named by path (relative to SRC): FUSE inode numbers are
//!   ours, handed out at lookup and freed when the kernel forgets them.
//!   A rename moves the names of the renamed inode and of every known
//!   inode below it (dbench renames files). No links or symlinks.
//! - An open whose flags carry O_DIRECT opens the source file with
//!   O_DIRECT and replies FOPEN_DIRECT_IO (the kernel sends every read and
//!   write to us, bypassing its page cache) plus FOPEN_PARALLEL_DIRECT_WRITES
//!   (FUSE 7.36: the kernel takes the inode lock shared, not exclusive, for
//!   direct writes that do not extend the file), unless
//!   `--no-parallel-dio`. Other opens use the kernel's page cache as usual.
//! - Data buffers for O_DIRECT are 4096-byte aligned: a direct write is
//!   copied from the request buffer into one, other writes are not.
//!
//! Invariants: the node and handle tables live under one mutex, held only
//! to look up or change them, never across I/O; a request holds its own
//! `Arc<File>`, so a RELEASE racing a READ closes the descriptor only after
//! the read finished.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::collections::HashMap;
use std::ffi::{CString, OsStr};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    BsdFileFlags, Config, Errno, FileAttr, FileHandle, FileType, FopenFlags, Generation, INodeNo,
    KernelConfig, LockOwner, MountOption, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate,
    ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request,
    Session, TimeOrNow, WriteFlags,
};

const ROOT: u64 = INodeNo::ROOT.0;
/// Attributes and entries are cached this long by the kernel. The source
/// changes only through us, so any value would do.
const TTL: Duration = Duration::from_secs(1);
/// O_DIRECT buffer alignment (and the largest logical block size we expect).
const ALIGN: usize = 4096;
/// Largest request we accept (fuser's buffer allows 16 MiB; the kernel's
/// default max_pages gives 128 KiB..1 MiB).
const MAX_WRITE: u32 = 1 << 20;

// ------------------------------------------------------- aligned buffers
/// A zeroed heap buffer aligned for O_DIRECT.
struct AlignedBuf {
    ptr: *mut u8,
    layout: Layout,
}

impl AlignedBuf {
    fn new(len: usize) -> AlignedBuf {
        let layout = Layout::from_size_align(len.max(1).next_multiple_of(ALIGN), ALIGN)
            .expect("buffer layout");
        // SAFETY: the layout has a nonzero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        AlignedBuf { ptr, layout }
    }

    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for layout.size() bytes, zero-initialized.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout in `new`.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

// ------------------------------------------------------------ the tables
struct Node {
    /// Relative to the source directory ("" for the root).
    path: PathBuf,
    lookups: u64,
}

/// An open file; `direct` if opened with O_DIRECT.
struct Handle {
    file: Arc<File>,
    direct: bool,
}

#[derive(Default)]
struct Tables {
    nodes: HashMap<u64, Node>,
    by_path: HashMap<PathBuf, u64>,
    next_ino: u64,
    handles: HashMap<u64, Handle>,
    next_fh: u64,
}

struct Passthrough {
    root: PathBuf,
    parallel_dio: bool,
    t: Mutex<Tables>,
}

/// The changes of one SETATTR request (None: unchanged).
struct SetAttr {
    mode: Option<u32>,
    uid: Option<u32>,
    gid: Option<u32>,
    size: Option<u64>,
    atime: Option<TimeOrNow>,
    mtime: Option<TimeOrNow>,
}

fn errno(e: &io::Error) -> Errno {
    Errno::from_i32(e.raw_os_error().unwrap_or(libc::EIO))
}

fn cpath(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn cvt(r: libc::c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn systime(sec: i64, nsec: i64) -> SystemTime {
    if sec >= 0 {
        UNIX_EPOCH + Duration::new(sec as u64, nsec as u32)
    } else {
        UNIX_EPOCH - Duration::from_secs(sec.unsigned_abs()) + Duration::from_nanos(nsec as u64)
    }
}

fn attr_of(ino: u64, m: &std::fs::Metadata) -> FileAttr {
    let ino = INodeNo(ino);
    let kind = match m.mode() & libc::S_IFMT {
        libc::S_IFDIR => FileType::Directory,
        libc::S_IFLNK => FileType::Symlink,
        libc::S_IFIFO => FileType::NamedPipe,
        libc::S_IFCHR => FileType::CharDevice,
        libc::S_IFBLK => FileType::BlockDevice,
        libc::S_IFSOCK => FileType::Socket,
        _ => FileType::RegularFile,
    };
    FileAttr {
        ino,
        size: m.size(),
        blocks: m.blocks(),
        atime: systime(m.atime(), m.atime_nsec()),
        mtime: systime(m.mtime(), m.mtime_nsec()),
        ctime: systime(m.ctime(), m.ctime_nsec()),
        crtime: UNIX_EPOCH,
        kind,
        perm: (m.mode() & 0o7777) as u16,
        nlink: m.nlink() as u32,
        uid: m.uid(),
        gid: m.gid(),
        rdev: m.rdev() as u32,
        blksize: m.blksize() as u32,
        flags: 0,
    }
}

/// The flags for `open(2)` on the source from FUSE open flags: access mode,
/// O_DIRECT, O_APPEND, O_TRUNC, O_SYNC/O_DSYNC; O_CREAT for create.
fn open_options(flags: i32, create_mode: Option<u32>) -> OpenOptions {
    let mut o = OpenOptions::new();
    match flags & libc::O_ACCMODE {
        libc::O_WRONLY => o.write(true),
        libc::O_RDWR => o.read(true).write(true),
        _ => o.read(true),
    };
    let keep = libc::O_DIRECT | libc::O_APPEND | libc::O_SYNC | libc::O_DSYNC | libc::O_NOATIME;
    o.custom_flags(flags & keep);
    if flags & libc::O_TRUNC != 0 {
        o.truncate(true);
    }
    if let Some(mode) = create_mode {
        o.create(true).mode(mode);
        if flags & libc::O_EXCL != 0 {
            o.create_new(true);
        }
    }
    o
}

impl Passthrough {
    fn new(root: PathBuf, parallel_dio: bool) -> Passthrough {
        let mut t = Tables {
            next_ino: ROOT + 1,
            next_fh: 1,
            ..Tables::default()
        };
        t.nodes.insert(
            ROOT,
            Node {
                path: PathBuf::new(),
                lookups: 1,
            },
        );
        t.by_path.insert(PathBuf::new(), ROOT);
        Passthrough {
            root,
            parallel_dio,
            t: Mutex::new(t),
        }
    }

    fn tables(&self) -> MutexGuard<'_, Tables> {
        self.t.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The source path of inode `ino`.
    fn real(&self, ino: u64) -> Result<PathBuf, Errno> {
        match self.tables().nodes.get(&ino) {
            Some(n) => Ok(self.root.join(&n.path)),
            None => Err(Errno::ESTALE),
        }
    }

    /// Relative and source paths of `name` in directory `parent`.
    fn child(&self, parent: u64, name: &OsStr) -> Result<(PathBuf, PathBuf), Errno> {
        if name.as_bytes().contains(&b'/') || name == "." || name == ".." {
            return Err(Errno::EINVAL);
        }
        let rel = match self.tables().nodes.get(&parent) {
            Some(n) => n.path.join(name),
            None => return Err(Errno::ESTALE),
        };
        let real = self.root.join(&rel);
        Ok((rel, real))
    }

    /// One more kernel reference to the inode at `rel` (a new one if
    /// needed); its attributes.
    fn remember(&self, rel: PathBuf, m: &std::fs::Metadata) -> FileAttr {
        let mut t = self.tables();
        let ino = match t.by_path.get(&rel) {
            Some(&ino) => ino,
            None => {
                let ino = t.next_ino;
                t.next_ino += 1;
                t.by_path.insert(rel.clone(), ino);
                t.nodes.insert(
                    ino,
                    Node {
                        path: rel,
                        lookups: 0,
                    },
                );
                ino
            }
        };
        if let Some(n) = t.nodes.get_mut(&ino) {
            n.lookups += 1;
        }
        attr_of(ino, m)
    }

    fn add_handle(&self, f: File, flags: i32) -> FileHandle {
        let mut t = self.tables();
        let fh = t.next_fh;
        t.next_fh += 1;
        let h = Handle {
            file: Arc::new(f),
            direct: flags & libc::O_DIRECT != 0,
        };
        t.handles.insert(fh, h);
        FileHandle(fh)
    }

    fn file(&self, fh: FileHandle) -> Option<(Arc<File>, bool)> {
        let t = self.tables();
        t.handles.get(&fh.0).map(|h| (h.file.clone(), h.direct))
    }

    fn open_reply_flags(&self, flags: i32) -> FopenFlags {
        if flags & libc::O_DIRECT == 0 {
            return FopenFlags::empty();
        }
        if self.parallel_dio {
            FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES
        } else {
            FopenFlags::FOPEN_DIRECT_IO
        }
    }

    /// SETATTR: each change asked for, in the order chmod, chown,
    /// truncate, utimens; the attributes after.
    fn setattr_inner(
        &self,
        ino: u64,
        fh: Option<FileHandle>,
        s: SetAttr,
    ) -> Result<FileAttr, Errno> {
        let SetAttr {
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
        } = s;
        let real = self.real(ino)?;
        let c = cpath(&real).map_err(|e| errno(&e))?;
        if let Some(mode) = mode {
            // SAFETY: c is a valid NUL-terminated path.
            cvt(unsafe { libc::chmod(c.as_ptr(), mode & 0o7777) }).map_err(|e| errno(&e))?;
        }
        if uid.is_some() || gid.is_some() {
            let u = uid.unwrap_or(u32::MAX);
            let g = gid.unwrap_or(u32::MAX);
            // SAFETY: as above; -1 (u32::MAX) leaves an id unchanged.
            cvt(unsafe { libc::lchown(c.as_ptr(), u, g) }).map_err(|e| errno(&e))?;
        }
        if let Some(size) = size {
            let r = match fh.and_then(|fh| self.file(fh)) {
                Some((f, _)) => f.set_len(size),
                None => OpenOptions::new()
                    .write(true)
                    .open(&real)
                    .and_then(|f| f.set_len(size)),
            };
            r.map_err(|e| errno(&e))?;
        }
        if atime.is_some() || mtime.is_some() {
            let ts = |t: Option<TimeOrNow>| match t {
                None => libc::timespec {
                    tv_sec: 0,
                    tv_nsec: libc::UTIME_OMIT,
                },
                Some(TimeOrNow::Now) => libc::timespec {
                    tv_sec: 0,
                    tv_nsec: libc::UTIME_NOW,
                },
                Some(TimeOrNow::SpecificTime(t)) => {
                    let (sec, nsec) = match t.duration_since(UNIX_EPOCH) {
                        Ok(d) => (d.as_secs() as i64, d.subsec_nanos() as i64),
                        Err(e) => {
                            let d = e.duration();
                            if d.subsec_nanos() == 0 {
                                (-(d.as_secs() as i64), 0)
                            } else {
                                (
                                    -(d.as_secs() as i64) - 1,
                                    1_000_000_000 - d.subsec_nanos() as i64,
                                )
                            }
                        }
                    };
                    libc::timespec {
                        tv_sec: sec,
                        tv_nsec: nsec,
                    }
                }
            };
            let times = [ts(atime), ts(mtime)];
            // SAFETY: valid path and a two-element timespec array.
            cvt(unsafe {
                libc::utimensat(
                    libc::AT_FDCWD,
                    c.as_ptr(),
                    times.as_ptr(),
                    libc::AT_SYMLINK_NOFOLLOW,
                )
            })
            .map_err(|e| errno(&e))?;
        }
        let m = std::fs::symlink_metadata(&real).map_err(|e| errno(&e))?;
        Ok(attr_of(ino, &m))
    }
}

impl fuser::Filesystem for Passthrough {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        let _ = config.set_max_write(MAX_WRITE);
        let _ = config.set_max_background(64);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let (rel, real) = match self.child(parent.0, name) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        match std::fs::symlink_metadata(&real) {
            Ok(m) => {
                let attr = self.remember(rel, &m);
                reply.entry(&TTL, &attr, Generation(0));
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        if ino.0 == ROOT {
            return;
        }
        let mut t = self.tables();
        let gone = match t.nodes.get_mut(&ino.0) {
            Some(n) => {
                n.lookups = n.lookups.saturating_sub(nlookup);
                n.lookups == 0
            }
            None => false,
        };
        if gone {
            if let Some(n) = t.nodes.remove(&ino.0) {
                if t.by_path.get(&n.path) == Some(&ino.0) {
                    t.by_path.remove(&n.path);
                }
            }
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let m = match fh.and_then(|fh| self.file(fh)) {
            Some((f, _)) => f.metadata(),
            None => match self.real(ino.0) {
                Ok(p) => std::fs::symlink_metadata(p),
                Err(e) => return reply.error(e),
            },
        };
        match m {
            Ok(m) => reply.attr(&TTL, &attr_of(ino.0, &m)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let s = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
        };
        match self.setattr_inner(ino.0, fh, s) {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let (rel, real) = match self.child(parent.0, name) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let r = cpath(&real).and_then(|c| {
            // SAFETY: c is a valid NUL-terminated path.
            cvt(unsafe { libc::mkdir(c.as_ptr(), (mode & !umask) & 0o7777) })
        });
        match r.and_then(|()| std::fs::symlink_metadata(&real)) {
            Ok(m) => {
                let attr = self.remember(rel, &m);
                reply.entry(&TTL, &attr, Generation(0));
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if flags.bits() != 0 {
            return reply.error(Errno::EINVAL);
        }
        let ((from, real_from), (to, real_to)) =
            match (self.child(parent.0, name), self.child(newparent.0, newname)) {
                (Ok(a), Ok(b)) => (a, b),
                (Err(e), _) | (_, Err(e)) => return reply.error(e),
            };
        // Under the table lock, so no lookup sees the old names of moved
        // inodes after the source has changed.
        let mut t = self.tables();
        if let Err(e) = std::fs::rename(&real_from, &real_to) {
            return reply.error(errno(&e));
        }
        // The replaced target's name is gone; the moved inodes take new ones.
        t.by_path.remove(&to);
        let moved: Vec<(PathBuf, u64)> = t
            .by_path
            .iter()
            .filter(|(p, _)| p.starts_with(&from))
            .map(|(p, &i)| (p.clone(), i))
            .collect();
        for (old, ino) in moved {
            let new = to.join(old.strip_prefix(&from).expect("filtered by prefix"));
            t.by_path.remove(&old);
            t.by_path.insert(new.clone(), ino);
            if let Some(n) = t.nodes.get_mut(&ino) {
                n.path = new;
            }
        }
        reply.ok()
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.remove(parent.0, name, false, reply)
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.remove(parent.0, name, true, reply)
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let real = match self.real(ino.0) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        match open_options(flags.0, None).open(real) {
            Ok(f) => {
                let fh = self.add_handle(f, flags.0);
                reply.opened(fh, self.open_reply_flags(flags.0));
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let (rel, real) = match self.child(parent.0, name) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let f = match open_options(flags, Some((mode & !umask) & 0o7777)).open(&real) {
            Ok(f) => f,
            Err(e) => return reply.error(errno(&e)),
        };
        match f.metadata() {
            Ok(m) => {
                let attr = self.remember(rel, &m);
                let fh = self.add_handle(f, flags);
                let gen = Generation(0);
                reply.created(&TTL, &attr, gen, fh, self.open_reply_flags(flags));
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let Some((f, _)) = self.file(fh) else {
            return reply.error(Errno::EBADF);
        };
        let mut buf = AlignedBuf::new(size as usize);
        let b = &mut buf.as_mut()[..size as usize];
        // A short read is EOF (regular files on tmpfs).
        match f.read_at(b, offset) {
            Ok(n) => reply.data(&b[..n]),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let Some((f, direct)) = self.file(fh) else {
            return reply.error(Errno::EBADF);
        };
        let r = if direct {
            let mut buf = AlignedBuf::new(data.len());
            buf.as_mut()[..data.len()].copy_from_slice(data);
            f.write_at(&buf.as_mut()[..data.len()], offset)
        } else {
            f.write_at(data, offset)
        };
        match r {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let h = self.tables().handles.remove(&fh.0);
        drop(h);
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        let Some((f, _)) = self.file(fh) else {
            return reply.error(Errno::EBADF);
        };
        let r = if datasync {
            f.sync_data()
        } else {
            f.sync_all()
        };
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let real = match self.real(ino.0) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let rd = match std::fs::read_dir(&real) {
            Ok(rd) => rd,
            Err(e) => return reply.error(errno(&e)),
        };
        // Offsets are positions in this listing: ".", "..", then the
        // entries in read_dir order (stable while nothing changes).
        let mut entries: Vec<(u64, FileType, std::ffi::OsString)> = vec![
            (ino.0, FileType::Directory, ".".into()),
            (ROOT, FileType::Directory, "..".into()),
        ];
        for e in rd.flatten() {
            let kind = match e.file_type() {
                Ok(t) if t.is_dir() => FileType::Directory,
                Ok(t) if t.is_symlink() => FileType::Symlink,
                _ => FileType::RegularFile,
            };
            let dino = e.metadata().map(|m| m.ino()).unwrap_or(0);
            entries.push((dino, kind, e.file_name()));
        }
        for (i, (dino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*dino), i as u64 + 1, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let c = match cpath(&self.root) {
            Ok(c) => c,
            Err(e) => return reply.error(errno(&e)),
        };
        // SAFETY: statvfs fills the zeroed struct; c is a valid path.
        let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
        match cvt(unsafe { libc::statvfs(c.as_ptr(), &mut s) }) {
            Ok(()) => reply.statfs(
                s.f_blocks,
                s.f_bfree,
                s.f_bavail,
                s.f_files,
                s.f_ffree,
                s.f_bsize as u32,
                s.f_namemax as u32,
                s.f_frsize as u32,
            ),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let Some((f, _)) = self.file(fh) else {
            return reply.error(Errno::EBADF);
        };
        use std::os::fd::AsRawFd;
        let (offset, length) = (offset as i64, length as i64);
        // SAFETY: a valid descriptor held open by `f`.
        match cvt(unsafe { libc::fallocate(f.as_raw_fd(), mode, offset, length) }) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }
}

impl Passthrough {
    /// UNLINK / RMDIR. The inode lives on for the kernel's references, but
    /// the name may be reused by a new file.
    fn remove(&self, parent: u64, name: &OsStr, dir: bool, reply: ReplyEmpty) {
        let (rel, real) = match self.child(parent, name) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let r = if dir {
            std::fs::remove_dir(real)
        } else {
            std::fs::remove_file(real)
        };
        match r {
            Ok(()) => {
                self.tables().by_path.remove(&rel);
                reply.ok()
            }
            Err(e) => reply.error(errno(&e)),
        }
    }
}

fn usage() -> ! {
    eprintln!("usage: passthrough SRC MNT [--threads N] [--no-parallel-dio]");
    std::process::exit(2);
}

fn main() {
    let mut pos = Vec::new();
    let mut threads = 16usize;
    let mut parallel_dio = true;
    let mut args = std::env::args_os().skip(1);
    while let Some(a) = args.next() {
        match a.to_str() {
            Some("--threads") => {
                threads = args
                    .next()
                    .and_then(|v| v.to_str().and_then(|s| s.parse().ok()))
                    .unwrap_or_else(|| usage());
            }
            Some("--no-parallel-dio") => parallel_dio = false,
            Some(s) if s.starts_with('-') => usage(),
            _ => pos.push(PathBuf::from(a)),
        }
    }
    let [src, mnt] = <[PathBuf; 2]>::try_from(pos).unwrap_or_else(|_| usage());
    let src = match std::fs::canonicalize(&src) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("passthrough: {}: {e}", src.display());
            std::process::exit(1);
        }
    };
    let fs = Passthrough::new(src, parallel_dio);
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName("passthrough".into()),
        MountOption::CUSTOM("subtype=passthrough".into()),
        MountOption::RW,
        MountOption::DefaultPermissions,
    ];
    config.n_threads = Some(threads.max(1));
    config.clone_fd = true;
    let session = match Session::new(fs, &mnt, &config) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("passthrough: mounting on {}: {e}", mnt.display());
            std::process::exit(1);
        }
    };
    if let Err(e) = session.run() {
        eprintln!("passthrough: FUSE session: {e}");
        std::process::exit(1);
    }
}
