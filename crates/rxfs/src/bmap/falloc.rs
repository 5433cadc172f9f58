//! Bounded steps of fallocate(2) on a data fork, generic over [`MetaTx`]:
//! preallocate unwritten blocks, unmap (punch) a range, shift the
//! mappings past a point left (collapse) or right (insert). Each step does
//! a bounded amount of work (at most [`FALLOC_TX_BLOCKS`] new blocks, or
//! [`FALLOC_TX_EXTENTS`] extents unmapped or moved) so that one
//! transaction's log reservation holds it, and returns where it stopped;
//! `fs/ops_falloc.rs` loops, one transaction per step.
//!
//! Invariants: every step leaves a consistent fork (sorted, non-overlapping
//! mappings); a crash between steps leaves a file whose mappings are a mix
//! of before and after, as with the kernel (which also shifts extent by
//! extent). Unmapped blocks are freed as deferred frees (EFI, then free).
//! On `Err` the step changed nothing the caller may commit, except that
//! an allocator error requires cancelling the transaction.

use super::data::{refuse_reflink, require_regular};
use super::fork::store_with;
use super::map::{self, ExtentMap};
use super::{alloc_unit, is_rt, load, release, store, Placement, RtSpace, TxSpace, RT_TX_EXTENTS};
use crate::error::{Error, Result};
use crate::format::bmbt::MAX_STARTOFF;
use crate::types::Ino;
use crate::types::WhichFork;
use crate::xact::{InodeId, MetaTx};

/// Most new blocks one preallocation step maps.
pub const FALLOC_TX_BLOCKS: u64 = 1024;
/// Most extents one unmap or shift step touches.
pub const FALLOC_TX_EXTENTS: usize = 32;

/// Map every hole of file blocks `[fb0, fb1)` to new unwritten blocks,
/// stopping after `max_blocks` (at most [`FALLOC_TX_BLOCKS`]); returns the
/// file block where the step stopped (`fb1` when done). `NoSpace` when a
/// hole remains and `max_blocks` is 0.
pub fn prealloc_step(
    tx: &mut dyn MetaTx,
    ip: InodeId,
    ino: Ino,
    range: (u64, u64),
    place: Placement,
    max_blocks: u64,
) -> Result<u64> {
    let (fb0, fb1) = range;
    require_regular(&*tx, ip)?;
    if fb1 > MAX_STARTOFF + 1 {
        return Err(Error::Invalid("range past the largest file offset".into()));
    }
    let rt = is_rt(tx.inode(ip));
    let unit = alloc_unit(&*tx, tx.inode(ip));
    // Realtime: whole rt extents (the kernel rounds the same way).
    let (fb0, fb1) = (fb0 - fb0 % unit, fb1.div_ceil(unit) * unit);
    if rt {
        tx.rt_lock()?;
    }
    let (mut map, max_recs) = load(tx, ip, WhichFork::Data)?;
    let old = map.clone();
    // At least one allocation unit (an rt extent may be larger than a
    // step's usual budget).
    let mut budget = max_blocks
        .min(FALLOC_TX_BLOCKS)
        .max(if rt { unit } else { 0 });
    let mut cut = fb1;
    for (h, n) in map.holes(fb0, fb1.saturating_sub(fb0)) {
        if n > budget {
            cut = (h + budget) / unit * unit;
            break;
        }
        budget -= n;
    }
    if cut <= fb0 {
        return Err(Error::NoSpace);
    }
    if map.holes(fb0, cut - fb0).is_empty() {
        return Ok(cut);
    }
    if rt {
        let mut space = RtSpace {
            tx: &mut *tx,
            r: unit,
        };
        let new = map::fill(&mut map, fb0, cut - fb0, max_recs, None, true, &mut space)?;
        if !new.is_empty() {
            let added: u64 = new.iter().map(|e| e.len).sum();
            store(tx, ip, WhichFork::Data, &old, &map, added as i64)?;
        }
        return Ok(cut);
    }
    let geo = tx.geo();
    let home = geo.agb_to_fsb(geo.ino_agno(ino), geo.agino_agbno(geo.ino_agino(ino)));
    let mut space = TxSpace {
        tx: &mut *tx,
        min_agno: 0,
        anywhere: place == Placement::Anywhere,
    };
    let new = map::fill(
        &mut map,
        fb0,
        cut - fb0,
        max_recs,
        Some(home.0),
        true,
        &mut space,
    )?;
    if !new.is_empty() {
        let added: u64 = new.iter().map(|e| e.len).sum();
        store(tx, ip, WhichFork::Data, &old, &map, added as i64)?;
    }
    Ok(cut)
}

/// Unmap file blocks `[fb0, fb1)` and free their blocks (deferred),
/// stopping after [`FALLOC_TX_EXTENTS`] extents; returns where the step
/// stopped. `low_first`: see [`super::fork::store_with`] (retry after
/// `NoSpace` in a fresh transaction).
pub fn unmap_step(
    tx: &mut dyn MetaTx,
    ip: InodeId,
    fb0: u64,
    fb1: u64,
    low_first: bool,
) -> Result<u64> {
    require_regular(&*tx, ip)?;
    let d = tx.inode(ip);
    let (rt, unit) = (is_rt(d), alloc_unit(&*tx, d));
    let step = if rt { RT_TX_EXTENTS } else { FALLOC_TX_EXTENTS };
    // Realtime: only whole rt extents are unmapped; the caller zeroes
    // the partial ones at either end.
    let (fb0, end) = (fb0.div_ceil(unit) * unit, fb1 / unit * unit);
    if fb0 >= end {
        return Ok(fb1);
    }
    if rt {
        tx.rt_lock()?;
    }
    let (mut map, _) = load(tx, ip, WhichFork::Data)?;
    let old = map.clone();
    let i = map.exts.partition_point(|e| e.end() <= fb0);
    let j = map.exts.partition_point(|e| e.off.0 < end);
    if i >= j {
        return Ok(fb1);
    }
    refuse_reflink(&*tx, ip)?;
    let cut = if j - i > step {
        let c = map.exts[i + step].off.0;
        (c - c % unit).max(fb0 + unit)
    } else {
        end
    };
    let freed = map.remove_range(fb0, cut);
    let total: u64 = freed.iter().map(|f| f.1).sum();
    release(tx, rt, freed)?;
    store_with(
        tx,
        ip,
        WhichFork::Data,
        &old,
        &map,
        -(total as i64),
        low_first,
    )?;
    Ok(if cut >= end { fb1 } else { cut })
}

/// Collapse step: move the mappings at or past file block `from` left by
/// `by` blocks (the `by` blocks below `from` must be unmapped), at most
/// [`FALLOC_TX_EXTENTS`] of them, merging with the left neighbour where
/// possible. Returns the next `from` (`None` when every mapping moved).
pub fn shift_left_step(
    tx: &mut dyn MetaTx,
    ip: InodeId,
    from: u64,
    by: u64,
) -> Result<Option<u64>> {
    require_regular(&*tx, ip)?;
    let (mut map, _) = load(tx, ip, WhichFork::Data)?;
    let old = map.clone();
    let i = map.exts.partition_point(|e| e.off.0 < from);
    if i == map.exts.len() {
        return Ok(None);
    }
    if from < by || (i > 0 && map.exts[i - 1].end() > from - by) {
        return Err(Error::Invalid(
            "collapse: the range below the shifted mappings is not a hole".into(),
        ));
    }
    let j = (i + FALLOC_TX_EXTENTS).min(map.exts.len());
    let next = map.exts.get(j).map(|e| e.off.0);
    for e in &mut map.exts[i..j] {
        e.off.0 -= by;
    }
    map.normalize();
    store(tx, ip, WhichFork::Data, &old, &map, 0)?;
    Ok(next)
}

/// Insert step: move the mappings in `[from, upto)` right by `by` blocks,
/// at most [`FALLOC_TX_EXTENTS`] of them, the highest first (so the list
/// stays sorted); a mapping straddling `from` is split there first.
/// Returns the next `upto` (`None` when every mapping at or past `from`
/// moved).
pub fn shift_right_step(
    tx: &mut dyn MetaTx,
    ip: InodeId,
    from: u64,
    upto: u64,
    by: u64,
) -> Result<Option<u64>> {
    require_regular(&*tx, ip)?;
    let (mut map, _) = load(tx, ip, WhichFork::Data)?;
    let old = map.clone();
    map.split_at(from);
    if let Some(last) = map.exts.last() {
        if last.end().saturating_add(by) > MAX_STARTOFF + 1 {
            return Err(Error::Invalid(
                "insert: past the largest file offset".into(),
            ));
        }
    }
    let i = map.exts.partition_point(|e| e.off.0 < from);
    let j = map.exts.partition_point(|e| e.off.0 < upto);
    if i >= j {
        if map != old {
            store(tx, ip, WhichFork::Data, &old, &map, 0)?;
        }
        return Ok(None);
    }
    let k = j.saturating_sub(FALLOC_TX_EXTENTS).max(i);
    let next = map.exts[k].off.0;
    if let Some(after) = map.exts.get(j) {
        debug_assert!(map.exts[j - 1].end() + by <= after.off.0);
    }
    for e in &mut map.exts[k..j] {
        e.off.0 += by;
    }
    store(tx, ip, WhichFork::Data, &old, &map, 0)?;
    Ok((k > i).then_some(next))
}

/// The data fork's mappings (for SEEK_DATA/SEEK_HOLE and tests).
pub fn data_map(tx: &mut dyn MetaTx, ip: InodeId) -> Result<ExtentMap> {
    Ok(load(tx, ip, WhichFork::Data)?.0)
}
