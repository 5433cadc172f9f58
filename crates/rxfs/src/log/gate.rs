//! The commit gate: when a synchronous committer (an fsync forcing the CIL)
//! may push its checkpoint, so that the checkpoints and commit records of
//! concurrent forcers are gathered into one record (seed 002).
//!
//! Without it every fsync pushed its own small checkpoint the moment it
//! arrived: each carried its own START/TRAN/COMMIT and its own copy of the
//! shared items (AGI, AGF, btree blocks), so records filled after ~12
//! fsyncs, and closed-loop forcers split into groups that alternated (the
//! group released by one write came back while the next was in flight).
//!
//! A forcer whose sequence is still open calls [`LogWriter::commit_turn`]
//! *before* pushing the CIL, and holds the returned [`CommitTurn`] across
//! the push. The gate opens when
//! 1. the commit slot is free: every switched-out record's data write has
//!    finished, so a commit record written now has its pre-flush issued at
//!    once (a record still in its post-flush does not hold the slot: that
//!    is how two commit records are in flight); and
//! 2. no gate passer is still pushing (a late arrival would otherwise push
//!    a second, lone checkpoint behind the one being written); and either
//! 3. every forcer that is *out* is back: none is forcing a record not yet
//!    completed, and those released by completions have all arrived again
//!    (counted while forcers keep arriving: until a quiet gap passes with
//!    no arrival and no completion). Closed-loop forcers then merge into
//!    one batch instead of splitting into groups that alternate (the group
//!    released by one write coming back while the next is in flight: with
//!    a majority rule the split persists, ~9/7 with 16 threads); or
//! 4. the gathering went quiet: a gap with no arrival and no release, of
//!    twice the last record's write time (pre-flush to post-flush) at most
//!    2 ms; or 4 gaps passed since this forcer arrived. A forcer never
//!    waits long for threads that stopped forcing (and those are then
//!    forgotten), and the next batch may overlap the previous record's
//!    post-flush. The price: an fsync that arrives while an unrelated
//!    fsync's record is in flight waits for it and up to one gap more
//!    (the kernel would not wait; it batches only by chance of timing).
//!
//! Everyone waiting passes together (a new generation of the gate); the
//! first to take the CIL's push lock pushes the whole context, the others
//! find it pushed and only force its commit LSN. The gate changes no
//! ordering or durability rule: a force still returns only once its LSN is
//! stable, and a commit record still goes out only after every earlier
//! record's data write and a flush.
//!
//! Bound (what the batching unit test checks): `n` closed-loop forcers
//! each in their own sequence make batches of all `n` (one record each,
//! while the batch fits) except at start-up and when the gate opens by
//! rule 4 (`LogStats::gate_timeouts`).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::writer::{Core, LogWriter, Shared};
use super::Counters;
use crate::error::Result;

/// Longest quiet gap (no arrival, no release) a gathering waits for.
const GAP_MAX: Duration = Duration::from_millis(2);
/// Longest a forcer waits at the gate, in gaps.
const CAP_GAPS: u32 = 4;

/// A forcer's turn to push its checkpoint; hold it across the push (other
/// arrivals wait until it is dropped).
pub struct CommitTurn<'a> {
    sh: &'a Shared,
}

impl Drop for CommitTurn<'_> {
    fn drop(&mut self) {
        let mut c = self.sh.lock();
        debug_assert!(c.gate_turns > 0);
        c.gate_turns -= 1;
        drop(c);
        self.sh.gate_cv.notify_all();
    }
}

impl LogWriter {
    /// Wait at the commit gate (see the module doc of `gate.rs`); push the
    /// checkpoint to force while holding the returned turn.
    pub fn commit_turn(&self) -> Result<CommitTurn<'_>> {
        self.sh.commit_turn()
    }
}

impl Shared {
    /// The quiet gap that ends a gathering: twice the last record's write
    /// time (pre-flush to post-flush), at most [`GAP_MAX`].
    fn gap(&self) -> Duration {
        let ns = self.stats.last_io_ns.load(Ordering::Relaxed);
        Duration::from_nanos(ns.saturating_mul(2)).min(GAP_MAX)
    }

    /// Forcers that will be back soon: forcing buffers not yet completed,
    /// or released by a completion while forcers keep arriving.
    fn forcers_out(&self, c: &Core, now: Instant) -> usize {
        let forcing: usize = c.iclogs.iter().map(|ic| ic.forcers).sum();
        let returning = match c.gate_last {
            Some(t) if now < t + self.gap() => c.returning,
            _ => 0,
        };
        forcing + returning
    }

    /// A completion pass released `n` forcers (they may come back).
    pub(super) fn note_released(&self, c: &mut Core, n: usize) {
        let now = Instant::now();
        if n == 0 {
            return;
        }
        let fresh = c.gate_last.is_some_and(|t| now < t + self.gap());
        c.returning = if fresh { c.returning + n } else { n };
        c.gate_last = Some(now);
    }

    fn commit_turn(&self) -> Result<CommitTurn<'_>> {
        let mut c = self.lock();
        let arrived = Instant::now();
        let epoch = c.gate_epoch;
        c.returning = c.returning.saturating_sub(1);
        c.gate_last = Some(arrived);
        c.gate_waiting += 1;
        self.gate_cv.notify_all();
        let mut waited = false;
        let r = loop {
            if let Err(e) = Self::shut_err(&c) {
                break Err(e);
            }
            if c.gate_epoch != epoch {
                break Ok(()); // opened for everyone waiting
            }
            let now = Instant::now();
            let gap = self.gap();
            let quiet = c.gate_last.map_or(arrived, |t| t.max(arrived)) + gap;
            let deadline = quiet.min(arrived + gap * CAP_GAPS);
            if Self::commit_slot_free(&c) && c.gate_turns == 0 {
                let gathered = self.forcers_out(&c, now) == 0;
                if gathered || now >= deadline {
                    if !gathered {
                        // Forget who did not come back (a forcer that
                        // stopped, the AIL's force): later gatherings
                        // must not wait for them again.
                        Counters::add(&self.stats.gate_timeouts, 1);
                        c.returning = 0;
                    }
                    c.gate_epoch += 1;
                    self.gate_cv.notify_all();
                    break Ok(());
                }
            }
            if !waited {
                waited = true;
                Counters::add(&self.stats.gate_waits, 1);
            }
            // Woken by data writes ending, completions, arrivals and turns
            // ending; by the clock only for the window.
            c = if now < deadline {
                self.gate_cv
                    .wait_timeout(c, deadline - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            } else {
                self.gate_cv.wait(c).unwrap_or_else(|e| e.into_inner())
            };
        };
        c.gate_waiting -= 1;
        r?;
        c.gate_turns += 1;
        Ok(CommitTurn { sh: self })
    }
}
