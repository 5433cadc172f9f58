//! fallocate(2) modes, SEEK_DATA/SEEK_HOLE and the write-back of delayed
//! (buffered) writes on a read-write mount.
//!
//! Each mode is a loop of bounded steps ([`crate::bmap::falloc`]), one
//! transaction ([`Resv::Fallocate`]) each, under the inode lock:
//! - 0 / KEEP_SIZE: holes in the block range become unwritten extents
//!   (read as zeros; a write converts them); without KEEP_SIZE the size
//!   grows to `off + len`. `NoSpace` is retried once from AG 0, then
//!   returned: what was allocated stays (unwritten, harmless), the size
//!   is unchanged.
//! - PUNCH_HOLE|KEEP_SIZE: written bytes of partial edge blocks are
//!   zeroed on the device, whole blocks are unmapped and freed.
//! - ZERO_RANGE: a punch, then a preallocation of the covering blocks (as
//!   XFS does: the range reads as zeros, whole blocks become unwritten).
//! - COLLAPSE_RANGE / INSERT_RANGE: block-aligned (else `Invalid`); the
//!   range is punched and the later mappings shift left, or the size
//!   grows first and the later mappings shift right, highest first.
//!
//! SEEK_DATA/SEEK_HOLE: rxfs has no page cache (writes go to the device at
//! once), so unwritten extents are always holes, as XFS reports them when
//! no dirty pages cover them.

use super::Filesystem;
use crate::bmap::data::{self, zero_written};
use crate::bmap::falloc::{prealloc_step, shift_left_step, shift_right_step, unmap_step};
use crate::bmap::{ExtentMap, Placement};
use crate::cred::Cred;
use crate::error::{Error, Result};
use crate::format::dinode_edit as di;
use crate::format::inode::DIFLAG_PREALLOC;
use crate::format::xflags::{flags_allow, Change};
use crate::types::{FileType, Ino};
use crate::xact::{InodeId, MetaTx, Resv};

pub const FALLOC_FL_KEEP_SIZE: i32 = 0x01;
pub const FALLOC_FL_PUNCH_HOLE: i32 = 0x02;
pub const FALLOC_FL_COLLAPSE_RANGE: i32 = 0x08;
pub const FALLOC_FL_ZERO_RANGE: i32 = 0x10;
pub const FALLOC_FL_INSERT_RANGE: i32 = 0x20;

/// The kernel's allocation set-aside per AG (AGFL refills and a bmbt
/// split), which statfs does not count as free.
const SET_ASIDE_PER_AG: u64 = 8;
/// Blocks per AG that data allocations leave to metadata.
pub const DATA_RESERVE_PER_AG: u64 = 16;
/// Blocks data allocations leave to metadata on top of the per-AG ones.
pub const DATA_RESERVE_MIN: u64 = 16;

/// Largest file size (bytes).
const MAX_FILE_SIZE: u64 = i64::MAX as u64;

impl Filesystem {
    /// fallocate(2): `mode` holds Linux `FALLOC_FL_*` bits (0 = allocate
    /// and extend; KEEP_SIZE, PUNCH_HOLE|KEEP_SIZE, ZERO_RANGE,
    /// COLLAPSE_RANGE, INSERT_RANGE).
    ///
    /// Holds the file's I/O lock exclusive (no read or write runs while
    /// its mapping changes) and its ilock exclusive. Made by the library
    /// itself ([`Cred::root`]): set-id bits stay.
    pub fn fallocate(&self, ino: Ino, mode: i32, off: u64, len: u64) -> Result<()> {
        self.fallocate_by(ino, mode, off, len, &Cred::root())
    }

    /// [`Self::fallocate`] made by `who`: as XFS does for every mode, the
    /// set-id bits [`Cred::privs_to_drop`] names are cleared (in the
    /// transaction that sets the times).
    pub fn fallocate_by(&self, ino: Ino, mode: i32, off: u64, len: u64, who: &Cred) -> Result<()> {
        let _io = self.iolock(ino, true);
        // The allocating modes are retried after the space held for a
        // while (preallocation, frees to come, busy extents) is reclaimed:
        // what was allocated stays and the retry fills the remaining holes
        // (idempotent, unlike a shift).
        if matches!(mode & !FALLOC_FL_KEEP_SIZE, 0 | FALLOC_FL_ZERO_RANGE) {
            self.retry_at_enospc(ino, &mut || {
                self.fallocate_locked(ino, mode, off, len, Some(who))
            })
        } else {
            self.fallocate_locked(ino, mode, off, len, Some(who))
        }
    }

    /// [`Self::fallocate_by`] for a caller holding the I/O lock exclusive;
    /// `who` None: a change of the library's own (speculative
    /// preallocation), which drops nothing.
    pub(super) fn fallocate_locked(
        &self,
        ino: Ino,
        mode: i32,
        off: u64,
        len: u64,
        who: Option<&Cred>,
    ) -> Result<()> {
        const KNOWN: i32 = FALLOC_FL_KEEP_SIZE
            | FALLOC_FL_PUNCH_HOLE
            | FALLOC_FL_COLLAPSE_RANGE
            | FALLOC_FL_ZERO_RANGE
            | FALLOC_FL_INSERT_RANGE;
        if mode & !KNOWN != 0 {
            return Err(Error::NotSupported(format!("fallocate mode {mode:#x}")));
        }
        if len == 0 {
            return Err(Error::Invalid("fallocate of 0 bytes".into()));
        }
        let end = off
            .checked_add(len)
            .filter(|e| *e <= MAX_FILE_SIZE)
            .ok_or_else(|| Error::Invalid("fallocate past the largest file size".into()))?;
        let keep = mode & FALLOC_FL_KEEP_SIZE != 0;
        let kind = mode & !FALLOC_FL_KEEP_SIZE;
        let _lock = self.ilock(ino)?;
        let ip = self.iget(ino)?;
        if who.is_some() {
            // Immutable: no mode; append-only: allocation only.
            let change = match kind {
                0 => Change::Append,
                _ => Change::Modify,
            };
            flags_allow(ip.core.flags, change)?;
        }
        match ip.file_type() {
            Some(FileType::Regular) => {}
            Some(FileType::Directory) => return Err(Error::IsDir),
            _ => return Err(Error::Invalid("fallocate of a non-regular file".into())),
        }
        let size = ip.core.size;
        let bs = self.geo().blocksize as u64;
        // A realtime file shifts whole rt extents only (as the kernel's
        // xfs_is_falloc_aligned).
        let shift_unit = if ip.is_realtime() {
            bs * self.sb().rextsize.max(1) as u64
        } else {
            bs
        };
        // A user's preallocation is theirs to keep: the file leaves the
        // speculative-preallocation set (whose blocks past EOF are given
        // back at close and at ENOSPC) and gets DIFLAG_PREALLOC (see
        // `falloc_finish`), as XFS marks it and then never trims it.
        let user_alloc = who.is_some() && matches!(kind, 0 | FALLOC_FL_ZERO_RANGE);
        if user_alloc {
            if let Some(rw) = self.rw() {
                rw.prealloc.remove(ino);
            }
        }
        match kind {
            0 => {
                self.falloc_prealloc(ino, off / bs, end.div_ceil(bs))?;
                self.falloc_finish(ino, (!keep && end > size).then_some(end), who, user_alloc)
            }
            FALLOC_FL_PUNCH_HOLE if keep => {
                self.falloc_punch(ino, off, end)?;
                self.falloc_finish(ino, None, who, false)
            }
            FALLOC_FL_PUNCH_HOLE => Err(Error::NotSupported("PUNCH_HOLE without KEEP_SIZE".into())),
            FALLOC_FL_ZERO_RANGE => {
                self.falloc_punch(ino, off, end)?;
                self.falloc_prealloc(ino, off / bs, end.div_ceil(bs))?;
                self.falloc_finish(ino, (!keep && end > size).then_some(end), who, user_alloc)
            }
            FALLOC_FL_COLLAPSE_RANGE if !keep => {
                if !off.is_multiple_of(shift_unit) || !len.is_multiple_of(shift_unit) {
                    return Err(Error::Invalid("collapse range not block aligned".into()));
                }
                if end >= size {
                    return Err(Error::Invalid("collapse range reaches EOF".into()));
                }
                let (fb, n) = (off / bs, len / bs);
                self.falloc_unmap(ino, fb, fb + n)?;
                let mut from = Some(fb + n);
                while let Some(f) = from {
                    from = self.falloc_tx(ino, |tx, ip| shift_left_step(tx, ip, f, n))?;
                }
                self.falloc_finish(ino, Some(size - len), who, false)
            }
            FALLOC_FL_INSERT_RANGE if !keep => {
                if !off.is_multiple_of(shift_unit) || !len.is_multiple_of(shift_unit) {
                    return Err(Error::Invalid("insert range not block aligned".into()));
                }
                if off >= size {
                    return Err(Error::Invalid("insert range at or past EOF".into()));
                }
                if size.checked_add(len).is_none_or(|s| s > MAX_FILE_SIZE) {
                    return Err(Error::Invalid("insert range: file too large".into()));
                }
                // Size first: a crash mid-shift leaves no mapping past EOF.
                self.falloc_finish(ino, Some(size + len), who, false)?;
                let (fb, n) = (off / bs, len / bs);
                let mut upto = Some(u64::MAX);
                while let Some(u) = upto {
                    upto = self.falloc_tx(ino, |tx, ip| shift_right_step(tx, ip, fb, u, n))?;
                }
                Ok(())
            }
            _ => Err(Error::Invalid(format!("fallocate mode {mode:#x}"))),
        }
    }

    /// Run one step in its own transaction; commit on success.
    fn falloc_tx<T>(
        &self,
        ino: Ino,
        f: impl FnOnce(&mut dyn MetaTx, InodeId) -> Result<T>,
    ) -> Result<T> {
        let mut tx = self.trans_alloc(Resv::Fallocate)?;
        match tx.ijoin(ino).and_then(|ip| f(&mut tx, ip)) {
            Ok(v) => {
                tx.commit()?;
                Ok(v)
            }
            Err(e) => {
                tx.cancel();
                Err(e)
            }
        }
    }

    /// Unwritten blocks for every hole of file blocks `[fb0, fb1)`.
    fn falloc_prealloc(&self, ino: Ino, fb0: u64, fb1: u64) -> Result<()> {
        let mut pos = fb0;
        let mut place = Placement::Near;
        let mut busy_flushes = 0;
        let rt = self.iget(ino)?.is_realtime();
        while pos < fb1 {
            let budget = if rt {
                crate::bmap::falloc::FALLOC_TX_BLOCKS
            } else {
                self.data_alloc_budget()?
            };
            let step =
                |tx: &mut dyn MetaTx, ip| prealloc_step(tx, ip, ino, (pos, fb1), place, budget);
            match self.falloc_tx(ino, step) {
                Ok(p) => {
                    pos = p;
                    place = Placement::Near;
                }
                Err(Error::NoSpace) if place == Placement::Near && budget > 0 => {
                    place = Placement::Anywhere
                }
                // See `Filesystem::flush_busy`.
                Err(Error::NoSpace)
                    if budget > 0
                        && busy_flushes < super::ops_data::BUSY_FLUSHES
                        && self.flush_busy()? =>
                {
                    busy_flushes += 1;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Most blocks data allocations may take now: the free blocks statfs
    /// reports (which leave the per-AG set-aside, mostly the AGFLs, to the
    /// allocator) minus a small reserve for metadata, [`DATA_RESERVE_PER_AG`]
    /// per AG plus [`DATA_RESERVE_MIN`], so that unmapping (punch, truncate)
    /// on a full filesystem can still split a bmbt leaf (the kernel keeps a
    /// reserve pool for the same purpose).
    pub fn data_alloc_budget(&self) -> Result<u64> {
        let Some(rw) = self.rw() else {
            return Err(Error::ReadOnly("mounted read-only".into()));
        };
        // The in-core free block counter (exact at every commit), less
        // what statfs never counts as free (the kernel's per-AG set-aside)
        // and our reserve. Free-space btree blocks count as free in the
        // counter: the reserve absorbs them.
        let free = rw.counters().fdblocks.max(0) as u64;
        let agcount = self.geo().agcount as u64;
        let held = agcount * (SET_ASIDE_PER_AG + DATA_RESERVE_PER_AG) + DATA_RESERVE_MIN;
        Ok(free.saturating_sub(held))
    }

    /// Unmap file blocks `[fb0, fb1)`.
    fn falloc_unmap(&self, ino: Ino, fb0: u64, fb1: u64) -> Result<()> {
        let mut pos = fb0;
        let mut low_first = false;
        while pos < fb1 {
            match self.falloc_tx(ino, |tx, ip| unmap_step(tx, ip, pos, fb1, low_first)) {
                Ok(p) => {
                    pos = p;
                    low_first = false;
                }
                // A bmbt split found no block near the tree: once more
                // from AG 0 in a fresh transaction.
                Err(Error::NoSpace) if !low_first => low_first = true,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Zero bytes `[off, end)`: written bytes of the partial edge blocks on
    /// the device, whole blocks unmapped.
    fn falloc_punch(&self, ino: Ino, off: u64, end: u64) -> Result<()> {
        let bs = self.geo().blocksize as u64;
        let rt = self.iget(ino)?.is_realtime();
        // The unit that is unmapped: a block, or a whole rt extent (the
        // partial rt extents at the ends are zeroed instead, as the
        // kernel does).
        let ub = if rt {
            bs * self.sb().rextsize.max(1) as u64
        } else {
            bs
        };
        let (e0, e1) = (off.div_ceil(ub) * ub, end / ub * ub);
        let (fb0, fb1) = (e0 / bs, e1 / bs);
        let dev = self.file_dev(rt)?;
        self.falloc_tx(ino, |tx, ip| {
            let map = crate::bmap::falloc::data_map(tx, ip)?;
            if e0 > e1 {
                // Inside one unit.
                zero_written(&*tx, ip, dev, &map, off, end)?;
            } else {
                zero_written(&*tx, ip, dev, &map, off, e0)?;
                zero_written(&*tx, ip, dev, &map, e1, end)?;
            }
            Ok(())
        })?;
        if fb0 < fb1 {
            self.falloc_unmap(ino, fb0, fb1)?;
        }
        Ok(())
    }

    /// Times (mtime = ctime = now), change count, and the size if given
    /// (growth zeroes written blocks between the old and new EOF). The
    /// library's own preallocation past EOF (`who` None, no size) is not a
    /// change of the file: nothing, as XFS's speculative preallocation
    /// leaves the times alone (stamping them here put times on disk later
    /// than those the kernel's write-back cache had shown). `allocated`: a
    /// user's allocating mode, which sets DIFLAG_PREALLOC (sticky, as in
    /// XFS: a write, truncate or punch leaves it).
    fn falloc_finish(
        &self,
        ino: Ino,
        size: Option<u64>,
        who: Option<&Cred>,
        allocated: bool,
    ) -> Result<()> {
        if who.is_none() && size.is_none() {
            return Ok(());
        }
        let dev = self.file_dev(self.iget(ino)?.is_realtime())?;
        self.falloc_tx(ino, |tx, ip| {
            if let Some(who) = who {
                let d = tx.inode_mut(ip);
                let mode = di::mode(d) as u32;
                let drop = who.privs_to_drop(mode, di::gid(d));
                if drop != 0 {
                    di::set_mode(d, (mode & !drop) as u16);
                }
            }
            if allocated {
                let d = tx.inode_mut(ip);
                di::set_flags(d, di::flags(d) | DIFLAG_PREALLOC);
            }
            if let Some(s) = size {
                if s > di::size(tx.inode(ip)) {
                    data::set_file_size(tx, dev, ip, s)?;
                } else {
                    di::set_size(tx.inode_mut(ip), s);
                }
            }
            let now = data::now();
            crate::bmap::set_times(tx, ip, None, Some(now), Some(now));
            di::bump_changecount(tx.inode_mut(ip), 1);
            Ok(())
        })
    }

    /// lseek SEEK_DATA: the first byte at or after `off` that is data
    /// (unwritten extents count as holes, as XFS reports them); `NoData`
    /// style error (ENXIO) at or past EOF.
    pub fn seek_data(&self, ino: Ino, off: u64) -> Result<u64> {
        let (size, list) = self.seek_map(ino)?;
        if off >= size {
            return Err(Error::NoSuchOffset);
        }
        let bs = self.geo().blocksize as u64;
        let fb = off / bs;
        let i = list.exts.partition_point(|e| e.end() <= fb);
        for e in &list.exts[i..] {
            if e.unwritten {
                continue;
            }
            let at = off.max(e.off.0 * bs);
            return if at < size {
                Ok(at)
            } else {
                Err(Error::NoSuchOffset)
            };
        }
        Err(Error::NoSuchOffset)
    }

    /// lseek SEEK_HOLE: the first hole at or after `off` (EOF counts as a
    /// hole); ENXIO past EOF.
    pub fn seek_hole(&self, ino: Ino, off: u64) -> Result<u64> {
        let (size, list) = self.seek_map(ino)?;
        if off >= size {
            return Err(Error::NoSuchOffset);
        }
        let bs = self.geo().blocksize as u64;
        let mut pos = off / bs;
        let i = list.exts.partition_point(|e| e.end() <= pos);
        for e in &list.exts[i..] {
            if e.unwritten || e.off.0 > pos {
                break;
            }
            pos = e.end();
        }
        Ok(size.min((pos * bs).max(off)))
    }

    fn seek_map(&self, ino: Ino) -> Result<(u64, ExtentMap)> {
        let ip = self.iget(ino)?;
        match ip.file_type() {
            Some(FileType::Regular) => {}
            Some(FileType::Directory) => return Err(Error::IsDir),
            _ => return Err(Error::Invalid("seek in a non-regular file".into())),
        }
        let list = ip.data.extents().to_vec();
        Ok((ip.core.size, ExtentMap::new(list, self.geo().agblklog)))
    }

    /// Write back the delayed (buffered, not yet allocated) data of `ino`:
    /// allocate, write, commit. Called by fsync, FUSE flush/release, sync
    /// and unmount.
    pub fn flush_data(&self, ino: Ino) -> Result<()> {
        let _ = ino;
        Ok(())
    }
}
