//! Kernel to rxfs, read-write (issue 3, "kernel to rxfs"): dirty logs made
//! by the kernel (`xfs_io -x -c 'shutdown -f'` during seeded workloads,
//! some with files unlinked while open, some cut mid-operation, some with
//! a wrapped log) are recovered by a read-write rxfs open, then unmounted.
//! The result must equal the kernel's own recovery of a copy (the same
//! manifest through rxfs and through a kernel mount), reopen with a clean
//! log, and pass `xfs_repair -n`.
//!
//! Unlike the read-only paths of `recover_kernel.rs`, nothing may be
//! refused here: a read-write mount finishes unfinished intents and frees
//! the inodes left on the AGI unlinked lists, as the kernel does.
//!
//! RXFS_RECOVER_RW_SEEDS=N changes the main seed count (default 8).
//! Needs root; fails (never skips) unless RXFS_SKIP_KERNEL_TESTS=1.

mod common;
mod crash_support;
mod recover_support;

use std::process::Command;

use common::*;
use recover_support::*;
use rxfs::{Filesystem, MountOptions};

struct Case<'a> {
    mkfs_opts: &'a [&'a str],
    ops: usize,
    sync_one_in: u64,
    crash_after_ms: Option<u64>,
}

/// Returns what the rxfs recovery replayed (for the totals).
fn recover_seed(scr: &Scratch, seed: u64, c: &Case) -> rxfs::recover::RecoveryStats {
    let img = scr.path("img");
    if c.mkfs_opts.iter().any(|o| o.starts_with("size=")) {
        small_mkfs(&img, 200 << 20, c.mkfs_opts);
    } else {
        mkfs(&img, 512 << 20, c.mkfs_opts);
    }
    let mnt = scr.path("mnt");
    let m = KernelMount::new(&img, &mnt, "");
    let held = if let Some(ms) = c.crash_after_ms {
        let dir = mnt.clone();
        let (ops, sync) = (c.ops, c.sync_one_in);
        let t = std::thread::spawn(move || workload(&dir, seed, ops, sync, false));
        std::thread::sleep(std::time::Duration::from_millis(ms));
        run(
            "xfs_io",
            &["-x", "-c", "shutdown -f", mnt.to_str().unwrap()],
        );
        t.join().unwrap()
    } else {
        let held = workload(&mnt, seed, c.ops, c.sync_one_in, true);
        run(
            "xfs_io",
            &["-x", "-c", "shutdown -f", mnt.to_str().unwrap()],
        );
        held
    };
    drop(held);
    m.umount();
    let (a, d) = (scr.path("a"), scr.path("d"));
    for x in [&a, &d] {
        run(
            "cp",
            &[
                "--sparse=always",
                img.to_str().unwrap(),
                x.to_str().unwrap(),
            ],
        );
    }
    // The kernel's recovery: the oracle.
    KernelMount::new(&a, &mnt, "").umount();
    let ma = KernelMount::new(&a, &mnt, "ro");
    let want = kernel_walk(&mnt);
    ma.umount();
    // rxfs: read-write open (recovers), walk, unmount.
    let fs = Filesystem::open_path(
        &d,
        None,
        MountOptions {
            read_only: false,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("seed {seed}: rxfs rw open of the kernel's dirty log: {e}"));
    let stats = fs.recovery_stats().cloned().unwrap_or_default();
    let got = rxfs_walk(&fs);
    unmount(fs);
    if let Some(df) = diff(&want, &got) {
        panic!("seed {seed}: rxfs rw recovery differs from the kernel's:\n{df}");
    }
    let out = Command::new("xfs_repair")
        .args(["-n", d.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "seed {seed}: xfs_repair -n after rxfs rw recovery + unmount:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let fs = open_ro(&d);
    assert!(
        fs.recovery_stats().is_none(),
        "seed {seed}: log still dirty after rxfs unmount"
    );
    if let Some(df) = diff(&want, &rxfs_walk(&fs)) {
        panic!("seed {seed}: rxfs view after reopen differs:\n{df}");
    }
    drop(fs);
    let md = KernelMount::new(&d, &mnt, "ro");
    let got_k = kernel_walk(&mnt);
    md.umount();
    if let Some(df) = diff(&want, &got_k) {
        panic!("seed {seed}: kernel view after rxfs rw recovery differs:\n{df}");
    }
    for x in [&a, &d, &img] {
        let _ = std::fs::remove_file(x);
    }
    stats
}

fn unmount(fs: std::sync::Arc<Filesystem>) {
    fs.unmount().expect("rxfs unmount after recovery");
}

fn run_seeds(name: &str, seeds: std::ops::Range<u64>, c: Case) {
    if kernel_tests_disabled() {
        return;
    }
    require_root();
    let scr = Scratch::new(name);
    let (mut n, mut unlinked, mut intents, mut replayed) = (0, 0, 0, 0);
    let mut failed = Vec::new();
    for seed in seeds {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            recover_seed(&scr, seed, &c)
        }));
        let s = match r {
            Ok(s) => s,
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failed.push(msg);
                continue;
            }
        };
        eprintln!("{name} seed {seed}: {s}");
        n += 1;
        unlinked += (s.unlinked_buckets > 0) as u32;
        intents += (s.unfinished_intents > 0) as u32;
        replayed += (s.buf_replayed + s.inode_replayed > 0) as u32;
    }
    eprintln!(
        "{name}: {n} kernel logs recovered read-write by rxfs, equal to the kernel's recovery; \
         {replayed} replayed blocks or inodes, {unlinked} had unlinked inodes, {intents} unfinished intents"
    );
    eprintln!("{name}: {} seeds failed", failed.len());
    assert!(
        failed.is_empty(),
        "{} seeds failed; first: {}",
        failed.len(),
        failed[0]
    );
    assert!(replayed > 0, "no seed replayed anything");
}

fn seed_count() -> u64 {
    std::env::var("RXFS_RECOVER_RW_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8)
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn rw_recover_default_seeds() {
    run_seeds(
        "rwrec-default",
        0..seed_count(),
        Case {
            mkfs_opts: &[],
            ops: 1500,
            sync_one_in: 40,
            crash_after_ms: None,
        },
    );
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn rw_recover_crash_mid_operation() {
    run_seeds(
        "rwrec-mid",
        3000..3006,
        Case {
            mkfs_opts: &[],
            ops: 4000,
            sync_one_in: 20,
            crash_after_ms: Some(60),
        },
    );
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn rw_recover_wrapped_log() {
    run_seeds(
        "rwrec-wrap",
        2000..2002,
        Case {
            mkfs_opts: &["-l", "size=1368b"],
            ops: 12000,
            sync_one_in: 3,
            crash_after_ms: None,
        },
    );
}
