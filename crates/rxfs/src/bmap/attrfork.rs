//! Block mappings of the attr fork, for the xattr code: map new blocks at
//! attr fork offsets (leaf/node blocks, remote values) and unmap them.
//!
//! The attr fork must exist (di_forkoff != 0) and be in EXTENTS or BTREE
//! format; moving to EXTENTS from LOCAL (shortform) and back, and moving
//! di_forkoff ([`super::fork::set_forkoff`]), are the caller's. Attr
//! mappings are always written (never unwritten). Invariants as for the
//! data fork ([`super`]): blocks are allocated before they are mapped,
//! unmapped blocks are freed deferred (EFI), di_nblocks follows both the
//! mapped blocks and the bmbt blocks, and the fork converts between
//! EXTENTS and BTREE as it grows and shrinks ([`super::fork::store`]).

use super::map::{self, ExtentMap};
use super::{load, store, TxSpace};
use crate::error::Result;
use crate::format::bmbt::Extent;
use crate::types::WhichFork;
use crate::types::{FileBlock, FsBlock, Ino};
use crate::xact::{InodeId, MetaTx};

/// The attr fork's mappings, sorted by fork offset.
pub fn attr_map(tx: &mut dyn MetaTx, ip: InodeId) -> Result<ExtentMap> {
    Ok(load(tx, ip, WhichFork::Attr)?.0)
}

/// Map every hole of attr fork blocks `[off, off + count)` to new blocks
/// near the inode (or the previous mapping); returns the new mappings.
/// On error nothing is mapped (blocks the call allocated were freed when
/// the error is the extent limit; after an allocator error the
/// transaction must be cancelled).
pub fn attr_alloc(
    tx: &mut dyn MetaTx,
    ip: InodeId,
    ino: Ino,
    off: FileBlock,
    count: u64,
) -> Result<Vec<Extent>> {
    let (mut map, max_recs) = load(tx, ip, WhichFork::Attr)?;
    let old = map.clone();
    let geo = tx.geo();
    let home = geo.agb_to_fsb(geo.ino_agno(ino), geo.agino_agbno(geo.ino_agino(ino)));
    let mut space = TxSpace {
        tx: &mut *tx,
        min_agno: 0,
        anywhere: false,
    };
    let new = map::fill(
        &mut map,
        off.0,
        count,
        max_recs,
        Some(home.0),
        false,
        &mut space,
    )?;
    if !new.is_empty() {
        let added: u64 = new.iter().map(|e| e.len).sum();
        store(tx, ip, WhichFork::Attr, &old, &map, added as i64)?;
    }
    Ok(new)
}

/// Unmap attr fork blocks `[off, off + count)` and free them (deferred).
/// The caller stales the buffers of the metadata blocks it held there.
pub fn attr_free(tx: &mut dyn MetaTx, ip: InodeId, off: FileBlock, count: u64) -> Result<()> {
    let (mut map, _) = load(tx, ip, WhichFork::Attr)?;
    let old = map.clone();
    let mut freed = map.remove_range(off.0, off.0.saturating_add(count));
    if freed.is_empty() {
        return Ok(());
    }
    freed.sort_unstable();
    let total: u64 = freed.iter().map(|f| f.1).sum();
    for (start, len) in freed {
        let geo = tx.geo();
        let f = FsBlock(start);
        tx.defer_free(geo.fsb_agno(f), geo.fsb_agbno(f), len as u32)?;
    }
    store(tx, ip, WhichFork::Attr, &old, &map, -(total as i64))
}
