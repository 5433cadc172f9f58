//! The read path's entry points on a mounted filesystem. Each structure's
//! reading lives in its own module, written against
//! [`crate::inode::ReadCtx`] (which [`Filesystem`] implements in
//! `read_lock.rs`); these methods hand it the filesystem.

use super::Filesystem;
use crate::dir::read::DirEntry;
use crate::error::Result;
use crate::format::dir::DirGeo;
use crate::inode::Inode;
use crate::types::Ino;

impl Filesystem {
    /// The directory geometry of this filesystem.
    pub fn dir_geo(&self) -> DirGeo {
        crate::dir::read::dir_geo(self)
    }

    /// Look `name` up in directory `dir`. `Err(NotFound)` when absent.
    pub fn lookup(&self, dir: &Inode, name: &[u8]) -> Result<Ino> {
        crate::dir::read::lookup(self, dir, name)
    }

    /// The entries of directory `dir` from `cookie` on, each handed to `f`
    /// until it returns false (see [`crate::dir::read::readdir`]).
    pub fn readdir(
        &self,
        dir: &Inode,
        cookie: u64,
        f: &mut dyn FnMut(&DirEntry) -> bool,
    ) -> Result<()> {
        crate::dir::read::readdir(self, dir, cookie, f)
    }

    /// The names of `ip`'s extended attributes, with their namespace
    /// prefixes (see [`crate::attr::read::listxattr`]).
    pub fn listxattr(&self, ip: &Inode) -> Result<Vec<Vec<u8>>> {
        crate::attr::read::listxattr(self, ip)
    }

    /// The value of `ip`'s extended attribute `name` (with its namespace
    /// prefix; see [`crate::attr::read::getxattr`]).
    pub fn getxattr(&self, ip: &Inode, name: &[u8]) -> Result<Vec<u8>> {
        crate::attr::read::getxattr(self, ip, name)
    }

    /// The target of symlink `ip`. `Err(NotSymlink)` for other files.
    pub fn readlink(&self, ip: &Inode) -> Result<Vec<u8>> {
        crate::symlink::readlink(self, ip)
    }
}
