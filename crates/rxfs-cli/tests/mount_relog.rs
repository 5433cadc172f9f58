//! Relogged buffers and a moving log tail (the bug fstests generic/051
//! found): a buffer changed in one checkpoint and changed again in a
//! later one moves to the later checkpoint in the AIL, so the log tail may
//! pass the earlier checkpoint while the buffer is not yet written back.
//! Every checkpoint must therefore log *all* the buffer's changes since
//! its last write-back; when rxfs logged only the chunks changed in that
//! checkpoint, a crash (or a shutdown) after the tail had moved left
//! btree blocks whose records recovery could not bring back: xfs_repair
//! found zeroed inobt records, blocks claimed twice by the free-space
//! btrees, wrong free counts.
//!
//! Here: a small log (1566 blocks, the least mkfs.xfs allows), two threads
//! creating, writing, unlinking, making and removing directories through
//! the FUSE mount for a few seconds with frequent fsyncs (the same inode
//! btree, free-space btree and directory blocks are relogged from
//! checkpoint to checkpoint while the tail keeps moving), then the XFS
//! shutdown ioctl (the log forced, nothing written back), unmount, and
//! recovery of the dirty log by the kernel on one copy and by rxfs on
//! another: both must pass `xfs_repair -n`.
//!
//! Root only; fails unless RXFS_SKIP_KERNEL_TESTS=1.

mod common;

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::*;

const XFS_IOC_GOINGDOWN: libc::c_ulong = 0x8004_587d;

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Churn the directory `top` until `until`.
fn churn(top: PathBuf, seed: u64, until: Instant) -> u64 {
    let mut r = Rng(seed | 1);
    let mut ops = 0;
    for d in 0..4 {
        std::fs::create_dir_all(top.join(format!("d{d}"))).unwrap();
    }
    while Instant::now() < until {
        let dir = top.join(format!("d{}", r.below(4)));
        let p = dir.join(format!("f{}", r.below(400)));
        match r.below(10) {
            0..=3 => {
                let len = r.below(9000) as usize;
                if let Ok(mut f) = File::create(&p) {
                    use std::io::Write;
                    let _ = f.write_all(&vec![r.below(256) as u8; len]);
                    if r.below(8) == 0 {
                        let _ = f.sync_all();
                    }
                }
            }
            4..=6 => {
                let _ = std::fs::remove_file(&p);
            }
            7 => {
                let _ = std::fs::create_dir(dir.join(format!("s{}", r.below(40))));
            }
            8 => {
                let _ = std::fs::remove_dir(dir.join(format!("s{}", r.below(40))));
            }
            _ => {
                if let Ok(f) = File::open(&dir) {
                    let _ = f.sync_all();
                }
            }
        }
        ops += 1;
    }
    ops
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn relogged_buffers_survive_the_tail_moving_past_them() {
    require_root();
    let s = Scratch::new("mount_relog");
    for round in 0..2u64 {
        let img = s.path("img");
        mkfs_with(&img, 1 << 30, &["-l", "size=1566b"], FSTESTS_ENV);
        let mnt = s.path("m");
        let guard = rxfs_mount(&img, &mnt, "rw");
        let until = Instant::now() + Duration::from_secs(6);
        let workers: Vec<_> = (0..2u64)
            .map(|t| {
                let top = mnt.join(format!("t{t}"));
                std::thread::spawn(move || churn(top, 0x5eed + round * 7 + t, until))
            })
            .collect();
        let ops: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
        {
            let f = File::open(&mnt).unwrap();
            let mut flags = 0u32;
            // SAFETY: the ioctl reads one u32 through the pointer.
            let r = unsafe { libc::ioctl(f.as_raw_fd(), XFS_IOC_GOINGDOWN as _, &mut flags) };
            assert_eq!(r, 0, "shutdown: {}", std::io::Error::last_os_error());
        }
        rxfs_umount(&mnt, guard);
        let st = rxfs_ok(&["info".as_ref(), img.as_os_str()]);
        eprintln!("round {round}: {ops} ops");
        assert!(
            String::from_utf8_lossy(&st).contains("dirty")
                || String::from_utf8_lossy(&st).contains("recover"),
            "the shutdown left a clean log: nothing to recover"
        );

        let kimg = s.path("kimg");
        std::fs::copy(&img, &kimg).unwrap();
        let k = KernelMount::new(&kimg, &s.path("k"), "");
        k.umount();
        // (kimg: the copy the kernel recovered.)
        run_output("xfs_repair", &["-n", kimg.to_str().unwrap()]);

        let guard = rxfs_mount(&img, &mnt, "rw");
        rxfs_umount(&mnt, guard);
        run_output("xfs_repair", &["-n", img.to_str().unwrap()]);
    }
}
