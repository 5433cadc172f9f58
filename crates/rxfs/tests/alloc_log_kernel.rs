//! The allocator through real logged transactions (`Filesystem::trans_alloc`),
//! then a crash: only what the log holds survives, so every byte the
//! allocator changed must have been logged (`log_buf`) for the recovered
//! image to be consistent. The kernel (and rxfs, on a copy) recover the
//! log; `xfs_repair -n`, `xfs_db freesp` and the model checks of
//! `alloc_support` must then agree that exactly the held extents are
//! allocated.

mod alloc_support;
mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use alloc_support::*;
use common::*;
use rxfs::alloc::{alloc_extent, free_extent, AllocReq};
use rxfs::types::{AgBlock, AgNumber};
use rxfs::xact::{MetaTx, Resv};
use rxfs::{Error, Filesystem, MountOptions};

fn open_rw(img: &Path) -> Arc<Filesystem> {
    let opts = MountOptions {
        read_only: false,
        ..Default::default()
    };
    Filesystem::open(dev(img), None, opts).unwrap()
}

/// One operation in one transaction.
fn op<T>(fs: &Filesystem, f: impl FnOnce(&mut dyn MetaTx) -> rxfs::Result<T>) -> rxfs::Result<T> {
    let mut tx = fs.trans_alloc(Resv::Write).unwrap();
    match f(&mut tx) {
        Ok(v) => {
            tx.commit().unwrap();
            Ok(v)
        }
        Err(e) => {
            tx.cancel();
            Err(e)
        }
    }
}

fn alloc(fs: &Filesystem, r: &AllocReq, model: &mut Model) -> bool {
    match op(fs, |tx| alloc_extent(tx, r)) {
        Ok(e) => {
            assert!(e.len >= r.minlen && e.len <= r.maxlen && e.agbno.0 % r.align == 0);
            model.add(e.agno.0, e.agbno.0, e.len);
            true
        }
        Err(Error::NoSpace) => false,
        Err(e) => panic!("{r:?}: {e}"),
    }
}

fn free(fs: &Filesystem, a: u32, b: u32, l: u32, model: &mut Model) {
    op(fs, |tx| free_extent(tx, AgNumber(a), AgBlock(b), l)).unwrap();
    model.0.remove(&(a, b));
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn logged_alloc_free_survive_a_crash() {
    setup();
    if kernel_tests_disabled() {
        return;
    }
    let s = Scratch::new("alloclog");
    let img = s.path("a.img");
    mkfs_with(&img, 64 << 20, &["-d", "size=64m,agcount=2"], FSTESTS_ENV);
    let init = snapshot(&img);
    let mut model = Model(BTreeMap::new());
    let mut rng = Rng(seed(0x5eed_0010) | 1);
    let fs = open_rw(&img);
    // Two-level trees in AG 1: single blocks, every other one freed.
    let mut singles = Vec::new();
    for _ in 0..1400 {
        assert!(alloc(&fs, &req(1, 1, 1), &mut model));
        singles.push(*model.0.keys().next_back().unwrap());
    }
    let mut blocks: Vec<(u32, u32)> = model.0.keys().copied().collect();
    blocks.sort();
    for &(a, b) in blocks.iter().step_by(2) {
        free(&fs, a, b, 1, &mut model);
    }
    // Random work in both AGs.
    for _ in 0..1500 {
        if model.0.is_empty() || rng.below(10) < 6 {
            let minlen = 1 + rng.below(4) as u32;
            let mut r = req(rng.below(2) as u32, minlen, minlen + rng.below(17) as u32);
            r.align = [1, 1, 4, 8][rng.below(4) as usize];
            r.any_ag = rng.below(2) == 0;
            if rng.below(2) == 0 {
                r.near = Some(AgBlock(rng.below(8192) as u32));
            }
            alloc(&fs, &r, &mut model);
        } else {
            let i = rng.below(model.0.len() as u64) as usize;
            let (&(a, b), &l) = model.0.iter().nth(i).unwrap();
            free(&fs, a, b, l, &mut model);
        }
    }
    let seq = op(&fs, |tx| alloc_extent(tx, &req(0, 3, 3))).map(|e| {
        model.add(e.agno.0, e.agbno.0, e.len);
    });
    seq.unwrap();
    fs.log_force().unwrap();
    // Crash: nothing more is written back; the log holds the rest.
    fs.abandon();
    drop(fs);

    // rxfs recovers a copy.
    let copy = s.path("copy.img");
    std::fs::copy(&img, &copy).unwrap();
    let fs = open_rw(&copy);
    assert!(fs.recovery_stats().is_some(), "the log was not dirty");
    fs.unmount().unwrap();
    drop(fs);
    let ags = check_model(&copy, &init, &model);
    eprintln!(
        "rxfs recovery: levels {:?}, free extents {:?}, held {}",
        ags.iter().map(|a| a.levels).collect::<Vec<_>>(),
        ags.iter().map(|a| a.free.len()).collect::<Vec<_>>(),
        model.0.len()
    );
    assert!(ags[1].levels.0 >= 2, "AG 1 trees stayed at one level");

    // The kernel recovers the original.
    let m = KernelMount::new(&img, &s.path("mnt"), "");
    m.umount();
    check_model(&img, &init, &model);

    // Free everything through the log again, unmount cleanly.
    let fs = open_rw(&img);
    let held: Vec<((u32, u32), u32)> = model.0.iter().map(|(k, v)| (*k, *v)).collect();
    for ((a, b), l) in held {
        free(&fs, a, b, l, &mut model);
    }
    fs.unmount().unwrap();
    drop(fs);
    let ags = check_model(&img, &init, &model);
    for (a, st) in ags.iter().enumerate() {
        assert_eq!(st.levels, (1, 1), "AG {a}");
    }
}
