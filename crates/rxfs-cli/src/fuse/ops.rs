//! Request handlers, run on the event loop that read the request.
//!
//! Each takes its reply object and answers exactly once. Library
//! errors become errnos through `Error::errno()` (corruption is EUCLEAN,
//! never a generic EIO). The handlers that modify live in [`super::ops_rw`];
//! on a read-only mount anything that would write answers EROFS.
//!
//! Caching: on a read-only mount nothing changes, so the kernel may keep
//! entries and attributes for long, and the node table keeps the inodes
//! the kernel references decoded. On a read-write mount every change
//! still comes through this kernel mount (which updates or invalidates
//! what it cached), but inodes are always taken from the library's cache,
//! which the transaction core keeps current, and the kernel caches
//! entries and attributes for one second only.

use std::sync::Arc;
use std::time::Duration;

use super::wire::{
    FileHandle, FopenFlags, Generation, INodeNo, ReplyAttr, ReplyData, ReplyDirectory,
    ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyLseek, ReplyOpen, ReplyStatfs, ReplyStatx,
    ReplyXattr,
};
use rxfs::format::xflags::{flags_allow, Change};
use rxfs::inode::Inode;
use rxfs::types::{FileBlock, FileType, Ino};
use rxfs::{Error, Filesystem};

use super::attr::{file_attr, fuse_type};
use super::node::NodeTable;
use super::reply::Fail;

/// Largest read served in one request (the kernel asks for at most
/// max_pages pages; this only bounds a hostile request).
const READ_MAX_BYTES: u32 = 16 << 20;
const NAME_MAX: usize = 255;
/// A read buffer larger than this is not kept for the next read.
const READ_BUF_KEEP: usize = 1 << 20;

thread_local! {
    /// Each event loop's read buffer.
    static READ_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

pub struct Core {
    pub fs: Arc<Filesystem>,
    root: Ino,
    pub nodes: NodeTable,
    /// Directory listings the kernel may hold (see [`super::listing`]).
    pub(super) listings: super::listing::Listings,
    /// Entry and attribute cache time (see the module comment).
    pub(super) ttl: Duration,
    /// The inodes whose failures were reported (see [`super::errlog`]).
    pub reported: super::errlog::Reported,
    /// A read-write mount.
    pub rw: bool,
    /// The session's channel for notifications to the kernel, once the
    /// session exists (see [`Core::forget_attrs`]).
    pub notifier: std::sync::OnceLock<super::wire::Notifier>,
    /// The mount point, once mounted: a read-only remount is the kernel's
    /// (see [`Self::atime_due`]).
    pub mountpoint: std::sync::OnceLock<super::mount_table::ReadOnlyWatch>,
    /// The INIT capabilities the kernel granted (`init::*`), set before
    /// the first request.
    pub granted: std::sync::OnceLock<u64>,
}

/// The file handle of an open of a direct-I/O open ([`open_flags`]):
/// its WRITEs are the only ones for which the kernel stamps no times
/// when it keeps a write-back cache (see the `fuse` module comment).
pub const FH_DIRECT: u64 = 1;

/// The file handle an open with `flags` answers: [`FH_DIRECT`] or 0.
pub fn open_handle(flags: i32) -> FileHandle {
    FileHandle(if flags & libc::O_DIRECT != 0 {
        FH_DIRECT
    } else {
        0
    })
}

/// What an open answers: `O_DIRECT` opens bypass the kernel's page cache
/// (`FOPEN_DIRECT_IO`, each read and write a request of its own) and let
/// the kernel send overwrites in parallel, which the library runs under
/// the shared I/O lock (seed 004); other opens keep the page cache.
pub fn open_flags(flags: i32) -> FopenFlags {
    if flags & libc::O_DIRECT != 0 {
        FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES
    } else {
        FopenFlags::FOPEN_KEEP_CACHE
    }
}

impl Core {
    pub fn new(fs: Arc<Filesystem>) -> Core {
        let root = fs.root_ino();
        let rw = !fs.options().read_only;
        Core {
            fs,
            root,
            nodes: NodeTable::default(),
            listings: Default::default(),
            ttl: Duration::from_secs(if rw { 1 } else { 300 }),
            reported: Default::default(),
            rw,
            notifier: std::sync::OnceLock::new(),
            mountpoint: std::sync::OnceLock::new(),
            granted: std::sync::OnceLock::new(),
        }
    }

    /// Whether the kernel granted INIT capability `flag`.
    pub fn granted(&self, flag: u64) -> bool {
        self.granted.get().is_some_and(|g| g & flag != 0)
    }

    /// Make the kernel drop its cached attributes of node `nodeid` after a
    /// change it did not ask for by a SETATTR (the inode flags' ioctl
    /// dropping set-id bits, changing ctime). Attributes only, no page
    /// cache: no inode lock is taken on the kernel's side, so a handler
    /// may send it while the kernel holds the inode locked for its
    /// request.
    pub(super) fn forget_attrs(&self, nodeid: u64) {
        if let Some(n) = self.notifier.get() {
            let _ = n.inval_inode(INodeNo(nodeid), -1, 0);
        }
        // The change moved ctime: a kept listing owes an atime update.
        self.listing_changed(nodeid);
    }

    pub(super) fn ino(&self, nodeid: u64) -> Ino {
        if nodeid == INodeNo::ROOT.0 {
            self.root
        } else {
            Ino(nodeid)
        }
    }

    pub(super) fn errno(&self, what: &str, nodeid: u64, e: &Error) -> i32 {
        if e.is_corrupt() || matches!(e, Error::Io { .. }) {
            let ino = self.ino(nodeid).0;
            let text = e.to_string();
            self.reported
                .report(&text, &format!("{what} (inode {ino}): {text}"));
        }
        e.errno()
    }

    pub(super) fn inode(&self, nodeid: u64) -> rxfs::Result<Arc<Inode>> {
        if self.fs.is_shut_down() {
            return Err(Error::Shutdown);
        }
        let ino = self.ino(nodeid);
        if self.rw {
            return self.fs.iget(ino);
        }
        match self.nodes.get(ino.0) {
            Some(ip) => Ok(ip),
            None => self.fs.iget(ino),
        }
    }

    pub fn lookup(&self, parent: u64, name: &[u8], reply: ReplyEntry) {
        if name.len() > NAME_MAX {
            return reply.fail(libc::ENAMETOOLONG);
        }
        if name == b"." {
            return self.lookup_self(parent, reply);
        }
        let dir = match self.inode(parent) {
            Ok(d) if d.is_dir() => d,
            Ok(_) => return reply.fail(self.errno("lookup", parent, &Error::NotDir)),
            Err(e) => return reply.fail(self.errno("lookup", parent, &e)),
        };
        let r = self.fs.lookup(&dir, name).and_then(|ino| self.fs.iget(ino));
        match r {
            Ok(ip) => {
                self.remember(&ip);
                let attr = self.entry_attr(&ip);
                if ip.is_dir() {
                    self.listing_attrs(ip.ino.0, &ip.core);
                }
                reply.entry(&self.ttl, &attr, Generation(ip.core.gen as u64));
            }
            Err(Error::NotFound) => {
                // A negative entry (node id 0) the kernel may cache: names
                // only appear through this mount, which drops it then. Its
                // attributes are not used; the directory's fill them.
                let mut attr = file_attr(&self.fs, &dir);
                attr.ino = INodeNo(0);
                reply.entry(&self.ttl, &attr, Generation(0));
            }
            Err(e) => reply.fail(self.errno("lookup", parent, &e)),
        }
    }

    /// The attributes of a LOOKUP answer, whose `ino` is also the node id
    /// the kernel will use: the root's is 1 (FUSE_ROOT_ID), not its inode
    /// number, so a lookup that reaches the root (`..` of a top-level
    /// directory while the kernel reconnects a file handle) finds the
    /// kernel's root inode instead of making a second one. (The root's
    /// st_ino reads 1 until its next GETATTR.)
    fn entry_attr(&self, ip: &Inode) -> super::wire::FileAttr {
        let mut attr = file_attr(&self.fs, ip);
        if ip.ino == self.root {
            attr.ino = INodeNo::ROOT;
        }
        attr
    }

    /// LOOKUP of "." in node `nodeid`, of any type: the kernel sends it
    /// (FUSE_EXPORT_SUPPORT) to turn a file handle (node id and
    /// generation) whose inode it no longer caches back into an inode;
    /// `..`, for a directory handle's parent, is an ordinary lookup. A node
    /// id that is no allocated inode, or outside the filesystem, answers
    /// ENOENT, which the kernel turns into ESTALE (as it does when the
    /// generation differs: the inode was freed and reused).
    fn lookup_self(&self, nodeid: u64, reply: ReplyEntry) {
        match self.inode(nodeid) {
            Ok(ip) => {
                self.remember(&ip);
                let attr = self.entry_attr(&ip);
                reply.entry(&self.ttl, &attr, Generation(ip.core.gen as u64));
            }
            Err(Error::NotFound | Error::Invalid(_)) => reply.fail(libc::ENOENT),
            Err(e) => reply.fail(self.errno("lookup", nodeid, &e)),
        }
    }

    /// One more kernel reference to `ip`: in the node table, and (read-
    /// write) as an open reference of the library, which keeps the inode
    /// on the unlinked list if its last link goes while the kernel holds it.
    pub(super) fn remember(&self, ip: &Arc<Inode>) {
        self.nodes.remember(ip);
        if self.rw {
            self.fs.inode_ref(ip.ino);
        }
    }

    /// FORGET: the kernel dropped `n` references; at the last one an
    /// unlinked inode is freed (a transaction).
    pub fn forget(&self, nodeid: u64, n: u64) {
        if nodeid != INodeNo::ROOT.0 {
            if self.nodes.forget(nodeid, n) {
                self.listing_forgotten(nodeid);
            }
            if self.rw {
                if let Err(e) = self.fs.inode_unref(Ino(nodeid), n) {
                    self.errno("forget", nodeid, &e);
                }
            }
        }
    }

    pub(super) fn getattr(&self, nodeid: u64, reply: ReplyAttr) {
        match self.attrs(nodeid) {
            Ok(a) => reply.attr(&self.ttl, &a),
            Err(e) => reply.fail(self.errno("getattr", nodeid, &e)),
        }
    }

    /// STATX: the attributes with the birth time (XFS's crtime).
    pub(super) fn statx(&self, nodeid: u64, reply: ReplyStatx) {
        match self.attrs(nodeid) {
            Ok(a) => reply.statx(&self.ttl, &a),
            Err(e) => reply.fail(self.errno("statx", nodeid, &e)),
        }
    }

    /// The attributes of node `nodeid`. A read-write mount does not decode
    /// the forks for them: a directory that was just changed would
    /// otherwise have its whole extent list decoded at every GETATTR the
    /// kernel sends after a create in it.
    fn attrs(&self, nodeid: u64) -> rxfs::Result<super::wire::FileAttr> {
        if self.rw && !self.fs.is_shut_down() {
            let a = self.fs.iget_attrs(self.ino(nodeid))?;
            if a.is_dir() {
                self.listing_attrs(nodeid, &a.core);
            }
            return Ok(super::attr::file_attr_of(&self.fs, &a));
        }
        self.inode(nodeid).map(|ip| file_attr(&self.fs, &ip))
    }

    pub fn readlink(&self, nodeid: u64, reply: ReplyData) {
        match self.inode(nodeid).and_then(|ip| self.fs.readlink(&ip)) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.fail(self.errno("readlink", nodeid, &e)),
        }
    }

    /// OPEN (see [`open_flags`]). Writable opens need a read-write mount; O_TRUNC arrives as a
    /// separate SETATTR (no FUSE_ATOMIC_O_TRUNC), O_APPEND is the kernel's.
    /// Every successful open is matched by one RELEASE.
    pub fn open(&self, nodeid: u64, flags: i32, reply: ReplyOpen) {
        let writes = flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0;
        if writes && !self.rw {
            return reply.fail(libc::EROFS);
        }
        match self.inode(nodeid) {
            Ok(ip) if ip.is_dir() => reply.fail(libc::EISDIR),
            Ok(ip) if flags & libc::O_ACCMODE != libc::O_RDONLY => {
                // The VFS's may_open rules for the inode flags, which FUSE
                // inodes do not carry: no writer of an immutable file, and
                // only appending ones of an append-only file.
                let change = match flags & libc::O_APPEND {
                    0 => Change::Modify,
                    _ => Change::Append,
                };
                match flags_allow(ip.core.flags, change) {
                    Ok(()) => reply.opened(open_handle(flags), open_flags(flags)),
                    Err(e) => reply.fail(e.errno()),
                }
            }
            Ok(ip) => {
                let mut f = open_flags(flags);
                if flags & libc::O_NOATIME == 0 && self.atime_due(&ip) {
                    f.remove(FopenFlags::FOPEN_KEEP_CACHE);
                }
                reply.opened(open_handle(flags), f)
            }
            Err(e) => reply.fail(self.errno("open", nodeid, &e)),
        }
    }

    /// `FOPEN_KEEP_CACHE` for an open of `ip` unless a read would now
    /// update its atime: then the kernel drops its cached pages (or
    /// directory entries) at the open, so the first read reaches the
    /// daemon, which updates atime ([`Self::accessed`]). Reads the kernel
    /// serves from its cache never reach the daemon (FUSE inodes are
    /// `S_NOATIME` to the kernel): this is how atime still moves as the
    /// mount's mode says at the first read after each open that needs it.
    fn keep_cache(&self, ip: &Inode) -> FopenFlags {
        if self.atime_due(ip) {
            FopenFlags::empty()
        } else {
            FopenFlags::FOPEN_KEEP_CACHE
        }
    }

    /// Whether a read of `ip` now updates its atime: by the library's
    /// rules, and not after the kernel's mount was remounted read-only
    /// (`mount -o remount,ro` changes the kernel's mount only; the mount
    /// table is read only when an update is otherwise due).
    fn atime_due(&self, ip: &Inode) -> bool {
        self.atime_due_core(&ip.core)
    }

    /// [`Self::atime_due`] of an inode core.
    pub(super) fn atime_due_core(&self, core: &rxfs::format::inode::InodeCore) -> bool {
        self.fs.atime_update_due(core) && !self.mountpoint.get().is_some_and(|m| m.read_only())
    }

    /// After a read of `ip`'s data or entries: its atime, by the mount's
    /// rules (see `rxfs::fs::atime`), before the reply (the kernel asks
    /// for fresh attributes after a read). A failed update fails no read,
    /// as in the kernel.
    fn accessed(&self, ip: &Inode) {
        if self.atime_due(ip) {
            if let Err(e) = self.fs.touch_atime(ip.ino) {
                let _ = self.errno("atime update", ip.ino.0, &e);
            }
        }
    }

    /// READ; `flags` are the open file's (`O_NOATIME`: no atime update,
    /// the kernel having checked the opener may ask that).
    pub fn read(&self, nodeid: u64, offset: u64, size: u32, flags: i32, reply: ReplyData) {
        if offset > i64::MAX as u64 {
            return reply.fail(libc::EINVAL);
        }
        let size = size.min(READ_MAX_BYTES) as usize;
        let ip = match self.inode(nodeid) {
            Ok(ip) => ip,
            Err(e) => return reply.fail(self.errno("read", nodeid, &e)),
        };
        // The event loop's own buffer, reused: `read_file` writes every
        // byte it returns (holes and unwritten extents as zeros).
        READ_BUF.with(|b| {
            let mut b = b.borrow_mut();
            if b.len() < size {
                b.resize(size, 0);
            }
            match self.fs.read_file(&ip, offset, &mut b[..size]) {
                Ok(n) => {
                    if flags & libc::O_NOATIME == 0 {
                        self.accessed(&ip);
                    }
                    reply.data(&b[..n])
                }
                Err(e) => reply.fail(self.errno("read", nodeid, &e)),
            }
            if b.len() > READ_BUF_KEEP {
                *b = Vec::new();
            }
        });
    }

    pub fn opendir(&self, nodeid: u64, flags: i32, reply: ReplyOpen) {
        if flags & libc::O_ACCMODE != libc::O_RDONLY {
            return reply.fail(if self.rw { libc::EISDIR } else { libc::EROFS });
        }
        match self.inode(nodeid) {
            Ok(ip) if ip.is_dir() => {
                let keep = self.keep_cache(&ip);
                reply.opened(FileHandle(0), keep | FopenFlags::FOPEN_CACHE_DIR)
            }
            Ok(_) => reply.fail(libc::ENOTDIR),
            Err(e) => reply.fail(self.errno("opendir", nodeid, &e)),
        }
    }

    fn dir(&self, nodeid: u64) -> rxfs::Result<Arc<Inode>> {
        let ip = self.inode(nodeid)?;
        if !ip.is_dir() {
            return Err(Error::NotDir);
        }
        Ok(ip)
    }

    /// The entry's type, from the ftype byte or (without ftype) its inode.
    fn entry_type(&self, e: &rxfs::dir::read::DirEntry) -> rxfs::Result<Option<FileType>> {
        match e.ftype {
            Some(t) => Ok(Some(t)),
            None => Ok(self.fs.iget(e.ino)?.file_type()),
        }
    }

    pub fn readdir(&self, nodeid: u64, offset: u64, mut reply: ReplyDirectory) {
        let dir = match self.dir(nodeid) {
            Ok(d) => d,
            Err(e) => return reply.fail(self.errno("readdir", nodeid, &e)),
        };
        let r = self.fs.readdir(&dir, offset, &mut |e| {
            let name = &e.name[..];
            let t = match self.entry_type(e) {
                Ok(t) => t,
                // No file type in the entry and an inode that cannot be
                // read: listed as DT_UNKNOWN (a later lookup fails).
                Err(err) => {
                    let _ = self.errno("readdir", e.ino.0, &err);
                    return !reply.add_unknown(INodeNo(e.ino.0), e.next_cookie, name);
                }
            };
            !reply.add(INodeNo(e.ino.0), e.next_cookie, fuse_type(t), name)
        });
        match r.err() {
            None => {
                self.accessed(&dir);
                if offset == 0 {
                    self.listing_served(nodeid);
                }
                reply.ok()
            }
            Some(e) => reply.fail(self.errno("readdir", nodeid, &e)),
        }
    }

    pub fn readdirplus(&self, nodeid: u64, offset: u64, mut reply: ReplyDirectoryPlus) {
        let dir = match self.dir(nodeid) {
            Ok(d) => d,
            Err(e) => return reply.fail(self.errno("readdirplus", nodeid, &e)),
        };
        let r = self.fs.readdir(&dir, offset, &mut |e| {
            let dots = e.name == b"." || e.name == b"..";
            let name = &e.name[..];
            match self.fs.iget(e.ino) {
                Ok(ip) => {
                    let attr = file_attr(&self.fs, &ip);
                    let full = reply.add(
                        INodeNo(e.ino.0),
                        e.next_cookie,
                        name,
                        &self.ttl,
                        &attr,
                        Generation(ip.core.gen as u64),
                    );
                    // The kernel takes a reference for every entry it
                    // accepted, except "." and "..".
                    if !full && !dots {
                        self.remember(&ip);
                        if ip.is_dir() {
                            self.listing_attrs(ip.ino.0, &ip.core);
                        }
                    }
                    !full
                }
                Err(err) => {
                    // Listed, as the kernel's XFS lists it; a lookup of the
                    // name (stat, open) then fails with the error.
                    let _ = self.errno("readdirplus", e.ino.0, &err);
                    let dtype = e.ftype.map_or(0, |t| fuse_type(Some(t)).dirent_type());
                    !reply.add_unattributed(INodeNo(e.ino.0), e.next_cookie, name, dtype)
                }
            }
        });
        match r {
            Ok(()) => {
                self.accessed(&dir);
                if offset == 0 {
                    self.listing_served(nodeid);
                }
                reply.ok()
            }
            Err(e) => reply.fail(self.errno("readdirplus", nodeid, &e)),
        }
    }

    /// statfs of the path whose inode is `nodeid` (the kernel sends the
    /// node of the path statfs(2) was called on): XFS answers with the
    /// realtime section's blocks for an inode with the rtinherit or
    /// realtime flag (see `rxfs::fs::statfs`).
    pub fn statfs(&self, nodeid: u64, reply: ReplyStatfs) {
        match self.fs.statfs_of(self.ino(nodeid)) {
            Ok(s) => reply.statfs(
                s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.bsize, s.namelen, s.frsize,
            ),
            Err(e) => reply.fail(self.errno("statfs", nodeid, &e)),
        }
    }

    /// Answer an xattr request with size-probe semantics: size 0 asks for
    /// the length, a too-small buffer is ERANGE.
    fn xattr_reply(value: &[u8], size: u32, reply: ReplyXattr) {
        if size == 0 {
            reply.size(value.len() as u32);
        } else if value.len() > size as usize {
            reply.fail(libc::ERANGE);
        } else {
            reply.data(value);
        }
    }

    pub fn getxattr(&self, nodeid: u64, name: &[u8], size: u32, reply: ReplyXattr) {
        match self
            .inode(nodeid)
            .and_then(|ip| self.fs.getxattr(&ip, name))
        {
            Ok(v) => Self::xattr_reply(&v, size, reply),
            Err(e) => reply.fail(self.errno("getxattr", nodeid, &e)),
        }
    }

    pub fn listxattr(&self, nodeid: u64, size: u32, reply: ReplyXattr) {
        match self.inode(nodeid).and_then(|ip| self.fs.listxattr(&ip)) {
            Ok(names) => {
                let mut buf = Vec::new();
                for n in names {
                    buf.extend_from_slice(&n);
                    buf.push(0);
                }
                Self::xattr_reply(&buf, size, reply)
            }
            Err(e) => reply.fail(self.errno("listxattr", nodeid, &e)),
        }
    }

    /// access(2) by mode bits (the mount also uses default_permissions, so
    /// the kernel usually decides without asking).
    pub fn access(&self, nodeid: u64, mask: i32, uid: u32, gid: u32, reply: ReplyEmpty) {
        let ip = match self.inode(nodeid) {
            Ok(ip) => ip,
            Err(e) => return reply.fail(self.errno("access", nodeid, &e)),
        };
        if mask & libc::W_OK != 0 && !self.rw {
            return reply.fail(libc::EROFS);
        }
        if check_access(ip.core.mode, ip.core.uid, ip.core.gid, mask, uid, gid) {
            reply.ok()
        } else {
            reply.fail(libc::EACCES)
        }
    }

    /// SEEK_DATA / SEEK_HOLE from the extent map (unwritten extents are
    /// holes, as XFS reports them without cached data).
    pub fn lseek(&self, nodeid: u64, offset: i64, whence: i32, reply: ReplyLseek) {
        let ip = match self.inode(nodeid) {
            Ok(ip) => ip,
            Err(e) => return reply.fail(self.errno("lseek", nodeid, &e)),
        };
        match seek_data_hole(&self.fs, &ip, offset, whence) {
            Ok(off) => reply.offset(off),
            Err(errno) => reply.fail(errno),
        }
    }
}

/// POSIX permission check on mode bits for (uid, gid).
pub fn check_access(mode: u16, fuid: u32, fgid: u32, mask: i32, uid: u32, gid: u32) -> bool {
    let want = (mask & (libc::R_OK | libc::W_OK | libc::X_OK)) as u16;
    if uid == 0 {
        // Root may read and search anything; executing needs an x bit
        // somewhere (or a directory).
        let is_dir = mode as u32 & libc::S_IFMT == libc::S_IFDIR;
        return want & libc::X_OK as u16 == 0 || is_dir || mode & 0o111 != 0;
    }
    let bits = if uid == fuid {
        (mode >> 6) & 7
    } else if gid == fgid {
        (mode >> 3) & 7
    } else {
        mode & 7
    };
    bits & want == want
}

pub fn seek_data_hole(fs: &Filesystem, ip: &Inode, offset: i64, whence: i32) -> Result<i64, i32> {
    let size = ip.core.size;
    if offset < 0 {
        return Err(libc::ENXIO);
    }
    let off = offset as u64;
    match whence {
        libc::SEEK_DATA | libc::SEEK_HOLE => {}
        libc::SEEK_SET => return Ok(offset),
        libc::SEEK_END => return Ok(size as i64 + offset),
        _ => return Err(libc::EINVAL),
    }
    if off >= size {
        return Err(libc::ENXIO);
    }
    if ip.file_type() != Some(FileType::Regular) {
        return if whence == libc::SEEK_DATA {
            Ok(offset)
        } else {
            Ok(size as i64)
        };
    }
    let blocklog = fs.geo().blocklog;
    let mut pos = off;
    // Each step moves past one extent or hole: at most 2 * extents + 1.
    let max_steps = 2 * ip.data.extents().len() as u64 + 2;
    for _ in 0..max_steps {
        if pos >= size {
            break;
        }
        let fb = pos >> blocklog;
        let (ext, run) = ip.data.map(FileBlock(fb));
        let data = matches!(ext, Some(e) if !e.unwritten);
        if data == (whence == libc::SEEK_DATA) {
            return Ok(pos.max(off) as i64);
        }
        let end = fb.saturating_add(run.max(1)).saturating_mul(1 << blocklog);
        pos = end;
    }
    if whence == libc::SEEK_HOLE {
        Ok(size as i64)
    } else {
        Err(libc::ENXIO)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_bits() {
        let (r, w, x) = (libc::R_OK, libc::W_OK, libc::X_OK);
        // Owner rw-, group r--, other ---.
        let m = 0o100640;
        assert!(check_access(m, 10, 20, r | w, 10, 99));
        assert!(!check_access(m, 10, 20, x, 10, 99));
        assert!(check_access(m, 10, 20, r, 11, 20));
        assert!(!check_access(m, 10, 20, w, 11, 20));
        assert!(!check_access(m, 10, 20, r, 11, 21));
        assert!(check_access(m, 10, 20, r, 0, 0));
        assert!(!check_access(m, 10, 20, x, 0, 0));
        assert!(check_access(0o40700, 10, 20, x, 0, 0));
        assert!(check_access(0o100001, 10, 20, x, 0, 0));
    }
}
