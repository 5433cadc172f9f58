//! The seeded random-operation tester (issue 4's) on realtime files
//! (issue 17): the root directory gets RTINHERIT, so every regular file
//! the generator makes is realtime (directories pass the flag on), and
//! its writes, overwrites, truncates, punches, preallocations, shifts,
//! renames and unlinks go through the realtime allocator. The live view
//! must equal the model after every round; after unmount `xfs_repair -n
//! -r` must be clean, rxfs's checker must find nothing (bitmap against
//! every file's mappings, summary, sb_frextents), and a read-only reopen
//! must read the model back. This kernel cannot mount realtime XFS, so
//! xfs_repair and rxfs's read path are the oracles.
//!
//! Runs with rt extents of one block (every operation allowed) and of
//! four blocks (collapse/insert need whole rt extents there, as in the
//! kernel, so the generator does not shift; punches zero the partial rt
//! extents at their ends).
//!
//! `rt_random_ops_crash_sampled`: the data device is the crash simulator
//! (the realtime device a plain in-memory device holding every write: a
//! superset of what a power cut keeps, which is safe because the log
//! flushes the realtime device before every commit record); sampled
//! power cuts in every crash mode are recovered by rxfs, then the image
//! must be `xfs_repair -n -r` clean, the realtime bitmap, summary and
//! sb_frextents agree, and the namespace equal the model after some
//! operation between the last completed sync and the cut.

mod common;
mod random_support;

use std::path::Path;
use std::sync::Arc;

use common::*;
use random_support::gen::{Gen, Params};
use random_support::model::Model;
use random_support::targets::LibTarget;
use random_support::timeline::Timeline;
use random_support::view::{diff, of_model, of_rxfs};
use random_support::{close_all, run_ops, Counts};
use rxfs::bdev::{
    for_each_crash_image, sample_points, BlockDevice, CrashDevice, CrashMode, MemDevice,
};
use rxfs::cred::Cred;
use rxfs::format::xflags::XFLAG_RTINHERIT;
use rxfs::{Filesystem, MountOptions};

fn params(bs: u64, ops: usize, shift: bool) -> Params {
    Params {
        ops,
        max_file: 160 * bs,
        names: 20,
        dirblk: 4096,
        big_dirs: false,
        xattrs: true,
        falloc: true,
        shift,
        bs,
    }
}

fn repair_clean(img: &Path, rt: &Path, what: &str) {
    let out = run_output(
        "xfs_repair",
        &["-n", "-r", rt.to_str().unwrap(), img.to_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "{what}: xfs_repair -n -r:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn seeds(name: &str, bs: u32, rext: u32, seeds: u64, ops: usize) {
    if kernel_tests_disabled() {
        return;
    }
    require_tools(&["mkfs.xfs", "xfs_repair"]);
    let p = params(bs as u64, ops, rext == bs);
    let mut c = Counts::default();
    let mut rt_allocs = 0;
    for seed in 0..seeds {
        let s = Scratch::new(name);
        let (img, rt) = (s.path("img"), s.path("rt"));
        std::fs::File::create(&rt)
            .unwrap()
            .set_len(64 << 20)
            .unwrap();
        let b = format!("size={bs}");
        let r = format!("rtdev={},extsize={rext}", rt.display());
        mkfs_with(&img, 256 << 20, &["-b", &b, "-r", &r], FSTESTS_ENV);
        let fs = Filesystem::open_path(&img, Some(&rt), MountOptions::default()).unwrap();
        let root = fs.root_ino();
        let mut x = fs.get_fsxattr(root).unwrap();
        x.xflags |= XFLAG_RTINHERIT;
        fs.set_fsxattr(root, &x, true, &Cred::root()).unwrap();
        let mut t = LibTarget::new(fs.clone(), None);
        let mut m = Model::new();
        let mut g = Gen::new(seed, p);
        for round in 0..4 {
            if let Err(e) = run_ops(&mut g, &mut m, &mut t, ops / 4, &mut c) {
                panic!("{name} seed {seed}: {e}");
            }
            let d = diff(&of_model(&m, true), &of_rxfs(&fs, true).unwrap());
            assert!(d.is_empty(), "{name} seed {seed} round {round}:\n{d}");
        }
        close_all(&mut m, &mut t, &mut c).unwrap();
        rt_allocs += fs.stats().rt.allocs;
        fs.unmount().unwrap();
        drop(t);
        drop(fs);
        let what = format!("{name} seed {seed}");
        repair_clean(&img, &rt, &what);
        let ro = open_ro_rt(&img, &rt);
        let chk = rxfs::rt::check(&*ro).unwrap();
        assert!(chk.is_clean(), "{what}: {chk:?}");
        let d = diff(&of_model(&m, true), &of_rxfs(&ro, true).unwrap());
        assert!(d.is_empty(), "{what}: after reopen:\n{d}");
        let _: &Arc<Filesystem> = &ro;
    }
    eprintln!(
        "{name}: {seeds} seeds, {} operations ({} answered with an errno, as the model said), \
         {rt_allocs} realtime allocations",
        c.ops, c.errors
    );
    assert!(rt_allocs > 0, "{name}: nothing went to the realtime device");
}

#[test]
fn rt_random_ops_rextsize_1() {
    seeds("rt_rnd_r1", 4096, 4096, 8, 600);
}

#[test]
fn rt_random_ops_rextsize_4_1k_blocks() {
    seeds("rt_rnd_r4", 1024, 4096, 8, 600);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn rt_random_ops_crash_sampled() {
    require_tools(&["mkfs.xfs", "xfs_repair"]);
    let s = Scratch::new("rt_rnd_crash");
    let (img, rt) = (s.path("base"), s.path("rt"));
    std::fs::File::create(&rt)
        .unwrap()
        .set_len(32 << 20)
        .unwrap();
    let r = format!("rtdev={},extsize=4096", rt.display());
    mkfs_with(&img, 64 << 20, &["-d", "agcount=2", "-r", &r], FSTESTS_ENV);
    let base = std::fs::read(&img).unwrap();
    let rt_base = std::fs::read(&rt).unwrap();
    let (mut ops, mut images) = (0, 0);
    for seed in 0..3u64 {
        let dev = Arc::new(CrashDevice::new(base.clone(), 1 << 30));
        let rtdev: Arc<dyn BlockDevice> = Arc::new(MemDevice::new(rt_base.clone()));
        let fs =
            Filesystem::open(dev.clone(), Some(rtdev.clone()), MountOptions::default()).unwrap();
        let root = fs.root_ino();
        let mut x = fs.get_fsxattr(root).unwrap();
        x.xflags |= XFLAG_RTINHERIT;
        fs.set_fsxattr(root, &x, true, &Cred::root()).unwrap();
        fs.sync().unwrap();
        let mut t = LibTarget::new(fs.clone(), Some(dev.clone()));
        let mut m = Model::new();
        let mut g = Gen::new(2000 + seed, params(4096, 0, true));
        let mut tl = Timeline::new(&m);
        let done = tl.run(
            &mut g,
            &mut m,
            &mut t,
            250,
            &format!("rt crash seed {seed}"),
        );
        ops += done;
        fs.abandon();
        drop(t);
        drop(fs);
        let rt_final = {
            let mut b = vec![0u8; rt_base.len()];
            rtdev.read_at(&mut b, 0).unwrap();
            b
        };
        std::fs::write(&rt, &rt_final).unwrap();
        let points = sample_points(&dev.crash_points(), 8, seed);
        let file = s.path("crash.img");
        for_each_crash_image(&dev, &points, &CrashMode::EVERY, seed, |ci| {
            let p = ci.point;
            let (lo, hi, allowed) = tl.allowed(p);
            let case = format!("seed {seed} point {p} mode {:?} (ops {lo}..={hi})", ci.mode);
            let rtd: Arc<dyn BlockDevice> = Arc::new(MemDevice::new(rt_final.clone()));
            let d: Arc<dyn BlockDevice> = ci.device();
            let fs = Filesystem::open(d, Some(rtd), MountOptions::default())
                .unwrap_or_else(|e| panic!("{case}: rxfs recovery: {e}"));
            let got = of_rxfs(&fs, false).unwrap();
            assert!(
                allowed.iter().any(|v| v.1 == got),
                "{case}: recovery shows a tree no prefix of the ops gives:\n{}",
                diff(&allowed[allowed.len() - 1].1, &got)
            );
            fs.unmount().unwrap();
            drop(fs);
            std::fs::write(&file, ci.to_vec()).unwrap();
            repair_clean(&file, &rt, &case);
            let ro = open_ro_rt(&file, &rt);
            let chk = rxfs::rt::check(&*ro).unwrap();
            assert!(chk.is_clean(), "{case}: {chk:?}");
            images += 1;
        })
        .unwrap();
    }
    eprintln!("rt_random_ops_crash_sampled: 3 seeds, {ops} operations, {images} crash images recovered by rxfs, every one repair-clean");
    assert!(images > 0);
}
