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
//!  ACTIVE --(full, forced, or commit with no I/O in flight)--> WANT_SYNC
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
//!   until every earlier buffer's write completed, `flush()` the device
//!   (the checkpoint's body is now stable), write, `flush()` again (the
//!   commit record is stable before the completion reports it). So a
//!   commit record never becomes stable before the checkpoint it commits.
//! - Commits that arrive while I/O is in flight stay in the ACTIVE buffer
//!   (batched with later commits); it goes out when it fills, when a force
//!   needs it, or when the last in-flight write completes.
//! - When the in-flight writes complete, a deferred buffer with forcers
//!   waiting on it is pushed by them, not by the completion pass: they
//!   hold it open until the forcers that completion released have forced
//!   into it too, or for at most one write latency (the last write's time,
//!   capped at 2 ms). Without that window, closed-loop synchronous
//!   committers split into two groups that alternate (batches of ~7 and 1
//!   with 8 threads). Forces still return only once their LSN is stable.
//! - A force of an LSN whose buffer is already SYNCING only waits
//!   (piggybacks; counted in [`LogStats::force_piggybacks`]).
//!
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
//! - The "wait for the previous buffer before pushing" heuristic is the
//!   deferral above; there is no timed background push (the kernel's log
//!   worker): a commit in an ACTIVE buffer with nothing in flight goes out at
//!   once, one with I/O in flight goes out when that I/O completes.
//!
//! ## Lock order (outermost first)
//! 1. the writer's core lock (`icloglock`: ring states, head position);
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

mod force;
pub mod grant;
pub mod iclog;
pub mod writer;

pub use grant::{GrantHeads, GrantStats, NoPusher, TailPusher, Ticket};
pub use iclog::IclogState;
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
    pub completion_batches: AtomicU64,
    pub completed_records: AtomicU64,
    /// How long the last record write took (the batching window).
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
            completion_batches: r(&self.completion_batches),
            completed_records: r(&self.completed_records),
            grant_waits: g.waits,
            grant_wakeups: g.wakeups,
            tail_pushes: g.tail_pushes,
        }
    }
}
