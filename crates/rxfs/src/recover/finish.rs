//! Recovery, after replay: finish the unfinished intents, then free the
//! inodes on the AGI unlinked lists.
//!
//! Replay ([`super::recover`]) leaves the filesystem as the last
//! committed checkpoint had it. Two kinds of work can be half done there:
//!
//! - **Unfinished EFIs.** Freeing file space is deferred: a transaction
//!   unmaps the extents and logs an EFI (extent free intent) naming them;
//!   a later transaction frees them in the free-space btrees and logs the
//!   EFD (done) with the EFI's id. Both halves are atomic, so an EFI
//!   without its EFD means none of its extents were freed yet, while the
//!   file no longer maps them. Recovery finishes each such EFI in a
//!   transaction of its own, as the kernel does: log an EFD for it (so a
//!   crash during this recovery does not free the extents twice), then free
//!   every extent with [`crate::alloc::free_extent`].
//!
//!   ```text
//!   log:    ... [EFI id=X: (fsb 9000, 16) (fsb 9100, 4)] ...    (no EFD X)
//!   finish: tx { EFD id=X (same extents); free 9000+16; free 9100+4 }
//!   ```
//!
//! - **Unlinked inodes** ([`crate::recover::iunlink`]).
//!
//! [`finish_intents`] and [`crate::recover::iunlink::process_iunlinks`] are
//! generic over [`MetaTx`]: the read-write mount runs them in logged
//! transactions ([`finish_intent`] and
//! [`crate::recover::iunlink::pop_unlinked`] are the one-transaction steps),
//! and [`recover_and_finish`] runs them in one unlogged
//! [`MemTx`] over the replayed blocks, for the read-only mount (in memory)
//! and for `rxfs recover` (written to the device afterwards).
//!
//! Invariants: an EFI's extents are checked against the geometry before
//! anything is freed (a bad one is corruption, nothing is changed); only
//! EFIs reach here (the other intents were refused before replay).

use std::sync::Arc;

use super::iunlink;
use super::{recover, PendingIntent, Recovered, OVERLAY_MAX_BYTES};
use crate::bdev::{BlockDevice, OverlayDevice};
use crate::error::{Error, Location, Result};
use crate::format::log::HostOrder;
use crate::format::log_items::{encode_free_extents, FreeExtent, ItemFormat};
use crate::format::sb::Superblock;
use crate::geometry::Geometry;
use crate::log::find::LogState;
use crate::recover::memtx::MemTx;
use crate::types::FsBlock;
use crate::xact::MetaTx;

/// What finishing did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FinishStats {
    pub intents: u64,
    pub blocks: u64,
}

/// Check one EFI extent against the geometry.
fn check_extent(geo: &Geometry, e: &FreeExtent, id: u64) -> Result<()> {
    if e.len == 0 || !geo.fsb_extent_valid(FsBlock(e.start), e.len as u64) {
        return Err(Error::corrupt(
            "log EFI item",
            Location::Unknown,
            format!(
                "EFI {id:#x} names {} blocks at fsb {}, not inside one AG",
                e.len, e.start
            ),
        ));
    }
    Ok(())
}

/// Finish one unfinished EFI in `tx`: log its EFD, free its extents.
/// Returns the number of blocks freed.
pub fn finish_intent(tx: &mut dyn MetaTx, intent: &PendingIntent) -> Result<u64> {
    let (id, extents) = efi_extents(tx.geo(), intent)?;
    let efd = encode_free_extents(HostOrder::native(), true, false, id, extents);
    tx.log_raw_item(vec![efd]);
    free_efi_extents(tx, extents)
}

/// The id and extents of an unfinished EFI, checked against the geometry
/// (`NotSupported` for other intents).
pub(crate) fn efi_extents<'a>(
    geo: &Geometry,
    intent: &'a PendingIntent,
) -> Result<(u64, &'a [FreeExtent])> {
    let (id, extents) = match &intent.item {
        ItemFormat::Efi {
            rt: false,
            id,
            extents,
        } => (*id, extents),
        other => {
            return Err(Error::NotSupported(format!(
                "recovery of unfinished {} intents",
                other.name()
            )))
        }
    };
    for e in extents {
        check_extent(geo, e, id)?;
    }
    Ok((id, extents))
}

/// Free every extent of an EFI (checked by [`efi_extents`]); returns the
/// number of blocks freed.
pub(crate) fn free_efi_extents(tx: &mut dyn MetaTx, extents: &[FreeExtent]) -> Result<u64> {
    let mut blocks = 0;
    for e in extents {
        let fsb = FsBlock(e.start);
        let (agno, agbno) = (tx.geo().fsb_agno(fsb), tx.geo().fsb_agbno(fsb));
        // A kernel EFI may leave the reverse mapping to its finisher (inode
        // chunks, btree blocks): remove whatever still maps the extent.
        crate::rmap::rmap_free_any_owner(tx, agno, agbno, e.len)?;
        crate::alloc::free_extent(tx, agno, agbno, e.len)?;
        blocks += e.len as u64;
    }
    Ok(blocks)
}

/// Finish every unfinished EFI in `intents` (log order) in `tx`: one EFD
/// per EFI, every extent freed. The read-write mount may rather call
/// [`finish_intent`] once per transaction.
pub fn finish_intents(tx: &mut dyn MetaTx, intents: &[PendingIntent]) -> Result<FinishStats> {
    let mut st = FinishStats::default();
    for i in intents {
        st.blocks += finish_intent(tx, i)?;
        st.intents += 1;
    }
    Ok(st)
}

/// How [`recover_and_finish`] treats unlinked inodes it cannot free
/// (reflink data: see [`super::iunlink`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unfreeable {
    /// Fail with the `NotSupported` (recovery onto the device: the kernel
    /// would not free them later from a clean log).
    Refuse,
    /// Leave every unlinked list as replay left it (a read-only view: the
    /// files are unreachable anyway; only the free counts differ from the
    /// kernel's recovery). Recorded in [`super::RecoveryStats`].
    Keep,
}

/// Recover the dirty log `st` in memory and finish it: replay, then the
/// unfinished intents and the unlinked inodes through [`MemTx`]s whose
/// writes land in the overlay (the device is never written). The result
/// has no pending intents left and its overlay holds everything.
pub fn recover_and_finish(
    dev: &Arc<dyn BlockDevice>,
    geo: &Geometry,
    sb: &Superblock,
    st: &LogState,
    unfreeable: Unfreeable,
) -> Result<Recovered> {
    let mut rec = recover(&**dev, geo, sb, st)?;
    if rec.intents.is_empty() && rec.stats.unlinked_buckets == 0 && sb.rextents == 0 {
        return Ok(rec);
    }
    let overlay = std::mem::take(&mut rec.overlay);
    let view = Arc::new(OverlayDevice::writable(dev.clone(), overlay));
    // Intents first, committed on their own: the unlinked inodes may be
    // left as they are (see Unfreeable) without undoing them.
    let mut tx = MemTx::new(view.clone())?;
    let fin = finish_intents(&mut tx, &rec.intents)?;
    tx.commit()?;
    let mut tx = MemTx::new(view.clone())?;
    match iunlink::process_iunlinks(&mut tx) {
        Ok(un) => {
            tx.commit()?;
            rec.stats.unlinked_inodes_freed = un.inodes;
            rec.stats.unlinked_blocks_freed = un.blocks + un.chunk_blocks;
            rec.stats.inode_chunks_freed = un.chunks;
        }
        Err(Error::NotSupported(msg)) if unfreeable == Unfreeable::Keep => {
            drop(tx);
            tracing::warn!("log recovery left the unlinked inodes in place: {msg}");
            rec.stats.unlinked_kept = true;
        }
        Err(e) => return Err(e),
    }
    if sb.rextents > 0 {
        // sb_frextents is a lazy counter: recounted from the bitmap, as
        // the kernel does after a recovery.
        let mut tx = MemTx::new(view.clone())?;
        let free = crate::rtalloc::count_free(&mut tx)?;
        let delta = free as i64 - tx.sb().frextents as i64;
        if delta != 0 {
            tx.mod_sb(crate::xact::SbCounter::FreeRtExtents, delta);
            tx.commit()?;
        }
    }
    let view = Arc::try_unwrap(view)
        .map_err(|_| Error::Invalid("recovery overlay still in use after commit".into()))?;
    rec.overlay = view.into_overlay();
    rec.intents.clear();
    rec.stats.intents_finished = fin.intents;
    rec.stats.intent_blocks_freed = fin.blocks;
    rec.stats.overlay_bytes = rec.overlay.bytes() as u64;
    if rec.overlay.bytes() > OVERLAY_MAX_BYTES {
        return Err(Error::NotSupported(format!(
            "log recovery would keep more than {} MiB of replayed blocks in memory",
            OVERLAY_MAX_BYTES >> 20
        )));
    }
    Ok(rec)
}
