//! Recovery onto a writable device, in place: replay the log in memory
//! ([`crate::recover::recover`]), write the replayed blocks, flush, then
//! make the log clean; and the clean log itself (the unmount record, also
//! what mkfs writes, and the restamping of stale blocks past the head).
//!
//! The clean log is what a clean unmount leaves: one unmount record at the
//! head whose tail LSN is its own LSN (tail = head), so head/tail search
//! finds "clean" and nothing is replayed twice:
//!
//! ```text
//!  log:  ... old records ... | hdr(lsn = tail = head) | op UNMOUNT | stale blocks -> cycle - 1 |
//!                            ^ head
//! ```
//!
//! Blocks just past the new head may hold pieces of log buffers that were
//! in flight at the crash (or a torn write cut off by the head search) and
//! carry the current cycle; they are restamped with the previous cycle
//! (up to the in-flight window, never past the end of the log) so that the
//! next head search stops at the unmount record.
//!
//! Recovery is complete before anything is written: replay, unfinished EFIs
//! and the AGI unlinked lists are all finished in memory
//! ([`recover_and_finish`]); logs with intents rxfs cannot finish are
//! refused with nothing written.
//!
//! Filesystems rxfs mounts read-write take the read-write mount's path
//! instead (finishing through the log, see [`super::logged`]), then unmount
//! clean. The in-place path below is for the others (rmapbt, realtime,
//! external log):
//!
//! Order: data first, flush, then the log, flush. A crash between the two
//! leaves the old dirty log. Its replay is idempotent (LSN rule), but the
//! finishing steps are not logged (there is no log to write them to before
//! the clean one): a crash after some of the data writes can leave blocks
//! freed by an intent that a second recovery frees again (it then reports
//! corruption), so run `rxfs recover` only where the kernel would not
//! replay the old log in between.

use std::sync::Arc;

use super::finish::{recover_and_finish, Unfreeable};
use super::RecoveryStats;
use crate::bdev::BlockDevice;
use crate::error::{Error, Location, Result};
use crate::format::log::{encode_unmount_body, HostOrder, BBSIZE, CLIENT_LOG, OP_UNMOUNT};
use crate::format::log::{MAX_ICLOGS, MAX_RECORD_BSIZE};
use crate::format::log_ops::push_op;
use crate::format::log_record::{LogRecord, RecordHeader};
use crate::format::put_be32;
use crate::format::sb::Superblock;
use crate::geometry::Geometry;
use crate::log::find::{Log, LogState};
use crate::types::Daddr;

/// Log buffer size written into the unmount record's header.
const UNMOUNT_BUF_SIZE: u32 = 32 * 1024;
/// Transaction id of the unmount record.
const UNMOUNT_TID: u32 = 0x7278_6673;

/// Recover the filesystem on `dev` in place, its log `log` being dirty
/// (state `st`): replay the log, finish its intents and unlinked inodes in
/// memory, write the resulting blocks, flush, then write a clean log
/// (padded to the log stripe unit `sunit`). Returns what was replayed.
/// The path for filesystems rxfs does not mount read-write (see the
/// module doc); `fs::recover_to_device` chooses.
pub fn recover_in_place(
    dev: &Arc<dyn BlockDevice>,
    geo: &Geometry,
    sb: &Superblock,
    log: &Log<'_>,
    st: &LogState,
    sunit: u32,
) -> Result<RecoveryStats> {
    let rec = recover_and_finish(dev, geo, sb, st, Unfreeable::Refuse)?;
    for (daddr, bytes) in rec.overlay.runs() {
        dev.write_at(&bytes, Daddr(daddr).bytes())?;
    }
    dev.flush()?;
    write_clean_log(&**dev, log, st, sb.uuid, sunit)?;
    dev.flush()?;
    // The log must now read as clean.
    let after = log.find_state()?;
    if after.needs_recovery() {
        return Err(Error::corrupt(
            "log",
            Location::Daddr(st.start.0),
            format!("log still dirty after writing the unmount record: {after}"),
        ));
    }
    Ok(rec.stats)
}

/// Write an unmount record at the head of `st` and restamp stale blocks
/// after it.
pub fn write_clean_log(
    dev: &dyn BlockDevice,
    log: &Log<'_>,
    st: &LogState,
    uuid: crate::format::Uuid,
    sunit: u32,
) -> Result<()> {
    let bbs = log.size_bbs();
    let head = st.head;
    let prev = st.last_record.as_ref().map(|r| r.block);
    let mut rec = unmount_record(head, uuid, sunit, prev);
    let total = rec.header.total_blocks();
    let blk = head.block();
    let wrap = (blk + total > bbs).then_some(bbs - blk);
    let raw = rec.encode(wrap);
    for i in 0..total {
        let b = (blk + i) % bbs;
        let s = &raw[i as usize * BBSIZE..(i as usize + 1) * BBSIZE];
        dev.write_at(s, Daddr(st.start.0 + b as u64).bytes())?;
    }
    // The new head and its cycle.
    let (new_blk, new_cycle) = if blk + total >= bbs {
        (blk + total - bbs, head.cycle() + 1)
    } else {
        (blk + total, head.cycle())
    };
    restamp_past_head(dev, log, st.start, new_blk, new_cycle, total)?;
    Ok(())
}

/// The log record a clean unmount leaves at `head` (cycle and block of
/// `head`, tail = head): one UNMOUNT op, padded to the log stripe unit
/// `sunit` (bytes; 0 or 1 for none). `prev_block`: the block of the record
/// before it, if any. Shared by recovery and mkfs (a fresh log is this
/// record at block 0 of cycle 1 with the rest of the log zeroed).
pub fn unmount_record(
    head: crate::types::Lsn,
    uuid: crate::format::Uuid,
    sunit: u32,
    prev_block: Option<u32>,
) -> LogRecord {
    let order = HostOrder::native();
    let mut payload = Vec::new();
    push_op(
        &mut payload,
        UNMOUNT_TID,
        CLIENT_LOG,
        OP_UNMOUNT,
        &encode_unmount_body(order),
    );
    let mut h = RecordHeader::new(
        head.cycle(),
        head,
        head,
        order.fmt(),
        uuid,
        UNMOUNT_BUF_SIZE.max(sunit),
    );
    h.num_logops = 1;
    // Pad to the log stripe unit like every record (4 KiB log sectors
    // included): the next record must start on a stripe-unit boundary.
    let hdr_bbs = crate::log::iclog::header_bbs(UNMOUNT_BUF_SIZE.max(sunit));
    payload.resize(
        crate::log::writer::record_payload_len(hdr_bbs, sunit, payload.len()),
        0,
    );
    if let Some(b) = prev_block {
        h.prev_block = b;
    }
    let mut rec = LogRecord::new(h, payload);
    rec.pack();
    rec
}

/// Blocks a crash may have written beyond the head `(new_blk, new_cycle)`
/// claim a cycle the log has not reached: before the log end, `new_cycle`;
/// past the end (wrapped to block 0), `new_cycle + 1`. Restamp each with
/// the cycle just before it (as the kernel's stale-block clearing does), so
/// the head search stops at the head. Valid blocks never claim a future
/// cycle, so nothing valid is touched. `used`: blocks just written before
/// the head that the window must not wrap onto.
pub(crate) fn restamp_past_head(
    dev: &dyn BlockDevice,
    log: &Log<'_>,
    start: Daddr,
    new_blk: u32,
    new_cycle: u32,
    used: u32,
) -> Result<()> {
    let bbs = log.size_bbs();
    let window = ((MAX_ICLOGS * MAX_RECORD_BSIZE / BBSIZE) as u32).min(bbs.saturating_sub(used));
    let mut blkbuf = vec![0u8; BBSIZE];
    for i in 0..window {
        let lin = new_blk + i;
        let (b, future) = if lin < bbs {
            (lin, new_cycle)
        } else {
            (lin - bbs, new_cycle.wrapping_add(1))
        };
        let cur = log.read(b, 1)?;
        if crate::format::log::block_cycle(&cur) == future {
            blkbuf.fill(0);
            put_be32(&mut blkbuf, 0, future.wrapping_sub(1));
            dev.write_at(&blkbuf, Daddr(start.0 + b as u64).bytes())?;
        }
    }
    Ok(())
}
