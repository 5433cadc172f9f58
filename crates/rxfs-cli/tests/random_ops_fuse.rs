//! The seeded random-operation tester (issue 4) through a read-write FUSE
//! mount (`rxfs mount`): the same generator and model as the library's
//! `random_ops_kernel`, with every operation made by system calls on the
//! mount point (create, mkdir, mkfifo, symlink, link, unlink, rmdir,
//! renameat2 with NOREPLACE/EXCHANGE, writes, scattered writes, truncate,
//! fallocate allocate/keep-size/punch/zero, files written through a
//! descriptor after their unlink). The mount's results and its live view
//! must equal the model's; after `rxfs umount`, `xfs_repair -n` exits 0
//! and the kernel's view equals the model.
//!
//! One test runs the default mount (no write-back cache: every write(2)
//! served at once), the other with the kernel's write-back cache
//! (`-o writeback_cache=on`: writes reach rxfs at writeback, fsync, close
//! or unmount).
//!
//! Environment: RXFS_RANDOM_SEEDS=N (seeds per test, default 3; the
//! seeds are fixed per test, so a larger N runs the default ones
//! first) or A..B (the test's seeds A to B-1: a failing seed replays),
//! RXFS_RANDOM_FUSE_OPTS (mount options added to every run,
//! e.g. `threads=1,fuse_uring=off`). Root only; fails unless
//! RXFS_SKIP_KERNEL_TESTS=1.

mod common;
#[path = "../../rxfs/tests/random_support/mod.rs"]
mod random_support;

use std::ffi::OsStr;

use common::*;
use random_support::gen::{Gen, Params};
use random_support::model::Model;
use random_support::targets::PosixTarget;
use random_support::view::{diff, of_model, of_mount};
use random_support::{close_all, run_ops, Counts};

/// The default mount, without the write-back cache: every write(2)
/// served at once.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn random_ops_through_fuse() {
    run("random_ops_through_fuse", "rw", 0);
}

/// The kernel's write-back cache on.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn random_ops_through_fuse_writeback_cache() {
    run(
        "random_ops_through_fuse_writeback_cache",
        "rw,writeback_cache=on",
        1000,
    );
}

/// RXFS_RANDOM_SEEDS: N (the test's first N seeds, default 3) or A..B
/// (seeds A to B-1 of the test, to replay one that failed).
fn seed_range(first_seed: u64) -> std::ops::Range<u64> {
    let v = std::env::var("RXFS_RANDOM_SEEDS").unwrap_or_default();
    let bad = || panic!("RXFS_RANDOM_SEEDS={v}: N or A..B");
    if v.is_empty() {
        return first_seed..first_seed + 3;
    }
    match v.split_once("..") {
        Some((a, b)) => match (a.parse::<u64>(), b.parse::<u64>()) {
            (Ok(a), Ok(b)) => first_seed + a..first_seed + b,
            _ => bad(),
        },
        None => match v.parse::<u64>() {
            Ok(n) => first_seed..first_seed + n,
            Err(_) => bad(),
        },
    }
}

fn run(tag: &str, opts: &str, first_seed: u64) {
    if kernel_tests_disabled() {
        return;
    }
    require_root();
    let seeds = seed_range(first_seed);
    let extra = std::env::var("RXFS_RANDOM_FUSE_OPTS").unwrap_or_default();
    let opts = if extra.is_empty() {
        opts.to_string()
    } else {
        format!("{opts},{extra}")
    };
    let mut c = Counts::default();
    let nseeds = seeds.end - seeds.start;
    for seed in seeds {
        let s = Scratch::new(tag);
        let img = s.path("img");
        mkfs(&img, 512 << 20, &[]);
        let mnt = s.path("m");
        let guard = rxfs_mount(&img, &mnt, &opts);
        let mut t = PosixTarget::new(mnt.clone());
        let mut m = Model::new();
        let p = Params {
            ops: 300,
            max_file: 160 * 4096,
            names: 20,
            dirblk: 4096,
            big_dirs: false,
            xattrs: true,
            falloc: true,
            // FUSE passes no collapse/insert range (EOPNOTSUPP).
            shift: false,
            bs: 4096,
        };
        let mut g = Gen::new(500 + seed, p);
        for round in 0..3 {
            run_ops(&mut g, &mut m, &mut t, 100, &mut c)
                .unwrap_or_else(|e| panic!("seed {seed} round {round}: {e}"));
            let live = of_mount(&mnt, true).unwrap();
            let d = diff(&of_model(&m, true), &live);
            assert!(d.is_empty(), "seed {seed} round {round}: FUSE view:\n{d}");
        }
        close_all(&mut m, &mut t, &mut c).unwrap();
        drop(t);
        rxfs_ok(&[OsStr::new("umount"), mnt.as_os_str()]);
        guard.disarm();
        run_output("xfs_repair", &[OsStr::new("-n"), img.as_os_str()]);
        let k = KernelMount::new(&img, &s.path("k"), "ro");
        let got = of_mount(&k.dir, true).unwrap();
        k.umount();
        let d = diff(&of_model(&m, true), &got);
        assert!(
            d.is_empty(),
            "seed {seed}: kernel view after rxfs umount:\n{d}"
        );
    }
    eprintln!(
        "{tag}: {nseeds} seeds, {} operations ({} errnos as the model said)",
        c.ops, c.errors
    );
}
