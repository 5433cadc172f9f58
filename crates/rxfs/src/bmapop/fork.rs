//! Loading and storing a fork's extent map in a joined inode.
//!
//! [`load`] decodes the whole mapping of a fork into an [`ExtentMap`];
//! [`store`] writes an edited map back, given the map as it was loaded, so
//! that a BTREE-format fork can apply only the records that changed (and a
//! filesystem with the reverse-mapping btree can log exactly the mappings
//! that appeared and disappeared). Every edit of a fork's mappings goes
//! through this pair.
//!
//! Where a fork lives in the dinode:
//! ```text
//! data fork: format at 5 (di_format), count di_nextents, bytes 176 .. 176 + forkoff*8
//! attr fork: format at 83 (di_aformat), count di_anextents, bytes 176 + forkoff*8 .. end
//! ```
//! An attr fork exists only when di_forkoff != 0.
//!
//! Today: EXTENTS-format data and attr forks. BTREE-format forks are
//! `NotSupported` (issue 4: bmbt).

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

impl WhichFork {
    fn name(self) -> &'static str {
        match self {
            WhichFork::Data => "inode data fork",
            WhichFork::Attr => "inode attr fork",
        }
    }
}

/// The format byte of a fork (di_format or di_aformat).
pub fn fork_format(d: &[u8], which: WhichFork) -> u8 {
    match which {
        WhichFork::Data => di::format(d),
        WhichFork::Attr => di::aformat(d),
    }
}

/// The record count of a fork (di_nextents or di_anextents).
pub fn fork_nextents(d: &[u8], which: WhichFork) -> u64 {
    match which {
        WhichFork::Data => di::nextents(d),
        WhichFork::Attr => di::anextents(d) as u64,
    }
}

fn set_fork_nextents(d: &mut [u8], which: WhichFork, n: u64) {
    match which {
        WhichFork::Data => di::set_nextents(d, n),
        WhichFork::Attr => di::set_anextents(d, n as u32),
    }
}

/// The bytes of a fork in the literal area.
pub fn fork_bytes(d: &[u8], which: WhichFork) -> &[u8] {
    match which {
        WhichFork::Data => di::data_fork(d),
        WhichFork::Attr => di::attr_fork(d),
    }
}

fn fork_bytes_mut(d: &mut [u8], which: WhichFork) -> &mut [u8] {
    match which {
        WhichFork::Data => di::data_fork_mut(d),
        WhichFork::Attr => di::attr_fork_mut(d),
    }
}

/// Decode and check a fork of a joined inode; returns the map and the most
/// records the fork can hold.
pub fn load(tx: &mut dyn MetaTx, ip: InodeId, which: WhichFork) -> Result<(ExtentMap, usize)> {
    let d = tx.inode(ip);
    let geo = tx.geo();
    let at = Location::Ino(di::ino(d));
    let bad = |detail: String| Error::corrupt(which.name(), at, detail);
    if which == WhichFork::Data && di::flags(d) & DIFLAG_REALTIME != 0 {
        return Err(Error::NotSupported(
            "realtime files: data fork editing".into(),
        ));
    }
    if which == WhichFork::Attr && di::forkoff(d) == 0 {
        return Err(Error::Invalid("the inode has no attr fork".into()));
    }
    match fork_format(d, which) {
        FMT_EXTENTS => {}
        FMT_BTREE => return Err(Error::NotSupported("btree forks: issue 4".into())),
        f => {
            return Err(Error::Invalid(format!(
                "{} format {f} has no extent map",
                which.name()
            )))
        }
    }
    let fork = fork_bytes(d, which);
    let max_recs = fork.len() / EXTENT_REC_SIZE;
    let n = fork_nextents(d, which);
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
        if which == WhichFork::Attr && e.unwritten {
            return Err(bad(format!("extent {i} of the attr fork is unwritten")));
        }
        exts.push(e);
    }
    let map = ExtentMap::new(exts, geo.agblklog);
    map.check().map_err(bad)?;
    Ok((map, max_recs))
}

/// Write the map into the fork (unused record space zeroed), the fork's
/// extent count, and di_nblocks += `delta`.
pub fn store(
    tx: &mut dyn MetaTx,
    ip: InodeId,
    which: WhichFork,
    old: &ExtentMap,
    map: &ExtentMap,
    delta: i64,
) -> Result<()> {
    let _ = old;
    let d = tx.inode_mut(ip);
    let at = Location::Ino(di::ino(d));
    if which == WhichFork::Attr && di::forkoff(d) == 0 {
        return Err(Error::Invalid("the inode has no attr fork".into()));
    }
    if fork_format(d, which) != FMT_EXTENTS {
        return Err(Error::NotSupported("btree forks: issue 4".into()));
    }
    let nblocks = di::nblocks(d)
        .checked_add_signed(delta)
        .ok_or_else(|| Error::corrupt("inode", at, "di_nblocks would wrap"))?;
    let fork = fork_bytes_mut(d, which);
    if map.exts.len() * EXTENT_REC_SIZE > fork.len() {
        return Err(Error::NotSupported("btree forks: issue 4".into()));
    }
    for (i, e) in map.exts.iter().enumerate() {
        e.encode(&mut fork[i * EXTENT_REC_SIZE..(i + 1) * EXTENT_REC_SIZE]);
    }
    fork[map.exts.len() * EXTENT_REC_SIZE..].fill(0);
    set_fork_nextents(d, which, map.exts.len() as u64);
    di::set_nblocks(d, nblocks);
    Ok(())
}
