//! The pure part of extent-map editing: a sorted extent list, its holes,
//! insertion with merging, truncation, and the hole-filling loop written
//! against a [`Space`] (the allocator) so that it can be tested without a
//! filesystem.
//!
//! Invariants of an [`ExtentMap`] (checked by [`ExtentMap::check`] on what
//! came from disk, kept by every edit):
//! - extents are sorted by file offset and do not overlap;
//! - every extent has `1 <= len <= MAX_EXTLEN` and ends at or below
//!   `MAX_STARTOFF + 1`;
//! - every extent lies inside one AG (checked against the geometry by the
//!   caller; merging never joins extents of different AGs).
//!
//! Merging rule: two extents merge when they are adjacent in the file and
//! on disk, in the same AG, in the same state (both written or both
//! unwritten, as the kernel merges), and the sum fits `MAX_EXTLEN`.

use crate::error::{Error, Result};
use crate::format::bmbt::{Extent, MAX_EXTLEN, MAX_STARTOFF};
use crate::types::FileBlock;

/// Where blocks come from and go back to (the free-space btrees, or a
/// model in tests). Block numbers are filesystem blocks (`agno << agblklog
/// | agbno`).
pub trait Space {
    /// Allocate between 1 and `maxlen` contiguous blocks, as close to
    /// `near` as possible (`None`: anywhere suitable). Returns
    /// `(start, len)`.
    fn alloc(&mut self, near: Option<u64>, maxlen: u64) -> Result<(u64, u64)>;
    /// Give back `len` blocks at `start`.
    fn free(&mut self, start: u64, len: u64) -> Result<()>;
}

/// A data fork's extent list plus the one geometry fact merging needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtentMap {
    pub exts: Vec<Extent>,
    /// `sb_agblklog`: two blocks are in the same AG iff their fsblock
    /// numbers agree above this many bits.
    pub agblklog: u8,
}

impl ExtentMap {
    pub fn new(exts: Vec<Extent>, agblklog: u8) -> Self {
        ExtentMap { exts, agblklog }
    }

    /// Check the list invariants (sortedness, lengths, offsets); `Err`
    /// carries a description for a corruption report.
    pub fn check(&self) -> std::result::Result<(), String> {
        let mut prev_end = 0u64;
        for (i, e) in self.exts.iter().enumerate() {
            if e.len == 0 || e.len > MAX_EXTLEN {
                return Err(format!("extent {i} has length {}", e.len));
            }
            if e.off.0 > MAX_STARTOFF || e.end() > MAX_STARTOFF + 1 {
                return Err(format!("extent {i} ends past the largest file offset"));
            }
            if i > 0 && e.off.0 < prev_end {
                return Err(format!(
                    "extent {i} at file block {} overlaps or is out of order",
                    e.off.0
                ));
            }
            prev_end = e.end();
        }
        Ok(())
    }

    fn same_ag(&self, a: u64, b: u64) -> bool {
        a >> self.agblklog == b >> self.agblklog
    }

    fn can_merge(&self, a: &Extent, b: &Extent) -> bool {
        a.unwritten == b.unwritten
            && a.end() == b.off.0
            && a.start + a.len == b.start
            && self.same_ag(a.start, b.start)
            && a.len + b.len <= MAX_EXTLEN
    }

    /// The mapping covering file block `fb`, if any.
    pub fn lookup(&self, fb: u64) -> Option<&Extent> {
        let i = self.exts.partition_point(|e| e.end() <= fb);
        self.exts.get(i).filter(|e| e.off.0 <= fb)
    }

    /// Total mapped blocks.
    pub fn blocks(&self) -> u64 {
        self.exts.iter().map(|e| e.len).sum()
    }

    /// The unmapped runs `(off, len)` inside `[off, off + count)`, sorted.
    pub fn holes(&self, off: u64, count: u64) -> Vec<(u64, u64)> {
        let end = off.saturating_add(count);
        let mut out = Vec::new();
        let mut pos = off;
        let first = self.exts.partition_point(|e| e.end() <= off);
        for e in &self.exts[first..] {
            if pos >= end || e.off.0 >= end {
                break;
            }
            if e.off.0 > pos {
                out.push((pos, e.off.0 - pos));
            }
            pos = pos.max(e.end());
        }
        if pos < end {
            out.push((pos, end - pos));
        }
        out
    }

    /// Insert a mapping of a hole (must not overlap anything), merging it
    /// with its neighbours where the merging rule allows.
    pub fn insert(&mut self, e: Extent) {
        let i = self.exts.partition_point(|x| x.off.0 < e.off.0);
        debug_assert!(i == 0 || self.exts[i - 1].end() <= e.off.0);
        debug_assert!(i == self.exts.len() || e.end() <= self.exts[i].off.0);
        let mut at = i;
        if i > 0 && self.can_merge(&self.exts[i - 1], &e) {
            self.exts[i - 1].len += e.len;
            at = i - 1;
        } else {
            self.exts.insert(i, e);
        }
        if at + 1 < self.exts.len() && self.can_merge(&self.exts[at], &self.exts[at + 1]) {
            let next = self.exts.remove(at + 1);
            self.exts[at].len += next.len;
        }
    }

    /// Remove every mapping at or beyond file block `from` (trimming the
    /// one that straddles it); returns the removed physical runs
    /// `(start, len)` in file order.
    pub fn truncate(&mut self, from: u64) -> Vec<(u64, u64)> {
        let mut freed = Vec::new();
        let keep = self.exts.partition_point(|e| e.end() <= from);
        let mut head = None;
        for e in self.exts.drain(keep..) {
            if e.off.0 >= from {
                freed.push((e.start, e.len));
            } else {
                // Straddles `from`: keep its head.
                let kept = from - e.off.0;
                freed.push((e.start + kept, e.len - kept));
                head = Some(Extent { len: kept, ..e });
            }
        }
        self.exts.extend(head);
        freed
    }

    /// Mark every unwritten block in `[fb0, fb1)` written, splitting
    /// extents at the range ends and merging where the rule allows.
    /// Returns the converted pieces (the caller writes them whole before
    /// the change commits: they used to read as zeros).
    pub fn mark_written(&mut self, fb0: u64, fb1: u64) -> Vec<Extent> {
        let mut out = Vec::new();
        let mut res = Vec::with_capacity(self.exts.len() + 2);
        for e in self.exts.drain(..) {
            if !e.unwritten || e.end() <= fb0 || e.off.0 >= fb1 {
                res.push(e);
                continue;
            }
            let a = e.off.0.max(fb0);
            let b = e.end().min(fb1);
            let piece = |from: u64, to: u64, unwritten: bool| Extent {
                off: FileBlock(from),
                start: e.start + (from - e.off.0),
                len: to - from,
                unwritten,
            };
            if a > e.off.0 {
                res.push(piece(e.off.0, a, true));
            }
            res.push(piece(a, b, false));
            out.push(piece(a, b, false));
            if b < e.end() {
                res.push(piece(b, e.end(), true));
            }
        }
        self.exts = res;
        self.normalize();
        out
    }

    /// Remove every mapping inside file blocks `[a, b)` (trimming or
    /// splitting the ones that straddle an end); returns the removed
    /// physical runs `(start, len)` in file order.
    pub fn remove_range(&mut self, a: u64, b: u64) -> Vec<(u64, u64)> {
        let mut freed = Vec::new();
        if a >= b {
            return freed;
        }
        let i = self.exts.partition_point(|e| e.end() <= a);
        let j = self.exts.partition_point(|e| e.off.0 < b);
        if i >= j {
            return freed;
        }
        let mut keep = Vec::new();
        for e in self.exts.drain(i..j) {
            let lo = e.off.0.max(a);
            let hi = e.end().min(b);
            freed.push((e.start + (lo - e.off.0), hi - lo));
            if e.off.0 < lo {
                keep.push(Extent {
                    len: lo - e.off.0,
                    ..e
                });
            }
            if hi < e.end() {
                keep.push(Extent {
                    off: FileBlock(hi),
                    start: e.start + (hi - e.off.0),
                    len: e.end() - hi,
                    unwritten: e.unwritten,
                });
            }
        }
        self.exts.splice(i..i, keep);
        freed
    }

    /// Split the mapping that straddles file block `fb` (if any) into two
    /// records meeting at `fb` (not merged back until [`Self::normalize`]).
    pub fn split_at(&mut self, fb: u64) {
        let i = self.exts.partition_point(|e| e.end() <= fb);
        if let Some(e) = self.exts.get(i).copied() {
            if e.off.0 < fb {
                let head = fb - e.off.0;
                self.exts[i].len = head;
                self.exts.insert(
                    i + 1,
                    Extent {
                        off: FileBlock(fb),
                        start: e.start + head,
                        len: e.len - head,
                        unwritten: e.unwritten,
                    },
                );
            }
        }
    }

    /// Merge every mergeable neighbour pair.
    pub fn normalize(&mut self) {
        let mut i = 0;
        while i + 1 < self.exts.len() {
            if self.can_merge(&self.exts[i], &self.exts[i + 1]) {
                let n = self.exts.remove(i + 1);
                self.exts[i].len += n.len;
            } else {
                i += 1;
            }
        }
    }

    /// Where to allocate for a hole starting at file block `fb`: just after
    /// the previous mapping (skipping as many blocks as the hole's distance
    /// from it, so that later fills of the gap can stay contiguous), else
    /// just before the next one, else `None`.
    pub fn target_near(&self, fb: u64) -> Option<u64> {
        let i = self.exts.partition_point(|e| e.end() <= fb);
        if i > 0 {
            let p = &self.exts[i - 1];
            let t = p.start + p.len + (fb - p.end());
            if self.same_ag(p.start, t) {
                return Some(t);
            }
            return Some(p.start + p.len - 1);
        }
        if let Some(n) = self.exts.get(i) {
            if let Some(t) = n.start.checked_sub(n.off.0 - fb) {
                if self.same_ag(n.start, t) {
                    return Some(t);
                }
            }
            return Some(n.start);
        }
        None
    }
}

/// Fill every hole of `[off, off + count)` from `space` (as `unwritten`
/// mappings or written ones), keeping at most `max_recs` extents. Returns the new mappings in file order. On any error
/// (the space allocator's, or `NotSupported` when the list outgrows
/// `max_recs`) everything allocated here is given back and `map` is left
/// as it was.
pub fn fill(
    map: &mut ExtentMap,
    off: u64,
    count: u64,
    max_recs: usize,
    default_near: Option<u64>,
    unwritten: bool,
    space: &mut dyn Space,
) -> Result<Vec<Extent>> {
    if count == 0 {
        return Ok(Vec::new());
    }
    match off.checked_add(count) {
        Some(end) if end <= MAX_STARTOFF + 1 => {}
        _ => {
            return Err(Error::Invalid(format!(
                "file blocks {off}+{count} past the largest file offset"
            )))
        }
    }
    let saved = map.exts.clone();
    let mut got: Vec<Extent> = Vec::new();
    let res = fill_inner(
        map,
        off,
        count,
        max_recs,
        default_near,
        unwritten,
        space,
        &mut got,
    );
    match res {
        Ok(()) => Ok(got),
        Err(e) => {
            map.exts = saved;
            if matches!(e, Error::NotSupported(_)) {
                // Our own refusal: the space is consistent, give back.
                for x in &got {
                    space.free(x.start, x.len)?;
                }
            }
            Err(e)
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn fill_inner(
    map: &mut ExtentMap,
    off: u64,
    count: u64,
    max_recs: usize,
    default_near: Option<u64>,
    unwritten: bool,
    space: &mut dyn Space,
    got: &mut Vec<Extent>,
) -> Result<()> {
    for (hoff, hlen) in map.holes(off, count) {
        let mut pos = hoff;
        let end = hoff + hlen;
        while pos < end {
            let want = (end - pos).min(MAX_EXTLEN);
            let near = map.target_near(pos).or(default_near);
            let (start, len) = space.alloc(near, want)?;
            if len == 0 || len > want {
                return Err(Error::Invalid(format!(
                    "allocator returned {len} blocks for a request of 1..={want}"
                )));
            }
            let e = Extent {
                off: FileBlock(pos),
                start,
                len,
                unwritten,
            };
            got.push(e);
            map.insert(e);
            if map.exts.len() > max_recs {
                return Err(Error::NotSupported(
                    "more extents than the fork's counter allows".into(),
                ));
            }
            pos += len;
        }
    }
    Ok(())
}
