//! Issue 13 through a real `rxfs mount`: readers racing writers on the
//! same inode got EUCLEAN from a healthy filesystem. Four shapes, each on
//! its own fresh image and foreground mount (so the daemon's stderr, where
//! it reports corruption, is kept):
//!
//! - btree append: one thread writes 4 KiB at every other 8 KiB (the data
//!   fork becomes a btree and keeps growing) while two loop open(O_RDONLY),
//!   pread, close, listxattr on the file;
//! - looptest: one thread, open(O_RDWR|O_CREAT), lseek, write 8 KiB,
//!   lseek, read, close, thousands of times (the release of one open trims
//!   the preallocation in a transaction while the next open reads);
//! - xattr replace (fstests generic/403): one thread replaces an xattr
//!   alternately 10 and 3000 bytes long and adds and removes a big one,
//!   while two getxattr the ones that always exist and listxattr;
//! - directory: one thread creates and unlinks a name in directories
//!   whose blocks are full (each create adds a block, an extent in a
//!   btree data fork; each unlink frees it) while two stat, listxattr and
//!   readdir them. (The VFS serialises readdir and lookups in a directory
//!   with changes to it; a stat or listxattr of the directory itself it
//!   does not.)
//!
//! Every system call error a race cannot explain fails the shape (ENOENT
//! of a name just unlinked is fine; ENODATA of an xattr that always
//! exists is not), and so does any "corrupt" line in the daemon's log.
//! The amount of work is fixed. After the unmount `xfs_repair -n` must be
//! clean. Root only; fails unless RXFS_SKIP_KERNEL_TESTS=1.

mod common;
mod reader_stress_support;

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

use common::*;
use reader_stress_support::*;

/// Writes of the btree-append shape.
const APPENDS: u64 = 6000;
/// Iterations of the looptest shape.
const LOOPS: u64 = 3000;
/// Replacements of the xattr shape.
const REPLACES: usize = 10000;
/// Names that fill each directory of the directory shape; creates and
/// unlinks of one more name in each.
const DIR_KEPT: usize = 600;
const DIR_CHURNS: usize = 2000;

/// A fresh image (1 KiB blocks, and `mkfs` options: btrees deepen and
/// forms change after little work), its mount, the shape, then unmount
/// and `xfs_repair -n`.
fn with_mount(tag: &str, mkfs_opts: &[&str], shape: impl FnOnce(&Path, &Arc<Tally>)) {
    if kernel_tests_disabled() {
        return;
    }
    require_root();
    require_tools(&["mkfs.xfs", "xfs_repair"]);
    let s = Scratch::new(tag);
    let img = s.path("img");
    let mut opts = vec!["-b", "size=1024"];
    opts.extend_from_slice(mkfs_opts);
    mkfs(&img, 512 << 20, &opts);
    let d = Daemon::start(&s, &img);
    let t = Arc::new(Tally::default());
    let t0 = std::time::Instant::now();
    shape(&d.mnt, &t);
    let secs = t0.elapsed().as_secs_f64();
    let log = d.stop();
    run("xfs_repair", &["-n", img.to_str().unwrap()]);
    eprintln!("{tag}: {secs:.1} s");
    assert_clean(tag, &t, &log);
}

/// Run `readers` copies of `read` until `write` returns.
fn race(readers: usize, write: impl FnOnce(), read: impl Fn() + Send + Sync + 'static) {
    let done = Arc::new(AtomicBool::new(false));
    let read = Arc::new(read);
    let threads: Vec<_> = (0..readers)
        .map(|_| {
            let (done, read) = (done.clone(), read.clone());
            std::thread::spawn(move || {
                while !done.load(Relaxed) {
                    read();
                }
            })
        })
        .collect();
    write();
    done.store(true, Relaxed);
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn btree_append_vs_open_read_listxattr() {
    with_mount("stress-append", &[], |mnt, t| {
        let p = mnt.join("f");
        let f = File::create(&p).unwrap();
        let chunk = pattern(1, 4096);
        let (tr, pr) = (t.clone(), p.clone());
        race(
            2,
            || {
                for k in 0..APPENDS {
                    t.call();
                    if let Err(e) = f.write_all_at(&chunk, k * 8192) {
                        t.error("pwrite", os(&e), format!("offset {}", k * 8192));
                    }
                }
            },
            move || open_read_listxattr(&pr, &tr),
        );
    });
}

/// The readers of the btree-append shape.
fn open_read_listxattr(p: &Path, t: &Tally) {
    t.call();
    let f = match File::open(p) {
        Ok(f) => f,
        Err(e) => return t.error("open", os(&e), String::new()),
    };
    t.call();
    let size = match f.metadata() {
        Ok(m) => m.len(),
        Err(e) => return t.error("fstat", os(&e), String::new()),
    };
    let mut buf = vec![0u8; 4096];
    let off = (size / 2) & !8191;
    t.call();
    if let Err(e) = f.read_at(&mut buf, off) {
        t.error("pread", os(&e), format!("offset {off}"));
    }
    drop(f);
    t.call();
    if let Err(e) = listxattr(p) {
        t.error("listxattr", e, String::new());
    }
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn looptest_open_write_read_close() {
    with_mount("stress-looptest", &[], |mnt, t| {
        let p = mnt.join("loop");
        let mut buf = vec![0u8; 8192];
        for i in 0..LOOPS {
            let data = pattern(i, 8192);
            t.call();
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o644)
                .open(&p);
            let mut f = match f {
                Ok(f) => f,
                Err(e) => {
                    t.error("open", os(&e), format!("iteration {i}"));
                    continue;
                }
            };
            let off = i * 8192;
            t.call();
            let r = f
                .seek(SeekFrom::Start(off))
                .and_then(|_| f.write_all(&data))
                .and_then(|_| f.seek(SeekFrom::Start(off)))
                .and_then(|_| f.read_exact(&mut buf));
            match r {
                Err(e) => t.error("seek/write/read", os(&e), format!("iteration {i}")),
                Ok(()) if buf != data => t.error(
                    "read back",
                    libc::EIO,
                    format!("iteration {i}: other bytes"),
                ),
                Ok(()) => {}
            }
        }
    });
}

/// The names of the xattr shape: one never changes, one is replaced all
/// the time, one comes and goes.
const SMALL: &str = "user.small";
const FLIP: &str = "user.flip";
const BIG: &str = "user.big";

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn xattr_replace_vs_getxattr() {
    with_mount("stress-xattr", &[], |mnt, t| {
        let p = mnt.join("x");
        File::create(&p).unwrap();
        setxattr(&p, SMALL, b"small").unwrap();
        setxattr(&p, FLIP, &pattern(10, 10)).unwrap();
        let (tr, pr) = (t.clone(), p.clone());
        race(
            2,
            || {
                for i in 0..REPLACES {
                    let len = if i % 2 == 0 { 3000 } else { 10 };
                    t.call();
                    if let Err(e) = setxattr(&p, FLIP, &pattern(len as u64, len)) {
                        t.error("setxattr flip", e, format!("{len} bytes"));
                    }
                    if i % 10 == 0 {
                        t.call();
                        if let Err(e) = setxattr(&p, BIG, &pattern(3, 20000)) {
                            t.error("setxattr big", e, String::new());
                        }
                    } else if i % 10 == 5 {
                        t.call();
                        if let Err(e) = removexattr(&p, BIG) {
                            t.error("removexattr big", e, String::new());
                        }
                    }
                }
            },
            move || get_list_xattrs(&pr, &tr),
        );
    });
}

/// The readers of the xattr shape.
fn get_list_xattrs(p: &Path, t: &Tally) {
    t.call();
    match getxattr(p, SMALL) {
        Ok(v) if v == b"small" => {}
        Ok(v) => t.error(
            "getxattr small",
            libc::EIO,
            format!("{} bytes, wrong", v.len()),
        ),
        Err(e) => t.error("getxattr small", e, String::new()),
    }
    t.call();
    match getxattr(p, FLIP) {
        Ok(v) if v == pattern(v.len() as u64, v.len()) && [10, 3000].contains(&v.len()) => {}
        Ok(v) => t.error(
            "getxattr flip",
            libc::EIO,
            format!("{} bytes, wrong", v.len()),
        ),
        Err(e) => t.error("getxattr flip", e, String::new()),
    }
    t.call();
    match getxattr(p, BIG) {
        Ok(v) if v == pattern(3, 20000) => {}
        Err(libc::ENODATA) => {}
        Ok(v) => t.error(
            "getxattr big",
            libc::EIO,
            format!("{} bytes, wrong", v.len()),
        ),
        Err(e) => t.error("getxattr big", e, String::new()),
    }
    t.call();
    match listxattr(p) {
        Ok(names) => {
            for want in [SMALL, FLIP] {
                if !names.iter().any(|n| n == want.as_bytes()) {
                    t.error("listxattr", libc::ENODATA, format!("{want} missing"));
                }
            }
        }
        Err(e) => t.error("listxattr", e, String::new()),
    }
}

/// Names of the directory shape: 240 bytes long (a 4 KiB directory block
/// holds 15 and has no room for a 16th); the kept ones numbered.
fn kept_name(i: usize) -> String {
    format!("k{i:0>239}")
}

fn churn_name() -> String {
    format!("c{}", "x".repeat(239))
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn readdir_stat_vs_create_unlink() {
    with_mount("stress-dir", &["-d", "agcount=2"], |mnt, t| {
        // Four directories (at least two share an AG) filled in turn: the
        // blocks of two in one AG interleave, so no two blocks of one
        // directory are adjacent. Then every create of one more name allocates a block,
        // a new extent in a btree data fork, and its unlink frees it.
        let dirs = ["a", "b", "c", "d"].map(|n| mnt.join(n));
        for d in &dirs {
            std::fs::create_dir(d).unwrap();
            // An attribute fork takes half the inode: the data fork is a
            // btree after a few extents.
            setxattr(d, "user.pad", &pattern(5, 150)).unwrap();
        }
        for i in 0..DIR_KEPT {
            for d in &dirs {
                File::create(d.join(kept_name(i))).unwrap();
            }
        }
        let churn = churn_name();
        let (tr, dr) = (t.clone(), dirs.clone());
        race(
            2,
            || {
                for _ in 0..DIR_CHURNS {
                    for d in &dirs {
                        t.call();
                        if let Err(e) = File::create(d.join(&churn)) {
                            t.error("create", os(&e), String::new());
                        }
                    }
                    for d in &dirs {
                        t.call();
                        if let Err(e) = std::fs::remove_file(d.join(&churn)) {
                            t.error("unlink", os(&e), String::new());
                        }
                    }
                }
            },
            move || readdir_stat(&dr, &tr),
        );
    });
}

/// The readers of the directory shape. The VFS serialises readdir and
/// lookups with creates and unlinks in a directory (its i_rwsem), but not
/// a stat or listxattr of the directory itself: those read its inode and
/// data fork while they change. So mostly those (the stats forced to
/// reach the daemon), and a full listing now and then (every kept name
/// in it).
fn readdir_stat(dirs: &[std::path::PathBuf], t: &Tally) {
    for _ in 0..50 {
        for d in dirs {
            t.call();
            if let Err(e) = stat_sync(d) {
                t.error("stat dir", e, String::new());
            }
            t.call();
            if let Err(e) = listxattr(d) {
                t.error("listxattr dir", e, String::new());
            }
        }
    }
    let d = &dirs[0];
    t.call();
    let rd = match std::fs::read_dir(d) {
        Ok(rd) => rd,
        Err(e) => return t.error("opendir", os(&e), String::new()),
    };
    let mut kept = 0;
    for e in rd {
        match e {
            Ok(e) => kept += e.file_name().as_encoded_bytes().starts_with(b"k") as usize,
            Err(e) => return t.error("readdir", os(&e), String::new()),
        }
    }
    if kept != DIR_KEPT {
        t.error("readdir", libc::ENOENT, format!("{kept} kept names listed"));
    }
}
