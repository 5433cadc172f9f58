//! AGF lock order on an rmapbt filesystem under contention: threads in
//! directories spread over the AGs write into preallocated (unwritten)
//! space, which converts extents in one AG while allocating in another,
//! rename files over targets whose last link goes (their blocks and
//! inode chunks freed from inside the rename), and unlink, all at once
//! through one read-write mount. A watchdog turns a deadlock into a
//! failure. Then `xfs_repair -n` (which checks every rmap record) is clean
//! and the kernel sees exactly the files and bytes the threads left.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use rxfs::fs::ops_falloc::FALLOC_FL_KEEP_SIZE;
use rxfs::fs::ops_ns::CreateArgs;
use rxfs::fs::ops_rename::RenameFlags;
use rxfs::{Filesystem, MountOptions};

const THREADS: u64 = 4;
const ROUNDS: u64 = 60;

/// One thread's work in its directory `dir`: returns name -> bytes left.
fn worker(
    fs: &Filesystem,
    dir: rxfs::types::Ino,
    t: u64,
    progress: &AtomicU64,
) -> BTreeMap<String, Vec<u8>> {
    let mut left = BTreeMap::new();
    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ t;
    let mut rnd = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    for r in 0..ROUNDS {
        // A file with unwritten space, then written in pieces.
        let name = format!("f{r}");
        let ino = fs
            .create(dir, name.as_bytes(), &CreateArgs::root(0o100644))
            .unwrap()
            .ino;
        let len = (1 + rnd(64)) * 4096;
        fs.fallocate(ino, FALLOC_FL_KEEP_SIZE, 0, len).unwrap();
        let mut bytes = vec![0u8; 0];
        for p in 0..4u64 {
            let off = rnd(len);
            let d = pattern(t << 32 | r << 8 | p, 1 + rnd(20_000) as usize);
            fs.write(ino, off, &d).unwrap();
            let end = off as usize + d.len();
            if bytes.len() < end {
                bytes.resize(end, 0);
            }
            bytes[off as usize..end].copy_from_slice(&d);
        }
        left.insert(name.clone(), bytes);
        // Rename over an older file (its last link: freed here).
        if r >= 2 && rnd(2) == 0 {
            let victim = format!("f{}", rnd(r));
            if left.contains_key(&victim) {
                fs.rename(
                    dir,
                    name.as_bytes(),
                    dir,
                    victim.as_bytes(),
                    RenameFlags::default(),
                )
                .unwrap();
                let b = left.remove(&name).unwrap();
                left.insert(victim, b);
            }
        }
        // Unlink another.
        if rnd(4) == 0 {
            let victim = format!("f{}", rnd(r + 1));
            if left.remove(&victim).is_some() {
                fs.unlink(dir, victim.as_bytes()).unwrap();
            }
        }
        progress.fetch_add(1, Ordering::Relaxed);
    }
    left
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn rmap_concurrent_writes_renames_unlinks() {
    require_root();
    let s = Scratch::new("rmap-threads");
    let img = s.path("img");
    mkfs_with(
        &img,
        256 << 20,
        &["-m", "rmapbt=1", "-d", "agcount=8"],
        FSTESTS_ENV,
    );
    let fs = Filesystem::open_path(&img, None, MountOptions::default()).unwrap();
    let root = fs.root_ino();
    let dirs: Vec<_> = (0..THREADS)
        .map(|t| {
            fs.mkdir(root, format!("t{t}").as_bytes(), &CreateArgs::root(0o40755))
                .unwrap()
                .ino
        })
        .collect();
    let ags: std::collections::BTreeSet<u32> =
        dirs.iter().map(|&d| fs.geo().ino_agno(d).0).collect();
    assert!(ags.len() > 1, "the directories all landed in one AG");
    let progress = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = dirs
        .iter()
        .enumerate()
        .map(|(t, &d)| {
            let fs = fs.clone();
            let p = progress.clone();
            std::thread::spawn(move || worker(&fs, d, t as u64, &p))
        })
        .collect();
    // Watchdog: progress must not stall.
    let (mut last, mut since) = (0, Instant::now());
    while !handles.iter().all(|h| h.is_finished()) {
        std::thread::sleep(Duration::from_millis(100));
        let now = progress.load(Ordering::Relaxed);
        if now != last {
            (last, since) = (now, Instant::now());
        }
        assert!(
            since.elapsed() < Duration::from_secs(120),
            "no progress for 120 s at {now} rounds: deadlock"
        );
    }
    let left: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(
        fs.stats().ag_lock_order_violations,
        0,
        "AG header lock order"
    );
    fs.unmount().unwrap();
    drop(fs);
    let out = run_output("xfs_repair", &["-n", img.to_str().unwrap()]);
    assert!(out.status.success());
    let mnt = s.path("k");
    let k = KernelMount::new(&img, &mnt, "ro");
    for (t, want) in left.iter().enumerate() {
        let d = mnt.join(format!("t{t}"));
        let mut got = BTreeMap::new();
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let n = e.file_name().into_string().unwrap();
            got.insert(n, std::fs::read(e.path()).unwrap());
        }
        assert!(got == *want, "t{t}: kernel sees other files or bytes");
    }
    k.umount();
    eprintln!(
        "rmap_concurrent: {THREADS} threads x {ROUNDS} rounds over {} AGs, {} files left",
        ags.len(),
        left.iter().map(|l| l.len()).sum::<usize>()
    );
}
