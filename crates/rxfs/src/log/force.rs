//! Log forces, log I/O and I/O completion (the second half of the log
//! writer; see the module doc of [`crate::log`] for the ring and its rules).
//!
//! - A force of an LSN pushes the buffer holding it if it is still ACTIVE
//!   (right away if no write is in flight, else when the in-flight writes
//!   complete, so concurrent forces and commits share one write), or just
//!   waits if the buffer is already being written (piggyback).
//! - Each buffer has an I/O thread: it packs and CRCs the record, writes it
//!   (two writes if it wraps the log end), with flushes around a buffer
//!   holding a commit record, after every earlier write finished.
//! - Completion passes run in ring order and take every finished buffer at
//!   once (a batch): one `last_sync_lsn` move, one grant-head update, the
//!   callbacks in LSN order, one wakeup of forces and writers.

use super::iclog::{record_pieces, IclogState, IoJob};
use super::writer::Shared;
use super::Counters;
use crate::error::{Error, Result};
use crate::types::{Daddr, Lsn};
use std::sync::atomic::Ordering;

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
        // A deferred buffer is pushed by its forcers once the writes ahead
        // of it complete, after the forcers that completion released have
        // had about one write's time to commit into it too (the batching
        // window); durability is unchanged: every force waits for its LSN.
        let mut counted = false;
        let mut deadline = None;
        while c.last_sync < target {
            Self::shut_err(&c)?;
            if !counted {
                counted = true;
                if let Some(i) = (0..n).find(|&i| c.iclogs[i].lsn == target) {
                    c.iclogs[i].forcers += 1;
                    self.done_cv.notify_all();
                }
            }
            let cur = c.cur;
            let (open, joined) = {
                let ic = &c.iclogs[cur];
                (ic.is_open() && ic.lsn == target, ic.forcers)
            };
            if open && c.oldest == cur {
                let now = std::time::Instant::now();
                let window = std::time::Duration::from_nanos(
                    self.stats.last_io_ns.load(Ordering::Relaxed).min(2_000_000),
                );
                let end = *deadline.get_or_insert(now + window);
                if joined <= c.rejoin && now < end {
                    c = self
                        .done_cv
                        .wait_timeout(c, end - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                    continue;
                }
                c.rejoin = 0;
                self.switch_out(&mut c, cur)?;
                continue;
            }
            c = self.done_cv.wait(c).unwrap_or_else(|e| e.into_inner());
        }
        Ok(target)
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
            let seq = job.seq;
            let (res, spare) = self.do_io(job);
            let mut c = self.lock();
            c.io_done.insert(seq);
            while {
                let next = c.io_done_below;
                c.io_done.remove(&next)
            } {
                c.io_done_below += 1;
            }
            let ic = &mut c.iclogs[idx];
            ic.data = spare;
            ic.state = IclogState::DoneSync;
            if let Err(e) = &res {
                ic.io_error = Some(e.to_string());
            }
            self.order_cv.notify_all();
            drop(c);
            if let Err(e) = res {
                self.fail(format!("log write failed: {e}"));
            }
            self.complete();
        }
    }

    /// Write one record (with flush semantics if it holds a commit).
    pub(super) fn do_io(&self, job: IoJob) -> (Result<()>, Vec<u8>) {
        let (seq, flush) = (job.seq, job.need_flush);
        if flush {
            let mut c = self.lock();
            while c.io_done_below < seq && c.error.is_none() {
                c = self.order_cv.wait(c).unwrap_or_else(|e| e.into_inner());
            }
            if c.error.is_some() {
                drop(c);
                return (Err(Error::Shutdown), job.payload);
            }
        }
        let (pieces, spare) = record_pieces(job, self.cfg.size_bbs);
        let t0 = std::time::Instant::now();
        let r = (|| {
            if flush {
                self.dev.flush()?;
                Counters::add(&self.stats.flushes, 1);
            }
            for (blk, raw) in &pieces {
                let off = Daddr(self.cfg.start.0 + *blk as u64).bytes();
                self.dev.write_at(raw, off)?;
                Counters::add(&self.stats.writes, 1);
                Counters::add(&self.stats.bytes, raw.len() as u64);
            }
            if flush {
                self.dev.flush()?;
                Counters::add(&self.stats.flushes, 1);
            }
            Ok(())
        })();
        let ns = t0.elapsed().as_nanos().min(u64::MAX as u128) as u64;
        self.stats.last_io_ns.store(ns, Ordering::Relaxed);
        (r, spare)
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
            c.rejoin = batch.iter().map(|&b| c.iclogs[b].forcers).sum();
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
            let cur = c.cur;
            let ic = &c.iclogs[cur];
            if c.oldest == cur && ic.is_open() && ic.push_when_idle && ic.forcers == 0 {
                let _ = self.switch_out(&mut c, cur);
            }
            self.done_cv.notify_all();
            self.space_cv.notify_all();
        }
        c.completing = false;
    }
}
