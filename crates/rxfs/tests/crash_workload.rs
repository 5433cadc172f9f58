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
//! Tests: `crash_workload_seeds` (the main one, default mount options),
//! `crash_workload_namespace_only` (namespace ops and sync),
//! `crash_workload_ablate_delaylog_256k` (a checkpoint per transaction:
//! intents and their done items land in different checkpoints),
//! `crash_workload_small_logbufs_wrapping` (2 x 16 KiB log buffers, the
//! log end wrapped by the recorded workload, extra torn images around the
//! write that reaches the log end), and `checker_rules` (the checker on a
//! hand-made history). Each prints its counts (seeds x crash points x
//! modes, images, kernel recoveries, failures).
//!
//! Environment: RXFS_CRASH_SEEDS (default 6), RXFS_CRASH_POINTS (crash
//! points per seed, default 12), RXFS_CRASH_OPS (default 160),
//! RXFS_CRASH_LONG_OPS (the wrap test, default 800),
//! RXFS_CRASH_KERNEL_EVERY (default 10), RXFS_CRASH_SEED_BASE (first seed),
//! RXFS_KEEP_SCRATCH (keep failing crash images under
//! /tmp/rxfs-crash-failed). A failure prints its seed, crash point, mode
//! and case seed. Needs root and xfsprogs; fails (never skips) unless
//! RXFS_SKIP_KERNEL_TESTS=1.

mod common;
mod crash_support;

use common::*;
use crash_support::model;
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
    let seeds = env_usize("RXFS_CRASH_SEEDS", 6) as u64;
    let run = SeedRun {
        params: Params {
            ops: env_usize("RXFS_CRASH_OPS", 160),
            ..Params::default()
        },
        opts: rw(),
        points: env_usize("RXFS_CRASH_POINTS", 12),
        kernel_every: env_usize("RXFS_CRASH_KERNEL_EVERY", 10),
        prefill_log: None,
        lying_flush: false,
    };
    let tot = run_all("crash-workload", base..base + seeds, &[], run);
    assert_clean(&tot);
}

/// The ablation switch (a checkpoint per transaction) with 256 KiB log
/// buffers: many small checkpoints, each its own record, under the same
/// crash rules.
#[test]
fn crash_workload_ablate_delaylog_256k() {
    if kernel_tests_disabled() {
        return;
    }
    require_root();
    let mut opts = rw();
    opts.ablate_delaylog = true;
    opts.logbsize = Some(256 << 10);
    let run = SeedRun {
        params: Params {
            ops: env_usize("RXFS_CRASH_OPS", 160),
            ..Params::default()
        },
        opts,
        points: env_usize("RXFS_CRASH_POINTS", 12),
        kernel_every: env_usize("RXFS_CRASH_KERNEL_EVERY", 10),
        prefill_log: None,
        lying_flush: false,
    };
    let tot = run_all("crash-ablate", 7001..7003, &[], run);
    assert_clean(&tot);
    assert!(
        tot.checkpoints * 10 >= tot.commits * 9,
        "ablate_delaylog: {} checkpoints for {} commits",
        tot.checkpoints,
        tot.commits
    );
}

/// Namespace operations and sync only (runs before the data path exists).
#[test]
fn crash_workload_namespace_only() {
    if kernel_tests_disabled() {
        return;
    }
    require_root();
    let base = env_usize("RXFS_CRASH_SEED_BASE", 1) as u64;
    let run = SeedRun {
        params: Params {
            ops: env_usize("RXFS_CRASH_OPS", 160),
            data_ops: false,
            ..Params::default()
        },
        opts: rw(),
        points: env_usize("RXFS_CRASH_POINTS", 12),
        kernel_every: env_usize("RXFS_CRASH_KERNEL_EVERY", 10),
        prefill_log: None,
        lying_flush: false,
    };
    let tot = run_all("crash-ns", base + 500..base + 502, &[], run);
    assert_clean(&tot);
}

/// Two small log buffers (checkpoints span several of them), and the
/// log end wrapped during the recorded workload: a durable prefill first
/// brings the head of the minimum-size log to 97% of its size.
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
            ops: env_usize("RXFS_CRASH_LONG_OPS", 800),
            ..Params::default()
        },
        opts,
        points: env_usize("RXFS_CRASH_POINTS", 12),
        kernel_every: env_usize("RXFS_CRASH_KERNEL_EVERY", 10),
        prefill_log: Some(0.97),
        lying_flush: false,
    };
    let tot = run_all("crash-wrap", 9001..9004, &[], run);
    assert_clean(&tot);
    assert!(
        tot.log_bytes + tot.prefill_bytes > tot.log_size,
        "the log did not wrap: {} + {} bytes written, log size {}",
        tot.prefill_bytes,
        tot.log_bytes,
        tot.log_size
    );
    assert!(tot.log_end_writes > 0, "no log write reached the log end");
}

/// 4 KiB sectors (`mkfs -s size=4096`: 4 KiB AG headers and log sectors,
/// a 4 KiB log stripe unit every record is padded to) and a 32 KiB log
/// stripe unit (`-l su=32k`): the same crash rules, and every second image
/// also recovered by the kernel.
fn striped_log_variant(name: &str, seeds: std::ops::Range<u64>, mkfs_opts: &[&str]) {
    let run = SeedRun {
        params: Params {
            ops: env_usize("RXFS_CRASH_OPS", 160),
            ..Params::default()
        },
        opts: rw(),
        points: env_usize("RXFS_CRASH_POINTS", 8),
        kernel_every: 2,
        prefill_log: None,
        lying_flush: false,
    };
    let tot = run_all(name, seeds, mkfs_opts, run);
    assert_clean(&tot);
    assert!(
        tot.kernel_images > 0,
        "no image was recovered by the kernel"
    );
}

#[test]
fn crash_workload_4k_sectors() {
    if kernel_tests_disabled() {
        return;
    }
    require_root();
    striped_log_variant("crash-s4k", 5101..5103, &["-s", "size=4096"]);
}

#[test]
fn crash_workload_log_stripe_unit() {
    if kernel_tests_disabled() {
        return;
    }
    require_root();
    striped_log_variant("crash-lsu", 5201..5203, &["-l", "su=32k"]);
}

/// The harness must catch a broken durability promise: with a device
/// whose flushes do nothing, fsync'd states are lost at crash points that
/// drop unflushed writes, and the checks must say so.
#[test]
fn harness_catches_a_lying_flush() {
    if kernel_tests_disabled() {
        return;
    }
    require_root();
    let run = SeedRun {
        params: Params {
            ops: 120,
            ..Params::default()
        },
        opts: rw(),
        points: 8,
        kernel_every: 0,
        prefill_log: None,
        lying_flush: true,
    };
    let tot = run_all("crash-lying", 4242..4243, &[], run);
    assert!(tot.stops.is_empty(), "{:?}", tot.stops);
    assert!(
        !tot.failures.is_empty(),
        "flushes that do nothing went unnoticed"
    );
    let live = tot.failures.iter().find(|f| f.contains(" mode All "));
    assert!(live.is_none(), "a failure of the live image: {live:?}");
}

/// The checker itself, on a hand-made history: it must accept what the
/// rules allow and reject a lost fsync, stale data and a wrong namespace.
#[test]
fn checker_rules() {
    use crash_support::check::check_tree;
    use crash_support::model::{Durable, History, OpRec, Scope, State};
    use crash_support::walk::{Got, Tree};
    use std::sync::Arc;

    let st = |c: &[u8]| {
        Some(Arc::new(State {
            dir: false,
            content: Arc::new(c.to_vec()),
            perm: 0o644,
            uid: 0,
            gid: 0,
            mtime: None,
        }))
    };
    let root = Arc::new(State {
        dir: true,
        content: Arc::new(Vec::new()),
        perm: 0o755,
        uid: 0,
        gid: 0,
        mtime: None,
    });
    let v1 = vec![1u8; 1024];
    let mut v2 = v1.clone();
    v2[100..200].fill(3);
    v2[600..].fill(2);
    let mut h = History::default();
    for (d, s, e) in [
        ("mkfs", 0, 0),
        ("create /a", 0, 2),
        ("write /a v1", 2, 4),
        ("fsync /a", 4, 6),
        ("overwrite /a v2", 6, 8),
    ] {
        h.ops.push(OpRec {
            desc: d.into(),
            ev_start: s,
            ev_end: e,
        });
    }
    h.paths.insert("/".into(), vec![(0, Some(root))]);
    h.paths
        .insert("/a".into(), vec![(1, st(b"")), (2, st(&v1)), (4, st(&v2))]);
    let ns0: model::Namespace = [("/".to_string(), true)].into_iter().collect();
    let mut ns1 = ns0.clone();
    ns1.insert("/a".into(), false);
    h.ns = vec![(0, Arc::new(ns0)), (1, Arc::new(ns1))];
    h.durable.push(Durable {
        op: 3,
        ev_end: 6,
        ns_lo: 2,
        scope: Scope::Path {
            path: "/a".into(),
            meta: true,
        },
    });
    let tree = |a: Option<&[u8]>| {
        let mut t = Tree::new();
        let got = |dir, perm, c: &[u8]| Got {
            dir,
            other: false,
            perm,
            uid: 0,
            gid: 0,
            size: c.len() as u64,
            mtime: (0, 0),
            content: c.to_vec(),
        };
        t.insert("/".into(), got(true, 0o755, b""));
        if let Some(c) = a {
            t.insert("/a".into(), got(false, 0o644, c));
        }
        t
    };
    // Before the fsync returned: anything up to the write.
    assert!(check_tree(&h, 5, &tree(None)).is_ok());
    assert!(check_tree(&h, 5, &tree(Some(b""))).is_ok());
    assert!(check_tree(&h, 5, &tree(Some(&v1))).is_ok());
    // The fsync returned: v1 or (the overwrite may have started) v2, or
    // a sector-wise mix of them; never the empty file or no file.
    assert!(check_tree(&h, 6, &tree(Some(&v1))).is_ok());
    assert!(check_tree(&h, 6, &tree(Some(&v2))).is_ok());
    let mut mix = v1.clone();
    mix[512..].copy_from_slice(&v2[512..]);
    assert!(check_tree(&h, 6, &tree(Some(&mix))).is_ok());
    assert!(check_tree(&h, 6, &tree(Some(b""))).is_err());
    assert!(check_tree(&h, 6, &tree(None)).is_err());
    let mut stale = v1.clone();
    stale[700] = 9;
    assert!(check_tree(&h, 6, &tree(Some(&stale))).is_err());
    // Before the overwrite started, only v1 itself.
    let mut h2 = History { ..h };
    h2.ops[4].ev_start = 7;
    assert!(check_tree(&h2, 6, &tree(Some(&v2))).is_err());
    assert!(check_tree(&h2, 6, &tree(Some(&v1))).is_ok());
    // Wrong attributes of a durable file.
    let mut t = tree(Some(&v1));
    t.get_mut("/a").unwrap().perm = 0o600;
    assert!(check_tree(&h2, 6, &t).is_err());
}
