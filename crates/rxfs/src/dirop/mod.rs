//! Directory modification: shortform and single-block (XDB3) directories,
//! and the namespace operations built on them.
//!
//! API stub: signatures only, bodies return `NotSupported`.

use crate::error::{Error, Result};
use crate::types::Ino;
use crate::xact::{InodeId, MetaTx};

/// Initialise the data fork of the new directory `dp` as an empty
/// shortform directory whose parent is `parent`.
pub fn dir_init(tx: &mut dyn MetaTx, dp: InodeId, parent: Ino) -> Result<()> {
    let _ = (tx, dp, parent);
    Err(Error::NotSupported("dirop: dir_init".into()))
}

/// Look `name` up in directory `dp`.
pub fn dir_lookup(tx: &mut dyn MetaTx, dp: InodeId, name: &[u8]) -> Result<Option<Ino>> {
    let _ = (tx, dp, name);
    Err(Error::NotSupported("dirop: dir_lookup".into()))
}

/// Add the entry `name -> ino` (with directory-entry file type `ftype`).
pub fn dir_add(tx: &mut dyn MetaTx, dp: InodeId, name: &[u8], ino: Ino, ftype: u8) -> Result<()> {
    let _ = (tx, dp, name, ino, ftype);
    Err(Error::NotSupported("dirop: dir_add".into()))
}

/// Remove the entry `name`; returns the inode it named.
pub fn dir_remove(tx: &mut dyn MetaTx, dp: InodeId, name: &[u8]) -> Result<Ino> {
    let _ = (tx, dp, name);
    Err(Error::NotSupported("dirop: dir_remove".into()))
}

/// True when `dp` has no entries besides `.` and `..`.
pub fn dir_is_empty(tx: &mut dyn MetaTx, dp: InodeId) -> Result<bool> {
    let _ = (tx, dp);
    Err(Error::NotSupported("dirop: dir_is_empty".into()))
}

pub use ns::{create, mkdir, rmdir, unlink, NsCreate};

pub mod ns {
    //! Namespace operations on a transaction.
    use super::*;
    use crate::format::inode::Timestamp;

    /// What to create (mode has the file type bits).
    #[derive(Debug, Clone, Copy)]
    pub struct NsCreate {
        pub mode: u32,
        pub uid: u32,
        pub gid: u32,
        pub rdev: u32,
        pub time: Timestamp,
    }

    /// Create a non-directory inode named `name` in `dp` (inode `dino`).
    /// Returns the new inode.
    pub fn create(
        tx: &mut dyn MetaTx,
        dp: InodeId,
        dino: Ino,
        name: &[u8],
        args: &NsCreate,
    ) -> Result<(Ino, InodeId)> {
        let _ = (tx, dp, dino, name, args);
        Err(Error::NotSupported("dirop: create".into()))
    }

    /// Create a directory named `name` in `dp` (inode `dino`).
    pub fn mkdir(
        tx: &mut dyn MetaTx,
        dp: InodeId,
        dino: Ino,
        name: &[u8],
        args: &NsCreate,
    ) -> Result<(Ino, InodeId)> {
        let _ = (tx, dp, dino, name, args);
        Err(Error::NotSupported("dirop: mkdir".into()))
    }

    /// Remove the non-directory entry `name` from `dp`; frees the inode
    /// when its link count reaches 0. The caller has joined `dp` and holds
    /// the child's inode lock (see [`crate::dirop::dir_lookup`]).
    pub fn unlink(tx: &mut dyn MetaTx, dp: InodeId, name: &[u8], now: Timestamp) -> Result<Ino> {
        let _ = (tx, dp, name, now);
        Err(Error::NotSupported("dirop: unlink".into()))
    }

    /// Remove the empty directory `name` from `dp` and free it.
    pub fn rmdir(tx: &mut dyn MetaTx, dp: InodeId, name: &[u8], now: Timestamp) -> Result<Ino> {
        let _ = (tx, dp, name, now);
        Err(Error::NotSupported("dirop: rmdir".into()))
    }
}
