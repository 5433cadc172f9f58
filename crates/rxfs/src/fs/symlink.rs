//! Symbolic links: inline and remote (`XSLM`) targets.
//! (Stub: filled in by the xattr/symlink work.)

use super::inode::Inode;
use super::Filesystem;
use crate::error::{Error, Result};

impl Filesystem {
    pub fn readlink(&self, ip: &Inode) -> Result<Vec<u8>> {
        let _ = ip;
        Err(Error::NotSupported("readlink".into()))
    }
}
