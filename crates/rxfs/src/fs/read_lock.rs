//! How the read path of a read-write mount takes the shared inode locks
//! (the rules are in [`crate::cache::ilock`]).
//!
//! Every public reader of an inode's forks (lookup, readdir, read,
//! readlink, getxattr, listxattr) takes the inode's shared ilock, then
//! reads the inode *again* under it (from the inode cache, which a commit
//! clears before its writer unlocks), and reads the blocks found through
//! that fresh copy: a caller's older copy of the inode may name blocks a
//! transaction has since freed or rewritten. The caller's copy is used as
//! it is on read-only mounts (nothing changes) and on threads that already
//! hold an ilock or a transaction (operations reading what they locked).

use std::sync::Arc;

use super::Filesystem;
use crate::bdev::BlockDevice;
use crate::cache::buf::TxGuard;
use crate::cache::ilock::{reader_may_lock, ILockShared, IoLockGuard};
use crate::error::{Error, Result};
use crate::format::bufkind::BufKind;
use crate::format::sb::Superblock;
use crate::geometry::Geometry;
use crate::inode::{Inode, ReadCtx, Reading};
use crate::types::{AgNumber, Ino};

impl Filesystem {
    /// The shared ilock of `ino`, if this read must take it (read-write
    /// mount, and the thread holds no ilock and no transaction).
    pub(crate) fn read_guard(&self, ino: Ino) -> Option<ILockShared> {
        let rw = self.rw.as_ref().filter(|_| reader_may_lock())?;
        Some(rw.inodes.ilock_shared(ino))
    }

    /// Whether reads on this thread take shared ilocks (see
    /// [`Self::read_guard`]), without taking one.
    pub(crate) fn reads_take_locks(&self) -> bool {
        self.rw.is_some() && reader_may_lock()
    }

    /// `ip` as of now, with its shared ilock held (see the module doc).
    /// The same inode number freed and allocated again since the caller
    /// read it: `NotFound` (the caller's file is gone).
    pub(crate) fn read_locked<'a>(&self, ip: &'a Inode) -> Result<Reading<'a>> {
        let Some(g) = self.read_guard(ip.ino) else {
            return Ok(Reading::given(ip));
        };
        let cur = self.iget(ip.ino)?;
        if cur.core.gen != ip.core.gen {
            return Err(Error::NotFound);
        }
        Ok(Reading::locked(cur, g))
    }

    /// On a read-write mount, the AGI buffer's transaction lock, held while
    /// the read path walks the inode btree (as the kernel's untrusted inode
    /// lookups hold the AGI): every change of the AG's inode btrees holds
    /// the AGI until the CIL has published all its blocks, so the walk sees
    /// the tree before or after a transaction, never half of a split. Not
    /// taken (`None`) on read-only mounts, or on a thread inside a logged
    /// transaction (which may hold this AGI itself, and whose own AGI
    /// lock, if any, already keeps the tree still).
    pub(crate) fn agi_read_lock(&self, agno: AgNumber) -> Result<Option<TxGuard>> {
        let Some(rw) = self.rw() else {
            return Ok(None);
        };
        if crate::cache::ilock::in_transaction() {
            return Ok(None);
        }
        let geo = self.geo();
        let daddr = geo.ag_header_daddr(agno, 2);
        let uuid = self.sb().metadata_uuid();
        let b = rw.bufs.get(
            &*rw.raw,
            &uuid,
            daddr,
            geo.sectsize as usize,
            BufKind::Agi,
            true,
        )?;
        Ok(Some(b.tx_lock()))
    }

    /// The I/O lock of `ino` in the mode given, on read-write mounts.
    pub(crate) fn iolock(&self, ino: Ino, exclusive: bool) -> Option<IoLockGuard> {
        Some(self.rw.as_ref()?.inodes.iolock(ino, exclusive))
    }
}

impl ReadCtx for Filesystem {
    fn geo(&self) -> &Geometry {
        Filesystem::geo(self)
    }
    fn sb(&self) -> &Superblock {
        Filesystem::sb(self)
    }
    fn read_locked<'a>(&self, ip: &'a Inode) -> Result<Reading<'a>> {
        Filesystem::read_locked(self, ip)
    }
    fn iget(&self, ino: Ino) -> Result<Arc<Inode>> {
        Filesystem::iget(self, ino)
    }
    fn reads_take_locks(&self) -> bool {
        Filesystem::reads_take_locks(self)
    }
    fn dev(&self) -> &dyn BlockDevice {
        Filesystem::dev(self)
    }
    fn rtdev(&self) -> Option<&dyn BlockDevice> {
        Filesystem::rtdev(self)
    }
    fn data_read_lock(&self, ino: Ino) -> Result<Option<IoLockGuard>> {
        self.check_live()?;
        Ok(self.iolock(ino, false))
    }
    fn agi_read_lock(&self, agno: AgNumber) -> Result<Option<TxGuard>> {
        Filesystem::agi_read_lock(self, agno)
    }
}
