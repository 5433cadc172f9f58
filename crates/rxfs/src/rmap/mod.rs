//! Reverse-mapping btree (rmapbt) maintenance.
//!
//! On a filesystem with `RO_COMPAT_RMAPBT`, every allocated block of an AG
//! has a record in that AG's rmapbt saying who owns it: a file's fork at a
//! file offset (data or attr, written or unwritten, or a bmbt block), or a
//! special owner (AG headers and AGFL/free-space/rmap btree blocks, inode
//! btree blocks, inode chunks, refcount btree blocks, the log...). Every
//! change to a mapping or an allocation calls into this module in the same
//! transaction; without the feature every call is a no-op.
//!
//! ## Who records what
//! - [`crate::alloc`]: blocks moved between the free space and the AGFL
//!   (OWN_AG). Free-space and rmap btree blocks come from and go to the
//!   AGFL, so they keep their OWN_AG record.
//! - The caller of [`crate::alloc::alloc_extent`] / `free_extent` for
//!   everything else: [`rmap_alloc`] / [`rmap_free`] with the owner, in
//!   the transaction that maps or unmaps the space. A deferred free
//!   (`defer_free`) removes the record in the first transaction (the
//!   mapping is gone there); the follow-up transaction only frees space.
//! - File forks: [`crate::bmap::store`] calls [`rmap_map_delta`] with
//!   the map before and after, which removes the records of mappings that
//!   went away or changed state and adds the new ones.
//! - Log recovery finishing an extent-free intent (ours or the kernel's)
//!   calls [`rmap_free_any_owner`]: a kernel EFI may leave the mapping to
//!   its finisher; ours never do, so that finds nothing.
//!
//! ## Invariants
//! - Records never overlap (rxfs shares no blocks; on reflink filesystems
//!   the refcount btree stays empty of shared extents).
//! - Adjacent records that `xfs_repair` would merge are merged
//!   ([`edit`]); a partial removal trims or splits a record.
//! - Node keys hold (lowest key, highest key) of their subtree
//!   ([`crate::btree`], overlapping-key trees).
//! - Before each public call the AGFL is topped up to the minimum that
//!   covers an rmapbt split ([`crate::alloc::min_freelist`]).
//! - Within one call, AGs are edited in ascending order (AGF lock order).
//!
//! ## Lock order and limits
//! The kernel edits the rmapbt in deferred steps of their own; rxfs edits
//! it inside the operation's transaction, so an edit may need the AGF of
//! an AG lower than one the transaction already holds. unlink and rmdir
//! join the AGI and then every AGF their edits will need, ascending
//! ([`crate::bmap::prelock_fork_agfs`]); so does a rename over a target whose last link
//! goes. A write that converts unwritten extents joins the AGFs of the
//! converted blocks before it allocates (`bmap::map_range`), and the
//! allocator then only moves upwards from the highest AGF held. Shared
//! extents (reflink) are never made, so
//! the refcount btree is left as mkfs made it; freeing blocks of an inode
//! flagged REFLINK stays refused in [`crate::bmap`].

mod delta;
pub mod edit;

use crate::error::{Error, Result};
use crate::format::bmbt::Extent;
use crate::format::btree::{RmapRec, RMAP_OWN_AG, RMAP_OWN_INOBT, RMAP_OWN_INODES, RMAP_OWN_REFC};
use crate::types::WhichFork;
use crate::types::{AgBlock, AgNumber, FsBlock, Ino};
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

/// The record saying `len` blocks at `agbno` belong to `owner`.
fn record(agbno: AgBlock, len: u32, owner: &RmapOwner) -> RmapRec {
    let special = |owner| RmapRec {
        start: agbno.0,
        len,
        owner,
        offset: 0,
        attr_fork: false,
        bmbt_block: false,
        unwritten: false,
        unknown_bits: 0,
    };
    match *owner {
        RmapOwner::Ag => special(RMAP_OWN_AG),
        RmapOwner::Inobt => special(RMAP_OWN_INOBT),
        RmapOwner::Inodes => special(RMAP_OWN_INODES),
        RmapOwner::Refc => special(RMAP_OWN_REFC),
        RmapOwner::File {
            ino,
            fork,
            offset,
            bmbt,
            unwritten,
        } => RmapRec {
            owner: ino.0,
            offset: if bmbt { 0 } else { offset },
            attr_fork: fork == WhichFork::Attr,
            bmbt_block: bmbt,
            unwritten: unwritten && !bmbt,
            ..special(0)
        },
    }
}

fn check(tx: &dyn MetaTx, agno: AgNumber, agbno: AgBlock, len: u32) -> Result<()> {
    let geo = tx.geo();
    if agno.0 >= geo.agcount || len == 0 || agbno.0 as u64 + len as u64 > geo.ag_size(agno) as u64 {
        return Err(Error::Invalid(format!(
            "rmap of {len} blocks at {}/{}",
            agno.0, agbno.0
        )));
    }
    Ok(())
}

/// Record that `[agbno, agbno + len)` of `agno` now belongs to `owner`.
pub fn rmap_alloc(
    tx: &mut dyn MetaTx,
    agno: AgNumber,
    agbno: AgBlock,
    len: u32,
    owner: &RmapOwner,
) -> Result<()> {
    if !tx.sb().has_rmapbt() {
        return Ok(());
    }
    check(tx, agno, agbno, len)?;
    tx.ag_space().fix_freelist_for_rmap(tx, agno)?;
    edit::map(tx, agno, record(agbno, len, owner))
}

/// Remove the record(s) saying `[agbno, agbno + len)` belongs to `owner`.
pub fn rmap_free(
    tx: &mut dyn MetaTx,
    agno: AgNumber,
    agbno: AgBlock,
    len: u32,
    owner: &RmapOwner,
) -> Result<()> {
    if !tx.sb().has_rmapbt() {
        return Ok(());
    }
    check(tx, agno, agbno, len)?;
    tx.ag_space().fix_freelist_for_rmap(tx, agno)?;
    edit::unmap(tx, agno, record(agbno, len, owner))
}

/// An extent is being freed by a recovered extent-free intent whose owner
/// is unknown: remove the record that still maps it, if any. As the
/// kernel expects of such frees, either no record touches the extent (its
/// creator already removed the mapping, as rxfs always does) or one
/// owner's records map all of it; anything else is corruption.
pub fn rmap_free_any_owner(
    tx: &mut dyn MetaTx,
    agno: AgNumber,
    agbno: AgBlock,
    len: u32,
) -> Result<()> {
    if !tx.sb().has_rmapbt() {
        return Ok(());
    }
    check(tx, agno, agbno, len)?;
    tx.ag_space().fix_freelist_for_rmap(tx, agno)?;
    edit::unmap_any_owner(tx, agno, agbno.0, len)
}

/// Blocks taken from the free space onto the AGFL (no AGFL fix-up: the
/// fix-up itself calls this).
pub(crate) fn map_ag_blocks(
    tx: &mut dyn MetaTx,
    agno: AgNumber,
    agbno: AgBlock,
    len: u32,
) -> Result<()> {
    if !tx.sb().has_rmapbt() {
        return Ok(());
    }
    edit::map(tx, agno, record(agbno, len, &RmapOwner::Ag))
}

/// Blocks given back from the AGFL to the free space.
pub(crate) fn unmap_ag_blocks(
    tx: &mut dyn MetaTx,
    agno: AgNumber,
    agbno: AgBlock,
    len: u32,
) -> Result<()> {
    if !tx.sb().has_rmapbt() {
        return Ok(());
    }
    edit::unmap(tx, agno, record(agbno, len, &RmapOwner::Ag))
}

/// A fork's mappings changed from `old` to `new` (both sorted by file
/// offset): update the rmap records of every mapping that appeared,
/// disappeared or changed state (unwritten <-> written). Called by
/// [`crate::bmap::store`].
pub fn rmap_map_delta(
    tx: &mut dyn MetaTx,
    ino: Ino,
    fork: WhichFork,
    old: &[Extent],
    new: &[Extent],
) -> Result<()> {
    if !tx.sb().has_rmapbt() {
        return Ok(());
    }
    let (removed, added) = delta::diff(old, new);
    // (agno, 0 = unmap / 1 = map, extent): AGs ascending, and inside one
    // AG removals first so that a state change can merge with neighbours.
    let geo = tx.geo();
    let mut ops: Vec<(AgNumber, u8, Extent)> = removed
        .into_iter()
        .map(|e| (0u8, e))
        .chain(added.into_iter().map(|e| (1u8, e)))
        .map(|(k, e)| (geo.fsb_agno(FsBlock(e.start)), k, e))
        .collect();
    ops.sort_by_key(|&(a, k, e)| (a.0, k, e.start));
    for (agno, kind, e) in ops {
        let geo = tx.geo();
        let fsb = FsBlock(e.start);
        if e.len == 0 || e.len > u32::MAX as u64 || !geo.fsb_extent_valid(fsb, e.len) {
            return Err(Error::Invalid(format!(
                "rmap of extent {e:?} of inode {}",
                ino.0
            )));
        }
        let owner = RmapOwner::File {
            ino,
            fork,
            offset: e.off.0,
            bmbt: false,
            unwritten: e.unwritten,
        };
        let agbno = geo.fsb_agbno(fsb);
        if kind == 0 {
            rmap_free(tx, agno, agbno, e.len as u32, &owner)?;
        } else {
            rmap_alloc(tx, agno, agbno, e.len as u32, &owner)?;
        }
    }
    Ok(())
}
