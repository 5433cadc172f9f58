//! fallocate(2) modes, SEEK_DATA/SEEK_HOLE and the write-back of delayed
//! (buffered) writes on a read-write mount.
//!
//! (API stub for issue 4: the file data helper fills it in.)

use super::Filesystem;
use crate::error::{Error, Result};
use crate::types::Ino;

impl Filesystem {
    /// fallocate(2): `mode` holds Linux `FALLOC_FL_*` bits (0 = allocate
    /// and extend; KEEP_SIZE, PUNCH_HOLE|KEEP_SIZE, ZERO_RANGE,
    /// COLLAPSE_RANGE, INSERT_RANGE).
    pub fn fallocate(&self, ino: Ino, mode: i32, off: u64, len: u64) -> Result<()> {
        let _ = (ino, mode, off, len);
        Err(Error::NotSupported("fallocate (issue 4)".into()))
    }

    /// lseek SEEK_DATA: the first byte at or after `off` that is data
    /// (unwritten extents count as holes, as XFS reports them); `NoData`
    /// style error (ENXIO) at or past EOF.
    pub fn seek_data(&self, ino: Ino, off: u64) -> Result<u64> {
        let _ = (ino, off);
        Err(Error::NotSupported("SEEK_DATA (issue 4)".into()))
    }

    /// lseek SEEK_HOLE: the first hole at or after `off` (EOF counts as a
    /// hole); ENXIO past EOF.
    pub fn seek_hole(&self, ino: Ino, off: u64) -> Result<u64> {
        let _ = (ino, off);
        Err(Error::NotSupported("SEEK_HOLE (issue 4)".into()))
    }

    /// Write back the delayed (buffered, not yet allocated) data of `ino`:
    /// allocate, write, commit. Called by fsync, FUSE flush/release, sync
    /// and unmount.
    pub fn flush_data(&self, ino: Ino) -> Result<()> {
        let _ = ino;
        Ok(())
    }
}
