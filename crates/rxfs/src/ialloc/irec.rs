//! Inode chunk records in the inobt and finobt, through
//! [`crate::alloc::btree_edit`].
//!
//! Both trees hold the same 16-byte record ([`InobtRec`]) keyed by the
//! chunk's first AG inode number. The inobt has one record per allocated
//! chunk; the finobt has a copy of exactly the records whose `freecount`
//! is not zero. Every record read from disk is checked
//! ([`check`]) before it is used: its counts must agree with its bitmaps,
//! so that a bad record becomes `Corrupt` instead of a wrong allocation.

use crate::alloc::btree_edit::{self, Lookup, Tree};
use crate::error::{Error, Location, Result};
use crate::format::btree::{BtreeKey, InobtRec, INODES_PER_CHUNK, INODES_PER_HOLEMASK_BIT};
use crate::types::{AgIno, AgNumber};
use crate::xact::MetaTx;

fn sparse(tx: &dyn MetaTx) -> bool {
    tx.sb().has_sparse_inodes()
}

fn corrupt(tx: &dyn MetaTx, tree: Tree, agno: AgNumber, d: String) -> Error {
    let daddr = tx.geo().ag_header_daddr(agno, 2);
    let what = match tree {
        Tree::Fino => "finobt record",
        _ => "inobt record",
    };
    Error::corrupt(what, Location::Daddr(daddr.0), d)
}

/// Check a record's internal consistency and its place in the AG.
pub fn check(tx: &dyn MetaTx, tree: Tree, agno: AgNumber, r: &InobtRec) -> Result<()> {
    let geo = tx.geo();
    let holes = r.holemask.count_ones() * INODES_PER_HOLEMASK_BIT;
    let avail = (r.free & r.present_mask()).count_ones();
    let first_blk = geo.agino_agbno(AgIno(r.startino)).0;
    let last_blk = geo
        .agino_agbno(AgIno(r.startino.saturating_add(INODES_PER_CHUNK - 1)))
        .0;
    let ok = r
        .startino
        .is_multiple_of(INODES_PER_CHUNK.min(geo.inopblock))
        && first_blk > 0
        && last_blk < geo.ag_size(agno)
        && r.count == INODES_PER_CHUNK - holes
        && r.freecount == avail
        && r.freecount <= r.count
        && (tree != Tree::Fino || r.freecount > 0);
    if ok {
        Ok(())
    } else {
        Err(corrupt(tx, tree, agno, format!("bad record {r:?}")))
    }
}

fn decode(tx: &dyn MetaTx, tree: Tree, agno: AgNumber, bytes: &[u8]) -> Result<InobtRec> {
    if bytes.len() < tree.rec_size() {
        return Err(corrupt(tx, tree, agno, "short record".into()));
    }
    let r = InobtRec::decode(bytes, sparse(tx));
    check(tx, tree, agno, &r)?;
    Ok(r)
}

fn encode(tx: &dyn MetaTx, r: &InobtRec) -> Vec<u8> {
    let mut b = vec![0u8; Tree::Ino.rec_size()];
    r.encode(&mut b, sparse(tx));
    b
}

fn key(startino: u32) -> BtreeKey {
    BtreeKey(startino as u64, 0, 0)
}

/// Look a record up (see [`Lookup`]), decoded and checked.
pub fn lookup(
    tx: &mut dyn MetaTx,
    tree: Tree,
    agno: AgNumber,
    agino: u32,
    dir: Lookup,
) -> Result<Option<InobtRec>> {
    match btree_edit::lookup(tx, tree, agno, key(agino), dir)? {
        None => Ok(None),
        Some(f) => decode(tx, tree, agno, &f.rec).map(Some),
    }
}

/// The record of the chunk holding `agino`, if any.
pub fn covering(
    tx: &mut dyn MetaTx,
    tree: Tree,
    agno: AgNumber,
    agino: u32,
) -> Result<Option<InobtRec>> {
    Ok(lookup(tx, tree, agno, agino, Lookup::Le)?.filter(|r| r.covers(agino)))
}

pub fn insert(tx: &mut dyn MetaTx, tree: Tree, agno: AgNumber, r: &InobtRec) -> Result<()> {
    let b = encode(tx, r);
    btree_edit::insert(tx, tree, agno, &b)
}

/// Replace the record that starts at `r.startino`.
pub fn update(tx: &mut dyn MetaTx, tree: Tree, agno: AgNumber, r: &InobtRec) -> Result<()> {
    let b = encode(tx, r);
    btree_edit::update(tx, tree, agno, key(r.startino), &b)
}

pub fn delete(tx: &mut dyn MetaTx, tree: Tree, agno: AgNumber, startino: u32) -> Result<()> {
    btree_edit::delete(tx, tree, agno, key(startino))
}

/// The leftmost inobt record with a free inode, walking the tree record by
/// record (filesystems without a finobt). The walk is bounded by the
/// number of chunks the AG can hold.
pub fn first_with_free(tx: &mut dyn MetaTx, agno: AgNumber) -> Result<Option<InobtRec>> {
    let max_chunks = ((tx.geo().ag_size(agno) as u64) << tx.geo().inopblog) / 64 + 1;
    let mut cur = lookup(tx, Tree::Ino, agno, 0, Lookup::Ge)?;
    let mut n = 0u64;
    while let Some(r) = cur {
        if r.freecount > 0 {
            return Ok(Some(r));
        }
        n += 1;
        if n > max_chunks {
            return Err(corrupt(
                tx,
                Tree::Ino,
                agno,
                "inobt walk does not end".into(),
            ));
        }
        cur = lookup(tx, Tree::Ino, agno, r.startino, Lookup::Gt)?;
    }
    Ok(None)
}
