//! Log forces, log I/O and I/O completion (the second half of the log
//! writer; see the module doc of [`crate::log`] for the ring and its rules).
//!
//! - A force of an LSN pushes the buffer holding it if it is still ACTIVE
//!   (right away if the commit slot is free, else the I/O thread that frees
//!   it pushes it, so concurrent forces and commits share one write), or
//!   just waits if the buffer is already being written (piggyback).
//! - Each buffer has an I/O thread. It packs and CRCs the record and writes
//!   it (two writes if it wraps the log end); a buffer holding a commit
//!   record is written as PREFLUSH + write + FUA: once every earlier
//!   record's *data write* finished, flush, write, flush. When its data
//!   write is done it frees the commit slot (and pushes a deferred buffer)
//!   before its own post-flush, so two commit records overlap.
//! - Completion passes run in ring order and take every finished buffer at
//!   once (a batch): one `last_sync_lsn` move, one grant-head update, the
//!   callbacks in LSN order, one wakeup of forces and writers.

use super::iclog::{record_bytes, IclogState, IoJob};
use super::writer::{Core, Shared};
use super::Counters;
use crate::error::{Error, Result};
use crate::types::{Daddr, Lsn};
use std::sync::atomic::Ordering;
use std::time::Instant;

thread_local! {
    /// A record's bytes laid out for its write, kept by each thread that
    /// writes records (see `RecordBytes::lay_out`).
    static RECORD_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Shared {
    pub(super) fn force(&self, lsn: Option<Lsn>) -> Result<Lsn> {
        Counters::add(&self.stats.forces, 1);
        let mut c = self.lock();
        Self::shut_err(&c)?;
        let n = c.iclogs.len();
        let target = match lsn {
            Some(l) if l <= c.last_sync => return Ok(l),
            Some(l) => {
                let Some(idx) = (0..n).find(|&i| c.iclogs[i].lsn == l) else {
                    return Err(Error::Invalid(format!("no log record at {l}")));
                };
                if c.iclogs[idx].is_open() {
                    self.push_or_defer(&mut c, idx)?;
                } else {
                    Counters::add(&self.stats.force_piggybacks, 1);
                }
                l
            }
            None => {
                let cur = c.cur;
                if c.iclogs[cur].is_open() {
                    let l = c.iclogs[cur].lsn;
                    self.push_or_defer(&mut c, cur)?;
                    l
                } else if c.oldest != cur {
                    Counters::add(&self.stats.force_piggybacks, 1);
                    c.iclogs[(cur + n - 1) % n].lsn
                } else {
                    return Ok(c.last_sync);
                }
            }
        };
        // Count this force on its buffer: the commit gate waits for the
        // forcers of buffers in flight to come back (see gate.rs).
        if let Some(i) = (0..n).find(|&i| c.iclogs[i].lsn == target) {
            c.iclogs[i].forcers += 1;
        }
        while c.last_sync < target {
            Self::shut_err(&c)?;
            c = self.done_cv.wait(c).unwrap_or_else(|e| e.into_inner());
        }
        Ok(target)
    }

    /// Whether a commit record switched out now would have its pre-flush
    /// issued at once: every switched-out record's data write finished
    /// (records still in their post-flush do not count).
    pub(super) fn commit_slot_free(c: &Core) -> bool {
        c.written_below == c.next_seq
    }

    /// Switch out the current buffer if it holds a deferred commit and the
    /// commit slot is free (called when a data write finishes).
    fn push_deferred(&self, c: &mut Core) {
        let cur = c.cur;
        let ic = &c.iclogs[cur];
        if ic.is_open() && ic.push_when_idle && Self::commit_slot_free(c) {
            Counters::add(&self.stats.deferred_pushes, 1);
            let _ = self.switch_out(c, cur);
        }
    }

    pub(super) fn io_thread(&self, idx: usize) {
        loop {
            let job = {
                let mut c = self.lock();
                loop {
                    if let Some(j) = c.iclogs[idx].job.take() {
                        break j;
                    }
                    if c.exit {
                        return;
                    }
                    c = self.io_cvs[idx].wait(c).unwrap_or_else(|e| e.into_inner());
                }
            };
            let (seq, flush) = (job.seq, job.need_flush);
            let t0 = Instant::now();
            let (mut res, spare) = self.write_record(idx, job);
            let mut c = self.lock();
            c.written.insert(seq);
            while {
                let next = c.written_below;
                c.written.remove(&next)
            } {
                c.written_below += 1;
            }
            self.order_cv.notify_all();
            self.gate_cv.notify_all();
            if res.is_ok() {
                self.push_deferred(&mut c);
            }
            drop(c);
            // FUA: the commit record is stable before its completion runs.
            if flush && res.is_ok() {
                res = self.dev.flush();
                Counters::add(&self.stats.flushes, 1);
            }
            let ns = t0.elapsed().as_nanos().min(u64::MAX as u128) as u64;
            self.stats.last_io_ns.store(ns, Ordering::Relaxed);
            let mut c = self.lock();
            let ic = &mut c.iclogs[idx];
            ic.data = spare;
            ic.state = IclogState::DoneSync;
            if let Err(e) = &res {
                ic.io_error = Some(e.to_string());
            }
            drop(c);
            if let Err(e) = res {
                self.fail(format!("log write failed: {e}"));
            }
            self.complete();
        }
    }

    /// Write one record; a commit record first waits for every earlier
    /// record's data write and flushes (PREFLUSH). The caller issues the
    /// post-flush (FUA) after freeing the commit slot.
    fn write_record(&self, idx: usize, job: IoJob) -> (Result<()>, Vec<u8>) {
        let (seq, flush) = (job.seq, job.need_flush);
        if flush {
            let mut c = self.lock();
            while c.written_below < seq && c.error.is_none() {
                c = self.order_cv.wait(c).unwrap_or_else(|e| e.into_inner());
            }
            if c.error.is_some() {
                drop(c);
                return (Err(Error::Shutdown), job.payload);
            }
            if c.oldest != idx {
                // An earlier record is still in its post-flush or waiting
                // for completion: two commit records in flight.
                Counters::add(&self.stats.overlapped_commits, 1);
            }
        }
        let rec = record_bytes(job, self.cfg.size_bbs);
        let r = (|| {
            if flush {
                if let Some(d) = self.data_dev.get() {
                    d.flush()?;
                }
                self.dev.flush()?;
                Counters::add(&self.stats.flushes, 1);
            }
            RECORD_BUF.with(|b| {
                let mut raw = b.borrow_mut();
                for (blk, at) in rec.lay_out(&mut raw) {
                    let off = Daddr(self.cfg.start.0 + blk as u64).bytes();
                    self.dev.write_at(&raw[at.clone()], off)?;
                    Counters::add(&self.stats.writes, 1);
                    Counters::add(&self.stats.bytes, at.len() as u64);
                }
                Ok(())
            })
        })();
        // The payload's buffer is filled again by the next record.
        (r, rec.data)
    }

    /// Complete finished buffers in ring order, a batch per pass; only one
    /// thread runs passes at a time (others leave their buffer to it).
    pub(super) fn complete(&self) {
        let mut c = self.lock();
        if c.completing {
            return;
        }
        c.completing = true;
        let n = c.iclogs.len();
        loop {
            let mut batch = Vec::new();
            let mut idx = c.oldest;
            while batch.len() < n && c.iclogs[idx].state == IclogState::DoneSync {
                batch.push(idx);
                idx = (idx + 1) % n;
            }
            if batch.is_empty() {
                break;
            }
            let failed = c.error.is_some();
            let mut cbs = Vec::new();
            for &b in &batch {
                let ic = &mut c.iclogs[b];
                ic.state = IclogState::Callback;
                let lsn = ic.lsn;
                cbs.extend(ic.callbacks.drain(..).map(|cb| (lsn, cb)));
            }
            let released: usize = batch.iter().map(|&b| c.iclogs[b].forcers).sum();
            self.note_released(&mut c, released);
            let last = c.iclogs[*batch.last().expect("non-empty")].lsn;
            c.oldest = idx;
            drop(c);
            if !failed {
                self.grant.log_synced(last);
            }
            for (lsn, cb) in cbs {
                cb(if failed {
                    Err(Error::Shutdown)
                } else {
                    Ok(lsn)
                });
            }
            c = self.lock();
            if !failed && last > c.last_sync {
                c.last_sync = last;
            }
            for &b in &batch {
                let buf = std::mem::take(&mut c.iclogs[b].data);
                c.iclogs[b].reset(buf);
            }
            Counters::add(&self.stats.completion_batches, 1);
            Counters::add(&self.stats.completed_records, batch.len() as u64);
            self.done_cv.notify_all();
            self.gate_cv.notify_all();
            self.space_cv.notify_all();
        }
        c.completing = false;
    }
}
