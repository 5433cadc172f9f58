//! Node directories several DA levels deep, kept in their own test binary:
//! the fan-out knob (`rxfs::dir::index::TEST_FANOUT`) is process-wide.
//! Leafn blocks and DA nodes hold at most 8 entries (the kernel and
//! `xfs_repair` accept less-than-full blocks), so a few thousand entries
//! build a tree four levels high; then most are removed (leaves and nodes
//! go away, the tree shrinks, node -> leaf). Oracle as in
//! `dirop_leaf_kernel`: rxfs read path, `xfs_repair -n`, kernel listing.

mod common;
#[allow(dead_code)]
mod ns_support;

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::Ordering;

use rxfs::xact::MetaTx;

use common::*;
use ns_support::*;
use rxfs::fs::ops_ns::CreateArgs;

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn node_form_deep_tree_small_fanout() {
    rxfs::dir::index::TEST_FANOUT.store(8, Ordering::Relaxed);
    let (s, img) = setup("dnode_deep", &["-b", "size=1024"]);
    let fs = rw(&img);
    let root = fs.root_ino();
    let d = fs
        .mkdir(root, b"d", &CreateArgs::root(0o40755))
        .unwrap()
        .ino;
    let f = fs
        .create(root, b"f", &CreateArgs::root(0o100644))
        .unwrap()
        .ino;
    // The index kept in core between operations (dir::skel) must equal
    // the one read from the disk, at every step.
    // (Leaf form is not kept: its one leaf block is read.) Returns whether
    // the directory was in node form.
    let skel_matches_disk = |fs: &rxfs::Filesystem, when: &str| -> bool {
        let mut tx = fs.trans_alloc(rxfs::xact::Resv::Create).unwrap();
        let dp = tx.ijoin(d).unwrap();
        let hits = rxfs::dir::index::SKEL_HITS.load(Ordering::Relaxed);
        let kept = rxfs::dir::index::load_big(&mut tx, dp).unwrap();
        let hit = rxfs::dir::index::SKEL_HITS.load(Ordering::Relaxed) == hits + 1;
        tx.set_fork_cache(dp, None);
        let read = rxfs::dir::index::load_big(&mut tx, dp).unwrap();
        tx.cancel();
        assert_eq!(hit, !read.leaf_form, "{when}: node form not kept in core");
        if !hit {
            return false;
        }
        let (a, b) = (&kept.base, &read.base);
        assert_eq!(a.map, b.map, "{when}: extent map");
        assert_eq!(a.leaves, b.leaves, "{when}: leaf blocks");
        assert_eq!(a.bests, b.bests, "{when}: bests");
        assert_eq!(a.nodes, b.nodes, "{when}: DA nodes");
        assert_eq!(a.parent, b.parent, "{when}: node parents");
        assert_eq!(a.index, b.index, "{when}: index blocks");
        true
    };
    let mut node_checks = 0;
    let mut m = BTreeMap::new();
    for i in 0..2500u64 {
        let nm = format!("deep-{:08x}", i.wrapping_mul(0x9e37_79b9) & 0xffff_ffff).into_bytes();
        fs.link(f, d, &nm).unwrap();
        m.insert(nm, f.0);
        if i >= 300 && i % 149 == 0 {
            node_checks += skel_matches_disk(&fs, &format!("after link {i}")) as u32;
        }
    }
    let check_mid = |m: &BTreeMap<Vec<u8>, u64>| {
        let dip = fs.iget(d).unwrap();
        for (nm, ino) in m {
            assert_eq!(fs.lookup(&dip, nm).unwrap().0, *ino);
        }
    };
    check_mid(&m);
    // The tree really is deep: the root DA node sits at level 3 or more.
    let levels = |fs: &rxfs::Filesystem| {
        let mut tx = fs.trans_alloc(rxfs::xact::Resv::Create).unwrap();
        let dp = tx.ijoin(d).unwrap();
        let big = rxfs::dir::index::load_big(&mut tx, dp).unwrap();
        // The index as on disk (read, or kept in core since the last
        // change: both describe every node).
        let top = big.base.nodes.values().map(|n| n.level).max().unwrap_or(0);
        tx.cancel();
        top
    };
    let top = levels(&fs);
    assert!(top >= 3, "root node level {top}");
    let names: Vec<Vec<u8>> = m.keys().cloned().collect();
    for (i, nm) in names.iter().enumerate() {
        if i % 10 != 0 {
            fs.unlink(d, nm).unwrap();
            m.remove(nm);
            if i % 151 == 1 && m.len() > 300 {
                node_checks += skel_matches_disk(&fs, &format!("after unlink {i}")) as u32;
            }
        }
    }
    check_mid(&m);
    assert!(node_checks >= 20, "only {node_checks} checks in node form");
    // Most changes kept the nodes as they were (the commit's fast path,
    // checked against the disk at every point above).
    let same = rxfs::dir::index::SKEL_SAME_SHAPE.load(Ordering::Relaxed);
    assert!(same > 1000, "only {same} commits kept the DA nodes");
    assert!(levels(&fs) < top, "the tree did not shrink");
    fs.unmount().unwrap();
    drop(fs);
    rxfs::dir::index::TEST_FANOUT.store(0, Ordering::Relaxed);
    if let Err(e) = repair(&img) {
        panic!("{e}");
    }
    let mnt = s.path("mnt");
    let k = KernelMount::new(&img, &mnt, "");
    let got: BTreeMap<Vec<u8>, u64> = std::fs::read_dir(mnt.join("d"))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().as_bytes().to_vec(),
                e.metadata().unwrap().ino(),
            )
        })
        .collect();
    k.umount();
    assert_eq!(got, m);
    if let Err(e) = repair(&img) {
        panic!("after the kernel mount: {e}");
    }
}
