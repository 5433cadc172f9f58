//! Request handlers for the namespace and attribute changes of a
//! read-write mount beyond create/remove: symlink, link, rename (with
//! RENAME_NOREPLACE / RENAME_EXCHANGE / RENAME_WHITEOUT), setxattr/removexattr and
//! fallocate. Each maps onto one library call, which takes its own inode
//! locks and runs its transactions; read-only mounts answer EROFS.
//! setxattr and fallocate carry the caller ([`super::cred`]): they drop
//! set-id bits as the kernel's XFS does, which FUSE's kernel side leaves
//! to us.

use super::wire::{ReplyEmpty, ReplyEntry};
use rxfs::fs::ops_attr::XattrSet;
use rxfs::fs::ops_rename::RenameFlags;
use rxfs::types::Ino;

use super::cred::Asker;
use super::ops::Core;
use super::ops_rw::Caller;
use super::reply::Fail;

const RENAME_NOREPLACE: u32 = 1;
const RENAME_EXCHANGE: u32 = 2;
const RENAME_WHITEOUT: u32 = 4;
const XATTR_CREATE: i32 = 1;
const XATTR_REPLACE: i32 = 2;
/// The VFS's limit on an xattr value (XATTR_SIZE_MAX).
const XATTR_SIZE_MAX: usize = 65536;

/// renameat2 flags as the library takes them; the whiteout is the
/// caller's (as XFS makes it). Unknown flags: EINVAL.
pub fn rename_flags(flags: u32, who: Caller) -> Result<RenameFlags, i32> {
    if flags & !(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT) != 0 {
        return Err(libc::EINVAL);
    }
    Ok(RenameFlags {
        noreplace: flags & RENAME_NOREPLACE != 0,
        exchange: flags & RENAME_EXCHANGE != 0,
        whiteout: (flags & RENAME_WHITEOUT != 0).then_some((who.uid, who.gid)),
    })
}

impl Core {
    pub fn symlink(&self, parent: u64, name: &[u8], target: &[u8], who: Caller, reply: ReplyEntry) {
        let args = match self.create_args(parent, name, libc::S_IFLNK | 0o777, 0, who) {
            Ok(a) => a,
            Err(e) => return reply.fail(e),
        };
        match self.fs.symlink(self.ino(parent), name, target, &args) {
            Ok(ip) => {
                let (attr, gen) = self.new_entry(&ip);
                reply.entry(&self.ttl, &attr, gen)
            }
            Err(e) => reply.fail(self.errno("symlink", parent, &e)),
        }
    }

    pub fn link(&self, nodeid: u64, newparent: u64, newname: &[u8], reply: ReplyEntry) {
        if let Err(e) = self.check_rw() {
            return reply.fail(e);
        }
        match self.fs.link(self.ino(nodeid), self.ino(newparent), newname) {
            Ok(ip) => {
                let (attr, gen) = self.new_entry(&ip);
                reply.entry(&self.ttl, &attr, gen)
            }
            Err(e) => reply.fail(self.errno("link", nodeid, &e)),
        }
    }

    pub fn rename(
        &self,
        parent: u64,
        name: &[u8],
        newparent: u64,
        newname: &[u8],
        flags: Result<RenameFlags, i32>,
        reply: ReplyEmpty,
    ) {
        if let Err(e) = self.check_rw() {
            return reply.fail(e);
        }
        let f = match flags {
            Ok(f) => f,
            Err(e) => return reply.fail(e),
        };
        match self
            .fs
            .rename(self.ino(parent), name, self.ino(newparent), newname, f)
        {
            Ok(()) => {
                // A moved directory's `..` and ctime changed (both of
                // an exchange's): drop a listing the kernel keeps.
                if !self.listings_empty() {
                    let mut moved = vec![(newparent, newname)];
                    if f.exchange {
                        moved.push((parent, name));
                    }
                    for (dir, n) in moved {
                        let found = self.inode(dir).and_then(|d| self.fs.lookup(&d, n));
                        if let Ok(ino) = found {
                            self.listing_changed(ino.0);
                        }
                    }
                }
                reply.ok()
            }
            Err(e) => reply.fail(self.errno("rename", parent, &e)),
        }
    }

    pub fn setxattr(
        &self,
        nodeid: u64,
        name: &[u8],
        value: &[u8],
        flags: i32,
        who: Asker,
        reply: ReplyEmpty,
    ) {
        if let Err(e) = self.check_rw() {
            return reply.fail(e);
        }
        if flags & !(XATTR_CREATE | XATTR_REPLACE) != 0 {
            return reply.fail(libc::EINVAL);
        }
        if value.len() > XATTR_SIZE_MAX {
            return reply.fail(libc::E2BIG);
        }
        let how = match flags {
            XATTR_CREATE => XattrSet::Create,
            XATTR_REPLACE => XattrSet::Replace,
            0 => XattrSet::Any,
            _ => return reply.fail(libc::EINVAL),
        };
        match self
            .fs
            .setxattr_by(self.ino(nodeid), name, value, how, &who.cred())
        {
            Ok(()) => {
                if name == b"system.posix_acl_access" {
                    // The ACL rewrote the mode (and maybe dropped
                    // set-gid): the kernel must not keep the old one.
                    self.forget_attrs(nodeid);
                }
                self.listing_changed(nodeid);
                reply.ok()
            }
            Err(e) => reply.fail(self.errno("setxattr", nodeid, &e)),
        }
    }

    pub fn removexattr(&self, nodeid: u64, name: &[u8], reply: ReplyEmpty) {
        if let Err(e) = self.check_rw() {
            return reply.fail(e);
        }
        match self.fs.removexattr(self.ino(nodeid), name) {
            Ok(()) => {
                self.listing_changed(nodeid);
                reply.ok()
            }
            Err(e) => reply.fail(self.errno("removexattr", nodeid, &e)),
        }
    }

    /// After a release: give back unused preallocation past EOF.
    pub fn trim_eof(&self, nodeid: u64) {
        if let Err(e) = self.fs.trim_eof(self.ino(nodeid)) {
            self.errno("release", nodeid, &e);
        }
    }

    pub fn fallocate(
        &self,
        nodeid: u64,
        offset: i64,
        length: i64,
        mode: i32,
        who: Asker,
        reply: ReplyEmpty,
    ) {
        if let Err(e) = self.check_rw() {
            return reply.fail(e);
        }
        if offset < 0 || length <= 0 {
            return reply.fail(libc::EINVAL);
        }
        let ino: Ino = self.ino(nodeid);
        match self
            .fs
            .fallocate_by(ino, mode, offset as u64, length as u64, &who.cred())
        {
            Ok(()) => {
                // The kernel refreshes only size and times after a
                // fallocate; set-id bits the library dropped would stay
                // in its cache until the attribute timeout.
                self.forget_attrs(nodeid);
                reply.ok()
            }
            Err(e) => reply.fail(self.errno("fallocate", nodeid, &e)),
        }
    }
}
