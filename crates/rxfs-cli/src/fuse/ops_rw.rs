//! Request handlers that modify the filesystem (read-write mounts).
//!
//! Every handler maps its FUSE arguments onto one library call
//! (`Filesystem::{create, mkdir, unlink, rmdir, write, setattr, fsync}`),
//! which takes its own inode locks and runs one transaction; errors become
//! errnos through `Error::errno()`. On a read-only mount they answer EROFS.
//!
//! Division of labour with the kernel (the mount uses
//! `default_permissions`): the kernel checks permissions, applies the umask
//! (we never ask for FUSE_DONT_MASK, so modes arrive masked; masking again
//! is harmless), clears set-id bits on write and chown (it sends the new
//! mode in a SETATTR), turns `O_TRUNC` into a SETATTR of size 0 and handles
//! `O_APPEND` (it refreshes the size before an appending write). We choose
//! owners (the caller's fsuid/fsgid, or the parent's group below a set-gid
//! directory, as `inode_init_owner` does) and take "now" from the system
//! clock for UTIME_NOW.
//!
//! Open files: every inode the kernel holds (its lookup count, see
//! [`super::node`]) is an open reference of the library, so the last unlink
//! of a file still open puts it on the AGI unlinked list; the kernel's
//! last FORGET frees it (or unmount does, or recovery after a crash).

use std::time::SystemTime;

use super::wire::{ReplyCreate, ReplyEmpty, ReplyEntry, ReplyWrite, TimeOrNow};
use rxfs::bmap::data::SetAttr;
use rxfs::format::inode::{InodeCore, Timestamp};
use rxfs::fs::ops_ns::CreateArgs;
use rxfs::inode::Inode;
use rxfs::types::Ino;
use rxfs::Error;

use rxfs::format::inode::{DIFLAG_IMMUTABLE, DIFLAG_SYNC};
use rxfs::format::xflags::{flags_allow, Change};

use super::attr::file_attr;
use super::cred::Asker;
use super::ops::Core;
use super::reply::Fail;

const NAME_MAX: usize = 255;

/// A `SystemTime` (an instant, before 1970 too) as an XFS timestamp:
/// seconds rounded down, nanoseconds counted up from them, the pair the
/// kernel sent.
pub fn timestamp(t: SystemTime) -> Timestamp {
    let (sec, nsec) = super::wire::types::time_pair(t);
    Timestamp { sec, nsec }
}

pub fn now() -> Timestamp {
    timestamp(SystemTime::now())
}

fn time_or_now(t: TimeOrNow) -> Timestamp {
    match t {
        TimeOrNow::SpecificTime(t) => timestamp(t),
        TimeOrNow::Now => now(),
    }
}

/// The kernel's `new_decode_dev` (FUSE's rdev encoding) as (major, minor).
pub fn decode_fuse_dev(dev: u32) -> (u32, u32) {
    ((dev & 0xfff00) >> 8, (dev & 0xff) | ((dev >> 12) & 0xfff00))
}

/// XFS's on-disk device number (the form `decode_rdev` reads).
#[cfg(test)]
pub fn encode_xfs_dev(major: u32, minor: u32) -> u32 {
    ((major & 0x1ff) << 18) | (minor & 0x3ffff)
}

/// Who calls, for owners of new inodes.
#[derive(Debug, Clone, Copy)]
pub struct Caller {
    pub uid: u32,
    pub gid: u32,
    /// The creating process's umask (create, mknod, mkdir): the kernel
    /// leaves it to us with FUSE_POSIX_ACL; applied unless the parent has
    /// a default ACL.
    pub umask: u32,
}

/// Owner and mode of a new inode under `parent`, as `inode_init_owner`
/// decides them: below a set-gid directory the group is the directory's,
/// and new directories inherit the set-gid bit; a non-directory keeps
/// set-gid only if its creator is in that group (approximated as: the
/// creator's primary group, or root).
pub fn new_owner(parent: &InodeCore, mode: u32, who: Caller) -> (u32, u32, u32) {
    let is_dir = mode & libc::S_IFMT == libc::S_IFDIR;
    let mut mode = mode;
    let mut gid = who.gid;
    if parent.mode as u32 & libc::S_ISGID != 0 {
        gid = parent.gid;
        if is_dir {
            mode |= libc::S_ISGID;
        } else if mode & libc::S_ISGID != 0 && who.uid != 0 && gid != who.gid {
            mode &= !libc::S_ISGID;
        }
    }
    (mode, who.uid, gid)
}

impl Core {
    pub(super) fn check_rw(&self) -> Result<(), i32> {
        if self.rw {
            Ok(())
        } else {
            Err(libc::EROFS)
        }
    }

    pub(super) fn create_args(
        &self,
        parent: u64,
        name: &[u8],
        mode: u32,
        rdev: u32,
        who: Caller,
    ) -> Result<CreateArgs, i32> {
        self.check_rw()?;
        if name.len() > NAME_MAX {
            return Err(libc::ENAMETOOLONG);
        }
        if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') {
            return Err(libc::EINVAL);
        }
        // The parent's core only: its forks (a directory just changed,
        // maybe long) are not decoded for this.
        let dir = self
            .fs
            .iget_attrs(self.ino(parent))
            .map_err(|e| self.errno("create", parent, &e))?;
        if !dir.is_dir() {
            return Err(libc::ENOTDIR);
        }
        let (mode, uid, gid) = new_owner(&dir.core, mode, who);
        Ok(CreateArgs {
            mode,
            uid,
            gid,
            rdev,
            umask: who.umask,
        })
    }

    /// A new entry's reply data; the kernel now holds a reference.
    pub(super) fn new_entry(
        &self,
        ip: &std::sync::Arc<Inode>,
    ) -> (super::wire::FileAttr, super::wire::Generation) {
        self.remember(ip);
        let gen = super::wire::Generation(ip.core.gen as u64);
        (file_attr(&self.fs, ip), gen)
    }

    /// CREATE: a regular file, opened. (`mode`s arrive without the umask,
    /// which goes with the caller, see [`Caller::umask`].)
    pub fn create(
        &self,
        parent: u64,
        name: &[u8],
        mode: u32,
        flags: i32,
        who: Caller,
        reply: ReplyCreate,
    ) {
        let mode = libc::S_IFREG | (mode & 0o7777);
        let args = match self.create_args(parent, name, mode, 0, who) {
            Ok(a) => a,
            Err(e) => return reply.fail(e),
        };
        match self.fs.create(self.ino(parent), name, &args) {
            Ok(ip) => {
                let (attr, gen) = self.new_entry(&ip);
                let fh = super::ops::open_handle(flags);
                reply.created(&self.ttl, &attr, gen, fh, super::ops::open_flags(flags))
            }
            Err(e) => reply.fail(self.errno("create", parent, &e)),
        }
    }

    /// TMPFILE (`open(O_TMPFILE)`): an unnamed regular file in `parent`,
    /// opened. The library's tmpfile holds the one open reference that
    /// the kernel's new entry stands for (its FORGET gives it back, and
    /// the inode is freed then unless a link named it).
    pub fn tmpfile(&self, parent: u64, mode: u32, flags: i32, who: Caller, reply: ReplyCreate) {
        let mode = libc::S_IFREG | (mode & 0o7777);
        // The kernel sends the name "/"; the checks are those of a create.
        let args = match self.create_args(parent, b"tmpfile", mode, 0, who) {
            Ok(a) => a,
            Err(e) => return reply.fail(e),
        };
        match self.fs.tmpfile(self.ino(parent), &args) {
            Ok(ip) => {
                self.nodes.remember(&ip);
                let attr = file_attr(&self.fs, &ip);
                let gen = super::wire::Generation(ip.core.gen as u64);
                let fh = super::ops::open_handle(flags);
                reply.created(&self.ttl, &attr, gen, fh, super::ops::open_flags(flags))
            }
            Err(e) => reply.fail(self.errno("tmpfile", parent, &e)),
        }
    }

    /// SYNCFS (`syncfs(2)`, `sync`): every committed change on disk.
    pub fn syncfs(&self, reply: ReplyEmpty) {
        if !self.rw {
            return reply.ok();
        }
        match self.fs.sync() {
            Ok(()) => reply.ok(),
            Err(e) => reply.fail(self.errno("syncfs", 1, &e)),
        }
    }

    /// MKNOD: regular files, devices, FIFOs and sockets.
    pub fn mknod(
        &self,
        parent: u64,
        name: &[u8],
        mode: u32,
        rdev: u32,
        who: Caller,
        reply: ReplyEntry,
    ) {
        let ftype = mode & libc::S_IFMT;
        let rdev = match ftype {
            libc::S_IFCHR | libc::S_IFBLK => {
                let (major, minor) = decode_fuse_dev(rdev);
                if major > 0x1ff || minor > 0x3ffff {
                    // XFS stores 9 bits of major and 18 of minor.
                    return reply.fail(libc::EINVAL);
                }
                // CreateArgs takes a Linux dev_t (FUSE's encoding is the
                // kernel's new_encode_dev, the same layout).
                libc::makedev(major, minor) as u32
            }
            libc::S_IFREG | libc::S_IFIFO | libc::S_IFSOCK => 0,
            // mknod(2) with no type makes a regular file.
            0 => 0,
            _ => return reply.fail(libc::EINVAL),
        };
        let ftype = if ftype == 0 { libc::S_IFREG } else { ftype };
        let mode = ftype | (mode & 0o7777);
        let args = match self.create_args(parent, name, mode, rdev, who) {
            Ok(a) => a,
            Err(e) => return reply.fail(e),
        };
        match self.fs.create(self.ino(parent), name, &args) {
            Ok(ip) => {
                let (attr, gen) = self.new_entry(&ip);
                reply.entry(&self.ttl, &attr, gen)
            }
            Err(e) => reply.fail(self.errno("mknod", parent, &e)),
        }
    }

    pub fn mkdir(&self, parent: u64, name: &[u8], mode: u32, who: Caller, reply: ReplyEntry) {
        let mode = libc::S_IFDIR | (mode & 0o7777);
        let args = match self.create_args(parent, name, mode, 0, who) {
            Ok(a) => a,
            Err(e) => return reply.fail(e),
        };
        match self.fs.mkdir(self.ino(parent), name, &args) {
            Ok(ip) => {
                let (attr, gen) = self.new_entry(&ip);
                reply.entry(&self.ttl, &attr, gen)
            }
            Err(e) => reply.fail(self.errno("mkdir", parent, &e)),
        }
    }

    pub fn unlink(&self, parent: u64, name: &[u8], reply: ReplyEmpty) {
        if let Err(e) = self.check_rw() {
            return reply.fail(e);
        }
        match self.fs.unlink(self.ino(parent), name) {
            Ok(()) => reply.ok(),
            Err(e) => reply.fail(self.errno("unlink", parent, &e)),
        }
    }

    pub fn rmdir(&self, parent: u64, name: &[u8], reply: ReplyEmpty) {
        if let Err(e) = self.check_rw() {
            return reply.fail(e);
        }
        match self.fs.rmdir(self.ino(parent), name) {
            Ok(()) => reply.ok(),
            Err(e) => reply.fail(self.errno("rmdir", parent, &e)),
        }
    }

    /// WRITE. `stamp`: set mtime and ctime, false when the kernel owns
    /// them (its write-back cache: it stamped them at the write(2) and
    /// sends them with SETATTR, maybe before these pages; stamping them
    /// again here would leave times on disk later than those `stat`
    /// showed; see the `fuse` module comment).
    pub fn write(
        &self,
        nodeid: u64,
        offset: i64,
        data: &[u8],
        from: WriteFrom,
        who: Asker,
        reply: ReplyWrite,
    ) {
        let WriteFrom { stamp, cached } = from;
        if let Err(e) = self.check_rw() {
            return reply.fail(e);
        }
        if offset < 0 {
            return reply.fail(libc::EINVAL);
        }
        // The common case, an overwrite of written blocks in a file with
        // no set-id bit to drop and no sync flag, looks the inode up
        // once, under the library's shared locks.
        let plain = |ip: &Inode| ip.core.flags & DIFLAG_SYNC == 0 && setid_to_drop(ip, who) == 0;
        match self
            .fs
            .overwrite_if(self.ino(nodeid), offset as u64, data, stamp, plain)
        {
            Ok(Some(n)) => return reply.written(n.min(u32::MAX as usize) as u32),
            Ok(None) => {}
            Err(e) => return reply.fail(self.errno("write", nodeid, &e)),
        }
        // One cached lookup serves the set-id rules and the sync flag.
        let ip = match self.inode(nodeid) {
            Ok(ip) => ip,
            Err(e) => return reply.fail(self.errno("write", nodeid, &e)),
        };
        if let Err(e) = self.drop_setid_before_change(&ip, nodeid, who) {
            return reply.fail(e);
        }
        let n = match self.write_all(ip.ino, offset as u64, data, stamp) {
            Ok(n) => n,
            Err((0, e)) => return reply.fail(self.errno("write", nodeid, &e)),
            // A short count is an answer only to a write(2) that waits for
            // it. The kernel's write-back takes any count of a cached
            // WRITE as the whole (it checks errors, not counts): the pages
            // would be marked clean, and an fsync would succeed over bytes
            // that were never stored. So a cached WRITE is whole or fails.
            Err((_, e)) if cached => return reply.fail(self.errno("write", nodeid, &e)),
            Err((done, _)) => done,
        };
        // A file with the sync flag: every write is a data-integrity write
        // (as O_DSYNC), done before it is answered.
        if ip.core.flags & DIFLAG_SYNC != 0 {
            if let Err(e) = self.fs.fsync(ip.ino, true) {
                return reply.fail(self.errno("write", nodeid, &e));
            }
        }
        // A write never exceeds max_write (1 MiB), so the count fits.
        reply.written(n.min(u32::MAX as usize) as u32)
    }

    /// Write all of `data` at `off`: the library may stop short (an error
    /// after some of its transactions committed); the rest is asked for
    /// again until it fails. `Err((done, e))`: `done` bytes were written
    /// before error `e` (ENOSPC when the library wrote nothing and said
    /// nothing).
    fn write_all(
        &self,
        ino: Ino,
        off: u64,
        data: &[u8],
        stamp: bool,
    ) -> Result<usize, (usize, Error)> {
        let mut done = 0;
        while done < data.len() {
            match self
                .fs
                .write_stamped(ino, off + done as u64, &data[done..], stamp)
            {
                Ok(0) => return Err((done, Error::NoSpace)),
                Ok(n) => done += n,
                Err(e) => return Err((done, e)),
            }
        }
        Ok(done)
    }

    /// SETATTR: chmod, chown, truncate, utimens (FATTR_MODE, _UID, _GID,
    /// _SIZE, _ATIME(_NOW), _MTIME(_NOW), _CTIME). Anything else (lock
    /// owner, file handle, BSD flags) changes nothing.
    pub fn setattr(&self, nodeid: u64, a: SetAttrArgs, who: Asker, reply: super::wire::ReplyAttr) {
        let mut set = SetAttr {
            mode: a.mode.map(|m| m & 0o7777),
            uid: a.uid,
            gid: a.gid,
            size: a.size,
            atime: a.atime.map(time_or_now),
            mtime: a.mtime.map(time_or_now),
            ctime: a.ctime.map(timestamp),
        };
        let nothing = set.mode.is_none()
            && set.uid.is_none()
            && set.gid.is_none()
            && set.size.is_none()
            && set.atime.is_none()
            && set.mtime.is_none()
            && set.ctime.is_none();
        if nothing {
            return self.getattr(nodeid, reply);
        }
        if let Err(e) = self.check_rw() {
            return reply.fail(e);
        }
        let ip = match self.inode(nodeid) {
            Ok(ip) => ip,
            Err(e) => return reply.fail(self.errno("setattr", nodeid, &e)),
        };
        if let Err(e) = a.flags_allow(ip.core.flags) {
            return reply.fail(e.errno());
        }
        if set.size.is_some() && set.mode.is_none() {
            if let Err(e) = self.drop_setid_before_change(&ip, nodeid, who) {
                return reply.fail(e);
            }
        }
        if (set.uid.is_some() || set.gid.is_some()) && set.mode.is_none() {
            set.mode = chown_mode(&ip, who);
        }
        match self.fs.setattr(self.ino(nodeid), &set) {
            Ok(ip) => {
                self.listing_changed(nodeid);
                reply.attr(&self.ttl, &file_attr(&self.fs, &ip))
            }
            Err(e) => reply.fail(self.errno("setattr", nodeid, &e)),
        }
    }

    /// COPY_FILE_RANGE: the bytes copied by reads and writes of the
    /// library, up to EOF of the source and [`COPY_MAX`]. The destination
    /// is written as by WRITE (set-gid rule, `sync` flag); an immutable
    /// one refuses (EPERM: FUSE inodes do not carry the flag, so the VFS
    /// cannot). The kernel has checked the rest (open modes, overlapping
    /// ranges of one file, `O_APPEND` destinations).
    pub fn copy_file_range(&self, r: CopyRange, who: Asker, reply: ReplyWrite) {
        if let Err(e) = self.check_rw() {
            return reply.fail(e);
        }
        if r.off_in > i64::MAX as u64 || r.off_out > i64::MAX as u64 {
            return reply.fail(libc::EINVAL);
        }
        let (src, dst) = match (self.inode(r.ino_in), self.inode(r.ino_out)) {
            (Ok(s), Ok(d)) => (s, d),
            (Err(e), _) | (_, Err(e)) => {
                return reply.fail(self.errno("copy_file_range", r.ino_out, &e))
            }
        };
        if let Err(e) = flags_allow(dst.core.flags, Change::Modify) {
            return reply.fail(e.errno());
        }
        if let Err(e) = self.drop_setid_before_change(&dst, r.ino_out, who) {
            return reply.fail(e);
        }
        let want = r.len.min(COPY_MAX);
        let mut buf = vec![0u8; (want as usize).min(COPY_STEP)];
        let mut done = 0u64;
        while done < want {
            let step = ((want - done) as usize).min(buf.len());
            let n = match self.fs.read_file(&src, r.off_in + done, &mut buf[..step]) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if done == 0 => {
                    return reply.fail(self.errno("copy_file_range", r.ino_in, &e))
                }
                Err(_) => break,
            };
            match self.fs.write(dst.ino, r.off_out + done, &buf[..n]) {
                Ok(w) if w < n => {
                    done += w as u64;
                    break;
                }
                Ok(w) => done += w as u64,
                Err(e) if done == 0 => {
                    return reply.fail(self.errno("copy_file_range", r.ino_out, &e))
                }
                Err(_) => break,
            }
            if n < step {
                break;
            }
        }
        if done > 0 && dst.core.flags & DIFLAG_SYNC != 0 {
            if let Err(e) = self.fs.fsync(dst.ino, true) {
                return reply.fail(self.errno("copy_file_range", r.ino_out, &e));
            }
        }
        reply.written(done as u32)
    }

    /// Before a write or truncate by `who`: the set-id bits XFS clears
    /// for a data change by a caller without CAP_FSETID (`rxfs::cred`).
    /// With FUSE_HANDLE_KILLPRIV_V2 (asked for, see the `fuse` module
    /// comment) they are all ours to drop: for writes, truncates,
    /// fallocate and copy_file_range. (Without it the kernel drops
    /// set-uid, and set-gid with group execute, itself for buffered writes
    /// and truncates, but never set-gid without group execute when the
    /// writer is outside the file's group, and nothing at all for a
    /// direct-I/O write; dropping again what it dropped changes nothing.)
    /// `ip` is node
    /// `nodeid` as the caller just looked it up; the caller's groups and
    /// capabilities are read only for a file with a set-id bit.
    fn drop_setid_before_change(&self, ip: &Inode, nodeid: u64, who: Asker) -> Result<(), i32> {
        let drop = setid_to_drop(ip, who);
        if drop == 0 {
            return Ok(());
        }
        let set = SetAttr {
            mode: Some(ip.core.mode as u32 & 0o7777 & !drop),
            ..SetAttr::default()
        };
        match self.fs.setattr(ip.ino, &set) {
            Ok(_) => {
                // Behind the kernel's back: its cached mode is stale.
                self.forget_attrs(nodeid);
                Ok(())
            }
            Err(e) => Err(self.errno("setattr", nodeid, &e)),
        }
    }

    /// FSYNC and FSYNCDIR: force the log up to the inode's last change.
    pub fn fsync(&self, nodeid: u64, datasync: bool, reply: ReplyEmpty) {
        if !self.rw {
            // Nothing was ever written.
            return reply.ok();
        }
        match self.fs.fsync(self.ino(nodeid), datasync) {
            Ok(()) => reply.ok(),
            Err(e) => reply.fail(self.errno("fsync", nodeid, &e)),
        }
    }
}

/// Where a WRITE comes from.
#[derive(Debug, Clone, Copy)]
pub struct WriteFrom {
    /// Set mtime and ctime (false when the kernel owns them).
    pub stamp: bool,
    /// From the kernel's page cache (FUSE_WRITE_CACHE): stored whole or
    /// answered with an error, never a short count.
    pub cached: bool,
}

/// A COPY_FILE_RANGE request (node ids, byte offsets).
#[derive(Debug, Clone, Copy)]
pub struct CopyRange {
    pub ino_in: u64,
    pub off_in: u64,
    pub ino_out: u64,
    pub off_out: u64,
    pub len: u64,
}

/// Bytes one COPY_FILE_RANGE copies at most (the answer's count is 32
/// bits; the caller asks again for the rest, as copy_file_range(2)
/// allows short copies), and per read/write step.
const COPY_MAX: u64 = 1 << 30;
const COPY_STEP: usize = 1 << 20;

/// SETATTR's arguments, decoded.
#[derive(Debug, Clone, Copy, Default)]
pub struct SetAttrArgs {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<TimeOrNow>,
    pub mtime: Option<TimeOrNow>,
    pub ctime: Option<SystemTime>,
    /// Sent with a file handle: an ftruncate/futimens (not a path call,
    /// nor the truncate of an `O_TRUNC` open, which comes without one).
    pub via_fd: bool,
}

impl SetAttrArgs {
    /// What the inode flags say to this SETATTR (the VFS's rules, which
    /// FUSE's kernel side cannot apply: its inodes do not carry the
    /// flags): mode, owners and explicit times are changes neither
    /// immutable nor append-only allow; "now" times (touch) only
    /// immutable refuses; a truncate through a path both refuse, through
    /// a descriptor only append-only.
    ///
    /// With the write-back cache the kernel keeps a regular file's mtime
    /// and ctime and sends them as explicit times, never MTIME_NOW: when
    /// it flushes the times a write stamped, with a truncate, and for
    /// `touch`. All of these carry a ctime equal to the mtime (the kernel
    /// stamped both with one clock reading), which an explicit time from
    /// utimensat(2) never has (its ctime is the call's own "now"): such
    /// an mtime counts as "now", and with a size it is the truncate's.
    pub fn flags_allow(&self, flags: u16) -> Result<(), rxfs::Error> {
        let stamped = match (self.mtime, self.ctime) {
            (Some(TimeOrNow::SpecificTime(m)), Some(c)) => m == c,
            _ => false,
        };
        let mtime = match stamped {
            true if self.size.is_some() => None,
            true => Some(TimeOrNow::Now),
            false => self.mtime,
        };
        let explicit = |t: Option<TimeOrNow>| matches!(t, Some(TimeOrNow::SpecificTime(_)));
        let attrs = self.mode.is_some()
            || self.uid.is_some()
            || self.gid.is_some()
            || explicit(self.atime)
            || explicit(mtime);
        if attrs {
            flags_allow(flags, Change::Modify)?;
        }
        if self.atime.is_some() || mtime.is_some() {
            flags_allow(flags, Change::Append)?;
        }
        match (self.size.is_some(), self.via_fd) {
            (true, false) => flags_allow(flags, Change::Modify),
            (true, true) => flags_allow(flags & !DIFLAG_IMMUTABLE, Change::Modify),
            _ => Ok(()),
        }
    }
}

/// The mode a chown of `ip` by `who` leaves, when it is not the one the
/// library's chown rule gives (set-uid dropped, set-gid with group
/// execute): the VFS also drops set-gid without group execute when the
/// caller is neither in the file's (old) group nor has CAP_FSETID. None
/// when the library's rule is right (read the caller only for such a
/// file). The kernel sends the mode itself without
/// FUSE_HANDLE_KILLPRIV_V2 (the library's rule, then).
fn chown_mode(ip: &Inode, who: Asker) -> Option<u32> {
    let mode = ip.core.mode as u32;
    let sgid_only = libc::S_ISGID | libc::S_IXGRP;
    if mode & libc::S_IFMT == libc::S_IFDIR || mode & sgid_only != libc::S_ISGID {
        return None;
    }
    if who.cred().in_group_or_capable(ip.core.gid) {
        return None;
    }
    Some(mode & 0o7777 & !(libc::S_ISUID | libc::S_ISGID))
}

/// The set-id bits a change of `ip`'s data by `who` clears (see
/// [`Core::drop_setid_before_change`]); 0 for most files without asking
/// for the caller's credentials.
fn setid_to_drop(ip: &Inode, who: Asker) -> u32 {
    let mode = ip.core.mode as u32;
    if mode & libc::S_IFMT != libc::S_IFREG
        || mode & (libc::S_ISUID | libc::S_ISGID) == 0
        || who.fsetid == Some(true)
    {
        return 0;
    }
    who.cred().privs_to_drop(mode, ip.core.gid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuse::attr::{encode_dev, system_time};
    use crate::fuse::node::tests::fake_inode;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn times_round_trip_through_the_wire_form() {
        for (sec, nsec) in [(0, 0), (1_700_000_000, 999_999_999), (-1, 1), (-5_000, 0)] {
            let t = Timestamp { sec, nsec };
            // What a SETATTR's (sec, nsec) becomes.
            let from_kernel = crate::fuse::wire::types::system_time_of(sec, nsec);
            assert_eq!(timestamp(from_kernel), t);
        }
        // Replies carry the exact instant: one nanosecond after -1 s.
        let t = system_time(Timestamp { sec: -1, nsec: 1 });
        assert_eq!(
            UNIX_EPOCH.duration_since(t).unwrap(),
            Duration::from_nanos(999_999_999)
        );
        assert!(now().sec > 1_600_000_000);
    }

    #[test]
    fn device_numbers() {
        for (ma, mi) in [(4, 5), (259, 70000), (1, 3), (511, 262_143)] {
            let fuse = encode_dev(ma, mi);
            assert_eq!(decode_fuse_dev(fuse), (ma, mi));
            assert_eq!(
                rxfs::format::inode::decode_rdev(encode_xfs_dev(ma, mi)),
                (ma, mi)
            );
            // What CreateArgs gets: a Linux dev_t, which the library turns
            // into the XFS encoding.
            let linux = libc::makedev(ma, mi) as u32;
            assert_eq!(linux, fuse);
            assert_eq!(rxfs::fs::ops_ns::xfs_rdev(linux), encode_xfs_dev(ma, mi));
        }
    }

    #[test]
    fn kernel_stamped_times_count_as_now() {
        use rxfs::format::inode::DIFLAG_APPEND;
        let t = UNIX_EPOCH + Duration::new(1_700_000_000, 5);
        let later = t + Duration::from_nanos(1);
        let times = |m, c| SetAttrArgs {
            mtime: Some(TimeOrNow::SpecificTime(m)),
            ctime: c,
            ..SetAttrArgs::default()
        };
        let append = DIFLAG_APPEND;
        // A write's times flushed (mtime = ctime), `touch` (atime now too).
        assert!(times(t, Some(t)).flags_allow(append).is_ok());
        let touch = SetAttrArgs {
            atime: Some(TimeOrNow::Now),
            ..times(t, Some(t))
        };
        assert!(touch.flags_allow(append).is_ok());
        assert!(touch.flags_allow(DIFLAG_IMMUTABLE).is_err());
        // An explicit mtime (ctime is the call's "now"), or none at all.
        assert!(times(t, Some(later)).flags_allow(append).is_err());
        assert!(times(t, None).flags_allow(append).is_err());
        // A truncate's stamp goes with the size: through a descriptor an
        // immutable file's size may change, an append-only one's not.
        let trunc = SetAttrArgs {
            size: Some(0),
            via_fd: true,
            ..times(t, Some(t))
        };
        assert!(trunc.flags_allow(DIFLAG_IMMUTABLE).is_ok());
        assert!(trunc.flags_allow(append).is_err());
    }

    #[test]
    fn setgid_directories() {
        let who = Caller {
            uid: 1000,
            gid: 100,
            umask: 0,
        };
        let plain = fake_inode(128, 0o40755);
        assert_eq!(new_owner(&plain.core, 0o100644, who), (0o100644, 1000, 100));
        let mut sg = (*fake_inode(129, 0o42775)).clone();
        sg.core.gid = 50;
        assert_eq!(new_owner(&sg.core, 0o40755, who), (0o42755, 1000, 50));
        assert_eq!(new_owner(&sg.core, 0o100644, who), (0o100644, 1000, 50));
        // Set-gid on a file in a group the creator is not in is dropped.
        assert_eq!(new_owner(&sg.core, 0o102755, who), (0o100755, 1000, 50));
        let root = Caller {
            uid: 0,
            gid: 0,
            umask: 0,
        };
        assert_eq!(new_owner(&sg.core, 0o102755, root), (0o102755, 0, 50));
    }
}
