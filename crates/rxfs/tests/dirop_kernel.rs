//! Directory edits (`rxfs::dirop`) against the kernel and xfs_repair.
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

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirEntryExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;
use rxfs::bdev::FileDevice;
use rxfs::dirop;
use rxfs::format::dinode_edit as de;
use rxfs::fs::inode::Fork;
use rxfs::types::Ino;
use rxfs::xact::memtx::MemTx;
use rxfs::xact::MetaTx;
use rxfs::Filesystem;

fn kernel_ok() -> bool {
    if kernel_tests_disabled() {
        return false;
    }
    require_root();
    require_tools(&["mkfs.xfs", "xfs_repair", "mount"]);
    true
}

fn memtx(img: &Path) -> MemTx {
    let dev = Arc::new(FileDevice::open(img, false, false).unwrap());
    MemTx::new(dev).unwrap()
}

/// xorshift64.
struct Rng(u64);
impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
    fn name(&mut self, min: usize, max: usize) -> Vec<u8> {
        let len = min + self.below((max - min + 1) as u64) as usize;
        (0..len)
            .map(|_| match b'0' + self.below(75) as u8 {
                b'/' => b'-',
                c => c,
            })
            .collect()
    }
}

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

/// The form of a directory as our read path sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    Short,
    Block,
}

fn form_of(fs: &Filesystem, ino: u64) -> Form {
    match &fs.iget(Ino(ino)).unwrap().data {
        Fork::Local(_) => Form::Short,
        Fork::Extents { list, .. } => {
            assert_eq!(list.len(), 1, "one extent");
            Form::Block
        }
        Fork::Dev(_) => panic!("device fork on a directory"),
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
}

/// Run one round of hard-link additions and removals on directory `d`.
fn edit_round(im: &mut Image, d: &str, r: Round) -> Did {
    let mut rng = Rng::new(r.seed);
    let mut tx = memtx(&im.img);
    let (dino, names) = im.dirs.get_mut(d).unwrap();
    let dp = tx.ijoin(Ino(*dino)).unwrap();
    let (mut adds, mut removes, mut flips, mut leaf) = (0, 0, 0, 0);
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
            } else {
                rng.name(r.name_min, r.name_max)
            };
            if names.contains_key(&name) {
                assert!(matches!(
                    dirop::dir_add(&mut tx, dp, &name, Ino(im.files[0]), 1),
                    Err(rxfs::Error::Exists)
                ));
                continue;
            }
            let target = im.files[rng.below(im.files.len() as u64) as usize];
            let before = tx.inode(dp).to_vec();
            match dirop::dir_add(&mut tx, dp, &name, Ino(target), 1) {
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
            let ino = dirop::dir_remove(&mut tx, dp, name).unwrap();
            assert_eq!(ino.0, names[name]);
            assert!(matches!(
                dirop::dir_remove(&mut tx, dp, name),
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
    }
}

/// Shortform only: short names, few entries (never leaves the inode).
#[test]
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

/// Across the conversions: grow an empty and a small directory into block
/// form, shrink them back to shortform, then random edits around the size
/// where they flip (inside one transaction), 255-byte names included.
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
    let (mut flips, mut adds, mut leaf) = (0, 0, 0);
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
         {adds} additions, {leaf} refused (leaf form needed)"
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
fn dirop_crossing_1k_blocks_kernel() {
    let c = Cross {
        grow: (14, 18),
        random: (6, 16),
        name_max: 20,
        long_pct: 0,
    };
    crossing("cross1k", &["-b", "size=1024"], c);
}

/// What a model entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Dir,
}

/// Entries of a directory: name -> (inode, kind).
type Entries = BTreeMap<Vec<u8>, (u64, Kind)>;

/// The namespace model: every directory's entries, every inode's links.
struct Tree {
    /// Directory inode -> (path under the mount, entries).
    dirs: BTreeMap<u64, (PathBuf, Entries)>,
    nlink: BTreeMap<u64, u32>,
}

impl Tree {
    fn files(&self) -> Vec<(u64, Vec<u8>, u64)> {
        let mut v = Vec::new();
        for (d, (_, ents)) in &self.dirs {
            for (n, (i, k)) in ents {
                if *k == Kind::File {
                    v.push((*d, n.clone(), *i));
                }
            }
        }
        v
    }
    fn subdirs(&self) -> Vec<(u64, Vec<u8>, u64)> {
        let mut v = Vec::new();
        for (d, (_, ents)) in &self.dirs {
            for (n, (i, k)) in ents {
                if *k == Kind::Dir {
                    v.push((*d, n.clone(), *i));
                }
            }
        }
        v
    }
}

/// xfs_repair clean, and the kernel (and our read path) see the model.
fn verify_tree(img: &Path, mnt: &Path, t: &Tree) {
    let out = std::process::Command::new("xfs_repair")
        .args(["-n", img.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "xfs_repair -n: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    {
        let fs = open_ro(img);
        for (d, (path, ents)) in &t.dirs {
            let dir = fs.iget(Ino(*d)).unwrap();
            let mut got = BTreeMap::new();
            fs.readdir(&dir, 0, &mut |e| {
                if e.name != b"." && e.name != b".." {
                    got.insert(e.name.clone(), e.ino.0);
                }
                true
            })
            .unwrap();
            let want: BTreeMap<_, _> = ents.iter().map(|(n, (i, _))| (n.clone(), *i)).collect();
            assert_eq!(got, want, "{}: rxfs readdir", path.display());
        }
    }
    let m = KernelMount::new(img, mnt, "ro");
    for (d, (path, ents)) in &t.dirs {
        let p = mnt.join(path);
        let md = std::fs::metadata(&p).unwrap();
        assert_eq!(md.ino(), *d);
        let nsub = ents.values().filter(|(_, k)| *k == Kind::Dir).count();
        assert_eq!(md.nlink() as usize, 2 + nsub, "{}: nlink", path.display());
        let mut got = BTreeMap::new();
        for e in std::fs::read_dir(&p).unwrap() {
            let e = e.unwrap();
            got.insert(e.file_name().as_bytes().to_vec(), e.ino());
        }
        let want: BTreeMap<_, _> = ents.iter().map(|(n, (i, _))| (n.clone(), *i)).collect();
        assert_eq!(got, want, "{}: kernel readdir", path.display());
        for (n, (i, k)) in ents {
            let md = std::fs::symlink_metadata(p.join(std::ffi::OsStr::from_bytes(n))).unwrap();
            assert_eq!(md.ino(), *i);
            assert_eq!(md.is_dir(), *k == Kind::Dir);
            if *k == Kind::File {
                assert_eq!(md.nlink() as u32, t.nlink[i], "nlink of {i}");
            }
        }
    }
    m.umount();
}

fn ts(sec: i64) -> rxfs::format::inode::Timestamp {
    rxfs::format::inode::Timestamp { sec, nsec: 7 }
}

/// Unlink every file and remove every directory below directory `d`
/// (deepest first), one transaction per operation.
fn empty_tree(img: &Path, t: &mut Tree, d: u64, clock: &mut i64) {
    let names: Vec<(Vec<u8>, u64, Kind)> = t.dirs[&d]
        .1
        .iter()
        .map(|(n, (i, k))| (n.clone(), *i, *k))
        .collect();
    for (name, ino, kind) in names {
        if kind == Kind::Dir {
            empty_tree(img, t, ino, clock);
        }
        let mut tx = memtx(img);
        let dp = tx.ijoin(Ino(d)).unwrap();
        *clock += 1;
        if kind == Kind::File {
            assert_eq!(
                dirop::unlink(&mut tx, dp, &name, ts(*clock)).unwrap().0,
                ino
            );
            let n = t.nlink.get_mut(&ino).unwrap();
            *n -= 1;
            if *n == 0 {
                t.nlink.remove(&ino);
            }
        } else {
            assert_eq!(dirop::rmdir(&mut tx, dp, &name, ts(*clock)).unwrap().0, ino);
            t.dirs.remove(&ino);
        }
        tx.commit().unwrap();
        t.dirs.get_mut(&d).unwrap().1.remove(&name);
    }
}

/// create / mkdir / unlink / rmdir through `dirop::ns` in random sequences,
/// on a kernel-made tree with data files and a block directory, which ends
/// up emptied (converted back to shortform) and removed.
#[test]
fn dirop_namespace_ops_kernel() {
    if !kernel_ok() {
        return;
    }
    let scratch = Scratch::new("dirop-ns");
    let img = scratch.path("img");
    let mnt = scratch.path("mnt");
    mkfs(&img, 320 << 20, &[]);
    let mut t = Tree {
        dirs: BTreeMap::new(),
        nlink: BTreeMap::new(),
    };
    {
        let m = KernelMount::new(&img, &mnt, "");
        for (d, n, size) in [
            ("work", 0usize, 0usize),
            ("kdata", 12, 20000),
            ("kblk", 40, 1),
        ] {
            let dp = mnt.join(d);
            std::fs::create_dir(&dp).unwrap();
            let mut ents = BTreeMap::new();
            for i in 0..n {
                let name = format!("kernel-file-{i:05}");
                let p = dp.join(&name);
                std::fs::write(&p, pattern(i as u64, size * (i % 3 + 1))).unwrap();
                let ino = std::fs::metadata(&p).unwrap().ino();
                t.nlink.insert(ino, 1);
                ents.insert(name.into_bytes(), (ino, Kind::File));
            }
            let ino = std::fs::metadata(&dp).unwrap().ino();
            t.dirs.insert(ino, (PathBuf::from(d), ents));
        }
        let root = std::fs::metadata(&mnt).unwrap().ino();
        let subs: BTreeMap<_, _> = t
            .dirs
            .iter()
            .map(|(i, (p, _))| (p.as_os_str().as_bytes().to_vec(), (*i, Kind::Dir)))
            .collect();
        t.dirs.insert(root, (PathBuf::new(), subs));
        m.umount();
    }
    let (root, kblk, kdata) = {
        let by = |p: &str| {
            *t.dirs
                .iter()
                .find(|(_, (pp, _))| pp == Path::new(p))
                .unwrap()
                .0
        };
        (by(""), by("kblk"), by("kdata"))
    };
    {
        let fs = open_ro(&img);
        assert_eq!(form_of(&fs, kblk), Form::Block);
    }
    verify_tree(&img, &mnt, &t);
    let mut rng = Rng::new(4242);
    let (mut counts, mut errs) = ([0usize; 5], 0usize);
    let mut clock = 1_700_000_000;
    for round in 0..6 {
        for _ in 0..40 {
            // One transaction per operation, as the Filesystem wrappers do
            // (an inode freed in a transaction must not be reallocated in
            // the same one: ialloc reads the committed dinode).
            let mut tx = memtx(&img);
            clock += 1;
            let dirs: Vec<u64> = t.dirs.keys().copied().collect();
            let op = rng.below(if round == 5 { 2 } else { 10 });
            match op {
                // create (a file, a fifo, a socket or a char device)
                0..=3 if round < 5 => {
                    let d = dirs[rng.below(dirs.len() as u64) as usize];
                    let max = if rng.below(8) == 0 { 255 } else { 30 };
                    let name = rng.name(1, max);
                    let mode = [0o100644, 0o010600, 0o140755, 0o020600][rng.below(4) as usize];
                    let dp = tx.ijoin(Ino(d)).unwrap();
                    let args = dirop::NsCreate {
                        mode,
                        uid: 1000,
                        gid: 100,
                        rdev: (1 << 18) | 3,
                        time: ts(clock),
                    };
                    let r = dirop::create(&mut tx, dp, &name, &args);
                    if t.dirs[&d].1.contains_key(&name) {
                        assert!(matches!(r, Err(rxfs::Error::Exists)), "{r:?}");
                        errs += 1;
                        continue;
                    }
                    let (ino, _) = r.unwrap();
                    t.nlink.insert(ino.0, 1);
                    t.dirs
                        .get_mut(&d)
                        .unwrap()
                        .1
                        .insert(name, (ino.0, Kind::File));
                    counts[0] += 1;
                }
                // mkdir
                4 | 5 => {
                    let d = dirs[rng.below(dirs.len() as u64) as usize];
                    let name = rng.name(1, 20);
                    if t.dirs[&d].1.contains_key(&name) {
                        continue;
                    }
                    let dp = tx.ijoin(Ino(d)).unwrap();
                    let args = dirop::NsCreate {
                        mode: 0o040755,
                        uid: 0,
                        gid: 0,
                        rdev: 0,
                        time: ts(clock),
                    };
                    let (ino, _) = dirop::mkdir(&mut tx, dp, &name, &args).unwrap();
                    let path = t.dirs[&d].0.join(std::ffi::OsStr::from_bytes(&name));
                    t.dirs
                        .get_mut(&d)
                        .unwrap()
                        .1
                        .insert(name, (ino.0, Kind::Dir));
                    t.dirs.insert(ino.0, (path, BTreeMap::new()));
                    counts[1] += 1;
                }
                // rmdir (refused on a non-empty one)
                6 | 7 => {
                    let subs = t.subdirs();
                    if subs.is_empty() {
                        continue;
                    }
                    let (d, name, ino) = subs[rng.below(subs.len() as u64) as usize].clone();
                    let dp = tx.ijoin(Ino(d)).unwrap();
                    let r = dirop::rmdir(&mut tx, dp, &name, ts(clock));
                    if !t.dirs[&ino].1.is_empty() {
                        assert!(matches!(r, Err(rxfs::Error::NotEmpty)), "{r:?}");
                        errs += 1;
                        continue;
                    }
                    assert_eq!(r.unwrap().0, ino);
                    t.dirs.get_mut(&d).unwrap().1.remove(&name);
                    t.dirs.remove(&ino);
                    counts[2] += 1;
                }
                // unlink (in the last round: empty kblk and kdata)
                _ => {
                    let mut files = t.files();
                    if round == 5 {
                        files.retain(|(d, _, _)| {
                            let p = &t.dirs[d].0;
                            p == Path::new("kblk") || p == Path::new("kdata")
                        });
                    }
                    if files.is_empty() {
                        continue;
                    }
                    let (d, name, ino) = files[rng.below(files.len() as u64) as usize].clone();
                    let dp = tx.ijoin(Ino(d)).unwrap();
                    let subs = t.subdirs();
                    if rng.below(6) == 0 && !subs.is_empty() {
                        // A directory cannot be unlinked.
                        let (sd, sname, _) = subs[0].clone();
                        let sdp = tx.ijoin(Ino(sd)).unwrap();
                        let r = dirop::unlink(&mut tx, sdp, &sname, ts(clock));
                        assert!(matches!(r, Err(rxfs::Error::IsDir)), "{r:?}");
                        errs += 1;
                    }
                    let r = dirop::unlink(&mut tx, dp, &name, ts(clock)).unwrap();
                    assert_eq!(r.0, ino);
                    t.dirs.get_mut(&d).unwrap().1.remove(&name);
                    let n = t.nlink.get_mut(&ino).unwrap();
                    *n -= 1;
                    if *n == 0 {
                        t.nlink.remove(&ino);
                        counts[4] += 1;
                    }
                    counts[3] += 1;
                }
            }
            tx.commit().unwrap();
        }
        verify_tree(&img, &mnt, &t);
    }
    // Empty kblk (block form -> shortform) and kdata, then remove both.
    for d in [kblk, kdata] {
        empty_tree(&img, &mut t, d, &mut clock);
    }
    {
        let fs = open_ro(&img);
        assert_eq!(form_of(&fs, kblk), Form::Short, "emptied block dir");
    }
    verify_tree(&img, &mnt, &t);
    for (d, name) in [(kblk, "kblk"), (kdata, "kdata")] {
        let mut tx = memtx(&img);
        let dp = tx.ijoin(Ino(root)).unwrap();
        assert_eq!(
            dirop::rmdir(&mut tx, dp, name.as_bytes(), ts(clock))
                .unwrap()
                .0,
            d
        );
        tx.commit().unwrap();
        t.dirs.remove(&d);
        t.dirs.get_mut(&root).unwrap().1.remove(name.as_bytes());
        counts[2] += 1;
    }
    verify_tree(&img, &mnt, &t);
    eprintln!(
        "namespace: create {} mkdir {} rmdir {} unlink {} (freed {}), refused {errs}",
        counts[0], counts[1], counts[2], counts[3], counts[4]
    );
    assert!(counts.iter().all(|&c| c > 3), "{counts:?}");
}
