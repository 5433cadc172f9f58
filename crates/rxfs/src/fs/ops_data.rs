//! Data and attribute operations of a read-write mount: write (with
//! speculative preallocation past EOF, see [`crate::bmap::prealloc`], and
//! its trimming), setattr (including truncate), fsync.
//!
//! Each takes the inode lock (exclusive), allocates a transaction, runs the
//! generic algorithm of [`crate::bmap::data`] on it and commits; on error
//! the transaction is cancelled (its changes were private copies). A write
//! is split into transactions of at most
//! [`crate::bmap::data::WRITE_TX_BLOCKS`] new blocks each, all under one
//! hold of the inode lock; its data reaches the device (through
//! [`Filesystem::dev`], so the read path sees it) before each transaction
//! commits. A write that fails after some transactions committed returns
//! the bytes written so far (a short write), as POSIX allows.

use std::sync::Arc;

use super::Filesystem;
use crate::bmap::data::SetAttr;
use crate::bmap::data::{self, WriteOpts};
use crate::bmap::prealloc::prealloc_blocks;
use crate::bmap::Placement;
use crate::error::{Error, Result};
use crate::inode::Inode;
use crate::types::{FileBlock, Ino};
use crate::xact::{MetaTx, Resv};

/// Log forces one data allocation may make to reuse busy extents.
pub(super) const BUSY_FLUSHES: u32 = 4;

/// Tries of a data allocation that failed with ENOSPC while space came
/// back ([`Filesystem::reclaim_retry`]): two threads allocating what the
/// other frees may each take what the other's wait gave back, but not
/// forever.
pub(super) const RECLAIM_TRIES: u32 = 4;

/// Counters that move when space comes back: frees of unlinked inodes
/// ended, checkpoints whose busy extents were retired.
#[derive(Clone, Copy, Default)]
pub(super) struct SpaceMark {
    frees_ended: u64,
    busy_retired: u64,
}

impl Filesystem {
    /// Write `data` at `off` (see `Filesystem::write_inner`), with
    /// speculative preallocation after appends and a retry after giving
    /// preallocations back on ENOSPC.
    ///
    /// A block-aligned overwrite of written blocks inside EOF takes the
    /// fast path of [`Self::overwrite_if`] (I/O lock shared, no transaction
    /// but a timestamp update per clock tick); every other write holds
    /// the I/O lock exclusive.
    pub fn write(&self, ino: Ino, off: u64, data: &[u8]) -> Result<usize> {
        self.write_stamped(ino, off, data, true)
    }

    /// [`Self::write`]; with `stamp` false, mtime and ctime are left as
    /// they are: for writes from a cache whose owner keeps the times and
    /// sets them itself (the kernel's page cache under
    /// FUSE_WRITEBACK_CACHE: it stamps the times at write(2) and sends them
    /// with SETATTR, maybe before the pages reach us).
    pub fn write_stamped(&self, ino: Ino, off: u64, data: &[u8], stamp: bool) -> Result<usize> {
        if let Some(n) = self.overwrite_if(ino, off, data, stamp, |_| true)? {
            return Ok(n);
        }
        let _io = self.iolock(ino, true);
        let old_size = self.iget(ino)?.core.size;
        let mut n = 0;
        let mut tries = 0;
        loop {
            let mark = self.space_mark();
            match self.write_inner(ino, off + n as u64, &data[n..], stamp) {
                Ok(m) => {
                    n += m;
                    if n == data.len() || !self.reclaim_retry(ino, mark, &mut tries)? {
                        break;
                    }
                }
                Err(Error::NoSpace) if self.reclaim_retry(ino, mark, &mut tries)? => {}
                // A short write: what is stored stays, and the error comes
                // with the next write (as write(2) reports it).
                Err(_) if n > 0 => break,
                Err(e) => return Err(e),
            }
        }
        let end = off + n as u64;
        // Not after the first write of an empty file: it is likely its
        // only one (the kernel skips files under its minimum preallocation
        // for the same reason; without delayed allocation rxfs starts at
        // the second write, so interleaved appends still get their runs).
        if n > 0 && end > old_size && old_size > 0 {
            self.prealloc_eof(ino, end);
        }
        Ok(n)
    }

    /// Write `data` at `off` without speculative preallocation, for
    /// writers that lay a file out knowing its final shape (the populate
    /// engine reserves each data range itself). ENOSPC is retried after
    /// space is reclaimed, as in [`Filesystem::write`].
    pub fn write_exact(&self, ino: Ino, off: u64, data: &[u8]) -> Result<usize> {
        let _io = self.iolock(ino, true);
        self.retry_at_enospc(ino, &mut || self.write_inner(ino, off, data, true))
    }

    /// Run `attempt`, a data allocation of `held` (whose I/O lock the
    /// caller holds exclusive; no transaction), again while it fails
    /// with ENOSPC and [`Self::reclaim_retry`] says space came back.
    /// `attempt` must be idempotent: what a failed try allocated stays,
    /// and the next one fills the rest.
    pub(super) fn retry_at_enospc<T>(
        &self,
        held: Ino,
        attempt: &mut dyn FnMut() -> Result<T>,
    ) -> Result<T> {
        let mut tries = 0;
        loop {
            let mark = self.space_mark();
            match attempt() {
                Err(Error::NoSpace) if self.reclaim_retry(held, mark, &mut tries)? => {}
                r => return r,
            }
        }
    }

    /// What may free space, noted before an allocation: see
    /// [`Self::reclaim_retry`].
    pub(super) fn space_mark(&self) -> SpaceMark {
        match self.rw() {
            Some(rw) => SpaceMark {
                frees_ended: rw.open.frees_ended(),
                busy_retired: rw.cil.busy_stable_seq(),
            },
            None => SpaceMark::default(),
        }
    }

    /// After an allocation that started at `mark` ran out of space:
    /// whether to try it again, at most [`RECLAIM_TRIES`] times (`tries`
    /// counts them): true if [`Self::reclaim_space`] gave something back,
    /// or if space came back since the mark (a free ended, busy extents
    /// became reusable) before this call could see it.
    pub(super) fn reclaim_retry(
        &self,
        held: Ino,
        mark: SpaceMark,
        tries: &mut u32,
    ) -> Result<bool> {
        if *tries >= RECLAIM_TRIES {
            return Ok(false);
        }
        *tries += 1;
        let reclaimed = self.reclaim_space(held, mark.frees_ended)?;
        Ok(reclaimed || self.space_mark().busy_retired > mark.busy_retired)
    }

    /// After an append that made the file `size` bytes: preallocate past
    /// EOF unless something is mapped there already. Best effort: no
    /// space is no error. The caller holds the I/O lock exclusive.
    fn prealloc_eof(&self, ino: Ino, size: u64) {
        let Some(rw) = self.rw() else { return };
        let bs = self.geo().blocksize as u64;
        let Ok(ip) = self.iget(ino) else { return };
        if ip.core.size != size || ip.file_type() != Some(crate::types::FileType::Regular) {
            return;
        }
        if ip.is_realtime() {
            // As the kernel: realtime files allocate whole rt extents
            // and get no speculative preallocation.
            return;
        }
        // A file a user preallocated (DIFLAG_PREALLOC) is laid out by them:
        // none of ours, which could be trimmed with theirs.
        if ip.core.flags & crate::format::inode::DIFLAG_PREALLOC != 0 {
            return;
        }
        let eof = size.div_ceil(bs);
        if ip.data.map(FileBlock(eof)).0.is_some() {
            return;
        }
        let free = rw.counters().fdblocks.max(0) as u64;
        let Some(want) = prealloc_blocks(eof, bs, self.options().allocsize, free) else {
            return;
        };
        let keep_size = crate::fs::ops_falloc::FALLOC_FL_KEEP_SIZE;
        if self
            .fallocate_locked(ino, keep_size, eof * bs, want * bs, None)
            .is_ok()
        {
            rw.prealloc.insert(ino);
        }
    }

    /// Give back the blocks past EOF of `ino` (its unused preallocation,
    /// or any other blocks mapped past EOF).
    pub fn trim_eof(&self, ino: Ino) -> Result<()> {
        let _io = self.iolock(ino, true);
        self.trim_eof_locked(ino)
    }

    /// [`Self::trim_eof`] for a caller holding the I/O lock exclusive.
    fn trim_eof_locked(&self, ino: Ino) -> Result<()> {
        let Some(rw) = self.rw() else { return Ok(()) };
        if !rw.prealloc.remove(ino) {
            return Ok(());
        }
        let _lock = self.ilock(ino)?;
        loop {
            let mut tx = self.trans_alloc(Resv::Truncate)?;
            let r = tx.ijoin(ino).and_then(|ip| {
                // The inode may have been freed, and its number reused for
                // something else, since it preallocated.
                use crate::format::dinode_edit as di;
                let d = tx.inode(ip);
                if di::mode(d) as u32 & di::S_IFMT != di::S_IFREG {
                    return Ok(false);
                }
                crate::bmap::data::trim_eof_step(&mut tx, ip, false)
            });
            match r {
                Ok(more) => {
                    tx.commit()?;
                    if !more {
                        return Ok(());
                    }
                }
                Err(e) => {
                    tx.cancel();
                    return Err(e);
                }
            }
        }
    }

    /// At ENOSPC, before a data allocation is retried (as the kernel
    /// flushes its block and inode garbage collection and the busy
    /// extents): every file's speculative preallocation is given back,
    /// the frees of unlinked inodes pending now are waited for (running
    /// ones, and those of inodes unlinked very recently: through FUSE the
    /// last reference of a removed file goes with the kernel's FORGET,
    /// which another thread may be serving while this request runs,
    /// fstests generic/371). True if anything may have been freed, a free
    /// that ended after the mark `frees_since` included. The caller holds
    /// `held`'s I/O lock exclusive and no transaction.
    pub(super) fn reclaim_space(&self, held: Ino, frees_since: u64) -> Result<bool> {
        let Some(rw) = self.rw() else {
            return Ok(false);
        };
        let trimmed = self.trim_all_eof(Some(held))?;
        let waited = rw.open.wait_for_frees(held, frees_since);
        // Freed blocks are reusable once their checkpoint is stable. The
        // allocator forces the log when it finds only busy space, but a
        // multi-extent step that first took the little free space of a
        // high AG may not go back to lower ones (the AGF lock order).
        let busy = self.flush_busy()?;
        Ok(trimmed || waited || busy)
    }

    /// Make every freed extent reusable (force the log past the frees);
    /// true if one was busy. For an allocation that failed where only
    /// busy space was left below the AGs its transaction could still
    /// use: the next try, in a fresh transaction, finds them free.
    pub(super) fn flush_busy(&self) -> Result<bool> {
        let Some(rw) = self.rw() else {
            return Ok(false);
        };
        let busy = rw.cil.has_busy();
        if busy {
            rw.cil.force_busy()?;
        }
        Ok(busy)
    }

    /// Trim every file's preallocation; true if there was any. `held`:
    /// the caller holds that file's I/O lock exclusive. Other files busy
    /// with I/O are skipped (their I/O lock tried, not awaited: two
    /// writers at ENOSPC must not wait for each other), as the kernel's
    /// EOF-blocks scan skips them.
    pub(super) fn trim_all_eof(&self, held: Option<Ino>) -> Result<bool> {
        let Some(rw) = self.rw() else {
            return Ok(false);
        };
        let all = rw.prealloc.all();
        for &i in &all {
            if held == Some(i) {
                self.trim_eof_locked(i)?;
            } else if let Some(_io) = rw.inodes.locks.try_iolock_excl(i) {
                self.trim_eof_locked(i)?;
            }
        }
        Ok(!all.is_empty())
    }

    /// Write `data` at byte `off` of a regular file; returns bytes written.
    pub(super) fn write_inner(
        &self,
        ino: Ino,
        off: u64,
        data: &[u8],
        stamp: bool,
    ) -> Result<usize> {
        let _lock = self.ilock(ino)?;
        // The realtime flag changes only under the inode lock we hold.
        let rt = self.iget(ino)?.is_realtime();
        let dev = self.file_dev(rt)?;
        let mut done = 0usize;
        let mut opts = WriteOpts::now();
        let mut busy_flushes = 0;
        while done < data.len() {
            let pos = off + done as u64;
            // Data never takes the blocks statfs does not count as free
            // (left to metadata: AGFL refills, bmbt splits); realtime
            // data comes from the realtime device, which says NoSpace
            // itself.
            let budget = if rt {
                data::WRITE_TX_BLOCKS
            } else {
                self.data_alloc_budget()?
            };
            let mut tx = self.trans_alloc(Resv::Write)?;
            opts.now = stamp.then(data::now);
            let step = WriteOpts {
                max_blocks: opts.max_blocks.min(budget),
                ..opts
            };
            let r = tx
                .ijoin(ino)
                .and_then(|ip| data::write_step(&mut tx, dev, ip, ino, pos, &data[done..], step));
            let n = match r {
                Ok(n) => n,
                Err(e) => {
                    tx.cancel();
                    if matches!(e, Error::NoSpace) && budget > 0 {
                        // Anywhere failed where busy space was left: once
                        // more with it reusable (see `flush_busy`).
                        if opts.place == Placement::Anywhere
                            && busy_flushes < BUSY_FLUSHES
                            && self.flush_busy()?
                        {
                            busy_flushes += 1;
                            continue;
                        }
                        // Near the file only its AG and higher ones were
                        // searched: once more from AG 0, in a fresh
                        // transaction; then ask for less, down to one block.
                        if opts.place == Placement::Near {
                            opts.place = Placement::Anywhere;
                            continue;
                        }
                        if opts.max_blocks > 1 {
                            opts.max_blocks /= 2;
                            continue;
                        }
                    }
                    return if done > 0 { Ok(done) } else { Err(e) };
                }
            };
            opts.place = Placement::Near;
            match tx.commit() {
                Ok(_) => done += n,
                Err(e) if done > 0 => {
                    tracing::warn!("write of inode {} cut short: {e}", ino.0);
                    return Ok(done);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }

    /// Change attributes; returns the inode as changed.
    pub fn setattr(&self, ino: Ino, attr: &SetAttr) -> Result<Arc<Inode>> {
        {
            // A size change remaps blocks: no read or write meanwhile.
            let _io = attr.size.and_then(|_| self.iolock(ino, true));
            let _lock = self.ilock(ino)?;
            let resv = if attr.size.is_some() {
                Resv::Truncate
            } else if attr.mode.is_some() {
                // chmod rewrites the access ACL's bits too.
                Resv::AttrSet
            } else {
                Resv::SetAttr
            };
            let dev = self.file_dev(self.iget(ino)?.is_realtime())?;
            let mut tx = self.trans_alloc(resv)?;
            let now = data::now();
            let r = tx.ijoin(ino).and_then(|ip| {
                data::setattr(&mut tx, dev, ip, attr, now)?;
                if attr.mode.is_some() {
                    crate::attr::acl::chmod(&mut tx, ip, now)?;
                }
                Ok(())
            });
            match r {
                Ok(()) => {
                    tx.commit()?;
                }
                Err(e) => {
                    tx.cancel();
                    return Err(e);
                }
            }
            // A truncate unmaps a bounded number of extents per
            // transaction: the rest past EOF, a batch each.
            let mut low_first = false;
            while attr.size.is_some() {
                let mut tx = self.trans_alloc(Resv::Truncate)?;
                let r = tx
                    .ijoin(ino)
                    .and_then(|ip| data::trim_eof_step(&mut tx, ip, low_first));
                match r {
                    Ok(more) => {
                        tx.commit()?;
                        low_first = false;
                        if !more {
                            break;
                        }
                    }
                    // A bmbt split found no block near the tree: once
                    // more from AG 0 in a fresh transaction.
                    Err(Error::NoSpace) if !low_first => {
                        tx.cancel();
                        low_first = true;
                    }
                    Err(e) => {
                        tx.cancel();
                        return Err(e);
                    }
                }
            }
        }
        self.iget_known(ino)
    }

    /// Make the file's data (and, unless `datasync` and only timestamps
    /// changed, its metadata) durable, as the kernel's `xfs_file_fsync`
    /// does with an internal log: the log is forced up to the inode's last
    /// committed change (its mappings and size; with `datasync`, its last
    /// change of more than timestamps). That log write flushes the device
    /// cache before its commit record, after every data write that came
    /// before the change committed, so it makes the data durable too.
    /// Where no force was needed (the change is stable already), or data
    /// was overwritten in place since the inode's last commit, the device
    /// cache is flushed instead (as well): `fdatasync` after pure
    /// overwrites costs one flush and no log write.
    pub fn fsync(&self, ino: Ino, datasync: bool) -> Result<()> {
        let Some(rw) = self.rw() else {
            // Nothing can be dirty on a read-only mount.
            return Ok(());
        };
        let overwritten = rw.inodes.get(ino).is_some_and(|ip| {
            ip.overwritten
                .swap(false, std::sync::atomic::Ordering::AcqRel)
        });
        let forced = self.log_force_inode(ino, datasync)?;
        if overwritten || !forced {
            // Realtime data is on the realtime device (a log force
            // flushes it before its commit record).
            if self.iget(ino).is_ok_and(|ip| ip.is_realtime()) {
                self.flush_rtdev()?;
            }
            self.dev().flush()?;
        }
        Ok(())
    }
}
