//! Loading and storing a fork's extent map in a joined inode.
//!
//! [`load`] decodes the whole mapping of a fork into an [`ExtentMap`];
//! [`store`] writes an edited map back, given the map as it was loaded, so
//! that a BTREE-format fork can apply only the records that changed (and a
//! filesystem with the reverse-mapping btree can log exactly the mappings
//! that appeared and disappeared). Every edit of a fork's mappings goes
//! through this pair.
//!
//! Today: EXTENTS-format data forks. BTREE-format forks and the attr fork
//! are `NotSupported` (issue 4: bmbt).

use super::map::ExtentMap;
use crate::error::{Error, Location, Result};
use crate::format::bmbt::{Extent, EXTENT_REC_SIZE};
use crate::format::dinode_edit as di;
use crate::format::inode::{DIFLAG_REALTIME, FMT_BTREE, FMT_EXTENTS};
use crate::types::FsBlock;
use crate::xact::{InodeId, MetaTx};

/// Which fork of an inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WhichFork {
    Data,
    Attr,
}

/// Decode and check the data fork of a joined inode; returns the map and
/// the most records the fork can hold.
pub fn load(tx: &mut dyn MetaTx, ip: InodeId, which: WhichFork) -> Result<(ExtentMap, usize)> {
    if which == WhichFork::Attr {
        return Err(Error::NotSupported(
            "attr fork extent maps (bmapop::fork)".into(),
        ));
    }
    let d = tx.inode(ip);
    let geo = tx.geo();
    let at = Location::Ino(di::ino(d));
    let bad = |detail: String| Error::corrupt("inode data fork", at, detail);
    if di::flags(d) & DIFLAG_REALTIME != 0 {
        return Err(Error::NotSupported(
            "realtime files: data fork editing".into(),
        ));
    }
    match di::format(d) {
        FMT_EXTENTS => {}
        FMT_BTREE => return Err(Error::NotSupported("btree data forks: issue 4".into())),
        f => {
            return Err(Error::Invalid(format!(
                "data fork format {f} has no extent map"
            )))
        }
    }
    let fork = di::data_fork(d);
    let max_recs = fork.len() / EXTENT_REC_SIZE;
    let n = di::nextents(d);
    if n > max_recs as u64 {
        return Err(bad(format!("{n} extents in a fork that holds {max_recs}")));
    }
    let mut exts = Vec::with_capacity(n as usize);
    for i in 0..n as usize {
        let e = Extent::decode(&fork[i * EXTENT_REC_SIZE..(i + 1) * EXTENT_REC_SIZE]);
        if !geo.fsb_extent_valid(FsBlock(e.start), e.len) {
            return Err(bad(format!(
                "extent {i} ({} blocks at fsblock {}) outside one AG",
                e.len, e.start
            )));
        }
        exts.push(e);
    }
    let map = ExtentMap::new(exts, geo.agblklog);
    map.check().map_err(bad)?;
    Ok((map, max_recs))
}

/// Write the map into the fork (unused record space zeroed), di_nextents,
/// and di_nblocks += `delta`.
pub fn store(
    tx: &mut dyn MetaTx,
    ip: InodeId,
    which: WhichFork,
    old: &ExtentMap,
    map: &ExtentMap,
    delta: i64,
) -> Result<()> {
    if which == WhichFork::Attr {
        return Err(Error::NotSupported(
            "attr fork extent maps (bmapop::fork)".into(),
        ));
    }
    let ino = crate::types::Ino(di::ino(tx.inode(ip)));
    crate::rmap::rmap_map_delta(tx, ino, which, &old.exts, &map.exts)?;
    let d = tx.inode_mut(ip);
    let at = Location::Ino(di::ino(d));
    let nblocks = di::nblocks(d)
        .checked_add_signed(delta)
        .ok_or_else(|| Error::corrupt("inode", at, "di_nblocks would wrap"))?;
    let fork = di::data_fork_mut(d);
    debug_assert!(map.exts.len() * EXTENT_REC_SIZE <= fork.len());
    for (i, e) in map.exts.iter().enumerate() {
        e.encode(&mut fork[i * EXTENT_REC_SIZE..(i + 1) * EXTENT_REC_SIZE]);
    }
    fork[map.exts.len() * EXTENT_REC_SIZE..].fill(0);
    di::set_nextents(d, map.exts.len() as u64);
    di::set_nblocks(d, nblocks);
    Ok(())
}
