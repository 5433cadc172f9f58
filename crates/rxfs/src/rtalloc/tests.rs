use super::*;
use crate::bdev::simrng::SimRng;

#[test]
fn levels_are_floor_log2() {
    assert_eq!(level_of(1), 0);
    assert_eq!(level_of(2), 1);
    assert_eq!(level_of(3), 1);
    assert_eq!(level_of(4), 2);
    assert_eq!(level_of(u64::MAX), 63);
}

#[test]
fn busy_keys_split_without_overflow() {
    let x = RT_BUSY_SPAN - 3;
    let p: Vec<_> = busy_pieces(x, 10).collect();
    assert_eq!(p.len(), 2);
    assert_eq!(
        p[0],
        (AgNumber(RT_BUSY_AG), AgBlock((RT_BUSY_SPAN - 3) as u32), 3)
    );
    assert_eq!(p[1], (AgNumber(RT_BUSY_AG + 1), AgBlock(0), 7));
    for &(a, b, l) in &p {
        assert!(b.0.checked_add(l).is_some());
        assert_eq!(busy_key(extent_of_key(a, b)), (a, b));
    }
    assert_eq!(extent_of_key(p[0].0, p[0].1), x);
    assert_eq!(extent_of_key(p[1].0, p[1].1), RT_BUSY_SPAN);
    assert_eq!(busy_pieces(5, 0).count(), 0);
}

/// Busy ranges, answered as the CIL answers: the overlapping one that
/// starts last.
fn busy_last(ranges: &[(u64, u64)]) -> impl FnMut(u64, u64) -> Option<(u64, u64)> + '_ {
    move |x, n| {
        ranges
            .iter()
            .filter(|&&(s, l)| s < x + n && x < s + l)
            .max_by_key(|r| r.0)
            .copied()
    }
}

#[test]
fn pieces_avoid_every_busy_range() {
    // Two busy ranges inside the run: a lookup that reports the later
    // one must not make the piece before it include the earlier one.
    let busy = [(102, 1), (150, 1)];
    assert_eq!(
        not_busy_piece(100, 100, 1, 100, busy_last(&busy)),
        Some((100, 2))
    );
    assert_eq!(
        not_busy_piece(100, 100, 3, 100, busy_last(&busy)),
        Some((103, 47))
    );
    assert_eq!(
        not_busy_piece(100, 100, 48, 100, busy_last(&busy)),
        Some((151, 49))
    );
    assert_eq!(not_busy_piece(100, 100, 50, 100, busy_last(&busy)), None);
    // maxlen cuts the piece; the busy check covers only the piece.
    assert_eq!(
        not_busy_piece(103, 97, 5, 10, busy_last(&busy)),
        Some((103, 10))
    );
    // Nothing busy; all busy.
    assert_eq!(not_busy_piece(7, 9, 9, 9, busy_last(&[])), Some((7, 9)));
    assert_eq!(not_busy_piece(7, 9, 1, 9, busy_last(&[(0, 100)])), None);
    // Every piece returned is free of busy ranges, whatever the pattern.
    let mut rng = SimRng::new(7u64);
    for _ in 0..2000 {
        let mut r = || rng.next_u64();
        let ranges: Vec<(u64, u64)> = (0..r() % 6).map(|_| (r() % 120, 1 + r() % 8)).collect();
        let (minlen, maxlen) = (1 + r() % 10, 10 + r() % 40);
        if let Some((s, n)) = not_busy_piece(0, 128, minlen, maxlen, busy_last(&ranges)) {
            assert!(n >= minlen && n <= maxlen && s + n <= 128);
            assert!(
                ranges.iter().all(|&(b, l)| b + l <= s || s + n <= b),
                "{ranges:?} {s}+{n}"
            );
        }
    }
}

#[test]
fn busy_view_answers_the_first_overlap() {
    // Against a scan of every range: the overlapping range that starts
    // first (nested and touching ranges included), and the pieces found
    // through the view are the pieces found through the CIL's answer.
    let mut rng = SimRng::new(11u64);
    let mut r = || rng.next_u64();
    for _ in 0..3000 {
        let mut ranges: Vec<(u64, u64)> = (0..r() % 8).map(|_| (r() % 120, 1 + r() % 30)).collect();
        ranges.sort();
        let view = BusyView::from_ranges(ranges.clone());
        let (x, n) = (r() % 140, 1 + r() % 40);
        let want = ranges
            .iter()
            .find(|&&(s, l)| s < x + n && x < s + l)
            .copied();
        assert_eq!(view.overlap(x, n), want, "{ranges:?} {x}+{n}");
        let (minlen, maxlen) = (1 + r() % 10, 10 + r() % 40);
        assert_eq!(
            not_busy_piece(0, 128, minlen, maxlen, |a, b| view.overlap(a, b)),
            not_busy_piece(0, 128, minlen, maxlen, busy_last(&ranges)),
            "{ranges:?} {minlen}..{maxlen}"
        );
    }
}

/// The choice inside a bitmap block as it was first written: run by run,
/// each asked of the busy ranges on its own, the longest runs sorted
/// first.
fn choose_run_by_run(
    runs: &[(u64, u64)],
    busy: &[(u64, u64)],
    minlen: u64,
    maxlen: u64,
) -> Option<(u64, u64)> {
    for &(f, n) in runs.iter().filter(|r| r.1 >= maxlen) {
        if let Some(r) = not_busy_piece(f, n, maxlen, maxlen, busy_last(busy)) {
            return Some(r);
        }
    }
    let mut c: Vec<(u64, u64)> = runs.iter().filter(|r| r.1 >= minlen).copied().collect();
    c.sort_by_key(|&(f, n)| (std::cmp::Reverse(n), f));
    c.into_iter()
        .find_map(|(f, n)| not_busy_piece(f, n, minlen, maxlen, busy_last(busy)))
}

#[test]
fn one_sweep_chooses_as_run_by_run() {
    let mut rng = SimRng::new(23u64);
    let mut r = || rng.next_u64();
    let mut cut = 0;
    for _ in 0..5000 {
        // Disjoint free runs in order; busy ranges anywhere (nested,
        // spanning runs and gaps).
        let mut runs = Vec::new();
        let mut p = r() % 5;
        for _ in 0..r() % 7 {
            let n = 1 + r() % 40;
            runs.push((p, n));
            p += n + 1 + r() % 10;
        }
        let mut busy: Vec<(u64, u64)> = (0..r() % 6)
            .map(|_| (r() % (p + 5), 1 + r() % 25))
            .collect();
        busy.sort();
        let (minlen, maxlen) = (1 + r() % 8, 8 + r() % 30);
        let runs: Vec<_> = runs.into_iter().filter(|x| x.1 >= minlen).collect();
        let mut seen = false;
        let got = choose(runs.iter().copied(), &busy, minlen, maxlen, &mut seen);
        assert_eq!(
            got,
            choose_run_by_run(&runs, &busy, minlen, maxlen),
            "runs {runs:?} busy {busy:?} {minlen}..{maxlen}"
        );
        let overlaps = runs
            .iter()
            .any(|&(f, n)| busy.iter().any(|&(s, l)| s < f + n && f < s + l));
        if got.is_none() {
            assert_eq!(seen, overlaps, "runs {runs:?} busy {busy:?}");
        }
        cut += seen as u32;
    }
    assert!(cut > 500, "the cases exercise busy ranges: {cut}");
}

#[test]
fn memos_answer_only_what_they_saw() {
    // Block 0 of 1024-extent blocks; its last run reached the end and
    // was followed to 1100 (into block 1) when no clear piece was found.
    let np = NoPiece {
        until: 7,
        minlen: 4,
        reach: 1100,
        stamp: 10,
        busy: true,
    };
    let none = |_| false;
    assert!(memo_holds(&np, 6, 4, 1100, 1024, 1024, none));
    assert!(
        memo_holds(&np, 6, 9, 1050, 1024, 1024, none),
        "smaller reach, larger minlen"
    );
    assert!(
        !memo_holds(&np, 7, 4, 1100, 1024, 1024, none),
        "the ranges in the way retired"
    );
    assert!(
        !memo_holds(&np, 6, 2, 1100, 1024, 1024, none),
        "a smaller request"
    );
    // The review's case: a longer request follows the run further.
    assert!(
        !memo_holds(&np, 6, 4, 1200, 1024, 1024, none),
        "followed further"
    );
    // Block 1 changed since (frees there may be reusable sooner).
    assert!(!memo_holds(&np, 6, 4, 1100, 1024, 1024, |j| j == 1));
    assert!(
        memo_holds(&np, 6, 4, 1100, 1024, 1024, |j| j == 2),
        "block 2 not reached"
    );
    // A memo whose run stayed inside the block checks no other block.
    let inside = NoPiece { reach: 1024, ..np };
    assert!(memo_holds(&inside, 6, 4, 1024, 1024, 1024, |_| true));
}
