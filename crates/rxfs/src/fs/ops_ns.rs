//! Namespace operations of a read-write mount: create, mkdir, unlink, rmdir.
//!
//! Each takes the inode locks it needs (ascending inode number), allocates
//! a transaction, runs the algorithms of [`crate::ns`] (which use
//! [`crate::ialloc`] and [`crate::bmap`]) on it and commits; on error the
//! transaction is cancelled.
//!
//! unlink/rmdir find the child with the read path first (to know which
//! inode to lock), lock parent and child, then look the name up again
//! inside the transaction: if the entry changed in between, they start
//! over (a bounded number of times).

use std::sync::Arc;

use super::Filesystem;
use crate::error::{Error, Result};
use crate::format::inode::Timestamp;
use crate::inode::Inode;
use crate::ns::{self, NsCreate};
use crate::types::Ino;
use crate::xact::{MetaTx, Resv};

/// Who creates an inode, and what it is.
#[derive(Debug, Clone, Copy)]
pub struct CreateArgs {
    /// Full mode: file type bits and permissions.
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// Device number (Linux encoding) for block and character devices.
    pub rdev: u32,
    /// The creator's umask: cleared from the permission bits unless the
    /// parent directory has a default ACL (which masks them instead).
    pub umask: u32,
}

impl CreateArgs {
    /// An inode of full mode `mode` owned by root, no umask, no device.
    pub const fn root(mode: u32) -> CreateArgs {
        CreateArgs {
            mode,
            uid: 0,
            gid: 0,
            rdev: 0,
            umask: 0,
        }
    }
}

/// Tries of unlink/rmdir when the entry changes under them.
const RELOOKUP_TRIES: usize = 8;

pub(super) fn now() -> Timestamp {
    crate::bmap::data::now()
}

/// Linux `dev_t` (as `stat` gives it) to the on-disk XFS encoding
/// (major << 18 | minor).
pub fn xfs_rdev(linux: u32) -> u32 {
    let dev = linux as libc::dev_t;
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    ((major & 0x1ff) << 18) | (minor & 0x3ffff)
}

impl CreateArgs {
    pub(super) fn ns(&self) -> NsCreate {
        NsCreate {
            mode: self.mode,
            uid: self.uid,
            gid: self.gid,
            rdev: xfs_rdev(self.rdev),
            umask: self.umask & 0o777,
            time: now(),
            alloc_from_ag0: false,
        }
    }
}

impl Filesystem {
    /// Create a regular file, device, FIFO or socket named `name` in `parent`.
    pub fn create(&self, parent: Ino, name: &[u8], args: &CreateArgs) -> Result<Arc<Inode>> {
        crate::dir::check_name(name)?;
        let ino = self.retry_from_ag0(args, &mut |ns| {
            self.ns_transaction(Resv::Create, &[parent], &mut |tx| {
                let dp = tx.ijoin(parent)?;
                ns::create(tx, dp, name, ns).map(|(ino, _)| ino)
            })
        })?;
        self.iget_known(ino)
    }

    /// Create a directory.
    pub fn mkdir(&self, parent: Ino, name: &[u8], args: &CreateArgs) -> Result<Arc<Inode>> {
        crate::dir::check_name(name)?;
        let ino = self.retry_from_ag0(args, &mut |ns| {
            self.ns_transaction(Resv::Mkdir, &[parent], &mut |tx| {
                let dp = tx.ijoin(parent)?;
                ns::mkdir(tx, dp, name, ns).map(|(ino, _)| ino)
            })
        })?;
        self.iget_known(ino)
    }

    /// Remove a non-directory entry; the inode is freed when its link count
    /// reaches zero.
    pub fn unlink(&self, parent: Ino, name: &[u8]) -> Result<()> {
        self.remove_entry(parent, name, false)
    }

    /// Remove an empty directory.
    pub fn rmdir(&self, parent: Ino, name: &[u8]) -> Result<()> {
        self.remove_entry(parent, name, true)
    }

    fn remove_entry(&self, parent: Ino, name: &[u8], dir: bool) -> Result<()> {
        crate::dir::check_name(name)?;
        for _ in 0..RELOOKUP_TRIES {
            let pdir = self.iget(parent)?;
            let child = self.lookup(&pdir, name)?;
            let t = now();
            let r = self.ns_transaction(Resv::Remove, &[parent, child], &mut |tx| {
                let dp = tx.ijoin(parent)?;
                if crate::dir::dir_lookup(tx, dp, name)? != Some(child) {
                    // Changed since the unlocked lookup: try again.
                    return Ok(false);
                }
                let open = |i: Ino| self.is_open(i) || self.staged_free(i);
                if dir {
                    ns::rmdir_with(tx, dp, name, t, &open)?;
                } else {
                    ns::unlink_with(tx, dp, name, t, &open)?;
                }
                Ok(true)
            })?;
            if r {
                // A file too big to free in the removal's transaction
                // went onto the unlinked list: free it now, in steps.
                return self.free_unreferenced(child);
            }
        }
        Err(Error::Invalid(format!(
            "entry {:?} kept changing during removal",
            String::from_utf8_lossy(name)
        )))
    }

    /// Run a create-like operation; when it found no space for a directory
    /// block from the directory's AG upwards, run it once more looking from
    /// AG 0 (a new transaction, so the AGF lock order holds).
    pub(super) fn retry_from_ag0(
        &self,
        args: &CreateArgs,
        op: &mut dyn FnMut(&NsCreate) -> Result<Ino>,
    ) -> Result<Ino> {
        let mut ns = args.ns();
        match op(&ns) {
            Err(Error::NoSpace) => {
                ns.alloc_from_ag0 = true;
                op(&ns)
            }
            r => r,
        }
    }

    /// Run `f` in a transaction with the inodes `inos` locked (ascending
    /// inode number, before the log reservation), commit on success,
    /// cancel on error. The read path's caches are updated by the commit.
    pub(super) fn ns_transaction<T>(
        &self,
        resv: Resv,
        inos: &[Ino],
        f: &mut dyn FnMut(&mut dyn MetaTx) -> Result<T>,
    ) -> Result<T> {
        let mut order = inos.to_vec();
        order.sort_unstable();
        order.dedup();
        let _locks = order
            .iter()
            .map(|&i| self.ilock(i))
            .collect::<Result<Vec<_>>>()?;
        let mut tx = self.trans_alloc(resv)?;
        // A realtime file may be freed here (unlink, rename over it, an
        // orphan's last reference): the realtime lock comes before the
        // AGI such a transaction takes (see crate::xact's lock order).
        let rt_sect = self.rw().is_some_and(|rw| rw.rt.is_some());
        if rt_sect
            && order
                .iter()
                .any(|&i| self.iget(i).is_ok_and(|ip| ip.is_realtime()))
        {
            if let Err(e) = tx.rt_lock() {
                tx.cancel();
                return Err(e);
            }
        }
        match f(&mut tx) {
            Ok(v) => {
                tx.commit()?;
                Ok(v)
            }
            Err(e) => {
                tx.cancel();
                Err(e)
            }
        }
    }
}
