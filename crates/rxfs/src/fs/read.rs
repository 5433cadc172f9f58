//! The read path of a mounted filesystem. Each structure's reading lives
//! in its own module, written against [`crate::inode::ReadCtx`], which
//! [`Filesystem`] implements here; the methods below hand it the
//! filesystem.
//!
//! ## Locks
//!
//! How the read path of a read-write mount takes the shared inode locks
//! (the rules are in [`crate::cache::ilock`]).
//!
//! Every public reader of an inode's forks (lookup, readdir, read,
//! readlink, getxattr, listxattr) takes the inode's shared ilock, then
//! reads the inode *again* under it (from the inode cache, which a commit
//! clears before its writer unlocks), and reads the blocks found through
//! that fresh copy: a caller's older copy of the inode may name blocks a
//! transaction has since freed or rewritten. The caller's copy is used as
//! it is on read-only mounts (nothing changes) and on threads that already
//! hold an ilock or a transaction (operations reading what they locked).
//! File data reads also hold the file's I/O lock shared
//! ([`ReadCtx::data_read_lock`]), and inode btree walks of the read path
//! the AGI buffer's lock ([`ReadCtx::agi_read_lock`]).
//!
//! ## Paths
//!
//! Path resolution for tools (CLI, library users): absolute paths from the
//! root, intermediate symlinks followed (at most [`MAX_SYMLINK_FOLLOW`]), the
//! last component not followed (lstat semantics).

use std::sync::Arc;

use super::Filesystem;
use crate::bdev::BlockDevice;
use crate::btree::walk::{self, BtreeRoot, WalkStats};
use crate::cache::buf::TxGuard;
use crate::cache::ilock::{reader_may_lock, ILockShared, IoLockGuard};
use crate::dir::read::DirEntry;
use crate::error::{Error, Result};
use crate::format::ag::{AgCheck, Agf, Agfl, Agi};
use crate::format::btree::{BlockCheck, BtreeKey, BtreeRecord};
use crate::format::bufkind::BufKind;
use crate::format::dir::DirGeo;
use crate::format::sb::Superblock;
use crate::geometry::Geometry;
use crate::inode::{contiguous_daddr, ForkBlock, Inode, ReadCtx, Reading};
use crate::types::{AgNumber, FileBlock, ForkKind, Ino};

impl Filesystem {
    /// The directory geometry of this filesystem.
    pub fn dir_geo(&self) -> DirGeo {
        crate::dir::read::dir_geo(self)
    }

    /// Look `name` up in directory `dir`. `Err(NotFound)` when absent.
    pub fn lookup(&self, dir: &Inode, name: &[u8]) -> Result<Ino> {
        crate::dir::read::lookup(self, dir, name)
    }

    /// The entries of directory `dir` from `cookie` on, each handed to `f`
    /// until it returns false (see [`crate::dir::read::readdir`]).
    pub fn readdir(
        &self,
        dir: &Inode,
        cookie: u64,
        f: &mut dyn FnMut(&DirEntry) -> bool,
    ) -> Result<()> {
        crate::dir::read::readdir(self, dir, cookie, f)
    }

    /// The names of `ip`'s extended attributes, with their namespace
    /// prefixes (see [`crate::attr::read::listxattr`]).
    pub fn listxattr(&self, ip: &Inode) -> Result<Vec<Vec<u8>>> {
        crate::attr::read::listxattr(self, ip)
    }

    /// The value of `ip`'s extended attribute `name` (with its namespace
    /// prefix; see [`crate::attr::read::getxattr`]).
    pub fn getxattr(&self, ip: &Inode, name: &[u8]) -> Result<Vec<u8>> {
        crate::attr::read::getxattr(self, ip, name)
    }

    /// Read up to `buf.len()` bytes of regular file `ip` at byte `offset`
    /// (see [`crate::bmap::read::read_file`]).
    pub fn read_file(&self, ip: &Inode, offset: u64, buf: &mut [u8]) -> Result<usize> {
        crate::bmap::read::read_file(self, ip, offset, buf)
    }

    /// The target of symlink `ip`. `Err(NotSymlink)` for other files.
    pub fn readlink(&self, ip: &Inode) -> Result<Vec<u8>> {
        crate::symlink::readlink(self, ip)
    }

    /// The bounds every block of AG `agno` is checked against (from its
    /// verified AGF and AGI).
    pub fn ag_check(&self, agno: AgNumber) -> Result<AgCheck> {
        crate::ag::read::ag_check(self, agno)
    }

    /// The per-block checks of a btree of `levels` levels in that AG.
    pub fn block_check(&self, c: &AgCheck, levels: u32) -> BlockCheck {
        crate::ag::read::block_check(self, c, levels)
    }

    /// The AGF of `agno`, verified.
    pub fn read_agf(&self, agno: AgNumber) -> Result<Agf> {
        crate::ag::read::read_agf(self, agno)
    }

    /// The AGI of `agno`, verified.
    pub fn read_agi(&self, agno: AgNumber) -> Result<Agi> {
        crate::ag::read::read_agi(self, agno)
    }

    /// The AGFL of `agno`, verified.
    pub fn read_agfl(&self, agno: AgNumber) -> Result<Agfl> {
        crate::ag::read::read_agfl(self, agno)
    }

    /// Visit every record of a btree in key order as raw bytes (see
    /// [`walk::btree_walk_raw`]).
    pub fn btree_walk_raw(
        &self,
        root: &BtreeRoot,
        f: &mut dyn FnMut(&[u8]) -> Result<bool>,
    ) -> Result<WalkStats> {
        walk::btree_walk_raw(self, root, f)
    }

    /// As [`Self::btree_walk_raw`], also returning every block read (see
    /// [`walk::btree_walk_blocks`]).
    pub fn btree_walk_blocks(
        &self,
        root: &BtreeRoot,
        f: &mut dyn FnMut(&[u8]) -> Result<bool>,
    ) -> (Result<WalkStats>, Vec<u32>) {
        walk::btree_walk_blocks(self, root, f)
    }

    /// Visit every record of a btree in key order as typed records.
    pub fn btree_walk<R: BtreeRecord>(
        &self,
        root: &BtreeRoot,
        f: impl FnMut(R) -> Result<bool>,
    ) -> Result<WalkStats> {
        walk::btree_walk(self, root, f)
    }

    /// Every record of a btree (bounded by the AG size).
    pub fn btree_records<R: BtreeRecord>(&self, root: &BtreeRoot) -> Result<Vec<R>> {
        walk::btree_records(self, root)
    }

    /// The last record whose (low) key is `<= key` (see
    /// [`walk::btree_lookup_le`]).
    pub fn btree_lookup_le<R: BtreeRecord>(
        &self,
        root: &BtreeRoot,
        key: BtreeKey,
    ) -> Result<Option<R>> {
        walk::btree_lookup_le(self, root, key)
    }
}

impl Filesystem {
    /// The shared ilock of `ino`, if this read must take it (read-write
    /// mount, and the thread holds no ilock and no transaction).
    pub(crate) fn read_guard(&self, ino: Ino) -> Option<ILockShared> {
        let rw = self.rw.as_ref().filter(|_| reader_may_lock())?;
        Some(rw.inodes.ilock_shared(ino))
    }

    /// Whether reads on this thread take shared ilocks (see
    /// [`Self::read_guard`]), without taking one.
    pub(crate) fn reads_take_locks(&self) -> bool {
        self.rw.is_some() && reader_may_lock()
    }

    /// `ip` as of now, with its shared ilock held (see the module doc).
    /// The same inode number freed and allocated again since the caller
    /// read it: `NotFound` (the caller's file is gone).
    pub(crate) fn read_locked<'a>(&self, ip: &'a Inode) -> Result<Reading<'a>> {
        let Some(g) = self.read_guard(ip.ino) else {
            return Ok(Reading::given(ip));
        };
        let cur = self.iget(ip.ino)?;
        if cur.core.gen != ip.core.gen {
            return Err(Error::NotFound);
        }
        Ok(Reading::locked(cur, g))
    }

    /// On a read-write mount, the AGI buffer's transaction lock, held while
    /// the read path walks the inode btree (as the kernel's untrusted inode
    /// lookups hold the AGI): every change of the AG's inode btrees holds
    /// the AGI until the CIL has published all its blocks, so the walk sees
    /// the tree before or after a transaction, never half of a split. Not
    /// taken (`None`) on read-only mounts, or on a thread inside a logged
    /// transaction (which may hold this AGI itself, and whose own AGI
    /// lock, if any, already keeps the tree still).
    pub(crate) fn agi_read_lock(&self, agno: AgNumber) -> Result<Option<TxGuard>> {
        let Some(rw) = self.rw() else {
            return Ok(None);
        };
        if crate::cache::ilock::in_transaction() {
            return Ok(None);
        }
        let geo = self.geo();
        let daddr = geo.ag_header_daddr(agno, 2);
        let uuid = self.sb().metadata_uuid();
        let b = rw.bufs.get(
            &*rw.raw,
            &uuid,
            daddr,
            geo.sectsize as usize,
            BufKind::Agi,
            true,
        )?;
        Ok(Some(b.tx_lock()))
    }

    /// The I/O lock of `ino` in the mode given, on read-write mounts.
    pub(crate) fn iolock(&self, ino: Ino, exclusive: bool) -> Option<IoLockGuard> {
        Some(self.rw.as_ref()?.inodes.iolock(ino, exclusive))
    }
}

impl ReadCtx for Filesystem {
    fn geo(&self) -> &Geometry {
        Filesystem::geo(self)
    }
    fn sb(&self) -> &Superblock {
        Filesystem::sb(self)
    }
    fn read_locked<'a>(&self, ip: &'a Inode) -> Result<Reading<'a>> {
        Filesystem::read_locked(self, ip)
    }
    fn iget(&self, ino: Ino) -> Result<Arc<Inode>> {
        Filesystem::iget(self, ino)
    }
    fn reads_take_locks(&self) -> bool {
        Filesystem::reads_take_locks(self)
    }
    fn dev(&self) -> &dyn BlockDevice {
        Filesystem::dev(self)
    }
    fn rtdev(&self) -> Option<&dyn BlockDevice> {
        Filesystem::rtdev(self)
    }
    fn data_read_lock(&self, ino: Ino) -> Result<Option<IoLockGuard>> {
        self.check_live()?;
        Ok(self.iolock(ino, false))
    }
    fn agi_read_lock(&self, agno: AgNumber) -> Result<Option<TxGuard>> {
        Filesystem::agi_read_lock(self, agno)
    }
    /// A block the buffer cache holds is read from it: its committed
    /// bytes (the newest a reader may see, what the read view would lay
    /// over the device) and their verified mark. A reader holds the
    /// inode's shared ilock, so no transaction changes the block
    /// meanwhile; a freed (stale) buffer is not the block any more.
    fn read_fork_block(
        &self,
        ip: &Inode,
        fork: ForkKind,
        off: FileBlock,
        count: u32,
    ) -> Result<Option<ForkBlock>> {
        if let Some(rw) = self.rw() {
            let geo = self.geo();
            let len = count as usize * geo.blocksize as usize;
            let cached = contiguous_daddr(geo, ip, fork, off, count)
                .and_then(|daddr| Some((daddr, rw.bufs.lookup(daddr)?)));
            if let Some((daddr, b)) = cached {
                let st = b.st.lock();
                if b.len == len && !st.stale && st.committed.len() == len {
                    return Ok(Some(ForkBlock {
                        daddr,
                        bytes: st.committed.clone(),
                        verified: st.verified,
                    }));
                }
            }
        }
        Ok(self
            .read_fork_blocks(ip, fork, off, count)?
            .map(|(daddr, bytes)| ForkBlock::copied(daddr, bytes)))
    }
    fn note_verified(&self, blk: &ForkBlock, kind: BufKind) {
        let Some(b) = self.rw().and_then(|rw| rw.bufs.lookup(blk.daddr)) else {
            return;
        };
        let mut st = b.st.lock();
        if !st.stale && st.kind == kind && Arc::ptr_eq(&st.committed, &blk.bytes) {
            st.verified = Some(kind);
        }
    }
}

pub const MAX_SYMLINK_FOLLOW: u32 = 40;

impl Filesystem {
    /// Resolve `path` (bytes, '/'-separated, relative to the root).
    pub fn resolve(&self, path: &[u8]) -> Result<Ino> {
        let mut follows = 0;
        self.resolve_from(self.root_ino(), path, &mut follows)
    }

    fn resolve_from(&self, start: Ino, path: &[u8], follows: &mut u32) -> Result<Ino> {
        let mut cur = if path.first() == Some(&b'/') {
            self.root_ino()
        } else {
            start
        };
        let comps: Vec<&[u8]> = path
            .split(|&c| c == b'/')
            .filter(|c| !c.is_empty() && *c != b".")
            .collect();
        for (i, name) in comps.iter().enumerate() {
            let dir = self.iget(cur)?;
            if !dir.is_dir() {
                return Err(Error::NotDir);
            }
            if name.len() > 255 {
                return Err(Error::NameTooLong);
            }
            let next = self.lookup(&dir, name)?;
            let last = i + 1 == comps.len();
            let ip = self.iget(next)?;
            if !last && ip.file_type() == Some(crate::types::FileType::Symlink) {
                *follows += 1;
                if *follows > MAX_SYMLINK_FOLLOW {
                    return Err(Error::Loop);
                }
                let target = self.readlink(&ip)?;
                cur = self.resolve_from(cur, &target, follows)?;
            } else {
                cur = next;
            }
        }
        Ok(cur)
    }
}
