//! Fork extent map editing: EXTENTS and BTREE (bmbt) forks, data and attr.
//!
//! The data fork of an EXTENTS-format inode is an array of packed 16-byte
//! extent records in the inode's literal area, right after the 176-byte
//! core, sorted by file offset:
//! ```text
//! 176: rec 0 | rec 1 | ... | rec n-1 | (unused, kept zero) | attr fork at 176 + forkoff*8
//!      rec = l0: [63] unwritten [62..9] startoff [8..0] startblock hi
//!            l1: [63..21] startblock lo [20..0] blockcount
//! ```
//! `n` is di_nextents (32 bits at 76, or 64 bits at 24 with NREXT64); at
//! most `data fork bytes / 16` records fit. A fork that needs more becomes
//! a bmbt (BTREE format, [`bmbt`]); [`fork::store`] converts both ways.
//!
//! Invariants kept (on top of [`map::ExtentMap`]'s list invariants):
//! - di_nextents = number of records; di_nblocks changes by exactly the
//!   blocks mapped or unmapped here (it also counts attr fork blocks);
//! - every mapping lies in one AG, and is allocated in the free-space
//!   btrees ([`crate::alloc`]) before it is inserted; an unmapped extent
//!   is freed as a deferred operation ([`MetaTx::defer_free`]: an EFI in
//!   the unmapping transaction, the free and its EFD in a follow-up), as
//!   the kernel does, so a truncate's transaction stays small;
//! - within one call, allocations never move to a lower AG than one
//!   already used (AGF lock order, see [`crate::xact`]);
//! - on error the fork is unchanged; when the refusal is the extent
//!   limit (`NotSupported`) every block the call allocated was freed again
//!   and the transaction may still commit; after any other error (the
//!   allocator's) the transaction must be cancelled.
//!
//! Layers: [`map`] edits an in-memory extent list (pure, unit-tested
//! against a block model); [`fork`] loads/stores it in the joined inode
//! (inline records, or a bmbt through [`bmbt`], which edits only the
//! blocks whose records changed); this module allocates/frees through
//! [`crate::alloc`]; [`data`] builds the file operations (write step, size
//! change, setattr) on top, used by `fs/ops_data.rs`; [`falloc`] the
//! bounded steps of fallocate (`fs/ops_falloc.rs`); [`attrfork`] maps and
//! unmaps attr fork blocks for the xattr code.
//!
//! With the reverse-mapping btree, [`store`] brings the rmap records in
//! line with the new map ([`crate::rmap::rmap_map_delta`]): a truncate
//! removes them in its own transaction, the deferred free that follows
//! only frees space.
//!
//! Realtime files (DIFLAG_REALTIME) map rt blocks of the realtime
//! device: their new blocks come from [`crate::rtalloc`] (`RtSpace`) in
//! whole realtime extents, file offsets aligned to `rextsize` as the
//! kernel aligns them (a write's range is widened to whole rt extents and
//! the caller zeroes what the data does not cover), and unmapped rt
//! extents are freed in the unmapping transaction itself ([`release`]).
//! The realtime lock is taken before anything else a data-fork change
//! locks (the bmbt's AGFs), see [`crate::xact`].
//!
//! Not handled (refused with `NotSupported`): freeing blocks of inodes
//! flagged REFLINK (they may be shared: the refcount btree would have to
//! decide).

pub mod attrfork;
pub mod bmbt;
mod bmbt_walk;
pub mod data;
pub mod falloc;
pub mod fork;
pub mod map;
pub mod prealloc;
pub mod read;

/// Lock order help for operations whose rmap edits come late: join, in
/// ascending order, the AGF of every AG where the data or attr fork of one
/// of `inodes` (EXTENTS format) has blocks, and of the AGs in `also` (where
/// an inode chunk may be freed), so that the later edits find their AGFs
/// already held instead of locking a lower AG after a higher one. Call it
/// after the AGIs the operation needs and before any AGF.
pub fn prelock_fork_agfs(
    tx: &mut dyn MetaTx,
    inodes: &[crate::xact::InodeId],
    also: &[AgNumber],
) -> Result<()> {
    use crate::format::dinode_edit as di;
    use crate::format::inode::FMT_EXTENTS;
    if !tx.sb().has_rmapbt() {
        return Ok(());
    }
    let mut ags: std::collections::BTreeSet<u32> = also.iter().map(|a| a.0).collect();
    for &ip in inodes {
        let d = tx.inode(ip);
        let attr_mapped = di::forkoff(d) != 0 && di::aformat(d) == FMT_EXTENTS;
        let mut forks = Vec::new();
        if di::format(d) == FMT_EXTENTS {
            forks.push(WhichFork::Data);
        }
        if attr_mapped {
            forks.push(WhichFork::Attr);
        }
        for w in forks {
            let (map, _) = load(tx, ip, w)?;
            let geo = tx.geo();
            ags.extend(map.exts.iter().map(|e| geo.fsb_agno(FsBlock(e.start)).0));
        }
    }
    for a in ags {
        crate::ag::lock_agf(tx, AgNumber(a))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;

use crate::alloc::{alloc_extent, free_extent, AllocReq};
use crate::error::{Error, Result};
use crate::format::bmbt::Extent;
use crate::format::dinode_edit as di;
use crate::format::inode::{Timestamp, DIFLAG2_REFLINK};
use crate::types::{AgBlock, AgNumber, FileBlock, FsBlock, Ino};
use crate::xact::{InodeId, MetaTx};

use crate::format::inode::DIFLAG_REALTIME;
use crate::types::WhichFork;
pub use fork::{load, store};

/// Most extents one transaction frees from a realtime file (each may
/// change many bitmap blocks; see the reservation in `fs::trans`).
pub const RT_TX_EXTENTS: usize = 4;

/// Whether the dinode `d` is a realtime file (its data fork maps rt blocks).
pub fn is_rt(d: &[u8]) -> bool {
    di::flags(d) & DIFLAG_REALTIME != 0
}

/// Blocks per allocation unit of the data fork of `d`: `rextsize` for a
/// realtime file, else 1.
pub fn alloc_unit(tx: &dyn MetaTx, d: &[u8]) -> u64 {
    if is_rt(d) {
        tx.sb().rextsize.max(1) as u64
    } else {
        1
    }
}

/// Most extents one truncate step unmaps from the data fork of `d`.
pub fn step_extents(d: &[u8]) -> usize {
    if is_rt(d) {
        RT_TX_EXTENTS
    } else {
        TRUNCATE_TX_EXTENTS
    }
}

/// Free block ranges just unmapped from a data fork: AG blocks as
/// deferred frees, realtime blocks (`rt`) now, whole rt extents (ranges
/// that touch are merged first; a range that leaves a partial rt extent
/// is refused, as callers unmap whole ones).
pub fn release(tx: &mut dyn MetaTx, rt: bool, mut freed: Vec<(u64, u64)>) -> Result<()> {
    freed.sort_unstable();
    if !rt {
        for (start, len) in freed {
            let geo = tx.geo();
            let fsb = FsBlock(start);
            tx.defer_free(geo.fsb_agno(fsb), geo.fsb_agbno(fsb), len as u32)?;
        }
        return Ok(());
    }
    let r = tx.sb().rextsize.max(1) as u64;
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (s, l) in freed {
        match merged.last_mut() {
            Some((ps, pl)) if *ps + *pl == s => *pl += l,
            _ => merged.push((s, l)),
        }
    }
    for (s, l) in merged {
        if s % r != 0 || l % r != 0 {
            return Err(Error::Invalid(format!(
                "freeing rt blocks {s}+{l}: not whole rt extents of {r} blocks"
            )));
        }
        crate::rtalloc::free(tx, s / r, l / r)?;
    }
    Ok(())
}
pub use map::{ExtentMap, Space};

/// Where new blocks go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Placement {
    /// Next to the previous mapping (or the next one, or the inode),
    /// moving only to higher AGs when that AG is full.
    #[default]
    Near,
    /// The first allocation searches every AG from AG 0 up: for a retry
    /// in a fresh transaction after `Near` found no space (a transaction
    /// never moves back to a lower AG, see [`crate::xact`]'s lock order).
    Anywhere,
}

/// The data fork's mappings of a joined inode, sorted by file offset.
pub fn read_map(tx: &mut dyn MetaTx, ip: InodeId) -> Result<Vec<Extent>> {
    Ok(load(tx, ip, WhichFork::Data)?.0.exts)
}

/// Allocate blocks for every hole in `[off, off + count)` of the data fork
/// of `ip` (inode number `ino`); returns the new mappings (written state),
/// sorted. Updates the fork, di_nextents and di_nblocks. The caller writes
/// the data (or zeros) to the new blocks before the transaction commits.
pub fn alloc_range(
    tx: &mut dyn MetaTx,
    ip: InodeId,
    ino: Ino,
    off: FileBlock,
    count: u64,
) -> Result<Vec<Extent>> {
    Ok(map_range(tx, ip, ino, off, count, false, Placement::Near)?.0)
}

/// Make `[off, off + count)` ready for a data write: unwritten mappings in
/// it become written, holes get new blocks. Returns `(new, converted)`:
/// both lists are blocks that the caller must write whole (data, zeros
/// elsewhere) before the transaction commits; other blocks of the range
/// were already written. `place` says where new blocks go. The extent-count limit is checked before
/// anything changes when the conversion alone would exceed it.
pub fn prepare_write(
    tx: &mut dyn MetaTx,
    ip: InodeId,
    ino: Ino,
    off: FileBlock,
    count: u64,
    place: Placement,
) -> Result<(Vec<Extent>, Vec<Extent>)> {
    map_range(tx, ip, ino, off, count, true, place)
}

fn map_range(
    tx: &mut dyn MetaTx,
    ip: InodeId,
    ino: Ino,
    off: FileBlock,
    count: u64,
    convert: bool,
    place: Placement,
) -> Result<(Vec<Extent>, Vec<Extent>)> {
    let rt = is_rt(tx.inode(ip));
    if rt {
        tx.rt_lock()?;
    }
    let (mut map, max_recs) = load(tx, ip, WhichFork::Data)?;
    let old = map.clone();
    let converted = if convert {
        map.mark_written(off.0, off.0.saturating_add(count))
    } else {
        Vec::new()
    };
    if rt {
        return map_range_rt(tx, ip, map, old, max_recs, converted, off.0, count);
    }
    if map.exts.len() > max_recs {
        return Err(Error::NotSupported(
            "more extents than the fork's counter allows".into(),
        ));
    }
    if !converted.is_empty() && tx.sb().has_rmapbt() {
        // Lock order: the conversion edits the rmapbt of the converted
        // blocks' AGs; join their AGFs (ascending) before the allocation
        // below, which then only moves to those AGs or higher ones.
        let geo = tx.geo();
        let ags: std::collections::BTreeSet<u32> = converted
            .iter()
            .map(|e| geo.fsb_agno(crate::types::FsBlock(e.start)).0)
            .collect();
        for a in ags {
            crate::alloc::lock_agf(tx, crate::types::AgNumber(a))?;
        }
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
        off.0,
        count,
        max_recs,
        Some(home.0),
        false,
        &mut space,
    )?;
    if !new.is_empty() || !converted.is_empty() {
        let added: u64 = new.iter().map(|e| e.len).sum();
        store(tx, ip, WhichFork::Data, &old, &map, added as i64)?;
    }
    Ok((new, converted))
}

/// [`map_range`] of a realtime file: the range widened to whole rt
/// extents (new mappings may then start before `off` or end after
/// `off + count`: the caller zeroes those blocks), allocated by
/// [`RtSpace`].
#[allow(clippy::too_many_arguments)]
fn map_range_rt(
    tx: &mut dyn MetaTx,
    ip: InodeId,
    mut map: ExtentMap,
    old: ExtentMap,
    max_recs: usize,
    converted: Vec<Extent>,
    off: u64,
    count: u64,
) -> Result<(Vec<Extent>, Vec<Extent>)> {
    if map.exts.len() > max_recs {
        return Err(Error::NotSupported(
            "more extents than the fork's counter allows".into(),
        ));
    }
    let r = tx.sb().rextsize.max(1) as u64;
    let lo = off - off % r;
    let hi = off.saturating_add(count).div_ceil(r) * r;
    let mut space = RtSpace { tx: &mut *tx, r };
    let new = map::fill(&mut map, lo, hi - lo, max_recs, None, false, &mut space)?;
    if !new.is_empty() || !converted.is_empty() {
        let added: u64 = new.iter().map(|e| e.len).sum();
        store(tx, ip, WhichFork::Data, &old, &map, added as i64)?;
    }
    Ok((new, converted))
}

/// [`Space`] on the realtime device: whole rt extents from
/// [`crate::rtalloc`], block numbers in rt blocks.
pub(crate) struct RtSpace<'a> {
    pub(crate) tx: &'a mut dyn MetaTx,
    /// `rextsize`.
    pub(crate) r: u64,
}

impl Space for RtSpace<'_> {
    fn alloc(&mut self, near: Option<u64>, maxlen: u64) -> Result<(u64, u64)> {
        let want = maxlen / self.r;
        if want == 0 {
            return Err(Error::Invalid(format!(
                "realtime allocation of {maxlen} blocks, less than one rt extent of {}",
                self.r
            )));
        }
        // No neighbour to follow: a new file, placed by the rotor.
        let near = match near {
            Some(b) => Some(b / self.r),
            None => Some(crate::rtalloc::pick_start(&mut *self.tx, want)?).filter(|&x| x > 0),
        };
        let (x, n) = crate::rtalloc::alloc(&mut *self.tx, near, 1, want)?;
        Ok((x * self.r, n * self.r))
    }

    fn free(&mut self, start: u64, len: u64) -> Result<()> {
        crate::rtalloc::free(&mut *self.tx, start / self.r, len / self.r)
    }
}

/// Remove every mapping at or beyond file block `from` (a realtime file:
/// from the start of the rt extent holding it) and free its blocks, for a
/// file being freed. The caller sets di_size. AG frees are deferred
/// ([`MetaTx::defer_free`]): this transaction logs the unmapping and an
/// extent-free intent, follow-up transactions free the space; realtime
/// extents are freed in this transaction ([`release`]).
pub fn free_range(tx: &mut dyn MetaTx, ip: InodeId, from: FileBlock) -> Result<()> {
    let (rt, unit) = (is_rt(tx.inode(ip)), alloc_unit(tx, tx.inode(ip)));
    // Whole rt extents: the cut goes down to one (the callers free a
    // file that lost its last link, from its end: every step frees
    // something).
    let from = FileBlock(from.0 / unit * unit);
    if rt {
        tx.rt_lock()?;
    }
    let (mut map, _) = load(tx, ip, WhichFork::Data)?;
    let old = map.clone();
    let d = tx.inode(ip);
    if map.exts.iter().any(|e| e.end() > from.0) && di::flags2(d) & DIFLAG2_REFLINK != 0 {
        return Err(Error::NotSupported(
            "freeing blocks of a reflinked file (shared extents)".into(),
        ));
    }
    let freed = map.truncate(from.0);
    if freed.is_empty() {
        return Ok(());
    }
    // Ascending fsblock = ascending AG: the AGF lock order.
    let total: u64 = freed.iter().map(|f| f.1).sum();
    release(tx, rt, freed)?;
    store(tx, ip, WhichFork::Data, &old, &map, -(total as i64))
}

/// Most extents one truncate transaction unmaps ([`free_tail`]).
pub const TRUNCATE_TX_EXTENTS: usize = 64;

/// Bounded truncate step: unmap the highest [`TRUNCATE_TX_EXTENTS`]
/// mappings at or beyond file block `from` (trimming one that straddles
/// it) and free their blocks (deferred). Returns whether mappings beyond
/// `from` remain (call again in a fresh transaction). Unmapping from the
/// end keeps each step's btree edit to the last leaves.
pub fn free_tail(
    tx: &mut dyn MetaTx,
    ip: InodeId,
    from: FileBlock,
    low_first: bool,
) -> Result<bool> {
    let d = tx.inode(ip);
    let (rt, unit, step) = (is_rt(d), alloc_unit(tx, d), step_extents(d));
    // A realtime file keeps the partial rt extent at the cut.
    let from = FileBlock(from.0.div_ceil(unit) * unit);
    if rt {
        tx.rt_lock()?;
    }
    let (mut map, _) = load(tx, ip, WhichFork::Data)?;
    let first = map.exts.partition_point(|e| e.end() <= from.0);
    let n = map.exts.len() - first;
    if n == 0 {
        return Ok(false);
    }
    if di::flags2(tx.inode(ip)) & DIFLAG2_REFLINK != 0 {
        return Err(Error::NotSupported(
            "freeing blocks of a reflinked file (shared extents)".into(),
        ));
    }
    let old = map.clone();
    let (cut, more) = if n > step {
        // Whole rt extents: the cut goes down to one (never below `from`,
        // which is aligned).
        let c = map.exts[map.exts.len() - step].off.0;
        ((c - c % unit).max(from.0), true)
    } else {
        (from.0, false)
    };
    let freed = map.truncate(cut);
    let total: u64 = freed.iter().map(|f| f.1).sum();
    release(tx, rt, freed)?;
    fork::store_with(
        tx,
        ip,
        WhichFork::Data,
        &old,
        &map,
        -(total as i64),
        low_first,
    )?;
    Ok(more)
}

/// Set di_size.
pub fn set_size(tx: &mut dyn MetaTx, ip: InodeId, size: u64) {
    di::set_size(tx.inode_mut(ip), size);
}

/// Set any of atime/mtime/ctime (bigtime-aware, clamped to the encoding).
pub fn set_times(
    tx: &mut dyn MetaTx,
    ip: InodeId,
    atime: Option<Timestamp>,
    mtime: Option<Timestamp>,
    ctime: Option<Timestamp>,
) {
    let d = tx.inode_mut(ip);
    if let Some(t) = atime {
        di::set_atime(d, t);
    }
    if let Some(t) = mtime {
        di::set_mtime(d, t);
    }
    if let Some(t) = ctime {
        di::set_ctime(d, t);
    }
}

/// [`Space`] on the free-space btrees of a transaction.
struct TxSpace<'a> {
    tx: &'a mut dyn MetaTx,
    /// No allocation below this AG (AGF lock order within the call).
    min_agno: u32,
    /// The next allocation ignores `near` and scans from AG `min_agno`.
    anywhere: bool,
}

impl Space for TxSpace<'_> {
    fn alloc(&mut self, near: Option<u64>, maxlen: u64) -> Result<(u64, u64)> {
        let geo = self.tx.geo();
        let (mut agno, mut agbno) = match near {
            Some(f) => {
                let fsb = FsBlock(f);
                (geo.fsb_agno(fsb), Some(geo.fsb_agbno(fsb)))
            }
            None => (AgNumber(self.min_agno), None),
        };
        if agno.0 < self.min_agno || agno.0 >= geo.agcount {
            agno = AgNumber(self.min_agno);
            agbno = None;
        }
        if agbno.is_some_and(|b| !geo.agbno_valid(agno, b)) || self.anywhere {
            agbno = None;
        }
        if self.anywhere {
            agno = AgNumber(self.min_agno);
            self.anywhere = false;
        }
        let req = AllocReq {
            agno,
            near: agbno,
            minlen: 1,
            maxlen: maxlen.min(u32::MAX as u64) as u32,
            align: 1,
            any_ag: true,
            meta: false,
        };
        let x = alloc_extent(&mut *self.tx, &req)?;
        let geo = self.tx.geo();
        let fsb = geo.agb_to_fsb(x.agno, x.agbno);
        if !geo.fsb_extent_valid(fsb, x.len as u64) || x.agno.0 < self.min_agno {
            return Err(Error::Invalid(format!(
                "allocator returned {} blocks at {}/{}",
                x.len, x.agno.0, x.agbno.0
            )));
        }
        self.min_agno = x.agno.0;
        Ok((fsb.0, x.len as u64))
    }

    fn free(&mut self, start: u64, len: u64) -> Result<()> {
        let geo = self.tx.geo();
        let fsb = FsBlock(start);
        let (agno, agbno): (AgNumber, AgBlock) = (geo.fsb_agno(fsb), geo.fsb_agbno(fsb));
        free_extent(&mut *self.tx, agno, agbno, len as u32)
    }
}
