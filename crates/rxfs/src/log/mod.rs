//! The log writer's lower half: grant heads, in-core log buffers, log I/O
//! and log forces. The CIL (delayed logging) and the AIL sit on top.
//!
//! ```text
//!  callers (CIL push)           LogWriter                      I/O threads
//!  ------------------   ----------------------------   ---------------------------
//!  reserve(ticket) ---> GrantHeads (grant.rs)
//!  write(ops) --------> copy ops into the current iclog; when it is full:
//!                       switch it out (record header, LSN) ---> pack, CRC, write
//!                                                               (split at the log end)
//!  commit_turn() -----> commit gate: gather synchronous committers
//!  force(lsn) --------> push the iclog holding lsn, wait <--- completions in ring
//!                                                               order, in batches
//!  AIL: move_tail ----> GrantHeads wakes waiters (once each)
//! ```
//!
//! ## In-core log buffers ("iclogs", [`iclog`])
//! `logbufs` (2..=8) buffers of `logbsize` bytes (16 KiB..256 KiB, a power
//! of two: the kernel's rule) form a ring. Each cycles through
//!
//! ```text
//!  ACTIVE --(full, forced, or commit with the commit slot free)--> WANT_SYNC
//!  WANT_SYNC --(handed to its I/O thread)--> SYNCING --(write done)--> DONE_SYNC
//!  DONE_SYNC --(all earlier buffers done: completion pass)--> CALLBACK --> ACTIVE
//! ```
//!
//! Only the ring's *current* buffer accepts ops. Its LSN is fixed when the
//! first op goes in: `(cycle, block)` of the log head; the head moves past
//! the record (header BBs + payload BBs) when the buffer is switched out,
//! wrapping to block 0 and cycle + 1 at the log end. A buffer switched out
//! is written by its own I/O thread, so up to `logbufs` writes are in flight
//! while writers fill the next buffer; a writer that finds the next buffer
//! still busy waits for it (the log's back-pressure).
//!
//! ## Ordering and durability
//! - Completions run in ring order: a buffer whose write finished waits
//!   (DONE_SYNC) until every earlier buffer finished too; one completion
//!   pass takes every finished buffer in order (a batch), moves
//!   `last_sync_lsn` once, tells the grant heads once, runs the buffers'
//!   callbacks in order, then wakes forces and writers once.
//! - A buffer holding a COMMIT op (or the unmount record) is written with
//!   the kernel's `REQ_PREFLUSH | REQ_FUA` semantics, approximated as: wait
//!   until every earlier record's *data write* completed, `flush()` the
//!   device (the checkpoint's body and every earlier record are now
//!   stable), write, `flush()` again (the commit record is stable before
//!   its completion reports it). So a commit record never becomes stable
//!   before the checkpoint it commits nor before any earlier record.
//! - The *commit slot* is free when every switched-out record's data write
//!   has completed. A record in its post-flush does not hold it: the next
//!   commit record's pre-flush covers that record too, so two commit
//!   records are in flight, one in its post-flush while the next flushes
//!   and writes ([`LogStats::overlapped_commits`]):
//!
//!   ```text
//!    record k:    [flush][write k][flush]
//!    record k+1:                 [flush][write k+1][flush]
//!    slot:        busy ----------^ free: k+1 may start
//!   ```
//! - Commits that arrive while the slot is busy stay in the ACTIVE buffer
//!   (batched with later commits, the kernel's WANT_SYNC gathering); the
//!   I/O thread whose data write frees the slot pushes it
//!   ([`LogStats::deferred_pushes`]); it also goes out when it fills.
//! - Synchronous committers gather *before* the CIL push, at the commit
//!   gate (`gate.rs`, [`LogWriter::commit_turn`]): a forcer waits until the
//!   slot is free and the forcers released by the last writes have come
//!   back (or a quiet gap passed), so all of them share one checkpoint and
//!   one commit record. The gate only delays pushes; forces still return
//!   only once their LSN is stable.
//! - A force of an LSN whose buffer is already SYNCING only waits
//!   (piggybacks; counted in [`LogStats::force_piggybacks`]).

//! ## What the layers above must do
//! - Reserve before writing: a ticket's unit covers its ops, op headers,
//!   one record header per buffer it may open and a BB of padding
//!   ([`LogWriter::unit_bytes_for`]); the heads then never let the log head
//!   reach the tail.
//! - The AIL ([`TailPusher`]) moves the tail only to LSNs of records (the
//!   oldest logged item's LSN), never past `last_sync_lsn`; when its push
//!   target needs items that are still pinned by an unwritten checkpoint it
//!   must force the log (as the kernel's xfsaild does), else waiters wait.
//!
//! - Log stripe unit (`sb_logsunit`, also set to 4 KiB by 4 KiB log
//!   sectors): every record (header + payload) is padded to a multiple of
//!   it, as the kernel pads, so records start on stripe-unit boundaries;
//!   the payload room of a buffer is cut to whole stripe units.
//!
//! ## Not done yet
//! - External log devices; a log on the data device only.
//! - No timed background push (the kernel's log worker): a commit in an
//!   ACTIVE buffer goes out at once when the slot is free, else when the
//!   data write holding the slot completes.
//!
//! ## Lock order (outermost first)
//! 0. a [`CommitTurn`] (held by a forcer across its CIL push; it is a
//!    count under the core lock, not a lock: waiting for it holds nothing);
//! 1. the writer's core lock (`icloglock`: ring states, head position,
//!    the commit gate);
//! 2. the grant heads' lock (a leaf).
//!
//! Device I/O, iclog callbacks and the AIL's [`TailPusher`] run with no lock
//! of this module held.
//!
//! ## Invariants
//! - The record being built never reaches the tail: the head after it is at
//!   most one log size beyond the tail (grant accounting guarantees it; it
//!   is checked, and a violation shuts the log down rather than overwrite).
//! - Every record's header: LSN = its (cycle, block), `tail_lsn` <= LSN,
//!   `prev_block` = the block of the record before it, `h_size = logbsize`.
//! - Every op header is whole inside one record; a region split across
//!   records carries CONTINUE on all pieces but the last, and WAS_CONT (and
//!   END on the last) on all pieces but the first.
//! - `last_sync_lsn` only grows, and every record at or before it is on
//!   disk (flushed if it held a commit).
//! - `written_below <= next_seq`; a commit record's pre-flush is issued
//!   only once `written_below` reached its sequence.

pub mod find;
mod force;
mod gate;
pub mod grant;
pub mod iclog;
pub mod logvec;
pub mod writer;

pub use gate::CommitTurn;
pub use grant::{GrantHeads, GrantStats, NoPusher, TailPusher, Ticket};
pub use iclog::IclogState;
pub use logvec::LogVec;
pub use writer::{CheckpointLsns, LogConfig, LogOp, LogWriter};

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of one log writer (a snapshot from [`LogWriter::stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogStats {
    /// Records (switched-out log buffers) written.
    pub records: u64,
    /// Device write calls (a record wrapping the log end takes two).
    pub writes: u64,
    /// Bytes written to the log device.
    pub bytes: u64,
    /// Device cache flushes.
    pub flushes: u64,
    /// Ops written (pieces of split regions count each).
    pub ops: u64,
    /// Log forces requested.
    pub forces: u64,
    /// Forces that found their buffer already being written and only waited.
    pub force_piggybacks: u64,
    /// Writers that waited for a log buffer to come back from I/O.
    pub iclog_waits: u64,
    /// Commit gate: forcers that waited at it, and openings by the window
    /// (not by the forcers having gathered).
    pub gate_waits: u64,
    pub gate_timeouts: u64,
    /// Deferred commit buffers pushed when the commit slot freed.
    pub deferred_pushes: u64,
    /// Commit records whose pre-flush was issued while an earlier record
    /// was still in its post-flush (two commit records in flight).
    pub overlapped_commits: u64,
    /// Completion passes, and the records they completed.
    pub completion_batches: u64,
    pub completed_records: u64,
    /// Grant heads: requests that queued, and wakeups sent.
    pub grant_waits: u64,
    pub grant_wakeups: u64,
    pub tail_pushes: u64,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub records: AtomicU64,
    pub writes: AtomicU64,
    pub bytes: AtomicU64,
    pub flushes: AtomicU64,
    pub ops: AtomicU64,
    pub forces: AtomicU64,
    pub force_piggybacks: AtomicU64,
    pub iclog_waits: AtomicU64,
    pub gate_waits: AtomicU64,
    pub gate_timeouts: AtomicU64,
    pub deferred_pushes: AtomicU64,
    pub overlapped_commits: AtomicU64,
    pub completion_batches: AtomicU64,
    pub completed_records: AtomicU64,
    /// How long the last record write took, pre-flush to post-flush (the
    /// commit gate's window).
    pub last_io_ns: AtomicU64,
}

impl Counters {
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    pub fn snapshot(&self, g: GrantStats) -> LogStats {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        LogStats {
            records: r(&self.records),
            writes: r(&self.writes),
            bytes: r(&self.bytes),
            flushes: r(&self.flushes),
            ops: r(&self.ops),
            forces: r(&self.forces),
            force_piggybacks: r(&self.force_piggybacks),
            iclog_waits: r(&self.iclog_waits),
            gate_waits: r(&self.gate_waits),
            gate_timeouts: r(&self.gate_timeouts),
            deferred_pushes: r(&self.deferred_pushes),
            overlapped_commits: r(&self.overlapped_commits),
            completion_batches: r(&self.completion_batches),
            completed_records: r(&self.completed_records),
            grant_waits: g.waits,
            grant_wakeups: g.wakeups,
            tail_pushes: g.tail_pushes,
        }
    }
}
