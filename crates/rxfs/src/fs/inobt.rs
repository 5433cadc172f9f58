//! Whether an inode number names an allocated inode, from the inode btree.
//!
//! The inobt of an AG holds one record per 64-inode chunk (see
//! [`crate::format::btree_rec::InobtRec`]). An inode is allocated when its
//! chunk has a record, the inode is not in a sparse hole (each holemask bit
//! covers 4 inodes) and its free bit is clear.

use super::Filesystem;
use crate::btree::walk::BtreeRoot;
use crate::cache::buf::TxGuard;
use crate::error::Result;
use crate::format::btree::{BtreeKey, BtreeKind, InobtRec};
use crate::format::bufkind::BufKind;
use crate::types::{AgNumber, Ino};

impl Filesystem {
    /// The inobt record of the chunk holding `ino`, if there is one.
    /// `Ok(None)` also for inode numbers outside the filesystem.
    pub fn inobt_chunk(&self, ino: Ino) -> Result<Option<InobtRec>> {
        let geo = self.geo();
        if !geo.ino_valid(ino) {
            return Ok(None);
        }
        let agno = geo.ino_agno(ino);
        let agino = geo.ino_agino(ino).0;
        let _agi_lock = self.agi_read_lock(agno)?;
        let agi = self.read_agi(agno)?;
        let root = BtreeRoot::from_agi(BtreeKind::Ino, agno, &agi);
        let rec: Option<InobtRec> = self.btree_lookup_le(&root, BtreeKey(agino as u64, 0, 0))?;
        Ok(rec.filter(|r| r.covers(agino)))
    }

    /// On a read-write mount, the AGI buffer's transaction lock, held while
    /// the read path walks the inode btree (as the kernel's untrusted inode
    /// lookups hold the AGI): every change of the AG's inode btrees holds
    /// the AGI until the CIL has published all its blocks, so the walk sees
    /// the tree before or after a transaction, never half of a split. Not
    /// taken (`None`) on read-only mounts, or on a thread inside a logged
    /// transaction (which may hold this AGI itself, and whose own AGI
    /// lock, if any, already keeps the tree still).
    fn agi_read_lock(&self, agno: AgNumber) -> Result<Option<TxGuard>> {
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

    /// Whether `ino` is an allocated inode: inside an inode chunk, not in a
    /// sparse hole, and not free. Inode numbers outside the filesystem are
    /// `false`.
    pub fn inode_allocated(&self, ino: Ino) -> Result<bool> {
        let Some(rec) = self.inobt_chunk(ino)? else {
            return Ok(false);
        };
        let idx = self.geo().ino_agino(ino).0 - rec.startino;
        Ok(rec.is_allocated(idx))
    }
}
