//! Finding, taking and returning free extents in one AG: the two
//! free-space btrees kept in step, with the AGF's `freeblks` and `longest`.
//!
//! A free extent is one record in each tree: bnobt `(start, len)` keyed by
//! start, cntbt `(start, len)` keyed by `(len, start)`. Free extents never
//! touch (a free next to a free extent merges with it) and never overlap.

use super::AllocReq;
use crate::ag::{self as hdr, AGF_FREEBLKS, AGF_LONGEST};
use crate::btree::{self as bt, Lookup, Tree};
use crate::error::{Error, Location, Result};
use crate::format::btree::{AllocRec, BtreeKey};
use crate::types::{AgBlock, AgNumber};
use crate::xact::MetaTx;

/// Records examined per search direction before settling for the best
/// candidate seen (bounds the work on a badly fragmented AG).
const SCAN_MAX: usize = 1024;
/// Busy ranges split out of one free extent, at most.
const BUSY_SPLIT_MAX: usize = 64;

/// A chosen allocation: `[x, x + len)` out of free record `rec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cand {
    pub rec: AllocRec,
    pub x: u32,
    pub len: u32,
}

fn bno_key(start: u32) -> BtreeKey {
    BtreeKey(start as u64, 0, 0)
}

fn cnt_key(r: AllocRec) -> BtreeKey {
    BtreeKey(r.len as u64, r.start as u64, 0)
}

fn rec_bytes(r: AllocRec) -> [u8; 8] {
    let mut b = [0u8; 8];
    r.encode(&mut b);
    b
}

fn corrupt(detail: String) -> Error {
    Error::corrupt("free space btrees", Location::Unknown, detail)
}

/// Busy lookup: the first busy range overlapping `(agbno, len)`.
pub type BusyFn<'a> = &'a dyn Fn(u32, u32) -> Option<(u32, u32)>;

/// The parts of `[start, start + len)` no busy extent covers.
fn unbusy_parts(busy: BusyFn, r: AllocRec, busy_seen: &mut bool) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut work = vec![(r.start, r.start + r.len)];
    let mut splits = 0;
    while let Some((a, z)) = work.pop() {
        if a >= z {
            continue;
        }
        match busy(a, z - a) {
            None => out.push((a, z)),
            Some((b, l)) => {
                *busy_seen = true;
                splits += 1;
                if splits > BUSY_SPLIT_MAX {
                    break;
                }
                let be = b.saturating_add(l);
                work.push((a, b.max(a).min(z)));
                work.push((be.max(a).min(z), z));
            }
        }
    }
    out
}

/// Distance from `target` to an extent starting at `x`.
fn dist(x: u32, target: Option<u32>) -> u64 {
    target.map_or(0, |t| (x as i64 - t as i64).unsigned_abs())
}

/// The best allocation out of free record `r` for `req` (longest, then
/// closest to `target`), avoiding busy blocks; `None` if nothing fits.
pub fn eval(
    busy: BusyFn,
    r: AllocRec,
    req: &AllocReq,
    target: Option<u32>,
    busy_seen: &mut bool,
) -> Option<Cand> {
    let align = req.align.max(1) as u64;
    let mut best: Option<Cand> = None;
    for (a, z) in unbusy_parts(busy, r, busy_seen) {
        let b = (a as u64).div_ceil(align) * align;
        if b >= z as u64 {
            continue;
        }
        let avail = z as u64 - b;
        if avail < req.minlen as u64 {
            continue;
        }
        let len = avail.min(req.maxlen as u64);
        // Aligned starts lie in [b, hi]; take the one closest to target.
        let hi = (z as u64 - len) / align * align;
        let x = match target {
            None => b,
            Some(t) => {
                let down = (t as u64 / align * align).clamp(b, hi);
                let up = (t as u64)
                    .div_ceil(align)
                    .saturating_mul(align)
                    .clamp(b, hi);
                if dist(up as u32, target) < dist(down as u32, target) {
                    up
                } else {
                    down
                }
            }
        };
        let c = Cand {
            rec: r,
            x: x as u32,
            len: len as u32,
        };
        if better(Some(c), best, target) {
            best = Some(c);
        }
    }
    best
}

/// Whether `a` beats `b`: longer wins, then closer to the target.
pub fn better(a: Option<Cand>, b: Option<Cand>, target: Option<u32>) -> bool {
    match (a, b) {
        (Some(_), None) => true,
        (Some(a), Some(b)) => {
            a.len > b.len || (a.len == b.len && dist(a.x, target) < dist(b.x, target))
        }
        _ => false,
    }
}

fn busy_fn(tx: &dyn MetaTx, agno: AgNumber) -> impl Fn(u32, u32) -> Option<(u32, u32)> + '_ {
    move |b, l| tx.busy_overlap(agno, AgBlock(b), l).map(|(s, n)| (s.0, n))
}

fn alloc_rec(f: &bt::Found) -> AllocRec {
    AllocRec::decode(&f.rec)
}

/// Search by size: the smallest free extent that holds `maxlen`, else the
/// longest one that holds at least `minlen`.
fn find_by_size(
    tx: &mut dyn MetaTx,
    agno: AgNumber,
    req: &AllocReq,
    busy_seen: &mut bool,
) -> Result<Option<Cand>> {
    let mut best = None;
    let mut f = bt::lookup(
        tx,
        Tree::Cnt,
        agno,
        BtreeKey(req.maxlen as u64, 0, 0),
        Lookup::Ge,
    )?;
    for _ in 0..SCAN_MAX {
        let Some(found) = f else { break };
        let r = alloc_rec(&found);
        let c = eval(&busy_fn(tx, agno), r, req, None, busy_seen);
        if better(c, best, None) {
            best = c;
        }
        if best.is_some_and(|b| b.len == req.maxlen) {
            return Ok(best);
        }
        f = bt::lookup(tx, Tree::Cnt, agno, found.key, Lookup::Gt)?;
    }
    // Nothing holds maxlen: walk down from the longest shorter extents.
    let mut f = bt::lookup(
        tx,
        Tree::Cnt,
        agno,
        BtreeKey(req.maxlen as u64, 0, 0),
        Lookup::Lt,
    )?;
    for _ in 0..SCAN_MAX {
        let Some(found) = f else { break };
        let r = alloc_rec(&found);
        if r.len < req.minlen || best.is_some_and(|b: Cand| b.len >= r.len) {
            break;
        }
        let c = eval(&busy_fn(tx, agno), r, req, None, busy_seen);
        if better(c, best, None) {
            best = c;
        }
        f = bt::lookup(tx, Tree::Cnt, agno, found.key, Lookup::Lt)?;
    }
    Ok(best)
}

/// Search near `target`: walk the bnobt outwards from it on both sides,
/// closest records first, until a full-length candidate is found and every
/// unseen record is farther away; then fall back to the size search.
fn find_near(
    tx: &mut dyn MetaTx,
    agno: AgNumber,
    req: &AllocReq,
    target: u32,
    busy_seen: &mut bool,
) -> Result<Option<Cand>> {
    let t = Some(target);
    let mut best: Option<Cand> = None;
    let mut left = bt::lookup(tx, Tree::Bno, agno, bno_key(target), Lookup::Le)?;
    let mut right = bt::lookup(tx, Tree::Bno, agno, bno_key(target), Lookup::Gt)?;
    for _ in 0..2 * SCAN_MAX {
        // How far each side's next record is from the target, at best.
        let ld = left.as_ref().map(|f| {
            let r = alloc_rec(f);
            (target as u64).saturating_sub(r.start as u64 + r.len as u64 - 1)
        });
        let rd = right
            .as_ref()
            .map(|f| (alloc_rec(f).start as u64).saturating_sub(target as u64));
        let take_left = match (ld, rd) {
            (None, None) => break,
            (Some(l), Some(r)) => l <= r,
            (l, _) => l.is_some(),
        };
        let d = if take_left { ld } else { rd }.unwrap_or(0);
        if best.is_some_and(|b| b.len == req.maxlen && dist(b.x, t) <= d) {
            break;
        }
        let cur = if take_left { left.take() } else { right.take() }.expect("side chosen");
        let c = eval(&busy_fn(tx, agno), alloc_rec(&cur), req, t, busy_seen);
        if better(c, best, t) {
            best = c;
        }
        let dir = if take_left { Lookup::Lt } else { Lookup::Gt };
        let next = bt::lookup(tx, Tree::Bno, agno, cur.key, dir)?;
        if take_left {
            left = next;
        } else {
            right = next;
        }
    }
    if best.is_some_and(|b| b.len == req.maxlen) {
        return Ok(best);
    }
    let by_size = find_by_size(tx, agno, req, busy_seen)?;
    Ok(if better(by_size, best, t) {
        by_size
    } else {
        best
    })
}

/// Find an allocation for `req` in AG `agno` (no changes made).
pub fn find(
    tx: &mut dyn MetaTx,
    agno: AgNumber,
    req: &AllocReq,
    near: Option<AgBlock>,
    busy_seen: &mut bool,
) -> Result<Option<Cand>> {
    match near {
        Some(t) => find_near(tx, agno, req, t.0, busy_seen),
        None => find_by_size(tx, agno, req, busy_seen),
    }
}

/// Set `agf_longest` from the cntbt's last record.
fn update_longest(tx: &mut dyn MetaTx, agno: AgNumber) -> Result<()> {
    let last = bt::lookup(
        tx,
        Tree::Cnt,
        agno,
        BtreeKey(u64::MAX, u64::MAX, u64::MAX),
        Lookup::Le,
    )?;
    let longest = last.map_or(0, |f| alloc_rec(&f).len);
    let agf = hdr::agf(tx, agno)?;
    if hdr::get(tx, agf, AGF_LONGEST) != longest {
        hdr::set(tx, agf, AGF_LONGEST, longest);
    }
    Ok(())
}

/// Remove `[c.x, c.x + c.len)` from free record `c.rec` in both trees.
pub fn take(tx: &mut dyn MetaTx, agno: AgNumber, c: Cand) -> Result<()> {
    let r = c.rec;
    let (re, xe) = (r.start + r.len, c.x + c.len);
    debug_assert!(r.start <= c.x && xe <= re && c.len > 0);
    match bt::lookup(tx, Tree::Bno, agno, bno_key(r.start), Lookup::Eq)? {
        Some(f) if alloc_rec(&f) == r => {}
        _ => {
            return Err(corrupt(format!(
                "free extent {}+{} vanished",
                r.start, r.len
            )))
        }
    }
    bt::delete(tx, Tree::Cnt, agno, cnt_key(r))?;
    let before = AllocRec {
        start: r.start,
        len: c.x - r.start,
    };
    let after = AllocRec {
        start: xe,
        len: re - xe,
    };
    match (before.len > 0, after.len > 0) {
        (false, false) => bt::delete(tx, Tree::Bno, agno, bno_key(r.start))?,
        (false, true) => bt::update(tx, Tree::Bno, agno, bno_key(r.start), &rec_bytes(after))?,
        (true, false) => bt::update(tx, Tree::Bno, agno, bno_key(r.start), &rec_bytes(before))?,
        (true, true) => {
            bt::update(tx, Tree::Bno, agno, bno_key(r.start), &rec_bytes(before))?;
            bt::insert(tx, Tree::Bno, agno, &rec_bytes(after))?;
        }
    }
    for part in [before, after] {
        if part.len > 0 {
            bt::insert(tx, Tree::Cnt, agno, &rec_bytes(part))?;
        }
    }
    let agf = hdr::agf(tx, agno)?;
    let max = hdr::ag_len(tx, agno);
    hdr::add(tx, agf, AGF_FREEBLKS, -(c.len as i64), max)?;
    update_longest(tx, agno)
}

/// Return `[agbno, agbno + len)` to both trees, merging with the free
/// neighbours. Freeing space that is already free is corruption.
pub fn give_back(tx: &mut dyn MetaTx, agno: AgNumber, agbno: u32, len: u32) -> Result<()> {
    let end = agbno + len;
    let left = bt::lookup(tx, Tree::Bno, agno, bno_key(agbno), Lookup::Le)?.map(|f| alloc_rec(&f));
    let right = bt::lookup(tx, Tree::Bno, agno, bno_key(agbno), Lookup::Gt)?.map(|f| alloc_rec(&f));
    let overlap = |r: &AllocRec| r.start < end && agbno < r.start + r.len;
    if let Some(r) = left.iter().chain(right.iter()).find(|r| overlap(r)) {
        return Err(corrupt(format!(
            "freeing {agbno}+{len} of AG {agno}, which overlaps free extent {}+{}",
            r.start, r.len
        )));
    }
    let left = left.filter(|l| l.start + l.len == agbno);
    let right = right.filter(|r| r.start == end);
    let mut merged = AllocRec { start: agbno, len };
    for r in left.iter().chain(right.iter()) {
        bt::delete(tx, Tree::Cnt, agno, cnt_key(*r))?;
    }
    if let Some(l) = left {
        merged = AllocRec {
            start: l.start,
            len: merged.len + l.len,
        };
    }
    if let Some(r) = right {
        merged.len += r.len;
    }
    match (left, right) {
        (Some(l), Some(r)) => {
            bt::delete(tx, Tree::Bno, agno, bno_key(r.start))?;
            bt::update(tx, Tree::Bno, agno, bno_key(l.start), &rec_bytes(merged))?;
        }
        (Some(l), None) => bt::update(tx, Tree::Bno, agno, bno_key(l.start), &rec_bytes(merged))?,
        (None, Some(r)) => bt::update(tx, Tree::Bno, agno, bno_key(r.start), &rec_bytes(merged))?,
        (None, None) => bt::insert(tx, Tree::Bno, agno, &rec_bytes(merged))?,
    }
    bt::insert(tx, Tree::Cnt, agno, &rec_bytes(merged))?;
    let agf = hdr::agf(tx, agno)?;
    let max = hdr::ag_len(tx, agno);
    hdr::add(tx, agf, AGF_FREEBLKS, len as i64, max)?;
    update_longest(tx, agno)
}
