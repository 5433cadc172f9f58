//! Unit tests of the allocator's pure parts; the trees and the AG headers
//! are tested against mkfs images in `tests/alloc_kernel.rs`.

use super::search::{better, eval, Cand};
use super::*;
use crate::btree::block::Ents;
use crate::format::btree::AllocRec;

fn req(minlen: u32, maxlen: u32, align: u32) -> AllocReq {
    AllocReq {
        agno: AgNumber(0),
        near: None,
        minlen,
        maxlen,
        align,
        any_ag: false,
        meta: false,
    }
}

fn rec(start: u32, len: u32) -> AllocRec {
    AllocRec { start, len }
}

fn no_busy(_: u32, _: u32) -> Option<(u32, u32)> {
    None
}

/// A busy lookup over a fixed list (returns the first overlap in list
/// order, not the lowest: the allocator must not rely on order).
fn busy_list(list: &[(u32, u32)]) -> impl Fn(u32, u32) -> Option<(u32, u32)> + '_ {
    move |b, l| list.iter().copied().find(|&(s, n)| s < b + l && b < s + n)
}

#[test]
fn eval_aligns_and_caps() {
    let mut seen = false;
    let c = eval(&no_busy, rec(5, 20), &req(4, 8, 4), None, &mut seen).unwrap();
    assert_eq!((c.x, c.len), (8, 8));
    // Too short once aligned: [5, 11) holds only 8..11.
    assert!(eval(&no_busy, rec(5, 6), &req(4, 8, 4), None, &mut seen).is_none());
    // Shorter than maxlen: all of it.
    let c = eval(&no_busy, rec(5, 6), &req(2, 8, 1), None, &mut seen).unwrap();
    assert_eq!((c.x, c.len), (5, 6));
    assert!(!seen);
}

#[test]
fn eval_near_target() {
    let mut seen = false;
    // Aligned starts for 8 blocks in [5, 25): 8, 12, 16.
    let r = req(4, 8, 4);
    let c = eval(&no_busy, rec(5, 20), &r, Some(20), &mut seen).unwrap();
    assert_eq!((c.x, c.len), (16, 8));
    let c = eval(&no_busy, rec(5, 20), &r, Some(13), &mut seen).unwrap();
    assert_eq!(c.x, 12);
    let c = eval(&no_busy, rec(5, 20), &r, Some(0), &mut seen).unwrap();
    assert_eq!(c.x, 8);
    let c = eval(&no_busy, rec(100, 50), &req(1, 1, 1), Some(120), &mut seen).unwrap();
    assert_eq!((c.x, c.len), (120, 1));
}

#[test]
fn eval_avoids_busy() {
    let mut seen = false;
    let list = [(30, 2), (12, 3), (17, 1)];
    let busy = busy_list(&list);
    // Free [10, 40): unbusy parts [10,12) [15,17) [18,30) [32,40).
    let c = eval(&busy, rec(10, 30), &req(1, 100, 1), None, &mut seen).unwrap();
    assert_eq!((c.x, c.len), (18, 12));
    assert!(seen);
    let c = eval(&busy, rec(10, 30), &req(1, 2, 1), Some(16), &mut seen).unwrap();
    assert_eq!((c.x, c.len), (15, 2));
    // Everything busy.
    let all = [(0, 1000)];
    let busy = busy_list(&all);
    assert!(eval(&busy, rec(10, 30), &req(1, 1, 1), None, &mut seen).is_none());
    // A candidate never overlaps a busy range.
    for start in 0..40 {
        for len in 1..20 {
            let busy = busy_list(&list);
            for r in [req(1, 5, 1), req(2, 9, 2), req(3, 3, 4)] {
                if let Some(c) = eval(&busy, rec(start, len), &r, Some(20), &mut seen) {
                    assert!(c.x >= start && c.x + c.len <= start + len);
                    assert!(busy(c.x, c.len).is_none(), "{c:?} busy");
                    assert_eq!(c.x % r.align, 0);
                    assert!(c.len >= r.minlen && c.len <= r.maxlen);
                }
            }
        }
    }
}

#[test]
fn better_prefers_longer_then_closer() {
    let c = |x, len| {
        Some(Cand {
            rec: rec(0, 100),
            x,
            len,
        })
    };
    assert!(better(c(50, 4), c(10, 3), Some(10)));
    assert!(better(c(12, 3), c(20, 3), Some(10)));
    assert!(!better(c(20, 3), c(12, 3), Some(10)));
    assert!(better(c(0, 1), None, None));
    assert!(!better(None, c(0, 1), None));
}

#[test]
fn min_freelist_matches_kernel_formula() {
    // Two one-level trees: 2 * 2 - 2 each.
    assert_eq!(min_freelist_calc(1, 1, 5), 4);
    assert_eq!(min_freelist_calc(2, 3, 5), 4 + 6);
    // Capped at the tallest tree.
    assert_eq!(min_freelist_calc(5, 5, 5), 8 + 8);
}

#[test]
fn ents_edit() {
    let mut e = Ents {
        esz: 8,
        ksz: 4,
        data: Vec::new(),
    };
    for i in 0..10u32 {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&(i * 10).to_be_bytes());
        b[4..].copy_from_slice(&i.to_be_bytes());
        e.insert(e.len(), &b);
    }
    assert_eq!(e.len(), 10);
    assert_eq!(e.ptr(3), 3);
    let r = e.split_off(6);
    assert_eq!((e.len(), r.len()), (6, 4));
    assert_eq!(r.low_key_bytes(), 60u32.to_be_bytes());
    let gone = e.remove(0);
    assert_eq!(&gone[..4], &0u32.to_be_bytes());
    assert_eq!(e.low_key_bytes(), 10u32.to_be_bytes());
    e.append(&r);
    assert_eq!(e.len(), 9);
    assert_eq!(e.ptr(8), 9);
}
