use super::*;

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
    for (_, b, l) in p {
        assert!(b.0.checked_add(l).is_some());
    }
    assert_eq!(busy_pieces(5, 0).count(), 0);
}
