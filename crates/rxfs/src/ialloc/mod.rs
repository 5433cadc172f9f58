//! Inode allocation: chunks, the inode btrees and the AGI.
//!
//! (API stub: bodies come next.)

use crate::error::{Error, Result};
use crate::types::Ino;
use crate::xact::{InodeId, MetaTx};

pub use crate::format::dinode_edit::NewInode;

/// Allocate an inode near `parent` (files: the parent's AG first;
/// directories: a rotating AG), initialise its dinode from `init` and join
/// it to the transaction with `ijoin_new`.
pub fn ialloc(tx: &mut dyn MetaTx, parent: Ino, init: &NewInode) -> Result<(Ino, InodeId)> {
    let _ = (tx, parent, init);
    Err(Error::NotSupported("ialloc: API stub".into()))
}

/// Free inode `ino` (joined as `ip`, nlink 0, no blocks): mode 0 on disk,
/// the inobt/finobt/AGI updated, `ifree_done`.
pub fn ifree(tx: &mut dyn MetaTx, ip: InodeId, ino: Ino) -> Result<()> {
    let _ = (tx, ip, ino);
    Err(Error::NotSupported("ifree: API stub".into()))
}
