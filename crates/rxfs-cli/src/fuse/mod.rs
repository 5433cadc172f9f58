//! The FUSE driver (read-only or read-write).
//!
//! - [`ops`]: request handlers (lookup, getattr, read, readdir(plus),
//!   xattrs, statfs, access, lseek) on a shared [`ops::Core`].
//! - [`ops_rw`]: the handlers that modify (create, mknod, mkdir, unlink,
//!   rmdir, write, setattr, fsync), EROFS on a read-only mount.
//! - [`reply`]: answering a reply with an errno.
//! - [`wire`]: our FUSE transport (protocol, mount, session loops).
//! - [`node`]: node ids the kernel references, with lookup counts.
//! - [`attr`]: attributes exactly as the kernel's XFS reports them.
//! - [`cred`]: a request's caller (groups, capabilities) for set-id rules.
//! - [`ioctl`]: the ioctls served (the XFS shutdown).
//! - [`serve`]: mounting, the session, signals, the pidfile, and the
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
//! serving; the reply it held is dropped unanswered, which answers EIO.
//!
//! Node ids: 1 is the root; every other node id is the XFS inode number.
//! Operations the library cannot do answer EOPNOTSUPP on a read-write
//! mount, EROFS on a read-only one. copy_file_range copies in the daemon
//! (reads and writes of the library), so the inode flags of its
//! destination are checked as for a write.
//!
//! Durability and write caching: what each event guarantees.
//!
//! Default mount (no write-back cache, as the kernel's XFS behaves):
//! - write(2): answered once rxfs has the data (in the device's cache)
//!   and the size and mappings are committed to the CIL. Space is taken
//!   while the write is served, so ENOSPC (or EDQUOT, EFBIG) is the
//!   write(2)'s own answer (a short count, then the error).
//! - fsync/fdatasync (FSYNC; FSYNCDIR for a directory): the log is forced
//!   up to the inode's last change and the device cache flushed; the
//!   file's data and metadata (a directory's entries) survive any crash
//!   from then on.
//! - close: no durability of its own (as XFS); errors were the writes'.
//! - sync(2)/syncfs (SYNCFS): every change committed before it is durable.
//! - unmount: everything is written back in place and the log left clean.
//! - a crash (the daemon killed, the machine lost): every fsync'd change
//!   is there after recovery (by rxfs or the kernel); changes no fsync
//!   covered may be lost, each transaction whole or not at all.
//!
//! With `writeback_cache=on` (FUSE_WRITEBACK_CACHE) the kernel keeps dirty
//! pages and sends them as WRITEs at writeback, fsync, close (even with
//! FLUSH answered ENOSYS) and before a truncate, a punch or zero range, a
//! copy_file_range or an O_DIRECT write of the range. fsync, sync and a
//! crash promise the same as above (fsync and sync first write the pages
//! back and wait for them; a kill loses the kernel's dirty pages, as a
//! machine crash loses a kernel filesystem's). What it cannot keep, and
//! why it is off by default:
//! - ENOSPC: a write(2) into the cache succeeds whatever the free space;
//!   the fsync or close that writes it back reports the error. A program
//!   that writes until ENOSPC without fsync or close never stops (the
//!   kernel grows the file in its cache: fstests generic/015 hangs).
//! - `stat`: the kernel owns a cached regular file's size, mtime and
//!   ctime. It shows a size whose bytes may not be stored, ignores times
//!   rxfs sets (link, xattrs, fallocate change ctime on disk), and sends
//!   its own back in SETATTR when it writes the inode back: times on disk
//!   after an unmount may differ from those `stat` showed.
//!
//! A cached WRITE is stored whole or answered with its error: the kernel's
//! write-back takes any count as the whole write, so a short count would
//! let an fsync succeed over bytes never stored (`Core::write` in [`ops_rw`]). A
//! WRITE from the cache carries no caller.
//!
//! Ordering is the kernel's: it never has two WRITEs of one page in
//! flight, waits for every WRITE of a file before a SETATTR of its size,
//! and for every WRITE before the unmount ends the connection; our loops
//! each run a request to the end, and the session returns only when every
//! loop has ended, so no request is still running when the filesystem is
//! unmounted.
//!
//! Set-id bits: the mount asks for FUSE_HANDLE_KILLPRIV_V2, so dropping
//! them on write, truncate and chown is ours. A write(2) that must drop
//! one bypasses the cache (the kernel's rule), so it reaches us with its
//! caller; WRITE and a truncate's SETATTR carry KILL_SUIDGID when the
//! caller lacks CAP_FSETID (`cred::Asker::fsetid`), and we drop what
//! `rxfs::cred` says XFS drops (set-gid also for a writer outside the
//! file's group, which the kernel's FUSE fallback rule missed). A chown
//! drops them in the library's setattr, plus set-gid without group
//! execute for a caller outside the old group (`ops_rw::chown_mode`).
//! The kernel no longer asks for `security.capability` before every
//! write (it removes a capability itself, by REMOVEXATTR).
//!
//! Times: a WRITE whose times the kernel stamped leaves mtime and ctime
//! alone (`Filesystem::write_stamped`): with the cache on that is every
//! WRITE but those through a direct-I/O open ([`ops::FH_DIRECT`], whose
//! write(2)s the kernel stamps nothing for). The kernel sends its times
//! in a SETATTR when it writes the inode back, which may come before the
//! pages; stamping them again at the WRITE left times on disk after an
//! unmount later than those `stat` had shown. Without the cache every
//! WRITE stamps them, the write-back of a shared writable mapping's pages
//! too (it carries WRITE_CACHE, but the kernel keeps no times for it:
//! fstests generic/080). One difference from the kernel's XFS remains with
//! the cache on, FUSE's and not ours to mend: since the kernel owns a
//! cached file's times, `stat` through the mount does not show the
//! times an O_DIRECT write stamped (they are on disk, and shown once the
//! kernel forgets the inode, at the latest at the next mount), and a
//! later write-back of the kernel's older times replaces them
//! (`mount_uring`'s `/dio`). `nowriteback_cache` gives XFS's behaviour
//! exactly, at the cost of a round trip per write(2).
//!
//! A trial of the cache in the fuser era (a worker pool: requests of
//! one file could run out of order, and a RELEASE was answered before
//! the pool trimmed the file's preallocation) once left in CI a file
//! whose bytes on disk differed from the page cache's; that cause was
//! never pinned down, and the seeded random tester (cache on and off,
//! one and several event loops, /dev/fuse and io_uring) and a stress of
//! overlapping writes, truncates, fallocate and copy_file_range from
//! several threads with an unmount right after have not reproduced it
//! on the event loops of [`wire`].

pub mod attr;
pub mod cred;
pub mod errlog;
pub mod ioctl;
pub mod listing;
pub mod mount_table;
pub mod node;
pub mod ops;
pub mod ops_ns;
pub mod ops_rw;
pub mod pidfile;
pub mod reply;
pub mod serve;
pub mod stats_file;
pub mod utab;
pub mod wire;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use wire::abi::{fattr, init, FSYNC_FDATASYNC, WRITE_CACHE, WRITE_KILL_SUIDGID};
use wire::types::system_time_of;
use wire::{
    InitWants, Op, Reply, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus,
    ReplyEmpty, ReplyEntry, ReplyIoctl, ReplyLseek, ReplyOpen, ReplyStatfs, ReplyStatx, ReplyWrite,
    ReplyXattr, Request, TimeOrNow,
};

use ops::Core;
use ops_rw::{Caller, SetAttrArgs};

/// Largest read the kernel may send (also its readahead window), and the
/// largest write (INIT asks for enough max_pages for both).
const MAX_READ_BYTES: u32 = 1 << 20;
const MAX_WRITE_BYTES: u32 = 1 << 20;

pub struct RxFuse {
    core: Arc<Core>,
    /// Ask for FUSE_ALLOW_IDMAP (see [`RxFuse::with_idmap`]).
    idmap: bool,
    /// FUSE over io_uring (see [`wire::uring`]): None when offered.
    uring: Option<bool>,
    /// Ask for FUSE_WRITEBACK_CACHE (see the module comment).
    writeback_cache: bool,
}

impl RxFuse {
    pub fn new(fs: Arc<rxfs::Filesystem>) -> Self {
        RxFuse {
            core: Arc::new(Core::new(fs)),
            idmap: false,
            uring: None,
            writeback_cache: false,
        }
    }

    /// Let the kernel keep dirty pages (FUSE_WRITEBACK_CACHE; the mount's
    /// default, see the module comment).
    pub fn with_writeback_cache(mut self, on: bool) -> Self {
        self.writeback_cache = on;
        self
    }

    /// Serve over io_uring: None when the kernel offers it, Some(true)
    /// required, Some(false) never.
    pub fn with_uring(mut self, uring: Option<bool>) -> Self {
        self.uring = uring;
        self
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
            errln!("rxfs: a request handler panicked (bug); the request got EIO");
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

/// SETATTR's arguments as the handlers take them.
fn setattr_args(a: &wire::abi::SetattrIn) -> SetAttrArgs {
    let has = |bit: u32| a.valid & bit != 0;
    let time = |now: u32, set: u32, sec: u64, nsec: u32| {
        if has(now) {
            Some(TimeOrNow::Now)
        } else if has(set) {
            Some(TimeOrNow::SpecificTime(system_time_of(sec as i64, nsec)))
        } else {
            None
        }
    };
    SetAttrArgs {
        mode: has(fattr::MODE).then_some(a.mode),
        uid: has(fattr::UID).then_some(a.uid),
        gid: has(fattr::GID).then_some(a.gid),
        size: has(fattr::SIZE).then_some(a.size),
        atime: time(fattr::ATIME_NOW, fattr::ATIME, a.atime, a.atimensec),
        mtime: time(fattr::MTIME_NOW, fattr::MTIME, a.mtime, a.mtimensec),
        ctime: has(fattr::CTIME).then(|| system_time_of(a.ctime as i64, a.ctimensec)),
        via_fd: has(fattr::FH),
    }
}

impl wire::Handler for RxFuse {
    fn init(&self) -> InitWants {
        let mut flags = init::DO_READDIRPLUS | init::READDIRPLUS_AUTO;
        flags |= init::PARALLEL_DIROPS | init::CACHE_SYMLINKS;
        // O_DIRECT opens are FOPEN_DIRECT_IO (see `ops::open_flags`):
        // without this the kernel refuses to mmap them (ENODEV), where a
        // local filesystem maps them through the page cache (fstests
        // generic/091 mixes the two).
        flags |= init::DIRECT_IO_ALLOW_MMAP;
        // File handles (name_to_handle_at, NFS export): node id and
        // generation; see `Core::lookup_self`.
        flags |= init::EXPORT_SUPPORT;
        if self.idmap {
            flags |= init::ALLOW_IDMAP;
        }
        if self.writeback_cache {
            flags |= init::WRITEBACK_CACHE;
        }
        // Set-id bits are ours to drop on write, truncate and chown (the
        // kernel says when the caller lacks CAP_FSETID): the kernel then
        // writes through its cache when they must go, and stops asking
        // for security.capability before every write.
        flags |= init::HANDLE_KILLPRIV_V2;
        // The kernel checks permissions with the ACLs it reads through
        // getxattr; DONT_MASK leaves the umask to us (see `creator`).
        flags |= init::POSIX_ACL | init::DONT_MASK;
        InitWants {
            flags,
            max_readahead: MAX_READ_BYTES,
            max_write: MAX_WRITE_BYTES,
            uring: self.uring,
        }
    }

    fn granted(&self, flags: u64) {
        let _ = self.core.granted.set(flags);
    }

    fn dispatch(&self, req: &Request, op: Op<'_>, reply: Reply) {
        wire::trace::request(req, &op);
        let node = req.nodeid;
        match op {
            Op::Lookup { name } => self.run(|c| c.lookup(node, name, ReplyEntry(reply))),
            // The last forget of an unlinked inode frees it (a transaction).
            Op::Forget { nlookup } => self.run(|c| c.forget(node, nlookup)),
            Op::BatchForget(v) => self.run(|c| {
                for f in v {
                    c.forget(f.nodeid, f.nlookup)
                }
            }),
            Op::Getattr => self.run(|c| c.getattr(node, ReplyAttr(reply))),
            Op::Statx => self.run(|c| c.statx(node, ReplyStatx(reply))),
            Op::Readlink => self.run(|c| c.readlink(node, ReplyData(reply))),
            Op::Open(o) => self.run(|c| c.open(node, o.flags as i32, ReplyOpen(reply))),
            Op::Read(r) => {
                self.run(|c| c.read(node, r.offset, r.size, r.flags as i32, ReplyData(reply)))
            }
            // See `listing`: the kernel opens directories itself.
            Op::Opendir(_) if self.core.opens_dirs_itself() => reply.error(libc::ENOSYS),
            Op::Opendir(o) => self.run(|c| c.opendir(node, o.flags as i32, ReplyOpen(reply))),
            Op::Readdir(r) => {
                let reply = ReplyDirectory::new(reply, r.size);
                self.run(|c| c.readdir(node, r.offset, reply))
            }
            Op::Readdirplus(r) => {
                let reply = ReplyDirectoryPlus::new(reply, r.size);
                self.run(|c| c.readdirplus(node, r.offset, reply))
            }
            Op::Releasedir => reply.ok(),
            Op::Statfs => self.run(|c| c.statfs(node, ReplyStatfs(reply))),
            Op::Getxattr { size, name } => {
                self.run(|c| c.getxattr(node, name, size, ReplyXattr(reply)))
            }
            Op::Listxattr { size } => self.run(|c| c.listxattr(node, size, ReplyXattr(reply))),
            Op::Access(a) => {
                let (uid, gid) = (req.uid, req.gid);
                self.run(|c| c.access(node, a.mask as i32, uid, gid, ReplyEmpty(reply)))
            }
            Op::Lseek(l) => {
                self.run(|c| c.lseek(node, l.offset as i64, l.whence as i32, ReplyLseek(reply)))
            }
            Op::Create { arg, name } => {
                let who = creator(req, arg.umask);
                let (mode, flags) = (arg.mode, arg.flags as i32);
                self.run(|c| c.create(node, name, mode, flags, who, ReplyCreate(reply)))
            }
            Op::Tmpfile { arg } => {
                let who = creator(req, arg.umask);
                let (mode, flags) = (arg.mode, arg.flags as i32);
                self.run(|c| c.tmpfile(node, mode, flags, who, ReplyCreate(reply)))
            }
            Op::Mknod { name, arg } => {
                let who = creator(req, arg.umask);
                self.run(|c| c.mknod(node, name, arg.mode, arg.rdev, who, ReplyEntry(reply)))
            }
            Op::Mkdir { name, arg } => {
                let who = creator(req, arg.umask);
                self.run(|c| c.mkdir(node, name, arg.mode, who, ReplyEntry(reply)))
            }
            Op::Unlink { name } => self.run(|c| c.unlink(node, name, ReplyEmpty(reply))),
            Op::Rmdir { name } => self.run(|c| c.rmdir(node, name, ReplyEmpty(reply))),
            // The data is written from the buffer the request was read into.
            Op::Write { arg, data } => {
                // The kernel's loff_t: past i64::MAX is negative, which
                // answers EINVAL.
                let cached = arg.write_flags & WRITE_CACHE != 0;
                let direct = arg.fh & ops::FH_DIRECT != 0;
                // Times: see the module comment. Without the cache the
                // kernel stamps nothing for any WRITE, also not for the
                // write-back of a shared mapping's pages (WRITE_CACHE).
                let stamp = direct || !self.core.granted(init::WRITEBACK_CACHE);
                let fsetid = self
                    .core
                    .granted(init::HANDLE_KILLPRIV_V2)
                    .then_some(arg.write_flags & WRITE_KILL_SUIDGID == 0);
                let who = cred::Asker::of(req).with_fsetid(fsetid);
                let at = arg.offset as i64;
                let from = ops_rw::WriteFrom { stamp, cached };
                self.run(|c| c.write(node, at, data, from, who, ReplyWrite(reply)))
            }
            Op::Setattr(a) => {
                // With HANDLE_KILLPRIV_V2 a truncate says whether its
                // caller holds CAP_FSETID; a chown's flag says nothing
                // (sent for every chown of a non-directory).
                let chown = a.valid & (fattr::UID | fattr::GID) != 0;
                let fsetid = (self.core.granted(init::HANDLE_KILLPRIV_V2) && !chown)
                    .then_some(a.valid & fattr::KILL_SUIDGID == 0);
                let who = cred::Asker::of(req).with_fsetid(fsetid);
                let a = setattr_args(&a);
                self.run(|c| c.setattr(node, a, who, ReplyAttr(reply)))
            }
            Op::Fsync(f) | Op::Fsyncdir(f) => {
                let datasync = f.fsync_flags & FSYNC_FDATASYNC != 0;
                self.run(|c| c.fsync(node, datasync, ReplyEmpty(reply)))
            }
            Op::Syncfs => self.run(|c| c.syncfs(ReplyEmpty(reply))),
            // close(2): the kernel wrote the file's dirty pages back and
            // waited for them (and checked their errors) before sending
            // this; durability is fsync's business, and POSIX locks are the
            // kernel's (no lock requests are served). Nothing is left to
            // do, so the first FLUSH answers ENOSYS: the kernel then stops
            // sending it (`no_flush`), and every close saves a round trip
            // (it still writes the pages back and reports their errors).
            Op::Flush => reply.error(libc::ENOSYS),
            // Open references are the kernel's lookup counts (FORGET), not
            // open handles; a released file gives back its unused
            // preallocation past EOF, after the reply.
            Op::Release(r) => {
                reply.ok();
                if self.core.rw && r.flags as i32 & libc::O_ACCMODE != libc::O_RDONLY {
                    self.run(|c| c.trim_eof(node));
                }
            }
            Op::Symlink { name, target } => {
                let who = caller(req);
                self.run(|c| c.symlink(node, name, target, who, ReplyEntry(reply)))
            }
            Op::Rename {
                name,
                newdir,
                newname,
                flags,
            } => {
                let mut who = caller(req);
                if who.uid == u32::MAX || who.gid == u32::MAX {
                    // An idmapped-capable mount sends no ids with a rename:
                    // the whiteout's owner comes from the caller's status.
                    let c = cred::Asker::of(req).cred();
                    (who.uid, who.gid) = (c.uid, c.gid);
                }
                let f = ops_ns::rename_flags(flags, who);
                self.run(|c| c.rename(node, name, newdir, newname, f, ReplyEmpty(reply)))
            }
            Op::Link { oldnodeid, newname } => {
                self.run(|c| c.link(oldnodeid, node, newname, ReplyEntry(reply)))
            }
            Op::Setxattr { arg, name, value } => {
                let who = cred::Asker::of(req);
                let flags = arg.flags as i32;
                self.run(|c| c.setxattr(node, name, value, flags, who, ReplyEmpty(reply)))
            }
            Op::Removexattr { name } => self.run(|c| c.removexattr(node, name, ReplyEmpty(reply))),
            Op::Fallocate(f) => {
                let (offset, length) = (f.offset as i64, f.length as i64);
                let who = cred::Asker::of(req);
                self.run(|c| {
                    c.fallocate(node, offset, length, f.mode as i32, who, ReplyEmpty(reply))
                })
            }
            Op::Ioctl { arg, data } => {
                let who = cred::Asker::of(req);
                self.run(|c| c.ioctl(node, arg.cmd, data, arg.out_size, who, ReplyIoctl(reply)))
            }
            Op::CopyFileRange(r) => {
                if r.flags != 0 {
                    return reply.error(libc::EINVAL);
                }
                let who = cred::Asker::of(req);
                let range = ops_rw::CopyRange {
                    ino_in: node,
                    off_in: r.off_in,
                    ino_out: r.nodeid_out,
                    off_out: r.off_out,
                    len: r.len,
                };
                self.run(|c| c.copy_file_range(range, who, ReplyWrite(reply)))
            }
            // The session answers these itself.
            Op::Init(_) | Op::Destroy | Op::Interrupt | Op::Unknown | Op::Malformed => {
                reply.error(libc::ENOSYS)
            }
        }
    }
}
