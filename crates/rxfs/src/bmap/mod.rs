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
//! Not handled (refused with `NotSupported`): realtime files, and freeing
//! blocks of inodes flagged REFLINK (they may be shared: the refcount
//! btree would have to decide).

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

use crate::types::WhichFork;
pub use fork::{load, store};
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
    let (mut map, max_recs) = load(tx, ip, WhichFork::Data)?;
    let old = map.clone();
    let converted = if convert {
        map.mark_written(off.0, off.0.saturating_add(count))
    } else {
        Vec::new()
    };
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

/// Remove every mapping at or beyond file block `from` and free its blocks
/// (truncate). The caller sets di_size. The frees are deferred
/// ([`MetaTx::defer_free`]): this transaction logs the unmapping and an
/// extent-free intent, follow-up transactions free the space.
pub fn free_range(tx: &mut dyn MetaTx, ip: InodeId, from: FileBlock) -> Result<()> {
    let (mut map, _) = load(tx, ip, WhichFork::Data)?;
    let old = map.clone();
    let d = tx.inode(ip);
    if map.exts.iter().any(|e| e.end() > from.0) && di::flags2(d) & DIFLAG2_REFLINK != 0 {
        return Err(Error::NotSupported(
            "freeing blocks of a reflinked file (shared extents)".into(),
        ));
    }
    let mut freed = map.truncate(from.0);
    if freed.is_empty() {
        return Ok(());
    }
    // Ascending fsblock = ascending AG: the AGF lock order.
    freed.sort_unstable();
    let total: u64 = freed.iter().map(|f| f.1).sum();
    for (start, len) in freed {
        let geo = tx.geo();
        let fsb = FsBlock(start);
        let (agno, agbno) = (geo.fsb_agno(fsb), geo.fsb_agbno(fsb));
        tx.defer_free(agno, agbno, len as u32)?;
    }
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
    let (cut, more) = if n > TRUNCATE_TX_EXTENTS {
        (map.exts[map.exts.len() - TRUNCATE_TX_EXTENTS].off.0, true)
    } else {
        (from.0, false)
    };
    let mut freed = map.truncate(cut);
    freed.sort_unstable();
    let total: u64 = freed.iter().map(|f| f.1).sum();
    for (start, len) in freed {
        let geo = tx.geo();
        let fsb = FsBlock(start);
        tx.defer_free(geo.fsb_agno(fsb), geo.fsb_agbno(fsb), len as u32)?;
    }
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
