//! The busy realtime ranges of each bitmap block, kept beside the realtime
//! allocator's other in-core state so that a search weighing the free runs
//! of a block reads its busy ranges from a short sorted list instead of
//! walking the CIL's busy list (behind its mutex) every time.
//!
//! The CIL's busy list stays the authority: it decides when a range stops
//! being busy (its checkpoint is stable) and what `force_busy` waits for.
//! This is a mirror of its realtime part, in rt extents.
//!
//! ## Invariant
//! Outside a transaction holding the realtime lock, and inside one for
//! what the CIL holds, a mirrored block's list holds every busy range of
//! the CIL that overlaps the block, with its checkpoint sequence, in order
//! of first extent. It may also hold ranges already retired (their
//! sequence at or below the stable sequence: filtered out when read, and
//! pruned then). Why it holds:
//! - realtime ranges enter the CIL's list only at the commit of a
//!   transaction that freed them, which holds the realtime lock until its
//!   commit has inserted them; before dropping the lock the commit adds
//!   them here ([`RtBusyMirror::committed`]);
//! - they leave it only by retiring, which the sequence filter sees;
//! - a block not mirrored is filled from the CIL's list under the lock
//!   (the caller's `fill`);
//! - a cancelled transaction drops every list (with the rest of the
//!   realtime cache, [`super::rtsum::RtSumCache::invalidate`]): nothing
//!   it did is trusted, every block is filled again.
//!
//! A transaction's own frees, not yet committed, are not here: the reader
//! adds them from the transaction.

/// One busy range: first rt extent, length, checkpoint sequence.
pub type RtBusy = (u64, u64, u64);

/// Most ranges kept over every block (24 bytes each); past it every list
/// is dropped and filled again as needed.
pub const MAX_MIRRORED_RANGES: usize = 1 << 20;

#[derive(Debug, Default)]
pub struct RtBusyMirror {
    /// Bitmap block -> its busy ranges, when mirrored.
    blocks: Vec<Option<Vec<RtBusy>>>,
    held: usize,
}

impl RtBusyMirror {
    /// Forget every list.
    pub fn clear(&mut self) {
        self.blocks.clear();
        self.held = 0;
    }

    /// The busy ranges overlapping rt extents `[lo, hi)` that are busy
    /// still (sequence above `stable`), in order of first extent, each
    /// once, with the oldest sequence among them (`u64::MAX` when none).
    /// Lent from the block's own list when `[lo, hi)` lies in one bitmap
    /// block (the slice may then hold ranges of the block outside
    /// `[lo, hi)`, also busy still: a sweep over runs passes them by),
    /// else gathered into `scratch`. `bpb` is the extents per bitmap
    /// block; `fill(block)` gives every busy range of the CIL overlapping
    /// bitmap block `block`, in order.
    pub fn ranges<'a>(
        &'a mut self,
        bpb: u64,
        lo: u64,
        hi: u64,
        stable: u64,
        scratch: &'a mut Vec<RtBusy>,
        mut fill: impl FnMut(u64) -> Vec<RtBusy>,
    ) -> (&'a [RtBusy], u64) {
        let oldest_of = |rs: &[RtBusy]| {
            rs.iter()
                .filter(|r| r.0 < hi && lo < r.0 + r.1)
                .map(|r| r.2)
                .min()
                .unwrap_or(u64::MAX)
        };
        if hi <= lo {
            return (&[], u64::MAX);
        }
        let (b0, b1) = (lo / bpb, (hi - 1) / bpb);
        let mut pruned = 0;
        for b in b0..=b1 {
            let list = self.list(b, &mut fill);
            let had = list.len();
            list.retain(|r| r.2 > stable);
            pruned += had - list.len();
        }
        self.held -= pruned;
        if b0 == b1 {
            let list = self.blocks[b0 as usize].as_deref().expect("filled above");
            return (list, oldest_of(list));
        }
        scratch.clear();
        for b in b0..=b1 {
            let first = b * bpb;
            let list = self.blocks[b as usize].as_deref().expect("filled above");
            // A range reaching here from an earlier block was taken with
            // that block.
            scratch.extend(
                list.iter()
                    .filter(|r| (b == b0 || r.0 >= first) && r.0 < hi && lo < r.0 + r.1),
            );
        }
        let o = oldest_of(scratch);
        (scratch, o)
    }

    /// A commit at checkpoint `seq` made rt extents `[x, x + n)` busy:
    /// add the range to every mirrored block it overlaps.
    pub fn committed(&mut self, bpb: u64, x: u64, n: u64, seq: u64) {
        if n == 0 {
            return;
        }
        for b in x / bpb..=(x + n - 1) / bpb {
            if let Some(Some(list)) = self.blocks.get_mut(b as usize) {
                let at = list.partition_point(|r| r.0 <= x);
                list.insert(at, (x, n, seq));
                self.held += 1;
            }
        }
    }

    fn list(&mut self, b: u64, fill: &mut impl FnMut(u64) -> Vec<RtBusy>) -> &mut Vec<RtBusy> {
        let i = b as usize;
        if self.blocks.len() <= i {
            self.blocks.resize_with(i + 1, || None);
        }
        if self.blocks[i].is_none() {
            let got = fill(b);
            if self.held + got.len() > MAX_MIRRORED_RANGES {
                self.blocks.iter_mut().for_each(|l| *l = None);
                self.held = 0;
            }
            self.held += got.len();
            self.blocks[i] = Some(got);
        }
        self.blocks[i].as_mut().expect("filled above")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bdev::simrng::SimRng;

    /// The mirror answers what a walk over every busy range answers, as
    /// ranges are committed, retired and blocks filled at random times.
    #[test]
    fn the_mirror_agrees_with_the_whole_list() {
        let bpb = 64u64;
        let mut rng = SimRng::new(0x5eed_0017);
        let mut all: Vec<RtBusy> = Vec::new();
        let mut m = RtBusyMirror::default();
        let mut stable = 0u64;
        for step in 0..4000u64 {
            match rng.next_u64() % 10 {
                0..=4 => {
                    let x = rng.next_u64() % 600;
                    let n = 1 + rng.next_u64() % 150;
                    let seq = stable + 1 + rng.next_u64() % 3;
                    all.push((x, n, seq));
                    m.committed(bpb, x, n, seq);
                }
                5 => stable += 1,
                6 => m.clear(),
                _ => {
                    let lo = rng.next_u64() % 700;
                    let hi = lo + 1 + rng.next_u64() % 200;
                    let mut scratch = Vec::new();
                    let (got, oldest) = m.ranges(bpb, lo, hi, stable, &mut scratch, |b| {
                        let mut v: Vec<RtBusy> = all
                            .iter()
                            .copied()
                            .filter(|r| r.0 < (b + 1) * bpb && b * bpb < r.0 + r.1)
                            .collect();
                        v.sort_by_key(|r| r.0);
                        v
                    });
                    assert!(got.windows(2).all(|p| p[0].0 <= p[1].0), "in order");
                    assert!(got.iter().all(|r| r.2 > stable), "busy still");
                    let out: Vec<(u64, u64)> = got
                        .iter()
                        .filter(|r| r.0 < hi && lo < r.0 + r.1)
                        .map(|r| (r.0, r.1))
                        .collect();
                    let mut want: Vec<RtBusy> = all
                        .iter()
                        .copied()
                        .filter(|r| r.2 > stable && r.0 < hi && lo < r.0 + r.1)
                        .collect();
                    want.sort();
                    let mut got: Vec<(u64, u64)> = out.clone();
                    got.sort();
                    let mut w: Vec<(u64, u64)> = want.iter().map(|r| (r.0, r.1)).collect();
                    w.sort();
                    assert_eq!(got, w, "step {step}: view of [{lo}, {hi})");
                    let o = want.iter().map(|r| r.2).min().unwrap_or(u64::MAX);
                    assert_eq!(oldest, o, "step {step}: oldest");
                }
            }
        }
    }
}
