//! The read path's entry points on a mounted filesystem. Each structure's
//! reading lives in its own module, written against
//! [`crate::inode::ReadCtx`] (which [`Filesystem`] implements in
//! `read_lock.rs`); these methods hand it the filesystem.

use super::Filesystem;
use crate::dirop::read::DirEntry;
use crate::error::Result;
use crate::format::dir::DirGeo;
use crate::inode::Inode;
use crate::types::Ino;

impl Filesystem {
    /// The directory geometry of this filesystem.
    pub fn dir_geo(&self) -> DirGeo {
        crate::dirop::read::dir_geo(self)
    }

    /// Look `name` up in directory `dir`. `Err(NotFound)` when absent.
    pub fn lookup(&self, dir: &Inode, name: &[u8]) -> Result<Ino> {
        crate::dirop::read::lookup(self, dir, name)
    }

    /// The entries of directory `dir` from `cookie` on, each handed to `f`
    /// until it returns false (see [`crate::dirop::read::readdir`]).
    pub fn readdir(
        &self,
        dir: &Inode,
        cookie: u64,
        f: &mut dyn FnMut(&DirEntry) -> bool,
    ) -> Result<()> {
        crate::dirop::read::readdir(self, dir, cookie, f)
    }

    /// The names of `ip`'s extended attributes, with their namespace
    /// prefixes (see [`crate::attrop::read::listxattr`]).
    pub fn listxattr(&self, ip: &Inode) -> Result<Vec<Vec<u8>>> {
        crate::attrop::read::listxattr(self, ip)
    }

    /// The value of `ip`'s extended attribute `name` (with its namespace
    /// prefix; see [`crate::attrop::read::getxattr`]).
    pub fn getxattr(&self, ip: &Inode, name: &[u8]) -> Result<Vec<u8>> {
        crate::attrop::read::getxattr(self, ip, name)
    }

    /// The target of symlink `ip`. `Err(NotSymlink)` for other files.
    pub fn readlink(&self, ip: &Inode) -> Result<Vec<u8>> {
        crate::symlink::readlink(self, ip)
    }
}
