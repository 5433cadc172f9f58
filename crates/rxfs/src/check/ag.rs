//! Per-AG free-space side: the AGF, the AGFL and the AGF-rooted btrees
//! (bnobt, cntbt, rmapbt, refcountbt).
//!
//! The tree walker ([`crate::btree::walk`]) verifies every block and the tree
//! shape; here: records strictly ordered across leaves and free extents not
//! overlapping, the bnobt and cntbt holding the same extents, the AGF's
//! freeblks/longest/btreeblks/rmap_blocks/refcount_blocks equal to what the
//! trees hold, and every block of every tree, the AGFL and the free space
//! claimed in the space map.

use super::space::Owner;
use super::Checker;
use crate::btree::walk::BtreeRoot;
use crate::format::ag::Agf;
use crate::format::btree::BtreeKind;
use crate::format::btree_rec::{AllocRec, BtreeRecord, RefcountRec, RmapRec};
use crate::types::AgNumber;

/// Finding code for an unreadable tree of `kind`.
pub(crate) fn bad_code(kind: BtreeKind) -> &'static str {
    match kind {
        BtreeKind::Bno => "bnobt-bad",
        BtreeKind::Cnt => "cntbt-bad",
        BtreeKind::Ino => "inobt-bad",
        BtreeKind::Fino => "finobt-bad",
        BtreeKind::Rmap => "rmapbt-bad",
        BtreeKind::Refcount => "refcountbt-bad",
    }
}

/// Walk a tree, claim its blocks, and return its records and block count;
/// `None` (with a finding, and the AG marked incomplete) when the walk
/// failed.
pub(crate) fn walk_tree<R: BtreeRecord>(
    c: &mut Checker,
    root: &BtreeRoot,
) -> Option<(Vec<R>, u64)> {
    let sparse = c.fs.sb().has_sparse_inodes();
    let mut recs = Vec::new();
    let (res, blocks) = c.fs.btree_walk_blocks(root, &mut |b| {
        recs.push(R::from_disk(b, sparse));
        Ok(true)
    });
    let agno = root.agno.0;
    let name = root.kind.name();
    for &b in &blocks {
        c.claim(agno, b, 1, Owner::Btree(name));
    }
    c.report.stats.btree_blocks += blocks.len() as u64;
    match res {
        Ok(_) => Some((recs, blocks.len() as u64)),
        Err(e) => {
            c.add_ag(
                bad_code(root.kind),
                agno,
                Some(root.root.0 as u64),
                e.to_string(),
            );
            c.space.mark_incomplete(agno);
            c.sums_complete = false;
            None
        }
    }
}

pub(crate) fn check_ag(c: &mut Checker, agno: u32) {
    let fs = c.fs;
    let geo = fs.geo();
    let first = crate::format::ag::first_usable_agbno(geo.sectsize, geo.blocklog);
    c.claim(agno, 0, first as u64, Owner::Headers);
    if fs.sb().logstart != 0 {
        let ls = fs.sb().logstart;
        if (ls >> geo.agblklog) as u32 == agno {
            c.claim_fsb(ls, geo.logblocks as u64, Owner::Log);
        }
    }
    let agf = match fs.read_agf(AgNumber(agno)) {
        Ok(a) => a,
        Err(e) => {
            c.add_ag("agf-bad", agno, None, e.to_string());
            c.space.mark_incomplete(agno);
            c.sums_complete = false;
            return;
        }
    };
    let flcount = check_agfl(c, agno, &agf);
    let bno = walk_tree::<AllocRec>(
        c,
        &BtreeRoot::from_agf(BtreeKind::Bno, AgNumber(agno), &agf),
    );
    let cnt = walk_tree::<AllocRec>(
        c,
        &BtreeRoot::from_agf(BtreeKind::Cnt, AgNumber(agno), &agf),
    );
    let mut btreeblks = Some(0u64);
    let mut freeblks = None;
    if let Some((recs, n)) = &bno {
        freeblks = Some(check_bnobt(c, agno, &agf, recs));
        btreeblks = btreeblks.map(|b| b + n - 1);
    } else {
        btreeblks = None;
    }
    if let Some((recs, n)) = &cnt {
        check_cntbt(c, agno, recs, bno.as_ref().map(|b| &b.0));
        btreeblks = btreeblks.map(|b| b + n - 1);
    } else {
        btreeblks = None;
    }
    if fs.sb().has_rmapbt() {
        let root = BtreeRoot::from_agf(BtreeKind::Rmap, AgNumber(agno), &agf);
        match walk_tree::<RmapRec>(c, &root) {
            Some((recs, n)) => {
                for r in &recs {
                    c.space.mark_rmapped(agno, r.start, r.len);
                }
                c.space.rmap_have[agno as usize] = Some(recs);
                btreeblks = btreeblks.map(|b| b + n - 1);
                if agf.rmap_blocks as u64 != n {
                    let msg = format!("AGF rmap_blocks {}, rmapbt has {n}", agf.rmap_blocks);
                    c.add_ag("agf-rmapblocks", agno, None, msg);
                }
            }
            None => btreeblks = None,
        }
    }
    if fs.sb().has_reflink() {
        let root = BtreeRoot::from_agf(BtreeKind::Refcount, AgNumber(agno), &agf);
        if let Some((recs, n)) = walk_tree::<RefcountRec>(c, &root) {
            if agf.refcount_blocks as u64 != n {
                let msg = format!(
                    "AGF refcount_blocks {}, refcountbt has {n}",
                    agf.refcount_blocks
                );
                c.add_ag("agf-refcountblocks", agno, None, msg);
            }
            check_refcounts(c, agno, &recs);
        }
    }
    if let Some(b) = btreeblks {
        if agf.btreeblks as u64 != b {
            let msg = format!("AGF btreeblks {}, the trees have {b}", agf.btreeblks);
            c.add_ag("agf-btreeblks", agno, None, msg);
        }
    }
    match (freeblks, btreeblks, flcount) {
        (Some(f), Some(b), Some(l)) => c.sum_fdblocks += f + b + l,
        _ => c.sums_complete = false,
    }
}

/// Check the AGFL against the AGF and claim its live blocks; the number
/// of live blocks when readable.
fn check_agfl(c: &mut Checker, agno: u32, agf: &Agf) -> Option<u64> {
    let fs = c.fs;
    let agfl = match fs.read_agfl(AgNumber(agno)) {
        Ok(a) => a,
        Err(e) => {
            c.add_ag("agfl-bad", agno, None, e.to_string());
            return None;
        }
    };
    if agf.agfl_needs_reset() {
        let msg = format!(
            "AGF flfirst {} fllast {} flcount {} disagree ({} slots)",
            agf.flfirst, agf.fllast, agf.flcount, agf.agfl_size
        );
        c.add_ag("agf-flcount", agno, None, msg);
        c.space.mark_incomplete(agno);
        return None;
    }
    let check = match fs.ag_check(AgNumber(agno)) {
        Ok(ch) => ch,
        Err(e) => {
            c.add_ag("agf-bad", agno, None, e.to_string());
            return None;
        }
    };
    match agfl.active_blocks(agf, &check) {
        Ok(blocks) => {
            for b in &blocks {
                c.claim(agno, b.0, 1, Owner::Agfl);
            }
            Some(blocks.len() as u64)
        }
        Err(e) => {
            c.add_ag("agfl-bad", agno, None, e.to_string());
            c.space.mark_incomplete(agno);
            None
        }
    }
}

/// bnobt records: strictly ordered, not overlapping; claim them; compare
/// the AGF. Returns the free blocks counted.
fn check_bnobt(c: &mut Checker, agno: u32, agf: &Agf, recs: &[AllocRec]) -> u64 {
    let (mut free, mut longest) = (0u64, 0u32);
    let mut prev: Option<AllocRec> = None;
    for r in recs {
        if let Some(p) = prev {
            if r.start <= p.start {
                let msg = format!("record {}+{} after {}+{}", r.start, r.len, p.start, p.len);
                c.add_ag("bnobt-order", agno, Some(r.start as u64), msg);
            } else if (p.start as u64 + p.len as u64) > r.start as u64 {
                let msg = format!(
                    "free extent {}+{} overlaps {}+{}",
                    r.start, r.len, p.start, p.len
                );
                c.add_ag("bnobt-overlap", agno, Some(r.start as u64), msg);
            }
        }
        prev = Some(*r);
        free += r.len as u64;
        longest = longest.max(r.len);
        c.claim(agno, r.start, r.len as u64, Owner::Free);
    }
    c.report.stats.free_blocks += free;
    if agf.freeblks as u64 != free {
        let msg = format!("AGF freeblks {}, bnobt holds {free}", agf.freeblks);
        c.add_ag("agf-freeblks", agno, None, msg);
    }
    if agf.longest != longest {
        let msg = format!("AGF longest {}, bnobt's longest is {longest}", agf.longest);
        c.add_ag("agf-longest", agno, None, msg);
    }
    free
}

/// cntbt records: strictly ordered by (len, start), and the same extents
/// as the bnobt.
fn check_cntbt(c: &mut Checker, agno: u32, recs: &[AllocRec], bno: Option<&Vec<AllocRec>>) {
    for w in recs.windows(2) {
        if (w[1].len, w[1].start) <= (w[0].len, w[0].start) {
            let msg = format!(
                "record {}+{} after {}+{}",
                w[1].start, w[1].len, w[0].start, w[0].len
            );
            c.add_ag("cntbt-order", agno, Some(w[1].start as u64), msg);
        }
    }
    let Some(bno) = bno else { return };
    let mut a: Vec<AllocRec> = recs.to_vec();
    a.sort();
    let mut b: Vec<AllocRec> = bno.clone();
    b.sort();
    let (mut i, mut j, mut reported) = (0, 0, 0);
    while (i < a.len() || j < b.len()) && reported < 16 {
        let (x, y) = (a.get(i), b.get(j));
        let (msg, at) = match (x, y) {
            (Some(x), Some(y)) if x == y => {
                i += 1;
                j += 1;
                continue;
            }
            (Some(x), Some(y)) if x < y => {
                i += 1;
                (
                    format!("cntbt has {}+{}, the bnobt not", x.start, x.len),
                    x.start,
                )
            }
            (Some(x), None) => {
                i += 1;
                (
                    format!("cntbt has {}+{}, the bnobt not", x.start, x.len),
                    x.start,
                )
            }
            (_, Some(y)) => {
                j += 1;
                (
                    format!("bnobt has {}+{}, the cntbt not", y.start, y.len),
                    y.start,
                )
            }
            (None, None) => break,
        };
        reported += 1;
        c.add_ag("bnobt-cntbt-mismatch", agno, Some(at as u64), msg);
    }
}

/// Refcount records: ordered and not overlapping; shared extents may be
/// claimed by several files, CoW staging extents belong to the tree.
fn check_refcounts(c: &mut Checker, agno: u32, recs: &[RefcountRec]) {
    let mut prev_end = 0u64;
    for r in recs {
        if (r.start as u64) < prev_end {
            let msg = format!("extent {}+{} overlaps the previous one", r.start, r.len);
            c.add_ag("refcountbt-order", agno, Some(r.start as u64), msg);
        }
        prev_end = prev_end.max(r.start as u64 + r.len as u64);
        if r.cow {
            c.claim(agno, r.start, r.len as u64, Owner::Cow);
        } else {
            c.space.mark_shared(agno, r.start, r.len, r.refcount);
        }
    }
}
