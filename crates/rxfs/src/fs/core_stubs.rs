//! TEMPORARY stubs of the lead's core API (`Filesystem::unmount`, `sync`,
//! `stats`) so the FUSE driver (branch `fuserw`) compiles before the core
//! lands on main. The lead deletes this file when merging; nothing else
//! may depend on it.

use super::stats::FsStats;
use super::Filesystem;
use crate::error::Result;

impl Filesystem {
    /// STUB: force the log, write everything back, write the unmount
    /// record. Read-only mounts have nothing to do.
    pub fn unmount(&self) -> Result<()> {
        Ok(())
    }

    /// STUB: force the log and write back dirty metadata.
    pub fn sync(&self) -> Result<()> {
        Ok(())
    }

    /// STUB: the write path's counters (all zero here).
    pub fn stats(&self) -> FsStats {
        FsStats::default()
    }
}
