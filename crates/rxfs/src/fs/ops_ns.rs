//! Namespace operations of a read-write mount: create, mkdir, unlink, rmdir.
//!
//! Each takes the inode locks it needs (ascending inode number), allocates
//! a transaction, runs the algorithms of [`crate::dirop`] and
//! [`crate::ialloc`] on it and commits.

use std::sync::Arc;

use super::{Filesystem, Inode};
use crate::error::{Error, Result};
use crate::types::Ino;

/// Who creates an inode, and what it is.
#[derive(Debug, Clone, Copy)]
pub struct CreateArgs {
    /// Full mode: file type bits and permissions.
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// Device number (Linux encoding) for block and character devices.
    pub rdev: u32,
}

impl Filesystem {
    /// Create a regular file, device, FIFO or socket named `name` in `parent`.
    pub fn create(&self, parent: Ino, name: &[u8], args: &CreateArgs) -> Result<Arc<Inode>> {
        let _ = (parent, name, args);
        Err(Error::NotSupported("create".into()))
    }

    /// Create a directory.
    pub fn mkdir(&self, parent: Ino, name: &[u8], args: &CreateArgs) -> Result<Arc<Inode>> {
        let _ = (parent, name, args);
        Err(Error::NotSupported("mkdir".into()))
    }

    /// Remove a non-directory entry; the inode is freed when its link count
    /// reaches zero.
    pub fn unlink(&self, parent: Ino, name: &[u8]) -> Result<()> {
        let _ = (parent, name);
        Err(Error::NotSupported("unlink".into()))
    }

    /// Remove an empty directory.
    pub fn rmdir(&self, parent: Ino, name: &[u8]) -> Result<()> {
        let _ = (parent, name);
        Err(Error::NotSupported("rmdir".into()))
    }
}
