//! Reverse-mapping btree (rmapbt) maintenance.
//!
//! On a filesystem with `RO_COMPAT_RMAPBT`, every allocated block of an AG
//! has a record in that AG's rmapbt saying who owns it: a file's fork at a
//! file offset (data or attr, written or unwritten, or a bmbt block), or a
//! special owner (AG headers and AGFL/free-space btree blocks, inode btree
//! blocks, inode chunks, refcount btree blocks, the log...). Every change
//! to a mapping or an allocation calls into this module in the same
//! transaction; without the feature every call is a no-op.
//!
//! (API stub for issue 4: the rmap helper fills it in.)

use crate::bmapop::WhichFork;
use crate::error::{Error, Result};
use crate::format::bmbt::Extent;
use crate::types::{AgBlock, AgNumber, Ino};
use crate::xact::MetaTx;

/// Who owns a range of AG blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RmapOwner {
    /// AG metadata: AGFL blocks, free-space and rmap btree blocks.
    Ag,
    /// Inode btree (inobt/finobt) blocks.
    Inobt,
    /// Inode chunks.
    Inodes,
    /// Refcount btree blocks.
    Refc,
    /// A file's fork: data/attr blocks at `offset` (file block), or a
    /// bmbt block of that fork (`bmbt`, offset ignored).
    File {
        ino: Ino,
        fork: WhichFork,
        offset: u64,
        bmbt: bool,
        unwritten: bool,
    },
}

fn unsupported() -> Error {
    Error::NotSupported("rmapbt maintenance (issue 4)".into())
}

/// Record that `[agbno, agbno + len)` of `agno` now belongs to `owner`.
pub fn rmap_alloc(
    tx: &mut dyn MetaTx,
    agno: AgNumber,
    agbno: AgBlock,
    len: u32,
    owner: &RmapOwner,
) -> Result<()> {
    let _ = (agno, agbno, len, owner);
    if !tx.sb().has_rmapbt() {
        return Ok(());
    }
    Err(unsupported())
}

/// Remove the record(s) saying `[agbno, agbno + len)` belongs to `owner`.
pub fn rmap_free(
    tx: &mut dyn MetaTx,
    agno: AgNumber,
    agbno: AgBlock,
    len: u32,
    owner: &RmapOwner,
) -> Result<()> {
    let _ = (agno, agbno, len, owner);
    if !tx.sb().has_rmapbt() {
        return Ok(());
    }
    Err(unsupported())
}

/// A fork's mappings changed from `old` to `new` (both sorted by file
/// offset): update the rmap records of every mapping that appeared,
/// disappeared or changed state (unwritten <-> written). Called by
/// [`crate::bmapop::store`].
pub fn rmap_map_delta(
    tx: &mut dyn MetaTx,
    ino: Ino,
    fork: WhichFork,
    old: &[Extent],
    new: &[Extent],
) -> Result<()> {
    let _ = (ino, fork, old, new);
    if !tx.sb().has_rmapbt() {
        return Ok(());
    }
    Err(unsupported())
}
