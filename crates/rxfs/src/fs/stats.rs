//! Counters of a mounted filesystem that a user can read (`rxfs stats`).

use crate::cache::ilock::LockStats;
use crate::log::LogStats;

/// A snapshot of the write path's counters (all zero on read-only mounts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FsStats {
    /// Transactions committed, and cancelled.
    pub trans_commits: u64,
    pub trans_cancels: u64,
    /// Commits that logged more than their reservation (a reservation
    /// too small for the operation: a bug to report; the CIL still writes
    /// them, from the log's headroom).
    pub trans_resv_overruns: u64,
    /// AGI/AGF joins out of lock order (AGIs before AGFs, each ascending):
    /// a deadlock waiting for the right interleaving; a bug to report.
    pub ag_lock_order_violations: u64,
    /// Log items inserted into the CIL (one per item per commit), and
    /// those that were already in the CIL (relogged in the same checkpoint).
    pub cil_items: u64,
    pub cil_relogged: u64,
    /// Checkpoints written, their total and largest size in bytes of log
    /// vectors, and the transactions they aggregated.
    pub checkpoints: u64,
    pub checkpoint_bytes: u64,
    pub checkpoint_max_bytes: u64,
    pub checkpoint_trans: u64,
    /// Background CIL pushes (space limit), and log forces asked of the CIL.
    pub cil_background_pushes: u64,
    pub cil_forces: u64,
    /// AIL: push passes, items written back, write I/Os (after merging
    /// adjacent buffers), items skipped because still pinned.
    pub ail_pushes: u64,
    pub ail_items_written: u64,
    pub ail_write_ios: u64,
    pub ail_pinned_skips: u64,
    /// The log writer's counters (log writes, bytes, forces, grant waits).
    pub log: LogStats,
    /// Inode lock acquisitions (see [`crate::cache::ilock`]).
    pub locks: LockStats,
}

impl FsStats {
    /// `name value` lines, stable names (the stats file format).
    pub fn lines(&self) -> Vec<(&'static str, u64)> {
        let l = &self.log;
        vec![
            ("trans_commits", self.trans_commits),
            ("trans_cancels", self.trans_cancels),
            ("trans_resv_overruns", self.trans_resv_overruns),
            ("ag_lock_order_violations", self.ag_lock_order_violations),
            ("cil_items", self.cil_items),
            ("cil_relogged", self.cil_relogged),
            ("checkpoints", self.checkpoints),
            ("checkpoint_bytes", self.checkpoint_bytes),
            ("checkpoint_max_bytes", self.checkpoint_max_bytes),
            ("checkpoint_trans", self.checkpoint_trans),
            ("cil_background_pushes", self.cil_background_pushes),
            ("cil_forces", self.cil_forces),
            ("ail_pushes", self.ail_pushes),
            ("ail_items_written", self.ail_items_written),
            ("ail_write_ios", self.ail_write_ios),
            ("ail_pinned_skips", self.ail_pinned_skips),
            ("log_records", l.records),
            ("log_writes", l.writes),
            ("log_bytes", l.bytes),
            ("log_flushes", l.flushes),
            ("log_forces", l.forces),
            ("log_force_piggybacks", l.force_piggybacks),
            ("log_iclog_waits", l.iclog_waits),
            ("log_gate_waits", l.gate_waits),
            ("log_gate_timeouts", l.gate_timeouts),
            ("log_deferred_pushes", l.deferred_pushes),
            ("log_overlapped_commits", l.overlapped_commits),
            ("log_completion_batches", l.completion_batches),
            ("grant_waits", l.grant_waits),
            ("grant_wakeups", l.grant_wakeups),
            ("tail_pushes", l.tail_pushes),
            ("iolock_shared", self.locks.iolock_shared),
            ("iolock_excl", self.locks.iolock_excl),
            ("iolock_waits", self.locks.iolock_waits),
            ("iolock_upgrades", self.locks.iolock_upgrades),
            ("ilock_shared", self.locks.ilock_shared),
            ("ilock_excl", self.locks.ilock_excl),
            ("ilock_waits", self.locks.ilock_waits),
        ]
    }
}
