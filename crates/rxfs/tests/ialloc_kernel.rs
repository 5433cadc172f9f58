//! Inode allocation (`rxfs::ialloc`) against the kernel's tools as oracle.
//!
//! On fresh mkfs images (default features; no sparse inodes; no finobt;
//! 1 KiB blocks so that the inode btrees split) we allocate many inodes
//! through an unlogged `MemTx`, then check:
//! - alloc only: through our read path (every new inode allocated in the
//!   inobt, readable with the mode/owner/generation we gave; per AG the
//!   inobt record sums equal the AGI counts, the finobt holds exactly the
//!   inobt records with free inodes, iblocks/fblocks match the trees) and
//!   through `xfs_db` (AGI count/freecount, sb icount/ifree); xfs_repair
//!   -n must report nothing but the disconnected (never linked) inodes;
//! - after freeing them all: `xfs_repair -n` exits 0 and counts are exact;
//! - a second cycle reuses the freed inodes (no new chunk, generation
//!   bumped), frees them, repair is clean again;
//! - the kernel mounts the result and creates files in it, and repair
//!   stays clean after that.

mod common;
mod ialloc_common;

use std::collections::BTreeSet;

use common::*;
use ialloc_common::*;
use rxfs::format::dinode_edit as de;
use rxfs::ialloc::{ialloc, ifree, NewInode};
use rxfs::types::Ino;
use rxfs::xact::MetaTx;

/// Returns the highest (inobt, finobt) levels seen after allocating and
/// after freeing.
fn scenario(name: &str, size: u64, mkfs_opts: &[&str], n: usize) -> ((u32, u32), (u32, u32)) {
    if !kernel_ok() {
        return ((0, 0), (0, 0));
    }
    let s = Scratch::new(&format!("ialloc-{name}"));
    let img = s.path("img");
    mkfs(&img, size, mkfs_opts);
    let before = inode_state(&open_ro(&img));
    let used_before: u64 = before.iter().map(|a| a.count - a.freecount).sum();

    // ---- allocate ----
    let (inos, chunks) = alloc_all(&img, n, 37);
    let set: BTreeSet<u64> = inos.iter().map(|(i, _)| i.0).collect();
    assert_eq!(set.len(), n, "duplicate inode numbers");
    let fs = open_ro(&img);
    let after = inode_state(&fs);
    let levels_alloc = max_levels(&fs);
    let total = |v: &[AgInodes]| -> (u64, u64) {
        (
            v.iter().map(|a| a.count).sum(),
            v.iter().map(|a| a.freecount).sum(),
        )
    };
    let (c0, f0) = total(&before);
    let (c1, f1) = total(&after);
    assert!(
        chunks >= 2,
        "{name}: only {chunks} new chunks for {n} inodes"
    );
    assert_eq!(c1, c0 + 64 * chunks as u64, "{name}: icount");
    assert_eq!(c1 - f1, used_before + n as u64, "{name}: inodes in use");
    assert!(f0 >= f1 || chunks > 0);
    // Directories were spread over the AGs by the rotor.
    let dir_ags: BTreeSet<u32> = inos
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 16 == 0)
        .map(|(_, (ino, _))| fs.geo().ino_agno(*ino).0)
        .collect();
    assert!(
        dir_ags.len() > 1 || fs.geo().agcount == 1,
        "{name}: dirs in AGs {dir_ags:?}"
    );
    for (i, &(ino, gen)) in inos.iter().enumerate() {
        assert!(
            rxfs::ialloc::read::inode_allocated(&*fs, ino).unwrap(),
            "{name}: {} not allocated",
            ino.0
        );
        let want = new_inode(i);
        if want.mode & de::S_IFMT == de::S_IFDIR {
            continue; // the directory fork is dirop's business
        }
        let ip = fs.iget(ino).unwrap();
        assert_eq!(ip.core.mode as u32, want.mode);
        assert_eq!(
            (ip.core.uid, ip.core.nlink, ip.core.gen),
            (want.uid, want.nlink, gen)
        );
        assert_eq!(ip.core.crtime, want.time);
        assert_eq!(ip.core.next_unlinked, de::NULLAGINO);
        assert_eq!(ip.core.nrext64(), fs.sb().has_nrext64());
        assert_eq!(ip.core.bigtime(), fs.sb().has_bigtime());
    }
    drop(fs);
    check_with_xfs_db(&img, &after);
    // Nothing links the new inodes: repair may only complain about that.
    assert_repair_only_disconnected(&img, n, name);

    eprintln!("{name}: {chunks} new chunks, before {before:?} after {after:?}");
    // ---- free ----
    free_all(&img, &inos, 53);
    assert_repair_clean(&img, &format!("{name}: alloc + free"));
    let freed = inode_state(&open_ro(&img));
    let levels_freed = max_levels(&open_ro(&img));
    let (c2, f2) = total(&freed);
    assert_eq!(c2, c1, "{name}: chunks are kept");
    assert_eq!(c2 - f2, used_before, "{name}: all freed");
    check_with_xfs_db(&img, &freed);

    // ---- second cycle: reuse, no new chunks, generations bumped ----
    let (again, chunks2) = alloc_all(&img, n, 101);
    assert_eq!(chunks2, 0, "{name}: free inodes must be reused");
    let old: std::collections::HashMap<u64, u32> = inos.iter().map(|(i, g)| (i.0, *g)).collect();
    for (ino, gen) in &again {
        if let Some(g) = old.get(&ino.0) {
            assert_ne!(gen, g, "{name}: generation of reused {}", ino.0);
        }
    }
    check_with_xfs_db(&img, &inode_state(&open_ro(&img)));
    free_all(&img, &again, 200);
    assert_repair_clean(&img, &format!("{name}: second cycle"));
    assert_eq!(
        inode_state(&open_ro(&img)),
        freed,
        "{name}: state after cycle 2"
    );

    // ---- the kernel allocates from what we left ----
    let mnt = s.path("mnt");
    let m = KernelMount::new(&img, &mnt, "");
    for i in 0..200 {
        std::fs::write(mnt.join(format!("k{i}")), b"k").unwrap();
    }
    m.umount();
    assert_repair_clean(&img, &format!("{name}: kernel creates"));
    let fin = inode_state(&open_ro(&img));
    assert_eq!(total(&fin).0 - total(&fin).1, used_before + 200);
    (levels_alloc, levels_freed)
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn ialloc_default_features() {
    scenario("default", 512 << 20, &[], 300);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn ialloc_no_sparse() {
    scenario("nosparse", 512 << 20, &["-i", "sparse=0"], 300);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn ialloc_no_finobt() {
    scenario("nofinobt", 512 << 20, &["-m", "finobt=0"], 300);
}

/// Big extent counters and 1 KiB inodes (16-block chunks, 8-block
/// clusters), no bigtime.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn ialloc_nrext64_big_inodes() {
    scenario(
        "nrext64",
        512 << 20,
        &["-i", "nrext64=1,size=1024", "-m", "bigtime=0"],
        300,
    );
}

/// rmapbt filesystems: new chunks and inode btree blocks get their
/// reverse mappings (xfs_repair cross-checks the inode chunk records).
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn ialloc_rmapbt() {
    scenario("rmapbt", 512 << 20, &["-m", "rmapbt=1"], 300);
}

/// 1 KiB blocks: 60 inobt records per leaf, so ~80 new chunks split the
/// inobt (and the finobt while the chunks are all free).
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn ialloc_btree_splits() {
    let (alloc, freed) = scenario("split", 512 << 20, &["-b", "size=1024"], 5000);
    if kernel_tests_disabled() {
        return;
    }
    assert!(alloc.0 >= 2, "inobt did not split: levels {alloc:?}");
    assert!(freed.1 >= 2, "finobt did not split: levels {freed:?}");
}

/// Refusals that must not change anything.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn ifree_refuses_linked_inodes() {
    if !kernel_ok() {
        return;
    }
    let s = Scratch::new("ialloc-refuse");
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let mut tx = memtx(&img);
    let root = Ino(tx.sb().rootino);
    let ip = tx.ijoin(root).unwrap();
    assert!(matches!(
        ifree(&mut tx, ip, root),
        Err(rxfs::Error::Invalid(_))
    ));
    let bad = NewInode {
        mode: 0o644,
        ..new_inode(1)
    };
    assert!(ialloc(&mut tx, root, &bad).is_err());
    drop(tx);
    assert_repair_clean(&img, "refusals");
}

/// What a new inode inherits from its directory (project id, extent size
/// hints, flags) must match what the kernel gives its own new inodes in
/// the same directory.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn ialloc_inherits_like_the_kernel() {
    if !kernel_ok() {
        return;
    }
    let s = Scratch::new("ialloc-inherit");
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let m = KernelMount::new(&img, &s.path("mnt"), "");
    let d = m.dir.join("d");
    std::fs::create_dir(&d).unwrap();
    let ds = d.to_str().unwrap();
    for c in [
        "chattr +PSAdn",
        "chproj 42",
        "extsize 64k",
        "cowextsize 128k",
    ] {
        run("xfs_io", &["-c", c, ds]);
    }
    std::fs::write(d.join("kf"), b"").unwrap();
    std::fs::create_dir(d.join("kd")).unwrap();
    mknod(&d.join("kp"), libc::S_IFIFO | 0o644, 0);
    m.umount();

    let fs = open_ro(&img);
    let dino = fs.resolve(b"/d").unwrap();
    let kernel: Vec<Ino> = ["/d/kf", "/d/kd", "/d/kp"]
        .iter()
        .map(|p| fs.resolve(p.as_bytes()).unwrap())
        .collect();
    assert_ne!(fs.iget(dino).unwrap().core.flags, 0);
    drop(fs);
    let modes = [
        de::S_IFREG | 0o644,
        de::S_IFDIR | 0o755,
        de::S_IFLNK | 0o777,
    ];
    let mut tx = memtx(&img);
    let mut ours = Vec::new();
    for (i, &mode) in modes.iter().enumerate() {
        let init = NewInode {
            mode,
            ..new_inode(i + 1)
        };
        let (ino, ip) = ialloc(&mut tx, dino, &init).unwrap();
        if mode & de::S_IFMT == de::S_IFDIR {
            empty_sf_dir(&mut tx, ip, dino);
        }
        ours.push(ino);
    }
    tx.commit().unwrap();
    let fs = open_ro(&img);
    for (k, o) in kernel.iter().zip(&ours) {
        let (k, o) = (fs.iget(*k).unwrap(), fs.iget(*o).unwrap());
        assert_eq!(
            (k.core.flags, k.core.flags2, k.core.projid),
            (o.core.flags, o.core.flags2, o.core.projid),
            "mode {:o}",
            o.core.mode
        );
        assert_eq!(
            (k.core.extsize, k.core.cowextsize),
            (o.core.extsize, o.core.cowextsize),
            "mode {:o}",
            o.core.mode
        );
    }
    assert_eq!(fs.iget(ours[0]).unwrap().core.projid, 42);
    drop(fs);
    let freed: Vec<(Ino, u32)> = ours.iter().map(|&i| (i, 0)).collect();
    free_all(&img, &freed, 10);
    assert_repair_clean(&img, "inheritance");
}
