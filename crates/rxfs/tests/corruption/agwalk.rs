//! Walkers over AG-level metadata (AG headers, free-space, inode, rmap and
//! refcount btrees) that the library offers; the corruption walk calls each
//! one so every block they read is discovered and then damaged.

use rxfs::btree::walk::BtreeRoot;
use rxfs::format::btree::{BtreeKey, BtreeKind, InobtRec};
use rxfs::types::{AgNumber, Ino};
use rxfs::Filesystem;

use crate::walk::Report;

/// AGs walked at most (the walk's own bound).
const MAX_AGS: u32 = 64;

pub fn walk_ags(fs: &Filesystem, report: &mut Report) {
    if let Err(e) = fs.ag_summary() {
        report.errors.push(("ag_summary".into(), e));
    }
    let sb = fs.sb();
    let mut agf_trees = vec![BtreeKind::Bno, BtreeKind::Cnt];
    if sb.has_rmapbt() {
        agf_trees.push(BtreeKind::Rmap);
    }
    if sb.has_reflink() {
        agf_trees.push(BtreeKind::Refcount);
    }
    let mut agi_trees = vec![BtreeKind::Ino];
    if sb.has_finobt() {
        agi_trees.push(BtreeKind::Fino);
    }
    for agno in 0..fs.geo().agcount.min(MAX_AGS) {
        let ag = AgNumber(agno);
        let mut err = |what: String, e| report.errors.push((format!("AG {agno} {what}"), e));
        if let Err(e) = fs.read_agfl(ag) {
            err("agfl".into(), e);
        }
        match fs.read_agf(ag) {
            Ok(agf) => {
                for &k in &agf_trees {
                    let root = BtreeRoot::from_agf(k, ag, &agf);
                    if let Err(e) = fs.btree_walk_raw(&root, &mut |_| Ok(true)) {
                        err(format!("{k:?} walk"), e);
                    }
                }
            }
            Err(e) => err("agf".into(), e),
        }
        match fs.read_agi(ag) {
            Ok(agi) => {
                for &k in &agi_trees {
                    let root = BtreeRoot::from_agi(k, ag, &agi);
                    if let Err(e) = fs.btree_walk_raw(&root, &mut |_| Ok(true)) {
                        err(format!("{k:?} walk"), e);
                    }
                    // Point lookups descend without the sibling checks.
                    for key in [0u64, 1 << 12, u32::MAX as u64] {
                        let r = fs.btree_lookup_le::<InobtRec>(&root, BtreeKey(key, 0, 0));
                        if let Err(e) = r {
                            err(format!("{k:?} lookup {key}"), e);
                        }
                    }
                }
            }
            Err(e) => err("agi".into(), e),
        }
    }
}

/// Whether the inode btree says `ino` is allocated (errors recorded).
pub fn check_allocated(fs: &Filesystem, ino: Ino, report: &mut Report) {
    if let Err(e) = rxfs::ialloc::read::inode_allocated(fs, ino) {
        report
            .errors
            .push((format!("inode_allocated {}", ino.0), e));
    }
}
