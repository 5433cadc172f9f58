//! Record-level edits of one AG's rmapbt: add a mapping (merged with its
//! neighbours when they continue it) and remove a mapping (trimming or
//! splitting the records that hold it).
//!
//! rxfs never shares blocks, so the records of an AG never overlap: each
//! block has at most one record, and a lookup by start block finds it.
//! Two records are merged exactly when `xfs_repair` would merge what it
//! observes (same owner and flags, physically adjacent, and for file data
//! also logically adjacent), because repair demands that each merged
//! observation lies inside one on-disk record.
//!
//! These functions do not fix up the AGFL first ([`super`] does): the
//! AGFL refill itself calls them.

use crate::btree::{self as bt, Lookup, Tree};
use crate::error::{Error, Location, Result};
use crate::format::btree::{BtreeKey, RmapRec};
use crate::types::AgNumber;
use crate::xact::MetaTx;

fn corrupt(agno: AgNumber, d: String) -> Error {
    Error::corrupt("rmapbt", Location::Unknown, format!("AG {agno}: {d}"))
}

fn enc(r: &RmapRec) -> Vec<u8> {
    let mut b = vec![0u8; 24];
    r.encode(&mut b);
    b
}

fn key(r: &RmapRec) -> BtreeKey {
    Tree::Rmap.key_of(&enc(r))
}

fn end(r: &RmapRec) -> u64 {
    r.start as u64 + r.len as u64
}

/// Whether offsets mean something for this record (file data, not bmbt
/// blocks or special owners).
fn has_offset(r: &RmapRec) -> bool {
    !r.is_special_owner() && !r.bmbt_block
}

/// Whether `b` continues `a` (physically, and logically for file data).
fn mergeable(a: &RmapRec, b: &RmapRec) -> bool {
    if a.owner != b.owner
        || end(a) != b.start as u64
        || a.len as u64 + b.len as u64 > u32::MAX as u64
    {
        return false;
    }
    if a.is_special_owner() {
        return true;
    }
    if (a.attr_fork, a.bmbt_block, a.unwritten) != (b.attr_fork, b.bmbt_block, b.unwritten) {
        return false;
    }
    a.bmbt_block || a.offset + a.len as u64 == b.offset
}

fn find(tx: &mut dyn MetaTx, agno: AgNumber, k: BtreeKey, dir: Lookup) -> Result<Option<RmapRec>> {
    Ok(bt::lookup(tx, Tree::Rmap, agno, k, dir)?.map(|f| RmapRec::decode(&f.rec)))
}

/// Add the mapping `r` (which must not overlap any record).
pub fn map(tx: &mut dyn MetaTx, agno: AgNumber, r: RmapRec) -> Result<()> {
    let at = BtreeKey(r.start as u64, 0, 0);
    let left = find(tx, agno, at, Lookup::Lt)?;
    let right = find(tx, agno, at, Lookup::Ge)?;
    if let Some(l) = &left {
        if end(l) > r.start as u64 {
            return Err(corrupt(agno, format!("mapping {r:?} overlaps {l:?}")));
        }
    }
    if let Some(n) = &right {
        if (n.start as u64) < end(&r) {
            return Err(corrupt(agno, format!("mapping {r:?} overlaps {n:?}")));
        }
    }
    let l = left.filter(|l| mergeable(l, &r));
    let n = right.filter(|n| mergeable(&r, n));
    match (l, n) {
        (Some(l), Some(n)) if l.len as u64 + r.len as u64 + n.len as u64 <= u32::MAX as u64 => {
            bt::delete(tx, Tree::Rmap, agno, key(&n))?;
            let m = RmapRec {
                len: l.len + r.len + n.len,
                ..l
            };
            bt::update(tx, Tree::Rmap, agno, key(&l), &enc(&m))
        }
        (Some(l), _) => {
            let m = RmapRec {
                len: l.len + r.len,
                ..l
            };
            bt::update(tx, Tree::Rmap, agno, key(&l), &enc(&m))
        }
        (None, Some(n)) => {
            let m = RmapRec {
                len: r.len + n.len,
                ..r
            };
            bt::update(tx, Tree::Rmap, agno, key(&n), &enc(&m))
        }
        (None, None) => bt::insert(tx, Tree::Rmap, agno, &enc(&r)),
    }
}

/// Remove the mapping `r`: every block of it must be mapped by records of
/// the same owner and flags (and, for file data, the same offsets).
pub fn unmap(tx: &mut dyn MetaTx, agno: AgNumber, r: RmapRec) -> Result<()> {
    let stop = end(&r);
    let mut at = r.start as u64;
    // Each round removes at least one block.
    while at < stop {
        let k = BtreeKey(at, u64::MAX, u64::MAX);
        let rec = find(tx, agno, k, Lookup::Le)?
            .filter(|c| c.start as u64 <= at && end(c) > at)
            .ok_or_else(|| corrupt(agno, format!("no record maps block {at} of {r:?}")))?;
        let same = rec.owner == r.owner
            && (rec.is_special_owner()
                || ((rec.attr_fork, rec.bmbt_block, rec.unwritten)
                    == (r.attr_fork, r.bmbt_block, r.unwritten)
                    && (rec.bmbt_block
                        || rec.offset + (at - rec.start as u64)
                            == r.offset + (at - r.start as u64))));
        if !same {
            return Err(corrupt(
                agno,
                format!("removing {r:?}, block {at} is mapped by {rec:?}"),
            ));
        }
        let cut = stop.min(end(&rec));
        let rk = key(&rec);
        let head = (at - rec.start as u64) as u32;
        let tail = (end(&rec) - cut) as u32;
        let shift = |by: u64| {
            if has_offset(&rec) {
                rec.offset + by
            } else {
                rec.offset
            }
        };
        let tail_rec = RmapRec {
            start: cut as u32,
            len: tail,
            offset: shift(cut - rec.start as u64),
            ..rec
        };
        match (head, tail) {
            (0, 0) => bt::delete(tx, Tree::Rmap, agno, rk)?,
            (0, _) => bt::update(tx, Tree::Rmap, agno, rk, &enc(&tail_rec))?,
            (_, t) => {
                let h = RmapRec { len: head, ..rec };
                bt::update(tx, Tree::Rmap, agno, rk, &enc(&h))?;
                if t > 0 {
                    bt::insert(tx, Tree::Rmap, agno, &enc(&tail_rec))?;
                }
            }
        }
        at = cut;
    }
    Ok(())
}

/// Remove the mapping of `[start, start + len)` whoever owns it: nothing
/// if no record touches the range, else the owner of the record mapping
/// its first block must map all of it.
pub fn unmap_any_owner(tx: &mut dyn MetaTx, agno: AgNumber, start: u32, len: u32) -> Result<()> {
    let stop = start as u64 + len as u64;
    let k = BtreeKey(start as u64, u64::MAX, u64::MAX);
    let first = find(tx, agno, k, Lookup::Le)?.filter(|c| end(c) > start as u64);
    let Some(rec) = first else {
        // Nothing maps the first block; a record further in is corruption.
        let next = find(tx, agno, BtreeKey(start as u64, 0, 0), Lookup::Ge)?;
        if let Some(n) = next.filter(|n| (n.start as u64) < stop) {
            return Err(corrupt(
                agno,
                format!("freeing {start}+{len}: {n:?} maps part of it"),
            ));
        }
        return Ok(());
    };
    let into = start as u64 - rec.start as u64;
    let r = RmapRec {
        start,
        len,
        offset: if has_offset(&rec) {
            rec.offset + into
        } else {
            rec.offset
        },
        ..rec
    };
    unmap(tx, agno, r)
}

/// Every record of the AG's rmapbt, in key order (tests and checks).
pub fn records(tx: &mut dyn MetaTx, agno: AgNumber, limit: usize) -> Result<Vec<RmapRec>> {
    Ok(bt::records(tx, Tree::Rmap, agno, limit)?
        .iter()
        .map(|b| RmapRec::decode(b))
        .collect())
}
