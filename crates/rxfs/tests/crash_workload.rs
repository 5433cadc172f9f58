//! Crash consistency of the write path (issue 3, "crash simulator"):
//! seeded workloads of creates, mkdirs, unlinks, rmdirs, writes (new,
//! append, overwrite, sparse), truncates, chmod/chown/utimens, fsync,
//! fdatasync and sync on a 64 MiB, 2-AG filesystem in a `CrashDevice`;
//! for sampled crash points, in every crash mode (Lost, All, Subset,
//! Torn), rxfs recovers the image (read-write open), which must keep every
//! durable state (rules: `crash_support/model.rs`), unmount clean, and pass
//! `xfs_repair -n`; one image in RXFS_CRASH_KERNEL_EVERY (default 10) is
//! also recovered by the kernel, which must show the same tree and pass
//! `xfs_repair -n`.
//!
//! Environment: RXFS_CRASH_SEEDS (default 4), RXFS_CRASH_POINTS (crash
//! points per seed, default 12), RXFS_CRASH_OPS (default 160),
//! RXFS_CRASH_SEED_BASE (first seed), RXFS_KEEP_SCRATCH (keep failing
//! crash images under /tmp/rxfs-crash-failed). Needs root and xfsprogs;
//! fails (never skips) unless RXFS_SKIP_KERNEL_TESTS=1.

mod common;
mod crash_support;

use common::*;
use crash_support::rwapi::rw;
use crash_support::workload::Params;
use crash_support::*;

fn run_all(name: &str, seeds: std::ops::Range<u64>, mkfs_opts: &[&str], run: SeedRun) -> Totals {
    let scr = Scratch::new(name);
    let base = fresh_image(&scr, mkfs_opts);
    let mut tot = Totals::default();
    let t0 = std::time::Instant::now();
    for seed in seeds {
        run_seed(&scr, &base, seed, &run, &mut tot);
        eprintln!("{} ({:.1}s)", tot.report(name), t0.elapsed().as_secs_f64());
    }
    println!("{}", tot.report(name));
    eprintln!("{}", tot.report(name));
    for s in &tot.stops {
        eprintln!("stopped: {s}");
    }
    tot
}

fn assert_clean(tot: &Totals) {
    assert!(
        tot.failures.is_empty(),
        "{} failing crash images; first:\n{}",
        tot.failures.len(),
        tot.failures[0]
    );
    assert!(
        tot.stops.is_empty(),
        "workloads stopped early: {:?}",
        tot.stops
    );
    assert!(tot.exact > 0, "no durable file was ever checked");
}

#[test]
fn crash_workload_seeds() {
    if kernel_tests_disabled() {
        return;
    }
    require_root();
    let base = env_usize("RXFS_CRASH_SEED_BASE", 1) as u64;
    let seeds = env_usize("RXFS_CRASH_SEEDS", 4) as u64;
    let run = SeedRun {
        params: Params {
            ops: env_usize("RXFS_CRASH_OPS", 160),
            ..Params::default()
        },
        opts: rw(),
        points: env_usize("RXFS_CRASH_POINTS", 12),
        kernel_every: env_usize("RXFS_CRASH_KERNEL_EVERY", 10),
    };
    let tot = run_all("crash-workload", base..base + seeds, &[], run);
    assert_clean(&tot);
}

/// Two small log buffers: checkpoints span several buffers, and a long
/// workload wraps the minimum-size log.
#[test]
fn crash_workload_small_logbufs_wrapping() {
    if kernel_tests_disabled() {
        return;
    }
    require_root();
    let mut opts = rw();
    opts.logbufs = Some(2);
    opts.logbsize = Some(16 << 10);
    let run = SeedRun {
        params: Params {
            ops: env_usize("RXFS_CRASH_LONG_OPS", 1500),
            ..Params::default()
        },
        opts,
        points: env_usize("RXFS_CRASH_POINTS", 12),
        kernel_every: env_usize("RXFS_CRASH_KERNEL_EVERY", 10),
    };
    let tot = run_all("crash-wrap", 9001..9002, &[], run);
    assert_clean(&tot);
}
