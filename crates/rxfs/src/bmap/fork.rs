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
//! A fork whose records fit in the literal area (`fork bytes / 16`) is
//! stored in EXTENTS format, else as a bmbt ([`super::bmbt`]); [`store`]
//! converts in both directions, so a BTREE-format fork always holds more
//! records than fit inline (as `xfs_repair` requires). The record count is
//! limited by the extent counters (31/15 bits, 48/32 with NREXT64).

use super::bmbt::{self, Editor};
use super::map::ExtentMap;
use crate::error::{Error, Location, Result};
use crate::format::bmbt::{Extent, EXTENT_REC_SIZE};
use crate::format::dinode_edit as di;
use crate::format::inode::{DIFLAG_REALTIME, FMT_BTREE, FMT_EXTENTS};
use crate::types::FsBlock;
use crate::types::WhichFork;
use crate::xact::{InodeId, MetaTx};

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

fn set_fork_format(d: &mut [u8], which: WhichFork, f: u8) {
    match which {
        WhichFork::Data => di::set_format(d, f),
        WhichFork::Attr => di::set_aformat(d, f),
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

pub(super) fn fork_bytes_mut(d: &mut [u8], which: WhichFork) -> &mut [u8] {
    match which {
        WhichFork::Data => di::data_fork_mut(d),
        WhichFork::Attr => di::attr_fork_mut(d),
    }
}

/// Decode and check a fork of a joined inode; returns the map and the most
/// records the fork can hold.
pub fn load(tx: &mut dyn MetaTx, ip: InodeId, which: WhichFork) -> Result<(ExtentMap, usize)> {
    let d = tx.inode(ip);
    let at = Location::Ino(di::ino(d));
    let bad = |detail: String| Error::corrupt(which.name(), at, detail);
    let rt = which == WhichFork::Data && di::flags(d) & DIFLAG_REALTIME != 0;
    if which == WhichFork::Attr && di::forkoff(d) == 0 {
        return Err(Error::Invalid("the inode has no attr fork".into()));
    }
    let limit = max_extents(d, which);
    let n = fork_nextents(d, which);
    if n > limit as u64 {
        return Err(bad(format!("{n} extents, more than the counter allows")));
    }
    let fork = fork_bytes(d, which);
    let inline = fork.len() / EXTENT_REC_SIZE;
    let raw = match fork_format(d, which) {
        FMT_EXTENTS => {
            if n > inline as u64 {
                return Err(bad(format!("{n} extents in a fork that holds {inline}")));
            }
            (0..n as usize)
                .map(|i| Extent::decode(&fork[i * EXTENT_REC_SIZE..(i + 1) * EXTENT_REC_SIZE]))
                .collect()
        }
        FMT_BTREE => bmbt::walk(tx, ip, which, n)?.1,
        f => {
            return Err(Error::Invalid(format!(
                "{} format {f} has no extent map",
                which.name()
            )))
        }
    };
    let geo = tx.geo();
    let rblocks = tx.sb().rblocks;
    let mut exts = Vec::with_capacity(raw.len());
    for (i, e) in raw.into_iter().enumerate() {
        if rt {
            if e.start.checked_add(e.len).is_none_or(|end| end > rblocks) {
                return Err(bad(format!(
                    "extent {i} ({} blocks at rt block {}) past the realtime device",
                    e.len, e.start
                )));
            }
        } else if !geo.fsb_extent_valid(FsBlock(e.start), e.len) {
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
    // Realtime blocks are one linear space: any two may merge.
    let map = ExtentMap::new(exts, if rt { 63 } else { geo.agblklog });
    map.check().map_err(bad)?;
    Ok((map, limit))
}

/// The most extents a fork's counter allows (the kernel's limits).
fn max_extents(d: &[u8], which: WhichFork) -> usize {
    let big = di::is_nrext64(d);
    let bits = match (which, big) {
        (WhichFork::Data, false) => 31,
        (WhichFork::Data, true) => 48,
        (WhichFork::Attr, false) => 15,
        (WhichFork::Attr, true) => 32,
    };
    ((1u64 << bits) - 1).min(usize::MAX as u64) as usize
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
    store_with(tx, ip, which, old, map, delta, false)
}

/// [`store`]; `low_first`: bmbt blocks are searched from AG 0 up (the
/// retry of an unmapping step after `NoSpace`, see [`Editor::low_first`]).
pub fn store_with(
    tx: &mut dyn MetaTx,
    ip: InodeId,
    which: WhichFork,
    old: &ExtentMap,
    map: &ExtentMap,
    delta: i64,
    low_first: bool,
) -> Result<()> {
    let d = tx.inode(ip);
    let at = Location::Ino(di::ino(d));
    if which == WhichFork::Attr && di::forkoff(d) == 0 {
        return Err(Error::Invalid("the inode has no attr fork".into()));
    }
    if map.exts.len() > max_extents(d, which) {
        return Err(Error::NotSupported(
            "more extents than the fork's counter allows".into(),
        ));
    }
    let ino = crate::types::Ino(di::ino(d));
    crate::rmap::rmap_map_delta(tx, ino, which, &old.exts, &map.exts)?;
    let d = tx.inode(ip);
    let inline = fork_bytes(d, which).len() / EXTENT_REC_SIZE;
    let fits = map.exts.len() <= inline;
    let tree_delta = match fork_format(d, which) {
        FMT_EXTENTS if fits => 0,
        FMT_EXTENTS => {
            let mut ed = Editor::empty(tx, ip, which);
            ed.low_first = low_first;
            ed.build(&map.exts)?;
            let dl = ed.delta;
            set_fork_format(tx.inode_mut(ip), which, FMT_BTREE);
            dl
        }
        FMT_BTREE => {
            let n = fork_nextents(d, which);
            let (tree, recs) = bmbt::walk(tx, ip, which, n)?;
            if recs != old.exts {
                return Err(Error::Invalid(
                    "bmap::store: the old map is not the fork's".into(),
                ));
            }
            let mut ed = Editor {
                tx: &mut *tx,
                ip,
                tree,
                delta: 0,
                low_first,
            };
            if fits {
                ed.destroy()?;
                let dl = ed.delta;
                set_fork_format(tx.inode_mut(ip), which, FMT_EXTENTS);
                dl
            } else {
                let (a, b, ins) = changed_range(&old.exts, &map.exts);
                ed.splice_recs(a, b, ins)?;
                ed.delta
            }
        }
        f => {
            return Err(Error::Invalid(format!(
                "{} format {f} has no extent map",
                which.name()
            )))
        }
    };
    let d = tx.inode_mut(ip);
    let nblocks = di::nblocks(d)
        .checked_add_signed(delta + tree_delta)
        .ok_or_else(|| Error::corrupt("inode", at, "di_nblocks would wrap"))?;
    if fits {
        let fork = fork_bytes_mut(d, which);
        for (i, e) in map.exts.iter().enumerate() {
            e.encode(&mut fork[i * EXTENT_REC_SIZE..(i + 1) * EXTENT_REC_SIZE]);
        }
        fork[map.exts.len() * EXTENT_REC_SIZE..].fill(0);
    }
    set_fork_nextents(d, which, map.exts.len() as u64);
    di::set_nblocks(d, nblocks);
    Ok(())
}

/// The records that differ: `old[a..b]` became `ins` (common prefix and
/// suffix left out).
fn changed_range<'a>(old: &[Extent], new: &'a [Extent]) -> (usize, usize, &'a [Extent]) {
    let p = old.iter().zip(new).take_while(|(x, y)| x == y).count();
    let max_s = old.len().min(new.len()) - p;
    let s = old
        .iter()
        .rev()
        .zip(new.iter().rev())
        .take(max_s)
        .take_while(|(x, y)| x == y)
        .count();
    (p, old.len() - s, &new[p..new.len() - s])
}

/// Move the data/attr fork boundary of a joined inode to `forkoff` (in
/// 8-byte units; 0 = no attr fork) and keep the data fork valid in its
/// new size: a BTREE root is laid out again for the new size (growing a
/// level when it no longer fits, converting to EXTENTS when the records
/// now fit inline); an EXTENTS fork whose records no longer fit becomes a
/// bmbt. di_nblocks follows the bmbt blocks. The attr fork's bytes are the
/// caller's (write them after this call); a LOCAL data fork must still
/// fit (`Invalid` otherwise), and nothing changes on error.
pub fn set_forkoff(tx: &mut dyn MetaTx, ip: InodeId, forkoff: u8) -> Result<()> {
    let d = tx.inode(ip);
    let lit = d.len() - crate::format::inode::DINODE_V3_CORE_SIZE;
    let new_size = match forkoff as usize * 8 {
        0 => lit,
        n if n <= lit => n,
        n => return Err(Error::Invalid(format!("fork offset {n} past the inode"))),
    };
    let which = WhichFork::Data;
    let at = Location::Ino(di::ino(d));
    match di::format(d) {
        FMT_EXTENTS | FMT_BTREE => {}
        _ => {
            if di::size(d) as usize > new_size {
                return Err(Error::Invalid(
                    "inline data does not fit the new fork".into(),
                ));
            }
            di::set_forkoff(tx.inode_mut(ip), forkoff);
            return Ok(());
        }
    }
    let (map, _) = load(tx, ip, which)?;
    let fits = map.exts.len() <= new_size / EXTENT_REC_SIZE;
    let delta = match di::format(tx.inode(ip)) {
        FMT_EXTENTS if fits => {
            di::set_forkoff(tx.inode_mut(ip), forkoff);
            0
        }
        FMT_EXTENTS => {
            di::set_forkoff(tx.inode_mut(ip), forkoff);
            let mut ed = Editor::empty(tx, ip, which);
            ed.build(&map.exts)?;
            let dl = ed.delta;
            set_fork_format(tx.inode_mut(ip), which, FMT_BTREE);
            dl
        }
        _ => {
            let n = fork_nextents(tx.inode(ip), which);
            let (tree, _) = bmbt::walk(tx, ip, which, n)?;
            di::set_forkoff(tx.inode_mut(ip), forkoff);
            let mut ed = Editor {
                tx: &mut *tx,
                ip,
                tree,
                delta: 0,
                low_first: false,
            };
            if fits {
                ed.destroy()?;
                let dl = ed.delta;
                set_fork_format(tx.inode_mut(ip), which, FMT_EXTENTS);
                let fork = di::data_fork_mut(tx.inode_mut(ip));
                fork.fill(0);
                for (i, e) in map.exts.iter().enumerate() {
                    e.encode(&mut fork[i * EXTENT_REC_SIZE..(i + 1) * EXTENT_REC_SIZE]);
                }
                dl
            } else {
                ed.relayout_root()?;
                ed.delta
            }
        }
    };
    let d = tx.inode_mut(ip);
    let nblocks = di::nblocks(d)
        .checked_add_signed(delta)
        .ok_or_else(|| Error::corrupt("inode", at, "di_nblocks would wrap"))?;
    di::set_nblocks(d, nblocks);
    Ok(())
}
