//! Unit tests of the realtime bitmap and summary format, on blocks made by
//! mkfs.xfs and xfs_db (see tests/data/rt/README.md) and on synthetic ones
//! checked against a naive bit-by-bit model.

use super::*;
use crate::format::sb::Superblock;
use proptest::prelude::*;

const SB_4K: &[u8] = include_bytes!("../../tests/data/rt/b4k_r1_sb.bin");
const BM_4K: &[u8] = include_bytes!("../../tests/data/rt/b4k_r1_bitmap.bin");
const SUM_4K: &[u8] = include_bytes!("../../tests/data/rt/b4k_r1_summary.bin");
const SB_1K: &[u8] = include_bytes!("../../tests/data/rt/b1k_r4_sb.bin");
const BM_1K: &[u8] = include_bytes!("../../tests/data/rt/b1k_r4_bitmap.bin");
const SUM_1K: &[u8] = include_bytes!("../../tests/data/rt/b1k_r4_summary.bin");

/// Rt extents in use in both vector images (see the README), plus the
/// image-specific tail.
fn used_ranges(tail: (u64, u64)) -> Vec<(u64, u64)> {
    vec![
        (10, 3),
        (40, 2),
        (100, 4),
        (200, 2),
        (210, 3),
        (220, 1),
        (300, 2),
        (1000, 256),
        tail,
    ]
}

fn sb(bytes: &[u8]) -> Superblock {
    Superblock::decode(bytes, 0).unwrap()
}

/// Free runs of a whole bitmap, scanned block by block.
fn runs(layout: &RtLayout, bitmap: &[u8]) -> Vec<(u64, u64)> {
    let bs = layout.blocksize as usize;
    let mut sc = FreeRunScanner::new(layout);
    let mut out = Vec::new();
    for b in 0..layout.rbmblocks as usize {
        sc.feed(&bitmap[b * bs..(b + 1) * bs], |s, l| out.push((s, l)));
    }
    sc.finish(|s, l| out.push((s, l)));
    out
}

fn summary_of(layout: &RtLayout, bitmap: &[u8]) -> RtSummary {
    let mut s = RtSummary::zeroed(layout);
    for (start, len) in runs(layout, bitmap) {
        assert!(s.add_run(start, len, layout.bits_per_block()));
    }
    s
}

/// Free runs from a list of used ranges (the model).
fn model_runs(rextents: u64, used: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut used = used.to_vec();
    used.sort();
    let mut out = Vec::new();
    let mut pos = 0;
    for (s, l) in used {
        if s > pos {
            out.push((pos, s - pos));
        }
        pos = pos.max(s + l);
    }
    if pos < rextents {
        out.push((pos, rextents - pos));
    }
    out
}

#[test]
fn rextslog() {
    assert_eq!(compute_rextslog(0), 0);
    assert_eq!(compute_rextslog(1), 0);
    assert_eq!(compute_rextslog(2), 1);
    assert_eq!(compute_rextslog(16383), 13);
    assert_eq!(compute_rextslog(16384), 14);
    assert_eq!(compute_rextslog(1 << 40), 40);
    assert_eq!(legacy_rextslog((1 << 32) + 5), 2);
    assert_eq!(legacy_rextslog(16384), 14);
}

#[test]
fn layout_matches_mkfs() {
    // Values read with xfs_db from mkfs.xfs 6.1 images.
    let l = RtLayout::compute(4096, 1, 16384);
    assert_eq!((l.rextents, l.rbmblocks, l.rextslog), (16384, 1, 14));
    assert_eq!(l.summary_bytes(), 4096);
    let l = RtLayout::compute(4096, 4, 16384);
    assert_eq!((l.rextents, l.rbmblocks, l.rextslog), (4096, 1, 12));
    let l = RtLayout::compute(1024, 4, 65536);
    assert_eq!((l.rextents, l.rbmblocks, l.rextslog), (16384, 2, 14));
    assert_eq!(l.summary_counters(), 30);
    assert_eq!(l.summary_bytes(), 1024);
    assert_eq!(l.bits_in_block(0), 8192);
    assert_eq!(l.bits_in_block(1), 8192);
    assert_eq!(l.bits_in_block(2), 0);
    // A tail shorter than one rt extent is not part of the section.
    let l = RtLayout::compute(4096, 4, 16386);
    assert_eq!((l.rextents, l.rblocks), (4096, 16386));
    assert_eq!(RtLayout::compute(4096, 4, 3).rblocks, 0);
    // No realtime section: empty summary.
    let l = RtLayout::compute(4096, 1, 0);
    assert_eq!(
        (l.summary_counters(), l.summary_bytes(), l.is_empty()),
        (0, 0, true)
    );
}

#[test]
fn layout_conversions() {
    let l = RtLayout::compute(1024, 4, 65536);
    assert_eq!(l.rtb_to_rtx(RtBlock(4001)), (RtExtentNo(1000), 1));
    assert_eq!(l.rtx_to_rtb(RtExtentNo(1000)), RtBlock(4000));
    // Blocks 4003..4009 touch rt extents 1000, 1001 and 1002.
    assert_eq!(l.rtx_span(RtBlock(4003), 6), (RtExtentNo(1000), 3));
    assert_eq!(l.rtx_span(RtBlock(4000), 4), (RtExtentNo(1000), 1));
    assert_eq!(l.rtx_bitmap_block(RtExtentNo(8191)), 0);
    assert_eq!(l.rtx_bitmap_block(RtExtentNo(8192)), 1);
    assert_eq!(l.summary_index(14, 1), Some(29));
    assert_eq!(l.summary_index(15, 0), None);
    assert_eq!(l.summary_index(0, 2), None);
}

#[test]
fn validate_real_superblocks() {
    let l = RtLayout::validate(&sb(SB_4K)).unwrap();
    assert_eq!(
        (l.rextsize, l.rextents, l.rbmblocks, l.rextslog),
        (1, 16384, 1, 14)
    );
    let l = RtLayout::validate(&sb(SB_1K)).unwrap();
    assert_eq!(
        (l.blocksize, l.rextsize, l.rextents, l.rbmblocks),
        (1024, 4, 16384, 2)
    );
}

#[test]
fn validate_rejects_inconsistent_fields() {
    let good = sb(SB_4K);
    type Damage = fn(&mut Superblock);
    let bad: [(&str, Damage); 6] = [
        ("rextents", |s| s.rextents += 1),
        ("rbmblocks", |s| s.rbmblocks = 2),
        ("rextslog", |s| s.rextslog = 13),
        ("frextents", |s| s.frextents = s.rextents + 1),
        ("extent size", |s| s.rextsize = (1 << 18) + 1),
        ("no realtime", |s| s.rblocks = 0),
    ];
    for (what, f) in bad {
        let mut s = good.clone();
        f(&mut s);
        let e = RtLayout::validate(&s).unwrap_err();
        assert!(e.contains(what), "{what}: {e}");
    }
    // A filesystem without realtime section.
    let mut s = good.clone();
    (s.rblocks, s.rextents, s.rbmblocks, s.rextslog, s.frextents) = (0, 0, 0, 0, 0);
    assert!(RtLayout::validate(&s).unwrap().is_empty());
    // 1 KiB blocks need rextsize >= 4 (4 KiB).
    let mut s = sb(SB_1K);
    s.rextsize = 2;
    assert!(RtLayout::validate(&s).is_err());
}

#[test]
fn legacy_rextslog_accepted() {
    let mut s = sb(SB_4K);
    s.rblocks = (1 << 32) + 5;
    s.rextents = s.rblocks;
    s.rbmblocks = s.rextents.div_ceil(4096 * 8) as u32;
    s.rextslog = 32;
    assert!(RtLayout::validate(&s).is_ok());
    s.rextslog = 2; // what mkfs 6.1 writes for 2^32 + 5 extents
    assert!(RtLayout::validate(&s).is_ok());
    s.rextslog = 3;
    assert!(RtLayout::validate(&s).is_err());
}

#[cfg(target_endian = "little")]
#[test]
fn real_bitmaps_and_summaries() {
    for (sbb, bm, sum, tail, free) in [
        (SB_4K, BM_4K, SUM_4K, (16382, 2), 16109),
        (SB_1K, BM_1K, SUM_1K, (8190, 4), 16107),
    ] {
        let s = sb(sbb);
        let l = RtLayout::validate(&s).unwrap();
        assert_eq!(s.frextents, free);
        let bs = l.blocksize as usize;
        let counted: u64 = (0..l.rbmblocks as u64)
            .map(|b| count_free(&bm[b as usize * bs..][..bs], l.bits_in_block(b)))
            .sum();
        assert_eq!(counted, free);
        let used = used_ranges(tail);
        for &(st, n) in &used {
            assert_eq!(range_state(bm, st, n), RangeState::Allocated);
            assert_eq!(range_state(bm, st - 1, 1), RangeState::Free);
            assert_eq!(range_state(bm, st - 1, n + 1), RangeState::Mixed);
        }
        assert_eq!(runs(&l, bm), model_runs(l.rextents, &used));
        let ondisk = RtSummary::decode(sum, &l).unwrap();
        let computed = summary_of(&l, bm);
        assert_eq!(ondisk, computed);
        assert!(ondisk.diff(&computed).is_empty());
        assert_eq!(computed.encode(&l), sum.to_vec());
        // 1000..1256 is used: the run 301..1000 (699 extents, class 9).
        assert!(ondisk.get(9, 0) >= 1);
        // Bits past rextents are 0 in mkfs-made bitmaps and never count.
        if l.rextents < l.bits_per_block() {
            assert_eq!(range_state(bm, l.rextents, 32), RangeState::Allocated);
        }
    }
}

#[test]
fn crossing_run_counts_in_its_first_block() {
    // 2 bitmap blocks of 1 KiB; everything free except 8190..8194: the
    // runs are 0..8190 (block 0) and 8194..16384 (starts in block 1).
    let l = RtLayout::compute(1024, 4, 65536);
    let mut bm = vec![0u8; 2048];
    set_bits(&mut bm, 0, l.rextents, true);
    set_bits(&mut bm, 8190, 4, false);
    assert_eq!(runs(&l, &bm), vec![(0, 8190), (8194, 8190)]);
    let s = summary_of(&l, &bm);
    assert_eq!(
        s.nonzero().collect::<Vec<_>>(),
        vec![(12, 0, 1), (12, 1, 1)]
    );
    // Free 8190..8194 too: one run of 16384 starting in block 0.
    set_bits(&mut bm, 8190, 4, true);
    assert_eq!(runs(&l, &bm), vec![(0, 16384)]);
    assert_eq!(
        summary_of(&l, &bm).nonzero().collect::<Vec<_>>(),
        vec![(14, 0, 1)]
    );
}

#[test]
fn summary_decode_encode_and_bounds() {
    let l = RtLayout::compute(1024, 4, 65536);
    let mut s = RtSummary::zeroed(&l);
    assert!(s.add_run(8192, 5, l.bits_per_block()));
    assert!(s.add_run(8300, 7, l.bits_per_block()));
    assert!(
        !s.add_run(0, 1 << 15, l.bits_per_block()),
        "class 15 > rextslog"
    );
    assert!(!s.add_run(16384, 1, l.bits_per_block()), "past the bitmap");
    assert!(!s.add_run(0, 0, l.bits_per_block()));
    assert_eq!(s.get(2, 1), 2);
    let buf = s.encode(&l);
    assert_eq!(buf.len(), 1024);
    assert_eq!(RtSummary::decode(&buf, &l).unwrap(), s);
    assert!(RtSummary::decode(&buf[..100], &l).is_err());
    let z = RtSummary::zeroed(&l);
    assert_eq!(s.diff(&z), vec![(2, 1, 2, 0)]);
    assert_eq!(z.get(99, 99), 0);
}

#[test]
fn short_buffers_read_as_used() {
    let bm = [0xffu8; 8];
    assert_eq!(count_free(&bm, 1000), 64);
    assert!(!bit_is_free(&bm, 64));
    assert_eq!(range_state(&bm, 60, 10), RangeState::Mixed);
    assert_eq!(range_state(&bm, 64, 10), RangeState::Allocated);
    assert_eq!(range_state(&bm, u64::MAX - 1, 5), RangeState::Allocated);
}

/// Naive free-run finder over bits 0..n.
fn naive_runs(bm: &[u8], n: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut cur: Option<(u64, u64)> = None;
    for b in 0..n {
        if bit_is_free(bm, b) {
            match &mut cur {
                Some((_, l)) => *l += 1,
                None => cur = Some((b, 1)),
            }
        } else if let Some(r) = cur.take() {
            out.push(r);
        }
    }
    out.extend(cur);
    out
}

proptest! {
    #[test]
    fn bitmap_ops_match_model(
        rextents in 1u64..3000,
        ranges in proptest::collection::vec((0u64..3000, 1u64..200, any::<bool>()), 0..30),
        garbage_tail in any::<bool>(),
    ) {
        // 64-byte blocks would be too small for a real fs; use 512 bytes of
        // "blocksize" bits = 4096 per block so 3000 extents fit in one
        // block, and 128-byte blocks (1024 bits) for multi-block runs.
        for bs in [128u32, 512] {
            let l = RtLayout {
                blocksize: bs,
                rextsize: 1,
                rblocks: rextents,
                rextents,
                rbmblocks: rextents.div_ceil(bs as u64 * 8) as u32,
                rextslog: compute_rextslog(rextents),
            };
            let total = l.bitmap_bytes() as usize;
            let mut bm = vec![0u8; total];
            let mut model = vec![false; total * 8];
            if garbage_tail {
                // Bits past rextents must never matter.
                set_bits(&mut bm, 0, total as u64 * 8, true);
                set_bits(&mut bm, 0, rextents, false);
            }
            for &(s, n, free) in &ranges {
                let s = s % rextents;
                let n = n.min(rextents - s);
                set_bits(&mut bm, s, n, free);
                for m in &mut model[s as usize..(s + n) as usize] {
                    *m = free;
                }
            }
            for b in 0..rextents {
                prop_assert_eq!(bit_is_free(&bm, b), model[b as usize]);
            }
            let free = model[..rextents as usize].iter().filter(|&&f| f).count() as u64;
            let counted: u64 = (0..l.rbmblocks as u64)
                .map(|b| count_free(&bm[(b * bs as u64) as usize..][..bs as usize], l.bits_in_block(b)))
                .sum();
            prop_assert_eq!(counted, free);
            prop_assert_eq!(runs(&l, &bm), naive_runs(&bm, rextents));
            for &(s, n, _) in &ranges {
                let s = s % rextents;
                let n = n.min(rextents - s);
                let part = &model[s as usize..(s + n) as usize];
                let want = if part.iter().all(|&f| f) {
                    RangeState::Free
                } else if part.iter().all(|&f| !f) {
                    RangeState::Allocated
                } else {
                    RangeState::Mixed
                };
                prop_assert_eq!(range_state(&bm, s, n), want);
            }
            let s = summary_of(&l, &bm);
            let runs_total: u32 = s.nonzero().map(|(_, _, c)| c).sum();
            prop_assert_eq!(runs_total as usize, naive_runs(&bm, rextents).len());
        }
    }
}
