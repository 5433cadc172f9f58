//! Busy extents: ranges freed by a committed transaction whose checkpoint
//! is not yet stable. Until it is, their old owner's mapping could still
//! be recovered, so the allocators must not hand them out (see
//! [`crate::xact`]). Kept per AG, by first block, so that an overlap query
//! costs a range lookup, not a scan of every busy extent: allocators ask
//! for every candidate they consider.
//!
//! Invariant: an AG's `max_len` is at least the length of every extent it
//! holds, so an extent overlapping `[b, b + len)` starts in
//! `(b - max_len, b + len)`.

use std::collections::BTreeMap;

use crate::types::{AgBlock, AgNumber};

#[derive(Debug, Default)]
struct AgBusy {
    /// (first block, checkpoint sequence) -> length of each busy extent
    /// (a range can be freed twice in one checkpoint window, AGFL churn:
    /// the longer one is kept). Flat, so that a walk over a region reads
    /// no per-extent allocation.
    by_start: BTreeMap<(u32, u64), u32>,
    max_len: u32,
}

#[derive(Debug, Default)]
pub(crate) struct BusyList {
    ags: BTreeMap<u32, AgBusy>,
    /// The newest checkpoint whose extents were retired: a busy range of
    /// checkpoint `s` is busy still while this is below `s`.
    retired_upto: u64,
}

impl BusyList {
    pub(crate) fn insert(&mut self, agno: AgNumber, agbno: AgBlock, len: u32, seq: u64) {
        let ag = self.ags.entry(agno.0).or_default();
        ag.max_len = ag.max_len.max(len);
        let l = ag.by_start.entry((agbno.0, seq)).or_default();
        *l = (*l).max(len);
    }

    /// Drop the extents of checkpoints up to `seq` (now stable).
    pub(crate) fn retire(&mut self, seq: u64) {
        self.ags.retain(|_, ag| {
            ag.by_start.retain(|&(_, s), _| s > seq);
            !ag.by_start.is_empty()
        });
        self.retired_upto = self.retired_upto.max(seq);
    }

    /// Every busy range of a checkpoint up to this one has been retired
    /// (see `retired_upto`).
    pub(crate) fn retired_upto(&self) -> u64 {
        self.retired_upto
    }

    /// The busy extent overlapping `[agbno, agbno + len)` of `agno` that
    /// starts last, if any.
    pub(crate) fn overlap(
        &self,
        agno: AgNumber,
        agbno: AgBlock,
        len: u32,
    ) -> Option<(AgBlock, u32)> {
        let ag = self.ags.get(&agno.0)?;
        if len == 0 {
            return None;
        }
        let lo = agbno.0.saturating_sub(ag.max_len.saturating_sub(1));
        let hi = agbno.0.saturating_add(len);
        ag.by_start
            .range((lo, 0)..(hi, 0))
            .rev()
            .find(|(&(s, _), &l)| s as u64 + l as u64 > agbno.0 as u64)
            .map(|(&(s, _), &l)| (AgBlock(s), l))
    }

    /// Every busy extent overlapping `[agbno, agbno + len)` of `agno`,
    /// appended to `out` in order of first block, with its checkpoint
    /// sequence (one per first block: the longest freed there, and the
    /// oldest checkpoint of those, the first that may make part of it
    /// reusable). One range walk for a whole region, where
    /// [`Self::overlap`] would be asked once per candidate.
    pub(crate) fn ranges(
        &self,
        agno: AgNumber,
        agbno: AgBlock,
        len: u32,
        out: &mut Vec<(AgBlock, u32, u64)>,
    ) {
        let Some(ag) = self.ags.get(&agno.0) else {
            return;
        };
        if len == 0 {
            return;
        }
        let lo = agbno.0.saturating_sub(ag.max_len.saturating_sub(1));
        let hi = agbno.0.saturating_add(len);
        let first = out.len();
        for (&(s, seq), &l) in ag.by_start.range((lo, 0)..(hi, 0)) {
            if s as u64 + l as u64 <= agbno.0 as u64 {
                continue;
            }
            let n = out.len();
            match out.last_mut() {
                // Several checkpoints freed ranges starting here.
                Some(last) if n > first && last.0 .0 == s => {
                    last.1 = last.1.max(l);
                    last.2 = last.2.min(seq);
                }
                _ => out.push((AgBlock(s), l, seq)),
            }
        }
    }

    /// The newest checkpoint holding a busy extent.
    pub(crate) fn max_seq(&self) -> Option<u64> {
        self.ags
            .values()
            .flat_map(|ag| ag.by_start.keys())
            .map(|&(_, s)| s)
            .max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bdev::simrng::SimRng;

    #[test]
    fn overlaps_found_by_range() {
        let mut b = BusyList::default();
        b.insert(AgNumber(1), AgBlock(100), 50, 7);
        b.insert(AgNumber(1), AgBlock(1000), 5, 8);
        b.insert(AgNumber(2), AgBlock(120), 1, 9);
        let o = |b: &BusyList, a, s, l| b.overlap(AgNumber(a), AgBlock(s), l);
        assert_eq!(o(&b, 1, 149, 1), Some((AgBlock(100), 50)));
        assert_eq!(o(&b, 1, 150, 10), None, "just past the end");
        assert_eq!(o(&b, 1, 90, 11), Some((AgBlock(100), 50)));
        assert_eq!(o(&b, 1, 90, 10), None, "just before");
        assert_eq!(
            o(&b, 1, 0, 2000),
            Some((AgBlock(1000), 5)),
            "the last one starting in range"
        );
        assert_eq!(o(&b, 2, 100, 100), Some((AgBlock(120), 1)));
        assert_eq!(o(&b, 3, 0, u32::MAX), None);
        assert_eq!(b.max_seq(), Some(9));
        let mut out = Vec::new();
        b.ranges(AgNumber(1), AgBlock(0), 2000, &mut out);
        assert_eq!(out, vec![(AgBlock(100), 50, 7), (AgBlock(1000), 5, 8)]);
        assert_eq!(b.retired_upto(), 0);
        b.retire(8);
        assert_eq!(b.retired_upto(), 8);
        assert_eq!(o(&b, 1, 0, 2000), None);
        assert_eq!(o(&b, 2, 120, 1), Some((AgBlock(120), 1)));
        b.retire(9);
        assert_eq!(b.max_seq(), None);
        assert!(b.ags.is_empty());
    }

    #[test]
    fn ranges_agree_with_overlap() {
        // Every range `ranges` lists overlaps the query; a query with no
        // listed range has no overlap; the last listed is what `overlap`
        // answers (the overlapping range that starts last).
        let mut b = BusyList::default();
        let mut rng = SimRng::new(0x1234_5678u64);
        let mut next = |m: u64| rng.next_u64() % m;
        for i in 0..200 {
            b.insert(
                AgNumber(0),
                AgBlock(next(5000) as u32),
                1 + next(300) as u32,
                i,
            );
        }
        for _ in 0..2000 {
            let (s, l) = (next(5400) as u32, 1 + next(400) as u32);
            let mut out = Vec::new();
            b.ranges(AgNumber(0), AgBlock(s), l, &mut out);
            assert!(out.windows(2).all(|w| w[0].0 .0 < w[1].0 .0), "in order");
            for &(bs, bl, _) in &out {
                assert!(bs.0 < s + l && s < bs.0 + bl, "{bs:?}+{bl} misses {s}+{l}");
            }
            let o = b.overlap(AgNumber(0), AgBlock(s), l);
            assert_eq!(o.map(|x| x.0), out.last().map(|x| x.0), "query {s}+{l}");
            // Nothing overlapping is left out.
            for p in s..s + l {
                let hit = b.overlap(AgNumber(0), AgBlock(p), 1).is_some();
                let listed = out.iter().any(|&(bs, bl, _)| bs.0 <= p && p < bs.0 + bl);
                assert_eq!(hit, listed, "block {p} of query {s}+{l}");
            }
        }
    }

    #[test]
    fn overlapping_busy_extents_and_the_edge_of_the_block_space() {
        let mut b = BusyList::default();
        b.insert(AgNumber(0), AgBlock(u32::MAX - 3), 3, 1);
        assert!(b.overlap(AgNumber(0), AgBlock(u32::MAX - 1), 1).is_some());
        assert!(b.overlap(AgNumber(0), AgBlock(u32::MAX), 1).is_none());
        // A long extent and a short one inside it: a query past the
        // short one still finds the long one.
        b.insert(AgNumber(5), AgBlock(10), 100, 1);
        b.insert(AgNumber(5), AgBlock(20), 2, 1);
        assert_eq!(
            b.overlap(AgNumber(5), AgBlock(50), 1),
            Some((AgBlock(10), 100))
        );
    }
}
