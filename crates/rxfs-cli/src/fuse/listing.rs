//! Directory listings the kernel keeps, and what rxfs owes them.
//!
//! OPENDIR answers ENOSYS once (unless the mount is `strictatime`): the
//! kernel then opens directories without asking (no OPENDIR, no
//! RELEASEDIR: two round trips fewer per `opendir(3)`, a third of all
//! requests of dbench) and keeps each directory's listing in its page
//! cache (`FOPEN_CACHE_DIR`, the default it takes then), serving a later
//! listing from it without a READDIR while the directory's version and
//! mtime in its cache are unchanged. Every change of a directory's
//! entries comes through this mount and resets that cache (the kernel
//! bumps the version itself), so the entries it serves are current.
//!
//! What the kernel does not see are the atime updates a listing owes
//! (`rxfs::fs::atime`): a listing served from its cache never reaches
//! the daemon. The invariant kept here: **a directory whose listing the
//! kernel may hold from a READDIR of ours, and whose atime a listing now
//! must update, has that listing dropped before the kernel can use it
//! again.** Concretely, [`Listings`] holds the node ids whose listing
//! was served from offset 0 since it was last dropped, and the listing is
//! dropped (`FUSE_NOTIFY_INVAL_INODE` of its pages) when
//! - a reply is about to give the kernel the directory's attributes
//!   (GETATTR, STATX, LOOKUP, a READDIRPLUS entry) and an atime update is
//!   due (a day old under `relatime`, or mtime or ctime set ahead of it):
//!   the mount uses `default_permissions`, so the kernel takes fresh
//!   attributes (at most the attribute timeout old) for the permission
//!   check of every path walk and open that precedes a listing;
//! - rxfs changed the directory's inode without an entry change the
//!   kernel tracks: SETATTR, an xattr or ACL change, the inode flags'
//!   ioctls (ctime moved past atime), or a rename that moved it (its
//!   `..` entry changed too).
//!
//! The drop is sent before the request's reply, while the kernel waits
//! for it: no page of the directory is locked by a reader then (readers
//! lock a cached page only while copying from it), so the invalidation
//! cannot wait on the daemon. Before this, OPENDIR decided the same at
//! each open (no `FOPEN_KEEP_CACHE` when an update was due); the one
//! difference is a listing re-read through a descriptor held open (by
//! `rewinddir`), which neither asks for attributes nor opens, as before.
//!
//! `strictatime` owes an update at every listing: OPENDIR is kept there
//! and drops the cache at every open (see `Core::opendir`).

use std::collections::HashSet;
use std::sync::Mutex;

use rxfs::format::inode::InodeCore;

use super::ops::Core;
use super::wire::INodeNo;

/// The node ids whose listing the kernel may hold (see the module doc).
#[derive(Default)]
pub struct Listings {
    held: Mutex<HashSet<u64>>,
}

impl Listings {
    fn held(&self) -> std::sync::MutexGuard<'_, HashSet<u64>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn insert(&self, nodeid: u64) {
        self.held().insert(nodeid);
    }

    fn is_empty(&self) -> bool {
        self.held().is_empty()
    }

    fn remove(&self, nodeid: u64) -> bool {
        self.held().remove(&nodeid)
    }
}

impl Core {
    /// Whether OPENDIR is answered ENOSYS, leaving directory opens to
    /// the kernel: on every mount but a read-write `strictatime` one
    /// that updates directories' atimes.
    pub(super) fn opens_dirs_itself(&self) -> bool {
        let o = self.fs.options();
        !(self.rw && o.atime == rxfs::fs::atime::AtimeMode::StrictAtime && !o.nodiratime)
    }

    /// A READDIR or READDIRPLUS of `nodeid` from offset 0 was served
    /// (its atime updated if due): the kernel may keep the listing.
    pub(super) fn listing_served(&self, nodeid: u64) {
        if self.opens_dirs_itself() {
            self.listings.insert(nodeid);
        }
    }

    /// Before a reply carrying the attributes `core` of node `nodeid`:
    /// drop its kept listing if a listing now owes an atime update.
    pub(super) fn listing_attrs(&self, nodeid: u64, core: &InodeCore) {
        if self.atime_due_core(core) && self.listings.remove(nodeid) {
            self.drop_listing(nodeid);
        }
    }

    /// rxfs changed node `nodeid`'s inode (attributes, xattrs, flags,
    /// its parent) with no entry change the kernel tracks: drop its kept
    /// listing, if any.
    pub(super) fn listing_changed(&self, nodeid: u64) {
        if self.listings.remove(nodeid) {
            self.drop_listing(nodeid);
        }
    }

    /// Whether no listing is kept (a rename need not look its names up).
    pub(super) fn listings_empty(&self) -> bool {
        self.listings.is_empty()
    }

    /// The kernel dropped node `nodeid`: so did its listing.
    pub(super) fn listing_forgotten(&self, nodeid: u64) {
        self.listings.remove(nodeid);
    }

    fn drop_listing(&self, nodeid: u64) {
        if let Some(n) = self.notifier.get() {
            // Offset 0, length 0: every page (and the attributes).
            let _ = n.inval_inode(INodeNo(nodeid), 0, 0);
        }
    }
}
