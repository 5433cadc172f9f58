//! Choosing free realtime extents around busy ones: the busy ranges of a
//! region seen at once ([`BusyView`]), the first clean piece of one run
//! ([`not_busy_piece`]), and the kernel's choice among the free runs of a
//! bitmap block made in one sweep of runs and busy ranges ([`choose`]).
//!
//! A piece is "clean" when no busy range overlaps it: the extents freed by
//! a checkpoint not yet on disk are never handed out (see the module doc
//! of [`super`]).

use super::bits::RtBits;
use crate::error::Result;

/// The busy ranges overlapping rt extents `[x, x + n)`, in extents, in
/// order of first extent, with a running maximum end for overlap
/// queries (the exact-target case of a near search).
pub(super) struct BusyView {
    pub(super) ranges: Vec<(u64, u64)>,
    /// `max_end[i]`: the furthest end of `ranges[..=i]` (ranges may nest).
    max_end: Vec<u64>,
    /// The oldest checkpoint of the ranges (`u64::MAX` when none): while
    /// fewer are stable ([`MetaTx::busy_stable_seq`]), every range seen is
    /// busy still.
    pub(super) oldest: u64,
}

/// A busy range as the sweeps read it: (first extent, length).
pub(super) trait Span: Copy {
    fn span(self) -> (u64, u64);
}

impl Span for (u64, u64) {
    fn span(self) -> (u64, u64) {
        self
    }
}

impl Span for crate::cache::rtbusy::RtBusy {
    fn span(self) -> (u64, u64) {
        (self.0, self.1)
    }
}

/// Call `f` with the busy ranges overlapping rt extents `[x, x + n)` (in
/// order of first extent; possibly with others of the same bitmap block
/// that are busy too) and the oldest checkpoint among those overlapping
/// (`u64::MAX` when none): from the realtime lock's busy mirror
/// (`cache::rtbusy`, filled from the CIL's list where a block is not
/// mirrored), lent without a copy when the range lies in one block, and
/// the transaction's own frees merged in.
pub(super) fn with_busy<R>(
    b: &mut RtBits<'_>,
    x: u64,
    n: u64,
    f: impl FnOnce(&[crate::cache::rtbusy::RtBusy], u64) -> R,
) -> Result<R> {
    let bpb = b.l.bits_per_block();
    let tx = &mut *b.tx;
    let stable = tx.busy_stable_seq();
    let mut own = Vec::new();
    for (a, k, l) in super::busy_pieces(x, n) {
        own.extend(tx.own_busy_ranges(a, k, l).into_iter().map(|(bk, bl)| {
            (
                super::extent_of_key(a, bk),
                bl as u64,
                stable.saturating_add(1),
            )
        }));
    }
    // The mirror lives under the lock; the fills ask the transaction.
    let st = tx.rt_lock()?;
    let mut mirror = std::mem::take(&mut st.busy);
    let mut scratch = std::mem::take(&mut st.busy_scratch);
    let (ranges, oldest) = mirror.ranges(bpb, x, x + n, stable, &mut scratch, |blk| {
        let mut got = Vec::new();
        for (a, k, l) in super::busy_pieces(blk * bpb, bpb) {
            got.extend(
                tx.committed_busy_ranges(a, k, l)
                    .into_iter()
                    .map(|(bk, bl, seq)| (super::extent_of_key(a, bk), bl as u64, seq)),
            );
        }
        got
    });
    let r = if own.is_empty() {
        f(ranges, oldest)
    } else {
        own.extend_from_slice(ranges);
        own.sort_unstable_by_key(|r| r.0);
        f(&own, oldest.min(stable.saturating_add(1)))
    };
    let st = tx.rt_lock()?;
    st.busy = mirror;
    st.busy_scratch = scratch;
    Ok(r)
}

impl BusyView {
    /// The view of `[x, x + n)` ([`with_busy`]).
    pub(super) fn of(b: &mut RtBits<'_>, x: u64, n: u64) -> Result<BusyView> {
        with_busy(b, x, n, |rs, oldest| {
            let mut v = Self::from_ranges(rs.iter().map(|r| r.span()).collect());
            v.oldest = oldest;
            v
        })
    }

    /// A view of `ranges` (sorted by first extent).
    pub(super) fn from_ranges(ranges: Vec<(u64, u64)>) -> BusyView {
        debug_assert!(ranges.windows(2).all(|w| w[0].0 <= w[1].0));
        let mut far = 0;
        let max_end = ranges
            .iter()
            .map(|&(s, l)| {
                far = far.max(s + l);
                far
            })
            .collect();
        BusyView {
            ranges,
            max_end,
            oldest: u64::MAX,
        }
    }

    /// The busy range overlapping `[x, x + n)` that starts first (so
    /// that `[x, its start)` is clear of busy ranges), in two binary
    /// searches: the ranges starting before `x + n` are a prefix, and the
    /// first of them reaching past `x` is where the running maximum end
    /// first passes `x`.
    pub(super) fn overlap(&self, x: u64, n: u64) -> Option<(u64, u64)> {
        let i = self.ranges.partition_point(|&(s, _)| s < x + n);
        let j = self.max_end.partition_point(|&e| e <= x);
        (j < i).then(|| self.ranges[j])
    }
}

/// The first piece of free run `[f, f + len)` that no busy extent of
/// `view` overlaps and that holds at least `minlen` extents (cut to
/// `maxlen`). Busy extents are skipped, not waited for (a log force per
/// collision would make every allocation after a free wait for the disk);
/// `seen` records that one was skipped.
pub(super) fn unbusy(
    view: &BusyView,
    seen: &mut bool,
    f: u64,
    len: u64,
    minlen: u64,
    maxlen: u64,
) -> Option<(u64, u64)> {
    not_busy_piece(f, len, minlen, maxlen, |x, n| {
        let o = view.overlap(x, n);
        *seen |= o.is_some();
        o
    })
}

/// The first piece of `[f, f + len)`, at least `minlen` and at most
/// `maxlen` long, that no busy range overlaps. `busy(x, n)` returns some
/// busy range overlapping `[x, x + n)` (any one: the CIL's lookup gives the
/// one that starts last), so a candidate is shrunk until nothing overlaps
/// it, never trusted after one look.
pub(super) fn not_busy_piece(
    mut f: u64,
    len: u64,
    minlen: u64,
    maxlen: u64,
    mut busy: impl FnMut(u64, u64) -> Option<(u64, u64)>,
) -> Option<(u64, u64)> {
    let end = f + len;
    'outer: while f < end && end - f >= minlen {
        let mut hi = end.min(f + maxlen);
        loop {
            match busy(f, hi - f) {
                None => return Some((f, hi - f)),
                Some((bs, bl)) => {
                    if bs <= f || bs - f < minlen {
                        // No piece long enough before this busy range.
                        f = (bs + bl).max(f + 1);
                        continue 'outer;
                    }
                    hi = bs.min(hi);
                }
            }
        }
    }
    None
}

/// The kernel's choice among the free runs `runs` of one bitmap block (in
/// order; those shorter than `minlen` are passed over), around the busy
/// ranges `busy` (sorted by first extent; may nest): the first clean piece
/// of `maxlen`, else the run of the greatest length (the earliest of
/// equals) that has a clean piece of at least `minlen`, its first such
/// piece cut to `maxlen`. The same answer as [`not_busy_piece`] asked run
/// by run, from one sweep: O(runs + busy ranges). `seen` is set when a
/// busy range cut a run.
pub(super) fn choose<B: Span>(
    runs: impl IntoIterator<Item = (u64, u64)>,
    busy: &[B],
    minlen: u64,
    maxlen: u64,
    seen: &mut bool,
) -> Option<(u64, u64)> {
    let mut j = 0;
    // The furthest end of busy[..j] (the ranges starting at or before p).
    let mut cover = 0u64;
    // (length of the run, its first clean piece of at least minlen)
    let mut best: Option<(u64, (u64, u64))> = None;
    for (f, n) in runs {
        if n < minlen {
            continue;
        }
        let e = f + n;
        let mut p = f;
        let mut first: Option<(u64, u64)> = None;
        while p < e {
            while let Some((s, l)) = busy.get(j).map(|r| r.span()).filter(|r| r.0 <= p) {
                cover = cover.max(s + l);
                j += 1;
            }
            if cover > p {
                *seen = true;
                p = cover.min(e);
                continue;
            }
            let q = busy.get(j).map_or(e, |r| r.span().0.min(e));
            if q < e {
                *seen = true;
            }
            let len = q - p;
            if len >= maxlen {
                return Some((p, maxlen));
            }
            if len >= minlen && first.is_none() {
                first = Some((p, len));
            }
            p = q;
        }
        if let Some(piece) = first {
            if best.is_none_or(|(bn, _)| n > bn) {
                best = Some((n, piece));
            }
        }
    }
    best.map(|(_, (p, len))| (p, len.min(maxlen)))
}
