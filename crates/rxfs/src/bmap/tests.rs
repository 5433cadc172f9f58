//! Extent-list editing against a model of mapped blocks, with a fake
//! allocator that fragments free space.

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};

use super::map::{fill, ExtentMap, Space};
use crate::error::{Error, Result};
use crate::format::bmbt::{Extent, MAX_EXTLEN, MAX_STARTOFF};
use crate::types::FileBlock;

fn ext(off: u64, start: u64, len: u64) -> Extent {
    Extent {
        off: FileBlock(off),
        start,
        len,
        unwritten: false,
    }
}

/// A bitmap allocator over `agcount` AGs of `agsize` blocks each, numbered
/// like fsblocks (`agno << agblklog | agbno`).
struct FakeSpace {
    agblklog: u8,
    agsize: u64,
    agcount: u64,
    used: Vec<bool>,
    allocs: u64,
}

impl FakeSpace {
    fn new(agblklog: u8, agsize: u64, agcount: u64) -> Self {
        assert!(agsize <= 1 << agblklog);
        FakeSpace {
            agblklog,
            agsize,
            agcount,
            used: vec![false; (agsize * agcount) as usize],
            allocs: 0,
        }
    }
    fn idx(&self, fsb: u64) -> Option<usize> {
        let ag = fsb >> self.agblklog;
        let b = fsb & ((1 << self.agblklog) - 1);
        (ag < self.agcount && b < self.agsize).then(|| (ag * self.agsize + b) as usize)
    }
    fn fsb(&self, idx: usize) -> u64 {
        let idx = idx as u64;
        ((idx / self.agsize) << self.agblklog) | (idx % self.agsize)
    }
    fn used_count(&self) -> u64 {
        self.used.iter().filter(|u| **u).count() as u64
    }
    /// Occupy a random `pct` percent of the blocks (fragmentation).
    fn scatter(&mut self, rng: &mut impl Rng, pct: u32) {
        for u in self.used.iter_mut() {
            if rng.gen_range(0..100) < pct {
                *u = true;
            }
        }
    }
}

impl Space for FakeSpace {
    fn alloc(&mut self, near: Option<u64>, maxlen: u64) -> Result<(u64, u64)> {
        self.allocs += 1;
        let n = self.used.len();
        let start = near.and_then(|f| self.idx(f)).unwrap_or(0);
        for k in 0..n {
            let i = (start + k) % n;
            if self.used[i] {
                continue;
            }
            // A run stays inside one AG.
            let ag_end = (i as u64 / self.agsize + 1) * self.agsize;
            let mut len = 0u64;
            while len < maxlen && (i as u64 + len) < ag_end && !self.used[i + len as usize] {
                len += 1;
            }
            for j in 0..len as usize {
                self.used[i + j] = true;
            }
            return Ok((self.fsb(i), len));
        }
        Err(Error::NoSpace)
    }
    fn free(&mut self, start: u64, len: u64) -> Result<()> {
        for b in start..start + len {
            let i = self.idx(b).expect("free outside the space");
            assert!(self.used[i], "double free of {b}");
            self.used[i] = false;
        }
        Ok(())
    }
}

/// Everything a map must satisfy, and agreement with the model.
fn check(map: &ExtentMap, model: &BTreeMap<u64, (u64, bool)>, max_recs: usize, space: &FakeSpace) {
    map.check().unwrap();
    assert!(map.exts.len() <= max_recs);
    let mut seen = BTreeMap::new();
    for (i, e) in map.exts.iter().enumerate() {
        // One AG per extent.
        assert_eq!(
            e.start >> map.agblklog,
            (e.start + e.len - 1) >> map.agblklog
        );
        for k in 0..e.len {
            seen.insert(e.off.0 + k, (e.start + k, e.unwritten));
            assert!(space.used[space.idx(e.start + k).unwrap()]);
        }
        // Maximal merging: no mergeable neighbours left.
        if let Some(n) = map.exts.get(i + 1) {
            let mergeable = !e.unwritten
                && !n.unwritten
                && e.end() == n.off.0
                && e.start + e.len == n.start
                && e.start >> map.agblklog == n.start >> map.agblklog
                && e.len + n.len <= MAX_EXTLEN;
            assert!(!mergeable, "unmerged neighbours {e:?} {n:?}");
        }
    }
    assert_eq!(&seen, model);
    // No leaks: the space holds exactly the mapped blocks plus the
    // fragmentation it started with (accounted by the caller).
    assert_eq!(map.blocks(), model.len() as u64);
}

#[test]
fn holes_and_lookup() {
    let m = ExtentMap::new(vec![ext(2, 100, 3), ext(10, 200, 2)], 10);
    assert_eq!(m.holes(0, 20), vec![(0, 2), (5, 5), (12, 8)]);
    assert_eq!(m.holes(3, 2), vec![]);
    assert_eq!(m.holes(4, 7), vec![(5, 5)]);
    assert_eq!(m.holes(12, 0), vec![]);
    assert_eq!(m.lookup(4).unwrap().start, 100);
    assert!(m.lookup(5).is_none());
    assert_eq!(m.lookup(11).unwrap().start, 200);
}

#[test]
fn insert_merges_both_sides_but_not_across_ags_or_unwritten() {
    let mut m = ExtentMap::new(vec![ext(0, 100, 4), ext(8, 108, 4)], 10);
    m.insert(ext(4, 104, 4));
    assert_eq!(m.exts, vec![ext(0, 100, 12)]);
    // Physically contiguous across an AG boundary (agsize = 1 << agblklog):
    // must stay two extents.
    let mut m = ExtentMap::new(vec![ext(0, 1020, 4)], 10);
    m.insert(ext(4, 1024, 4));
    assert_eq!(m.exts.len(), 2);
    // Unwritten neighbours stay apart.
    let mut u = ext(0, 100, 4);
    u.unwritten = true;
    let mut m = ExtentMap::new(vec![u], 10);
    m.insert(ext(4, 104, 4));
    assert_eq!(m.exts.len(), 2);
    // Not beyond MAX_EXTLEN.
    let mut m = ExtentMap::new(vec![ext(0, 0, MAX_EXTLEN)], 30);
    m.insert(ext(MAX_EXTLEN, MAX_EXTLEN, 1));
    assert_eq!(m.exts.len(), 2);
}

#[test]
fn truncate_trims_and_returns_tails() {
    let mut m = ExtentMap::new(vec![ext(0, 100, 4), ext(6, 300, 4), ext(20, 500, 1)], 10);
    assert_eq!(m.truncate(8), vec![(302, 2), (500, 1)]);
    assert_eq!(m.exts, vec![ext(0, 100, 4), ext(6, 300, 2)]);
    assert_eq!(m.truncate(8), vec![]);
    assert_eq!(m.truncate(0), vec![(100, 4), (300, 2)]);
    assert!(m.exts.is_empty());
}

#[test]
fn check_rejects_overlap_and_bad_lengths() {
    assert!(ExtentMap::new(vec![ext(0, 1, 4), ext(3, 9, 1)], 10)
        .check()
        .is_err());
    assert!(ExtentMap::new(vec![ext(5, 1, 1), ext(0, 9, 1)], 10)
        .check()
        .is_err());
    assert!(ExtentMap::new(vec![ext(0, 1, 0)], 10).check().is_err());
    assert!(ExtentMap::new(vec![ext(MAX_STARTOFF, 1, 2)], 10)
        .check()
        .is_err());
    assert!(ExtentMap::new(vec![ext(0, 1, 4), ext(4, 9, 1)], 10)
        .check()
        .is_ok());
}

#[test]
fn target_near_follows_the_previous_extent() {
    let m = ExtentMap::new(vec![ext(4, 100, 4), ext(20, 300, 4)], 10);
    assert_eq!(m.target_near(8), Some(104));
    assert_eq!(m.target_near(10), Some(106));
    assert_eq!(m.target_near(0), Some(96));
    assert_eq!(ExtentMap::new(vec![], 10).target_near(5), None);
}

#[test]
fn fill_contiguous_space_gives_one_extent() {
    let mut sp = FakeSpace::new(10, 1000, 2);
    let mut m = ExtentMap::new(vec![], 10);
    let new = fill(&mut m, 0, 100, 12, Some(50), false, &mut sp).unwrap();
    assert_eq!(new, vec![ext(0, 50, 100)]);
    // Appending continues contiguously and merges.
    fill(&mut m, 100, 10, 12, None, false, &mut sp).unwrap();
    assert_eq!(m.exts, vec![ext(0, 50, 110)]);
    assert_eq!(sp.used_count(), 110);
}

#[test]
fn fill_overflow_rolls_back() {
    // Every other block used: each allocation gets one block.
    let mut sp = FakeSpace::new(10, 1000, 1);
    for i in (0..1000).step_by(2) {
        sp.used[i] = true;
    }
    let before = sp.used_count();
    let mut m = ExtentMap::new(vec![ext(0, 1, 1)], 10);
    let err = fill(&mut m, 1, 12, 12, None, false, &mut sp).unwrap_err();
    assert!(matches!(err, Error::NotSupported(_)), "{err}");
    assert_eq!(m.exts, vec![ext(0, 1, 1)]);
    assert_eq!(sp.used_count(), before);
    // 11 more fit exactly.
    fill(&mut m, 1, 11, 12, None, false, &mut sp).unwrap();
    assert_eq!(m.exts.len(), 12);
}

#[test]
fn fill_enospc_rolls_back() {
    let mut sp = FakeSpace::new(4, 16, 1);
    let mut m = ExtentMap::new(vec![], 4);
    let err = fill(&mut m, 0, 17, 12, None, false, &mut sp).unwrap_err();
    assert!(matches!(err, Error::NoSpace));
    // The map is untouched; the space is the cancelled transaction's.
    assert!(m.exts.is_empty());
    assert_eq!(sp.used_count(), 16);
}

#[test]
fn fill_rejects_offsets_past_the_limit() {
    let mut sp = FakeSpace::new(4, 16, 1);
    let mut m = ExtentMap::new(vec![], 4);
    assert!(fill(&mut m, MAX_STARTOFF, 2, 12, None, false, &mut sp).is_err());
    assert!(fill(&mut m, u64::MAX, 2, 12, None, false, &mut sp).is_err());
    assert_eq!(sp.allocs, 0);
}

/// Random fills and truncations against a block-level model, over spaces
/// with and without a gap between AGs, fragmented to varying degrees.
#[test]
fn random_edits_match_the_model() {
    for seed in 0..60u64 {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let (agblklog, agsize) = if seed % 2 == 0 { (6, 64) } else { (7, 100) };
        let mut sp = FakeSpace::new(agblklog, agsize, 4);
        sp.scatter(&mut rng, (seed % 5) as u32 * 15);
        let base = sp.used_count();
        let max_recs = [1usize, 4, 12, 21][(seed % 4) as usize];
        let mut m = ExtentMap::new(vec![], agblklog);
        let mut model: BTreeMap<u64, (u64, bool)> = BTreeMap::new();
        for step in 0..200 {
            let op = rng.gen_range(0..8);
            if op == 0 {
                let from = rng.gen_range(0..80);
                let freed = m.truncate(from);
                let mut n = 0;
                for (s, l) in freed {
                    sp.free(s, l).unwrap();
                    n += l;
                }
                let gone: Vec<u64> = model.range(from..).map(|(k, _)| *k).collect();
                assert_eq!(gone.len() as u64, n, "seed {seed} step {step}");
                for k in gone {
                    model.remove(&k);
                }
            } else if op == 1 {
                let a = rng.gen_range(0..64);
                let b = a + rng.gen_range(0..24);
                let conv = m.mark_written(a, b);
                for e in &conv {
                    for k in 0..e.len {
                        let v = model.get_mut(&(e.off.0 + k)).expect("converted a hole");
                        assert_eq!(*v, (e.start + k, true), "seed {seed} step {step}");
                        v.1 = false;
                    }
                }
                let want = model.range(a..b).filter(|(_, v)| v.1).count();
                assert_eq!(want, 0, "seed {seed} step {step}: unwritten left");
                if m.exts.len() > max_recs {
                    // What prepare_write refuses; undo by truncation.
                    let freed = m.truncate(0);
                    for (s, l) in freed {
                        sp.free(s, l).unwrap();
                    }
                    model.clear();
                }
            } else {
                let off = rng.gen_range(0..64);
                let count = rng.gen_range(0..24);
                let unwritten = op == 2;
                let before = m.clone();
                let used_before = sp.used.clone();
                let near = Some(rng.gen_range(0..4u64) << agblklog);
                match fill(&mut m, off, count, max_recs, near, unwritten, &mut sp) {
                    Ok(new) => {
                        for e in &new {
                            assert_eq!(e.unwritten, unwritten);
                            for k in 0..e.len {
                                let fb = e.off.0 + k;
                                assert!((off..off + count).contains(&fb));
                                let v = (e.start + k, unwritten);
                                assert!(model.insert(fb, v).is_none());
                            }
                        }
                        for fb in off..off + count {
                            assert!(model.contains_key(&fb), "seed {seed}: hole left at {fb}");
                        }
                    }
                    Err(Error::NotSupported(_)) => {
                        assert_eq!(m, before, "seed {seed} step {step}");
                    }
                    Err(Error::NoSpace) => {
                        assert_eq!(m, before, "seed {seed} step {step}");
                        // The caller cancels the transaction.
                        sp.used = used_before;
                    }
                    Err(e) => panic!("seed {seed} step {step}: {e}"),
                }
            }
            check(&m, &model, max_recs, &sp);
            assert_eq!(
                sp.used_count(),
                base + model.len() as u64,
                "seed {seed}: leak"
            );
        }
    }
}

#[test]
fn mark_written_splits_and_merges() {
    let mut u = ext(4, 104, 8);
    u.unwritten = true;
    // Written neighbour physically before: the converted head merges.
    let mut m = ExtentMap::new(vec![ext(0, 100, 4), u], 10);
    let conv = m.mark_written(4, 6);
    assert_eq!(conv, vec![ext(4, 104, 2)]);
    let mut tail = ext(6, 106, 6);
    tail.unwritten = true;
    assert_eq!(m.exts, vec![ext(0, 100, 6), tail]);
    // A middle piece splits one extent into three.
    let mut m = ExtentMap::new(vec![u], 10);
    m.mark_written(6, 8);
    assert_eq!(m.exts.len(), 3);
    assert_eq!(m.exts[1], ext(6, 106, 2));
    // Converting the rest merges everything back into one written extent.
    m.mark_written(0, 100);
    assert_eq!(m.exts, vec![ext(4, 104, 8)]);
}

#[test]
fn remove_range_splits_and_returns_the_middle() {
    let mut u = ext(20, 500, 10);
    u.unwritten = true;
    let mut m = ExtentMap::new(vec![ext(0, 100, 10), ext(12, 300, 4), u], 10);
    // Inside one extent: it splits in two.
    assert_eq!(m.remove_range(2, 5), vec![(102, 3)]);
    assert_eq!(m.exts[..2], [ext(0, 100, 2), ext(5, 105, 5)]);
    // Across extents, trimming both ends; states kept.
    assert_eq!(m.remove_range(8, 25), vec![(108, 2), (300, 4), (500, 5)]);
    let mut tail = ext(25, 505, 5);
    tail.unwritten = true;
    assert_eq!(m.exts, vec![ext(0, 100, 2), ext(5, 105, 3), tail]);
    // Holes only, empty range: nothing.
    assert_eq!(m.remove_range(10, 20), vec![]);
    assert_eq!(m.remove_range(7, 7), vec![]);
    m.check().unwrap();
}

#[test]
fn split_at_then_normalize_merges_back() {
    let mut m = ExtentMap::new(vec![ext(0, 100, 10)], 10);
    m.split_at(4);
    assert_eq!(m.exts, vec![ext(0, 100, 4), ext(4, 104, 6)]);
    m.split_at(4);
    m.split_at(20);
    assert_eq!(m.exts.len(), 2);
    m.normalize();
    assert_eq!(m.exts, vec![ext(0, 100, 10)]);
    // Unwritten neighbours merge with each other, not with written ones.
    let mut a = ext(0, 100, 4);
    a.unwritten = true;
    let mut b = ext(4, 104, 4);
    b.unwritten = true;
    let mut m = ExtentMap::new(vec![a, b, ext(8, 108, 2)], 10);
    m.normalize();
    a.len = 8;
    assert_eq!(m.exts, vec![a, ext(8, 108, 2)]);
}
