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
fn node_form_deep_tree_small_fanout() {
    if kernel_tests_disabled() {
        return;
    }
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
    let mut m = BTreeMap::new();
    for i in 0..2500u64 {
        let nm = format!("deep-{:08x}", i.wrapping_mul(0x9e37_79b9) & 0xffff_ffff).into_bytes();
        fs.link(f, d, &nm).unwrap();
        m.insert(nm, f.0);
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
        let top = big
            .bufs
            .values()
            .filter(|(_, k)| *k == rxfs::format::bufkind::BufKind::DaNode)
            .map(|(b, _)| u16::from_be_bytes(tx.buf(*b)[58..60].try_into().unwrap()))
            .max()
            .unwrap_or(0);
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
        }
    }
    check_mid(&m);
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
