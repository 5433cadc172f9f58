//! The structure of the log rxfs writes (issue 3, "log structure"):
//!
//! - many transactions aggregated into one checkpoint (delayed logging),
//!   against the ablation switch that pushes one checkpoint per
//!   transaction: the counters show the difference;
//! - checkpoints larger than a log buffer (two 16 KiB buffers) spanning
//!   several records, and enough of them to wrap the minimum-size log;
//! - a full log under load: 8 threads creating and writing with the
//!   smallest log all finish, and some of them waited for log space;
//! - `xfs_logprint` (transactional `-t` and plain) parses a dirty log left
//!   by a kill (a `CrashDevice` image taken without unmounting) without
//!   complaint, and the kernel replays it.
//!
//! After each, `xfs_repair -n` exits 0. Counters are printed. Needs root;
//! fails (never skips) unless RXFS_SKIP_KERNEL_TESTS=1.

mod common;
mod crash_support;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use crash_support::fresh_image;
use crash_support::rwapi::{ro, rw};
use crash_support::walk::{kernel_tree, repair_n, Mounted};
use crash_support::workload::{fill_bytes, Params, Workload};
use rxfs::bdev::CrashDevice;
use rxfs::fs::ops_ns::CreateArgs;
use rxfs::fs::rw::FsStats;
use rxfs::types::Ino;
use rxfs::{Filesystem, MountOptions};

const FILE: CreateArgs = CreateArgs::root(0o100644);
const DIR: CreateArgs = CreateArgs::root(0o040755);

fn print_stats(what: &str, s: &FsStats) {
    let line: Vec<String> = s.lines().iter().map(|(n, v)| format!("{n}={v}")).collect();
    eprintln!("{what}: {}", line.join(" "));
}

/// A fresh 64 MiB image file (minimum log) and its size in bytes of log.
fn image(scr: &Scratch, name: &str) -> (std::path::PathBuf, u64) {
    let img = scr.path(name);
    std::fs::write(&img, fresh_image(scr, &[])).unwrap();
    let fs = open_ro(&img);
    let log = fs.sb().logblocks as u64 * fs.geo().blocksize as u64;
    (img, log)
}

fn open_rw(img: &Path, opts: MountOptions) -> Arc<Filesystem> {
    Filesystem::open_path(img, None, opts).unwrap()
}

fn must(r: Result<(), String>) {
    if let Err(e) = r {
        panic!("{e}");
    }
}

/// `xfs_logprint -t` and plain `xfs_logprint` on `img`: both exit 0 and
/// print no complaint. Returns the transactions `-t` listed.
fn logprint_clean(img: &Path) -> usize {
    let complaint = [
        "error", "invalid", "mismatch", "unknown", "corrupt", "fail", "warn",
    ];
    let mut trans = 0;
    for args in [&["-t"][..], &[][..]] {
        let out = Command::new("xfs_logprint")
            .args(args)
            .arg(img)
            .output()
            .expect("xfs_logprint");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // Whole words only: hex dumps are full of "bad" (hence exact).
        let bad: Vec<&str> = text
            .lines()
            .filter(|l| {
                l.to_lowercase()
                    .split(|c: char| !c.is_ascii_alphanumeric())
                    .any(|w| w == "bad" || complaint.iter().any(|c| w.starts_with(c)))
            })
            .take(10)
            .collect();
        assert!(
            out.status.success() && bad.is_empty(),
            "xfs_logprint {args:?} exit {}; complaints: {bad:#?}\n{}",
            out.status,
            &text[..text.len().min(3000)]
        );
        if args == ["-t"] {
            trans = text.lines().filter(|l| l.starts_with("TRANS:")).count();
        }
    }
    trans
}

/// Create `n` empty files in a new directory `dir`.
fn create_batch(fs: &Filesystem, dir: &str, n: usize) -> Ino {
    let d = fs.mkdir(fs.root_ino(), dir.as_bytes(), &DIR).unwrap().ino;
    for i in 0..n {
        fs.create(d, format!("f{i}").as_bytes(), &FILE).unwrap();
    }
    d
}

fn aggregation_run(scr: &Scratch, ablate: bool) -> FsStats {
    let (img, _) = image(scr, if ablate { "ablate.img" } else { "cil.img" });
    let fs = open_rw(
        &img,
        MountOptions {
            ablate_delaylog: ablate,
            ..rw()
        },
    );
    // 4 directories of 50 files: 204 creates, no fsync.
    for d in 0..4 {
        create_batch(&fs, &format!("d{d}"), 50);
    }
    fs.sync().unwrap();
    let s = fs.stats();
    fs.unmount().unwrap();
    drop(fs);
    must(repair_n(&img));
    let m = Mounted::new(&img, &scr.path("mnt"), "ro").unwrap();
    let t = kernel_tree(&m.dir).unwrap();
    m.umount().unwrap();
    for d in 0..4 {
        for i in [0, 17, 49] {
            let g = &t[&format!("/d{d}/f{i}")];
            assert!(
                !g.dir && g.size == 0 && g.perm == 0o644,
                "/d{d}/f{i}: {g:?}"
            );
        }
    }
    assert_eq!(t.len(), 1 + 4 + 200, "entries seen by the kernel");
    std::fs::remove_file(&img).unwrap();
    s
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn many_transactions_one_checkpoint() {
    require_root();
    let scr = Scratch::new("logstruct-agg");
    let cil = aggregation_run(&scr, false);
    let abl = aggregation_run(&scr, true);
    print_stats("delayed logging", &cil);
    print_stats("ablate_delaylog", &abl);
    eprintln!(
        "204 creates: checkpoints {} vs {}, log bytes {} vs {}, log writes {} vs {}",
        cil.checkpoints,
        abl.checkpoints,
        cil.log.bytes,
        abl.log.bytes,
        cil.log.writes,
        abl.log.writes
    );
    for s in [&cil, &abl] {
        assert!(s.trans_commits >= 204, "commits {}", s.trans_commits);
        assert!(
            s.checkpoint_trans >= 204,
            "aggregated {}",
            s.checkpoint_trans
        );
    }
    // Delayed logging: the whole run fits a handful of checkpoints (the
    // CIL's background push may cut it), each aggregating many commits;
    // the directory blocks and AG headers are relogged in place.
    assert!(
        cil.checkpoints >= 1 && cil.checkpoints * 20 <= cil.trans_commits,
        "checkpoints {} for {} commits",
        cil.checkpoints,
        cil.trans_commits
    );
    assert!(cil.cil_relogged > 0, "nothing relogged in the CIL");
    // The ablation: one checkpoint per transaction, more log traffic.
    assert!(
        abl.checkpoints * 10 >= abl.trans_commits * 9,
        "ablate_delaylog: checkpoints {} for {} commits",
        abl.checkpoints,
        abl.trans_commits
    );
    assert!(
        abl.log.bytes > cil.log.bytes * 2,
        "log bytes {} vs {}",
        abl.log.bytes,
        cil.log.bytes
    );
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn checkpoints_span_buffers_and_wrap_the_log() {
    require_root();
    let scr = Scratch::new("logstruct-wrap");
    let base = fresh_image(&scr, &[]);
    let dev = Arc::new(CrashDevice::new(base, 1 << 30));
    let opts = MountOptions {
        logbufs: Some(2),
        logbsize: Some(16 << 10),
        ..rw()
    };
    let fs = Filesystem::open(dev.clone(), None, opts).unwrap();
    let log_bytes = fs.sb().logblocks as u64 * fs.geo().blocksize as u64;
    let root = fs.root_ino();
    // Rounds of 150 creates in three directories, then sync (a checkpoint
    // of several 16 KiB buffers), then the previous round's directories
    // emptied and removed; until the log has wrapped twice. The round
    // directories live in a parent that changes every 40 rounds, so no
    // directory sees more than 120 additions (the churn of one small
    // directory is not what this test is about).
    let t0 = Instant::now();
    let mut round = 0usize;
    let mut prev: Vec<(Ino, String, Ino)> = Vec::new();
    let mut parents: Vec<(String, Ino)> = Vec::new();
    while fs.stats().log.bytes < 2 * log_bytes + log_bytes / 2 {
        assert!(round < 5000, "log never filled: {:?}", fs.stats().log);
        if round.is_multiple_of(40) {
            let name = format!("p{}", round / 40);
            let p = fs.mkdir(root, name.as_bytes(), &DIR).unwrap().ino;
            parents.push((name, p));
        }
        let parent = parents.last().unwrap().1;
        let mut made = Vec::new();
        for sub in ["a", "b", "c"] {
            let name = format!("r{round}{sub}");
            let d = fs.mkdir(parent, name.as_bytes(), &DIR).unwrap().ino;
            for i in 0..50 {
                fs.create(d, format!("f{i}").as_bytes(), &FILE).unwrap();
            }
            made.push((parent, name, d));
        }
        fs.sync().unwrap();
        for (pp, pname, pd) in prev.drain(..) {
            for i in 0..50 {
                fs.unlink(pd, format!("f{i}").as_bytes()).unwrap();
            }
            fs.rmdir(pp, pname.as_bytes()).unwrap();
        }
        prev = made;
        while parents.len() > 1 && parents[0].1 != parent && round.is_multiple_of(40) {
            let (n, _) = parents.remove(0);
            fs.rmdir(root, n.as_bytes()).unwrap();
        }
        round += 1;
    }
    let s = fs.stats();
    print_stats(&format!("{round} rounds in {:?}", t0.elapsed()), &s);
    assert!(
        s.checkpoint_max_bytes > 2 * 16 * 1024,
        "largest checkpoint {} bytes does not span two 16 KiB buffers",
        s.checkpoint_max_bytes
    );
    assert!(
        s.log.records > s.checkpoints,
        "{} records for {} checkpoints",
        s.log.records,
        s.checkpoints
    );
    // The kill: the image as it is, without unmounting.
    let killed = scr.path("killed.img");
    std::fs::write(&killed, dev.live_image()).unwrap();
    fs.abandon();
    drop(fs);
    let st = open_ro(&killed);
    let ls = st.log_state().cloned().expect("log state");
    drop(st);
    assert!(
        ls.head.cycle() >= 3,
        "log head {:?}: not wrapped twice",
        ls.head
    );
    assert!(!ls.clean, "a killed mount left a clean log");
    let trans = logprint_clean(&killed);
    eprintln!(
        "xfs_logprint -t lists {trans} transactions; head {:?} tail {:?}",
        ls.head, ls.tail
    );
    assert!(trans > 0, "xfs_logprint -t found no transaction");
    replay_both(&scr, &killed);
}

/// Recover a dirty image with the kernel and, on a copy, with rxfs (rw
/// open, unmount); both trees equal, both repair clean.
fn replay_both(scr: &Scratch, img: &Path) {
    let copy = scr.path("rxfs-copy.img");
    std::fs::copy(img, &copy).unwrap();
    let m = Mounted::new(img, &scr.path("mnt"), "").unwrap();
    let kt = kernel_tree(&m.dir).unwrap();
    m.umount().unwrap();
    must(repair_n(img));
    let fs = open_rw(&copy, rw());
    let rt = crash_support::walk::rxfs_tree(&fs).unwrap();
    fs.unmount().unwrap();
    drop(fs);
    must(repair_n(&copy));
    if let Some(d) = crash_support::walk::tree_diff(&kt, &rt) {
        panic!("kernel (first) and rxfs (second) recoveries differ:\n{d}");
    }
    let fs = Filesystem::open_path(&copy, None, ro()).unwrap();
    assert!(
        fs.recovery_stats().is_none(),
        "log dirty after rxfs unmount"
    );
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn full_log_under_load() {
    require_root();
    let scr = Scratch::new("logstruct-full");
    let (img, log_bytes) = image(&scr, "img");
    let fs = open_rw(&img, rw());
    let threads = 8;
    let per_thread = 1500;
    let (tx, rx) = std::sync::mpsc::channel();
    for t in 0..threads {
        let fs = fs.clone();
        let tx = tx.clone();
        std::thread::spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let d = fs
                    .mkdir(fs.root_ino(), format!("t{t}").as_bytes(), &DIR)
                    .unwrap()
                    .ino;
                for i in 0..per_thread {
                    let name = format!("f{}", i % 40);
                    if i >= 40 {
                        fs.unlink(d, name.as_bytes()).unwrap();
                    }
                    let ip = fs.create(d, name.as_bytes(), &FILE).unwrap();
                    let len = 4096 + (i * 997 + t * 131) % 28000;
                    fs.write(ip.ino, 0, &fill_bytes((t * 100_000 + i) as u64, len))
                        .unwrap();
                    if i % 5 == 4 {
                        fs.fsync(ip.ino, false).unwrap();
                    }
                }
            }));
            let _ = tx.send((t, r.map_err(|_| ())));
        });
    }
    drop(tx);
    let deadline = Instant::now() + Duration::from_secs(240);
    for _ in 0..threads {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((t, r)) => assert!(r.is_ok(), "thread {t} failed"),
            Err(_) => panic!(
                "threads still running after 240 s (deadlock?); stats {:?}",
                fs.stats()
            ),
        }
    }
    let s = fs.stats();
    print_stats(
        &format!("{threads} threads x {per_thread} ops, log {log_bytes} bytes"),
        &s,
    );
    assert!(
        s.log.bytes > log_bytes,
        "the log never filled: {} bytes written",
        s.log.bytes
    );
    assert!(
        s.log.grant_waits > 0,
        "no transaction ever waited for log space"
    );
    assert!(s.log.grant_wakeups > 0, "waiters were never woken");
    fs.unmount().unwrap();
    drop(fs);
    must(repair_n(&img));
    let m = Mounted::new(&img, &scr.path("mnt"), "ro").unwrap();
    let t = kernel_tree(&m.dir).unwrap();
    m.umount().unwrap();
    for th in 0..threads {
        let n = t
            .keys()
            .filter(|k| k.starts_with(&format!("/t{th}/")))
            .count();
        assert_eq!(n, 40, "files of thread {th}");
        let i = per_thread - 1;
        let len = 4096 + (i * 997 + th * 131) % 28000;
        let g = &t[&format!("/t{th}/f{}", i % 40)];
        assert_eq!(
            g.content,
            fill_bytes((th * 100_000 + i) as u64, len),
            "thread {th} last file"
        );
    }
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn logprint_parses_a_killed_mount() {
    require_root();
    let scr = Scratch::new("logstruct-logprint");
    let dev = Arc::new(CrashDevice::new(fresh_image(&scr, &[]), 1 << 30));
    let fs = Filesystem::open(dev.clone(), None, rw()).unwrap();
    let target = crash_support::target::LibTarget::new(fs.clone(), dev.clone());
    let mut w = Workload::new(Box::new(target), 77, Params::default());
    let r = w.run();
    drop(w);
    if let Err(e) = r {
        panic!("workload: {e:?}");
    }
    let killed = scr.path("killed.img");
    std::fs::write(&killed, dev.live_image()).unwrap();
    fs.abandon();
    drop(fs);
    let trans = logprint_clean(&killed);
    assert!(trans > 0, "xfs_logprint -t found no transaction");
    replay_both(&scr, &killed);
}
