//! The FUSE driver (read-only or read-write).
//!
//! - [`ops`]: request handlers (lookup, getattr, read, readdir(plus),
//!   xattrs, statfs, access, lseek) on a shared [`ops::Core`].
//! - [`ops_rw`]: the handlers that modify (create, mknod, mkdir, unlink,
//!   rmdir, write, setattr, fsync), EROFS on a read-only mount.
//! - [`reply`]: answering fuser's reply objects with an errno.
//! - [`node`]: node ids the kernel references, with lookup counts.
//! - [`attr`]: attributes exactly as the kernel's XFS reports them.
//! - [`cred`]: a request's caller (groups, capabilities) for set-id rules.
//! - [`ioctl`]: the ioctls served (the XFS shutdown).
//! - [`serve`]: mounting, the session loop, signals, the pidfile, and the
//!   unmount of the filesystem when the session ends.
//! - [`stats_file`]: the counters file `rxfs stats` reads.
//!
//! Threads: the session runs `threads` event loops, each reading its own
//! clone of the `/dev/fuse` descriptor (`FUSE_DEV_IOC_CLONE`); the kernel
//! hands every pending request to whichever loop reads first, and that
//! loop runs the handler to the end. There is no queue and no handoff
//! between threads: a write's data is served from the buffer it was read
//! into. A handler that blocks (a log force, the device) holds only its
//! own loop. A handler that panics (a bug) is caught, so its loop goes on
//! serving; the reply it held is dropped unanswered, which fuser answers
//! with EIO.
//!
//! Node ids: 1 is the root; every other node id is the XFS inode number.
//! Operations the library cannot do answer EOPNOTSUPP on a read-write
//! mount, EROFS on a read-only one. copy_file_range copies in the daemon
//! (reads and writes of the library), so the inode flags of its
//! destination are checked as for a write.
//!
//! Write caching: every write(2) reaches rxfs at once (the kernel's page
//! cache holds clean pages only), so a file's size, mtime and blocks are
//! rxfs's at every instant. FUSE_WRITEBACK_CACHE is not asked for: with
//! it the kernel owns size and mtime while pages are dirty, and a killed
//! daemon loses writes the application saw succeed. A trial (an opt-in
//! `-o writeback_cache`, now refused) passed the random tester on this
//! machine but once, in CI, left a file whose bytes on disk differed from
//! what the page cache had shown; until that is understood it stays off.

pub mod attr;
pub mod cred;
pub mod ioctl;
pub mod mount_table;
pub mod node;
pub mod ops;
pub mod ops_ns;
pub mod ops_rw;
pub mod pidfile;
pub mod reply;
pub mod serve;
pub mod stats_file;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use fuser::{
    AccessFlags, BsdFileFlags, CopyFileRangeFlags, Errno, FileHandle, INodeNo, InitFlags,
    IoctlFlags, KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyIoctl, ReplyLseek, ReplyOpen,
    ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};

use ops::Core;
use ops_rw::{Caller, SetAttrArgs};

/// Largest read the kernel may send (also its readahead window), and the
/// largest write (fuser asks for enough max_pages for both).
const MAX_READ_BYTES: u32 = 1 << 20;
const MAX_WRITE_BYTES: u32 = 1 << 20;

pub struct RxFuse {
    core: Arc<Core>,
    /// Ask for FUSE_ALLOW_IDMAP (see [`RxFuse::with_idmap`]).
    idmap: bool,
}

impl RxFuse {
    pub fn new(fs: Arc<rxfs::Filesystem>, log_errors: bool) -> Self {
        RxFuse {
            core: Arc::new(Core::new(fs, log_errors)),
            idmap: false,
        }
    }

    /// Let the kernel make idmapped mounts of this one (FUSE_ALLOW_IDMAP).
    /// Only for mounts every user may use (`allow_other`): the kernel then
    /// sends requests other than creates without the caller's uid and gid,
    /// which the owner-only access check of a private mount needs.
    pub fn with_idmap(mut self, on: bool) -> Self {
        self.idmap = on;
        self
    }

    /// The request handlers' state, for the session to hand its notifier
    /// to once it exists.
    pub fn core(&self) -> Arc<Core> {
        self.core.clone()
    }

    /// Run a handler on this event loop, surviving its panic (see the
    /// module comment).
    fn run(&self, f: impl FnOnce(&Core)) {
        if catch_unwind(AssertUnwindSafe(|| f(&self.core))).is_err() {
            eprintln!("rxfs: a request handler panicked (bug); the request got EIO");
        }
    }
}

fn caller(req: &Request) -> Caller {
    Caller {
        uid: req.uid(),
        gid: req.gid(),
        umask: 0,
    }
}

/// The caller of a create-like request, with its umask (FUSE_POSIX_ACL:
/// the kernel no longer applies it, the library does unless the parent
/// has a default ACL).
fn creator(req: &Request, umask: u32) -> Caller {
    Caller {
        umask: umask & 0o777,
        ..caller(req)
    }
}

impl fuser::Filesystem for RxFuse {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config
            .add_capabilities(InitFlags::FUSE_DO_READDIRPLUS | InitFlags::FUSE_READDIRPLUS_AUTO);
        let _ = config.add_capabilities(InitFlags::FUSE_PARALLEL_DIROPS);
        let _ = config.add_capabilities(InitFlags::FUSE_CACHE_SYMLINKS);
        // O_DIRECT opens are FOPEN_DIRECT_IO (see `ops::open_flags`):
        // without this the kernel refuses to mmap them (ENODEV), where a
        // local filesystem maps them through the page cache (fstests
        // generic/091 mixes the two).
        let _ = config.add_capabilities(InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP);
        // File handles (name_to_handle_at, NFS export): node id and
        // generation; see `Core::lookup_self`.
        let _ = config.add_capabilities(InitFlags::FUSE_EXPORT_SUPPORT);
        if self.idmap {
            let _ = config.add_capabilities(InitFlags::FUSE_ALLOW_IDMAP);
        }
        // The kernel checks permissions with the ACLs it reads through
        // getxattr; DONT_MASK leaves the umask to us (see `creator`).
        let _ = config.add_capabilities(InitFlags::FUSE_POSIX_ACL | InitFlags::FUSE_DONT_MASK);
        let _ = config.set_max_readahead(MAX_READ_BYTES);
        let _ = config.set_max_write(MAX_WRITE_BYTES);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.run(|c| c.lookup(parent.0, name.as_bytes(), reply));
    }

    /// The last forget of an unlinked inode frees it (a transaction).
    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.run(|c| c.forget(ino.0, nlookup));
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        self.run(|c| c.getattr(ino.0, reply));
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        self.run(|c| c.readlink(ino.0, reply));
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        self.run(|c| c.open(ino.0, flags.0, reply));
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        self.run(|c| c.read(ino.0, offset, size, flags.0, reply));
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        self.run(|c| c.opendir(ino.0, flags.0, reply));
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        reply: ReplyDirectory,
    ) {
        self.run(|c| c.readdir(ino.0, offset, reply));
    }

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        reply: ReplyDirectoryPlus,
    ) {
        self.run(|c| c.readdirplus(ino.0, offset, reply));
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        self.run(|c| c.statfs(reply));
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        self.run(|c| c.getxattr(ino.0, name.as_bytes(), size, reply));
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        self.run(|c| c.listxattr(ino.0, size, reply));
    }

    fn access(&self, req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        let (uid, gid) = (req.uid(), req.gid());
        self.run(|c| c.access(ino.0, mask.bits(), uid, gid, reply));
    }

    fn lseek(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        self.run(|c| c.lseek(ino.0, offset, whence, reply));
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let who = creator(req, umask);
        self.run(|c| c.create(parent.0, name.as_bytes(), mode, flags, who, reply));
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let who = creator(req, umask);
        self.run(|c| c.mknod(parent.0, name.as_bytes(), mode, rdev, who, reply));
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let who = creator(req, umask);
        self.run(|c| c.mkdir(parent.0, name.as_bytes(), mode, who, reply));
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.run(|c| c.unlink(parent.0, name.as_bytes(), reply));
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.run(|c| c.rmdir(parent.0, name.as_bytes(), reply));
    }

    /// The data is written from the buffer the request was read into.
    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        // The kernel's loff_t: past i64::MAX is negative, which answers EINVAL.
        let who = cred::Asker::of(req);
        self.run(|c| c.write(ino.0, offset as i64, data, who, reply));
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let a = SetAttrArgs {
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
            ctime,
            via_fd: fh.is_some(),
        };
        let who = cred::Asker::of(req);
        self.run(|c| c.setattr(ino.0, a, who, reply));
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.run(|c| c.fsync(ino.0, datasync, reply));
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.run(|c| c.fsync(ino.0, datasync, reply));
    }

    /// close(2): every write already reached the library; durability is
    /// fsync's business.
    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    /// Open references are the kernel's lookup counts (FORGET), not open
    /// handles; a released file gives back its unused preallocation past
    /// EOF, after the reply.
    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        reply.ok();
        if self.core.rw && flags.0 & libc::O_ACCMODE != libc::O_RDONLY {
            self.run(|c| c.trim_eof(ino.0));
        }
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let who = caller(req);
        let (name, target) = (link_name.as_bytes(), target.as_os_str().as_bytes());
        self.run(|c| c.symlink(parent.0, name, target, who, reply));
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let (name, newname) = (name.as_bytes(), newname.as_bytes());
        let mut who = caller(req);
        if who.uid == u32::MAX || who.gid == u32::MAX {
            // An idmapped-capable mount sends no ids with a rename: the
            // whiteout's owner comes from the caller's status.
            let c = cred::Asker::of(req).cred();
            (who.uid, who.gid) = (c.uid, c.gid);
        }
        let f = ops_ns::rename_flags(flags.bits(), who);
        self.run(|c| c.rename(parent.0, name, newparent.0, newname, f, reply));
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        self.run(|c| c.link(ino.0, newparent.0, newname.as_bytes(), reply));
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
        reply: ReplyEmpty,
    ) {
        if position != 0 {
            // macOS's resource-fork offset; Linux always sends 0.
            return reply.error(Errno::EINVAL);
        }
        let who = cred::Asker::of(req);
        self.run(|c| c.setxattr(ino.0, name.as_bytes(), value, flags, who, reply));
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.run(|c| c.removexattr(ino.0, name.as_bytes(), reply));
    }

    fn fallocate(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let (offset, length) = (offset as i64, length as i64);
        let who = cred::Asker::of(req);
        self.run(|c| c.fallocate(ino.0, offset, length, mode, who, reply));
    }

    fn ioctl(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: IoctlFlags,
        cmd: u32,
        in_data: &[u8],
        out_size: u32,
        reply: ReplyIoctl,
    ) {
        let who = cred::Asker::of(req);
        self.run(|c| c.ioctl(ino.0, cmd, in_data, out_size, who, reply));
    }

    fn copy_file_range(
        &self,
        req: &Request,
        ino_in: INodeNo,
        _fh_in: FileHandle,
        offset_in: u64,
        ino_out: INodeNo,
        _fh_out: FileHandle,
        offset_out: u64,
        len: u64,
        flags: CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        if flags.bits() != 0 {
            return reply.error(Errno::EINVAL);
        }
        let who = cred::Asker::of(req);
        let range = ops_rw::CopyRange {
            ino_in: ino_in.0,
            off_in: offset_in,
            ino_out: ino_out.0,
            off_out: offset_out,
            len,
        };
        self.run(|c| c.copy_file_range(range, who, reply));
    }
}
