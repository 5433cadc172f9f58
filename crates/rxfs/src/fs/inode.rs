//! Loading inodes: the inode cache, `iget`, decoding a dinode into an
//! in-core [`Inode`] (its type lives in [`crate::inode`]).
//!
//! Btree-format forks are flattened at load time into the sorted extent list
//! (the bmbt is walked once, every block verified), so readers see one shape.

use std::sync::Arc;

use parking_lot::RwLock;
use rustc_hash::FxHashMap;

use super::Filesystem;
use crate::error::{Error, Location, Result};
use crate::format::bmbt;
use crate::format::inode::{self as dinode, FMT_BTREE, FMT_DEV, FMT_EXTENTS, FMT_LOCAL};
use crate::inode::{Fork, Inode};
use crate::types::{ForkKind, FsBlock, Ino};

/// Largest file offset in blocks an extent may reach (2^54).
const MAX_FILEOFF: u64 = 1 << 54;
/// Deepest bmbt XFS can build.
const BMBT_MAXLEVELS: u16 = 9;

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
        let bytes = {
            let st = item.st.lock();
            if st.stale || st.committed.len() < 4 || st.committed[2..4] == [0, 0] {
                return None;
            }
            st.committed.clone()
        };
        self.decode_inode(ino, &bytes).ok()
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
        let decoded = self.decode_inode(ino, &buf);
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
        if !self.inode_allocated(ino)? {
            return Err(Error::NotFound);
        }
        let (daddr, off) = geo.ino_location(ino);
        let isize = geo.inodesize as usize;
        let mut buf = vec![0u8; isize];
        self.dev().read_at(&mut buf, daddr.bytes() + off as u64)?;
        self.decode_inode(ino, &buf)
    }

    /// Decode inode `ino` from its on-disk bytes (`inodesize` of them),
    /// forks included, without asking the inode btree whether it is
    /// allocated (checkers that walk the chunks already know).
    pub(crate) fn decode_inode(&self, ino: Ino, buf: &[u8]) -> Result<Inode> {
        let isize = buf.len();
        let core = dinode::decode_core(
            buf,
            ino,
            &self.sb().metadata_uuid(),
            self.sb().has_nrext64(),
        )?;
        if core.mode == 0 {
            return Err(Error::corrupt(
                "inode",
                Location::Ino(ino.0),
                "allocated in the inode btree but free on disk (mode 0)",
            ));
        }
        let realtime = core.flags & dinode::DIFLAG_REALTIME != 0;
        let dsize = core.data_fork_size(isize);
        let dfork = &buf[dinode::DINODE_V3_CORE_SIZE..dinode::DINODE_V3_CORE_SIZE + dsize];
        let data = self.decode_fork(
            ino,
            &core,
            ForkKind::Data,
            core.format,
            dfork,
            core.nextents,
            realtime,
        )?;
        let attr = if core.forkoff != 0 {
            let aoff = core.attr_fork_offset();
            let afork = &buf[aoff..isize];
            Some(self.decode_fork(
                ino,
                &core,
                ForkKind::Attr,
                core.aformat,
                afork,
                core.anextents as u64,
                false,
            )?)
        } else {
            None
        };
        Ok(Inode {
            ino,
            core,
            data,
            attr,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn decode_fork(
        &self,
        ino: Ino,
        core: &dinode::InodeCore,
        kind: ForkKind,
        format: u8,
        fork: &[u8],
        nextents: u64,
        realtime: bool,
    ) -> Result<Fork> {
        let at = Location::Ino(ino.0);
        let what = match kind {
            ForkKind::Data => "inode data fork",
            ForkKind::Attr => "inode attr fork",
        };
        match format {
            FMT_DEV if kind == ForkKind::Data => {
                if fork.len() < 4 {
                    return Err(Error::corrupt(what, at, "no room for a device number"));
                }
                Ok(Fork::Dev(crate::format::be32(fork, 0)))
            }
            FMT_LOCAL => {
                let len = match kind {
                    ForkKind::Data => core.size,
                    // Shortform attributes carry their own total size.
                    ForkKind::Attr => fork.len() as u64,
                };
                if len > fork.len() as u64 {
                    return Err(Error::corrupt(
                        what,
                        at,
                        format!("local fork of {len} bytes in {} bytes of space", fork.len()),
                    ));
                }
                Ok(Fork::Local(fork[..len as usize].to_vec()))
            }
            FMT_EXTENTS => {
                let max = fork.len() / bmbt::EXTENT_REC_SIZE;
                if nextents > max as u64 {
                    return Err(Error::corrupt(
                        what,
                        at,
                        format!("{nextents} extents in a fork holding at most {max}"),
                    ));
                }
                let list: Vec<_> = (0..nextents as usize)
                    .map(|i| bmbt::Extent::decode(&fork[i * 16..]))
                    .collect();
                self.check_extents(ino, what, &list, realtime)?;
                Ok(Fork::Extents { list, btree: false })
            }
            FMT_BTREE => {
                let list = self.load_bmbt(ino, what, fork, nextents, realtime)?;
                Ok(Fork::Extents { list, btree: true })
            }
            f => Err(Error::corrupt(what, at, format!("bad fork format {f}"))),
        }
    }

    /// Check an extent list: valid addresses, sorted, non-overlapping.
    fn check_extents(
        &self,
        ino: Ino,
        what: &'static str,
        list: &[bmbt::Extent],
        realtime: bool,
    ) -> Result<()> {
        let geo = self.geo();
        let at = Location::Ino(ino.0);
        let mut next_off = 0u64;
        for (i, e) in list.iter().enumerate() {
            if e.len == 0
                || e.off
                    .0
                    .checked_add(e.len)
                    .is_none_or(|end| end > MAX_FILEOFF)
            {
                return Err(Error::corrupt(
                    what,
                    at,
                    format!("extent {i}: bad offset/length {e:?}"),
                ));
            }
            if e.off.0 < next_off {
                return Err(Error::corrupt(
                    what,
                    at,
                    format!("extent {i} overlaps or is out of order"),
                ));
            }
            let ok = if realtime {
                geo.rt_extent_valid(crate::types::RtBlock(e.start), e.len)
            } else {
                geo.fsb_extent_valid(FsBlock(e.start), e.len)
            };
            if !ok {
                return Err(Error::corrupt(
                    what,
                    at,
                    format!("extent {i} points outside the device: {e:?}"),
                ));
            }
            next_off = e.end();
        }
        Ok(())
    }

    /// Walk a bmbt rooted in the inode fork and return every extent record.
    fn load_bmbt(
        &self,
        ino: Ino,
        what: &'static str,
        root: &[u8],
        nextents: u64,
        realtime: bool,
    ) -> Result<Vec<bmbt::Extent>> {
        let geo = self.geo();
        let at = Location::Ino(ino.0);
        if root.len() < 4 {
            return Err(Error::corrupt(what, at, "btree root too small"));
        }
        let level = bmbt::root_level(root);
        let numrecs = bmbt::root_numrecs(root) as usize;
        let maxrecs = bmbt::root_maxrecs(root.len());
        if level == 0 || level > BMBT_MAXLEVELS || numrecs == 0 || numrecs > maxrecs {
            return Err(Error::corrupt(
                what,
                at,
                format!("bad btree root: level {level}, {numrecs} records (max {maxrecs})"),
            ));
        }
        // An extent list can never be longer than the blocks it maps.
        let limit = if realtime { geo.rblocks } else { geo.dblocks };
        if nextents > limit {
            return Err(Error::corrupt(
                what,
                at,
                format!("{nextents} extents on a {limit}-block device"),
            ));
        }
        let mut out = Vec::with_capacity(nextents.min(1 << 20) as usize);
        let mut visited = std::collections::HashSet::new();
        let ptr_off = 4 + maxrecs * 8;
        for i in 0..numrecs {
            let ptr = crate::format::be64(root, ptr_off + i * 8);
            self.walk_bmbt_block(
                ino,
                what,
                FsBlock(ptr),
                level - 1,
                &mut visited,
                &mut out,
                nextents,
            )?;
        }
        if out.len() as u64 != nextents {
            return Err(Error::corrupt(
                what,
                at,
                format!("btree holds {} extents, inode says {nextents}", out.len()),
            ));
        }
        self.check_extents(ino, what, &out, realtime)?;
        Ok(out)
    }

    #[allow(clippy::too_many_arguments)]
    fn walk_bmbt_block(
        &self,
        ino: Ino,
        what: &'static str,
        fsb: FsBlock,
        level: u16,
        visited: &mut std::collections::HashSet<u64>,
        out: &mut Vec<bmbt::Extent>,
        nextents: u64,
    ) -> Result<()> {
        let geo = self.geo();
        let at = Location::Ino(ino.0);
        if !geo.fsb_extent_valid(fsb, 1) {
            return Err(Error::corrupt(
                what,
                at,
                format!("bmbt pointer {} out of range", fsb.0),
            ));
        }
        if !visited.insert(fsb.0) {
            return Err(Error::corrupt(
                what,
                at,
                format!("bmbt block {} reached twice", fsb.0),
            ));
        }
        let daddr = geo.fsb_to_daddr(fsb);
        let bs = geo.blocksize as usize;
        let uuid = self.sb().metadata_uuid();
        let buf = self.read_meta(daddr, bs, |b, d| {
            bmbt::verify_block(b, d, ino, &uuid, level)
        })?;
        let numrecs = crate::format::be16(&buf, 6) as usize;
        if level == 0 {
            if out.len() as u64 + numrecs as u64 > nextents {
                return Err(Error::corrupt(
                    "bmbt block",
                    Location::Daddr(daddr.0),
                    "more extents than the inode counts",
                ));
            }
            for i in 0..numrecs {
                out.push(bmbt::Extent::decode(&buf[bmbt::LBLOCK_HDR_SIZE + i * 16..]));
            }
            return Ok(());
        }
        let maxrecs = bmbt::block_maxrecs(bs, false);
        let ptr_off = bmbt::LBLOCK_HDR_SIZE + maxrecs * 8;
        for i in 0..numrecs {
            let ptr = crate::format::be64(&buf, ptr_off + i * 8);
            self.walk_bmbt_block(ino, what, FsBlock(ptr), level - 1, visited, out, nextents)?;
        }
        Ok(())
    }
}
