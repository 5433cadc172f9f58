//! Loading inodes on a mounted filesystem: the inode cache and `iget`
//! (the allocation check, the read under the inode's lock, the in-core
//! copy of a read-write mount). Decoding the bytes is
//! [`crate::inode::decode`]'s.

use std::sync::Arc;

use parking_lot::RwLock;
use rustc_hash::FxHashMap;

use super::Filesystem;
use crate::error::{Error, Result};
use crate::inode::Inode;
use crate::types::Ino;

/// Shards of the inode cache.
const ICACHE_SHARDS: usize = 64;

/// Keyed by inode number with rustc-hash's multiply hash, not SipHash: the
/// lookup is on every request's path (a hostile image can only slow its
/// own lookups by choosing colliding numbers).
type CacheShard = FxHashMap<Ino, Arc<Inode>>;

/// A bounded cache of decoded inodes, in shards by inode number, each
/// under a reader-writer lock: lookups of any inodes run side by side, a
/// lock is held only to look up, insert or remove (never across I/O).
///
/// Invariant (stale inserts): a commit that changed inode X removes X and
/// bumps the mount's epoch under X's shard lock ([`Self::remove_bump`]); a
/// reader loads the epoch before reading X from disk and inserts only if
/// the epoch is unchanged, checked under the same shard lock
/// ([`Self::insert_if`]). The two are ordered by that lock, so an inode
/// read before a commit is never cached after it.
pub(crate) struct InodeCache {
    shards: Box<[RwLock<CacheShard>]>,
    shard_capacity: usize,
}

impl InodeCache {
    pub(crate) fn new(capacity: usize) -> Self {
        InodeCache {
            shards: (0..ICACHE_SHARDS).map(|_| RwLock::default()).collect(),
            shard_capacity: (capacity / ICACHE_SHARDS).max(1),
        }
    }

    fn shard(&self, ino: Ino) -> &RwLock<CacheShard> {
        &self.shards[ino.0 as usize % ICACHE_SHARDS]
    }

    fn get(&self, ino: Ino) -> Option<Arc<Inode>> {
        self.shard(ino).read().get(&ino).cloned()
    }

    /// Forget `ino` and bump `epoch`, under its shard lock, so a reader
    /// that read the old inode cannot insert it afterwards.
    pub(crate) fn remove_bump(&self, ino: Ino, epoch: &std::sync::atomic::AtomicU64) {
        let mut map = self.shard(ino).write();
        epoch.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        map.remove(&ino);
    }

    /// Insert unless a commit changed an inode since the reader loaded
    /// `seen` from `epoch` (checked under the shard lock).
    fn insert_if(&self, ip: Arc<Inode>, epoch: &std::sync::atomic::AtomicU64, seen: u64) {
        let mut map = self.shard(ip.ino).write();
        if epoch.load(std::sync::atomic::Ordering::SeqCst) != seen {
            return;
        }
        if map.len() >= self.shard_capacity {
            // Drop an arbitrary eighth: cheap, and keeps the cache bounded.
            let victims: Vec<Ino> = map
                .keys()
                .take(self.shard_capacity / 8 + 1)
                .copied()
                .collect();
            for v in victims {
                map.remove(&v);
            }
        }
        map.insert(ip.ino, ip);
    }
}

impl Filesystem {
    pub fn root_ino(&self) -> Ino {
        Ino(self.sb().rootino)
    }

    /// Read, verify and decode inode `ino` (cached).
    ///
    /// An inode number outside the filesystem is `Err(Invalid)`; one the
    /// inode btree does not show as allocated is `Err(NotFound)`.
    pub fn iget(&self, ino: Ino) -> Result<Arc<Inode>> {
        self.check_live()?;
        if let Some(ip) = self.icache.get(ino) {
            return Ok(ip);
        }
        let epoch = self.epoch.load(std::sync::atomic::Ordering::SeqCst);
        let ip = match self.decode_in_core(ino) {
            Some(ip) => ip,
            None => self.read_inode(ino)?,
        };
        let ip = Arc::new(ip);
        self.icache.insert_if(ip.clone(), &self.epoch, epoch);
        Ok(ip)
    }

    /// The attributes of inode `ino` (its core and device number), as
    /// [`Self::iget`] would give them, without decoding its forks when the
    /// inode is not cached but this read-write mount holds its committed
    /// bytes (a directory just changed: its extent list may be long).
    pub fn iget_attrs(&self, ino: Ino) -> Result<crate::inode::InodeAttrs> {
        self.check_live()?;
        if let Some(ip) = self.icache.get(ino) {
            return Ok((&*ip).into());
        }
        if let Some(a) = self.attrs_in_core(ino) {
            return Ok(a);
        }
        self.iget(ino).map(|ip| (&*ip).into())
    }

    /// [`Self::decode_in_core`] of the attributes only.
    fn attrs_in_core(&self, ino: Ino) -> Option<crate::inode::InodeAttrs> {
        let item = self.rw()?.inodes.get(ino)?;
        let _guard = self.read_guard(ino);
        let bytes = {
            let st = item.st.lock();
            if st.stale || st.committed.len() < 4 || st.committed[2..4] == [0, 0] {
                return None;
            }
            st.committed.clone()
        };
        crate::inode::decode::decode_attrs(self, ino, &bytes).ok()
    }

    /// Inode `ino` decoded from the bytes of its last commit, if this
    /// read-write mount holds them in core (an inode a transaction has
    /// joined and the cache has not evicted): no I/O, and no inode btree
    /// walk. That is exact: an in-core item with a nonzero mode that is
    /// not stale is allocated, because freeing an inode commits mode 0
    /// into the same item and freeing its chunk marks the item stale (as
    /// the kernel trusts its in-core inodes, not the inobt, once they are
    /// cached). None: not in core, free, or bytes that do not decode
    /// (the caller's full path then gives the answer).
    fn decode_in_core(&self, ino: Ino) -> Option<Inode> {
        let item = self.rw()?.inodes.get(ino)?;
        // The core and the fork blocks as of one transaction boundary.
        let _guard = self.read_guard(ino);
        let (bytes, kept) = {
            let st = item.st.lock();
            if st.stale || st.committed.len() < 4 || st.committed[2..4] == [0, 0] {
                return None;
            }
            (st.committed.clone(), st.fork_cache.clone())
        };
        // A directory's index kept in core holds its data fork's extents
        // (installed with these bytes: see `Trans::commit_one`).
        let exts = crate::dir::skel::DirSkel::kept(kept, &bytes).map(|s| s.map.exts.clone());
        crate::inode::decode::decode_inode_known(self, ino, &bytes, exts).ok()
    }

    /// [`Self::iget`] of an inode this mount has just created or changed
    /// in a committed transaction: its allocation is known, so the inode
    /// btree is not asked again (a create or setattr would otherwise pay an
    /// AGI and inobt walk for its reply). Freed meanwhile by another
    /// thread: whatever `iget` says (`NotFound`).
    pub(crate) fn iget_known(&self, ino: Ino) -> Result<Arc<Inode>> {
        if let Some(ip) = self.icache.get(ino) {
            return Ok(ip);
        }
        let geo = self.geo();
        if !geo.ino_valid(ino) {
            return Err(Error::Invalid(format!(
                "inode number {} out of range",
                ino.0
            )));
        }
        let epoch = self.epoch.load(std::sync::atomic::Ordering::SeqCst);
        if let Some(ip) = self.decode_in_core(ino) {
            let ip = Arc::new(ip);
            self.icache.insert_if(ip.clone(), &self.epoch, epoch);
            return Ok(ip);
        }
        let (daddr, off) = geo.ino_location(ino);
        let mut buf = vec![0u8; geo.inodesize as usize];
        let guard = self.read_guard(ino);
        self.dev().read_at(&mut buf, daddr.bytes() + off as u64)?;
        // di_mode (offset 2) 0 is a free inode; bytes that do not decode
        // may be a freed and reused cluster: either way the full path
        // (inode btree first) gives the answer.
        if buf[2] == 0 && buf[3] == 0 {
            drop(guard);
            return self.iget(ino);
        }
        let decoded = crate::inode::decode::decode_inode(self, ino, &buf);
        drop(guard);
        match decoded {
            Ok(ip) => {
                let ip = Arc::new(ip);
                self.icache.insert_if(ip.clone(), &self.epoch, epoch);
                Ok(ip)
            }
            Err(_) => self.iget(ino),
        }
    }

    /// Read and decode an inode, bypassing the cache.
    pub fn read_inode(&self, ino: Ino) -> Result<Inode> {
        let geo = self.geo();
        if !geo.ino_valid(ino) {
            return Err(Error::Invalid(format!(
                "inode number {} out of range",
                ino.0
            )));
        }
        // The existence check, the core and the fork blocks as of one
        // transaction boundary (freeing an inode takes its ilock).
        let _guard = self.read_guard(ino);
        // Existence is decided by the inode btree, not by the inode core:
        // an inode number that no allocated chunk covers does not exist.
        if !crate::ialloc::read::inode_allocated(self, ino)? {
            return Err(Error::NotFound);
        }
        let (daddr, off) = geo.ino_location(ino);
        let isize = geo.inodesize as usize;
        let mut buf = vec![0u8; isize];
        self.dev().read_at(&mut buf, daddr.bytes() + off as u64)?;
        crate::inode::decode::decode_inode(self, ino, &buf)
    }
}
