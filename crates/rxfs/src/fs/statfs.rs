//! statfs, as the kernel reports it.
//! (Stub: filled in by the AG-header work.)

use super::Filesystem;
use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StatFs {
    pub bsize: u32,
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    pub files: u64,
    pub ffree: u64,
    pub namelen: u32,
    pub frsize: u32,
}

impl Filesystem {
    pub fn statfs(&self) -> Result<StatFs> {
        Err(Error::NotSupported("statfs".into()))
    }
}
