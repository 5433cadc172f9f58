//! Crash consistency of the write path (issue 3, "crash simulator";
//! issue 12, namespace ops): seeded workloads of creates, mkdirs, unlinks,
//! rmdirs, renames (new name, over a file, directories, NOREPLACE,
//! EXCHANGE), links, atomic saves (X.tmp written, fsynced, renamed over X,
//! directory fsynced), writes (new, append, overwrite, sparse), truncates,
//! fallocate (allocate, keep-size, punch hole, zero range), xattr
//! set/replace/remove, chmod/chown/utimens, fsync of files and
//! directories, fdatasync and sync on a 64 MiB, 2-AG filesystem in a
//! `CrashDevice` (op mixes: `crash_support/workload.rs`);
//! for sampled crash points, in every crash mode (Lost, All, Subset,
//! Torn), rxfs recovers the image (read-write open), which must keep every
//! durable state (rules: `crash_support/model.rs`), unmount clean, and pass
//! `xfs_repair -n`; one image in RXFS_CRASH_KERNEL_EVERY (default 10) is
//! also recovered by the kernel, which must show the same tree and pass
//! `xfs_repair -n`.
//!
//! Tests: `crash_workload_seeds` (the main one, the full op mix, default
//! mount options), `crash_workload_namespace_fsync` (biased towards
//! renames, links, atomic saves and directory fsyncs),
//! `crash_workload_namespace_only` (namespace ops and sync),
//! `crash_workload_ablate_delaylog_256k` (a checkpoint per transaction:
//! intents and their done items land in different checkpoints),
//! `crash_workload_small_logbufs_wrapping` (2 x 16 KiB log buffers, the
//! log end wrapped by the recorded workload, extra torn images around the
//! write that reaches the log end), and `checker_rules` /
//! `checker_rules_namespace` (the checker on hand-made histories). Each prints its counts (seeds x crash points x
//! modes, images, kernel recoveries, failures).
//!
//! Environment: RXFS_CRASH_SEEDS (default 6), RXFS_CRASH_NS_SEEDS (the
//! namespace/fsync mix, default 2), RXFS_CRASH_POINTS (crash
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
use std::sync::Arc;

use crash_support::model::{self, History};
use crash_support::rwapi::rw;
use crash_support::walk;
use crash_support::workload::{Mix, Params};
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
    eprintln!("{name}: ops by kind: {}", tot.kinds_report());
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
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn crash_workload_seeds() {
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

/// A mix biased towards renames (files and directories, over files,
/// RENAME_EXCHANGE), links, atomic saves (write X.tmp, fsync, rename over
/// X, fsync the directory) and directory fsyncs.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn crash_workload_namespace_fsync() {
    require_root();
    let base = env_usize("RXFS_CRASH_SEED_BASE", 1) as u64;
    let run = SeedRun {
        params: Params {
            ops: env_usize("RXFS_CRASH_OPS", 160),
            mix: Mix::NamespaceFsync,
            ..Params::default()
        },
        opts: rw(),
        points: env_usize("RXFS_CRASH_POINTS", 12),
        kernel_every: env_usize("RXFS_CRASH_KERNEL_EVERY", 10),
        prefill_log: None,
        lying_flush: false,
    };
    let n = env_usize("RXFS_CRASH_NS_SEEDS", 2) as u64;
    let tot = run_all("crash-nsfsync", base + 800..base + 800 + n, &[], run);
    assert_clean(&tot);
}

/// The ablation switch (a checkpoint per transaction) with 256 KiB log
/// buffers: many small checkpoints, each its own record, under the same
/// crash rules.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn crash_workload_ablate_delaylog_256k() {
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
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn crash_workload_namespace_only() {
    require_root();
    let base = env_usize("RXFS_CRASH_SEED_BASE", 1) as u64;
    let run = SeedRun {
        params: Params {
            ops: env_usize("RXFS_CRASH_OPS", 160),
            mix: Mix::NamespaceOnly,
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
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn crash_workload_small_logbufs_wrapping() {
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
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn crash_workload_4k_sectors() {
    require_root();
    striped_log_variant("crash-s4k", 5101..5103, &["-s", "size=4096"]);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn crash_workload_log_stripe_unit() {
    require_root();
    striped_log_variant("crash-lsu", 5201..5203, &["-l", "su=32k"]);
}

/// The harness must catch a broken durability promise: with a device
/// whose flushes do nothing, fsync'd states are lost at crash points that
/// drop unflushed writes, and the checks must say so.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn harness_catches_a_lying_flush() {
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

/// A hand-made history for the checker tests: root is inode 1.
struct HandMade(model::History);

impl HandMade {
    fn new() -> Self {
        let mut h = model::History::default();
        h.ops.push(model::OpRec {
            desc: "mkfs".into(),
            ev_start: 0,
            ev_end: 0,
        });
        h.inodes
            .insert(1, vec![(0, Some(Arc::new(model::State::new(true, 0o755))))]);
        let mut m = HandMade(h);
        m.ns(0, &[]);
        m
    }

    /// Op `desc` running from event `s` to event `e`.
    fn op(&mut self, desc: &str, s: usize, e: usize) -> usize {
        self.0.ops.push(model::OpRec {
            desc: desc.into(),
            ev_start: s,
            ev_end: e,
        });
        self.0.ops.len() - 1
    }

    /// Inode `ino` holds a file with `content` and `xattrs` after `op`.
    fn file(&mut self, ino: u64, op: usize, content: &[u8], xattrs: HandXattrs) {
        let mut st = model::State::new(false, 0o644);
        st.content = Arc::new(content.to_vec());
        st.xattrs = Arc::new(
            xattrs
                .iter()
                .map(|(k, v)| (k.as_bytes().to_vec(), v.to_vec()))
                .collect(),
        );
        self.0
            .inodes
            .entry(ino)
            .or_default()
            .push((op, Some(Arc::new(st))));
    }

    /// The namespace after `op`: the root and `names` (path, inode; files).
    fn ns(&mut self, op: usize, names: &[(&str, u64)]) {
        let mut ns = model::Namespace::new();
        ns.insert("/".into(), model::NsEntry { dir: true, ino: 1 });
        for (p, ino) in names {
            ns.insert(
                p.to_string(),
                model::NsEntry {
                    dir: false,
                    ino: *ino,
                },
            );
        }
        self.0.ns.push((op, Arc::new(ns)));
    }

    fn durable(&mut self, op: usize, ns_lo: usize, scope: model::Scope) {
        let ev_end = self.0.ops[op].ev_end;
        self.0.durable.push(model::Durable {
            op,
            ev_end,
            ns_lo,
            scope,
        });
    }
}

/// Xattrs of a hand-made file: (name, value).
type HandXattrs<'a> = &'a [(&'a str, &'a [u8])];

/// A recovered tree: the root and `files` (path, content, inode number,
/// link count, xattrs).
fn hand_tree(files: &[(&str, &[u8], u64, u32, HandXattrs)]) -> walk::Tree {
    let got = |dir, perm, c: &[u8], ino, nlink, x: HandXattrs| walk::Got {
        dir,
        other: false,
        perm,
        uid: 0,
        gid: 0,
        size: c.len() as u64,
        mtime: (0, 0),
        content: c.to_vec(),
        ino,
        nlink,
        xattrs: x
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.to_vec()))
            .collect(),
    };
    let mut t = walk::Tree::new();
    t.insert("/".into(), got(true, 0o755, b"", 128, 2, &[]));
    for (p, c, ino, nlink, x) in files {
        t.insert(p.to_string(), got(false, 0o644, c, *ino, *nlink, x));
    }
    t
}

/// The checker itself, on a hand-made history: it must accept what the
/// rules allow and reject a lost fsync, stale data and a wrong namespace.
#[test]
fn checker_rules() {
    use crash_support::check::check_tree;
    use model::Scope;

    let v1 = vec![1u8; 1024];
    let mut v2 = v1.clone();
    v2[100..200].fill(3);
    v2[600..].fill(2);
    let mut m = HandMade::new();
    m.op("create /a", 0, 2);
    m.op("write /a v1", 2, 4);
    m.op("fsync /a", 4, 6);
    m.op("overwrite /a v2", 6, 8);
    m.file(2, 1, b"", &[]);
    m.file(2, 2, &v1, &[]);
    m.file(2, 4, &v2, &[]);
    m.ns(1, &[("/a", 2)]);
    m.durable(3, 2, Scope::Inode { ino: 2, meta: true });
    let h = m.0;
    let tree = |a: Option<&[u8]>| match a {
        Some(c) => hand_tree(&[("/a", c, 131, 1, &[])]),
        None => hand_tree(&[]),
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
    // A wrong link count.
    let mut t = tree(Some(&v1));
    t.get_mut("/a").unwrap().nlink = 2;
    assert!(check_tree(&h2, 6, &t).is_err());
}

/// The checker on namespace changes, links and xattrs: a name renamed
/// away that reappears after its directory's fsync, a broken link group
/// (two links with different content, or no longer links), and an xattr
/// lost after an fsync must be caught; what the rules allow must pass.
#[test]
fn checker_rules_namespace() {
    use crash_support::check::check_tree;
    use model::Scope;

    // create /a, rename /a -> /b, fsync /.
    let mut m = HandMade::new();
    m.op("create /a", 0, 2);
    m.op("rename /a -> /b", 2, 4);
    m.op("fsync dir /", 4, 6);
    m.file(2, 1, b"", &[]);
    m.ns(1, &[("/a", 2)]);
    m.ns(2, &[("/b", 2)]);
    m.durable(3, 2, Scope::Inode { ino: 1, meta: true });
    let h = m.0;
    let a = hand_tree(&[("/a", b"", 131, 1, &[])]);
    let b = hand_tree(&[("/b", b"", 131, 1, &[])]);
    let both = hand_tree(&[("/a", b"", 131, 1, &[]), ("/b", b"", 132, 1, &[])]);
    let linked = hand_tree(&[("/a", b"", 131, 2, &[]), ("/b", b"", 131, 2, &[])]);
    assert!(check_tree(&h, 5, &a).is_ok());
    assert!(check_tree(&h, 5, &b).is_ok());
    assert!(check_tree(&h, 5, &hand_tree(&[])).is_ok());
    assert!(check_tree(&h, 6, &b).is_ok());
    let e = check_tree(&h, 6, &a).unwrap_err();
    assert!(e.contains("namespace"), "{e}");
    assert!(check_tree(&h, 6, &both).is_err());
    assert!(check_tree(&h, 5, &both).is_err());
    assert!(check_tree(&h, 5, &linked).is_err());

    // create /a, write v1, link /a /b, sync.
    let v1 = vec![7u8; 2000];
    let mut m = HandMade::new();
    m.op("create /a", 0, 2);
    m.op("write /a v1", 2, 4);
    m.op("link /a /b", 4, 6);
    m.op("sync", 6, 8);
    m.file(2, 1, b"", &[]);
    m.file(2, 2, &v1, &[]);
    m.ns(1, &[("/a", 2)]);
    m.ns(3, &[("/a", 2), ("/b", 2)]);
    m.durable(4, 4, Scope::All);
    let h = m.0;
    let ok = hand_tree(&[("/a", &v1, 131, 2, &[]), ("/b", &v1, 131, 2, &[])]);
    assert!(check_tree(&h, 8, &ok).is_ok());
    let mut v1b = v1.clone();
    v1b[1500] = 1;
    let torn = hand_tree(&[("/a", &v1, 131, 2, &[]), ("/b", &v1b, 131, 2, &[])]);
    let e = check_tree(&h, 8, &torn).unwrap_err();
    assert!(e.contains("links to inode 131 but differ"), "{e}");
    let split = hand_tree(&[("/a", &v1, 131, 1, &[]), ("/b", &v1, 132, 1, &[])]);
    let e = check_tree(&h, 8, &split).unwrap_err();
    assert!(e.contains("linked with"), "{e}");
    let count = hand_tree(&[("/a", &v1, 131, 1, &[]), ("/b", &v1, 131, 1, &[])]);
    let e = check_tree(&h, 8, &count).unwrap_err();
    assert!(e.contains("link count"), "{e}");
    // Before the sync returned, the link may be missing (then /a has one
    // link), and the data may be older.
    let one = hand_tree(&[("/a", &v1, 131, 1, &[])]);
    assert!(check_tree(&h, 7, &one).is_ok());
    assert!(check_tree(&h, 8, &one).is_err());

    // create /a, setxattr user.x, fsync /a.
    let mut m = HandMade::new();
    m.op("create /a", 0, 2);
    m.op("setxattr /a user.x", 2, 4);
    m.op("fsync /a", 4, 6);
    m.file(2, 1, b"", &[]);
    m.file(2, 2, b"", &[("user.x", b"value")]);
    m.ns(1, &[("/a", 2)]);
    m.durable(3, 1, Scope::Inode { ino: 2, meta: true });
    let h = m.0;
    let without = hand_tree(&[("/a", b"", 131, 1, &[])]);
    let with = hand_tree(&[("/a", b"", 131, 1, &[("user.x", b"value")])]);
    let wrong = hand_tree(&[("/a", b"", 131, 1, &[("user.x", b"other")])]);
    assert!(check_tree(&h, 5, &without).is_ok());
    assert!(check_tree(&h, 5, &with).is_ok());
    assert!(check_tree(&h, 5, &wrong).is_err());
    assert!(check_tree(&h, 6, &with).is_ok());
    let e = check_tree(&h, 6, &without).unwrap_err();
    assert!(e.contains("xattrs"), "{e}");
    assert!(check_tree(&h, 6, &wrong).is_err());
}
