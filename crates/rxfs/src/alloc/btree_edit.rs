//! Generic editing of the short-form AG btrees (bnobt, cntbt, inobt,
//! finobt). API stub.
//!
//! All operations are keyed: each call walks from the root (AGF/AGI) to
//! the leaf, so there is no cursor to keep valid across changes.
//! Records are raw on-disk bytes (`Tree::rec_size()` long); build and read
//! them with [`crate::format::btree::AllocRec`] (bnobt/cntbt) and
//! [`crate::format::btree::InobtRec`] (inobt/finobt, `sparse` =
//! `sb.has_sparse_inodes()`). Keys are [`BtreeKey`]s as
//! [`Tree::key_of`] builds them:
//! - Bno: `BtreeKey(startblock, 0, 0)`
//! - Cnt: `BtreeKey(blockcount, startblock, 0)`
//! - Ino/Fino: `BtreeKey(startino, 0, 0)`

use crate::error::{Error, Result};
use crate::format::btree::{BtreeKey, BtreeKind};
use crate::types::{AgBlock, AgNumber};
use crate::xact::MetaTx;

/// Which tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tree {
    Bno,
    Cnt,
    Ino,
    Fino,
}

impl Tree {
    pub const fn kind(self) -> BtreeKind {
        match self {
            Tree::Bno => BtreeKind::Bno,
            Tree::Cnt => BtreeKind::Cnt,
            Tree::Ino => BtreeKind::Ino,
            Tree::Fino => BtreeKind::Fino,
        }
    }
    pub const fn rec_size(self) -> usize {
        self.kind().rec_size()
    }
    /// The key of a record of this tree.
    pub fn key_of(self, rec: &[u8]) -> BtreeKey {
        self.kind().rec_key(rec)
    }
}

/// Lookup direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// The last record with key <= the key.
    Le,
    /// The first record with key >= the key.
    Ge,
    /// The record with exactly the key.
    Eq,
    /// The last record with key < the key.
    Lt,
    /// The first record with key > the key.
    Gt,
}

/// Where a record was found: leaf block and index in it (informational:
/// any change to the tree invalidates it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pos {
    pub leaf: AgBlock,
    pub idx: usize,
}

/// A record found by [`lookup`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub rec: Vec<u8>,
    pub key: BtreeKey,
    pub pos: Pos,
}

/// Find a record of `tree` in AG `agno`; `Ok(None)` if there is none.
pub fn lookup(
    _tx: &mut dyn MetaTx,
    _tree: Tree,
    _agno: AgNumber,
    _key: BtreeKey,
    _dir: Lookup,
) -> Result<Option<Found>> {
    Err(Error::NotSupported("btree_edit: stub".into()))
}

/// Insert `rec`; `Err(Exists)` if its key is already there.
pub fn insert(_tx: &mut dyn MetaTx, _tree: Tree, _agno: AgNumber, _rec: &[u8]) -> Result<()> {
    Err(Error::NotSupported("btree_edit: stub".into()))
}

/// Delete the record with key `key`; `Err(NotFound)` if absent.
pub fn delete(_tx: &mut dyn MetaTx, _tree: Tree, _agno: AgNumber, _key: BtreeKey) -> Result<()> {
    Err(Error::NotSupported("btree_edit: stub".into()))
}

/// Replace the record with key `key` by `rec` in place. The new key may
/// differ but must sort between the neighbours of the old record.
pub fn update(
    _tx: &mut dyn MetaTx,
    _tree: Tree,
    _agno: AgNumber,
    _key: BtreeKey,
    _rec: &[u8],
) -> Result<()> {
    Err(Error::NotSupported("btree_edit: stub".into()))
}
