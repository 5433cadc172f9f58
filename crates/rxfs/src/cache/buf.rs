//! Metadata buffers: one per `(daddr, len)`, shared by transactions (one
//! at a time, through the tx lock), the CIL, the AIL and the read view.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RawMutex};

use super::ItemLog;
use crate::bdev::BlockDevice;
use crate::error::{Error, Result};
use crate::format::bufkind::BufKind;
use crate::format::Uuid;
use crate::types::Daddr;

/// The lock a transaction holds on a buffer until commit or cancel.
pub type TxGuard = parking_lot::lock_api::ArcMutexGuard<RawMutex, ()>;

/// Mutable state of a buffer (under [`Buf::st`]).
#[derive(Debug)]
pub struct BufState {
    pub kind: BufKind,
    /// Contents as of the last commit (CRC valid; LSN as last stamped).
    pub committed: Arc<Vec<u8>>,
    /// `committed` is what the device holds.
    pub on_disk: bool,
    /// `committed` passed the structure checks of this kind's decoder in
    /// a transaction that committed it, or was built by rxfs: a decoder
    /// may then rely on the summaries the block keeps of itself (a
    /// directory data block's bestfree table) instead of walking it.
    /// Blocks read from disk start unverified (their read verifier checks
    /// the header and CRC only).
    pub verified: Option<BufKind>,
    /// Freed: never written back; dropped from the read view.
    pub stale: bool,
    /// In the current CIL context as an ordered buffer (no regions).
    pub ordered: bool,
    /// A new inode cluster (ordered when its chunk was made) not written
    /// back yet: only the creating checkpoint's ICREATE holds its initial
    /// contents, so its AIL position stays at that checkpoint's even when
    /// a later one relogs a range of it (an unlinked pointer), as the
    /// kernel keeps an inode allocation buffer's (`XFS_BLI_INODE_ALLOC_BUF`).
    /// Moving it would let the tail pass the ICREATE while the cluster on
    /// disk is still whatever the blocks held before.
    pub alloc_pending: bool,
    /// 128-byte chunks changed since the buffer was last written back
    /// (cleared by the AIL when it marks the buffer clean): what every
    /// checkpoint that logs the buffer carries.
    pub dirty_map: Vec<u32>,
    pub log: ItemLog,
}

/// A metadata buffer.
#[derive(Debug)]
pub struct Buf {
    pub daddr: Daddr,
    pub len: usize,
    /// Unique id (stable order for the CIL).
    pub id: u64,
    txlock: Arc<Mutex<()>>,
    pub st: Mutex<BufState>,
}

impl Buf {
    /// Wait for and take the transaction lock.
    pub fn tx_lock(&self) -> TxGuard {
        self.txlock.lock_arc()
    }

    /// Take the transaction lock if free.
    pub fn tx_try_lock(&self) -> Option<TxGuard> {
        self.txlock.try_lock_arc()
    }
}

const SHARDS: usize = 64;

/// All cached buffers of a filesystem.
pub struct BufCache {
    shards: Vec<Mutex<HashMap<u64, Arc<Buf>>>>,
    next_id: AtomicU64,
    capacity: usize,
}

impl BufCache {
    pub fn new(capacity: usize) -> Self {
        BufCache {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            next_id: AtomicU64::new(1),
            capacity: capacity / SHARDS + 1,
        }
    }

    fn shard(&self, daddr: Daddr) -> &Mutex<HashMap<u64, Arc<Buf>>> {
        &self.shards[(daddr.0 as usize / 8) % SHARDS]
    }

    /// The cached buffer at `daddr`, if any.
    pub fn lookup(&self, daddr: Daddr) -> Option<Arc<Buf>> {
        self.shard(daddr).lock().get(&daddr.0).cloned()
    }

    /// Get the buffer `(daddr, len)`: cached, or read from `dev` and
    /// verified as `kind` (`read == false`: a new zeroed buffer, not read).
    /// A cached buffer of another length is an error unless it is stale.
    pub fn get(
        &self,
        dev: &dyn BlockDevice,
        uuid: &Uuid,
        daddr: Daddr,
        len: usize,
        kind: BufKind,
        read: bool,
    ) -> Result<Arc<Buf>> {
        if let Some(b) = self.lookup(daddr) {
            if b.len == len {
                return Ok(b);
            }
            let st = b.st.lock();
            let idle = st.stale && st.log.pin == 0 && st.log.lv.is_none();
            if !idle {
                return Err(Error::Invalid(format!(
                    "buffer at daddr {} is cached with length {}, asked for {len}",
                    daddr.0, b.len
                )));
            }
        }
        let mut data = vec![0u8; len];
        if read {
            dev.read_at(&mut data, daddr.bytes())?;
            kind.verify(&data, daddr, uuid)?;
        }
        let nb = Arc::new(Buf {
            daddr,
            len,
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            txlock: Arc::new(Mutex::new(())),
            st: Mutex::new(BufState {
                kind,
                committed: Arc::new(data),
                on_disk: read,
                stale: false,
                ordered: false,
                alloc_pending: false,
                verified: None,
                dirty_map: Vec::new(),
                log: ItemLog::default(),
            }),
        });
        let mut sh = self.shard(daddr).lock();
        match sh.get(&daddr.0) {
            Some(b) if b.len == len => return Ok(b.clone()),
            _ => {}
        }
        if sh.len() >= self.capacity {
            evict(&mut sh);
        }
        sh.insert(daddr.0, nb.clone());
        Ok(nb)
    }

    /// Every cached buffer (for unmount checks and tests).
    pub fn all(&self) -> Vec<Arc<Buf>> {
        self.shards
            .iter()
            .flat_map(|s| s.lock().values().cloned().collect::<Vec<_>>())
            .collect()
    }
}

/// Drop clean, idle buffers nobody else holds.
fn evict(sh: &mut HashMap<u64, Arc<Buf>>) {
    sh.retain(|_, b| {
        if Arc::strong_count(b) > 1 {
            return true;
        }
        let Some(st) = b.st.try_lock() else {
            return true;
        };
        let idle = (st.on_disk || st.stale)
            && st.log.pin == 0
            && st.log.lv.is_none()
            && st.log.ail_lsn.is_none();
        !idle
    });
}
