//! Log recovery against the kernel: seeded workloads on a kernel mount end
//! in `xfs_io -x -c 'shutdown -f'`; then the same dirty image is recovered
//! three ways and must show the same tree:
//!
//! - A: the kernel (mount rw, umount, walk a ro mount) — the oracle;
//! - B: rxfs read-only open, recovering in memory (library walk);
//! - C: rxfs `recover_to_device`, then `xfs_repair -n` must exit 0 and a
//!   kernel mount must show A's tree.
//!
//! The space accounting (per-AG free blocks and inodes, superblock
//! counters) must match the kernel's too: unfinished EFIs and inodes left
//! on the unlinked lists are finished by both (see recover_support).
//!
//! Needs root; fails (never skips) unless RXFS_SKIP_KERNEL_TESTS=1.
//! RXFS_RECOVER_SEEDS=N changes the seed count. Failing seeds are printed.

mod common;
mod recover_support;

use common::*;
use recover_support::*;
use rxfs::recover::RecoveryStats;

/// Run one seed's workload, crash, and recover three ways; returns the
/// stats and the log head's cycle, or `None` when rxfs refused the log.
fn recover_seed(
    scr: &Scratch,
    seed: u64,
    mkfs_opts: &[&str],
    mount_opts: &str,
    ops: usize,
    sync_one_in: u64,
    crash_after_ms: Option<u64>,
) -> Option<(RecoveryStats, u32)> {
    let img = scr.path("img");
    // Below 300 MB mkfs allows logs under 64 MiB (the wrapped-log case).
    let small_log = mkfs_opts.iter().any(|o| o.starts_with("size="));
    if small_log {
        small_mkfs(&img, 200 << 20, mkfs_opts);
    } else {
        mkfs(&img, 512 << 20, mkfs_opts);
    }
    let mnt = scr.path("mnt");
    let m = KernelMount::new(&img, &mnt, mount_opts);
    if let Some(ms) = crash_after_ms {
        // Crash mid-operation: the workload runs on while the shutdown hits.
        let dir = mnt.clone();
        let t = std::thread::spawn(move || workload(&dir, seed, ops, sync_one_in, false));
        std::thread::sleep(std::time::Duration::from_millis(ms));
        run(
            "xfs_io",
            &["-x", "-c", "shutdown -f", mnt.to_str().unwrap()],
        );
        drop(t.join().unwrap());
    } else {
        let held = workload(&mnt, seed, ops, sync_one_in, true);
        run(
            "xfs_io",
            &["-x", "-c", "shutdown -f", mnt.to_str().unwrap()],
        );
        drop(held);
    }
    m.umount();
    match recover_three_ways(scr, &img, seed) {
        Recovery::Compared(s, cycle) => Some((s, cycle)),
        Recovery::Refused(msg) => {
            eprintln!("seed {seed}: refused: {msg}");
            None
        }
    }
}

/// Run seeds; returns the largest log cycle seen.
fn run_seeds(
    name: &str,
    seeds: std::ops::Range<u64>,
    mkfs_opts: &[&str],
    mount_opts: &str,
    ops: usize,
    sync_one_in: u64,
    crash_after_ms: Option<u64>,
) -> u32 {
    if kernel_tests_disabled() {
        return u32::MAX;
    }
    let scr = Scratch::new(name);
    let mut total = RecoveryStats::default();
    let mut max_cycle = 0;
    let (mut compared, mut refused, mut with_efis, mut with_unlinked) = (0u32, 0u32, 0u32, 0u32);
    for seed in seeds.clone() {
        let Some((s, cycle)) = recover_seed(
            &scr,
            seed,
            mkfs_opts,
            mount_opts,
            ops,
            sync_one_in,
            crash_after_ms.map(|ms| ms + seed * 37 % ms),
        ) else {
            refused += 1;
            continue;
        };
        compared += 1;
        with_efis += (s.intents_finished > 0) as u32;
        with_unlinked += (s.unlinked_inodes_freed > 0) as u32;
        max_cycle = max_cycle.max(cycle);
        eprintln!("{name} seed {seed} (log cycle {cycle}): {s}");
        add(&mut total, &s);
    }
    eprintln!(
        "{name} TOTAL ({compared} seeds compared, {with_efis} with unfinished EFIs, \
         {with_unlinked} with unlinked inodes, {refused} refused): {total}"
    );
    // Default mkfs options log no intent kinds but EFIs: nothing is refused.
    assert_eq!(refused, 0, "seeds refused for intents");
    assert!(
        total.buf_replayed > 0 && total.inode_replayed > 0,
        "nothing replayed: {total}"
    );
    max_cycle
}

fn seed_count() -> u64 {
    std::env::var("RXFS_RECOVER_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20)
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn recover_default_seeds() {
    run_seeds("recover-default", 0..seed_count(), &[], "", 1500, 40, None);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn recover_logbsize_256k() {
    run_seeds(
        "recover-256k",
        1000..1004,
        &[],
        "logbsize=256k",
        1500,
        40,
        None,
    );
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn recover_crash_mid_operation() {
    // The shutdown lands while the workload is running (50-100 ms in).
    run_seeds("recover-mid", 3000..3010, &[], "", 4000, 20, Some(50));
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn recover_wrapped_log() {
    // A small log and enough work to wrap it several times.
    let cycle = run_seeds(
        "recover-wrap",
        2000..2003,
        &["-l", "size=1368b"],
        "",
        12000,
        3,
        None,
    );
    assert!(cycle > 1, "the log never wrapped");
}
