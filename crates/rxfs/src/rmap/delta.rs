//! The difference between two extent maps of a fork: which mappings (file
//! offset -> block, written or unwritten) disappeared and which appeared.
//!
//! Both maps are cut at every extent boundary of either; a piece present
//! in both with the same blocks and state is unchanged, any other old
//! piece was removed and any other new piece was added. Adjacent pieces
//! are joined again so that one fork change costs few rmap edits.

use crate::format::bmbt::Extent;
use crate::types::FileBlock;

fn cut(list: &[Extent], bounds: &[u64]) -> Vec<Extent> {
    let mut out = Vec::with_capacity(list.len());
    for e in list {
        let mut off = e.off.0;
        let stop = e.end();
        // The boundaries strictly inside the extent.
        let from = bounds.partition_point(|&b| b <= off);
        for &b in bounds[from..].iter().take_while(|&&b| b < stop) {
            out.push(piece(e, off, b));
            off = b;
        }
        out.push(piece(e, off, stop));
    }
    out
}

fn piece(e: &Extent, from: u64, to: u64) -> Extent {
    Extent {
        off: FileBlock(from),
        start: e.start + (from - e.off.0),
        len: to - from,
        unwritten: e.unwritten,
    }
}

/// Join pieces that continue each other in both offset and block.
fn join(mut v: Vec<Extent>) -> Vec<Extent> {
    v.sort_unstable_by_key(|e| e.off.0);
    let mut out: Vec<Extent> = Vec::with_capacity(v.len());
    for e in v {
        match out.last_mut() {
            Some(l)
                if l.end() == e.off.0
                    && l.start + l.len == e.start
                    && l.unwritten == e.unwritten =>
            {
                l.len += e.len
            }
            _ => out.push(e),
        }
    }
    out
}

/// `(removed, added)` between the `old` and `new` maps (each sorted by
/// offset, extents not overlapping).
pub fn diff(old: &[Extent], new: &[Extent]) -> (Vec<Extent>, Vec<Extent>) {
    let mut bounds: Vec<u64> = old
        .iter()
        .chain(new)
        .flat_map(|e| [e.off.0, e.end()])
        .collect();
    bounds.sort_unstable();
    bounds.dedup();
    let a = cut(old, &bounds);
    let b = cut(new, &bounds);
    let (mut removed, mut added) = (Vec::new(), Vec::new());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) if x.off.0 == y.off.0 => {
                if x != y {
                    removed.push(*x);
                    added.push(*y);
                }
                i += 1;
                j += 1;
            }
            (Some(x), Some(y)) if x.off.0 < y.off.0 => {
                removed.push(*x);
                i += 1;
            }
            (Some(x), None) => {
                removed.push(*x);
                i += 1;
            }
            (_, Some(y)) => {
                added.push(*y);
                j += 1;
            }
            (None, None) => break,
        }
    }
    (join(removed), join(added))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x(off: u64, start: u64, len: u64, unwritten: bool) -> Extent {
        Extent {
            off: FileBlock(off),
            start,
            len,
            unwritten,
        }
    }

    #[test]
    fn unchanged_extended_and_converted() {
        let old = vec![x(0, 100, 4, false), x(10, 200, 10, true)];
        // Extend the first, convert the middle of the second.
        let new = vec![
            x(0, 100, 6, false),
            x(10, 200, 3, true),
            x(13, 203, 2, false),
            x(15, 205, 5, true),
        ];
        let (r, a) = diff(&old, &new);
        assert_eq!(r, vec![x(13, 203, 2, true)]);
        assert_eq!(a, vec![x(4, 104, 2, false), x(13, 203, 2, false)]);
    }

    #[test]
    fn truncate_and_remap() {
        let old = vec![x(0, 100, 8, false), x(8, 500, 8, false)];
        let new = vec![x(0, 100, 2, false), x(2, 900, 1, false)];
        let (r, a) = diff(&old, &new);
        assert_eq!(r, vec![x(2, 102, 6, false), x(8, 500, 8, false)]);
        assert_eq!(a, vec![x(2, 900, 1, false)]);
        assert_eq!(diff(&old, &old), (vec![], vec![]));
    }
}
