//! Inode allocation through rxfs's logged transactions, against the
//! kernel: new chunks travel through the log as ICREATE items with ordered
//! cluster buffers, the new inodes as inode items, the AGI and inode btree
//! blocks as buffer items. After a crash (nothing written back) the
//! kernel's log recovery must rebuild exactly what we meant (xfs_db
//! counters, our read path, xfs_repair), and so must ours.

mod common;
mod ialloc_common;

use std::path::Path;
use std::sync::Arc;

use common::*;
use ialloc_common::*;
use rxfs::bdev::{BlockDevice, FileDevice};
use rxfs::format::dinode_edit as de;
use rxfs::ialloc::{ialloc, ifree};
use rxfs::types::Ino;
use rxfs::xact::{MetaTx, Resv};
use rxfs::{Filesystem, MountOptions};

fn open_rw(img: &Path) -> Arc<Filesystem> {
    let dev: Arc<dyn BlockDevice> = Arc::new(FileDevice::open(img, false, false).unwrap());
    let opts = MountOptions {
        read_only: false,
        ..Default::default()
    };
    Filesystem::open(dev, None, opts).unwrap()
}

/// One transaction per new inode, as a create would do.
fn logged_alloc(fs: &Filesystem, n: usize) -> Vec<Ino> {
    let root = fs.root_ino();
    let mut out = Vec::new();
    for i in 0..n {
        let mut tp = fs.trans_alloc(Resv::Create).unwrap();
        let init = new_inode(i);
        let (ino, ip) = ialloc(&mut tp, root, &init).unwrap();
        if init.mode & de::S_IFMT == de::S_IFDIR {
            empty_sf_dir(&mut tp, ip, root);
        }
        let before = tp.inode(ip).to_vec();
        assert_eq!(de::mode(&before) as u32, init.mode);
        tp.commit().unwrap();
        out.push(ino);
    }
    out
}

fn logged_free(fs: &Filesystem, inos: &[Ino]) {
    for &ino in inos {
        let _l = fs.ilock(ino).unwrap();
        let mut tp = fs.trans_alloc(Resv::Remove).unwrap();
        let ip = tp.ijoin(ino).unwrap();
        de::set_nlink(tp.inode_mut(ip), 0);
        ifree(&mut tp, ip, ino).unwrap();
        tp.commit().unwrap();
    }
}

fn used(state: &[AgInodes]) -> u64 {
    state.iter().map(|a| a.count - a.freecount).sum()
}

/// Crash after allocating (kernel and rxfs recovery agree and find every
/// inode), then after freeing them (repair clean), then a clean unmount
/// with write-back.
fn crash_and_recovery(name: &str, mkfs_opts: &[&str], n: usize) {
    if !kernel_ok() {
        return;
    }
    let s = Scratch::new(&format!("ialloc-logged-{name}"));
    let img = s.path("img");
    mkfs(&img, 512 << 20, mkfs_opts);
    let before = inode_state(&open_ro(&img));

    let fs = open_rw(&img);
    let inos = logged_alloc(&fs, n);
    let live = inode_state(&fs);
    if name == "split" {
        assert!(max_levels(&fs).0 >= 2, "inobt did not split");
    }
    assert_eq!(used(&live), used(&before) + n as u64);
    fs.log_force().unwrap();
    fs.abandon();
    drop(fs);
    // Every new chunk is one ICREATE item in the log.
    let lp = run_output("xfs_logprint", &["-t", img.to_str().unwrap()]);
    let lps = String::from_utf8_lossy(&lp.stdout).into_owned();
    let icr = lps.lines().filter(|l| l.starts_with("ICR:")).count();
    let new_chunks: usize = live.iter().map(|a| a.chunks).sum::<usize>()
        - before.iter().map(|a| a.chunks).sum::<usize>();
    assert!(new_chunks >= 5);
    assert_eq!(icr, new_chunks, "ICREATE items in the log");

    // rxfs recovers a copy; the kernel recovers the image.
    let copy = s.path("copy");
    std::fs::copy(&img, &copy).unwrap();
    let fs = open_rw(&copy);
    assert!(fs.recovery_stats().is_some());
    assert_eq!(inode_state(&fs), live);
    fs.unmount().unwrap();
    drop(fs);
    assert_eq!(inode_state(&open_ro(&copy)), live);
    assert_repair_only_disconnected(&copy, n, &format!("{name}: rxfs recovery of ialloc"));

    let m = KernelMount::new(&img, &s.path("mnt"), "");
    m.umount();
    let rec = inode_state(&open_ro(&img));
    assert_eq!(rec, live, "{name}: kernel recovery");
    check_with_xfs_db(&img, &rec);
    let fs = open_ro(&img);
    for (i, &ino) in inos.iter().enumerate() {
        assert!(rxfs::ialloc::read::inode_allocated(&*fs, ino).unwrap());
        if i % 16 != 0 {
            assert_eq!(fs.iget(ino).unwrap().core.mode as u32, new_inode(i).mode);
        }
    }
    drop(fs);
    assert_repair_only_disconnected(&img, n, &format!("{name}: kernel recovery of ialloc"));

    // Free them all, crash, let the kernel replay.
    let fs = open_rw(&img);
    logged_free(&fs, &inos);
    fs.log_force().unwrap();
    fs.abandon();
    drop(fs);
    let m = KernelMount::new(&img, &s.path("mnt"), "");
    m.umount();
    let freed = inode_state(&open_ro(&img));
    assert_eq!(used(&freed), used(&before));
    assert_repair_clean(&img, &format!("{name}: kernel recovery of ifree"));

    // Reuse and free again, then a clean unmount (write-back, no log).
    let fs = open_rw(&img);
    let again = logged_alloc(&fs, n / 2);
    logged_free(&fs, &again);
    fs.unmount().unwrap();
    drop(fs);
    assert!(open_ro(&img).recovery_stats().is_none());
    assert_eq!(inode_state(&open_ro(&img)), freed);
    assert_repair_clean(&img, &format!("{name}: clean unmount after reuse"));
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn ialloc_logged_default() {
    crash_and_recovery("default", &[], 300);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn ialloc_logged_no_finobt() {
    crash_and_recovery("nofinobt", &["-m", "finobt=0"], 300);
}

/// 1 KiB blocks: inobt/finobt splits travel through the log too.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn ialloc_logged_btree_splits() {
    crash_and_recovery("split", &["-b", "size=1024"], 5000);
}
