//! Stand-ins for the read-write mount API that the transaction core adds
//! (`Filesystem::unmount`, `sync`, `stats`). Inherent methods win over
//! trait methods, so once the core provides them the calls below resolve
//! to the real ones and this trait goes unused (then delete it).

use rxfs::fs::stats::FsStats;
use rxfs::{Error, Filesystem, MountOptions, Result};

pub trait RwShim {
    fn unmount(&self) -> Result<()>;
    fn sync(&self) -> Result<()>;
    fn stats(&self) -> FsStats;
}

impl RwShim for Filesystem {
    fn unmount(&self) -> Result<()> {
        Err(Error::NotSupported("unmount".into()))
    }
    fn sync(&self) -> Result<()> {
        Err(Error::NotSupported("sync".into()))
    }
    fn stats(&self) -> FsStats {
        FsStats::default()
    }
}

/// Read-write mount options (defaults otherwise).
pub fn rw() -> MountOptions {
    MountOptions {
        read_only: false,
        ..Default::default()
    }
}

/// Read-only mount options.
pub fn ro() -> MountOptions {
    MountOptions {
        read_only: true,
        ..Default::default()
    }
}
