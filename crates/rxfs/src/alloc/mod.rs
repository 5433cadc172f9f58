//! Free-space allocation: the AG free-space btrees (bnobt by block, cntbt
//! by size), the AG free list (AGFL), and generic editing of the short-form
//! AG btrees through the generic editor ([`crate::btree`]).
//!
//! ## Per AG state (all in the AGF and its trees)
//! ```text
//! AGF: freeblks  = blocks in free extents (both trees describe them)
//!      longest   = the longest free extent (the cntbt's last record)
//!      flcount.. = the AGFL: blocks reserved for bnobt/cntbt growth
//!      btreeblks = non-root blocks of bnobt + cntbt
//! ```
//! A block of the AG is exactly one of: AG header, in a free extent, on the
//! AGFL, a free-space btree block, or in use by something else.
//!
//! ## Counters
//! `sb_fdblocks` counts `freeblks + flcount + btreeblks` summed over the
//! AGs (the kernel counts free-space btree and AGFL blocks as free), so
//! only blocks handed to or taken back from callers change it:
//! [`alloc_extent`] does `mod_sb(FreeBlocks, -len)`, [`free_extent`]
//! `+len`; moving blocks between free extents, the AGFL and the free-space
//! btrees does not.
//!
//! ## Free list fix-up
//! Before every allocation and free in an AG the AGFL is brought to the
//! kernel's minimum (`xfs_alloc_min_freelist`: per free-space tree
//! `2 * min(level + 1, maxlevels) - 2`, i.e. a full split of the tree plus
//! a second split while refilling): short lists are refilled from the
//! free space (by size, no alignment, never busy blocks), long lists give
//! their excess back to the free space (those blocks become busy, as the
//! kernel marks them). Blocks a btree merge frees go onto the AGFL (busy);
//! blocks a split needs come off it.
//!
//! ## Allocation policy
//! - An AG is tried only if `freeblks + flcount - minimum AGFL >= minlen`
//!   and `longest >= minlen` (so a refill cannot eat the space asked for).
//! - With `near`: the bnobt is walked outwards from the target, closest
//!   records first; the first candidate of `maxlen` blocks closest to the
//!   target wins; if none within the scan, the size search's answer or the
//!   longest near candidate, whichever is longer.
//! - Without `near` (or in AGs after the first): the cntbt gives the
//!   smallest extent that holds `maxlen` (aligned, not busy), else the
//!   longest shorter one holding at least `minlen`.
//! - Starts are aligned to `align` AG-relatively (`agbno % align == 0`).
//! - Busy blocks (freed in a checkpoint not yet on disk) are never handed
//!   out; if an allocation fails and busy extents were in the way, the log
//!   is forced ([`MetaTx::force_busy`]) and the search runs once more.
//! - AGs: `req.agno` first; with `any_ag` then every *higher* AG in order.
//!   We never wrap to lower AGs inside one transaction (AGF lock order is
//!   ascending, see [`crate::xact`], and there is no trylock to do what the
//!   kernel does). A caller that wants the whole filesystem starts at AG 0,
//!   or on `NoSpace` cancels the transaction (safe: changes are private
//!   until commit) and retries from AG 0 in a new one.
//! - An AGF whose free list needs the kernel's "reset" (laid out by an old
//!   kernel with another slot count) is reported as corruption, not reset.
//! - Reverse mappings (rmapbt): blocks moved between the free space and
//!   the AGFL gain or lose their OWN_AG record here (free-space and rmap
//!   btree blocks come from the AGFL, so they are OWN_AG already); the
//!   AGFL minimum also covers an rmapbt split. The owner of an extent
//!   handed to or taken back from a caller is recorded by that caller
//!   ([`crate::rmap`]).
//! - Not done (yet): per-AG metadata reservations (the kernel holds back
//!   space for finobt/refcountbt/rmapbt growth), `meta` only documents
//!   intent.
//!
//! On any error the transaction is half changed and must be cancelled.

mod search;

pub use crate::ag::{agfl_blocks, lock_agf};

use crate::ag::{self as hdr, AGF_BNO_LEVEL, AGF_CNT_LEVEL, AGF_FREEBLKS, AGF_LONGEST};
use crate::error::{Error, Location, Result};
use crate::format::btree::BtreeKind;
use crate::types::{AgBlock, AgNumber};
use crate::xact::{BufId, MetaTx, SbCounter};
use search::Cand;

/// An allocation request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocReq {
    /// AG to start in.
    pub agno: AgNumber,
    /// Allocate as close as possible to this block of `agno`.
    pub near: Option<AgBlock>,
    /// Fewest blocks acceptable (>= 1).
    pub minlen: u32,
    /// Most blocks wanted (>= minlen; may exceed the AG: "as many as
    /// possible").
    pub maxlen: u32,
    /// The start must be a multiple of this (AG-relative); 1 = none.
    pub align: u32,
    /// May move on to higher AGs when `agno` has no room.
    pub any_ag: bool,
    /// The extent is for metadata (informational for now).
    pub meta: bool,
}

/// An allocated extent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AgExtent {
    pub agno: AgNumber,
    pub agbno: AgBlock,
    pub len: u32,
}

/// Fix-up rounds at most (each moves at least one block).
const FIX_ROUNDS_MAX: usize = 256;

/// The AGFL length the kernel wants for the current tree heights.
pub fn min_freelist(tx: &mut dyn MetaTx, agno: AgNumber) -> Result<u32> {
    let agf = hdr::agf(tx, agno)?;
    Ok(min_freelist_of(tx, agf))
}

fn min_freelist_of(tx: &dyn MetaTx, agf: BufId) -> u32 {
    let geo = tx.geo();
    let maxl = |k: BtreeKind| {
        k.max_levels(
            geo.blocksize as usize,
            geo.agblocks,
            geo.agino_log(),
            tx.sb().has_reflink(),
        )
    };
    let free = min_freelist_calc(
        hdr::get(tx, agf, AGF_BNO_LEVEL),
        hdr::get(tx, agf, AGF_CNT_LEVEL),
        maxl(BtreeKind::Bno),
    );
    if !tx.sb().has_rmapbt() {
        return free;
    }
    // The rmapbt takes its blocks from the AGFL too: room for its split.
    let rmap_level = hdr::get(tx, agf, hdr::AGF_RMAP_LEVEL);
    free + per_tree_reserve(rmap_level, maxl(BtreeKind::Rmap))
}

/// Per free-space tree, room for a split of every level plus a new root,
/// and for a second split below the old root while the AGFL is refilled:
/// `2 * min(level + 1, maxlevels) - 2`.
fn min_freelist_calc(bno_level: u32, cnt_level: u32, maxlevels: u32) -> u32 {
    per_tree_reserve(bno_level, maxlevels) + per_tree_reserve(cnt_level, maxlevels)
}

fn per_tree_reserve(level: u32, maxlevels: u32) -> u32 {
    2 * level.saturating_add(1).min(maxlevels).max(1) - 2
}

/// The allocator's services to the layers below it ([`crate::xact::AgSpace`]).
pub struct Allocator;

/// The one [`Allocator`], handed out by every transaction.
pub static ALLOCATOR: Allocator = Allocator;

impl crate::xact::AgSpace for Allocator {
    fn fix_freelist_for_rmap(&self, tx: &mut dyn MetaTx, agno: AgNumber) -> Result<()> {
        fix_freelist(tx, agno, true, &mut false)
    }

    fn alloc_inobt_block(
        &self,
        tx: &mut dyn MetaTx,
        agno: AgNumber,
        near: AgBlock,
    ) -> Result<AgBlock> {
        let req = AllocReq {
            agno,
            near: Some(near),
            minlen: 1,
            maxlen: 1,
            align: 1,
            any_ag: false,
            meta: true,
        };
        let AgExtent { agbno, .. } = alloc_extent(tx, &req)?;
        crate::rmap::rmap_alloc(tx, agno, agbno, 1, &crate::rmap::RmapOwner::Inobt)?;
        Ok(agbno)
    }

    fn free_inobt_block(&self, tx: &mut dyn MetaTx, agno: AgNumber, agbno: AgBlock) -> Result<()> {
        crate::rmap::rmap_free(tx, agno, agbno, 1, &crate::rmap::RmapOwner::Inobt)?;
        free_extent(tx, agno, agbno, 1)
    }
}

/// Bring the AGFL of `agno` to its minimum length (see the module doc).
/// When `freeing`, a refill that finds no space is not an error.
fn fix_freelist(
    tx: &mut dyn MetaTx,
    agno: AgNumber,
    freeing: bool,
    busy_seen: &mut bool,
) -> Result<()> {
    let agf = hdr::agf(tx, agno)?;
    let mut forced = false;
    for _ in 0..FIX_ROUNDS_MAX {
        let need = min_freelist_of(tx, agf);
        let have = hdr::flcount(tx, agf);
        if have > need {
            let b = hdr::agfl_get(tx, agno, agf)?;
            search::give_back(tx, agno, b.0, 1)?;
            tx.mark_busy(agno, b, 1);
            crate::rmap::unmap_ag_blocks(tx, agno, b, 1)?;
            continue;
        }
        if have == need {
            return Ok(());
        }
        let req = AllocReq {
            agno,
            near: None,
            minlen: 1,
            maxlen: need - have,
            align: 1,
            any_ag: false,
            meta: true,
        };
        let Some(c) = search::find(tx, agno, &req, None, busy_seen)? else {
            // A free must not fail for want of free-list blocks that are
            // only busy (freed, checkpoint not yet on disk): wait them out
            // once, as the kernel flushes busy extents.
            if freeing && *busy_seen && !forced {
                forced = true;
                tx.force_busy()?;
                continue;
            }
            return if freeing { Ok(()) } else { Err(Error::NoSpace) };
        };
        search::take(tx, agno, c)?;
        for b in c.x..c.x + c.len {
            hdr::agfl_put(tx, agno, agf, AgBlock(b))?;
        }
        // Blocks on the AGFL belong to the AG (owner OWN_AG).
        crate::rmap::map_ag_blocks(tx, agno, AgBlock(c.x), c.len)?;
    }
    Err(Error::corrupt(
        "AGFL",
        Location::Unknown,
        format!("free list of AG {agno} does not settle"),
    ))
}

fn check_req(tx: &dyn MetaTx, req: &AllocReq) -> Result<()> {
    let geo = tx.geo();
    if req.agno.0 >= geo.agcount || req.minlen == 0 || req.maxlen < req.minlen || req.align == 0 {
        return Err(Error::Invalid(format!("bad allocation request {req:?}")));
    }
    Ok(())
}

/// Allocate an extent (see the module doc): `Err(NoSpace)` when no AG it
/// may use has room.
pub fn alloc_extent(tx: &mut dyn MetaTx, req: &AllocReq) -> Result<AgExtent> {
    check_req(tx, req)?;
    // Never into the blocks the filesystem holds back (the kernel refuses
    // at the same point with ENOSPC).
    let mut capped: AllocReq;
    let req = match tx.space_left() {
        Some(left) if left < req.minlen as i64 => return Err(Error::NoSpace),
        Some(left) if left < req.maxlen as i64 => {
            capped = req.clone();
            capped.maxlen = left as u32;
            &capped
        }
        _ => req,
    };
    let last = if req.any_ag {
        tx.geo().agcount - 1
    } else {
        req.agno.0
    };
    // Lock order: a transaction that already holds a higher AGF must not
    // lock a lower one (another may hold the lower and wait for ours).
    let first = match tx.highest_agf() {
        Some(h) if req.any_ag && h.0 > req.agno.0 => h.0,
        _ => req.agno.0,
    };
    for pass in 0..2 {
        let mut busy_seen = false;
        for a in first..=last {
            let agno = AgNumber(a);
            let near = if agno == req.agno { req.near } else { None };
            match alloc_in_ag(tx, agno, req, near, &mut busy_seen) {
                Ok(c) => {
                    tx.mod_sb(SbCounter::FreeBlocks, -(c.len as i64));
                    return Ok(AgExtent {
                        agno,
                        agbno: AgBlock(c.x),
                        len: c.len,
                    });
                }
                Err(Error::NoSpace) => continue,
                Err(e) => return Err(e),
            }
        }
        if !busy_seen || pass == 1 {
            break;
        }
        tx.force_busy()?;
    }
    Err(Error::NoSpace)
}

fn alloc_in_ag(
    tx: &mut dyn MetaTx,
    agno: AgNumber,
    req: &AllocReq,
    near: Option<AgBlock>,
    busy_seen: &mut bool,
) -> Result<Cand> {
    let agf = hdr::agf(tx, agno)?;
    let need = min_freelist_of(tx, agf);
    let space = hdr::get(tx, agf, AGF_FREEBLKS) as u64 + hdr::flcount(tx, agf) as u64;
    if space.saturating_sub(need as u64) < req.minlen as u64
        || hdr::get(tx, agf, AGF_LONGEST) < req.minlen
    {
        return Err(Error::NoSpace);
    }
    fix_freelist(tx, agno, false, busy_seen)?;
    let ag_len = hdr::ag_len(tx, agno);
    let near = near.map(|b| AgBlock(b.0.min(ag_len - 1)));
    let c = search::find(tx, agno, req, near, busy_seen)?.ok_or(Error::NoSpace)?;
    search::take(tx, agno, c)?;
    Ok(c)
}

/// Free `len` blocks at `agbno` of AG `agno`: back into both free-space
/// trees (merged with free neighbours), busy until this transaction's
/// checkpoint is on disk, `mod_sb(FreeBlocks, +len)`.
pub fn free_extent(tx: &mut dyn MetaTx, agno: AgNumber, agbno: AgBlock, len: u32) -> Result<()> {
    if agno.0 >= tx.geo().agcount || !hdr::extent_ok(tx, agno, agbno.0, len) {
        return Err(Error::Invalid(format!(
            "freeing {}+{len} outside AG {agno}",
            agbno.0
        )));
    }
    fix_freelist(tx, agno, true, &mut false)?;
    search::give_back(tx, agno, agbno.0, len)?;
    tx.mark_busy(agno, agbno, len);
    tx.mod_sb(SbCounter::FreeBlocks, len as i64);
    Ok(())
}

#[cfg(test)]
mod tests;
