//! Directory edits (`rxfs::dir`) against the kernel and xfs_repair.
//!
//! The kernel builds an image with regular files and directories; through
//! an unlogged `MemTx` we then add entries (hard links to those files,
//! their link counts raised) and remove entries (never a file's last link)
//! in seeded random sequences checked against a model, in shortform and
//! block directories and across the conversions between them. After every
//! round: `xfs_repair -n` exits 0, our read path and the kernel (loop
//! mount, read-only) list exactly the model's names with the model's
//! inode numbers and link counts. A second group runs the namespace
//! operations (create/mkdir/unlink/rmdir) the same way.

mod common;
mod dirop_support;

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirEntryExt, MetadataExt};
use std::path::PathBuf;

use common::*;
use dirop_support::*;
use rxfs::dir;
use rxfs::format::dinode_edit as de;
use rxfs::types::Ino;
use rxfs::xact::MetaTx;

/// Entries of one directory (name -> inode) and link counts of files.
type Names = BTreeMap<Vec<u8>, u64>;

/// A kernel-made image: `/files/f0000..` (regular files) and the
/// directories asked for, each with `n` files the kernel made in it.
struct Image {
    _scratch: Scratch,
    img: PathBuf,
    mnt: PathBuf,
    files: Vec<u64>,
    nlink: BTreeMap<u64, u32>,
    /// Directory name -> (inode, entries).
    dirs: BTreeMap<String, (u64, Names)>,
}

fn build(tag: &str, nfiles: usize, dirs: &[(&str, usize, usize)]) -> Image {
    build_with(tag, &[], nfiles, dirs)
}

fn build_with(
    tag: &str,
    mkfs_opts: &[&str],
    nfiles: usize,
    dirs: &[(&str, usize, usize)],
) -> Image {
    let scratch = Scratch::new(&format!("dirop-{tag}"));
    let img = scratch.path("img");
    let mnt = scratch.path("mnt");
    mkfs(&img, 320 << 20, mkfs_opts);
    let m = KernelMount::new(&img, &mnt, "");
    std::fs::create_dir(mnt.join("files")).unwrap();
    let mut files = Vec::new();
    let mut nlink = BTreeMap::new();
    for i in 0..nfiles {
        let p = mnt.join(format!("files/f{i:04}"));
        std::fs::write(&p, format!("file {i}")).unwrap();
        let ino = std::fs::metadata(&p).unwrap().ino();
        files.push(ino);
        nlink.insert(ino, 1);
    }
    let mut out = BTreeMap::new();
    for &(d, n, namelen) in dirs {
        let dp = mnt.join(d);
        std::fs::create_dir(&dp).unwrap();
        let mut names = Names::new();
        for i in 0..n {
            let name = format!("k{i:0w$}", w = namelen.saturating_sub(1));
            let p = dp.join(&name);
            std::fs::write(&p, b"k").unwrap();
            let ino = std::fs::metadata(&p).unwrap().ino();
            nlink.insert(ino, 1);
            names.insert(name.into_bytes(), ino);
        }
        let ino = std::fs::metadata(&dp).unwrap().ino();
        out.insert(d.to_string(), (ino, names));
    }
    m.umount();
    Image {
        _scratch: scratch,
        img,
        mnt,
        files,
        nlink,
        dirs: out,
    }
}

/// xfs_repair -n must be clean; our read path and the kernel must list
/// exactly the model. Returns the forms of the directories.
fn verify(im: &Image) -> BTreeMap<String, Form> {
    let out = std::process::Command::new("xfs_repair")
        .args(["-n", im.img.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "xfs_repair -n: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut forms = BTreeMap::new();
    {
        let fs = open_ro(&im.img);
        for (d, (ino, names)) in &im.dirs {
            let dir = fs.iget(Ino(*ino)).unwrap();
            let mut got = Names::new();
            fs.readdir(&dir, 0, &mut |e| {
                if e.name != b"." && e.name != b".." {
                    got.insert(e.name.clone(), e.ino.0);
                }
                true
            })
            .unwrap();
            assert_eq!(&got, names, "{d}: rxfs readdir");
            for (n, i) in names {
                assert_eq!(fs.lookup(&dir, n).unwrap().0, *i, "{d}: lookup");
            }
            forms.insert(d.clone(), form_of(&fs, *ino));
        }
    }
    let m = KernelMount::new(&im.img, &im.mnt, "ro");
    for (d, (_, names)) in &im.dirs {
        let mut got = Names::new();
        for e in std::fs::read_dir(im.mnt.join(d)).unwrap() {
            let e = e.unwrap();
            got.insert(e.file_name().as_bytes().to_vec(), e.ino());
        }
        assert_eq!(&got, names, "{d}: kernel readdir");
        for (n, i) in names {
            let p = im.mnt.join(d).join(std::ffi::OsStr::from_bytes(n));
            let md = std::fs::symlink_metadata(&p).unwrap();
            assert_eq!(md.ino(), *i, "{d}: kernel lookup");
            if let Some(&want) = im.nlink.get(i) {
                assert_eq!(md.nlink() as u32, want, "{d}: nlink of {i}");
            }
        }
    }
    m.umount();
    forms
}

/// Bounds of one round of random edits on a directory.
#[derive(Clone, Copy)]
struct Round {
    seed: u64,
    ops: usize,
    /// Keep the entry count in this range.
    min: usize,
    max: usize,
    name_min: usize,
    name_max: usize,
    /// Percentage of 255-byte names.
    long_pct: u64,
}

/// What a round did.
#[derive(Debug, Default, Clone, Copy)]
struct Did {
    adds: usize,
    removes: usize,
    /// Changes of form seen inside the round.
    flips: usize,
    /// Additions refused because they need the leaf form.
    leaf: usize,
    /// Names tried that collide with an existing one's hash.
    collisions: usize,
}

/// Run one round of hard-link additions and removals on directory `d`.
fn edit_round(im: &mut Image, d: &str, r: Round) -> Did {
    let mut rng = Rng::new(r.seed);
    let mut tx = memtx(&im.img);
    let (dino, names) = im.dirs.get_mut(d).unwrap();
    let dp = tx.ijoin(Ino(*dino)).unwrap();
    let (mut adds, mut removes, mut flips, mut leaf, mut collisions) = (0, 0, 0, 0, 0);
    let mut fmt = de::format(tx.inode(dp));
    for _ in 0..r.ops {
        let f = de::format(tx.inode(dp));
        if f != fmt {
            flips += 1;
            fmt = f;
        }
        let add = names.len() < r.min || (names.len() < r.max && rng.below(2) == 0);
        if add {
            let name = if rng.below(100) < r.long_pct {
                rng.name(255, 255)
            } else if !names.is_empty() && rng.below(8) == 0 {
                // Same hash as an existing name.
                let k = names.keys().nth(rng.below(names.len() as u64) as usize);
                match collide(k.unwrap()) {
                    Some(c) => {
                        collisions += 1;
                        c
                    }
                    None => rng.name(r.name_min, r.name_max),
                }
            } else {
                rng.name(r.name_min, r.name_max)
            };
            if names.contains_key(&name) {
                assert!(matches!(
                    dir::dir_add(&mut tx, dp, &name, Ino(im.files[0]), 1),
                    Err(rxfs::Error::Exists)
                ));
                continue;
            }
            let target = im.files[rng.below(im.files.len() as u64) as usize];
            let before = tx.inode(dp).to_vec();
            match dir::dir_add(&mut tx, dp, &name, Ino(target), 1) {
                Ok(()) => {}
                // The kernel would convert to the leaf form here (e.g. a
                // directory back from block form whose entries keep offsets
                // at the end of the block): refused, nothing changed.
                Err(rxfs::Error::NotSupported(m)) if m.contains("leaf") => {
                    assert_eq!(before, tx.inode(dp), "{d}: refused add changed the inode");
                    leaf += 1;
                    continue;
                }
                Err(e) => panic!("{d}: add to {} entries: {e}", names.len()),
            }
            let ip = tx.ijoin(Ino(target)).unwrap();
            let n = de::nlink(tx.inode(ip)) + 1;
            de::set_nlink(tx.inode_mut(ip), n);
            *im.nlink.get_mut(&target).unwrap() += 1;
            names.insert(name, target);
            adds += 1;
        } else {
            // Remove an entry whose inode keeps another link.
            let cands: Vec<_> = names
                .iter()
                .filter(|(_, i)| im.nlink[*i] >= 2)
                .map(|(n, _)| n.clone())
                .collect();
            if cands.is_empty() {
                continue;
            }
            let name = &cands[rng.below(cands.len() as u64) as usize];
            let ino = dir::dir_remove(&mut tx, dp, name).unwrap();
            assert_eq!(ino.0, names[name]);
            assert!(matches!(
                dir::dir_remove(&mut tx, dp, name),
                Err(rxfs::Error::NotFound)
            ));
            let ip = tx.ijoin(ino).unwrap();
            let n = de::nlink(tx.inode(ip)) - 1;
            de::set_nlink(tx.inode_mut(ip), n);
            *im.nlink.get_mut(&ino.0).unwrap() -= 1;
            names.remove(name);
            removes += 1;
        }
    }
    tx.commit().unwrap();
    Did {
        adds,
        removes,
        flips,
        leaf,
        collisions,
    }
}

/// Shortform only: short names, few entries (never leaves the inode).
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn dirop_shortform_links_kernel() {
    if !kernel_ok() {
        return;
    }
    let mut im = build("sf", 12, &[("sf", 0, 4), ("sfk", 3, 6)]);
    let mut total = (0, 0);
    for seed in 1..=3 {
        for d in ["sf", "sfk"] {
            let Did {
                adds: a,
                removes: r,
                leaf,
                ..
            } = edit_round(
                &mut im,
                d,
                Round {
                    seed: seed * 10 + d.len() as u64,
                    ops: 40,
                    min: 0,
                    max: 8,
                    name_min: 1,
                    name_max: 10,
                    long_pct: 0,
                },
            );
            assert_eq!(leaf, 0, "no leaf form needed here");
            total = (total.0 + a, total.1 + r);
        }
        let forms = verify(&im);
        assert!(forms.values().all(|f| *f == Form::Short), "{forms:?}");
    }
    eprintln!("shortform: (adds, removes) = {total:?}");
    assert!(total.0 > 30 && total.1 > 20, "{total:?}");
}

/// Block form only: a kernel-made block directory that stays one (more
/// entries than the inode holds, fewer than the block holds).
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn dirop_block_links_kernel() {
    if !kernel_ok() {
        return;
    }
    let mut im = build("blk", 16, &[("blk", 40, 16)]);
    {
        let fs = open_ro(&im.img);
        assert_eq!(form_of(&fs, im.dirs["blk"].0), Form::Block);
    }
    let mut total = (0, 0);
    for seed in 1..=3 {
        let Did {
            adds: a,
            removes: r,
            leaf,
            ..
        } = edit_round(
            &mut im,
            "blk",
            Round {
                seed,
                ops: 120,
                min: 30,
                max: 60,
                name_min: 10,
                name_max: 24,
                long_pct: 0,
            },
        );
        assert_eq!(leaf, 0, "no leaf form needed here");
        total = (total.0 + a, total.1 + r);
        let forms = verify(&im);
        assert_eq!(forms["blk"], Form::Block);
    }
    eprintln!("block: (adds, removes) = {total:?}");
    assert!(total.0 > 60 && total.1 > 60, "{total:?}");
}

/// Sizes of the crossing test for one geometry.
struct Cross {
    /// Entries to grow to (block form) and the random range around the
    /// conversion point.
    grow: (usize, usize),
    random: (usize, usize),
    name_max: usize,
    long_pct: u64,
}

fn crossing(tag: &str, mkfs_opts: &[&str], c: Cross) {
    if !kernel_ok() {
        return;
    }
    let mut im = build_with(tag, mkfs_opts, 24, &[("x", 0, 4), ("y", 3, 5)]);
    let round = |seed, ops, min, max, long_pct| Round {
        seed,
        ops,
        min,
        max,
        name_min: 1,
        name_max: c.name_max,
        long_pct,
    };
    let (mut flips, mut adds, mut leaf, mut coll) = (0, 0, 0, 0);
    for d in ["x", "y"] {
        let did = edit_round(&mut im, d, round(1, 60, c.grow.0, c.grow.1, c.long_pct / 2));
        assert_eq!(did.leaf, 0);
    }
    let forms = verify(&im);
    assert!(forms.values().all(|f| *f == Form::Block), "{forms:?}");
    for d in ["x", "y"] {
        edit_round(&mut im, d, round(2, 80, 0, 2, 0));
    }
    let forms = verify(&im);
    assert!(forms.values().all(|f| *f == Form::Short), "{forms:?}");
    for seed in 3..=5 {
        for d in ["x", "y"] {
            let r = round(seed, 200, c.random.0, c.random.1, c.long_pct);
            let did = edit_round(&mut im, d, r);
            flips += did.flips;
            coll += did.collisions;
            adds += did.adds;
            leaf += did.leaf;
        }
        verify(&im);
    }
    for d in ["x", "y"] {
        edit_round(&mut im, d, round(9, 200, 0, 0, 0));
    }
    let forms = verify(&im);
    assert!(forms.values().all(|f| *f == Form::Short), "{forms:?}");
    eprintln!(
        "crossing {tag}: {flips} conversions inside the random rounds, \
         {adds} additions ({coll} hash collisions), {leaf} refused (leaf form needed)"
    );
    assert!(leaf * 10 <= adds, "too many additions refused");
    assert!(
        flips >= 4,
        "only {flips} conversions inside the random rounds"
    );
}

/// Across the conversions: grow an empty and a small directory into block
/// form, shrink them back to shortform, then random edits around the size
/// where they flip (inside one transaction), 255-byte names included.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn dirop_sf_block_crossing_kernel() {
    let c = Cross {
        grow: (30, 40),
        random: (6, 22),
        name_max: 40,
        long_pct: 10,
    };
    crossing("cross", &[], c);
}

/// The same with 8 KiB directory blocks (two filesystem blocks each).
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn dirop_crossing_8k_dirblocks_kernel() {
    let c = Cross {
        grow: (60, 80),
        random: (6, 22),
        name_max: 40,
        long_pct: 10,
    };
    crossing("cross8k", &["-n", "size=8192"], c);
}

/// The same with 1 KiB filesystem (and directory) blocks.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn dirop_crossing_1k_blocks_kernel() {
    let c = Cross {
        grow: (14, 18),
        random: (6, 16),
        name_max: 20,
        long_pct: 0,
    };
    crossing("cross1k", &["-b", "size=1024"], c);
}

/// The same with 64 KiB directory blocks (offsets and lengths near the
/// 16-bit limit of the format).
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn dirop_crossing_64k_dirblocks_kernel() {
    let c = Cross {
        grow: (60, 90),
        random: (6, 22),
        name_max: 40,
        long_pct: 20,
    };
    crossing("cross64k", &["-n", "size=65536"], c);
}
