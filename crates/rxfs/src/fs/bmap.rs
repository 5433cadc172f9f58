//! Fork mapping and file reads.

use super::inode::Inode;
use super::Filesystem;
use crate::error::{Error, Result};
use crate::types::{Daddr, FileBlock, ForkKind};

impl Filesystem {
    /// Read up to `buf.len()` bytes of a regular file at byte `offset`;
    /// holes and unwritten extents read as zeros. Returns the byte count
    /// (short only at EOF).
    pub fn read_file(&self, ip: &Inode, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let _ = (ip, offset, buf);
        Err(Error::NotSupported("read".into()))
    }

    /// Read `count` filesystem blocks of a directory or attribute fork
    /// starting at fork block `off` (one directory/attr block, which may
    /// span several extents). `Ok(None)` if the range is a hole.
    /// Returns the disk address of the first block (what the block's
    /// self-describing `blkno` must say) and the bytes.
    pub fn read_fork_blocks(
        &self,
        ip: &Inode,
        fork: ForkKind,
        off: FileBlock,
        count: u32,
    ) -> Result<Option<(Daddr, Vec<u8>)>> {
        let _ = (ip, fork, off, count);
        Err(Error::NotSupported("read_fork_blocks".into()))
    }
}
