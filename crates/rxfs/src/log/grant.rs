//! Grant heads: who may put how many bytes into the circular log.
//!
//! Space in the log is counted in bytes on a line that never wraps: a
//! position `(cycle, bytes)` is kept as `cycle * log_bytes + bytes`, so the
//! distance between two positions is a subtraction. Three positions matter:
//!
//! ```text
//!   tail ........ (written, not yet checkpointed) ..... write head .. reserve head
//!   |<------------------------ used ----------------------------->|
//!   |<---------------------------- log size ------------------------------------>|
//! ```
//!
//! - the **tail** (an LSN): the oldest record whose changes may not yet be
//!   written back; everything before it is free. Only the AIL moves it
//!   ([`GrantHeads::move_tail`]), forward only.
//! - the **reserve head**: the tail plus every byte written to the log since
//!   the tail plus every byte still promised to a ticket. New tickets wait
//!   on it ([`GrantHeads::reserve`]).
//! - the **write head**: the same, but for a rolling ticket's next unit only
//!   its *write* grant is waited for when its pre-reserved units run out
//!   ([`GrantHeads::roll`]): its reserve grant is taken without waiting, so a
//!   rolling transaction holding items in the AIL can always make progress
//!   (no deadlock when the log is nearly full).
//!
//! Free space of a head = `log_bytes - (head - tail)`. Bytes a ticket writes
//! stay counted in the heads (they are in the log) until the tail passes
//! them; bytes a ticket did not use go back when it rolls or is done.
//!
//! ## Waiters (seed 002: woken once)
//! Each head has a FIFO queue of waiters. A waiter is woken only when the
//! space it asked for is available for it *at the front of the queue*: the
//! waker grants the space on the waiter's behalf, removes it from the queue
//! and then signals it, so a woken waiter never re-checks, never sleeps
//! again and is never woken twice for one grant. New requests queue behind
//! existing waiters (no barging). [`GrantStats::wakeups`] counts signals;
//! with no shutdown, `wakeups == waits`.
//!
//! ## Tail pushing
//! When free space on the reserve head falls below a quarter of the log (or
//! below what a waiter needs), the [`TailPusher`] (the AIL) is asked to push
//! the tail to `tail + threshold`, capped at the last LSN known stable. The
//! hook is called with no lock of this module held; waiters ask again every
//! [`PUSH_RETRY`] while they wait, and completed log I/O asks again, so a
//! push that could not make progress earlier is not lost.
//!
//! Invariants: `tail <= write <= reserve` (on the byte line, after the
//! allowance of a rolling regrant); no request may exceed the log size (it
//! could never be granted); the lock here is a leaf (nothing else is locked
//! while holding it, no callback runs under it).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::format::log::BBSIZE;
use crate::types::Lsn;

/// Log BBs never granted (see [`GrantHeads::free_bytes`]).
pub const HEADROOM_BBS: u64 = crate::format::log::MAX_ICLOGS as u64;

/// How often a waiter re-asks the AIL to push while it waits.
pub const PUSH_RETRY: Duration = Duration::from_millis(50);

/// What the AIL implements: move the tail at least to `target` if it can
/// (by writing back metadata logged before it), then call
/// [`GrantHeads::move_tail`]. Called without log locks held; may call back
/// into the log synchronously.
pub trait TailPusher: Send + Sync {
    fn push_tail(&self, target: Lsn);
}

/// A pusher that does nothing (a log with no AIL: the caller moves the tail).
pub struct NoPusher;

impl TailPusher for NoPusher {
    fn push_tail(&self, _target: Lsn) {}
}

/// A reservation of log space for one transaction (or a chain of rolling
/// transactions).
#[derive(Debug)]
pub struct Ticket {
    /// Transaction id stamped in the op headers.
    pub tid: u32,
    /// Bytes of one unit (one transaction's worst-case log usage).
    pub unit_bytes: u32,
    /// Units still held, including the current one (>= 1 while live).
    count: u32,
    /// Bytes left of the current unit.
    curr_bytes: u32,
    /// Rolling (permanent) ticket: regranted at each roll.
    pub permanent: bool,
    /// Bytes written beyond the reservation (a reservation bug).
    pub overrun_bytes: u64,
}

impl Ticket {
    /// Bytes left in the current unit.
    pub fn remaining(&self) -> u32 {
        self.curr_bytes
    }

    /// Units held, including the current one.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Charge `bytes` written to the log to this ticket.
    pub fn consume(&mut self, bytes: u32) {
        if bytes > self.curr_bytes {
            self.overrun_bytes += (bytes - self.curr_bytes) as u64;
            tracing::warn!(
                tid = self.tid,
                bytes,
                left = self.curr_bytes,
                "log ticket overrun"
            );
            self.curr_bytes = 0;
        } else {
            self.curr_bytes -= bytes;
        }
    }

    /// A ticket holding no space (the CIL's checkpoint ticket, which only
    /// receives space stolen from committing transactions).
    pub fn empty(tid: u32) -> Ticket {
        Ticket {
            tid,
            unit_bytes: 0,
            count: 1,
            curr_bytes: 0,
            permanent: false,
            overrun_bytes: 0,
        }
    }

    /// Move up to `bytes` of this ticket's current unit to `to`; returns
    /// what moved. The grant heads are unchanged: the space stays granted,
    /// now on behalf of `to`.
    pub fn steal_into(&mut self, to: &mut Ticket, bytes: u32) -> u32 {
        let b = bytes.min(self.curr_bytes);
        self.curr_bytes -= b;
        to.curr_bytes += b;
        b
    }

    /// Bytes the heads still hold for this ticket beyond what it wrote.
    fn held(&self) -> u64 {
        self.curr_bytes as u64 + self.unit_bytes as u64 * (self.count.max(1) - 1) as u64
    }
}

/// Counters of the grant heads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GrantStats {
    /// Requests that had to queue.
    pub waits: u64,
    /// Signals sent to queued waiters (each one a grant).
    pub wakeups: u64,
    /// Calls of the tail pusher.
    pub tail_pushes: u64,
    /// Tail moves that freed space.
    pub tail_moves: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Head {
    Reserve,
    Write,
}

const WAITING: u8 = 0;
const GRANTED: u8 = 1;
const FAILED: u8 = 2;

struct Waiter {
    need: u64,
    /// Reserve waiters take the space on both heads, write waiters on the
    /// write head only.
    head: Head,
    outcome: AtomicU8,
    cv: Condvar,
}

struct Inner {
    reserve: u64,
    write: u64,
    tail: Lsn,
    /// Last LSN known on disk: the AIL cannot push past it.
    last_sync: Lsn,
    reserve_q: VecDeque<Arc<Waiter>>,
    write_q: VecDeque<Arc<Waiter>>,
    shutdown: bool,
    stats: GrantStats,
}

/// The reserve and write heads of one log.
pub struct GrantHeads {
    log_bytes: u64,
    log_bbs: u32,
    inner: Mutex<Inner>,
    pusher: Arc<dyn TailPusher>,
}

impl GrantHeads {
    /// Heads of a log of `log_bbs` blocks whose tail is `tail` and whose
    /// head (next record) is at `head`: the heads start at the head.
    pub fn new(log_bbs: u32, tail: Lsn, head: Lsn, pusher: Arc<dyn TailPusher>) -> Self {
        let log_bytes = log_bbs as u64 * BBSIZE as u64;
        let g = GrantHeads {
            log_bytes,
            log_bbs,
            inner: Mutex::new(Inner {
                reserve: 0,
                write: 0,
                tail,
                last_sync: head,
                reserve_q: VecDeque::new(),
                write_q: VecDeque::new(),
                shutdown: false,
                stats: GrantStats::default(),
            }),
            pusher,
        };
        let h = g.lsn_pos(head);
        {
            let mut i = g.lock();
            i.reserve = h;
            i.write = h;
            debug_assert!(h >= g.lsn_pos(tail) && h - g.lsn_pos(tail) <= log_bytes);
        }
        g
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The byte-line position of an LSN.
    fn lsn_pos(&self, l: Lsn) -> u64 {
        l.cycle() as u64 * self.log_bytes + l.block() as u64 * BBSIZE as u64
    }

    /// Log size in bytes.
    pub fn log_bytes(&self) -> u64 {
        self.log_bytes
    }

    /// Bytes a head may still grant: the log minus [`HEADROOM_BBS`] (the
    /// BB padding of buffers switched out while the heads were at their
    /// limit is charged to no ticket, and must still fit).
    fn free(&self, i: &Inner, h: Head) -> u64 {
        let pos = match h {
            Head::Reserve => i.reserve,
            Head::Write => i.write,
        };
        let used = pos.saturating_sub(self.lsn_pos(i.tail));
        self.usable().saturating_sub(used)
    }

    fn usable(&self) -> u64 {
        self.log_bytes.saturating_sub(HEADROOM_BBS * BBSIZE as u64)
    }

    /// Free bytes on the reserve head (what a new ticket could get).
    pub fn free_bytes(&self) -> u64 {
        self.free(&self.lock(), Head::Reserve)
    }

    /// Free bytes on the write head.
    pub fn write_free_bytes(&self) -> u64 {
        self.free(&self.lock(), Head::Write)
    }

    /// The current tail.
    pub fn tail(&self) -> Lsn {
        self.lock().tail
    }

    /// (reserve, write) head positions as (cycle, bytes).
    pub fn heads(&self) -> ((u32, u64), (u32, u64)) {
        let i = self.lock();
        let s = |p: u64| ((p / self.log_bytes) as u32, p % self.log_bytes);
        (s(i.reserve), s(i.write))
    }

    pub fn stats(&self) -> GrantStats {
        self.lock().stats
    }

    /// Reserve a ticket of `count` units of `unit_bytes` (count > 1 only for
    /// rolling tickets). Waits, FIFO, until the space is there.
    pub fn reserve(
        &self,
        tid: u32,
        unit_bytes: u32,
        count: u32,
        permanent: bool,
    ) -> Result<Ticket> {
        let count = count.max(1);
        let need = unit_bytes as u64 * count as u64;
        self.grant(Head::Reserve, need)?;
        Ok(Ticket {
            tid,
            unit_bytes,
            count,
            curr_bytes: unit_bytes,
            permanent,
            overrun_bytes: 0,
        })
    }

    /// A rolling ticket's transaction committed: return the unused part of
    /// its unit and start the next unit, from the pre-reserved units if any
    /// remain; otherwise take a reserve grant without waiting and wait for
    /// the write grant (the kernel's regrant).
    pub fn roll(&self, t: &mut Ticket) -> Result<()> {
        debug_assert!(t.permanent, "only rolling tickets roll");
        {
            let mut i = self.lock();
            let back = t.curr_bytes as u64;
            i.reserve -= back.min(i.reserve);
            i.write -= back.min(i.write);
            t.curr_bytes = 0;
            t.count = t.count.saturating_sub(1);
            if t.count > 0 {
                t.curr_bytes = t.unit_bytes;
                self.wake_all(&mut i);
                return Ok(());
            }
            i.reserve += t.unit_bytes as u64;
            self.wake_all(&mut i);
        }
        self.grant(Head::Write, t.unit_bytes as u64)?;
        t.count = 1;
        t.curr_bytes = t.unit_bytes;
        Ok(())
    }

    /// The ticket is done: give back what it holds and did not write.
    pub fn ungrant(&self, t: Ticket) {
        let back = t.held();
        let mut i = self.lock();
        i.reserve -= back.min(i.reserve);
        i.write -= back.min(i.write);
        self.wake_all(&mut i);
    }

    /// Bytes the log wrote that no ticket paid for (record padding): they
    /// stay on both heads until the tail passes them.
    pub fn add_unreserved(&self, bytes: u64) {
        let mut i = self.lock();
        i.reserve += bytes;
        i.write += bytes;
    }

    /// The AIL moved the tail (forward only); wake waiters that now fit.
    pub fn move_tail(&self, tail: Lsn) {
        let mut i = self.lock();
        if tail <= i.tail {
            return;
        }
        i.tail = tail;
        i.stats.tail_moves += 1;
        self.wake_all(&mut i);
    }

    /// Log I/O completed up to the record at `lsn` (one call per completion
    /// batch): the AIL may now push up to it. If anyone waits, ask again.
    pub fn log_synced(&self, lsn: Lsn) {
        let target = {
            let mut i = self.lock();
            if lsn > i.last_sync {
                i.last_sync = lsn;
            }
            let need = i.reserve_q.front().map(|w| w.need).unwrap_or(0);
            if i.reserve_q.is_empty() && i.write_q.is_empty() {
                None
            } else {
                self.push_target(&mut i, need)
            }
        };
        if let Some(t) = target {
            self.pusher.push_tail(t);
        }
    }

    /// Fail every waiter and every later request with [`Error::Shutdown`].
    pub fn shutdown(&self) {
        let mut i = self.lock();
        i.shutdown = true;
        let inner = &mut *i;
        let mut all: Vec<_> = inner.reserve_q.drain(..).collect();
        all.extend(inner.write_q.drain(..));
        {
            for w in all {
                w.outcome.store(FAILED, Ordering::Release);
                w.cv.notify_one();
            }
        }
    }

    /// Where the tail should be pushed so that `need` bytes and a quarter
    /// of the log are free; None if that much is free already.
    fn push_target(&self, i: &mut Inner, need: u64) -> Option<Lsn> {
        let threshold = need
            .max(self.log_bytes / 4)
            .max(256 * BBSIZE as u64)
            .min(self.log_bytes);
        if self.free(i, Head::Reserve) >= threshold {
            return None;
        }
        let pos = self.lsn_pos(i.tail) + threshold;
        let bbs_pos = pos.div_ceil(BBSIZE as u64);
        let cycle = (bbs_pos / self.log_bbs as u64) as u32;
        let block = (bbs_pos % self.log_bbs as u64) as u32;
        let target = Lsn::new(cycle, block).min(i.last_sync);
        i.stats.tail_pushes += 1;
        Some(target)
    }

    /// Take `need` bytes on `head` (and on the write head for a reserve),
    /// waiting in FIFO order.
    fn grant(&self, head: Head, need: u64) -> Result<()> {
        if need > self.usable() {
            return Err(Error::Invalid(format!(
                "log reservation of {need} bytes exceeds the log ({} bytes)",
                self.log_bytes
            )));
        }
        let mut i = self.lock();
        if i.shutdown {
            return Err(Error::Shutdown);
        }
        let q_empty = match head {
            Head::Reserve => i.reserve_q.is_empty(),
            Head::Write => i.write_q.is_empty(),
        };
        if q_empty && self.free(&i, head) >= need {
            take(&mut i, head, need);
            let t = self.push_target(&mut i, need);
            drop(i);
            if let Some(t) = t {
                self.pusher.push_tail(t);
            }
            return Ok(());
        }
        let w = Arc::new(Waiter {
            need,
            head,
            outcome: AtomicU8::new(WAITING),
            cv: Condvar::new(),
        });
        match head {
            Head::Reserve => i.reserve_q.push_back(w.clone()),
            Head::Write => i.write_q.push_back(w.clone()),
        }
        i.stats.waits += 1;
        self.wake_all(&mut i);
        loop {
            match w.outcome.load(Ordering::Acquire) {
                GRANTED => return Ok(()),
                FAILED => return Err(Error::Shutdown),
                _ => {}
            }
            if let Some(t) = self.push_target(&mut i, need) {
                drop(i);
                self.pusher.push_tail(t);
                i = self.lock();
                if w.outcome.load(Ordering::Acquire) != WAITING {
                    continue;
                }
            }
            i =
                w.cv.wait_timeout(i, PUSH_RETRY)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
        }
    }

    /// Grant the waiters at the front of both queues whose space is there,
    /// removing each from its queue before signalling it (once).
    fn wake_all(&self, i: &mut Inner) {
        for head in [Head::Write, Head::Reserve] {
            loop {
                let q = match head {
                    Head::Reserve => &i.reserve_q,
                    Head::Write => &i.write_q,
                };
                let Some(need) = q.front().map(|w| w.need) else {
                    break;
                };
                if self.free(i, head) < need {
                    break;
                }
                let w = match head {
                    Head::Reserve => i.reserve_q.pop_front(),
                    Head::Write => i.write_q.pop_front(),
                }
                .expect("front exists");
                take(i, w.head, w.need);
                i.stats.wakeups += 1;
                w.outcome.store(GRANTED, Ordering::Release);
                w.cv.notify_one();
            }
        }
    }
}

fn take(i: &mut Inner, head: Head, need: u64) {
    match head {
        Head::Reserve => {
            i.reserve += need;
            i.write += need;
        }
        Head::Write => i.write += need,
    }
}

#[cfg(test)]
#[path = "grant_tests.rs"]
mod tests;
