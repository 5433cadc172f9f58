//! The log writer: ops into log buffers, buffers to disk, forces, the
//! unmount record. The ring, ordering and lock rules are in the module doc
//! of [`crate::log`].

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use super::grant::{GrantHeads, TailPusher, Ticket};
use super::iclog::{check_buffers, header_bbs, is_full, padded_len, payload_capacity};
use super::iclog::{Iclog, IclogState, IoJob, StableCallback};
use super::{Counters, LogStats};
use crate::bdev::BlockDevice;
use crate::error::{Error, Result};
use crate::format::log::{encode_unmount_body, HostOrder, TransHeader, BBSIZE, CLIENT_LOG};
use crate::format::log::{CLIENT_TRANSACTION, OP_COMMIT, OP_HEADER_SIZE, OP_START, OP_UNMOUNT};
use crate::format::log::{RECORD_MAGIC, TRANS_CHECKPOINT, TRANS_HEADER_SIZE, TRANS_MAGIC};
use crate::format::log_record::RecordHeader;
use crate::format::Uuid;
use crate::log::find::LogState;
use crate::types::{Daddr, Lsn};

/// Where the log is and how to write it.
#[derive(Debug, Clone)]
pub struct LogConfig {
    /// First BB of the log on the device.
    pub start: Daddr,
    pub size_bbs: u32,
    /// Filesystem UUID stamped in record headers (`sb_uuid`).
    pub uuid: Uuid,
    pub logbufs: usize,
    pub logbsize: u32,
    /// Where the next record goes.
    pub head: Lsn,
    /// Oldest record whose changes may not be on disk.
    pub tail: Lsn,
    /// Block of the last record before `head` (`u32::MAX`: none).
    pub prev_block: u32,
    /// Byte order of host-order structures (TRAN header, unmount body).
    pub order: HostOrder,
    /// Log stripe unit in bytes (`sb_logsunit`; [`BBSIZE`] when there is
    /// none): every record (header + payload) is padded to a multiple of
    /// it, so records start on stripe-unit (and 4 KiB log sector)
    /// boundaries as the kernel's do.
    pub sunit: u32,
}

impl LogConfig {
    /// Continue the log found by [`crate::log::find::Log::find_state`] (a
    /// clean log: its head is past every LSN in use, so every LSN this
    /// writer stamps is newer than any on disk).
    pub fn from_state(st: &LogState, uuid: Uuid, logbufs: usize, logbsize: u32) -> Self {
        let head = if st.zeroed { Lsn::new(1, 0) } else { st.head };
        let tail = if st.zeroed { head } else { st.tail };
        LogConfig {
            start: st.start,
            size_bbs: st.size_bbs,
            uuid,
            logbufs,
            logbsize,
            head,
            tail,
            prev_block: st.last_record.as_ref().map_or(u32::MAX, |r| r.block),
            order: HostOrder::native(),
            sunit: BBSIZE as u32,
        }
    }
}

/// One op to write: a region with its op header fields.
#[derive(Debug, Clone, Copy)]
pub struct LogOp<'a> {
    pub tid: u32,
    pub clientid: u8,
    pub flags: u8,
    pub data: &'a [u8],
}

/// LSNs of a written checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointLsns {
    /// Record holding the START op.
    pub start: Lsn,
    /// Record holding the COMMIT op (force this to make it durable).
    pub commit: Lsn,
}

pub(super) struct Core {
    pub(super) iclogs: Vec<Iclog>,
    /// Ring index of the buffer taking ops.
    pub(super) cur: usize,
    /// Ring index of the oldest switched-out buffer not yet completed
    /// (`== cur` when no write is in flight).
    pub(super) oldest: usize,
    pub(super) curr_cycle: u32,
    pub(super) curr_block: u32,
    pub(super) prev_block: u32,
    pub(super) next_seq: u64,
    /// Every record with a smaller sequence number has its data written
    /// (its post-flush may still be running); `written` holds those done
    /// out of order.
    pub(super) written_below: u64,
    pub(super) written: BTreeSet<u64>,
    pub(super) completing: bool,
    /// The commit gate (gate.rs): forcers waiting at it, passers still
    /// pushing, the generation opened last, forcers released by recent
    /// completions and not back yet, and the last arrival or release.
    pub(super) gate_waiting: usize,
    pub(super) gate_turns: usize,
    pub(super) gate_epoch: u64,
    pub(super) returning: usize,
    pub(super) gate_last: Option<std::time::Instant>,
    pub(super) last_sync: Lsn,
    pub(super) error: Option<String>,
    pub(super) exit: bool,
}

pub(super) struct Shared {
    pub(super) cfg: LogConfig,
    pub(super) dev: Arc<dyn BlockDevice>,
    pub(super) grant: GrantHeads,
    pub(super) hdr_bbs: u32,
    pub(super) capacity: usize,
    pub(super) core: Mutex<Core>,
    /// Writers waiting for the current buffer to come back to ACTIVE.
    pub(super) space_cv: Condvar,
    /// Forces waiting for `last_sync` to pass their LSN.
    pub(super) done_cv: Condvar,
    /// Commit writes waiting for earlier data writes to finish.
    pub(super) order_cv: Condvar,
    /// Forcers waiting at the commit gate.
    pub(super) gate_cv: Condvar,
    pub(super) io_cvs: Vec<Condvar>,
    pub(super) stats: Counters,
    pub(super) next_tid: AtomicU32,
    /// Another device holding data that committed metadata points at
    /// (the realtime device): flushed with the log device before every
    /// commit record, so a mapping never reaches the log before its data
    /// is stable (see [`LogWriter::add_data_device`]).
    pub(super) data_dev: std::sync::OnceLock<Arc<dyn BlockDevice>>,
}

/// The log writer of one filesystem (see the module doc of [`crate::log`]).
pub struct LogWriter {
    pub(super) sh: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl LogWriter {
    /// Flush `dev` too before every commit record (the pre-flush that
    /// makes earlier data writes stable covers it): the realtime device,
    /// whose file data the log's mappings point at. Set once.
    pub fn add_data_device(&self, dev: Arc<dyn BlockDevice>) {
        let _ = self.sh.data_dev.set(dev);
    }

    /// Start writing the log described by `cfg` on `dev`.
    pub fn new(
        dev: Arc<dyn BlockDevice>,
        cfg: LogConfig,
        pusher: Arc<dyn TailPusher>,
    ) -> Result<Self> {
        check_buffers(cfg.logbufs, cfg.logbsize)?;
        let hdr_bbs = header_bbs(cfg.logbsize);
        let rec_bbs = cfg.logbsize / BBSIZE as u32;
        if cfg.size_bbs < rec_bbs * cfg.logbufs as u32 * 2 {
            return Err(Error::Invalid(format!(
                "log of {} BBs too small for {} buffers of {}",
                cfg.size_bbs, cfg.logbufs, cfg.logbsize
            )));
        }
        let end = (cfg.start.0 + cfg.size_bbs as u64) * BBSIZE as u64;
        if end > dev.size() || cfg.head.block() >= cfg.size_bbs || cfg.tail > cfg.head {
            return Err(Error::Invalid(
                "log head, tail or extent out of range".into(),
            ));
        }
        let sunit = cfg.sunit as usize;
        if sunit == 0 || !sunit.is_multiple_of(BBSIZE) || cfg.sunit > cfg.logbsize {
            return Err(Error::Invalid(format!(
                "log stripe unit {} is not a multiple of 512 no larger than logbsize {}",
                cfg.sunit, cfg.logbsize
            )));
        }
        // Room for the payload once the record is padded to whole stripe
        // units within one buffer of logbsize bytes.
        let whole = cfg.logbsize as usize / sunit * sunit;
        let capacity = payload_capacity(cfg.logbsize).min(whole - hdr_bbs as usize * BBSIZE);
        let grant = GrantHeads::new(cfg.size_bbs, cfg.tail, cfg.head, pusher);
        let core = Core {
            iclogs: (0..cfg.logbufs).map(|_| Iclog::new(capacity)).collect(),
            cur: 0,
            oldest: 0,
            curr_cycle: cfg.head.cycle(),
            curr_block: cfg.head.block(),
            prev_block: cfg.prev_block,
            next_seq: 0,
            written_below: 0,
            written: BTreeSet::new(),
            completing: false,
            gate_waiting: 0,
            gate_turns: 0,
            gate_epoch: 0,
            returning: 0,
            gate_last: None,
            last_sync: prev_record_lsn(&cfg),
            error: None,
            exit: false,
        };
        let seed = (cfg.head.0 as u32) ^ 0x5a17_0000;
        let sh = Arc::new(Shared {
            io_cvs: (0..cfg.logbufs).map(|_| Condvar::new()).collect(),
            cfg,
            dev,
            grant,
            hdr_bbs,
            capacity,
            core: Mutex::new(core),
            space_cv: Condvar::new(),
            done_cv: Condvar::new(),
            order_cv: Condvar::new(),
            gate_cv: Condvar::new(),
            stats: Counters::default(),
            next_tid: AtomicU32::new(seed | 1),
            data_dev: std::sync::OnceLock::new(),
        });
        let threads = (0..sh.cfg.logbufs)
            .map(|i| {
                let s = sh.clone();
                std::thread::Builder::new()
                    .name(format!("rxfs-log-io{i}"))
                    .spawn(move || s.io_thread(i))
                    .map_err(|e| Error::io("spawn log I/O thread", 0, 0, e))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(LogWriter { sh, threads })
    }

    pub fn grant(&self) -> &GrantHeads {
        &self.sh.grant
    }

    pub fn config(&self) -> &LogConfig {
        &self.sh.cfg
    }

    pub fn stats(&self) -> LogStats {
        self.sh.stats.snapshot(self.sh.grant.stats())
    }

    /// Overwrite what a crash may have left ahead of the head: torn pieces
    /// of records that never completed carry the current cycle, so after
    /// this writer has written a little more a head search would take them
    /// for part of the log (a dirty log after a clean unmount, or a replay
    /// of garbage after the next crash). The kernel does the same at every
    /// mount (`xlog_clear_stale_blocks`). Call before the first record.
    ///
    /// Cleared: up to the in-flight window a head search looks back over
    /// ([`STALE_WINDOW_BBS`]), never into the live log (`[tail, head)`)
    /// and never more than half the log. Blocks before the physical end
    /// get the previous cycle (an empty record header, or zeros for cycle
    /// 0: never written); blocks past the wrap, the current one, as what
    /// this pass wrote there earlier.
    pub fn clear_stale_blocks(&self) -> Result<u32> {
        let cfg = &self.sh.cfg;
        let (size, head, tail) = (cfg.size_bbs, cfg.head, cfg.tail);
        let (h, t) = (head.block(), tail.block());
        let free = if tail.cycle() == head.cycle() {
            size - h + t
        } else {
            t.saturating_sub(h)
        };
        // Whole stripe units (4 KiB log sectors), as every log write.
        let unit = (cfg.sunit as usize / BBSIZE).max(1) as u32;
        let n = free.min(STALE_WINDOW_BBS).min(size / 2) / unit * unit;
        let first = n.min(size - h);
        self.write_stale(h, first, head.cycle().wrapping_sub(1), tail)?;
        if n > first {
            self.write_stale(0, n - first, head.cycle(), tail)?;
        }
        self.sh.dev.flush()?;
        Ok(n)
    }

    fn write_stale(&self, block: u32, count: u32, cycle: u32, tail: Lsn) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        let cfg = &self.sh.cfg;
        let mut buf = vec![0u8; count as usize * BBSIZE];
        if cycle != 0 {
            for i in 0..count {
                let lsn = Lsn::new(cycle, block + i);
                let h =
                    RecordHeader::new(cycle, lsn, tail, cfg.order.fmt(), cfg.uuid, cfg.logbsize);
                h.encode(&mut buf[i as usize * BBSIZE..]);
            }
        }
        let off = Daddr(cfg.start.0 + block as u64).bytes();
        self.sh.dev.write_at(&buf, off)
    }

    /// Where the next record goes.
    pub fn head(&self) -> Lsn {
        let c = self.sh.lock();
        Lsn::new(c.curr_cycle, c.curr_block)
    }

    /// The LSN of the last record known to be on disk.
    pub fn last_sync_lsn(&self) -> Lsn {
        self.sh.lock().last_sync
    }

    /// Reserve log space for a transaction (a new tid each time).
    pub fn reserve(&self, unit_bytes: u32, count: u32, permanent: bool) -> Result<Ticket> {
        let tid = self.sh.next_tid.fetch_add(0x9e37_79b1, Ordering::Relaxed);
        self.sh.grant.reserve(tid, unit_bytes, count, permanent)
    }

    /// A ticket with no space of its own and a fresh tid (see
    /// [`Ticket::empty`]).
    pub fn empty_ticket(&self) -> Ticket {
        Ticket::empty(self.sh.next_tid.fetch_add(0x9e37_79b1, Ordering::Relaxed))
    }

    /// Worst-case bytes `ops` of these payload sizes take in the log: op
    /// headers, a record header per buffer they may touch, BB padding.
    pub fn unit_bytes_for(&self, payload_lens: &[usize]) -> u32 {
        let body: usize = payload_lens.iter().map(|l| l + OP_HEADER_SIZE).sum();
        let bufs = body.div_ceil(self.sh.capacity - OP_HEADER_SIZE) + 1;
        let splits = bufs * OP_HEADER_SIZE;
        let hdr = bufs * self.sh.hdr_bbs as usize * BBSIZE;
        // Padding: a BB, or up to a stripe unit per record (two, as the
        // kernel reserves, for the record a commit may end in).
        let sunit = self.sh.cfg.sunit as usize;
        let pad = if sunit > BBSIZE { 2 * sunit } else { BBSIZE };
        (body + splits + hdr + pad) as u32
    }

    /// Write `ops` in order; returns the LSN of the record holding the last
    /// one. A COMMIT or UNMOUNT op marks its buffer for flush semantics and
    /// pushes it out at once if no write is in flight (else it waits for
    /// the in-flight writes: later commits batch into it).
    pub fn write(&self, ticket: &mut Ticket, ops: &[LogOp<'_>]) -> Result<Lsn> {
        self.sh.write(ticket, ops)
    }

    /// Write a checkpoint: START, the TRAN header (type CHECKPOINT), every
    /// item's regions (the first region of each item is its format header),
    /// then the COMMIT op in a second write, as the kernel orders them.
    pub fn write_checkpoint(
        &self,
        ticket: &mut Ticket,
        items: &[Vec<Vec<u8>>],
    ) -> Result<CheckpointLsns> {
        let tid = ticket.tid;
        let mut th = [0u8; TRANS_HEADER_SIZE];
        TransHeader {
            magic: TRANS_MAGIC,
            trans_type: TRANS_CHECKPOINT,
            tid,
            num_items: items.len() as u32,
        }
        .encode(&mut th, self.sh.cfg.order);
        let op = |flags, data| LogOp {
            tid,
            clientid: CLIENT_TRANSACTION,
            flags,
            data,
        };
        let mut ops = vec![op(OP_START, &[][..]), op(0, &th[..])];
        ops.extend(items.iter().flatten().map(|r| op(0, &r[..])));
        // The start record's LSN is the first buffer's: write START alone
        // to learn it, then the rest.
        let start = self.write(ticket, &ops[..1])?;
        self.write(ticket, &ops[1..])?;
        let commit = self.write(ticket, &[op(OP_COMMIT, &[][..])])?;
        Ok(CheckpointLsns { start, commit })
    }

    /// Reserve exactly the space a checkpoint of `items` takes, write it
    /// ([`LogWriter::write_checkpoint`]) and give the unused reservation
    /// back: a whole checkpoint for callers outside the CIL (log tools and
    /// tests). A checkpoint that outgrew its reservation is a bug in
    /// [`LogWriter::unit_bytes_for`] and answers `Invalid`.
    pub fn write_standalone_checkpoint(&self, items: &[Vec<Vec<u8>>]) -> Result<CheckpointLsns> {
        // START (empty), the TRAN header, the items' regions, COMMIT (empty).
        let lens: Vec<usize> = [0, TRANS_HEADER_SIZE]
            .into_iter()
            .chain(items.iter().flatten().map(Vec::len))
            .chain([0])
            .collect();
        let mut t = self.reserve(self.unit_bytes_for(&lens), 1, false)?;
        let r = self.write_checkpoint(&mut t, items);
        let overrun = t.overrun_bytes;
        self.grant().ungrant(t);
        let lsns = r?;
        if overrun != 0 {
            return Err(Error::Invalid(format!(
                "checkpoint overran its reservation by {overrun} bytes"
            )));
        }
        Ok(lsns)
    }

    /// Write a checkpoint from borrowed regions: `items[i]` are item i's
    /// regions, the first being its format header (items with no regions,
    /// ordered buffers, are skipped). As [`LogWriter::write_checkpoint`].
    pub fn write_checkpoint_regions(
        &self,
        ticket: &mut Ticket,
        items: &[Vec<&[u8]>],
    ) -> Result<CheckpointLsns> {
        let tid = ticket.tid;
        let live: Vec<&Vec<&[u8]>> = items.iter().filter(|r| !r.is_empty()).collect();
        let mut th = [0u8; TRANS_HEADER_SIZE];
        TransHeader {
            magic: TRANS_MAGIC,
            trans_type: TRANS_CHECKPOINT,
            tid,
            num_items: live.iter().map(|r| r.len() as u32).sum(),
        }
        .encode(&mut th, self.sh.cfg.order);
        let op = |flags, data| LogOp {
            tid,
            clientid: CLIENT_TRANSACTION,
            flags,
            data,
        };
        let mut ops = vec![op(0, &th[..])];
        ops.extend(live.iter().flat_map(|r| r.iter()).map(|r| op(0, *r)));
        let start = self.write(ticket, &[op(OP_START, &[][..])])?;
        self.write(ticket, &ops)?;
        let commit = self.write(ticket, &[op(OP_COMMIT, &[][..])])?;
        Ok(CheckpointLsns { start, commit })
    }

    /// Make the record holding `lsn` (and everything before it) stable.
    pub fn force(&self, lsn: Lsn) -> Result<()> {
        self.sh.force(Some(lsn)).map(|_| ())
    }

    /// Make everything written so far stable; returns the last record LSN.
    pub fn force_all(&self) -> Result<Lsn> {
        self.sh.force(None)
    }

    /// Run `cb` once the record holding `lsn` is stable (at once if it is).
    pub fn on_stable(&self, lsn: Lsn, cb: StableCallback) {
        let mut c = self.sh.lock();
        if let Some(e) = &c.error {
            let e = Error::Invalid(format!("log shut down: {e}"));
            drop(c);
            return cb(Err(e));
        }
        if lsn <= c.last_sync {
            drop(c);
            return cb(Ok(lsn));
        }
        match c.iclogs.iter_mut().find(|ic| ic.lsn == lsn) {
            // Its completion pass already took the callbacks: it is stable.
            Some(ic) if ic.state == IclogState::Callback => {
                drop(c);
                cb(Ok(lsn))
            }
            Some(ic) => ic.callbacks.push(cb),
            None => {
                drop(c);
                cb(Err(Error::Invalid(format!("no log record at {lsn}"))))
            }
        }
    }

    /// Clean unmount: force everything, write the unmount record (alone in
    /// its record, so the log reads clean), force it, stop the I/O threads.
    /// The caller has quiesced writers and moved the tail (AIL empty).
    pub fn unmount(mut self) -> Result<Lsn> {
        let r = self.unmount_record();
        self.stop();
        r
    }

    /// The unmount record without stopping the writer (a shared writer:
    /// its threads stop when the last reference is dropped).
    pub fn unmount_record(&self) -> Result<Lsn> {
        self.force_all()?;
        let mut t = self.reserve(1024, 1, false)?;
        let body = encode_unmount_body(self.sh.cfg.order);
        let op = LogOp {
            tid: t.tid,
            clientid: CLIENT_LOG,
            flags: OP_UNMOUNT,
            data: &body,
        };
        let r = self
            .write(&mut t, &[op])
            .and_then(|l| self.force(l).map(|_| l));
        self.sh.grant.ungrant(t);
        r
    }

    /// Force everything and stop, leaving the log as it is (dirty unless
    /// the last record is an unmount record).
    pub fn close(mut self) -> Result<Lsn> {
        let r = self.force_all();
        self.stop();
        r
    }

    /// Shut the log down: fail waiters and later calls.
    pub fn shutdown(&self) {
        self.sh.fail("shut down by request".into());
    }

    fn stop(&mut self) {
        self.sh.lock().exit = true;
        for cv in &self.sh.io_cvs {
            cv.notify_all();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for LogWriter {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            let _ = self.sh.force(None);
            self.stop();
        }
    }
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, Core> {
        self.core.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn shut_err(c: &Core) -> Result<()> {
        match &c.error {
            Some(_) => Err(Error::Shutdown),
            None => Ok(()),
        }
    }

    pub(super) fn fail(&self, why: String) {
        let mut c = self.lock();
        if c.error.is_none() {
            tracing::error!("log shut down: {why}");
            c.error = Some(why);
        }
        // Buffers that will never be written fail their callbacks now;
        // those in flight fail theirs in their completion pass.
        let dead: Vec<_> = c
            .iclogs
            .iter_mut()
            .filter(|ic| ic.state == IclogState::Active)
            .flat_map(|ic| ic.callbacks.drain(..))
            .collect();
        drop(c);
        for cb in dead {
            cb(Err(Error::Shutdown));
        }
        self.grant.shutdown();
        self.space_cv.notify_all();
        self.done_cv.notify_all();
        self.order_cv.notify_all();
        self.gate_cv.notify_all();
    }

    fn write(&self, t: &mut Ticket, ops: &[LogOp<'_>]) -> Result<Lsn> {
        let mut c = self.lock();
        let mut last = (Lsn(0), 0usize);
        for op in ops {
            let mut data = op.data;
            let mut first = true;
            loop {
                c = self.get_space(c, t)?;
                let idx = c.cur;
                let ic = &mut c.iclogs[idx];
                let took =
                    ic.append_op(self.capacity, (op.tid, op.clientid, op.flags), data, first);
                t.consume((OP_HEADER_SIZE + took) as u32);
                if op.flags & (OP_COMMIT | OP_UNMOUNT) != 0 {
                    ic.need_flush = true;
                }
                last = (ic.lsn, idx);
                let full = is_full(self.capacity, ic.data.len());
                Counters::add(&self.stats.ops, 1);
                data = &data[took..];
                first = false;
                if full {
                    self.switch_out(&mut c, idx)?;
                }
                if data.is_empty() {
                    break;
                }
            }
        }
        let (lsn, idx) = last;
        if c.iclogs[idx].need_flush && c.iclogs[idx].is_open() && c.iclogs[idx].lsn == lsn {
            self.push_or_defer(&mut c, idx)?;
        }
        Ok(lsn)
    }

    /// Push the current buffer out now if the commit slot is free (every
    /// earlier record's data write done); else leave it ACTIVE, marked to
    /// go out when the slot frees, so commits and forces arriving meanwhile
    /// share it (seed 002's batching; the kernel's WANT_SYNC gathering).
    pub(super) fn push_or_defer(&self, c: &mut Core, idx: usize) -> Result<()> {
        if Self::commit_slot_free(c) {
            self.switch_out(c, idx)
        } else {
            c.iclogs[idx].push_when_idle = true;
            Ok(())
        }
    }

    /// Wait until the current buffer is ACTIVE; open it (LSN = the head,
    /// the ticket pays for the record header) if it is empty.
    fn get_space<'a>(
        &'a self,
        mut c: MutexGuard<'a, Core>,
        t: &mut Ticket,
    ) -> Result<MutexGuard<'a, Core>> {
        loop {
            Self::shut_err(&c)?;
            let idx = c.cur;
            if c.iclogs[idx].state == IclogState::Active {
                if c.iclogs[idx].data.is_empty() {
                    let lsn = Lsn::new(c.curr_cycle, c.curr_block);
                    let prev = c.prev_block;
                    c.prev_block = c.curr_block;
                    let ic = &mut c.iclogs[idx];
                    ic.lsn = lsn;
                    ic.prev_block = prev;
                    t.consume(self.hdr_bbs * BBSIZE as u32);
                }
                return Ok(c);
            }
            Counters::add(&self.stats.iclog_waits, 1);
            c = self.space_cv.wait(c).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Switch buffer `idx` (the current one, ACTIVE with ops) out: build
    /// its record header, move the head past it, hand it to its I/O thread.
    pub(super) fn switch_out(&self, c: &mut Core, idx: usize) -> Result<()> {
        debug_assert_eq!(idx, c.cur);
        debug_assert!(c.iclogs[idx].is_open());
        let bbs = self.cfg.size_bbs;
        let ic = &mut c.iclogs[idx];
        let len = ic.data.len();
        let padded = record_payload_len(self.hdr_bbs, self.cfg.sunit, len);
        ic.data.resize(padded, 0);
        let total = self.hdr_bbs + (padded / BBSIZE) as u32;
        let tail = self.grant.tail();
        let mut h = RecordHeader::new(
            ic.lsn.cycle(),
            ic.lsn,
            tail,
            self.cfg.order.fmt(),
            self.cfg.uuid,
            self.cfg.logbsize,
        );
        h.num_logops = ic.num_ops;
        h.prev_block = ic.prev_block;
        // The record must not reach the tail.
        let end = ic.lsn.cycle() as u64 * bbs as u64 + ic.lsn.block() as u64 + total as u64;
        let tail_pos = tail.cycle() as u64 * bbs as u64 + tail.block() as u64;
        if end > tail_pos + bbs as u64 {
            let why = format!(
                "record at {} of {total} BBs would overwrite the tail {tail}",
                ic.lsn
            );
            tracing::error!("log shut down: {why}");
            c.error = Some(why);
            self.grant.shutdown();
            self.space_cv.notify_all();
            self.done_cv.notify_all();
            self.gate_cv.notify_all();
            return Err(Error::Shutdown);
        }
        ic.state = IclogState::WantSync;
        let seq = c.next_seq;
        c.next_seq += 1;
        let ic = &mut c.iclogs[idx];
        ic.job = Some(IoJob {
            header: h,
            payload: std::mem::take(&mut ic.data),
            seq,
            need_flush: ic.need_flush,
        });
        ic.state = IclogState::Syncing;
        c.curr_block += total;
        if c.curr_block >= bbs {
            c.curr_block -= bbs;
            c.curr_cycle += 1;
            if c.curr_cycle == RECORD_MAGIC {
                c.curr_cycle += 1;
            }
        }
        c.cur = (idx + 1) % c.iclogs.len();
        self.grant.add_unreserved((padded - len) as u64);
        Counters::add(&self.stats.records, 1);
        self.io_cvs[idx].notify_one();
        Ok(())
    }
}

/// Payload bytes of a record holding `len` bytes of ops: padded so the
/// whole record (`hdr_bbs` header blocks + payload) is a multiple of the
/// stripe unit `sunit` (a BB without one).
pub(crate) fn record_payload_len(hdr_bbs: u32, sunit: u32, len: usize) -> usize {
    let hdr = hdr_bbs as usize * BBSIZE;
    let unit = (sunit as usize).max(BBSIZE);
    padded_len((hdr + len).div_ceil(unit) * unit - hdr)
}

/// BBs ahead of the head that [`LogWriter::clear_stale_blocks`] clears:
/// as many as the most log buffers in flight can cover (what the head
/// search looks back over).
pub const STALE_WINDOW_BBS: u32 = (crate::format::log::MAX_RECORD_BSIZE / BBSIZE * 8) as u32;

/// The `last_sync_lsn` to start with: just before the head. Every record
/// before the head is on disk; every record this writer makes is at or
/// after the head, so none counts as stable before its write completes.
fn prev_record_lsn(cfg: &LogConfig) -> Lsn {
    Lsn(cfg.head.0 - 1)
}

#[cfg(test)]
#[path = "writer_tests.rs"]
mod tests;
