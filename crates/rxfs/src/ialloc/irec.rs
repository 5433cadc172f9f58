//! Inode chunk records in the inobt and finobt, through
//! [`crate::btree`].
//!
//! Both trees hold the same 16-byte record ([`InobtRec`]) keyed by the
//! chunk's first AG inode number. The inobt has one record per allocated
//! chunk; the finobt has a copy of exactly the records whose `freecount`
//! is not zero. Every record read from disk is checked
//! ([`check`]) before it is used: its counts must agree with its bitmaps,
//! so that a bad record becomes `Corrupt` instead of a wrong allocation.

use crate::btree::{self, Lookup, Tree};
use crate::error::{Error, Location, Result};
use crate::format::btree::{BtreeKey, InobtRec, INODES_PER_CHUNK, INODES_PER_HOLEMASK_BIT};
use crate::geometry::Geometry;
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
    if rec_ok(tx.geo(), tree, agno, r) {
        Ok(())
    } else {
        Err(corrupt(tx, tree, agno, format!("bad record {r:?}")))
    }
}

/// The checks of [`check`]: the chunk lies inside the AG past its headers
/// and starts on a block (or a 64-inode boundary inside a block); the
/// hole count agrees with `count`; `freecount` is the number of free
/// present inodes; finobt records have a free inode.
pub fn rec_ok(geo: &Geometry, tree: Tree, agno: AgNumber, r: &InobtRec) -> bool {
    let holes = r.holemask.count_ones() * INODES_PER_HOLEMASK_BIT;
    let avail = (r.free & r.present_mask()).count_ones();
    let first_blk = geo.agino_agbno(AgIno(r.startino)).0;
    let last_blk = geo
        .agino_agbno(AgIno(r.startino.saturating_add(INODES_PER_CHUNK - 1)))
        .0;
    r.startino
        .is_multiple_of(INODES_PER_CHUNK.min(geo.inopblock))
        && r.startino.checked_add(INODES_PER_CHUNK - 1).is_some()
        && first_blk > 0
        && last_blk < geo.ag_size(agno)
        && r.count == INODES_PER_CHUNK - holes
        && r.freecount == avail
        && (tree != Tree::Fino || r.freecount > 0)
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
    match btree::lookup(tx, tree, agno, key(agino), dir)? {
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
    debug_assert!(rec_ok(tx.geo(), tree, agno, r), "writing bad record {r:?}");
    let b = encode(tx, r);
    btree::insert(tx, tree, agno, &b)
}

/// Replace the record that starts at `r.startino`.
pub fn update(tx: &mut dyn MetaTx, tree: Tree, agno: AgNumber, r: &InobtRec) -> Result<()> {
    debug_assert!(rec_ok(tx.geo(), tree, agno, r), "writing bad record {r:?}");
    let b = encode(tx, r);
    btree::update(tx, tree, agno, key(r.startino), &b)
}

pub fn delete(tx: &mut dyn MetaTx, tree: Tree, agno: AgNumber, startino: u32) -> Result<()> {
    btree::delete(tx, tree, agno, key(startino))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::sb::Superblock;

    const HDR: &[u8] = include_bytes!("../format/testdata/ag2_hdr.bin");

    fn geo() -> Geometry {
        Geometry::new(&Superblock::decode_unverified(&HDR[..512]).unwrap())
    }

    fn full(startino: u32) -> InobtRec {
        InobtRec {
            startino,
            holemask: 0,
            count: 64,
            freecount: 64,
            free: u64::MAX,
        }
    }

    #[test]
    fn good_records() {
        let g = geo();
        let start = g.agbno_to_agino(crate::types::AgBlock(64), 0).0;
        let a = AgNumber(0);
        assert!(rec_ok(&g, Tree::Ino, a, &full(start)));
        // Kernel-style sparse record: upper half a hole (free bits set).
        let sp = InobtRec {
            holemask: 0xff00,
            count: 32,
            freecount: 31,
            free: !1u64,
            ..full(start)
        };
        assert!(rec_ok(&g, Tree::Fino, a, &sp));
        let used = InobtRec {
            freecount: 0,
            free: 0,
            ..full(start)
        };
        assert!(rec_ok(&g, Tree::Ino, a, &used));
        assert!(
            !rec_ok(&g, Tree::Fino, a, &used),
            "full chunk in the finobt"
        );
    }

    #[test]
    fn bad_records() {
        let g = geo();
        let a = AgNumber(0);
        let start = g.agbno_to_agino(crate::types::AgBlock(64), 0).0;
        let bad = [
            InobtRec {
                freecount: 63,
                ..full(start)
            },
            InobtRec {
                count: 60,
                ..full(start)
            },
            InobtRec {
                holemask: 1,
                ..full(start)
            },
            full(0),
            full(start + 1),
            full(
                g.agbno_to_agino(crate::types::AgBlock(g.ag_size(a) - 1), 0)
                    .0,
            ),
            full(u32::MAX - 3),
        ];
        for r in bad {
            assert!(!rec_ok(&g, Tree::Ino, a, &r), "{r:?}");
        }
    }
}
