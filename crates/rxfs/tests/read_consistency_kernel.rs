//! The read path against concurrent transactions (issue 12, found by the
//! kill -9 rounds: an open right after a rename answered ENOENT while
//! another directory was busy): existence checks walk the inode btree,
//! which the read path must see before or after a transaction, never half
//! of one (without the lock a walk met "root block has siblings", EUCLEAN,
//! in the middle of a split). With 1 KiB blocks an inobt leaf holds 60 chunk records, so a
//! few thousand creates split leaves and grow the tree while readers ask
//! whether inodes made earlier are allocated; every answer must be yes.
//! (A read-write mount holds the AGI buffer lock across the walk, as the
//! kernel's untrusted inode lookups do.) Needs root and xfsprogs.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use common::*;
use rxfs::fs::ops_ns::CreateArgs;
use rxfs::{Filesystem, MountOptions};

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn inobt_walks_never_see_half_a_split() {
    require_root();
    let s = Scratch::new("read-consistency");
    let img = s.path("img");
    mkfs(&img, 320 << 20, &["-b", "size=1024", "-d", "agcount=2"]);
    let opts = MountOptions {
        read_only: false,
        ..Default::default()
    };
    let fs = Filesystem::open_path(&img, None, opts).unwrap();
    let root = fs.root_ino();
    let args = CreateArgs {
        mode: 0o100644,
        uid: 0,
        gid: 0,
        rdev: 0,
        umask: 0,
    };
    let d = fs
        .mkdir(
            root,
            b"d",
            &CreateArgs {
                mode: 0o040755,
                ..args
            },
        )
        .unwrap()
        .ino;
    // Inodes made before the readers start: always allocated from then on.
    let early: Vec<_> = (0..300)
        .map(|i| fs.create(d, format!("e{i}").as_bytes(), &args).unwrap().ino)
        .collect();
    let done = Arc::new(AtomicBool::new(false));
    let (checks, wrong) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let readers: Vec<_> = (0..2)
        .map(|t| {
            let (fs, early, done) = (fs.clone(), early.clone(), done.clone());
            let (checks, wrong) = (checks.clone(), wrong.clone());
            std::thread::spawn(move || {
                let mut i = t;
                while !done.load(Ordering::Relaxed) {
                    let ino = early[i % early.len()];
                    match rxfs::ialloc::read::inode_allocated(&*fs, ino) {
                        Ok(true) => {}
                        r => {
                            if wrong.fetch_add(1, Ordering::Relaxed) < 5 {
                                eprintln!("inode {}: {r:?}", ino.0);
                            }
                        }
                    }
                    checks.fetch_add(1, Ordering::Relaxed);
                    i += 7;
                }
            })
        })
        .collect();
    for i in 0..6000 {
        fs.create(d, format!("f{i}").as_bytes(), &args).unwrap();
    }
    done.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    fs.unmount().unwrap();
    let (c, w) = (
        checks.load(Ordering::Relaxed),
        wrong.load(Ordering::Relaxed),
    );
    eprintln!("{c} existence checks during 6000 creates, {w} wrong");
    assert!(c > 1000, "the readers hardly ran: {c} checks");
    assert_eq!(
        w, 0,
        "{w} of {c} existence checks saw an allocated inode as not allocated"
    );
}
