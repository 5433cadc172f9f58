//! [`Volume`]: path-level access to an XFS image, the API the Python and
//! C bindings wrap and the simplest way for a Rust program to read and
//! write an image.
//!
//! ```no_run
//! use rxfs::volume::{OpenFlags, Volume, VolumeOptions};
//!
//! # fn main() -> rxfs::Result<()> {
//! // Read a file of a kernel-made image.
//! let vol = Volume::open("disk.img".as_ref(), &VolumeOptions::default())?;
//! let st = vol.stat(b"/etc/hostname", true)?;
//! let mut buf = vec![0; st.size as usize];
//! let f = vol.open_file(b"/etc/hostname", OpenFlags::READ, 0)?;
//! let n = vol.read_at(&f, 0, &mut buf)?;
//! println!("{}", String::from_utf8_lossy(&buf[..n]));
//! vol.close_file(f)?;
//!
//! // Write one: every change is a logged transaction; `close` commits
//! // and unmounts cleanly (xfs_repair -n finds the image clean).
//! let vol = Volume::open("disk.img".as_ref(), &VolumeOptions::writable())?;
//! vol.mkdir(b"/srv", 0o755)?;
//! let f = vol.open_file(b"/srv/motd", OpenFlags::WRITE | OpenFlags::CREATE, 0o644)?;
//! vol.write_at(&f, 0, b"hello\n")?;
//! vol.close_file(f)?;
//! vol.close()?;
//! # Ok(())
//! # }
//! ```
//!
//! Paths are bytes, `/`-separated, from the filesystem's root (a leading
//! `/` is optional); symbolic links inside a path are followed (at most
//! 40, then ELOOP), the last component only where the call says so.
//!
//! The caller acts with full privileges on the image (as `rxfs put` and
//! mkfs do): no permission checks; files and directories it makes are
//! owned by [`VolumeOptions::owner`] (default: the process's effective
//! uid and gid) with the process's umask (read once, at open) applied.
//!
//! Invariants:
//! - an open file ([`FileRef`]) holds an open reference on its inode, so
//!   removing the file's last name while it is open keeps the inode until
//!   [`Volume::close_file`] (as POSIX asks);
//! - after [`Volume::close`] every call fails with EIO ("closed"); a
//!   read-write volume is unmounted once (log forced, metadata written
//!   back, unmount record), also when it is dropped without `close`;
//! - every method takes `&self`: a `Volume` is shared between threads
//!   (the library's per-inode and per-AG locks order the work).

pub mod stat;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::attr::XattrSet;
use crate::bmap::data::SetAttr;
use crate::error::{Error, Result};
use crate::format::inode::Timestamp;
use crate::fs::ops_ns::CreateArgs;
use crate::fs::ops_rename::RenameFlags;
use crate::fs::{Filesystem, MountOptions, Within};
use crate::types::{FileType, Ino};

pub use stat::Stat;

/// Symbolic links followed in one path resolution before ELOOP.
pub const MAX_FOLLOW: u32 = 40;

/// How to open an image.
#[derive(Debug, Clone, Default)]
pub struct VolumeOptions {
    /// Open read-write (a dirty log is replayed on the image first);
    /// read-only opens replay a dirty log in memory and write nothing.
    pub writable: bool,
    /// The realtime device of a filesystem with a realtime section.
    pub rtdev: Option<PathBuf>,
    /// The filesystem starts this many bytes into the file (a multiple of
    /// 512), or is partition N (from 1) of its GPT or DOS table.
    pub offset: u64,
    pub partition: Option<u32>,
    /// Owner of what this volume creates; default the process's
    /// effective uid and gid.
    pub owner: Option<(u32, u32)>,
}

impl VolumeOptions {
    /// Read-write, everything else default.
    pub fn writable() -> VolumeOptions {
        VolumeOptions {
            writable: true,
            ..Default::default()
        }
    }
}

bitflags::bitflags! {
    /// How [`Volume::open_file`] opens a file (the `O_*` flags it knows).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct OpenFlags: u32 {
        const READ = 1;
        const WRITE = 2;
        /// Create the file if it does not exist.
        const CREATE = 4;
        /// With CREATE: fail with EEXIST if it exists.
        const EXCL = 8;
        /// Cut the file to length 0.
        const TRUNCATE = 16;
        /// Do not follow a symbolic link at the end of the path (ELOOP).
        const NOFOLLOW = 32;
    }
}

/// An open file: its inode, held open until [`Volume::close_file`].
#[derive(Debug)]
pub struct FileRef {
    ino: Ino,
    writable: bool,
    released: bool,
}

impl FileRef {
    /// The file's inode number.
    pub fn ino(&self) -> u64 {
        self.ino.0
    }
}

/// One directory entry (without `.` and `..`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: Vec<u8>,
    pub ino: u64,
    /// From the entry itself (XFS v5 directories record it): no inode
    /// read needed.
    pub file_type: Option<FileType>,
}

/// An open image (see the module doc).
pub struct Volume {
    fs: Arc<Filesystem>,
    writable: bool,
    owner: (u32, u32),
    umask: u32,
    closed: AtomicBool,
}

impl std::fmt::Debug for Volume {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Volume")
            .field("writable", &self.writable)
            .field("closed", &self.closed.load(Ordering::Relaxed))
            .finish()
    }
}

fn process_umask() -> u32 {
    // umask(2) can only be read by setting it: set and put back at once.
    // SAFETY: umask has no memory effects.
    let old = unsafe { libc::umask(0o022) };
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    old & 0o777
}

impl Volume {
    /// Open the image (file or block device) at `path`.
    pub fn open(path: &Path, o: &VolumeOptions) -> Result<Volume> {
        if !o.offset.is_multiple_of(512) {
            return Err(Error::Invalid(format!(
                "offset {} is not a multiple of 512 bytes",
                o.offset
            )));
        }
        let within = match (o.offset, o.partition) {
            (0, None) => None,
            (off, None) => Some(Within::Offset(off)),
            (0, Some(n)) => Some(Within::Partition(n)),
            _ => return Err(Error::Invalid("both an offset and a partition".into())),
        };
        let opts = MountOptions {
            read_only: !o.writable,
            within,
            ..Default::default()
        };
        let fs = Filesystem::open_path(path, o.rtdev.as_deref(), opts)?;
        // SAFETY: geteuid/getegid have no preconditions.
        let owner = o
            .owner
            .unwrap_or_else(|| unsafe { (libc::geteuid(), libc::getegid()) });
        Ok(Volume {
            fs,
            writable: o.writable,
            owner,
            umask: process_umask(),
            closed: AtomicBool::new(false),
        })
    }

    /// The filesystem underneath, for what this API does not cover.
    pub fn filesystem(&self) -> &Arc<Filesystem> {
        &self.fs
    }

    /// Whether the volume was opened read-write.
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    fn live(&self) -> Result<&Filesystem> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::io(
                "use",
                0,
                0,
                std::io::Error::other("the volume is closed"),
            ));
        }
        Ok(&self.fs)
    }

    fn writer(&self) -> Result<&Filesystem> {
        let fs = self.live()?;
        if !self.writable {
            return Err(Error::ReadOnly("the volume was opened read-only".into()));
        }
        Ok(fs)
    }

    /// Commit everything and close: a read-write volume is unmounted
    /// cleanly. Idempotent.
    pub fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        if self.writable {
            self.fs.unmount()?;
        }
        Ok(())
    }

    // ---- paths ----

    /// The inode `path` names; the last component's symbolic link is
    /// followed if `follow`.
    pub fn lookup(&self, path: &[u8], follow: bool) -> Result<u64> {
        let fs = self.live()?;
        let mut follows = 0;
        resolve(fs, fs.root_ino(), path, follow, &mut follows).map(|i| i.0)
    }

    fn ino_of(&self, path: &[u8], follow: bool) -> Result<Ino> {
        self.lookup(path, follow).map(Ino)
    }

    /// The parent directory of `path`'s last component, and that name.
    fn parent_of<'p>(&self, path: &'p [u8]) -> Result<(Ino, &'p [u8])> {
        let fs = self.live()?;
        let (dir, name) = split_last(path)?;
        let mut follows = 0;
        let parent = resolve(fs, fs.root_ino(), dir, true, &mut follows)?;
        if !fs.iget(parent)?.is_dir() {
            return Err(Error::NotDir);
        }
        Ok((parent, name))
    }

    // ---- reading ----

    /// `stat` (`follow`) or `lstat` of `path`.
    pub fn stat(&self, path: &[u8], follow: bool) -> Result<Stat> {
        let ino = self.ino_of(path, follow)?;
        self.stat_ino(ino.0)
    }

    /// The stat of inode `ino`.
    pub fn stat_ino(&self, ino: u64) -> Result<Stat> {
        let fs = self.live()?;
        let ip = fs.iget(Ino(ino))?;
        Ok(Stat::of(fs, &ip))
    }

    /// The entries of the directory `path` (symbolic links followed), in
    /// directory order, without `.` and `..`.
    pub fn read_dir(&self, path: &[u8]) -> Result<Vec<DirEntry>> {
        let ino = self.ino_of(path, true)?;
        self.read_dir_ino(ino.0)
    }

    /// [`Volume::read_dir`] of the directory inode `ino`.
    pub fn read_dir_ino(&self, ino: u64) -> Result<Vec<DirEntry>> {
        let fs = self.live()?;
        let dp = fs.iget(Ino(ino))?;
        if !dp.is_dir() {
            return Err(Error::NotDir);
        }
        let mut out = Vec::new();
        fs.readdir(&dp, 0, &mut |e| {
            if e.name != b"." && e.name != b".." {
                out.push(DirEntry {
                    name: e.name.clone(),
                    ino: e.ino.0,
                    file_type: e.ftype,
                });
            }
            true
        })?;
        Ok(out)
    }

    /// The target of the symbolic link `path`.
    pub fn readlink(&self, path: &[u8]) -> Result<Vec<u8>> {
        let fs = self.live()?;
        let ip = fs.iget(self.ino_of(path, false)?)?;
        if ip.file_type() != Some(FileType::Symlink) {
            return Err(Error::NotSymlink);
        }
        fs.readlink(&ip)
    }

    /// The names of `path`'s extended attributes, with their namespace
    /// prefixes (`user.`, `trusted.`, `security.`, `system.posix_acl_*`).
    pub fn listxattr(&self, path: &[u8], follow: bool) -> Result<Vec<Vec<u8>>> {
        let fs = self.live()?;
        let ip = fs.iget(self.ino_of(path, follow)?)?;
        fs.listxattr(&ip)
    }

    /// The value of the extended attribute `name` of `path` (ENODATA if
    /// it has none).
    pub fn getxattr(&self, path: &[u8], name: &[u8], follow: bool) -> Result<Vec<u8>> {
        let fs = self.live()?;
        let ip = fs.iget(self.ino_of(path, follow)?)?;
        fs.getxattr(&ip, name)
    }

    // ---- files ----

    /// Open (or with CREATE make) the file `path`; `mode` is the new
    /// file's permission bits (the umask is applied).
    pub fn open_file(&self, path: &[u8], flags: OpenFlags, mode: u32) -> Result<FileRef> {
        let fs = self.live()?;
        let write = flags.contains(OpenFlags::WRITE) || flags.contains(OpenFlags::TRUNCATE);
        if write || flags.contains(OpenFlags::CREATE) {
            self.writer()?;
        }
        let follow = !flags.contains(OpenFlags::NOFOLLOW);
        let ino = if flags.contains(OpenFlags::CREATE) {
            let (parent, name) = self.parent_of(path)?;
            let dp = fs.iget(parent)?;
            match fs.lookup(&dp, name) {
                Ok(_) if flags.contains(OpenFlags::EXCL) => return Err(Error::Exists),
                Ok(_) => self.ino_of(path, follow)?,
                Err(Error::NotFound) => {
                    let args = self.create_args(libc::S_IFREG | (mode & 0o7777), 0);
                    fs.create(parent, name, &args)?.ino
                }
                Err(e) => return Err(e),
            }
        } else {
            self.ino_of(path, follow)?
        };
        let ip = fs.iget(ino)?;
        match ip.file_type() {
            Some(FileType::Symlink) => return Err(Error::Loop),
            Some(FileType::Directory) if write => return Err(Error::IsDir),
            _ => {}
        }
        if flags.contains(OpenFlags::TRUNCATE) && ip.core.size != 0 {
            fs.setattr(
                ino,
                &SetAttr {
                    size: Some(0),
                    ..Default::default()
                },
            )?;
        }
        fs.inode_ref(ino);
        Ok(FileRef {
            ino,
            writable: write,
            released: false,
        })
    }

    /// Read up to `buf.len()` bytes at `off`; 0 at end of file.
    pub fn read_at(&self, f: &FileRef, off: u64, buf: &mut [u8]) -> Result<usize> {
        let fs = self.live()?;
        let ip = fs.iget(f.ino)?;
        if ip.is_dir() {
            return Err(Error::IsDir);
        }
        fs.read_file(&ip, off, buf)
    }

    /// Write all of `data` at `off` (the file grows as needed); returns
    /// `data.len()`, or the error that stopped it (ENOSPC...).
    pub fn write_at(&self, f: &FileRef, off: u64, data: &[u8]) -> Result<usize> {
        let fs = self.writer()?;
        if !f.writable {
            return Err(Error::Invalid(
                "the file was opened for reading only".into(),
            ));
        }
        let mut done = 0;
        while done < data.len() {
            let w = fs.write(f.ino, off + done as u64, &data[done..])?;
            if w == 0 {
                return Err(Error::NoSpace);
            }
            done += w;
        }
        Ok(done)
    }

    /// Make the file's data and metadata durable (fsync(2)).
    pub fn fsync_file(&self, f: &FileRef) -> Result<()> {
        let fs = self.live()?;
        if self.writable {
            fs.fsync(f.ino, false)?;
        }
        Ok(())
    }

    /// The stat of an open file.
    pub fn fstat(&self, f: &FileRef) -> Result<Stat> {
        self.stat_ino(f.ino.0)
    }

    /// Set an open file's length.
    pub fn ftruncate(&self, f: &FileRef, len: u64) -> Result<()> {
        let fs = self.writer()?;
        fs.setattr(
            f.ino,
            &SetAttr {
                size: Some(len),
                ..Default::default()
            },
        )?;
        Ok(())
    }

    /// Close an open file: unused preallocation past its end is given
    /// back, and its open reference dropped (an unlinked file is freed).
    pub fn close_file(&self, mut f: FileRef) -> Result<()> {
        f.released = true;
        let fs = self.live()?;
        let trimmed = if f.writable {
            fs.trim_eof(f.ino)
        } else {
            Ok(())
        };
        let unref = fs.inode_unref(f.ino, 1);
        trimmed.and(unref)
    }

    // ---- changes ----

    fn create_args(&self, mode: u32, rdev: u32) -> CreateArgs {
        CreateArgs {
            mode,
            uid: self.owner.0,
            gid: self.owner.1,
            rdev,
            umask: self.umask,
        }
    }

    /// Make the directory `path` (the umask applies to `mode`).
    pub fn mkdir(&self, path: &[u8], mode: u32) -> Result<u64> {
        let fs = self.writer()?;
        let (parent, name) = self.parent_of(path)?;
        let args = self.create_args(libc::S_IFDIR | (mode & 0o7777), 0);
        Ok(fs.mkdir(parent, name, &args)?.ino.0)
    }

    /// Make a device node, FIFO or socket (`mode` holds the type bits).
    pub fn mknod(&self, path: &[u8], mode: u32, major: u32, minor: u32) -> Result<u64> {
        let fs = self.writer()?;
        match FileType::from_mode(mode as u16) {
            Some(FileType::CharDev | FileType::BlockDev | FileType::Fifo | FileType::Socket)
            | Some(FileType::Regular) => {}
            _ => {
                return Err(Error::Invalid(
                    "mknod makes files, devices, FIFOs, sockets".into(),
                ))
            }
        }
        let (parent, name) = self.parent_of(path)?;
        let rdev = libc::makedev(major, minor) as u32;
        Ok(fs
            .create(parent, name, &self.create_args(mode, rdev))?
            .ino
            .0)
    }

    /// Remove the name `path` (not a directory: EISDIR).
    pub fn unlink(&self, path: &[u8]) -> Result<()> {
        let fs = self.writer()?;
        let (parent, name) = self.parent_of(path)?;
        fs.unlink(parent, name)
    }

    /// Remove the empty directory `path`.
    pub fn rmdir(&self, path: &[u8]) -> Result<()> {
        let fs = self.writer()?;
        let (parent, name) = self.parent_of(path)?;
        fs.rmdir(parent, name)
    }

    /// Rename `from` to `to`, replacing `to` as rename(2) does.
    pub fn rename(&self, from: &[u8], to: &[u8]) -> Result<()> {
        let fs = self.writer()?;
        let (sp, sname) = self.parent_of(from)?;
        let (dp, dname) = self.parent_of(to)?;
        fs.rename(sp, sname, dp, dname, RenameFlags::default())
    }

    /// A new name `new` for the existing `existing` (not followed).
    pub fn link(&self, existing: &[u8], new: &[u8]) -> Result<()> {
        let fs = self.writer()?;
        let ino = self.ino_of(existing, false)?;
        let (parent, name) = self.parent_of(new)?;
        fs.link(ino, parent, name).map(|_| ())
    }

    /// A symbolic link `path` pointing at `target`.
    pub fn symlink(&self, target: &[u8], path: &[u8]) -> Result<u64> {
        let fs = self.writer()?;
        let (parent, name) = self.parent_of(path)?;
        let args = self.create_args(libc::S_IFLNK | 0o777, 0);
        Ok(fs.symlink(parent, name, target, &args)?.ino.0)
    }

    fn setattr(&self, path: &[u8], follow: bool, a: &SetAttr) -> Result<()> {
        let fs = self.writer()?;
        let ino = self.ino_of(path, follow)?;
        fs.setattr(ino, a).map(|_| ())
    }

    /// Set the permission bits (set-id and sticky included).
    pub fn chmod(&self, path: &[u8], mode: u32, follow: bool) -> Result<()> {
        if !follow && self.stat(path, false)?.file_type() == Some(FileType::Symlink) {
            // Linux has no mode on symbolic links (lchmod: EOPNOTSUPP).
            return Err(Error::NotSupported(
                "changing the mode of a symbolic link".into(),
            ));
        }
        self.setattr(
            path,
            follow,
            &SetAttr {
                mode: Some(mode & 0o7777),
                ..Default::default()
            },
        )
    }

    /// Set the owner; `None` leaves that id.
    pub fn chown(
        &self,
        path: &[u8],
        uid: Option<u32>,
        gid: Option<u32>,
        follow: bool,
    ) -> Result<()> {
        self.setattr(
            path,
            follow,
            &SetAttr {
                uid,
                gid,
                ..Default::default()
            },
        )
    }

    /// Set access and modification times; `None` leaves that time.
    pub fn utime(
        &self,
        path: &[u8],
        atime: Option<Timestamp>,
        mtime: Option<Timestamp>,
        follow: bool,
    ) -> Result<()> {
        self.setattr(
            path,
            follow,
            &SetAttr {
                atime,
                mtime,
                ..Default::default()
            },
        )
    }

    /// Set the length of the file `path` (symbolic links followed).
    pub fn truncate(&self, path: &[u8], len: u64) -> Result<()> {
        let st = self.stat(path, true)?;
        if st.file_type() == Some(FileType::Directory) {
            return Err(Error::IsDir);
        }
        self.setattr(
            path,
            true,
            &SetAttr {
                size: Some(len),
                ..Default::default()
            },
        )
    }

    /// Set (`how`: create, replace or either) an extended attribute.
    pub fn setxattr(
        &self,
        path: &[u8],
        name: &[u8],
        value: &[u8],
        how: XattrSet,
        follow: bool,
    ) -> Result<()> {
        let fs = self.writer()?;
        fs.setxattr(self.ino_of(path, follow)?, name, value, how)
    }

    /// Remove an extended attribute (ENODATA if absent).
    pub fn removexattr(&self, path: &[u8], name: &[u8], follow: bool) -> Result<()> {
        let fs = self.writer()?;
        fs.removexattr(self.ino_of(path, follow)?, name)
    }

    /// Make every change so far durable (one log force).
    pub fn sync(&self) -> Result<()> {
        let fs = self.live()?;
        if self.writable {
            fs.sync()?;
        }
        Ok(())
    }

    /// statfs of the filesystem.
    pub fn statfs(&self) -> Result<crate::fs::statfs::StatFs> {
        self.live()?.statfs()
    }
}

impl Drop for Volume {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            tracing::error!("closing the volume: {e}");
        }
    }
}

impl Drop for FileRef {
    fn drop(&mut self) {
        if !self.released {
            // Dropped without close_file: the reference leaks until the
            // volume closes (an unlinked inode then stays on the unlinked
            // list, which the next mount's recovery frees, as the kernel
            // does after a crash).
            tracing::warn!("open file of inode {} dropped without close", self.ino.0);
        }
    }
}

/// `path` without its last component, and that component (ENOENT for an
/// empty path, EINVAL for the root, `.` or `..` as last component).
fn split_last(path: &[u8]) -> Result<(&[u8], &[u8])> {
    let trimmed = {
        let mut p = path;
        while p.len() > 1 && p.ends_with(b"/") {
            p = &p[..p.len() - 1];
        }
        p
    };
    if trimmed.is_empty() {
        return Err(Error::NotFound);
    }
    let (dir, name) = match trimmed.iter().rposition(|&c| c == b'/') {
        Some(i) => (&trimmed[..i], &trimmed[i + 1..]),
        None => (&b""[..], trimmed),
    };
    if name.is_empty() || name == b"." || name == b".." {
        return Err(Error::Invalid(
            "a path whose last component is a name".into(),
        ));
    }
    if name.len() > 255 {
        return Err(Error::NameTooLong);
    }
    Ok((dir, name))
}

/// Walk `path` from `start` (the root for an absolute path).
fn resolve(
    fs: &Filesystem,
    start: Ino,
    path: &[u8],
    follow: bool,
    follows: &mut u32,
) -> Result<Ino> {
    let mut cur = if path.first() == Some(&b'/') {
        fs.root_ino()
    } else {
        start
    };
    let comps: Vec<&[u8]> = path
        .split(|&c| c == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
        .collect();
    for (i, name) in comps.iter().enumerate() {
        let dir = fs.iget(cur)?;
        if !dir.is_dir() {
            return Err(Error::NotDir);
        }
        if name.len() > 255 {
            return Err(Error::NameTooLong);
        }
        let next = fs.lookup(&dir, name)?;
        let last = i + 1 == comps.len();
        if last && !follow {
            return Ok(next);
        }
        let ip = fs.iget(next)?;
        if ip.file_type() == Some(FileType::Symlink) {
            *follows += 1;
            if *follows > MAX_FOLLOW {
                return Err(Error::Loop);
            }
            let target = fs.readlink(&ip)?;
            cur = resolve(fs, cur, &target, true, follows)?;
        } else {
            cur = next;
        }
    }
    // A trailing slash names a directory.
    if path.len() > 1 && path.ends_with(b"/") && !fs.iget(cur)?.is_dir() {
        return Err(Error::NotDir);
    }
    Ok(cur)
}
