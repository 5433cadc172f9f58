//! The in-core inode: its decoded core and both forks ([`Inode`],
//! [`Fork`]), and what the per-structure read paths (directories,
//! attributes, symlinks) read through ([`ReadCtx`], which a mounted
//! filesystem implements), and decoding a dinode into an [`Inode`]
//! ([`decode`]).
//!
//! Btree-format forks are flattened at load time into the sorted extent
//! list (the bmbt is walked once, every block verified), so readers see
//! one shape.
//!
//! Invariant: extents in a [`Fork`] are sorted, non-overlapping and point
//! inside their device (checked when the inode was loaded).

pub mod decode;

use std::ops::Deref;
use std::sync::Arc;

use crate::bdev::BlockDevice;
use crate::cache::buf::TxGuard;
use crate::cache::ilock::{ILockShared, IoLockGuard};
use crate::error::{Error, Location, Result};
use crate::format::bmbt::Extent;
use crate::format::bufkind::BufKind;
use crate::format::inode::InodeCore;
use crate::format::sb::Superblock;
use crate::geometry::Geometry;
use crate::types::{AgNumber, Daddr, FsBlock};
use crate::types::{FileBlock, FileType, ForkKind, Ino};

/// A fork's contents after decoding.
#[derive(Debug, Clone)]
pub enum Fork {
    /// Device number (XFS encoding, see [`crate::format::inode::decode_rdev`]).
    Dev(u32),
    /// Inline bytes (shortform directory, inline symlink, shortform xattrs).
    Local(Vec<u8>),
    /// Extents or btree format: the full extent list sorted by file offset,
    /// non-overlapping. `btree` says which form it had on disk.
    Extents { list: Vec<Extent>, btree: bool },
}

impl Fork {
    pub fn extents(&self) -> &[Extent] {
        match self {
            Fork::Extents { list, .. } => list,
            _ => &[],
        }
    }

    /// Map fork block `off`: the extent containing it, or the hole up to
    /// the next extent (`None` extent, with the hole's length; u64::MAX
    /// past the last extent).
    pub fn map(&self, off: FileBlock) -> (Option<Extent>, u64) {
        let list = self.extents();
        let idx = list.partition_point(|e| e.end() <= off.0);
        match list.get(idx) {
            Some(e) if e.off.0 <= off.0 => (Some(*e), e.end() - off.0),
            Some(e) => (None, e.off.0 - off.0),
            None => (None, u64::MAX),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Inode {
    pub ino: Ino,
    pub core: InodeCore,
    pub data: Fork,
    /// `None` when the inode has no attribute fork (forkoff 0).
    pub attr: Option<Fork>,
}

impl Inode {
    pub fn file_type(&self) -> Option<FileType> {
        FileType::from_mode(self.core.mode)
    }
    pub fn is_dir(&self) -> bool {
        self.file_type() == Some(FileType::Directory)
    }
    pub fn is_realtime(&self) -> bool {
        self.core.flags & crate::format::inode::DIFLAG_REALTIME != 0
    }

    /// The fork named by `kind`.
    pub fn fork(&self, kind: ForkKind) -> Option<&Fork> {
        match kind {
            ForkKind::Data => Some(&self.data),
            ForkKind::Attr => self.attr.as_ref(),
        }
    }
}

/// An inode's attributes without its forks: what `stat` needs (the core,
/// and a device file's number, which lives in the data fork's place).
#[derive(Debug, Clone)]
pub struct InodeAttrs {
    pub ino: Ino,
    pub core: InodeCore,
    /// The raw device number of a character or block device
    /// ([`crate::format::inode::decode_rdev`]).
    pub rdev: Option<u32>,
}

impl InodeAttrs {
    pub fn file_type(&self) -> Option<FileType> {
        FileType::from_mode(self.core.mode)
    }
    pub fn is_dir(&self) -> bool {
        self.file_type() == Some(FileType::Directory)
    }
    pub fn is_realtime(&self) -> bool {
        self.core.flags & crate::format::inode::DIFLAG_REALTIME != 0
    }
}

impl From<&Inode> for InodeAttrs {
    fn from(ip: &Inode) -> InodeAttrs {
        let rdev = match (ip.file_type(), &ip.data) {
            (Some(FileType::CharDev | FileType::BlockDev), Fork::Dev(raw)) => Some(*raw),
            _ => None,
        };
        InodeAttrs {
            ino: ip.ino,
            core: ip.core.clone(),
            rdev,
        }
    }
}

/// What the read path of a structure needs from a mounted filesystem.
pub trait ReadCtx {
    fn geo(&self) -> &Geometry;
    fn sb(&self) -> &Superblock;
    /// `ip` as of now, with its shared ilock held where reads must take it
    /// (see `fs::read`): a caller's older copy may name blocks a
    /// transaction has since freed or rewritten.
    fn read_locked<'a>(&self, ip: &'a Inode) -> Result<Reading<'a>>;
    /// Inode `ino`, read, verified and decoded (cached where the
    /// filesystem caches). `Err(NotFound)` when the inode btree does not
    /// show it allocated, `Err(Invalid)` for a number outside the
    /// filesystem.
    fn iget(&self, ino: Ino) -> Result<Arc<Inode>>;
    /// Whether reads on this thread take shared ilocks.
    fn reads_take_locks(&self) -> bool;
    /// The data device (on a read-write mount, its committed view).
    fn dev(&self) -> &dyn BlockDevice;
    /// The realtime device, if the mount was given one.
    fn rtdev(&self) -> Option<&dyn BlockDevice>;
    /// Begin a read of `ino`'s file data: fails once the filesystem is
    /// shut down; on a read-write mount, the file's I/O lock taken shared,
    /// which the reader holds until it has read the blocks.
    fn data_read_lock(&self, ino: Ino) -> Result<Option<IoLockGuard>>;
    /// Held while the read path walks AG `agno`'s inode btree (as the
    /// kernel's untrusted inode lookups hold the AGI): on a read-write
    /// mount the AGI buffer's transaction lock, so the walk sees the tree
    /// before or after a transaction, never half of a split; `None` where
    /// nothing changes the tree meanwhile.
    fn agi_read_lock(&self, agno: AgNumber) -> Result<Option<TxGuard>>;

    /// Read a metadata buffer and run its verifier; the buffer is returned
    /// only if the verifier passes.
    fn read_meta(
        &self,
        daddr: Daddr,
        len: usize,
        verify: impl FnOnce(&[u8], Daddr) -> Result<()>,
    ) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        self.dev().read_at(&mut buf, daddr.bytes())?;
        verify(&buf, daddr)?;
        Ok(buf)
    }

    /// [`ReadCtx::read_fork_blocks`], shared where the filesystem caches
    /// the block: a read-write mount hands out the committed bytes of its
    /// cached buffer (no copy) and what they were verified as. The
    /// default copies the block and knows nothing of it.
    fn read_fork_block(
        &self,
        ip: &Inode,
        fork: ForkKind,
        off: FileBlock,
        count: u32,
    ) -> Result<Option<ForkBlock>> {
        Ok(self
            .read_fork_blocks(ip, fork, off, count)?
            .map(|(daddr, bytes)| ForkBlock::copied(daddr, bytes)))
    }

    /// `blk` passed the whole decoder of `kind` (every check the
    /// transaction side runs on one block of that kind): a filesystem that
    /// caches the block may record it, if the block still holds those
    /// bytes, so later reads of it skip the checks (see
    /// `cache::buf::BufState::verified`).
    fn note_verified(&self, _blk: &ForkBlock, _kind: BufKind) {}

    /// Read `count` filesystem blocks of a directory or attribute fork
    /// starting at fork block `off` (one directory/attr block, which may
    /// span several extents). `Ok(None)` if the whole range is a hole; a
    /// range that is partly mapped, or mapped unwritten, is corruption.
    /// Returns the disk address of the first block (what the block's
    /// self-describing `blkno` must say) and the bytes.
    fn read_fork_blocks(
        &self,
        ip: &Inode,
        fork: ForkKind,
        off: FileBlock,
        count: u32,
    ) -> Result<Option<(Daddr, Vec<u8>)>> {
        let at = Location::Ino(ip.ino.0);
        let f = match ip.fork(fork) {
            Some(f @ Fork::Extents { .. }) => f,
            _ => {
                return Err(Error::corrupt(
                    "inode fork",
                    at,
                    "block read from a fork that has no extents",
                ))
            }
        };
        let geo = self.geo();
        let bs = geo.blocksize as usize;
        let mut out = vec![0u8; count as usize * bs];
        let mut first: Option<Daddr> = None;
        let mut holes = 0u32;
        let mut i = 0u32;
        while i < count {
            let fb = FileBlock(off.0 + i as u64);
            let (ext, run) = f.map(fb);
            let n = run.min((count - i) as u64) as u32;
            match ext {
                None => holes += n,
                Some(e) => {
                    if e.unwritten {
                        return Err(Error::corrupt(
                            "inode fork",
                            at,
                            "unwritten extent in a metadata fork",
                        ));
                    }
                    let fsb = FsBlock(e.start + (fb.0 - e.off.0));
                    let daddr = geo.fsb_to_daddr(fsb);
                    first.get_or_insert(daddr);
                    let dst = &mut out[i as usize * bs..(i + n) as usize * bs];
                    self.dev().read_at(dst, daddr.bytes())?;
                }
            }
            i += n;
        }
        match first {
            None => Ok(None),
            Some(_) if holes > 0 => Err(Error::corrupt(
                "inode fork",
                at,
                format!("block {} of the fork is partly a hole", off.0),
            )),
            Some(d) => Ok(Some((d, out))),
        }
    }
}

/// A block of a directory or attribute fork as the read path gets it.
#[derive(Debug, Clone)]
pub struct ForkBlock {
    /// Disk address of its first block (what its `blkno` must say).
    pub daddr: Daddr,
    pub bytes: Arc<Vec<u8>>,
    /// The kind whose whole decoder these exact bytes passed, where the
    /// filesystem keeps track (never for bytes just read from disk).
    pub verified: Option<BufKind>,
}

impl ForkBlock {
    /// Bytes read into a buffer of their own: nothing known of them.
    pub fn copied(daddr: Daddr, bytes: Vec<u8>) -> Self {
        ForkBlock {
            daddr,
            bytes: Arc::new(bytes),
            verified: None,
        }
    }

    /// Whether the bytes passed `kind`'s whole decoder.
    pub fn trusted_as(&self, kind: BufKind) -> bool {
        self.verified == Some(kind)
    }
}

/// The disk address of fork blocks `off .. off + count` when one written
/// extent maps them all (a block split over extents, or a hole, gives
/// None).
pub fn contiguous_daddr(
    geo: &Geometry,
    ip: &Inode,
    fork: ForkKind,
    off: FileBlock,
    count: u32,
) -> Option<Daddr> {
    let f @ Fork::Extents { .. } = ip.fork(fork)? else {
        return None;
    };
    let (Some(e), run) = f.map(off) else {
        return None;
    };
    if e.unwritten || run < count as u64 {
        return None;
    }
    Some(geo.fsb_to_daddr(FsBlock(e.start + (off.0 - e.off.0))))
}

enum Snap<'a> {
    Given(&'a Inode),
    Fresh(Arc<Inode>),
}

/// An inode read under its shared ilock (or the caller's copy where no
/// lock is needed); derefs to the inode. The lock is held until drop.
/// Made by [`ReadCtx::read_locked`].
pub struct Reading<'a> {
    ip: Snap<'a>,
    _ilock: Option<ILockShared>,
}

impl Deref for Reading<'_> {
    type Target = Inode;
    fn deref(&self) -> &Inode {
        match &self.ip {
            Snap::Given(i) => i,
            Snap::Fresh(i) => i,
        }
    }
}

impl<'a> Reading<'a> {
    /// The caller's copy, no lock taken.
    pub fn given(ip: &'a Inode) -> Self {
        Reading {
            ip: Snap::Given(ip),
            _ilock: None,
        }
    }

    /// A copy read under `lock`, held until drop.
    pub fn locked(ip: Arc<Inode>, lock: ILockShared) -> Self {
        Reading {
            ip: Snap::Fresh(ip),
            _ilock: Some(lock),
        }
    }

    /// The inode read under the lock, if one was taken.
    pub fn fresh(&self) -> Option<Arc<Inode>> {
        match &self.ip {
            Snap::Given(_) => None,
            Snap::Fresh(i) => Some(i.clone()),
        }
    }
}
