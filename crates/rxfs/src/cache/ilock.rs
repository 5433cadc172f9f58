//! The two locks of every inode of a read-write mount, with XFS's rules
//! (the IOLOCK and ILOCK classes of the kernel's `xfs_inode.h`; seed 004).
//!
//! - The **I/O lock** orders file data access against changes of the
//!   file's size and block mapping. Shared: reads, and block-aligned
//!   overwrites of written blocks inside EOF (no mapping changes, so any
//!   number run at once: the seed-004 point). Exclusive: writes that
//!   extend the file, allocate, convert unwritten extents or are not
//!   block-aligned (they read-modify-write a block), truncate, fallocate
//!   and its punch/zero/collapse/insert modes, giving preallocation back.
//! - The **metadata lock** (`ilock`) orders readers of an inode's core and
//!   of every block found through it (extent btree, directory, attribute
//!   and symlink blocks) against the transactions changing them. Shared:
//!   every reader (lookup, getattr, open, readdir, readlink, getxattr,
//!   listxattr, the mapping of a read), while it reads. Exclusive: an
//!   operation, across all its transactions; it is released only after
//!   the last commit returned, and [`crate::cil::Cil::commit`] publishes
//!   every changed block and inode image to the read path (and the read
//!   path's inode cache forgets the old image) before it returns.
//!
//! **Invariant**: a thread holding inode I's ilock (either mode) sees I's
//! core and every block reachable from it as of one transaction boundary:
//! all of a transaction's changes to I, or none.
//!
//! **Lock order** (outermost first): the I/O lock of one inode; ilocks, in
//! ascending inode number; then, inside a transaction, the log
//! reservation, AGI buffers (ascending AG), AGF buffers (ascending AG),
//! other buffers. Readers hold at most one ilock: a thread that already
//! holds an ilock (or has a transaction open) reads without taking more
//! (see [`reader_may_lock`]): it is an operation that locked what it
//! changes, and taking a shared lock out of order could deadlock against
//! a writer queued on it. Inodes being allocated are joined to their
//! creating transaction unlocked (no one can find them before the commit
//! that publishes their directory entry); the unlinked list's pointer
//! changes touch other inodes' `di_next_unlinked` unlocked (a field no
//! reader looks at).
//!
//! Each lock is a fair reader-writer lock: a queued exclusive request
//! stops new shared ones, so writers are not starved.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use parking_lot::lock_api::{ArcRwLockReadGuard, ArcRwLockWriteGuard};
use parking_lot::{RawRwLock, RwLock};
use rustc_hash::FxHashMap;

use crate::types::Ino;

const SHARDS: usize = 64;
/// A shard's map is swept of unused entries when it grows past this.
const SWEEP_AT: usize = 4096;

/// Both locks of one inode.
#[derive(Default)]
struct InodeLocks {
    io: Arc<RwLock<()>>,
    meta: Arc<RwLock<()>>,
}

thread_local! {
    /// Inode numbers whose ilock this thread holds (any mode).
    static HELD: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
    /// Logged transactions open on this thread (see [`in_transaction`]).
    static OPEN_TRANS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Whether this thread has a logged transaction open: it may hold AG
/// header and buffer locks, so the read path must not wait for them (it
/// reads what the transaction's own locks already make stable).
pub fn in_transaction() -> bool {
    OPEN_TRANS.with(|c| c.get() > 0)
}

/// Counts a transaction open on its thread for its lifetime (held by the
/// logged transaction).
pub struct OpenMark;

impl OpenMark {
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        OPEN_TRANS.with(|c| c.set(c.get() + 1));
        OpenMark
    }
}

impl Drop for OpenMark {
    fn drop(&mut self) {
        OPEN_TRANS.with(|c| c.set(c.get().saturating_sub(1)));
    }
}

/// Whether a read on this thread should take the shared ilock: not if the
/// thread holds an ilock already or has a transaction open (see the
/// module doc's lock order).
pub fn reader_may_lock() -> bool {
    HELD.with(|h| h.borrow().is_empty()) && !in_transaction()
}

fn held_push(ino: u64) {
    HELD.with(|h| h.borrow_mut().push(ino));
}

fn held_pop(ino: u64) {
    HELD.with(|h| {
        let mut h = h.borrow_mut();
        if let Some(i) = h.iter().rposition(|&x| x == ino) {
            h.swap_remove(i);
        }
    });
}

enum MetaGuard {
    Excl(#[allow(dead_code)] ArcRwLockWriteGuard<RawRwLock, ()>),
    Shared(#[allow(dead_code)] ArcRwLockReadGuard<RawRwLock, ()>),
}

/// A held ilock (exclusive or shared); released on drop, on the thread
/// that took it (not `Send`: the thread's held set must stay right).
pub struct ILockGuard {
    ino: u64,
    _g: MetaGuard,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Drop for ILockGuard {
    fn drop(&mut self) {
        held_pop(self.ino);
    }
}

pub type ILockExcl = ILockGuard;
pub type ILockShared = ILockGuard;

/// A held I/O lock; released on drop.
pub enum IoLockGuard {
    Excl(#[allow(dead_code)] ArcRwLockWriteGuard<RawRwLock, ()>),
    Shared(#[allow(dead_code)] ArcRwLockReadGuard<RawRwLock, ()>),
}

impl IoLockGuard {
    pub fn is_exclusive(&self) -> bool {
        matches!(self, IoLockGuard::Excl(_))
    }
}

/// Lock acquisitions by kind (`rxfs stats`): `*_waits` count those that
/// found the lock taken and had to wait.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LockStats {
    pub iolock_shared: u64,
    pub iolock_excl: u64,
    pub iolock_waits: u64,
    pub ilock_shared: u64,
    pub ilock_excl: u64,
    pub ilock_waits: u64,
    /// Writes that took the I/O lock shared, found they were not pure
    /// overwrites, and went again with it exclusive (the kernel's
    /// `xfs_ilock_demote`/relock dance).
    pub iolock_upgrades: u64,
}

#[derive(Default)]
struct Counters {
    io_shared: AtomicU64,
    io_excl: AtomicU64,
    io_waits: AtomicU64,
    i_shared: AtomicU64,
    i_excl: AtomicU64,
    i_waits: AtomicU64,
    upgrades: AtomicU64,
}

/// The locks of every inode, created on first use.
pub struct InodeLockTable {
    shards: Vec<RwLock<FxHashMap<u64, InodeLocks>>>,
    c: Counters,
}

impl Default for InodeLockTable {
    fn default() -> Self {
        InodeLockTable {
            shards: (0..SHARDS)
                .map(|_| RwLock::new(FxHashMap::default()))
                .collect(),
            c: Counters::default(),
        }
    }
}

impl InodeLockTable {
    fn locks_of(&self, ino: Ino) -> (Arc<RwLock<()>>, Arc<RwLock<()>>) {
        let shard = &self.shards[ino.0 as usize % SHARDS];
        // Common case: the entry exists; lookups of a shard run side by side.
        if let Some(l) = shard.read().get(&ino.0) {
            return (l.io.clone(), l.meta.clone());
        }
        let mut sh = shard.write();
        if sh.len() >= SWEEP_AT && !sh.contains_key(&ino.0) {
            // Unused entries go (a held or awaited lock has another Arc).
            sh.retain(|_, l| Arc::strong_count(&l.io) > 1 || Arc::strong_count(&l.meta) > 1);
        }
        let l = sh.entry(ino.0).or_default();
        (l.io.clone(), l.meta.clone())
    }

    /// The ilock of `ino`, exclusive (several: ascending inode number).
    pub fn ilock(&self, ino: Ino) -> ILockGuard {
        let (_, m) = self.locks_of(ino);
        self.c.i_excl.fetch_add(1, Relaxed);
        let g = match m.try_write_arc() {
            Some(g) => g,
            None => {
                self.c.i_waits.fetch_add(1, Relaxed);
                m.write_arc()
            }
        };
        held_push(ino.0);
        ILockGuard {
            ino: ino.0,
            _g: MetaGuard::Excl(g),
            _not_send: std::marker::PhantomData,
        }
    }

    /// The ilock of `ino`, shared.
    pub fn ilock_shared(&self, ino: Ino) -> ILockGuard {
        let (_, m) = self.locks_of(ino);
        self.meta_shared(ino, m)
    }

    /// The I/O lock of `ino` shared, then its ilock shared: one lookup of
    /// the table for both (the overwrite path's pair, in lock order).
    pub fn iolock_ilock_shared(&self, ino: Ino) -> (IoLockGuard, ILockGuard) {
        let (io, m) = self.locks_of(ino);
        let io = self.io_guard(io, false);
        (io, self.meta_shared(ino, m))
    }

    fn meta_shared(&self, ino: Ino, m: Arc<RwLock<()>>) -> ILockGuard {
        self.c.i_shared.fetch_add(1, Relaxed);
        let g = match m.try_read_arc() {
            Some(g) => g,
            None => {
                self.c.i_waits.fetch_add(1, Relaxed);
                m.read_arc()
            }
        };
        held_push(ino.0);
        ILockGuard {
            ino: ino.0,
            _g: MetaGuard::Shared(g),
            _not_send: std::marker::PhantomData,
        }
    }

    /// The I/O lock of `ino`, exclusive or shared.
    pub fn iolock(&self, ino: Ino, exclusive: bool) -> IoLockGuard {
        let (io, _) = self.locks_of(ino);
        self.io_guard(io, exclusive)
    }

    fn io_guard(&self, io: Arc<RwLock<()>>, exclusive: bool) -> IoLockGuard {
        if exclusive {
            self.c.io_excl.fetch_add(1, Relaxed);
            IoLockGuard::Excl(io.try_write_arc().unwrap_or_else(|| {
                self.c.io_waits.fetch_add(1, Relaxed);
                io.write_arc()
            }))
        } else {
            self.c.io_shared.fetch_add(1, Relaxed);
            IoLockGuard::Shared(io.try_read_arc().unwrap_or_else(|| {
                self.c.io_waits.fetch_add(1, Relaxed);
                io.read_arc()
            }))
        }
    }

    /// The I/O lock of `ino` exclusive, if no one holds it.
    pub fn try_iolock_excl(&self, ino: Ino) -> Option<IoLockGuard> {
        let (io, _) = self.locks_of(ino);
        let g = io.try_write_arc()?;
        self.c.io_excl.fetch_add(1, Relaxed);
        Some(IoLockGuard::Excl(g))
    }

    pub fn count_upgrade(&self) {
        self.c.upgrades.fetch_add(1, Relaxed);
    }

    pub fn stats(&self) -> LockStats {
        LockStats {
            iolock_shared: self.c.io_shared.load(Relaxed),
            iolock_excl: self.c.io_excl.load(Relaxed),
            iolock_waits: self.c.io_waits.load(Relaxed),
            ilock_shared: self.c.i_shared.load(Relaxed),
            ilock_excl: self.c.i_excl.load(Relaxed),
            ilock_waits: self.c.i_waits.load(Relaxed),
            iolock_upgrades: self.c.upgrades.load(Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_share_writers_exclude_and_nesting_is_tracked() {
        let t = InodeLockTable::default();
        assert!(reader_may_lock());
        let a = t.ilock_shared(Ino(5));
        assert!(!reader_may_lock(), "a held ilock stops nested read locks");
        let b = std::thread::scope(|s| s.spawn(|| t.ilock_shared(Ino(5)).ino).join().unwrap());
        assert_eq!(b, 5);
        let writer = std::thread::scope(|s| {
            s.spawn(|| {
                let m = t.locks_of(Ino(5)).1;
                m.try_write_arc().is_some()
            })
            .join()
            .unwrap()
        });
        assert!(!writer, "an exclusive lock waits for the reader");
        drop(a);
        assert!(reader_may_lock());
        let _x = t.ilock(Ino(5));
        assert!(t.locks_of(Ino(5)).1.try_read_arc().is_none());
        let s = t.stats();
        assert_eq!((s.ilock_shared, s.ilock_excl), (2, 1));
    }

    #[test]
    fn iolock_modes() {
        let t = InodeLockTable::default();
        let a = t.iolock(Ino(9), false);
        let b = t.iolock(Ino(9), false);
        assert!(!a.is_exclusive() && !b.is_exclusive());
        assert!(t.locks_of(Ino(9)).0.try_write_arc().is_none());
        drop((a, b));
        let x = t.iolock(Ino(9), true);
        assert!(x.is_exclusive());
        assert!(t.locks_of(Ino(9)).0.try_read_arc().is_none());
    }

    #[test]
    fn unused_entries_are_swept() {
        let t = InodeLockTable::default();
        for i in 0..(SWEEP_AT as u64 * SHARDS as u64 * 2) {
            drop(t.ilock(Ino(i)));
        }
        let total: usize = t.shards.iter().map(|s| s.read().len()).sum();
        assert!(total <= SWEEP_AT * SHARDS, "{total}");
    }
}
