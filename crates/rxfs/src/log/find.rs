//! The log of a filesystem: finding its head and tail, clean or dirty, and
//! walking its records.
//!
//! The head search works on the cycle number every written log block shows
//! (see [`crate::format::log::block_cycle`]); as recovery does it:
//!
//! 1. Block 0 never written (cycle 0): the log is zeroed; head = tail = 0.
//! 2. Last block never written: the log was never wrapped; the head is the
//!    first block of cycle 0 (binary search).
//! 3. Block 0 and the last block show the same cycle `c`: the head is at
//!    the end (wrap point), unless holes of cycle `c - 1` remain.
//!    Otherwise block 0 shows `c + 1` and the last block `c`: the head is
//!    the first block of cycle `c` (binary search).
//! 4. Up to eight log buffers may be in flight at a crash and land out of
//!    order, so the `8 * 256 KiB` before the head are scanned for the
//!    earliest block still carrying the previous pass's cycle; the head moves
//!    back to it.
//! 5. The head must follow a whole record: walk back (at most 256 KiB) to the
//!    last record header; if that record does not end exactly at the head it
//!    was torn, and the head moves back to its header.
//!
//! The last record before the head gives the tail (`h_tail_lsn`). The log is
//! clean when that record is an unmount record (one op, flag UNMOUNT) ending
//! at the head: then tail = head. For a dirty log the CRCs of the last (up
//! to eight) records are checked and a torn write at the head is cut off, as
//! recovery does.
//!
//! Not done here (the recovery milestone): the kernel also CRC-checks every
//! record from the tail to the head and, when a bad record lies within
//! eight log buffers of the head, moves the tail forward past it (a torn
//! write that overwrote the old tail). [`Log::contents`] reports any bad
//! CRC between tail and head as corruption instead.
//!
//! Invariants: every scan is bounded by the log size; block numbers are
//! always reduced modulo the log size before I/O; nothing read from the log
//! can make this code loop or allocate beyond the log's own size.

use std::fmt;

use crate::bdev::BlockDevice;
use crate::error::{Error, Location, Result};
use crate::format::log::{block_cycle, check_log_size, is_record_header, HostOrder, BBSIZE};
use crate::format::log::{MAX_ICLOGS, MAX_RECORD_BSIZE, OP_UNMOUNT};
use crate::format::log_ops::{TransAssembler, Transaction};
use crate::format::log_record::{CrcCheck, LogRecord, RecordHeader};
use crate::format::sb::Superblock;
use crate::format::Uuid;
use crate::geometry::Geometry;
use crate::types::{Daddr, Lsn};

/// BBs that in-flight log buffers can cover: the scan window of step 4.
const INFLIGHT_BBS: u32 = (MAX_ICLOGS * MAX_RECORD_BSIZE / BBSIZE) as u32;
/// BBs one record can span: the scan window of step 5.
const RECORD_BBS: u32 = (MAX_RECORD_BSIZE / BBSIZE) as u32;
/// BBs read at a time by sequential scans.
const SCAN_CHUNK_BBS: u32 = 256;

/// What the log says about the filesystem's consistency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogState {
    /// First BB of the log on the data device.
    pub start: Daddr,
    /// Log size in BBs.
    pub size_bbs: u32,
    /// Where the next record goes (cycle, block).
    pub head: Lsn,
    /// Oldest change that may not be on disk; equals `head` when clean.
    pub tail: Lsn,
    /// The record just before the head (None: zeroed log).
    pub last_record: Option<RecordInfo>,
    /// No recovery needed.
    pub clean: bool,
    /// The log was never written (all zero).
    pub zeroed: bool,
    /// A torn write was cut off: the head moved back from this block.
    pub torn_from: Option<u32>,
}

/// Summary of one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordInfo {
    /// Log block of the record header.
    pub block: u32,
    pub lsn: Lsn,
    pub tail_lsn: Lsn,
    pub len: u32,
    pub num_logops: u32,
    /// Log buffer size (`h_size`).
    pub buf_size: u32,
    /// Whether it is an unmount record.
    pub unmount: bool,
}

impl LogState {
    pub fn needs_recovery(&self) -> bool {
        !self.clean
    }
}

impl fmt::Display for LogState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = if self.zeroed {
            "clean (zeroed)"
        } else if self.clean {
            "clean"
        } else {
            "DIRTY (needs recovery)"
        };
        write!(
            f,
            "log: {state}, head {} tail {}, {} BBs at daddr {}",
            self.head, self.tail, self.size_bbs, self.start.0
        )?;
        if let Some(r) = &self.last_record {
            write!(f, ", last record {} ({} ops)", r.lsn, r.num_logops)?;
        }
        if let Some(t) = self.torn_from {
            write!(f, ", torn write cut at block {t}")?;
        }
        Ok(())
    }
}

/// The internal log of a filesystem, for reading.
pub struct Log<'a> {
    dev: &'a dyn BlockDevice,
    start: Daddr,
    bbs: u32,
    uuid: Uuid,
}

/// A record read from the log, with its header block.
#[derive(Debug, Clone)]
pub struct LogRecordAt {
    pub block: u32,
    pub record: LogRecord,
}

/// Everything the records between tail and head hold.
#[derive(Debug, Clone, Default)]
pub struct LogContents {
    pub records: u64,
    /// Records whose stored CRC is zero (accepted).
    pub unset_crcs: u64,
    pub transactions: Vec<Transaction>,
    /// Transactions started but not committed before the head.
    pub uncommitted: usize,
    pub stats: crate::format::log_ops::AssemblyStats,
    /// Byte order of the host-order structures.
    pub order: Option<HostOrder>,
}

impl<'a> Log<'a> {
    /// The internal log described by `sb`/`geo` on `dev`.
    pub fn new(dev: &'a dyn BlockDevice, geo: &Geometry, sb: &Superblock) -> Result<Self> {
        if sb.logstart == 0 {
            return Err(Error::NotSupported(
                "the filesystem has an external log device".into(),
            ));
        }
        let start = geo.log_daddr();
        let bbs = geo.log_bbs();
        check_log_size(bbs, Location::Daddr(start.0))?;
        let end = (start.0 + bbs) << 9;
        if end > dev.size() || start.0 >= geo.dblocks << (geo.blocklog - 9) {
            return Err(Error::corrupt(
                "superblock",
                Location::Daddr(0),
                format!(
                    "log at daddr {} of {bbs} BBs lies outside the device",
                    start.0
                ),
            ));
        }
        Ok(Log {
            dev,
            start,
            bbs: bbs as u32,
            uuid: sb.uuid,
        })
    }

    /// A log of `bbs` blocks at `start` on `dev` belonging to the filesystem
    /// `uuid` (for tests and tools that build logs).
    pub fn from_parts(
        dev: &'a dyn BlockDevice,
        start: Daddr,
        bbs: u32,
        uuid: Uuid,
    ) -> Result<Self> {
        check_log_size(bbs as u64, Location::Daddr(start.0))?;
        if (start.0 + bbs as u64) << 9 > dev.size() {
            return Err(Error::Invalid("log outside the device".into()));
        }
        Ok(Log {
            dev,
            start,
            bbs,
            uuid,
        })
    }

    pub fn size_bbs(&self) -> u32 {
        self.bbs
    }

    fn at(&self, blk: u32) -> Location {
        Location::Daddr(self.start.0 + (blk % self.bbs) as u64)
    }

    /// Read `count` BBs from log block `blk`, wrapping at the end of the log.
    pub fn read(&self, blk: u32, count: u32) -> Result<Vec<u8>> {
        debug_assert!(count <= self.bbs);
        let blk = blk % self.bbs;
        let mut buf = vec![0u8; count as usize * BBSIZE];
        let first = count.min(self.bbs - blk);
        let (a, b) = buf.split_at_mut(first as usize * BBSIZE);
        self.dev
            .read_at(a, Daddr(self.start.0 + blk as u64).bytes())?;
        if !b.is_empty() {
            self.dev.read_at(b, self.start.bytes())?;
        }
        Ok(buf)
    }

    fn cycle(&self, blk: u32) -> Result<u32> {
        Ok(block_cycle(&self.read(blk, 1)?))
    }

    /// First block in `(lo, hi]` showing `cycle`, given that `lo` does not
    /// and `hi` does (the blocks between form two runs).
    fn cycle_start(&self, mut lo: u32, mut hi: u32, cycle: u32) -> Result<u32> {
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.cycle(mid)? == cycle {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        Ok(hi)
    }

    /// First block in `[from, from + count)` (no wrap) showing `cycle`.
    fn find_cycle(&self, from: u32, count: u32, cycle: u32) -> Result<Option<u32>> {
        let mut done = 0;
        while done < count {
            let n = (count - done).min(SCAN_CHUNK_BBS);
            let buf = self.read(from + done, n)?;
            for i in 0..n {
                if block_cycle(&buf[i as usize * BBSIZE..]) == cycle {
                    return Ok(Some(from + done + i));
                }
            }
            done += n;
        }
        Ok(None)
    }

    /// Record headers walking back from `head` (exclusive), at most
    /// `max_bbs` blocks, wrapping; stops after `count` headers. Returns
    /// (block, distance back) of each, nearest first.
    fn headers_before(&self, head: u32, max_bbs: u32, count: usize) -> Result<Vec<(u32, u32)>> {
        let mut found = Vec::new();
        let max_bbs = max_bbs.min(self.bbs);
        let mut d = 0;
        while d < max_bbs && found.len() < count {
            // Read the chunk of blocks [head - d - n, head - d).
            let n = (max_bbs - d).min(SCAN_CHUNK_BBS);
            let first = (head as u64 + self.bbs as u64 * 2 - d as u64 - n as u64) % self.bbs as u64;
            let buf = self.read(first as u32, n)?;
            for i in (0..n).rev() {
                if is_record_header(&buf[i as usize * BBSIZE..]) {
                    let dist = d + (n - i);
                    found.push(((first as u32 + i) % self.bbs, dist));
                    if found.len() == count {
                        break;
                    }
                }
            }
            d += n;
        }
        Ok(found)
    }

    /// Decode the record header at log block `blk`.
    pub fn read_header(&self, blk: u32) -> Result<RecordHeader> {
        let at = self.at(blk);
        let h = RecordHeader::decode(&self.read(blk, 1)?, at)?;
        if h.uuid != [0u8; 16] && h.uuid != self.uuid {
            return Err(Error::corrupt(
                "log record header",
                at,
                "log belongs to another filesystem (uuid mismatch)",
            ));
        }
        Ok(h)
    }

    /// Read the whole record at log block `blk` (payload still packed).
    pub fn read_record(&self, blk: u32) -> Result<LogRecord> {
        let at = self.at(blk);
        let h = self.read_header(blk)?;
        if h.len == 0 {
            return Err(Error::corrupt("log record header", at, "empty record"));
        }
        if h.lsn.block() != blk {
            return Err(Error::corrupt(
                "log record header",
                at,
                format!("lsn {} names another block than {blk}", h.lsn),
            ));
        }
        let total = h.total_blocks();
        if total >= self.bbs {
            return Err(Error::corrupt(
                "log record header",
                at,
                "record longer than the log",
            ));
        }
        LogRecord::decode(&self.read(blk, total)?, at)
    }

    /// Step 1-5 of the module doc: the head block, or `None` for a log
    /// that was never written.
    pub fn find_head(&self) -> Result<Option<u32>> {
        let bbs = self.bbs;
        let c0 = self.cycle(0)?;
        if c0 == 0 {
            return Ok(None);
        }
        let clast = self.cycle(bbs - 1)?;
        // `head` may be `bbs` (the wrap point) until the end.
        let mut head;
        if clast == 0 {
            head = self.cycle_start(0, bbs - 1, 0)?;
            let w = INFLIGHT_BBS.min(head);
            if let Some(h) = self.find_cycle(head - w, w, 0)? {
                head = h;
            }
        } else {
            let hole;
            if c0 == clast {
                head = bbs;
                hole = clast.wrapping_sub(1);
            } else {
                head = self.cycle_start(0, bbs - 1, clast)?;
                hole = clast;
            }
            let w = INFLIGHT_BBS.min(bbs);
            if head >= w {
                if let Some(h) = self.find_cycle(head - w, w, hole)? {
                    head = h;
                }
            } else {
                // The window wraps: the end of the log is one pass older.
                let tail_part = w - head;
                if let Some(h) =
                    self.find_cycle(bbs - tail_part, tail_part, hole.wrapping_sub(1))?
                {
                    head = h;
                } else if let Some(h) = self.find_cycle(0, head, hole)? {
                    head = h;
                }
            }
        }
        // Step 5: the head must follow a whole record.
        let back = self.headers_before(head % bbs, RECORD_BBS + 8, 1)?;
        let Some(&(hblk, dist)) = back.first() else {
            return Err(Error::corrupt(
                "log",
                self.at(head),
                "no record header before the head",
            ));
        };
        let h = self.read_header(hblk)?;
        if dist != h.total_blocks() {
            head = hblk;
        }
        Ok(Some(head % bbs))
    }

    /// Head, tail, and whether the log is clean, as mount-time recovery
    /// decides it.
    pub fn find_state(&self) -> Result<LogState> {
        let zeroed = LogState {
            start: self.start,
            size_bbs: self.bbs,
            head: Lsn::new(0, 0),
            tail: Lsn::new(0, 0),
            last_record: None,
            clean: true,
            zeroed: true,
            torn_from: None,
        };
        let Some(mut head) = self.find_head()? else {
            return Ok(zeroed);
        };
        let mut rblk = self.last_header_before(head, head)?;
        let mut st = self.state_at(head, rblk)?;
        if st.clean {
            return Ok(st);
        }
        // Dirty: cut torn writes among the last records, as recovery does.
        let tail_blk = st.tail.block();
        let span = distance(tail_blk, head, self.bbs);
        let recent = self.headers_before(head, span, MAX_ICLOGS)?;
        if let Some(&(first, _)) = recent.last() {
            if let Some(bad) = self.first_bad_record(first, head)? {
                let orig = head;
                head = bad;
                rblk = self.last_header_before(head, tail_blk)?;
                st = self.state_at(head, rblk)?;
                st.torn_from = Some(orig);
            }
        }
        Ok(st)
    }

    /// The last record header before `head`, searching back no further
    /// than `stop` (`stop == head`: the whole log).
    fn last_header_before(&self, head: u32, stop: u32) -> Result<u32> {
        let mut span = distance(stop, head, self.bbs);
        if span == 0 {
            span = self.bbs;
        }
        match self.headers_before(head, span, 1)?.first() {
            Some(&(b, _)) => Ok(b),
            None => Err(Error::corrupt(
                "log",
                self.at(head),
                "no record header found before the head",
            )),
        }
    }

    /// The state implied by head block `head` and last record at `rblk`.
    fn state_at(&self, head: u32, rblk: u32) -> Result<LogState> {
        let h = self.read_header(rblk)?;
        let wrapped = rblk >= head;
        let head_lsn = Lsn::new(h.cycle.wrapping_add(wrapped as u32), head);
        let after = (rblk as u64 + h.total_blocks() as u64) % self.bbs as u64;
        let mut unmount = false;
        if after == head as u64 && h.num_logops == 1 && h.len > 0 {
            let data = self.read(rblk + h.header_blocks(), 1)?;
            unmount = data[9] & OP_UNMOUNT != 0;
        }
        let tail = if unmount { head_lsn } else { h.tail_lsn };
        if h.tail_lsn.block() >= self.bbs {
            return Err(Error::corrupt(
                "log record header",
                self.at(rblk),
                format!("tail lsn {} lies outside the log", h.tail_lsn),
            ));
        }
        Ok(LogState {
            start: self.start,
            size_bbs: self.bbs,
            head: head_lsn,
            tail,
            last_record: Some(RecordInfo {
                block: rblk,
                lsn: h.lsn,
                tail_lsn: h.tail_lsn,
                len: h.len,
                num_logops: h.num_logops,
                buf_size: h.size,
                unmount,
            }),
            clean: unmount || tail.block() == head,
            zeroed: false,
            torn_from: None,
        })
    }

    /// The first record from `from` up to `head` that is unreadable or
    /// fails its CRC.
    fn first_bad_record(&self, from: u32, head: u32) -> Result<Option<u32>> {
        let mut blk = from;
        let mut left = distance(from, head, self.bbs);
        while left > 0 {
            let r = match self.read_record(blk) {
                Ok(r) if r.crc.is_ok() => r,
                Ok(_) | Err(Error::Corrupt { .. }) => return Ok(Some(blk)),
                Err(e) => return Err(e),
            };
            let n = r.header.total_blocks();
            if n > left {
                return Ok(Some(blk));
            }
            left -= n;
            blk = (blk + n) % self.bbs;
        }
        Ok(None)
    }

    /// Walk the records from block `from` to block `to` (exclusive),
    /// calling `f` with each (packed payload, CRC checked). A record that
    /// overruns `to` is corrupt.
    pub fn for_each_record(
        &self,
        from: u32,
        to: u32,
        mut f: impl FnMut(LogRecordAt) -> Result<()>,
    ) -> Result<()> {
        let mut blk = from % self.bbs;
        let mut left = distance(blk, to % self.bbs, self.bbs);
        while left > 0 {
            let record = self.read_record(blk)?;
            let n = record.header.total_blocks();
            if n > left {
                return Err(Error::corrupt(
                    "log record",
                    self.at(blk),
                    format!("record of {n} blocks runs past the head"),
                ));
            }
            f(LogRecordAt { block: blk, record })?;
            left -= n;
            blk = (blk + n) % self.bbs;
        }
        Ok(())
    }

    /// Read and check every record from the tail to the head of `st`,
    /// reassembling the committed transactions. A bad CRC is corruption.
    pub fn contents(&self, st: &LogState) -> Result<LogContents> {
        let mut c = LogContents::default();
        if st.zeroed {
            return Ok(c);
        }
        let mut asm: Option<TransAssembler> = None;
        self.for_each_record(st.tail.block(), st.head.block(), |mut r| {
            let at = self.at(r.block);
            match r.record.crc {
                CrcCheck::Good => {}
                CrcCheck::Unset => c.unset_crcs += 1,
                CrcCheck::Bad { stored, computed } => {
                    return Err(Error::corrupt(
                        "log record",
                        at,
                        format!("CRC {stored:#010x} stored, {computed:#010x} computed"),
                    ))
                }
            }
            let h = &r.record.header;
            let order = HostOrder::from_fmt(h.fmt).ok_or_else(|| {
                Error::corrupt("log record header", at, format!("unknown format {}", h.fmt))
            })?;
            match c.order {
                None => c.order = Some(order),
                Some(o) if o != order => {
                    return Err(Error::corrupt(
                        "log record header",
                        at,
                        "byte order changes",
                    ))
                }
                Some(_) => {}
            }
            r.record.unpack(at)?;
            let h = &r.record.header;
            let data = &r.record.data[..h.len as usize];
            let a = asm.get_or_insert_with(|| TransAssembler::new(order));
            a.add_record(h.lsn, data, h.num_logops, at, &mut c.transactions)?;
            c.records += 1;
            Ok(())
        })?;
        if let Some(a) = asm {
            c.uncommitted = a.open_transactions();
            c.stats = a.stats;
        }
        Ok(c)
    }
}

/// Blocks from `from` forward to `to` in a circular log of `bbs` blocks.
fn distance(from: u32, to: u32, bbs: u32) -> u32 {
    if to >= from {
        to - from
    } else {
        to + bbs - from
    }
}

#[cfg(test)]
#[path = "find_tests.rs"]
mod tests;
