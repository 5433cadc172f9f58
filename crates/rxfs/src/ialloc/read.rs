//! Whether an inode number names an allocated inode, from the inode btree
//! (the read path's question, asked before an inode is loaded).
//!
//! The inobt of an AG holds one record per 64-inode chunk (see
//! [`crate::format::btree_rec::InobtRec`]). An inode is allocated when its
//! chunk has a record, the inode is not in a sparse hole (each holemask bit
//! covers 4 inodes) and its free bit is clear.
//!
//! The walk holds [`ReadCtx::agi_read_lock`] (on a read-write mount, the
//! AGI buffer's transaction lock), so it sees the tree before or after a
//! transaction, never half of a split.

use crate::btree::walk::{btree_lookup_le, BtreeRoot};
use crate::error::Result;
use crate::format::btree::{BtreeKey, BtreeKind, InobtRec};
use crate::inode::ReadCtx;
use crate::types::Ino;

/// The inobt record of the chunk holding `ino`, if there is one.
/// `Ok(None)` also for inode numbers outside the filesystem.
pub fn inobt_chunk(fs: &(impl ReadCtx + ?Sized), ino: Ino) -> Result<Option<InobtRec>> {
    let geo = fs.geo();
    if !geo.ino_valid(ino) {
        return Ok(None);
    }
    let agno = geo.ino_agno(ino);
    let agino = geo.ino_agino(ino).0;
    let _agi_lock = fs.agi_read_lock(agno)?;
    let agi = crate::ag::read::read_agi(fs, agno)?;
    let root = BtreeRoot::from_agi(BtreeKind::Ino, agno, &agi);
    let rec: Option<InobtRec> = btree_lookup_le(fs, &root, BtreeKey(agino as u64, 0, 0))?;
    Ok(rec.filter(|r| r.covers(agino)))
}

/// Whether `ino` is an allocated inode: inside an inode chunk, not in a
/// sparse hole, and not free. Inode numbers outside the filesystem are
/// `false`.
pub fn inode_allocated(fs: &(impl ReadCtx + ?Sized), ino: Ino) -> Result<bool> {
    let Some(rec) = inobt_chunk(fs, ino)? else {
        return Ok(false);
    };
    let idx = fs.geo().ino_agino(ino).0 - rec.startino;
    Ok(rec.is_allocated(idx))
}
