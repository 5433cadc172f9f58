//! Data fork extent map editing (extents-format forks).
//!
//! API stub: bodies come next.

use crate::error::{Error, Result};
use crate::format::bmbt::Extent;
use crate::format::inode::Timestamp;
use crate::types::{FileBlock, Ino};
use crate::xact::{InodeId, MetaTx};

/// The data fork's mappings of a joined inode, sorted by file offset.
pub fn read_map(tx: &mut dyn MetaTx, ip: InodeId) -> Result<Vec<Extent>> {
    let _ = (tx, ip);
    Err(Error::NotSupported("bmapop::read_map".into()))
}

/// Allocate blocks for every hole in `[off, off + count)` of the data fork
/// of `ip` (inode number `ino`); returns the new mappings (written state),
/// sorted. Updates the fork, di_nextents and di_nblocks.
pub fn alloc_range(
    tx: &mut dyn MetaTx,
    ip: InodeId,
    ino: Ino,
    off: FileBlock,
    count: u64,
) -> Result<Vec<Extent>> {
    let _ = (tx, ip, ino, off, count);
    Err(Error::NotSupported("bmapop::alloc_range".into()))
}

/// Remove (and free) every mapping at or beyond file block `from`.
pub fn free_range(tx: &mut dyn MetaTx, ip: InodeId, from: FileBlock) -> Result<()> {
    let _ = (tx, ip, from);
    Err(Error::NotSupported("bmapop::free_range".into()))
}

/// Set di_size.
pub fn set_size(tx: &mut dyn MetaTx, ip: InodeId, size: u64) {
    let _ = (tx, ip, size);
}

/// Set any of atime/mtime/ctime (bigtime-aware).
pub fn set_times(
    tx: &mut dyn MetaTx,
    ip: InodeId,
    atime: Option<Timestamp>,
    mtime: Option<Timestamp>,
    ctime: Option<Timestamp>,
) {
    let _ = (tx, ip, atime, mtime, ctime);
}
