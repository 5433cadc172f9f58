//! The read-only FUSE driver.
//!
//! - [`ops`]: request handlers (lookup, getattr, read, readdir(plus),
//!   xattrs, statfs, access, lseek) on a shared [`ops::Core`].
//! - [`pool`]: the bounded worker pool the session thread hands requests
//!   to (fuser's loop itself is single-threaded).
//! - [`node`]: node ids the kernel references, with lookup counts.
//! - [`attr`]: attributes exactly as the kernel's XFS reports them.
//! - [`serve`]: mounting, the session loop, signals, the pidfile.
//!
//! Node ids: 1 is the root; every other node id is the XFS inode number.
//! Everything that would modify the filesystem answers EROFS.

pub mod attr;
pub mod node;
pub mod ops;
pub mod pidfile;
pub mod pool;
pub mod serve;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use fuser::consts::{
    FUSE_CACHE_SYMLINKS, FUSE_DO_READDIRPLUS, FUSE_PARALLEL_DIROPS, FUSE_READDIRPLUS_AUTO,
};
use fuser::{
    KernelConfig, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus,
    ReplyEmpty, ReplyEntry, ReplyLseek, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request,
    TimeOrNow,
};

use ops::Core;
use pool::Pool;

/// Queue slots per worker thread.
const QUEUE_PER_THREAD: usize = 4;
/// Largest read the kernel may send (also its readahead window).
const MAX_READ_BYTES: u32 = 1 << 20;

pub struct RxFuse {
    core: Arc<Core>,
    pool: Pool,
}

impl RxFuse {
    pub fn new(
        fs: Arc<rxfs::Filesystem>,
        threads: usize,
        log_errors: bool,
    ) -> std::io::Result<Self> {
        Ok(RxFuse {
            core: Arc::new(Core::new(fs, log_errors)),
            pool: Pool::new(threads, threads * QUEUE_PER_THREAD)?,
        })
    }

    /// Run `f` on the pool with the shared core.
    fn spawn(&self, f: impl FnOnce(&Core) + Send + 'static) {
        let core = self.core.clone();
        self.pool.execute(move || f(&core));
    }
}

fn bytes(s: &OsStr) -> Vec<u8> {
    s.as_bytes().to_vec()
}

/// `fuser::Filesystem` methods that only answer: each listed method (its
/// parameters after the request, and its reply type) becomes
/// `fn name(&mut self, _req, params..., reply) { reply.answer(args) }`.
macro_rules! answer {
    ($(fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $reply:ty: $answer:ident($($val:expr)?);)*) => {
        $(
            fn $name(&mut self, _req: &Request<'_>, $($arg: $ty,)* reply: $reply) {
                reply.$answer($($val)?);
            }
        )*
    };
}

impl fuser::Filesystem for RxFuse {
    fn init(&mut self, _req: &Request<'_>, config: &mut KernelConfig) -> Result<(), libc::c_int> {
        let _ = config.add_capabilities(FUSE_DO_READDIRPLUS | FUSE_READDIRPLUS_AUTO);
        let _ = config.add_capabilities(FUSE_PARALLEL_DIROPS);
        let _ = config.add_capabilities(FUSE_CACHE_SYMLINKS);
        let _ = config.set_max_readahead(MAX_READ_BYTES);
        let _ = config.set_max_write(MAX_READ_BYTES);
        Ok(())
    }

    fn lookup(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        let name = bytes(name);
        self.spawn(move |c| c.lookup(parent, &name, reply));
    }

    fn forget(&mut self, _req: &Request<'_>, ino: u64, nlookup: u64) {
        self.core.forget(ino, nlookup);
    }

    fn batch_forget(&mut self, _req: &Request<'_>, nodes: &[fuser::fuse_forget_one]) {
        for n in nodes {
            self.core.forget(n.nodeid, n.nlookup);
        }
    }

    fn getattr(&mut self, _req: &Request<'_>, ino: u64, _fh: Option<u64>, reply: ReplyAttr) {
        self.spawn(move |c| c.getattr(ino, reply));
    }

    fn readlink(&mut self, _req: &Request<'_>, ino: u64, reply: ReplyData) {
        self.spawn(move |c| c.readlink(ino, reply));
    }

    fn open(&mut self, _req: &Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        self.spawn(move |c| c.open(ino, flags, reply));
    }

    fn read(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        size: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyData,
    ) {
        self.spawn(move |c| c.read(ino, offset, size, reply));
    }

    fn opendir(&mut self, _req: &Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        self.spawn(move |c| c.opendir(ino, flags, reply));
    }

    fn readdir(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        reply: ReplyDirectory,
    ) {
        self.spawn(move |c| c.readdir(ino, offset, reply));
    }

    fn readdirplus(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        reply: ReplyDirectoryPlus,
    ) {
        self.spawn(move |c| c.readdirplus(ino, offset, reply));
    }

    fn statfs(&mut self, _req: &Request<'_>, _ino: u64, reply: ReplyStatfs) {
        self.spawn(move |c| c.statfs(reply));
    }

    fn getxattr(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        name: &OsStr,
        size: u32,
        reply: ReplyXattr,
    ) {
        let name = bytes(name);
        self.spawn(move |c| c.getxattr(ino, &name, size, reply));
    }

    fn listxattr(&mut self, _req: &Request<'_>, ino: u64, size: u32, reply: ReplyXattr) {
        self.spawn(move |c| c.listxattr(ino, size, reply));
    }

    fn access(&mut self, req: &Request<'_>, ino: u64, mask: i32, reply: ReplyEmpty) {
        let (uid, gid) = (req.uid(), req.gid());
        self.spawn(move |c| c.access(ino, mask, uid, gid, reply));
    }

    fn lseek(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        self.spawn(move |c| c.lseek(ino, offset, whence, reply));
    }

    // Everything below would modify the filesystem: EROFS. fsync has
    // nothing to write back.
    answer! {
        fn setattr(
            _ino: u64, _mode: Option<u32>, _uid: Option<u32>, _gid: Option<u32>,
            _size: Option<u64>, _atime: Option<TimeOrNow>, _mtime: Option<TimeOrNow>,
            _ctime: Option<SystemTime>, _fh: Option<u64>, _crtime: Option<SystemTime>,
            _chgtime: Option<SystemTime>, _bkuptime: Option<SystemTime>, _flags: Option<u32>,
        ) -> ReplyAttr: error(libc::EROFS);
        fn mknod(_parent: u64, _name: &OsStr, _mode: u32, _umask: u32, _rdev: u32)
            -> ReplyEntry: error(libc::EROFS);
        fn mkdir(_parent: u64, _name: &OsStr, _mode: u32, _umask: u32)
            -> ReplyEntry: error(libc::EROFS);
        fn unlink(_parent: u64, _name: &OsStr) -> ReplyEmpty: error(libc::EROFS);
        fn rmdir(_parent: u64, _name: &OsStr) -> ReplyEmpty: error(libc::EROFS);
        fn symlink(_parent: u64, _link_name: &OsStr, _target: &Path)
            -> ReplyEntry: error(libc::EROFS);
        fn rename(
            _parent: u64, _name: &OsStr, _newparent: u64, _newname: &OsStr, _flags: u32,
        ) -> ReplyEmpty: error(libc::EROFS);
        fn link(_ino: u64, _newparent: u64, _newname: &OsStr) -> ReplyEntry: error(libc::EROFS);
        fn write(
            _ino: u64, _fh: u64, _offset: i64, _data: &[u8], _write_flags: u32, _flags: i32,
            _lock_owner: Option<u64>,
        ) -> ReplyWrite: error(libc::EROFS);
        fn setxattr(
            _ino: u64, _name: &OsStr, _value: &[u8], _flags: i32, _position: u32,
        ) -> ReplyEmpty: error(libc::EROFS);
        fn removexattr(_ino: u64, _name: &OsStr) -> ReplyEmpty: error(libc::EROFS);
        fn create(_parent: u64, _name: &OsStr, _mode: u32, _umask: u32, _flags: i32)
            -> ReplyCreate: error(libc::EROFS);
        fn fallocate(_ino: u64, _fh: u64, _offset: i64, _length: i64, _mode: i32)
            -> ReplyEmpty: error(libc::EROFS);
        fn copy_file_range(
            _ino_in: u64, _fh_in: u64, _offset_in: i64, _ino_out: u64, _fh_out: u64,
            _offset_out: i64, _len: u64, _flags: u32,
        ) -> ReplyWrite: error(libc::EROFS);
        fn fsync(_ino: u64, _fh: u64, _datasync: bool) -> ReplyEmpty: ok();
        fn fsyncdir(_ino: u64, _fh: u64, _datasync: bool) -> ReplyEmpty: ok();
    }
}
