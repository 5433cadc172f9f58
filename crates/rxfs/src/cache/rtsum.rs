//! The realtime allocator's in-core state: the summary cache of seed 001
//! and the in-memory copy of the whole summary.
//!
//! The summary file counts, for every size class `log` and bitmap block
//! `b`, the free runs of `[2^log, 2^(log+1))` rt extents that start in
//! `b` (see [`crate::format::rt`]). It is stored level-major, so the
//! allocator's most frequent question, "does bitmap block `b` start any
//! free run of at least `2^log` extents?", reads one counter per level,
//! each in a different summary block. Two answers to that cost, chosen
//! by [`RtSumMode`] (`-o rtsumcache=`, for the ablation of seed 001):
//!
//! - **min-level cache** ([`RtSumMode::MinLevel`], the kernel's
//!   `m_rsum_cache` as first proposed): one byte per bitmap block.
//!   *Invariant:* `minlevel[b] <= ` the lowest level whose counter for
//!   `b` is non-zero (`levels` when every counter of `b` is zero). It is
//!   a lower bound, never exact by necessity: a counter below it is
//!   known to be zero and is not read. It is *loosened* (lowered) by
//!   every counter increment below it, at the moment the increment is
//!   made, and *tightened* (raised) only by a search that read every
//!   counter of `b` from the bound up to the level it stops at and found
//!   them zero. Both happen under the realtime lock, on the counters the
//!   locking transaction sees; if that transaction is cancelled, its
//!   changes vanish and so may the zeros a tightening saw, so a cancel
//!   resets every bound to 0 ([`RtSumCache::invalidate`]), the loosest,
//!   always-true value.
//! - **in-memory summary** ([`RtSumMode::Memory`], the thread's second
//!   proposal): the whole summary as counters in memory, searched without
//!   reading a single summary block; every change is made to it and to
//!   the summary block it belongs to, which the transaction logs, so the
//!   log carries exactly the changed blocks. *Invariant:* outside a
//!   transaction holding the realtime lock, the copy equals the committed
//!   summary file, and beside it a mask per bitmap block has bit `log`
//!   set iff that block's counter at `log` is non-zero (kept with every
//!   change), so "does any run of `low..=high` start in `b`?" is one test
//!   (the "more efficient search" the thread hoped the copy would allow).
//!   A cancel drops the copy; the next user loads it again.
//! - [`RtSumMode::None`]: every question reads summary counters through
//!   the transaction's buffers (the baseline).
//!
//! The bounds of the min-level cache are kept in every mode (the memory
//! mode then uses them for free; they cost nothing to maintain).
//!
//! **Free-run index** (every mode, not part of the ablation): the maximal
//! free runs inside a bitmap block, as the allocator last found them by
//! scanning it, so that a block the summary points at again is not
//! scanned again (a search may visit a dozen blocks whose runs are all
//! busy before it finds one it can use). *Invariant:* outside a
//! transaction holding the realtime lock, the runs kept for block `b` are
//! exactly the free runs that start and end inside `b` in its committed
//! bitmap (a run reaching the block's end is kept cut there). Every
//! change of a bitmap block takes its entry out before the change
//! (`take_runs`) and puts back the runs after it, found again only around
//! the bits changed (`rtalloc::runs`), with no memo; a cancel drops them
//! all; the whole index is dropped when it
//! holds more than [`MAX_INDEXED_RUNS`].
//!
//! An entry may also remember that a search found no piece of at least
//! `minlen` extents clear of busy ranges in the block ([`NoPiece`]), with
//! the oldest checkpoint of the busy ranges that were in the way. *Why it
//! holds:* while the entry lives the block's free runs are unchanged
//! (a change replaces the entry, without memo), and while that checkpoint
//! is not yet stable ([`crate::xact::MetaTx::busy_stable_seq`] below it)
//! every one of those ranges is busy still and others were only added,
//! so the clear pieces can only have shrunk: a search for `minlen` or more
//! finds nothing there still and skips the block. A last run that reaches
//! the block's end is followed into the next blocks (as far as the request
//! says): the memo records how far (`reach`) and the change clock, and
//! answers only a request that follows it no further, while none of those
//! next blocks has changed (every bitmap change advances the clock and
//! stamps its block: `note_change`, `changed_since`).
//!
//! **Busy ranges** of each bitmap block, mirrored from the CIL's busy
//! list ([`super::rtbusy`], every mode).
//!
//! Locking: one [`RtSumCache`] per mount, inside the realtime lock (a
//! mutex the transaction holds from its first realtime allocation or free
//! to its commit or cancel, the kernel's `rbmip` ILOCK). That lock also
//! serialises every access to the bitmap and summary buffers, and comes
//! after inode locks and before AGI and AGF buffers in the lock order
//! (see [`crate::xact`]): a transaction that may free a realtime file
//! (unlink, rename over it) takes it before its AGI; a write takes it
//! before the AGFs of bmbt splits.

/// Largest summary kept in memory (a bigger one is searched through its
/// blocks with the min-level bounds instead).
pub const MAX_MEM_SUMMARY_BYTES: u64 = 256 << 20;

/// Most free runs kept in the free-run index (16 bytes each).
pub const MAX_INDEXED_RUNS: usize = 1 << 20;

/// Most bitmap blocks whose last change is remembered (`changed`; past it
/// the map starts again and older memos that need it stop holding).
pub const MAX_CHANGE_STAMPS: usize = 1 << 16;

/// A search found no piece of `minlen` extents clear of busy ranges in a
/// bitmap block (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoPiece {
    /// The oldest checkpoint of the busy ranges that were in the way
    /// (`u64::MAX` when none was): the memo holds while fewer checkpoints
    /// are stable.
    pub until: u64,
    pub minlen: u64,
    /// How far the block's last run was followed (past the block's end
    /// when it reached it): a request that would follow it further is not
    /// answered by the memo.
    pub reach: u64,
    /// The change clock then ([`RtSumCache::clock`]): the blocks the run
    /// was followed into must not have changed since.
    pub stamp: u64,
    /// Busy ranges were what stood in the way.
    pub busy: bool,
}

/// One bitmap block in the free-run index.
#[derive(Debug, Clone)]
pub struct IndexedBlock {
    /// Its free runs (first extent, length), in order.
    pub runs: std::sync::Arc<[(u64, u64)]>,
    pub no_piece: Option<NoPiece>,
}

/// How the realtime allocator answers summary questions (see the module
/// documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RtSumMode {
    /// Read every counter from the summary blocks.
    None,
    /// Skip counters below a per-bitmap-block lower bound.
    MinLevel,
    /// Search an in-memory copy of the whole summary.
    #[default]
    Memory,
}

impl RtSumMode {
    /// Parse a mount option value (`none`, `minlevel`, `memory`).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "none" => Some(RtSumMode::None),
            "minlevel" => Some(RtSumMode::MinLevel),
            "memory" => Some(RtSumMode::Memory),
            _ => None,
        }
    }
}

/// Work the realtime allocator did (for `rxfs stats` and the benchmark).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RtAllocStats {
    /// Extents allocated.
    pub allocs: u64,
    /// Extents freed.
    pub frees: u64,
    /// Summary counters read from summary blocks (a buffer access each).
    pub summary_reads: u64,
    /// Counter reads skipped because of the min-level bound.
    pub summary_skips: u64,
    /// Bitmap block accesses.
    pub bitmap_reads: u64,
    /// Bitmap blocks searched through the free-run index, not scanned.
    pub runs_indexed: u64,
    /// Of those, blocks skipped because nothing clear could be there (the
    /// no-clear-piece memo).
    pub memo_skips: u64,
    /// Times the cache was dropped by a cancelled transaction.
    pub invalidations: u64,
    /// Nanoseconds spent searching and taking extents (under the lock),
    /// without the log forces below.
    pub alloc_ns: u64,
    /// Log forces an allocation made to wait out busy extents (only
    /// extents freed moments ago were left), and the nanoseconds they
    /// took: device writes and flushes, not allocator work.
    pub busy_forces: u64,
    pub force_ns: u64,
}

/// Where the blocks of the bitmap and summary files are (disk addresses
/// of their filesystem blocks, in file order): fixed while mounted, as
/// rxfs never grows the realtime section.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RtMaps {
    pub bitmap: Vec<crate::types::Daddr>,
    pub summary: Vec<crate::types::Daddr>,
}

/// The in-core realtime allocator state (see the module documentation).
#[derive(Debug)]
pub struct RtSumCache {
    /// The bitmap and summary blocks (set at mount).
    pub maps: Option<std::sync::Arc<RtMaps>>,
    mode: RtSumMode,
    levels: u32,
    rbmblocks: u32,
    minlevel: Vec<u8>,
    mem: Option<Vec<u32>>,
    /// With `mem`: per bitmap block, the levels whose counter is non-zero
    /// (bit per level; at most 64 levels: `rextslog` < 64).
    nonzero: Vec<u64>,
    /// The free-run index.
    runs: rustc_hash::FxHashMap<u64, IndexedBlock>,
    indexed: usize,
    /// Bitmap block -> the change clock at its last change, for the
    /// blocks changed since `forgot` (the clock when the map was last
    /// emptied, which bounds its size).
    changed: rustc_hash::FxHashMap<u64, u64>,
    clock: u64,
    forgot: u64,
    /// The busy ranges of each bitmap block ([`super::rtbusy`]).
    pub busy: super::rtbusy::RtBusyMirror,
    /// Scratch space for busy ranges gathered over several blocks.
    pub busy_scratch: Vec<super::rtbusy::RtBusy>,
    pub stats: RtAllocStats,
}

impl RtSumCache {
    /// State for a summary of `levels` levels of `rbmblocks` counters.
    pub fn new(mode: RtSumMode, levels: u32, rbmblocks: u32) -> Self {
        let bytes = levels as u64 * rbmblocks as u64 * 4;
        let mode = if mode == RtSumMode::Memory && bytes > MAX_MEM_SUMMARY_BYTES {
            RtSumMode::MinLevel
        } else {
            mode
        };
        RtSumCache {
            maps: None,
            mode,
            levels,
            rbmblocks,
            minlevel: vec![0; rbmblocks as usize],
            mem: None,
            nonzero: Vec::new(),
            runs: Default::default(),
            indexed: 0,
            changed: Default::default(),
            clock: 0,
            forgot: 0,
            busy: Default::default(),
            busy_scratch: Vec::new(),
            stats: RtAllocStats::default(),
        }
    }

    pub fn mode(&self) -> RtSumMode {
        self.mode
    }

    /// Whether the min-level bounds may be used to skip counters.
    pub fn use_bounds(&self) -> bool {
        self.mode != RtSumMode::None
    }

    /// The lower bound for bitmap block `bbno` (0 when unknown).
    pub fn min_level(&self, bbno: u64) -> u32 {
        self.minlevel.get(bbno as usize).map_or(0, |&l| l as u32)
    }

    /// A counter of `bbno` at `log` becomes non-zero: lower the bound.
    pub fn loosen(&mut self, bbno: u64, log: u32) {
        if let Some(l) = self.minlevel.get_mut(bbno as usize) {
            if (*l as u32) > log {
                *l = log as u8;
            }
        }
    }

    /// Every counter of `bbno` below `log` was read as zero under the
    /// realtime lock: raise the bound to `log` (at most `levels`).
    pub fn tighten(&mut self, bbno: u64, log: u32) {
        let log = log.min(self.levels);
        if let Some(l) = self.minlevel.get_mut(bbno as usize) {
            if (*l as u32) < log {
                *l = log as u8;
            }
        }
    }

    /// The in-memory summary, when loaded (memory mode only).
    pub fn mem(&self) -> Option<&[u32]> {
        self.mem.as_deref()
    }

    /// Counter `idx` (level `log`, bitmap block `bbno`) of the in-memory
    /// summary, when loaded, is now `value`.
    pub fn mem_put(&mut self, idx: usize, log: u32, bbno: u64, value: u32) {
        if let Some(m) = self.mem.as_mut() {
            m[idx] = value;
            if let Some(mask) = self.nonzero.get_mut(bbno as usize) {
                let bit = 1u64 << log;
                if value == 0 {
                    *mask &= !bit;
                } else {
                    *mask |= bit;
                }
            }
        }
    }

    /// The levels whose counter of bitmap block `bbno` is non-zero, as
    /// bits (bit `l` for level `l`), when the in-memory summary is
    /// loaded: "does a run of level `low..=high` start here?" is one
    /// mask test instead of a read per level.
    pub fn mem_levels(&self, bbno: u64) -> Option<u64> {
        self.mem.as_ref()?;
        self.nonzero.get(bbno as usize).copied()
    }

    /// Install a freshly loaded summary (memory mode) and set every bound
    /// exactly from it.
    pub fn set_mem(&mut self, counters: Vec<u32>) {
        debug_assert_eq!(
            counters.len() as u64,
            self.levels as u64 * self.rbmblocks as u64
        );
        let rbm = self.rbmblocks as usize;
        for b in 0..rbm {
            let low = (0..self.levels as usize)
                .find(|&l| counters[l * rbm + b] != 0)
                .unwrap_or(self.levels as usize);
            self.minlevel[b] = low as u8;
        }
        if self.mode == RtSumMode::Memory {
            self.nonzero = (0..rbm)
                .map(|b| {
                    (0..self.levels as usize)
                        .filter(|&l| counters[l * rbm + b] != 0)
                        .fold(0u64, |m, l| m | 1 << l)
                })
                .collect();
            self.mem = Some(counters);
        }
    }

    /// The index entry of bitmap block `bbno`, if any.
    pub fn block_runs(&self, bbno: u64) -> Option<&IndexedBlock> {
        self.runs.get(&bbno)
    }

    /// Index the free runs of bitmap block `bbno` as just scanned.
    pub fn set_block_runs(&mut self, bbno: u64, runs: std::sync::Arc<[(u64, u64)]>) {
        if self.indexed + runs.len() > MAX_INDEXED_RUNS {
            self.runs.clear();
            self.indexed = 0;
        }
        self.indexed += runs.len();
        let e = IndexedBlock {
            runs,
            no_piece: None,
        };
        if let Some(old) = self.runs.insert(bbno, e) {
            self.indexed -= old.runs.len();
        }
    }

    /// Remember that block `bbno` (indexed) had no clear piece.
    pub fn note_no_piece(&mut self, bbno: u64, np: NoPiece) {
        if let Some(e) = self.runs.get_mut(&bbno) {
            e.no_piece = Some(np);
        }
    }

    /// The change clock: advanced by every bitmap block change.
    pub fn clock(&self) -> u64 {
        self.clock
    }

    /// Bitmap block `bbno` changes (in the locking transaction).
    pub fn note_change(&mut self, bbno: u64) {
        self.clock += 1;
        if self.changed.len() >= MAX_CHANGE_STAMPS {
            self.changed.clear();
            self.forgot = self.clock;
        }
        self.changed.insert(bbno, self.clock);
    }

    /// Whether bitmap block `bbno` may have changed after clock `stamp`.
    pub fn changed_since(&self, bbno: u64, stamp: u64) -> bool {
        match self.changed.get(&bbno) {
            Some(&c) => c > stamp,
            None => self.forgot > stamp,
        }
    }

    /// Bitmap block `bbno` is about to change: take its indexed runs out
    /// (the caller puts them back changed, or leaves the block
    /// unindexed).
    pub fn take_runs(&mut self, bbno: u64) -> Option<std::sync::Arc<[(u64, u64)]>> {
        let old = self.runs.remove(&bbno)?;
        self.indexed -= old.runs.len();
        Some(old.runs)
    }

    /// A transaction that changed counters was cancelled: forget what it
    /// may have taught us.
    pub fn invalidate(&mut self) {
        self.minlevel.iter_mut().for_each(|l| *l = 0);
        self.mem = None;
        self.nonzero = Vec::new();
        self.runs.clear();
        self.indexed = 0;
        self.busy.clear();
        self.stats.invalidations += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_masks_follow_the_in_memory_counters() {
        let (levels, rbm) = (6u32, 5usize);
        let mut c = RtSumCache::new(RtSumMode::Memory, levels, rbm as u32);
        assert_eq!(c.mem_levels(0), None, "nothing loaded");
        let mut counters = vec![0u32; levels as usize * rbm];
        counters[2 * rbm + 1] = 3;
        counters[5 * rbm + 1] = 1;
        counters[4] = 7; // level 0, block 4
        c.set_mem(counters.clone());
        let want = |m: &[u32], b: usize| {
            (0..levels as usize)
                .filter(|&l| m[l * rbm + b] != 0)
                .fold(0u64, |a, l| a | 1 << l)
        };
        let mut rng = crate::bdev::simrng::SimRng::new(99);
        for step in 0..500 {
            for b in 0..rbm {
                assert_eq!(
                    c.mem_levels(b as u64),
                    Some(want(&counters, b)),
                    "step {step}"
                );
            }
            let (l, b) = (rng.next_u64() % levels as u64, rng.next_u64() % rbm as u64);
            let idx = l as usize * rbm + b as usize;
            let v = (rng.next_u64() % 3) as u32;
            counters[idx] = v;
            c.mem_put(idx, l as u32, b, v);
        }
        c.invalidate();
        assert_eq!(c.mem_levels(1), None, "dropped with the copy");
        let mut m = RtSumCache::new(RtSumMode::MinLevel, levels, rbm as u32);
        m.set_mem(counters);
        assert_eq!(m.mem_levels(1), None, "no copy, no masks");
    }

    #[test]
    fn bounds_loosen_tighten_and_reset() {
        let mut c = RtSumCache::new(RtSumMode::MinLevel, 5, 3);
        assert_eq!(c.min_level(1), 0);
        c.tighten(1, 3);
        assert_eq!(c.min_level(1), 3);
        c.tighten(1, 2); // never lowered by a tightening
        assert_eq!(c.min_level(1), 3);
        c.loosen(1, 4); // above the bound: no change
        assert_eq!(c.min_level(1), 3);
        c.loosen(1, 1);
        assert_eq!(c.min_level(1), 1);
        c.tighten(2, 99);
        assert_eq!(c.min_level(2), 5, "capped at levels");
        c.set_block_runs(1, vec![(10, 2)].into());
        assert!(!c.changed_since(1, 0));
        c.note_change(1);
        let t = c.clock();
        assert!(c.changed_since(1, t - 1) && !c.changed_since(1, t));
        assert!(!c.changed_since(2, 0), "never changed");
        c.invalidate();
        assert_eq!((c.min_level(1), c.min_level(2)), (0, 0));
        assert!(
            c.block_runs(1).is_none(),
            "a cancel drops the free-run index"
        );
        assert_eq!(c.min_level(7), 0, "outside: unknown");
    }

    #[test]
    fn free_run_index_forgets_changed_blocks_and_stays_bounded() {
        let mut c = RtSumCache::new(RtSumMode::None, 5, 4);
        c.set_block_runs(0, vec![(1, 3), (9, 1)].into());
        c.set_block_runs(2, vec![(70_000, 5)].into());
        assert_eq!(
            c.block_runs(0).map(|e| &e.runs[..]),
            Some(&[(1, 3), (9, 1)][..])
        );
        let np = NoPiece {
            until: 4,
            minlen: 2,
            reach: 32768,
            stamp: 0,
            busy: true,
        };
        c.note_no_piece(0, np);
        c.note_no_piece(1, np); // not indexed: nothing to remember it by
        assert_eq!(c.block_runs(0).and_then(|e| e.no_piece), Some(np));
        assert!(c.block_runs(1).is_none());
        assert_eq!(c.take_runs(0).as_deref(), Some(&[(1, 3), (9, 1)][..]));
        assert!(c.block_runs(0).is_none());
        assert_eq!(c.indexed, 1);
        c.set_block_runs(2, vec![(70_000, 4), (70_010, 1)].into());
        assert_eq!(c.indexed, 2, "a re-scan replaces the entry");
        let big: std::sync::Arc<[(u64, u64)]> = vec![(0, 1); MAX_INDEXED_RUNS].into();
        c.set_block_runs(3, big);
        assert!(
            c.block_runs(2).is_none(),
            "over the budget: the index starts again"
        );
        assert_eq!(c.indexed, MAX_INDEXED_RUNS);
    }

    #[test]
    fn loading_sets_exact_bounds_and_keeps_memory_only_in_memory_mode() {
        // 3 levels x 2 blocks, level-major: block 0 has a run at level 2,
        // block 1 none.
        let counters = vec![0, 0, 0, 0, 1, 0];
        let mut m = RtSumCache::new(RtSumMode::Memory, 3, 2);
        m.set_mem(counters.clone());
        assert_eq!((m.min_level(0), m.min_level(1)), (2, 3));
        assert_eq!(m.mem(), Some(&counters[..]));
        let mut n = RtSumCache::new(RtSumMode::MinLevel, 3, 2);
        n.set_mem(counters);
        assert!(n.mem().is_none());
        assert_eq!(n.min_level(0), 2);
    }
}
