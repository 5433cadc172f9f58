//! Data and attribute operations of a read-write mount: write, setattr
//! (including truncate), fsync.

use std::sync::Arc;

use super::{Filesystem, Inode};
use crate::error::{Error, Result};
use crate::format::inode::Timestamp;
use crate::types::Ino;

/// Attribute changes (`None`: unchanged). Setting `size` truncates or
/// extends; ctime is set to `ctime` or now when anything changes.
#[derive(Debug, Clone, Copy, Default)]
pub struct SetAttr {
    /// Permission bits (the file type bits are kept).
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<Timestamp>,
    pub mtime: Option<Timestamp>,
    pub ctime: Option<Timestamp>,
}

impl Filesystem {
    /// Write `data` at byte `off` of a regular file; returns bytes written.
    pub fn write(&self, ino: Ino, off: u64, data: &[u8]) -> Result<usize> {
        let _ = (ino, off, data);
        Err(Error::NotSupported("write".into()))
    }

    /// Change attributes; returns the inode as changed.
    pub fn setattr(&self, ino: Ino, attr: &SetAttr) -> Result<Arc<Inode>> {
        let _ = (ino, attr);
        Err(Error::NotSupported("setattr".into()))
    }

    /// Make the file's data (and, unless `datasync` and only timestamps
    /// changed, its metadata) durable.
    pub fn fsync(&self, ino: Ino, datasync: bool) -> Result<()> {
        let _ = (ino, datasync);
        Err(Error::NotSupported("fsync".into()))
    }
}
