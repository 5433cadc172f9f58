//! Recovery on a read-write mount: the dirty log replayed onto the device,
//! then finished through logged transactions that continue it.
//!
//! Replay is idempotent (the LSN rule skips what is already on disk), but
//! finishing is not: an unfinished EFI freed twice corrupts the free-space
//! btrees. So the read-write mount, like the kernel, finishes in logged
//! transactions that continue the dirty log:
//!
//! 1. **Check** ([`super::finish::recover_and_finish`] in memory,
//!    nothing written): logs with intents or unlinked inodes rxfs cannot
//!    finish are refused with the device untouched. Its counters are the mount's recovery stats.
//! 2. **Replay onto the device** ([`replay_onto_device`]): the replayed
//!    blocks are written in place and flushed, then the blocks past the
//!    head that a crash may have left with the current cycle are
//!    restamped. The log is still dirty and unchanged up to its head: a
//!    crash here replays it again, to the same result.
//! 3. **Continue the log**: the log writer starts at the dirty head with
//!    the dirty tail, so the old records (and their EFIs) stay in the
//!    recovery window.
//! 4. **Finish** ([`finish_logged`], through the mount's
//!    [`LoggedMount`]): each unfinished EFI
//!    enters the AIL at the LSN of the record that logged it, which holds
//!    the log tail there; one transaction per EFI logs its EFD and frees
//!    its extents; the EFI leaves the AIL when that checkpoint is stable.
//!    Then each inode on the AGI unlinked lists is freed in a transaction
//!    of its own ([`pop_unlinked`]). A crash at any point leaves a log
//!    whose recovery sees each EFI with or without its EFD, and unlinked
//!    lists that hold exactly the inodes not freed yet.
//!
//! ```text
//!  log: [old tail ... EFI x ... EFI y ...][old head: tx EFD x+frees][tx EFD y+frees][tx pop ino]...
//!        ^ tail held by x, y in the AIL      ^ the writer starts here
//! ```

use std::sync::Arc;

use super::clean::restamp_past_head;
use super::finish::{efi_extents, free_efi_extents};
use super::iunlink::{pop_unlinked, unlinked_buckets};
use super::{recover, PendingIntent, RecoveryStats};
use crate::ail::{Ail, AilItem, IntentItem};
use crate::bdev::BlockDevice;
use crate::error::{Error, Result};
use crate::format::log::HostOrder;
use crate::format::log_items::encode_free_extents;
use crate::format::sb::Superblock;
use crate::geometry::Geometry;
use crate::log::find::{Log, LogState};
use crate::types::Daddr;
use crate::xact::{MetaTx, Resv};

/// What finishing recovery through the log needs from a read-write mount
/// (the mount is above this layer; `fs::Filesystem` implements it).
pub trait LoggedMount {
    /// The mount's logged transaction.
    type Tx<'a>: MetaTx
    where
        Self: 'a;
    fn geo(&self) -> &Geometry;
    /// The AIL of a live read-write mount (else `ReadOnly` or `Shutdown`).
    fn live_ail(&self) -> Result<&Ail>;
    /// Start a logged transaction with a reservation for `r`.
    fn trans_alloc(&self, r: Resv) -> Result<Self::Tx<'_>>;
    fn commit(tx: Self::Tx<'_>) -> Result<()>;
    fn cancel(tx: Self::Tx<'_>);
    /// Log `done` (an EFD) in `tx`, ending `intent`: when the checkpoint
    /// is stable the intent leaves the AIL.
    fn log_intent_done(tx: &mut Self::Tx<'_>, intent: Arc<IntentItem>, done: Vec<u8>);
    /// Force the log: everything committed is on stable storage.
    fn log_force(&self) -> Result<()>;
}

/// What step 4 has to finish.
pub struct Pending {
    intents: Vec<PendingIntent>,
}

/// Steps 2: replay the dirty log `st` onto `dev` (see the module doc).
pub fn replay_onto_device(
    dev: &dyn BlockDevice,
    geo: &Geometry,
    sb: &Superblock,
    st: &LogState,
) -> Result<Pending> {
    let rec = recover(dev, geo, sb, st)?;
    for (daddr, bytes) in rec.overlay.runs() {
        dev.write_at(&bytes, Daddr(daddr).bytes())?;
    }
    dev.flush()?;
    let log = Log::new(dev, geo, sb)?;
    restamp_past_head(dev, &log, st.start, st.head.block(), st.head.cycle(), 0)?;
    dev.flush()?;
    Ok(Pending {
        intents: rec.intents,
    })
}

/// Step 4 (see the module doc). `want`: what the in-memory check
/// finished; the logged finish must do the same.
pub fn finish_logged<M: LoggedMount + ?Sized>(
    m: &M,
    p: Pending,
    want: &RecoveryStats,
) -> Result<()> {
    let ail = m.live_ail()?;
    let items: Vec<Arc<IntentItem>> = p
        .intents
        .iter()
        .map(|i| efi_extents(m.geo(), i).map(|(id, _)| IntentItem::new(id)))
        .collect::<Result<_>>()?;
    for (it, pi) in items.iter().zip(&p.intents) {
        ail.checkpoint_done(pi.lsn, vec![AilItem::Intent(it.clone())], true);
    }
    let mut blocks = 0;
    for (it, pi) in items.iter().zip(&p.intents) {
        let (id, extents) = efi_extents(m.geo(), pi)?;
        let mut tp = m.trans_alloc(Resv::Truncate)?;
        blocks += free_efi_extents(&mut tp, extents)?;
        let efd = encode_free_extents(HostOrder::native(), true, false, id, extents);
        M::log_intent_done(&mut tp, it.clone(), efd);
        M::commit(tp)?;
    }
    let mut inodes = 0;
    let buckets = {
        let mut tp = m.trans_alloc(Resv::Misc)?;
        let b = unlinked_buckets(&mut tp)?;
        M::cancel(tp);
        b
    };
    for (agno, bucket) in buckets {
        let cap = m.geo().ag_size(agno) as u64 * m.geo().inopblock as u64;
        let mut n = 0u64;
        loop {
            let mut tp = m.trans_alloc(Resv::Truncate)?;
            match pop_unlinked(&mut tp, agno, bucket)? {
                Some(_) => {
                    M::commit(tp)?;
                    inodes += 1;
                }
                None => {
                    M::cancel(tp);
                    break;
                }
            }
            n += 1;
            if n > cap {
                return Err(Error::corrupt(
                    "AGI unlinked list",
                    crate::error::Location::Unknown,
                    format!(
                        "AG {} bucket {bucket} longer than the AG has inodes",
                        agno.0
                    ),
                ));
            }
        }
    }
    if (p.intents.len() as u64, blocks, inodes)
        != (
            want.intents_finished,
            want.intent_blocks_freed,
            want.unlinked_inodes_freed,
        )
    {
        return Err(Error::Invalid(format!(
            "logged recovery finished {} intents ({blocks} blocks) and {inodes} unlinked \
             inodes, the in-memory check {want}",
            p.intents.len()
        )));
    }
    m.log_force()
}
