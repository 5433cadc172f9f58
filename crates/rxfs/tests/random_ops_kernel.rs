//! The seeded random-operation tester (issue 4) through the library:
//! create/mkdir/mkfifo/symlink/link/unlink/rmdir/rename (NOREPLACE,
//! EXCHANGE)/write/truncate/open-unlink-write-close/sync against an
//! in-memory model (results and errnos must agree), then unmount,
//! `xfs_repair -n` exit 0, and the kernel's view (names, kinds, link
//! counts, sizes, bytes, symlink targets) equal to the model.
//!
//! - `random_ops_library_defaults` / `_1k_blocks`: seeds x ops per mkfs
//!   variant;
//! - `random_ops_interleaved_with_kernel`: rounds alternate between rxfs
//!   (library) and the kernel (system calls on a loop mount) on one image
//!   and one model, repair-clean after each round;
//! - `random_ops_crash_sampled`: the library on a crash device; sampled
//!   power cuts in every crash mode, recovered by rxfs and (a sample) by the
//!   kernel: repair clean, and the namespace (names, kinds, links, symlink
//!   targets) equals the model after some operation between the last
//!   completed sync and the cut.
//!
//! Counts are printed (seeds, operations, errors, crash images).

mod common;
mod random_support;

use std::path::Path;
use std::sync::Arc;

use common::*;
use random_support::gen::{Gen, Params};
use random_support::model::{Model, Op};
use random_support::targets::{LibTarget, PosixTarget};
use random_support::timeline::Timeline;
use random_support::view::{diff, of_model, of_mount, of_rxfs, View};
use random_support::{close_all, run_ops, Counts};
use rxfs::bdev::{for_each_crash_image, sample_points, BlockDevice, CrashDevice, CrashMode};
use rxfs::{Filesystem, MountOptions};

fn repair_ok(img: &Path) -> Result<(), String> {
    let out = std::process::Command::new("xfs_repair")
        .arg("-n")
        .arg(img)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        return Ok(());
    }
    let mut s = format!(
        "xfs_repair -n failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    s.truncate(5000);
    Err(s)
}

fn params(blocksize: u64, ops: usize) -> Params {
    Params {
        ops,
        // Large enough for btree-format data forks (random writes leave
        // holes; fallocate punches more).
        max_file: 160 * blocksize,
        names: 20,
        dirblk: 4096,
        big_dirs: false,
        xattrs: true,
        falloc: true,
        shift: true,
        bs: blocksize,
    }
}

/// Check the image through the kernel against the model.
fn kernel_check(s: &Scratch, img: &Path, m: &Model, what: &str) {
    if let Err(e) = repair_ok(img) {
        panic!("{what}: {e}");
    }
    let mnt = s.path("kmnt");
    let k = KernelMount::new(img, &mnt, "");
    let got = of_mount(&mnt, true).unwrap();
    k.umount();
    let d = diff(&of_model(m, true), &got);
    assert!(
        d.is_empty(),
        "{what}: kernel view differs from the model:\n{d}"
    );
}

/// Regular files whose data fork is in btree format.
/// (regular files with btree-format data forks, inodes whose attr fork
/// is in block form: leaf, node or remote values).
fn count_btree_forks(fs: &Filesystem) -> (usize, usize) {
    let mut n = 0;
    let mut attr_blocks = 0;
    let mut stack = vec![fs.root_ino()];
    while let Some(d) = stack.pop() {
        let dip = fs.iget(d).unwrap();
        let mut kids = Vec::new();
        fs.readdir(&dip, 0, &mut |e| {
            if e.name != b"." && e.name != b".." {
                kids.push(e.ino);
            }
            true
        })
        .unwrap();
        for k in kids {
            let ip = fs.iget(k).unwrap();
            if ip.core.forkoff != 0 && ip.core.aformat != 1 && ip.core.anextents > 0 {
                attr_blocks += 1;
            }
            match ip.core.mode as u32 & 0o170000 {
                0o040000 => stack.push(k),
                0o100000 if ip.core.format == rxfs::format::inode::FMT_BTREE => n += 1,
                _ => {}
            }
        }
    }
    (n, attr_blocks)
}

/// Directories larger than one directory block (leaf, node or btree form).
fn count_big_dirs(fs: &Filesystem, dirblk: u64) -> usize {
    let mut n = 0;
    let mut stack = vec![fs.root_ino()];
    while let Some(d) = stack.pop() {
        let dip = fs.iget(d).unwrap();
        if dip.core.size > dirblk {
            n += 1;
        }
        fs.readdir(&dip, 0, &mut |e| {
            if e.name != b"."
                && e.name != b".."
                && e.ftype == Some(rxfs::types::FileType::Directory)
            {
                stack.push(e.ino);
            }
            true
        })
        .unwrap();
    }
    n
}

fn rw_open(img: &Path) -> Arc<Filesystem> {
    Filesystem::open_path(img, None, MountOptions::default()).expect("rw open")
}

fn library_seeds(name: &str, opts: &[&str], blocksize: u64, seeds: u64, ops: usize) {
    library_seeds_with(name, opts, params(blocksize, ops), seeds)
}

fn library_seeds_with(name: &str, opts: &[&str], p: Params, seeds: u64) {
    let ops = p.ops;
    if kernel_tests_disabled() {
        return;
    }
    require_root();
    let mut c = Counts::default();
    let mut btree_files = 0;
    let mut attr_block_forks = 0;
    let mut big_dirs = 0;
    for seed in 0..seeds {
        let s = Scratch::new(name);
        let img = s.path("img");
        mkfs_with(&img, 128 << 20, opts, FSTESTS_ENV);
        let fs = rw_open(&img);
        let mut t = LibTarget::new(fs.clone(), None);
        let mut m = Model::new();
        let mut g = Gen::new(seed, p);
        let chunk = ops / 4;
        for round in 0..4 {
            let each = std::env::var_os("RND_CHECK_EACH").is_some();
            let fs2 = fs.clone();
            let mut after = |m: &Model, _: &Op| {
                if !each {
                    return Ok(());
                }
                let d = diff(&of_model(m, true), &of_rxfs(&fs2, true)?);
                if d.is_empty() {
                    Ok(())
                } else {
                    Err(d)
                }
            };
            if let Err(e) =
                random_support::run_ops_checked(&mut g, &mut m, &mut t, chunk, &mut c, &mut after)
            {
                panic!("{name} seed {seed}: {e}");
            }
            let live = of_rxfs(&fs, true).unwrap();
            let d = diff(&of_model(&m, true), &live);
            assert!(
                d.is_empty(),
                "{name} seed {seed} round {round}: live view:\n{d}"
            );
        }
        close_all(&mut m, &mut t, &mut c).unwrap();
        let (b, a) = count_btree_forks(&fs);
        btree_files += b;
        attr_block_forks += a;
        big_dirs += count_big_dirs(&fs, p.dirblk as u64);
        assert_eq!(
            fs.stats().ag_lock_order_violations,
            0,
            "AG header lock order"
        );
        fs.unmount().unwrap();
        assert_eq!(
            fs.stats().unlogged_changes,
            0,
            "a change outside the logged chunks"
        );
        drop(t);
        drop(fs);
        kernel_check(&s, &img, &m, &format!("{name} seed {seed}"));
    }
    eprintln!(
        "{name}: {seeds} seeds, {} operations ({} answered with an errno, as the model said); \
         {btree_files} files ended with btree-format data forks, {attr_block_forks} inodes with \
         attr forks in leaf/node form",
        c.ops, c.errors
    );
    eprintln!("{name}: {big_dirs} directories ended past one directory block");
    assert!(
        !p.big_dirs || big_dirs > 0,
        "{name}: no directory reached the leaf form"
    );
    assert!(
        p.big_dirs || btree_files > 0,
        "{name}: no file reached the btree form"
    );
    assert!(
        attr_block_forks > 0,
        "{name}: no attr fork reached the leaf form"
    );
}

/// Directories past one block (leaf and node forms): many names, no
/// per-directory size limit.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn random_ops_big_directories() {
    let mut p = params(1024, 3000);
    p.big_dirs = true;
    p.names = 1500;
    p.max_file = 8 * 1024;
    // rmapbt: directory blocks of the leaf and node forms get their
    // reverse mappings through the fork store (a double mapping once).
    library_seeds_with("rnd_bigdirs", &["-b", "size=1024", "-m", "rmapbt=1"], p, 2);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn random_ops_library_defaults() {
    library_seeds("rnd_defaults", &[], 4096, 6, 400);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn random_ops_library_1k_blocks() {
    library_seeds("rnd_1k", &["-b", "size=1024"], 1024, 4, 400);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn random_ops_library_rmapbt_nrext64() {
    library_seeds(
        "rnd_rmap_nrext64",
        &["-m", "rmapbt=1", "-i", "nrext64=1"],
        4096,
        4,
        400,
    );
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn random_ops_library_reflink0() {
    library_seeds("rnd_reflink0", &["-m", "reflink=0"], 4096, 3, 400);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn random_ops_library_64k_dir_blocks() {
    let mut p = params(4096, 400);
    p.dirblk = 65536;
    p.names = 60;
    library_seeds_with("rnd_n64k", &["-n", "size=65536"], p, 3);
}

/// Rounds alternate between rxfs and the kernel on one image.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn random_ops_interleaved_with_kernel() {
    require_root();
    let s = Scratch::new("rnd_interleave");
    let img = s.path("img");
    mkfs_with(&img, 128 << 20, &[], FSTESTS_ENV);
    let mut m = Model::new();
    let mut g = Gen::new(77, params(4096, 0));
    let mut c = Counts::default();
    for round in 0..6 {
        if round % 2 == 0 {
            let fs = rw_open(&img);
            let before = of_rxfs(&fs, true).unwrap();
            let d = diff(&of_model(&m, true), &before);
            assert!(
                d.is_empty(),
                "round {round}: rxfs reads the kernel's tree:\n{d}"
            );
            let mut t = LibTarget::new(fs.clone(), None);
            run_ops(&mut g, &mut m, &mut t, 150, &mut c)
                .unwrap_or_else(|e| panic!("round {round} (rxfs): {e}"));
            close_all(&mut m, &mut t, &mut c).unwrap();
            assert_eq!(
                fs.stats().ag_lock_order_violations,
                0,
                "AG header lock order"
            );
            fs.unmount().unwrap();
            assert_eq!(
                fs.stats().unlogged_changes,
                0,
                "a change outside the logged chunks"
            );
            drop(t);
            drop(fs);
            kernel_check(&s, &img, &m, &format!("round {round} (after rxfs)"));
        } else {
            let mnt = s.path("kround");
            let k = KernelMount::new(&img, &mnt, "");
            let mut t = PosixTarget::new(mnt.clone());
            run_ops(&mut g, &mut m, &mut t, 150, &mut c)
                .unwrap_or_else(|e| panic!("round {round} (kernel): {e}"));
            close_all(&mut m, &mut t, &mut c).unwrap();
            drop(t);
            k.umount();
            if let Err(e) = repair_ok(&img) {
                panic!("round {round} (after the kernel): {e}");
            }
        }
    }
    eprintln!(
        "random_ops_interleaved_with_kernel: 6 rounds, {} operations ({} errnos)",
        c.ops, c.errors
    );
}

fn crash_seed(
    s: &Scratch,
    base: &[u8],
    seed: u64,
    c: &mut Counts,
    images: &mut usize,
    kimages: &mut usize,
) {
    let dev = Arc::new(CrashDevice::new(base.to_vec(), 1 << 30));
    let fs = Filesystem::open(dev.clone(), None, MountOptions::default()).unwrap();
    let mut t = LibTarget::new(fs.clone(), Some(dev.clone()));
    let mut m = Model::new();
    let mut g = Gen::new(seed, params(4096, 0));
    let mut tl = Timeline::new(&m);
    let done = tl.run(&mut g, &mut m, &mut t, 250, &format!("crash seed {seed}"));
    c.ops += done;
    fs.abandon();
    drop(t);
    drop(fs);
    let points = sample_points(&dev.crash_points(), 10, seed);
    let mut n = 0usize;
    for_each_crash_image(&dev, &points, &CrashMode::EVERY, seed, |ci| {
        let p = ci.point;
        let (lo, hi, allowed) = tl.allowed(p);
        let ok_view = |got: &View| allowed.iter().any(|v| &v.1 == got);
        let case = format!("seed {seed} point {p} mode {:?} (ops {lo}..={hi})", ci.mode);
        let kernel = n.is_multiple_of(4);
        n += 1;
        let file = s.path("crash.img");
        if kernel {
            std::fs::write(&file, ci.to_vec()).unwrap();
            let mnt = s.path("kcrash");
            let k = KernelMount::new(&file, &mnt, "");
            let got = of_mount(&mnt, false).unwrap();
            k.umount();
            assert!(
                ok_view(&got),
                "{case}: kernel recovery shows a tree no prefix of the ops gives:\n{}",
                diff(&allowed[allowed.len() - 1].1, &got)
            );
            if let Err(e) = repair_ok(&file) {
                panic!("{case}: after the kernel's recovery: {e}");
            }
            *kimages += 1;
        }
        let d: Arc<dyn BlockDevice> = ci.device();
        let fs = Filesystem::open(d, None, MountOptions::default())
            .unwrap_or_else(|e| panic!("{case}: rxfs recovery: {e}"));
        let got = of_rxfs(&fs, false).unwrap();
        assert!(
            ok_view(&got),
            "{case}: rxfs recovery shows a tree no prefix of the ops gives:\n{}",
            diff(&allowed[allowed.len() - 1].1, &got)
        );
        assert_eq!(
            fs.stats().ag_lock_order_violations,
            0,
            "AG header lock order"
        );
        fs.unmount().unwrap();
        assert_eq!(
            fs.stats().unlogged_changes,
            0,
            "a change outside the logged chunks"
        );
        drop(fs);
        std::fs::write(&file, ci.to_vec()).unwrap();
        if let Err(e) = repair_ok(&file) {
            panic!("{case}: after rxfs's recovery: {e}");
        }
        *images += 1;
    })
    .unwrap();
}

fn crash_seeds(name: &str, opts: &[&str], seeds: u64) {
    if kernel_tests_disabled() {
        return;
    }
    require_root();
    let s = Scratch::new(name);
    let img = s.path("base");
    let mut o = vec!["-d", "agcount=2"];
    o.extend_from_slice(opts);
    mkfs_with(&img, 64 << 20, &o, FSTESTS_ENV);
    let base = std::fs::read(&img).unwrap();
    let (mut c, mut images, mut kimages) = (Counts::default(), 0, 0);
    for seed in 0..seeds {
        crash_seed(&s, &base, 1000 + seed, &mut c, &mut images, &mut kimages);
    }
    eprintln!(
        "{name}: {seeds} seeds, {} operations, {images} crash images \
         recovered by rxfs ({kimages} also by the kernel), every one repair-clean",
        c.ops
    );
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn random_ops_crash_sampled() {
    crash_seeds("random_ops_crash_sampled", &[], 3);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn random_ops_crash_sampled_rmapbt() {
    crash_seeds("random_ops_crash_sampled_rmapbt", &["-m", "rmapbt=1"], 2);
}
