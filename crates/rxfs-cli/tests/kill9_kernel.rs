//! rxfs to kernel (issue 3; issue 12: namespace ops): a seeded workload
//! of creates, mkdirs, unlinks, rmdirs, renames (renameat2: new names,
//! over files, directories, NOREPLACE, EXCHANGE), links, atomic saves,
//! writes, truncates, fallocate (allocate, keep-size, punch hole, zero
//! range), xattr set/replace/remove (user.*), chmod/chown/utimens, fsync
//! of files and directories and fdatasync (the full mix of
//! `crash_support/workload.rs`) runs through a read-write `rxfs mount`;
//! then the daemon gets `kill -9` (after the workload, or in the middle
//! of it). The kernel
//! mounts the image and replays our log; its tree must keep everything the
//! fsyncs made durable (the rules of `crash_support/model.rs` in the rxfs
//! crate's tests, with a kill: no write the daemon completed is lost), and
//! `xfs_repair -n` must exit 0. A copy recovered by rxfs instead must show
//! the same tree and repair clean too.
//!
//! Every cell of the mount-option matrix (`common::matrix`: write-back
//! cache, io_uring, one event loop) runs, the defaults longest.
//! RXFS_KILL9_SEEDS=N (the defaults, default 4), RXFS_KILL9_CELL_SEEDS=N
//! (each other cell, default 2); even seeds are killed after the
//! workload, odd ones during it. Needs root, FUSE and xfsprogs; fails
//! (never skips) unless RXFS_SKIP_KERNEL_TESTS=1.

mod common;
#[path = "../../rxfs/tests/crash_support/mod.rs"]
mod crash_support;

use std::ffi::OsStr;
use std::path::Path;
use std::time::Duration;

use common::matrix::Cell;
use common::*;
use crash_support::check::check_tree;
use crash_support::posix::PosixTarget;
use crash_support::rwapi::{ro, rw};
use crash_support::walk::{kernel_tree, repair_n, rxfs_tree, tree_diff, Mounted};
use crash_support::workload::{Params, Stop, Workload};
use rxfs::Filesystem;

fn kill_daemon(mnt: &Path, guard: KernelMount) {
    let pid = daemon_pid(mnt);
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    assert!(wait_until(Duration::from_secs(10), || process_gone(pid)));
    drop(guard); // the dead connection's mount goes (lazily if needed)
    assert!(wait_until(Duration::from_secs(10), || !is_mounted(mnt)));
}

fn must<T>(what: &str, r: Result<T, String>) -> T {
    r.unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// One seed; returns (ops run, files checked exactly, sector-wise).
fn kill_seed(s: &Scratch, seed: u64, opts: &str) -> (usize, usize, usize) {
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let mnt = s.path("m");
    std::fs::create_dir_all(&mnt).unwrap();
    rxfs_ok(&[
        OsStr::new("mount"),
        img.as_os_str(),
        mnt.as_os_str(),
        OsStr::new("-o"),
        OsStr::new(opts),
    ]);
    let guard = KernelMount::adopt(&mnt);
    let params = Params {
        ops: 300,
        ..Params::default()
    };
    let target = PosixTarget::new(&mnt);
    let ticks = target.ticks();
    let mut w = Workload::new(Box::new(target), seed, params);
    w.assume_on_error = true;
    let w = if seed.is_multiple_of(2) {
        let r = w.run();
        if let Err(e) = r {
            kill_daemon(&mnt, guard);
            panic!("seed {seed}: workload: {e:?}");
        }
        kill_daemon(&mnt, guard);
        w
    } else {
        // Killed while it runs: the op in flight fails (ENOTCONN) and
        // counts as possibly done.
        let t = std::thread::spawn(move || {
            let r = w.run();
            (w, r)
        });
        // Kill after op 30..230 started (two clock ticks per op).
        let at = 2 * (30 + (seed * 97 % 200) as usize);
        while ticks.load(std::sync::atomic::Ordering::SeqCst) < at && !t.is_finished() {
            std::thread::sleep(Duration::from_micros(200));
        }
        kill_daemon(&mnt, guard);
        let (w, r) = t.join().unwrap();
        match r {
            Ok(()) => eprintln!("seed {seed}: the workload finished before the kill"),
            Err(Stop::Unexpected(e)) => eprintln!("seed {seed}: stopped by the kill: {e}"),
            Err(e) => panic!("seed {seed}: {e:?}"),
        }
        w
    };
    let p = w.clock();
    let h = &w.h;
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    for o in &h.ops[1..] {
        *kinds.entry(crash_support::op_kind(&o.desc)).or_default() += 1;
    }
    eprintln!("seed {seed}: ops by kind: {kinds:?}");
    if !w.unsupported.is_empty() {
        eprintln!(
            "seed {seed}: refused through the mount: {:?}",
            w.unsupported
        );
    }

    // The log is dirty: the kernel has something to replay.
    let fs = Filesystem::open_path(&img, None, ro()).unwrap();
    assert!(
        fs.recovery_stats().is_some(),
        "seed {seed}: the killed mount left a clean log"
    );
    drop(fs);
    let copy = s.path("copy");
    std::fs::copy(&img, &copy).unwrap();

    let k = must("kernel mount", Mounted::new(&img, &s.path("k"), ""));
    let kt = kernel_tree(&k.dir);
    must("kernel umount", k.umount());
    let kt = must("kernel walk", kt);
    let checked = must(
        &format!("seed {seed}: kernel recovery of the killed mount"),
        check_tree(h, p, &kt),
    );
    must(
        &format!("seed {seed}: after kernel recovery"),
        repair_n(&img),
    );

    let fs = Filesystem::open_path(&copy, None, rw()).unwrap();
    let rt = rxfs_tree(&fs);
    fs.unmount().unwrap();
    drop(fs);
    let rt = must("rxfs walk", rt);
    if let Some(d) = tree_diff(&kt, &rt) {
        panic!("seed {seed}: kernel (first) and rxfs (second) recoveries differ:\n{d}");
    }
    must(
        &format!("seed {seed}: after rxfs recovery"),
        repair_n(&copy),
    );
    for f in [&img, &copy] {
        let _ = std::fs::remove_file(f);
    }
    (h.ops.len() - 1, checked.exact, checked.windowed)
}

/// The seeds of one cell: RXFS_KILL9_SEEDS for the defaults (4 unless
/// set), RXFS_KILL9_CELL_SEEDS for every other cell (2: one killed after
/// its workload, one during it).
fn run_cell(cell: Cell) {
    if kernel_tests_disabled() {
        return;
    }
    require_root();
    unsafe { libc::umask(0o022) };
    let (var, default) = match cell == Cell::DEFAULTS {
        true => ("RXFS_KILL9_SEEDS", 4),
        false => ("RXFS_KILL9_CELL_SEEDS", 2),
    };
    let seeds: u64 = std::env::var(var)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    let opts = cell.opts();
    let _param = cell.param();
    let s = Scratch::new("kill9");
    let (mut ops, mut exact, mut windowed) = (0, 0, 0);
    for seed in 0..seeds {
        let (o, e, w) = kill_seed(&s, seed, &opts);
        eprintln!(
            "kill9 -o {opts} seed {seed}: {o} ops, files checked exactly {e} / sector-wise {w}"
        );
        ops += o;
        exact += e;
        windowed += w;
    }
    eprintln!(
        "kill9 -o {opts}: {seeds} seeds, {ops} ops, files checked exactly {exact} / sector-wise {windowed}, failures 0"
    );
    assert!(exact > 0, "-o {opts}: nothing durable was checked");
}

/// The default mount: `-o rw` and nothing else.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn kill_9_then_kernel_replays_what_was_fsynced() {
    run_cell(Cell::DEFAULTS);
}

macro_rules! cells {
    ($($name:ident: $cache:expr, $uring:expr, $one:expr;)*) => {$(
        #[test]
        #[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
        fn $name() {
            run_cell(Cell { cache: $cache, uring: Some($uring), one_thread: $one });
        }
    )*};
}

// Every other cell of the matrix (`common::matrix`): write-back cache,
// io_uring, one event loop.
cells! {
    kill_9_cell_dev_loops: false, false, false;
    kill_9_cell_dev_one_loop: false, false, true;
    kill_9_cell_uring_loops: false, true, false;
    kill_9_cell_uring_one_loop: false, true, true;
    kill_9_cell_cache_dev_loops: true, false, false;
    kill_9_cell_cache_dev_one_loop: true, false, true;
    kill_9_cell_cache_uring_loops: true, true, false;
    kill_9_cell_cache_uring_one_loop: true, true, true;
}
