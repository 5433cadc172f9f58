//! Log recovery: replay the committed checkpoints between the log's tail
//! and head, producing the replayed blocks as an [`Overlay`].
//!
//! Recovery never writes the device itself. [`recover`] returns the blocks
//! recovery changed (daddr -> bytes); a read-only mount serves reads through
//! an [`crate::bdev::OverlayDevice`], and [`clean`] writes the
//! overlay to a writable device and then a clean log.
//!
//! The passes, as the kernel runs them:
//!
//! 1. **Cancelled buffers.** Every BUF item with the CANCEL flag adds one
//!    reference to the (daddr, length) entry of a cancel table. A freed
//!    buffer is cancelled so that older changes logged to it are not
//!    replayed over whatever reused the space.
//! 2. **Replay**, transaction by transaction in log order. Within one
//!    checkpoint the items are taken in this order: ordinary buffers and
//!    ICREATE items, then inode items (and intents), then inode buffers
//!    (`INODE_BUF`, which only carry `di_next_unlinked` updates), then
//!    cancel items. A buffer whose (daddr, length) is still in the cancel
//!    table is skipped; a CANCEL item drops one reference, so buffers
//!    logged after the last cancellation replay again.
//!
//! The v5 LSN rule: self-describing metadata stores the LSN of the last
//! checkpoint written to it. If the stored LSN is at or past the LSN of the
//! transaction being replayed (strictly past, for inodes), the block on
//! disk is already newer and the item is skipped. Replayed blocks get the
//! transaction's LSN stamped in and their CRC recomputed, as the kernel's
//! write verifiers do. A transaction's LSN is that of the log record its
//! checkpoint starts in, so several checkpoints can share one LSN: a stamp
//! made by this recovery never makes a later item of the same LSN look
//! stale (see `buf_is_newer`, `inode_is_newer`).
//!
//! (Which blocks carry a usable LSN, and where: [`crate::format::meta_header`].)
//!
//! 3. **Unfinished intents.** An intent item (EFI, RUI, CUI, BUI, ATTRI,
//!    XMI) whose done item is not in the log describes work a crash cut
//!    short. Done items are matched to intents as the kernel does: by kind
//!    and intent id, the oldest open intent of that id first (ids are
//!    kernel addresses and get reused). [`recover`] returns the open EFIs
//!    ([`Recovered::intents`], in log order) and refuses, before replaying
//!    anything, every other open kind (and realtime EFIs) with a
//!    `NotSupported` naming them. The EFIs are finished afterwards by
//!    [`crate::recover::finish::finish_intents`].
//! 4. **AGI unlinked lists** (inodes unlinked while open at the crash) are
//!    processed after the intents by [`crate::recover::iunlink`].
//!
//! Steps 3 and 4 change metadata, so they run in a transaction: the
//! read-write mount runs them in logged transactions after writing the
//! replayed blocks ([`logged`], through the mount's
//! [`logged::LoggedMount`]); the read-only mount and `rxfs recover` of a
//! filesystem rxfs does not mount read-write ([`clean`]) run them in an
//! unlogged [`crate::recover::memtx::MemTx`] over the replayed blocks
//! ([`crate::recover::finish::recover_and_finish`]).
//!
//! At open, [`mount::check_at_open`] finds the log's state and refuses
//! what a mount cannot take.
//!
//! Bounds: the overlay is capped ([`OVERLAY_MAX_BYTES`]); every offset
//! taken from a log item is checked against the buffer it addresses.

pub mod bmbt;
pub mod buf;
pub mod clean;
pub mod finish;
pub mod icreate;
pub(crate) mod inode;
pub mod iunlink;
pub mod logged;
pub mod memtx;
pub mod mount;

use std::collections::HashMap;

use self::{buf as recover_buf, icreate as recover_icreate, inode as recover_inode};
use crate::bdev::{BlockDevice, Overlay};
use crate::error::{Error, Location, Result};
use crate::format::log::HostOrder;
use crate::format::log_items::{item_type_name, ItemFormat};
use crate::format::log_ops::{LogItem, Transaction};
use crate::format::sb::Superblock;
use crate::format::{be32, crc, put_be64, Uuid};
use crate::geometry::Geometry;
use crate::log::find::{Log, LogState};
use crate::types::{Daddr, Lsn};

/// Most bytes of replayed blocks kept in memory.
/// A full 64 MiB log of real workloads replays into well under this (the
/// overlay is about the size of the log's distinct blocks); ICREATE items
/// are the only way a few log bytes touch many blocks.
pub const OVERLAY_MAX_BYTES: usize = 256 << 20;

/// What recovery did, item by item.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryStats {
    pub records: u64,
    pub transactions: u64,
    pub items: u64,
    pub buf_replayed: u64,
    pub buf_skipped_lsn: u64,
    pub buf_cancelled: u64,
    /// CANCEL items themselves.
    pub buf_cancel_items: u64,
    pub inode_buf_replayed: u64,
    pub sb_replayed: u64,
    pub inode_replayed: u64,
    pub inode_skipped_lsn: u64,
    pub inode_cancelled: u64,
    pub icreate_replayed: u64,
    pub icreate_cancelled: u64,
    /// Intent items whose done item was also in the log.
    pub intents_done: u64,
    /// Intents without their done item.
    pub unfinished_intents: u64,
    /// Unfinished intents recovery finished (an EFD logged, extents freed).
    pub intents_finished: u64,
    /// Blocks freed by finishing intents.
    pub intent_blocks_freed: u64,
    /// Non-empty AGI unlinked buckets after replay: inodes unlinked while
    /// open at the crash.
    pub unlinked_buckets: u64,
    /// Inodes on the unlinked lists that recovery freed.
    pub unlinked_inodes_freed: u64,
    /// Blocks freed for them: their data and attribute blocks, and the
    /// inode chunks they left empty.
    pub unlinked_blocks_freed: u64,
    /// Inode chunks left empty by those inodes, and freed.
    pub inode_chunks_freed: u64,
    /// The unlinked inodes could not all be freed and were left in place
    /// (read-only in-memory recovery only; see
    /// [`crate::recover::finish::Unfreeable`]).
    pub unlinked_kept: bool,
    /// Bytes in the overlay at the end.
    pub overlay_bytes: u64,
}

impl std::fmt::Display for RecoveryStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} records, {} transactions, {} items: buf {} replayed ({} sb, {} inode-buf) \
             {} lsn-skipped {} cancelled ({} cancel items); inode {} replayed {} lsn-skipped \
             {} cancelled; icreate {} replayed {} cancelled; {} intents with their done item; \
             {} unfinished intents completed ({} blocks freed); {} unlinked buckets, \
             {} unlinked inodes freed ({} blocks, {} inode chunks){}; overlay {} KiB",
            self.records,
            self.transactions,
            self.items,
            self.buf_replayed,
            self.sb_replayed,
            self.inode_buf_replayed,
            self.buf_skipped_lsn,
            self.buf_cancelled,
            self.buf_cancel_items,
            self.inode_replayed,
            self.inode_skipped_lsn,
            self.inode_cancelled,
            self.icreate_replayed,
            self.icreate_cancelled,
            self.intents_done,
            self.intents_finished,
            self.intent_blocks_freed,
            self.unlinked_buckets,
            self.unlinked_inodes_freed,
            self.unlinked_blocks_freed,
            self.inode_chunks_freed,
            if self.unlinked_kept {
                " (unlinked inodes left in place)"
            } else {
                ""
            },
            self.overlay_bytes / 1024
        )
    }
}

/// An intent item found in the log without its done item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingIntent {
    /// LSN of the checkpoint that logged it.
    pub lsn: Lsn,
    pub item: ItemFormat,
}

/// The result of recovery: replayed blocks and counters.
#[derive(Debug, Clone)]
pub struct Recovered {
    pub overlay: Overlay,
    pub stats: RecoveryStats,
    /// The log state recovery started from.
    pub state: LogState,
    /// Unfinished EFIs in log order: still to be finished (see the module
    /// doc, step 3). Empty once [`crate::recover::finish::recover_and_finish`]
    /// has run.
    pub intents: Vec<PendingIntent>,
}

/// Replay context: the device seen through the overlay being built.
pub(super) struct Replay<'a> {
    pub dev: &'a dyn BlockDevice,
    pub geo: &'a Geometry,
    pub sb: &'a Superblock,
    pub order: HostOrder,
    pub overlay: Overlay,
    pub cancels: HashMap<(u64, u32), u32>,
    /// The LSN each buffer replay stamped into its block (by daddr): see
    /// [`buf_is_newer`].
    pub stamped: HashMap<u64, Lsn>,
    pub stats: RecoveryStats,
}

impl Replay<'_> {
    /// Read `bbs` basic blocks at `daddr` as recovery sees them.
    pub fn read(&self, daddr: u64, bbs: u32, what: &'static str) -> Result<Vec<u8>> {
        let end = daddr.checked_add(bbs as u64);
        let dev_bbs = self.geo.dblocks << (self.geo.blocklog - 9);
        if bbs == 0 || end.is_none_or(|e| e > dev_bbs) {
            return Err(Error::corrupt(
                what,
                Location::Daddr(daddr),
                format!("log item names {bbs} BBs at daddr {daddr}, outside the filesystem"),
            ));
        }
        let mut buf = vec![0u8; bbs as usize * 512];
        self.dev.read_at(&mut buf, Daddr(daddr).bytes())?;
        self.overlay.apply(&mut buf, Daddr(daddr).bytes());
        Ok(buf)
    }

    /// Store replayed bytes.
    pub fn write(&mut self, daddr: u64, buf: &[u8]) -> Result<()> {
        self.overlay.put(daddr, buf);
        if self.overlay.bytes() > OVERLAY_MAX_BYTES {
            return Err(Error::NotSupported(format!(
                "log recovery would keep more than {} MiB of replayed blocks in memory",
                OVERLAY_MAX_BYTES >> 20
            )));
        }
        Ok(())
    }

    /// Whether (daddr, len) is cancelled; a CANCEL item drops a reference.
    pub fn cancelled(&mut self, daddr: u64, len: u32, cancel_item: bool) -> bool {
        let key = (daddr, len);
        let Some(n) = self.cancels.get_mut(&key) else {
            return false;
        };
        if cancel_item {
            *n -= 1;
            if *n == 0 {
                self.cancels.remove(&key);
            }
        }
        true
    }

    /// Whether (daddr, len) is cancelled, without changing the table.
    pub fn is_cancelled(&self, daddr: u64, len: u32) -> bool {
        self.cancels.contains_key(&(daddr, len))
    }

    /// Whether the filesystem has self-describing (v5) metadata.
    pub fn v5(&self) -> bool {
        self.sb.version() >= 5
    }

    pub fn uuid(&self) -> Uuid {
        self.sb.metadata_uuid()
    }
}

/// Kinds of intent items and their done items: (is the intent, kind, id).
/// Realtime variants are kinds of their own, as in the kernel.
fn intent_id(f: &ItemFormat) -> Option<(bool, &'static str, u64)> {
    let rt = |rt: bool, a: &'static str, b: &'static str| if rt { a } else { b };
    Some(match f {
        ItemFormat::Efi { rt: r, id, .. } => (true, rt(*r, "EFI_RT", "EFI"), *id),
        ItemFormat::Efd { rt: r, efi_id, .. } => (false, rt(*r, "EFI_RT", "EFI"), *efi_id),
        ItemFormat::Rui { rt: r, id, .. } => (true, rt(*r, "RUI_RT", "RUI"), *id),
        ItemFormat::Rud { rt: r, rui_id } => (false, rt(*r, "RUI_RT", "RUI"), *rui_id),
        ItemFormat::Cui { rt: r, id, .. } => (true, rt(*r, "CUI_RT", "CUI"), *id),
        ItemFormat::Cud { rt: r, cui_id } => (false, rt(*r, "CUI_RT", "CUI"), *cui_id),
        ItemFormat::Bui { id, .. } => (true, "BUI", *id),
        ItemFormat::Bud { bui_id } => (false, "BUI", *bui_id),
        ItemFormat::Attri(a) => (true, "ATTRI", a.id),
        ItemFormat::Attrd { attri_id } => (false, "ATTRI", *attri_id),
        ItemFormat::Xmi(x) => (true, "XMI", x.id),
        ItemFormat::Xmd { xmi_id } => (false, "XMI", *xmi_id),
        _ => return None,
    })
}

/// The v5 LSN rule for a buffer item of the transaction at `lsn`: skip it
/// when the block's stored LSN `disk` is at or past `lsn`, unless that LSN
/// is the one our own replay of an earlier item stamped (`own`).
///
/// Several checkpoints can start in the same log record and so share one
/// LSN. The kernel stamps a replayed buffer's LSN only when it writes the
/// buffer back, which it does whenever the LSN changes; until then the
/// buffer keeps the LSN it had before, which was older (it was replayed).
/// So a stamp from this recovery never makes a later item look stale: a
/// later checkpoint with the same LSN must replay over it.
pub(super) fn buf_is_newer(disk: Lsn, own: Option<Lsn>, lsn: Lsn) -> bool {
    disk >= lsn && own != Some(disk)
}

/// The v5 LSN rule for an inode item of the transaction at `lsn`: skip it
/// only when the inode's stored `di_lsn` is strictly past `lsn` (0 and -1
/// mean "no LSN"). Equal is replayed: a checkpoint sharing the LSN of an
/// earlier one (same log record) must apply its changes over the earlier
/// one's, e.g. the inode freed after the checkpoint that unlinked it.
pub(super) fn inode_is_newer(disk: i64, lsn: Lsn) -> bool {
    disk != 0 && disk != -1 && Lsn(disk) > lsn
}

/// Replay order class of an item within its checkpoint.
fn order_class(f: &ItemFormat) -> u8 {
    match f {
        ItemFormat::Buf(b) if b.is_cancel() => 3,
        ItemFormat::Buf(b) if b.is_inode_buf() => 2,
        ItemFormat::Buf(_) | ItemFormat::Icreate(_) => 0,
        _ => 1,
    }
}

/// Run recovery of the dirty log `st` in memory.
pub fn recover(
    dev: &dyn BlockDevice,
    geo: &Geometry,
    sb: &Superblock,
    st: &LogState,
) -> Result<Recovered> {
    let log = Log::new(dev, geo, sb)?;
    let contents = log.contents(st)?;
    let order = contents.order.unwrap_or_else(HostOrder::native);
    let mut r = Replay {
        dev,
        geo,
        sb,
        order,
        overlay: Overlay::new(),
        cancels: HashMap::new(),
        stamped: HashMap::new(),
        stats: RecoveryStats {
            records: contents.records,
            transactions: contents.transactions.len() as u64,
            ..Default::default()
        },
    };
    // Decode every item once; match intents; pass 1.
    let mut decoded: Vec<Vec<(ItemFormat, &LogItem)>> = Vec::new();
    let mut open: Vec<OpenIntent> = Vec::new();
    for t in &contents.transactions {
        let at = Location::Daddr(st.start.0 + t.lsn.block() as u64);
        let mut items = Vec::with_capacity(t.items.len());
        for it in &t.items {
            let f = it.format(order, at)?;
            r.stats.items += 1;
            if match_intent(&mut open, &f, t.lsn) {
                r.stats.intents_done += 1;
            }
            if let ItemFormat::Buf(b) = &f {
                if b.is_cancel() {
                    *r.cancels.entry((b.blkno, b.len as u32)).or_default() += 1;
                }
            }
            items.push((f, it));
        }
        decoded.push(items);
    }
    r.stats.unfinished_intents = open.len() as u64;
    refuse_unsupported_intents(&open)?;
    let intents: Vec<PendingIntent> = open.into_iter().map(|o| o.2).collect();
    // Pass 2.
    for (t, items) in contents.transactions.iter().zip(decoded.iter()) {
        replay_transaction(&mut r, t, items)?;
    }
    if !contents.transactions.is_empty() {
        recount_sb(&mut r)?;
    }
    r.stats.overlay_bytes = r.overlay.bytes() as u64;
    Ok(Recovered {
        overlay: r.overlay,
        stats: r.stats,
        state: st.clone(),
        intents,
    })
}

/// Track intent `f` of the checkpoint at `lsn`: an intent joins `open`; a
/// done item closes the oldest open intent of its kind and id (ids are
/// kernel addresses and get reused) and returns true. A done item whose
/// intent lies before the tail closes nothing.
fn match_intent(open: &mut Vec<OpenIntent>, f: &ItemFormat, lsn: Lsn) -> bool {
    let Some((intent, kind, id)) = intent_id(f) else {
        return false;
    };
    if intent {
        let item = f.clone();
        open.push((kind, id, PendingIntent { lsn, item }));
        return false;
    }
    match open.iter().position(|o| o.0 == kind && o.1 == id) {
        Some(i) => {
            open.remove(i);
            true
        }
        None => false,
    }
}

/// An open intent: kind, id, the item.
type OpenIntent = (&'static str, u64, PendingIntent);

/// Refuse the open intents recovery cannot finish: every kind but EFI
/// (naming each kind with its count), before anything is replayed.
fn refuse_unsupported_intents(open: &[OpenIntent]) -> Result<()> {
    let mut kinds: Vec<(&str, usize)> = Vec::new();
    for (kind, _, _) in open.iter().filter(|o| o.0 != "EFI") {
        match kinds.iter_mut().find(|k| k.0 == *kind) {
            Some(k) => k.1 += 1,
            None => kinds.push((kind, 1)),
        }
    }
    if kinds.is_empty() {
        return Ok(());
    }
    kinds.sort_unstable();
    let list: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
    Err(Error::NotSupported(format!(
        "log has unfinished intents rxfs cannot finish ({}; {} in all): only EFIs \
         (extent frees) are recovered; mount with the kernel, or use -o ro,norecovery",
        list.join(", "),
        open.len()
    )))
}

/// After replay: count the non-empty AGI unlinked buckets, and recompute
/// the superblock counters of a lazy-count filesystem.
///
/// With lazy counters the superblock's inode and free block counts are
/// not logged; the kernel recomputes them from the AG headers when it
/// mounts a dirty log (and writes them at unmount). Recovery does the same
/// so the recovered superblock is exact:
/// `icount = sum agi_count`, `ifree = sum agi_freecount`,
/// `fdblocks = sum (agf_freeblks + agf_flcount + agf_btreeblks)`.
fn recount_sb(r: &mut Replay<'_>) -> Result<()> {
    let sect_bbs = (r.geo.sectsize / 512).max(1);
    let (mut icount, mut ifree, mut fdblocks) = (0u64, 0u64, 0u64);
    for agno in 0..r.geo.agcount {
        let agno = crate::types::AgNumber(agno);
        let agf_at = r.geo.ag_header_daddr(agno, 1).0;
        let agi_at = r.geo.ag_header_daddr(agno, 2).0;
        let agf = r.read(agf_at, sect_bbs, "AGF")?;
        let agi = r.read(agi_at, sect_bbs, "AGI")?;
        if be32(&agf, 0) != 0x5841_4746 || be32(&agi, 0) != 0x5841_4749 {
            return Err(Error::corrupt(
                "AG header",
                Location::Daddr(agf_at),
                "bad AGF/AGI magic after recovery",
            ));
        }
        r.stats.unlinked_buckets += (0..64)
            .filter(|i| be32(&agi, 40 + i * 4) != u32::MAX)
            .count() as u64;
        icount += be32(&agi, 16) as u64;
        ifree += be32(&agi, 28) as u64;
        fdblocks += be32(&agf, 52) as u64 + be32(&agf, 48) as u64 + be32(&agf, 60) as u64;
    }
    if !r.sb.has_lazysbcount() {
        return Ok(());
    }
    let mut sb = r.read(0, sect_bbs, "superblock")?;
    put_be64(&mut sb, 128, icount);
    put_be64(&mut sb, 136, ifree);
    put_be64(&mut sb, 144, fdblocks);
    crc::update(&mut sb, 224);
    r.write(0, &sb)
}

fn replay_transaction(
    r: &mut Replay<'_>,
    t: &Transaction,
    items: &[(ItemFormat, &LogItem)],
) -> Result<()> {
    let mut idx: Vec<usize> = (0..items.len()).collect();
    idx.sort_by_key(|&i| order_class(&items[i].0));
    for i in idx {
        let (f, it) = &items[i];
        match f {
            ItemFormat::Buf(b) => recover_buf::replay(r, t.lsn, b, it)?,
            ItemFormat::Inode(fmt) => recover_inode::replay(r, t.lsn, fmt, it)?,
            ItemFormat::Icreate(c) => recover_icreate::replay(r, c)?,
            ItemFormat::Dquot { .. } | ItemFormat::QuotaOff { .. } => {
                // Quota is not supported by rxfs (nor by this kernel): the
                // quota inodes are not read, so their blocks need no replay.
            }
            ItemFormat::Unknown { item_type, .. } => {
                return Err(Error::NotSupported(format!(
                    "log item of unknown type {item_type:#x} ({}): cannot recover",
                    item_type_name(*item_type)
                )))
            }
            _ => {
                // Intents and done items: matched up before replay.
                debug_assert!(intent_id(f).is_some(), "unhandled item {}", f.name());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_lsn_checkpoints_replay_over_each_other() {
        let (x, y) = (Lsn::new(1, 200), Lsn::new(1, 100));
        // A block written back at or past the transaction is newer.
        assert!(buf_is_newer(x, None, x));
        assert!(buf_is_newer(x, None, y));
        assert!(!buf_is_newer(y, None, x));
        // Our own stamp of an earlier checkpoint with the same LSN is not.
        assert!(!buf_is_newer(x, Some(x), x));
        // A stamp from elsewhere (an inode item) still counts.
        assert!(buf_is_newer(x, Some(y), x));
        // Inodes: only strictly newer is skipped; 0 and -1 are no LSN.
        assert!(!inode_is_newer(x.0, x));
        assert!(inode_is_newer(x.0, y));
        assert!(!inode_is_newer(y.0, x));
        assert!(!inode_is_newer(0, x));
        assert!(!inode_is_newer(-1, x));
    }

    #[test]
    fn done_items_close_the_oldest_intent_of_their_kind() {
        let efi = |id, start| ItemFormat::Efi {
            rt: false,
            id,
            extents: vec![crate::format::log_items::FreeExtent { start, len: 1 }],
        };
        let efd = |rt, efi_id| ItemFormat::Efd {
            rt,
            efi_id,
            extents: vec![],
        };
        let rt_efi = ItemFormat::Efi {
            rt: true,
            id: 7,
            extents: vec![],
        };
        let (l1, l2) = (Lsn::new(1, 10), Lsn::new(1, 20));
        let mut open = Vec::new();
        assert!(!match_intent(&mut open, &efi(5, 100), l1));
        assert!(!match_intent(&mut open, &efi(5, 200), l2)); // id reused
        assert!(!match_intent(&mut open, &rt_efi, l2));
        assert!(!match_intent(&mut open, &efd(false, 9), l2)); // intent before the tail
        assert!(match_intent(&mut open, &efd(false, 5), l2));
        assert!(!match_intent(&mut open, &efd(false, 7), l2)); // not the rt kind
        assert_eq!(open.len(), 2);
        assert_eq!(open[0].2.item, efi(5, 200));
        assert_eq!(open[0].2.lsn, l2);
        let e = refuse_unsupported_intents(&open).unwrap_err().to_string();
        assert!(e.contains("1 EFI_RT") && e.contains("2 in all"), "{e}");
        open.remove(1);
        assert!(refuse_unsupported_intents(&open).is_ok());
        let cui = ItemFormat::Cui {
            rt: false,
            id: 3,
            extents: vec![],
        };
        match_intent(&mut open, &cui, l2);
        match_intent(&mut open, &cui, l2);
        let e = refuse_unsupported_intents(&open).unwrap_err().to_string();
        assert!(
            e.contains("2 CUI") && e.contains("unfinished intents"),
            "{e}"
        );
    }
}
