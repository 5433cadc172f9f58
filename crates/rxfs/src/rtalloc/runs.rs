//! Keeping a bitmap block's entry of the free-run index right across a
//! change of its bits, without scanning the whole block again.
//!
//! The runs of a block are maximal: a change of bits `[a, b)` can only
//! alter the runs that overlap `[a, b)` or touch it (end at `a`, start at
//! `b`); every other run keeps its bounds. So the runs of `[lo, hi)` (the
//! union of `[a, b)` and the runs touching it) are found again from the
//! changed bits, the others are kept.

use crate::format::rt::{word, RTWORD_BITS};

/// The free runs of a bitmap block after bits `[a, b)` (extent numbers)
/// changed, from its runs before (`old`, in order, cut at the block's
/// bounds) and its bits after (`block`, whose first bit is extent `base`,
/// `nbits` of them valid).
pub(super) fn update_runs(
    old: &[(u64, u64)],
    a: u64,
    b: u64,
    block: &[u8],
    base: u64,
    nbits: u64,
) -> Vec<(u64, u64)> {
    // Runs wholly before and after the affected stretch.
    let first = old.partition_point(|&(s, n)| s + n < a);
    let last = old.partition_point(|&(s, _)| s <= b);
    let lo = old
        .get(first)
        .filter(|_| first < last)
        .map_or(a, |r| r.0.min(a));
    let hi = if first < last {
        let r = old[last - 1];
        (r.0 + r.1).max(b)
    } else {
        b
    };
    let mut out = Vec::with_capacity(old.len() + 1);
    out.extend_from_slice(&old[..first]);
    scan(block, base, nbits, lo, hi, &mut out);
    out.extend_from_slice(&old[last..]);
    out
}

/// Append the free runs of extents `[lo, hi)` of the block.
fn scan(block: &[u8], base: u64, nbits: u64, lo: u64, hi: u64, out: &mut Vec<(u64, u64)>) {
    let (mut p, end) = (lo - base, (hi - base).min(nbits));
    let mut run: Option<u64> = None;
    while p < end {
        let w = word(block, (p / RTWORD_BITS) as usize) >> (p % RTWORD_BITS);
        let left = (RTWORD_BITS - p % RTWORD_BITS).min(end - p);
        // Bits of this word from p on that are the same as p's.
        let same = if w & 1 == 1 {
            w.trailing_ones() as u64
        } else {
            w.trailing_zeros() as u64
        }
        .min(left);
        match (w & 1 == 1, run) {
            (true, None) => run = Some(p),
            (false, Some(s)) => {
                out.push((base + s, p - s));
                run = None;
            }
            _ => {}
        }
        p += same.max(1);
    }
    if let Some(s) = run {
        out.push((base + s, end - s));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bdev::simrng::SimRng;
    use crate::format::rt::{set_bits, FreeRunScanner, RtLayout};

    fn runs_of(l: &RtLayout, block: &[u8]) -> Vec<(u64, u64)> {
        let mut v = Vec::new();
        let mut sc = FreeRunScanner::at(l, 1);
        sc.feed(block, |s, n| v.push((s, n)));
        sc.finish(|s, n| v.push((s, n)));
        v
    }

    #[test]
    fn updated_runs_are_a_fresh_scan() {
        // Block 1 of a 3-block bitmap of 512-byte blocks (4096 bits each).
        let l = RtLayout {
            blocksize: 512,
            rextsize: 1,
            rblocks: 3 * 4096,
            rextents: 3 * 4096,
            rbmblocks: 3,
            rextslog: 13,
        };
        let base = 4096;
        let mut rng = SimRng::new(99u64);
        let mut r = || rng.next_u64();
        let mut block = vec![0u8; 512];
        let mut runs = runs_of(&l, &block);
        for i in 0..4000 {
            // Mostly short changes, sometimes long ones, at the edges too.
            let len = if i % 10 == 0 {
                1 + r() % 2000
            } else {
                1 + r() % 40
            };
            let at = match i % 7 {
                0 => 0,
                1 => 4096 - len.min(4096),
                _ => r() % (4096 - len.min(4095)),
            };
            let len = len.min(4096 - at);
            set_bits(&mut block, at, len, r() % 2 == 0);
            runs = update_runs(&runs, base + at, base + at + len, &block, base, 4096);
            assert_eq!(runs, runs_of(&l, &block), "change {i}: {at}+{len}");
        }
    }
}
