//! The read path's entry points on a mounted filesystem. Each structure's
//! reading lives in its own module, written against
//! [`crate::inode::ReadCtx`] (which [`Filesystem`] implements in
//! `read_lock.rs`); these methods hand it the filesystem.

use super::Filesystem;
use crate::btree::walk::{self, BtreeRoot, WalkStats};
use crate::dir::read::DirEntry;
use crate::error::Result;
use crate::format::ag::{AgCheck, Agf, Agfl, Agi};
use crate::format::btree::{BlockCheck, BtreeKey, BtreeRecord};
use crate::format::dir::DirGeo;
use crate::inode::Inode;
use crate::types::{AgNumber, Ino};

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

    /// Read up to `buf.len()` bytes of regular file `ip` at byte `offset`
    /// (see [`crate::bmap::read::read_file`]).
    pub fn read_file(&self, ip: &Inode, offset: u64, buf: &mut [u8]) -> Result<usize> {
        crate::bmap::read::read_file(self, ip, offset, buf)
    }

    /// The target of symlink `ip`. `Err(NotSymlink)` for other files.
    pub fn readlink(&self, ip: &Inode) -> Result<Vec<u8>> {
        crate::symlink::readlink(self, ip)
    }

    /// The bounds every block of AG `agno` is checked against (from its
    /// verified AGF and AGI).
    pub fn ag_check(&self, agno: AgNumber) -> Result<AgCheck> {
        crate::ag::read::ag_check(self, agno)
    }

    /// The per-block checks of a btree of `levels` levels in that AG.
    pub fn block_check(&self, c: &AgCheck, levels: u32) -> BlockCheck {
        crate::ag::read::block_check(self, c, levels)
    }

    /// The AGF of `agno`, verified.
    pub fn read_agf(&self, agno: AgNumber) -> Result<Agf> {
        crate::ag::read::read_agf(self, agno)
    }

    /// The AGI of `agno`, verified.
    pub fn read_agi(&self, agno: AgNumber) -> Result<Agi> {
        crate::ag::read::read_agi(self, agno)
    }

    /// The AGFL of `agno`, verified.
    pub fn read_agfl(&self, agno: AgNumber) -> Result<Agfl> {
        crate::ag::read::read_agfl(self, agno)
    }

    /// Visit every record of a btree in key order as raw bytes (see
    /// [`walk::btree_walk_raw`]).
    pub fn btree_walk_raw(
        &self,
        root: &BtreeRoot,
        f: &mut dyn FnMut(&[u8]) -> Result<bool>,
    ) -> Result<WalkStats> {
        walk::btree_walk_raw(self, root, f)
    }

    /// As [`Self::btree_walk_raw`], also returning every block read (see
    /// [`walk::btree_walk_blocks`]).
    pub fn btree_walk_blocks(
        &self,
        root: &BtreeRoot,
        f: &mut dyn FnMut(&[u8]) -> Result<bool>,
    ) -> (Result<WalkStats>, Vec<u32>) {
        walk::btree_walk_blocks(self, root, f)
    }

    /// Visit every record of a btree in key order as typed records.
    pub fn btree_walk<R: BtreeRecord>(
        &self,
        root: &BtreeRoot,
        f: impl FnMut(R) -> Result<bool>,
    ) -> Result<WalkStats> {
        walk::btree_walk(self, root, f)
    }

    /// Every record of a btree (bounded by the AG size).
    pub fn btree_records<R: BtreeRecord>(&self, root: &BtreeRoot) -> Result<Vec<R>> {
        walk::btree_records(self, root)
    }

    /// The last record whose (low) key is `<= key` (see
    /// [`walk::btree_lookup_le`]).
    pub fn btree_lookup_le<R: BtreeRecord>(
        &self,
        root: &BtreeRoot,
        key: BtreeKey,
    ) -> Result<Option<R>> {
        walk::btree_lookup_le(self, root, key)
    }
}
