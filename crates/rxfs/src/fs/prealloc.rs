//! Speculative preallocation past EOF: how rxfs keeps files written in
//! order in few extents when several are appended at once (the job the
//! kernel's delayed allocation and EOF preallocation do).
//!
//! rxfs allocates at write time (there is no page cache to delay into),
//! so an appending write to a non-empty file that finds nothing mapped
//! past the new EOF
//! reserves the next blocks with an unwritten extent (fallocate
//! KEEP_SIZE): as many blocks as the file already has, from
//! [`PREALLOC_MIN_BLOCKS`] up to [`PREALLOC_MAX_BLOCKS`]. Later appends
//! write into it (converting unwritten to written, which merges with the
//! written extent before), so a file grows by doubling runs however its
//! appends interleave with others'.
//!
//! Unused preallocation is given back ([`Filesystem::trim_eof`]) when the
//! FUSE file is released, at the last open reference, at unmount, and
//! from every file at once when a write meets ENOSPC (then the write is
//! tried again), as the kernel's EOF-blocks scan does. A crash leaves it
//! as unwritten blocks past EOF, which the kernel and `xfs_repair` accept.
//!
//! The `allocsize=SIZE` mount option fixes the size instead, and
//! `allocsize=0` turns speculative preallocation off.
//!
//! Invariant: preallocation never changes what a file reads as (size and
//! bytes): its extents lie past EOF and are unwritten.

use std::collections::HashSet;

use parking_lot::Mutex;

use super::Filesystem;
use crate::error::{Error, Result};
use crate::types::{FileBlock, Ino};
use crate::xact::{MetaTx, Resv};

pub const PREALLOC_MIN_BLOCKS: u64 = 16;
pub const PREALLOC_MAX_BLOCKS: u64 = 4096;

/// Inodes that may hold preallocation past EOF.
#[derive(Default)]
pub struct Prealloc {
    inodes: Mutex<HashSet<u64>>,
}

impl Filesystem {
    /// Write `data` at `off` (see [`Filesystem::write_inner`]), with
    /// speculative preallocation after appends and a retry after giving
    /// preallocations back on ENOSPC.
    ///
    /// A block-aligned overwrite of written blocks inside EOF takes the
    /// fast path of [`Self::overwrite`] (I/O lock shared, no transaction
    /// but a timestamp update per clock tick); every other write holds
    /// the I/O lock exclusive.
    pub fn write(&self, ino: Ino, off: u64, data: &[u8]) -> Result<usize> {
        if let Some(n) = self.overwrite(ino, off, data)? {
            return Ok(n);
        }
        let _io = self.iolock(ino, true);
        let old_size = self.iget(ino)?.core.size;
        let n = match self.write_inner(ino, off, data) {
            Err(Error::NoSpace) if self.trim_all_eof(Some(ino))? => {
                self.write_inner(ino, off, data)?
            }
            Ok(n) if n < data.len() && self.trim_all_eof(Some(ino))? => {
                n + self
                    .write_inner(ino, off + n as u64, &data[n..])
                    .unwrap_or(0)
            }
            r => r?,
        };
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
    /// engine reserves each data range itself). ENOSPC is retried once
    /// after other files' preallocation is given back, as in
    /// [`Filesystem::write`].
    pub fn write_exact(&self, ino: Ino, off: u64, data: &[u8]) -> Result<usize> {
        let _io = self.iolock(ino, true);
        match self.write_inner(ino, off, data) {
            Err(Error::NoSpace) if self.trim_all_eof(Some(ino))? => {
                self.write_inner(ino, off, data)
            }
            r => r,
        }
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
        let eof = size.div_ceil(bs);
        if ip.data.map(FileBlock(eof)).0.is_some() {
            return;
        }
        let want = match self.options().allocsize {
            Some(0) => return,
            Some(bytes) => bytes.div_ceil(bs),
            None => eof.clamp(PREALLOC_MIN_BLOCKS, PREALLOC_MAX_BLOCKS),
        };
        // Only where space is plentiful.
        let free = rw.counters().fdblocks.max(0) as u64;
        if free < 8 * want + 1024 {
            return;
        }
        let keep_size = crate::fs::ops_falloc::FALLOC_FL_KEEP_SIZE;
        if self
            .fallocate_locked(ino, keep_size, eof * bs, want * bs, None)
            .is_ok()
        {
            rw.prealloc.inodes.lock().insert(ino.0);
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
        if !rw.prealloc.inodes.lock().remove(&ino.0) {
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

    /// Trim every file's preallocation; true if there was any. `held`:
    /// the caller holds that file's I/O lock exclusive. Other files busy
    /// with I/O are skipped (their I/O lock tried, not awaited: two
    /// writers at ENOSPC must not wait for each other), as the kernel's
    /// EOF-blocks scan skips them.
    pub(super) fn trim_all_eof(&self, held: Option<Ino>) -> Result<bool> {
        let Some(rw) = self.rw() else {
            return Ok(false);
        };
        let all: Vec<u64> = rw.prealloc.inodes.lock().iter().copied().collect();
        for &i in &all {
            if held == Some(Ino(i)) {
                self.trim_eof_locked(Ino(i))?;
            } else if let Some(_io) = rw.inodes.locks.try_iolock_excl(Ino(i)) {
                self.trim_eof_locked(Ino(i))?;
            }
        }
        Ok(!all.is_empty())
    }
}
