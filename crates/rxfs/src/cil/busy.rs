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
    /// First block -> (length, checkpoint sequence) of each busy extent
    /// starting there (a range can be freed twice in one checkpoint
    /// window: AGFL churn).
    by_start: BTreeMap<u32, Vec<(u32, u64)>>,
    max_len: u32,
}

#[derive(Debug, Default)]
pub(crate) struct BusyList {
    ags: BTreeMap<u32, AgBusy>,
}

impl BusyList {
    pub(crate) fn insert(&mut self, agno: AgNumber, agbno: AgBlock, len: u32, seq: u64) {
        let ag = self.ags.entry(agno.0).or_default();
        ag.max_len = ag.max_len.max(len);
        ag.by_start.entry(agbno.0).or_default().push((len, seq));
    }

    /// Drop the extents of checkpoints up to `seq` (now stable).
    pub(crate) fn retire(&mut self, seq: u64) {
        self.ags.retain(|_, ag| {
            ag.by_start.retain(|_, v| {
                v.retain(|&(_, s)| s > seq);
                !v.is_empty()
            });
            !ag.by_start.is_empty()
        });
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
        for (&s, v) in ag.by_start.range(lo..hi).rev() {
            if let Some(&(l, _)) = v
                .iter()
                .find(|&&(l, _)| s as u64 + l as u64 > agbno.0 as u64)
            {
                return Some((AgBlock(s), l));
            }
        }
        None
    }

    /// The newest checkpoint holding a busy extent.
    pub(crate) fn max_seq(&self) -> Option<u64> {
        self.ags
            .values()
            .flat_map(|ag| ag.by_start.values().flatten())
            .map(|&(_, s)| s)
            .max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        b.retire(8);
        assert_eq!(o(&b, 1, 0, 2000), None);
        assert_eq!(o(&b, 2, 120, 1), Some((AgBlock(120), 1)));
        b.retire(9);
        assert_eq!(b.max_seq(), None);
        assert!(b.ags.is_empty());
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
