//! link, symlink and O_TMPFILE on a read-write mount, and the open
//! references that keep an unlinked inode alive (on the AGI unlinked list)
//! until its last user goes.
//!
//! (API stub for issue 4: the namespace helper fills it in.)

use std::sync::Arc;

use super::ops_ns::CreateArgs;
use super::{Filesystem, Inode};
use crate::error::{Error, Result};
use crate::types::Ino;

impl Filesystem {
    /// A new hard link `name` in `parent` to the non-directory `ino`.
    pub fn link(&self, ino: Ino, parent: Ino, name: &[u8]) -> Result<Arc<Inode>> {
        let _ = (ino, parent, name);
        Err(Error::NotSupported("link (issue 4)".into()))
    }

    /// A symbolic link `name` in `parent` pointing at `target` (inline in
    /// the inode when it fits, else in remote blocks). `args.mode` file
    /// type bits are ignored (S_IFLNK | 0777).
    pub fn symlink(
        &self,
        parent: Ino,
        name: &[u8],
        target: &[u8],
        args: &CreateArgs,
    ) -> Result<Arc<Inode>> {
        let _ = (parent, name, target, args);
        Err(Error::NotSupported("symlink (issue 4)".into()))
    }

    /// An unnamed regular file (O_TMPFILE): nlink 0, on the AGI unlinked
    /// list, holding one open reference ([`Filesystem::inode_ref`]); it
    /// is freed at its last [`Filesystem::inode_unref`] unless
    /// [`Filesystem::link`] gave it a name first.
    pub fn tmpfile(&self, parent: Ino, args: &CreateArgs) -> Result<Arc<Inode>> {
        let _ = (parent, args);
        Err(Error::NotSupported("O_TMPFILE (issue 4)".into()))
    }

    /// Take an open reference on `ino` (a FUSE lookup/create, an open file
    /// of a library user). While an inode has references, removing its
    /// last link puts it on the AGI unlinked list instead of freeing it.
    pub fn inode_ref(&self, ino: Ino) {
        let _ = ino;
    }

    /// Drop `n` open references on `ino` (FUSE forget); at the last one an
    /// unlinked inode is freed (its blocks, then the inode, off the
    /// unlinked list) in transactions.
    pub fn inode_unref(&self, ino: Ino, n: u64) -> Result<()> {
        let _ = (ino, n);
        Ok(())
    }
}
