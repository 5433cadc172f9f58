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
//! Unused preallocation is given back (`Filesystem::trim_eof`) when the
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

//!
//! This module holds the policy ([`prealloc_blocks`]) and the set of
//! inodes that may hold preallocation ([`Prealloc`]); the mounted
//! filesystem's write path (`fs/ops_data.rs`) applies them with
//! fallocate and trims with [`crate::bmap::data::trim_eof_step`].

use std::collections::HashSet;

use parking_lot::Mutex;

use crate::types::Ino;

pub const PREALLOC_MIN_BLOCKS: u64 = 16;
pub const PREALLOC_MAX_BLOCKS: u64 = 4096;

/// How many blocks to preallocate past EOF of a file that now ends in
/// block `eof` (blocks of `bs` bytes), with `allocsize` the mount option
/// (bytes) and `free` blocks free: `None` for none (`allocsize=0`, or
/// space not plentiful).
pub fn prealloc_blocks(eof: u64, bs: u64, allocsize: Option<u64>, free: u64) -> Option<u64> {
    let want = match allocsize {
        Some(0) => return None,
        Some(bytes) => bytes.div_ceil(bs),
        None => eof.clamp(PREALLOC_MIN_BLOCKS, PREALLOC_MAX_BLOCKS),
    };
    // Only where space is plentiful.
    if free < 8 * want + 1024 {
        return None;
    }
    Some(want)
}

/// Inodes that may hold preallocation past EOF.
#[derive(Default)]
pub struct Prealloc {
    inodes: Mutex<HashSet<u64>>,
}

impl Prealloc {
    /// `ino` may now hold preallocation.
    pub fn insert(&self, ino: Ino) {
        self.inodes.lock().insert(ino.0);
    }

    /// Forget `ino`; whether it was there.
    pub fn remove(&self, ino: Ino) -> bool {
        self.inodes.lock().remove(&ino.0)
    }

    /// Every inode that may hold preallocation.
    pub fn all(&self) -> Vec<Ino> {
        self.inodes.lock().iter().map(|&i| Ino(i)).collect()
    }
}
