//! In-core inodes of a read-write mount: the committed dinode bytes, the
//! inode's log item state, and the inode locks ([`super::ilock`]).
//!
//! The inode locks are taken by the operations (outside transactions),
//! several in ascending inode number; a transaction may join only inodes
//! whose ilock its caller holds (or inodes just allocated under the AGI).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use rustc_hash::FxHashMap;

use super::ilock::InodeLockTable;
pub use super::ilock::{ILockExcl, ILockShared, IoLockGuard};
use super::ItemLog;
use crate::types::Ino;

#[derive(Debug)]
pub struct IState {
    /// Dinode bytes as of the last commit (CRC valid).
    pub committed: Arc<Vec<u8>>,
    /// `committed` is in the inode's cluster on disk.
    pub on_disk: bool,
    pub log: ItemLog,
    /// Its inode chunk was freed (cluster buffers cancelled): nothing of
    /// it is written back any more (the AIL drops it), until a new image
    /// is committed (the chunk allocated again).
    pub stale: bool,
    /// An in-core cache a layer above keeps for this inode between
    /// transactions (a directory's decoded index: `dir::skel`), as of the
    /// last commit. Installed and dropped only by transaction commit (see
    /// `xact::MetaTx::set_fork_cache`), under the inode's ilock.
    pub fork_cache: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

#[derive(Debug)]
pub struct InodeItem {
    pub ino: Ino,
    /// Unique id (stable order for the CIL).
    pub id: u64,
    pub st: Mutex<IState>,
    /// Data was overwritten in place (no transaction) since the last
    /// fsync: its fsync must flush the device cache even if a log force
    /// covers the inode (the force's flush may predate the data). An
    /// atomic, not in `st`: every pure overwrite sets it. (Losing it when
    /// a clean item is evicted is safe: fsync then finds nothing to force
    /// and flushes anyway.)
    pub overwritten: AtomicBool,
}

const SHARDS: usize = 64;

/// In-core inode items and inode locks.
pub struct InodeTable {
    items: Vec<RwLock<FxHashMap<u64, Arc<InodeItem>>>>,
    pub locks: InodeLockTable,
}

impl Default for InodeTable {
    fn default() -> Self {
        InodeTable {
            items: (0..SHARDS)
                .map(|_| RwLock::new(FxHashMap::default()))
                .collect(),
            locks: InodeLockTable::default(),
        }
    }
}

impl InodeTable {
    pub fn ilock(&self, ino: Ino) -> ILockExcl {
        self.locks.ilock(ino)
    }

    pub fn ilock_shared(&self, ino: Ino) -> ILockShared {
        self.locks.ilock_shared(ino)
    }

    pub fn iolock(&self, ino: Ino, exclusive: bool) -> IoLockGuard {
        self.locks.iolock(ino, exclusive)
    }

    /// [`Self::iolock`] shared and [`Self::ilock_shared`], in that order.
    pub fn iolock_ilock_shared(&self, ino: Ino) -> (IoLockGuard, ILockShared) {
        self.locks.iolock_ilock_shared(ino)
    }

    pub fn get(&self, ino: Ino) -> Option<Arc<InodeItem>> {
        self.items[ino.0 as usize % SHARDS]
            .read()
            .get(&ino.0)
            .cloned()
    }

    /// The item of `ino`, created from `dinode` if there is none.
    pub fn get_or_insert(
        &self,
        ino: Ino,
        id: u64,
        dinode: impl FnOnce() -> Vec<u8>,
    ) -> Arc<InodeItem> {
        if let Some(ip) = self.get(ino) {
            return ip;
        }
        let mut sh = self.items[ino.0 as usize % SHARDS].write();
        if let Some(ip) = sh.get(&ino.0) {
            return ip.clone();
        }
        let ip = Arc::new(InodeItem {
            ino,
            id,
            st: Mutex::new(IState {
                committed: Arc::new(dinode()),
                on_disk: true,
                log: ItemLog::default(),
                stale: false,
                fork_cache: None,
            }),
            overwritten: AtomicBool::new(false),
        });
        sh.insert(ino.0, ip.clone());
        ip
    }

    /// Drop clean idle items (called by the AIL after write-back).
    pub fn evict_clean(&self, max_per_shard: usize) {
        for sh in &self.items {
            let mut sh = sh.write();
            if sh.len() <= max_per_shard {
                continue;
            }
            sh.retain(|_, ip| {
                if Arc::strong_count(ip) > 1 {
                    return true;
                }
                let Some(st) = ip.st.try_lock() else {
                    return true;
                };
                !(st.on_disk && st.log.pin == 0 && st.log.lv.is_none() && st.log.ail_lsn.is_none())
            });
        }
    }

    pub fn all(&self) -> Vec<Arc<InodeItem>> {
        self.items
            .iter()
            .flat_map(|s| s.read().values().cloned().collect::<Vec<_>>())
            .collect()
    }
}
