//! BTREE-format data forks (bmbt) against the kernel oracle: growth to
//! depth 3 through the Filesystem API, random edits against a byte model,
//! kernel-made trees changed by rxfs, corruption detection, fork-boundary
//! moves, power cuts, ENOSPC. After each change: `xfs_repair -n` exit 0,
//! a kernel mount, and the contents the model says. (Attr forks:
//! `bmapop_attrfork_kernel.rs`.)

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use common::*;
use rxfs::bdev::{BlockDevice, FileDevice};
use rxfs::bmap;
use rxfs::format::dinode_edit as di;
use rxfs::format::inode::FMT_EXTENTS;
use rxfs::recover::memtx::MemTx;
use rxfs::types::WhichFork;
use rxfs::types::{FsBlock, Ino};
use rxfs::xact::MetaTx;

fn skip() -> bool {
    if kernel_tests_disabled() {
        return true;
    }
    require_root();
    require_tools(&["mkfs.xfs", "xfs_repair", "xfs_io"]);
    false
}

fn open_dev(img: &Path) -> Arc<dyn BlockDevice> {
    Arc::new(FileDevice::open(img, false, false).unwrap())
}

fn repair_ok(img: &Path) {
    let out = Command::new("xfs_repair")
        .args(["-n", img.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "xfs_repair -n: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `xfs_io -c 'bmap -a'` of `p`: (file sector start, sector end, disk
// ---------------------------------------------------------------------
// BTREE-format data forks through the Filesystem API.
use rand::{Rng, SeedableRng};
use rxfs::bmap::data::SetAttr;
use rxfs::Filesystem;

fn open_rw(img: &Path) -> Arc<Filesystem> {
    // No speculative preallocation: these tests count extents and holes.
    let opts = rxfs::MountOptions {
        read_only: false,
        allocsize: Some(0),
        ..Default::default()
    };
    Filesystem::open(open_dev(img), None, opts).unwrap()
}

/// (format, bmbt root level or 0, extent count) of inode `ino`'s data fork.
fn fork_shape(img: &Path, ino: Ino) -> (u8, u16, u64) {
    let mut tx = MemTx::new(open_dev(img)).unwrap();
    let ip = tx.ijoin(ino).unwrap();
    let d = tx.inode(ip);
    let lvl = if di::format(d) == rxfs::format::inode::FMT_BTREE {
        rxfs::format::bmbt::root_level(di::data_fork(d))
    } else {
        0
    };
    (di::format(d), lvl, di::nextents(d))
}

/// A file and the bytes it must hold.
struct Model {
    ino: Ino,
    name: String,
    bytes: Vec<u8>,
}

impl Model {
    fn write(&mut self, fs: &Filesystem, off: u64, d: &[u8]) {
        assert_eq!(fs.write(self.ino, off, d).unwrap(), d.len());
        let end = off as usize + d.len();
        if self.bytes.len() < end {
            self.bytes.resize(end, 0);
        }
        self.bytes[off as usize..end].copy_from_slice(d);
    }
    fn truncate(&mut self, fs: &Filesystem, size: u64) {
        let a = SetAttr {
            size: Some(size),
            ..Default::default()
        };
        fs.setattr(self.ino, &a).unwrap();
        self.bytes.resize(size as usize, 0);
    }
}

/// Unmounted image: repair clean, kernel reads the model's bytes.
fn check_image(s: &Scratch, img: &Path, files: &[&Model]) {
    repair_ok(img);
    let mnt = s.path("ro");
    let m = KernelMount::new(img, &mnt, "ro");
    for f in files {
        let got = std::fs::read(mnt.join(&f.name)).unwrap();
        assert_eq!(got.len(), f.bytes.len(), "{}: size", f.name);
        assert!(got == f.bytes, "{}: contents differ from the model", f.name);
    }
    m.umount();
}

/// Thousands of discontiguous extents written through a read-write
/// mount: the fork becomes a bmbt of depth 2, then 3 (1 KiB blocks);
/// seeded random writes and truncates against a byte model; then a
/// shrink back to EXTENTS format. Repair and the kernel check each stage.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn bmbt_grow_random_shrink() {
    if skip() {
        return;
    }
    let s = Scratch::new("bmbt-grow");
    let img = s.path("img");
    mkfs_with(&img, 128 << 20, &["-b", "size=1024"], FSTESTS_ENV);
    // The kernel makes the file with a big shortform xattr: the attr
    // fork takes most of the literal area, so the data fork's bmbt root
    // holds few pointers and the tree deepens after a few thousand
    // extents.
    let mnt = s.path("mnt");
    let m = KernelMount::new(&img, &mnt, "");
    std::fs::write(mnt.join("f"), b"").unwrap();
    set_xattr(&mnt.join("f"), "user.big", &pattern(5, 230));
    use std::os::unix::fs::MetadataExt;
    let ino = Ino(std::fs::metadata(mnt.join("f")).unwrap().ino());
    m.umount();
    let rootmax = {
        let mut tx = MemTx::new(open_dev(&img)).unwrap();
        let ip = tx.ijoin(ino).unwrap();
        rxfs::format::bmbt::root_maxrecs(di::data_fork(tx.inode(ip)).len())
    };
    assert!(rootmax <= 6, "data fork root holds {rootmax} pointers");
    let fs = open_rw(&img);
    let mut f = Model {
        ino,
        name: "f".into(),
        bytes: Vec::new(),
    };
    let bs = 1024u64;
    let mut rng = rand::rngs::StdRng::seed_from_u64(4);
    // One block every other block: no two extents merge.
    let mut i = 0u64;
    let mut stage = |f: &mut Model, fs: Arc<Filesystem>, upto: u64, want_level: u16| {
        while i < upto {
            let d: Vec<u8> = (0..bs).map(|_| rng.gen()).collect();
            f.write(&fs, 2 * i * bs, &d);
            i += 1;
        }
        assert_eq!(fs.stats().trans_resv_overruns, 0, "log reservation overrun");
        fs.unmount().unwrap();
        drop(fs);
        let shape = fork_shape(&img, f.ino);
        assert_eq!(
            shape,
            (3, want_level, upto),
            "fork shape after {upto} extents"
        );
        check_image(&s, &img, &[f]);
        open_rw(&img)
    };
    let fs = stage(&mut f, fs, 8, 1);
    let fs = stage(&mut f, fs, 40 * rootmax as u64, 2);
    let fs = stage(&mut f, fs, 1250 * rootmax as u64, 3);
    // Random writes (filling holes merges extents), truncates.
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    for _ in 0..300 {
        let len = f.bytes.len() as u64;
        match rng.gen_range(0..20) {
            0 => {
                let to = len - rng.gen_range(0..len / 20);
                f.truncate(&fs, to);
            }
            _ => {
                let off = rng.gen_range(0..len + 8 * bs);
                let n = rng.gen_range(1..3 * bs) as usize;
                let d: Vec<u8> = (0..n).map(|_| rng.gen()).collect();
                f.write(&fs, off, &d);
            }
        }
    }
    assert_eq!(fs.stats().trans_resv_overruns, 0, "log reservation overrun");
    fs.unmount().unwrap();
    drop(fs);
    let shape = fork_shape(&img, f.ino);
    assert_eq!(shape.0, 3, "still a btree: {shape:?}");
    check_image(&s, &img, &[&f]);
    // Shrink: cut to 200 blocks (a depth-1 tree), then to 4 blocks (at
    // most 2 extents): EXTENTS again.
    let fs = open_rw(&img);
    f.truncate(&fs, 200 * bs + 100);
    assert_eq!(fs.stats().trans_resv_overruns, 0, "log reservation overrun");
    fs.unmount().unwrap();
    drop(fs);
    let shape = fork_shape(&img, f.ino);
    assert_eq!((shape.0, shape.1), (3, 1), "one level: {shape:?}");
    check_image(&s, &img, &[&f]);
    let fs = open_rw(&img);
    f.truncate(&fs, 3 * bs + 100);
    assert_eq!(fs.stats().trans_resv_overruns, 0, "log reservation overrun");
    fs.unmount().unwrap();
    drop(fs);
    let shape = fork_shape(&img, f.ino);
    assert_eq!(shape.0, FMT_EXTENTS, "back to extents: {shape:?}");
    check_image(&s, &img, &[&f]);
}

/// A file the kernel wrote with ~1500 discontiguous extents (a bmbt of
/// depth 2 behind a small data fork) is changed by rxfs: seeded random
/// writes, punches, zero ranges, collapses, inserts and truncates
/// against a byte model; then repair, kernel contents, and rxfs's own
/// reads.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn bmbt_kernel_file_random_falloc() {
    use rxfs::fs::ops_falloc::*;
    if skip() {
        return;
    }
    let s = Scratch::new("bmbt-kfile");
    let img = s.path("img");
    mkfs_with(&img, 128 << 20, &["-b", "size=1024"], FSTESTS_ENV);
    let mnt = s.path("mnt");
    let m = KernelMount::new(&img, &mnt, "");
    let p = mnt.join("k");
    std::fs::write(&p, b"").unwrap();
    set_xattr(&p, "user.big", &pattern(5, 230));
    let bs = 1024u64;
    let mut f = Model {
        ino: Ino(0),
        name: "k".into(),
        bytes: Vec::new(),
    };
    {
        use std::os::unix::fs::FileExt;
        let fh = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        for i in 0..1500u64 {
            let d = pattern(1000 + i, bs as usize);
            fh.write_at(&d, 2 * i * bs).unwrap();
            let end = ((2 * i + 1) * bs) as usize;
            f.bytes.resize(end, 0);
            f.bytes[end - bs as usize..].copy_from_slice(&d);
        }
        fh.sync_all().unwrap();
    }
    use std::os::unix::fs::MetadataExt;
    f.ino = Ino(std::fs::metadata(&p).unwrap().ino());
    m.umount();
    let shape = fork_shape(&img, f.ino);
    assert!(shape.0 == 3 && shape.1 >= 2, "kernel fork shape {shape:?}");

    let fs = open_rw(&img);
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut counts = [0usize; 6];
    for _ in 0..150 {
        let len = f.bytes.len() as u64;
        let kind = rng.gen_range(0..20);
        match kind {
            0..=5 => {
                let off = rng.gen_range(0..len + 4 * bs);
                let n = rng.gen_range(1..4 * bs) as usize;
                let d: Vec<u8> = (0..n).map(|_| rng.gen()).collect();
                f.write(&fs, off, &d);
            }
            6..=10 => {
                let off = rng.gen_range(0..len);
                let n = rng.gen_range(1..40 * bs);
                fs.fallocate(f.ino, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, n)
                    .unwrap();
                let a = off as usize;
                let b = ((off + n) as usize).min(f.bytes.len());
                f.bytes[a..b].fill(0);
            }
            11..=13 => {
                let off = rng.gen_range(0..len);
                let n = rng.gen_range(1..40 * bs);
                fs.fallocate(f.ino, FALLOC_FL_ZERO_RANGE, off, n).unwrap();
                let end = (off + n) as usize;
                if f.bytes.len() < end {
                    f.bytes.resize(end, 0);
                }
                f.bytes[off as usize..end].fill(0);
            }
            14 | 15 => {
                let blocks = len / bs;
                let o = rng.gen_range(0..blocks - 50);
                let n = rng.gen_range(1..40);
                fs.fallocate(f.ino, FALLOC_FL_COLLAPSE_RANGE, o * bs, n * bs)
                    .unwrap();
                f.bytes.drain((o * bs) as usize..((o + n) * bs) as usize);
            }
            16 | 17 => {
                let o = rng.gen_range(0..len / bs);
                let n = rng.gen_range(1..40);
                fs.fallocate(f.ino, FALLOC_FL_INSERT_RANGE, o * bs, n * bs)
                    .unwrap();
                let z = vec![0u8; (n * bs) as usize];
                f.bytes.splice((o * bs) as usize..(o * bs) as usize, z);
            }
            _ => {
                let to = len - rng.gen_range(0..len / 30);
                f.truncate(&fs, to);
            }
        }
        counts[match kind {
            0..=5 => 0,
            6..=10 => 1,
            11..=13 => 2,
            14 | 15 => 3,
            16 | 17 => 4,
            _ => 5,
        }] += 1;
    }
    eprintln!("write/punch/zero/collapse/insert/truncate: {counts:?}");
    // rxfs reads the model back live.
    let ip = fs.iget(f.ino).unwrap();
    let mut got = vec![0u8; f.bytes.len() + 10];
    let n = fs.read_file(&ip, 0, &mut got).unwrap();
    assert_eq!(n, f.bytes.len());
    assert!(got[..n] == f.bytes[..], "rxfs read differs from the model");
    assert_eq!(fs.stats().trans_resv_overruns, 0, "log reservation overrun");
    fs.unmount().unwrap();
    drop(fs);
    let shape = fork_shape(&img, f.ino);
    eprintln!("final shape {shape:?}");
    assert_eq!(shape.0, 3, "still a btree {shape:?} ({counts:?})");
    check_image(&s, &img, &[&f]);
}

/// Damaged bmbt blocks (CRC recomputed, so only the structure checks can
/// catch them) make `bmap::load` return a corruption error, never a
/// panic or a wrong map; the undamaged image loads.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn bmbt_corruption_detected() {
    if skip() {
        return;
    }
    let s = Scratch::new("bmbt-corrupt");
    let img = s.path("img");
    mkfs_with(&img, 64 << 20, &[], FSTESTS_ENV);
    let mnt = s.path("mnt");
    let m = KernelMount::new(&img, &mnt, "");
    let p = mnt.join("f");
    {
        use std::os::unix::fs::FileExt;
        let fh = std::fs::File::create(&p).unwrap();
        for i in 0..400u64 {
            fh.write_at(&pattern(i, 4096), 2 * i * 4096).unwrap();
        }
        fh.sync_all().unwrap();
    }
    use std::os::unix::fs::MetadataExt;
    let ino = Ino(std::fs::metadata(&p).unwrap().ino());
    m.umount();
    let load = |img: &Path| {
        let mut tx = MemTx::new(open_dev(img)).unwrap();
        let ip = tx.ijoin(ino).unwrap();
        bmap::load(&mut tx, ip, WhichFork::Data).map(|(m, _)| m.exts.len())
    };
    let n0 = load(&img).unwrap();
    assert!(n0 >= 400, "{n0} extents");
    // The leaves: the root's pointers (a depth-1 tree).
    let (geo, leaves) = {
        let mut tx = MemTx::new(open_dev(&img)).unwrap();
        let ip = tx.ijoin(ino).unwrap();
        let fork = di::data_fork(tx.inode(ip)).to_vec();
        assert_eq!(rxfs::format::bmbt::root_level(&fork), 1);
        let n = rxfs::format::bmbt::root_numrecs(&fork) as usize;
        let max = rxfs::format::bmbt::root_maxrecs(fork.len());
        let ptrs: Vec<u64> = (0..n)
            .map(|i| u64::from_be_bytes(fork[4 + max * 8 + i * 8..][..8].try_into().unwrap()))
            .collect();
        (tx.geo().clone(), ptrs)
    };
    assert!(leaves.len() >= 2);
    let leaf = geo.fsb_to_daddr(FsBlock(leaves[0])).0;
    let leaf2 = geo.fsb_to_daddr(FsBlock(leaves[1])).0;
    type Edit = Box<dyn Fn(&mut [u8])>;
    let cases: Vec<(&str, u64, Edit)> = vec![
        ("owner", leaf, Box::new(|b| b[63] ^= 1)),
        ("level", leaf, Box::new(|b| b[5] = 1)),
        ("numrecs 0", leaf, Box::new(|b| b[6..8].fill(0))),
        (
            "numrecs too big",
            leaf,
            Box::new(|b| b[6..8].copy_from_slice(&999u16.to_be_bytes())),
        ),
        (
            "records out of order",
            leaf,
            Box::new(|b| {
                let (a, c) = b[72..104].split_at_mut(16);
                a.swap_with_slice(c);
            }),
        ),
        ("left sibling", leaf2, Box::new(|b| b[15] ^= 4)),
        (
            "right sibling",
            leaf,
            Box::new(|b| b[16..24].copy_from_slice(&[0xff; 8])),
        ),
        (
            "first key below the parent's",
            leaf2,
            Box::new(|b| {
                // Start offset of the first record -> 0 (l0 bits 62..9).
                let l0 = u64::from_be_bytes(b[72..80].try_into().unwrap());
                let l0 = l0 & !(((1u64 << 54) - 1) << 9);
                b[72..80].copy_from_slice(&l0.to_be_bytes());
            }),
        ),
    ];
    for (what, daddr, edit) in cases {
        let orig = patch(&img, daddr, 4096, 64, |b| edit(b));
        assert_corrupt(load(&img), what);
        restore(&img, daddr, &orig);
    }
    assert_eq!(load(&img).unwrap(), n0);
    repair_ok(&img);
}

/// Moving di_forkoff (what adding or removing an attr fork does) under a
/// BTREE data fork: the root is laid out again, grows a level when it no
/// longer fits, and shrinks back when the fork grows; the kernel then
/// uses the attr fork and reads the data.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn set_forkoff_relayouts_the_bmbt_root() {
    use rxfs::bmap::fork::set_forkoff;
    use rxfs::format::inode::{FMT_BTREE, FMT_LOCAL};
    if skip() {
        return;
    }
    let s = Scratch::new("bmbt-forkoff");
    let img = s.path("img");
    mkfs_with(&img, 64 << 20, &[], FSTESTS_ENV);
    let mnt = s.path("mnt");
    let m = KernelMount::new(&img, &mnt, "");
    let p = mnt.join("f");
    let mut model = Vec::new();
    {
        use std::os::unix::fs::FileExt;
        let fh = std::fs::File::create(&p).unwrap();
        for i in 0..300u64 {
            let d = pattern(i, 4096);
            fh.write_at(&d, 2 * i * 4096).unwrap();
            model.resize(((2 * i + 1) * 4096) as usize, 0);
            model[(2 * i * 4096) as usize..].copy_from_slice(&d);
        }
        fh.sync_all().unwrap();
    }
    use std::os::unix::fs::MetadataExt;
    let ino = Ino(std::fs::metadata(&p).unwrap().ino());
    m.umount();
    let level = |img: &Path| fork_shape(img, ino).1;
    let l0 = level(&img);
    assert!(l0 >= 1 && fork_shape(&img, ino).0 == FMT_BTREE);
    // A tiny data fork (24 bytes: one root pointer) and an empty
    // shortform attr fork.
    let dev = open_dev(&img);
    let mut tx = MemTx::new(dev.clone()).unwrap();
    let ip = tx.ijoin(ino).unwrap();
    set_forkoff(&mut tx, ip, 3).unwrap();
    let d = tx.inode_mut(ip);
    di::set_aformat(d, FMT_LOCAL);
    di::set_anextents(d, 0);
    let a = di::attr_fork_mut(d);
    a.fill(0);
    a[0..2].copy_from_slice(&4u16.to_be_bytes());
    tx.commit().unwrap();
    drop(dev);
    assert_eq!(level(&img), l0 + 1, "the root grew a level");
    repair_ok(&img);
    let m = KernelMount::new(&img, &mnt, "");
    set_xattr(&p, "user.k", b"v");
    assert!(std::fs::read(&p).unwrap() == model, "contents");
    m.umount();
    repair_ok(&img);
    // Remove the attr fork again: the root pulls its child back in.
    let dev = open_dev(&img);
    let mut tx = MemTx::new(dev.clone()).unwrap();
    let ip = tx.ijoin(ino).unwrap();
    set_forkoff(&mut tx, ip, 0).unwrap();
    let d = tx.inode_mut(ip);
    di::set_aformat(d, FMT_EXTENTS);
    di::set_anextents(d, 0);
    tx.commit().unwrap();
    drop(dev);
    assert_eq!(level(&img), l0, "the root shrank back");
    repair_ok(&img);
    let m = KernelMount::new(&img, &mnt, "ro");
    assert!(std::fs::read(&p).unwrap() == model, "contents");
    m.umount();
}

/// Power cuts while a bmbt grows (leaf splits, a new root level): after
/// the kernel's log recovery, `xfs_repair -n` is clean and the file
/// (written in increasing offsets, one block every other block) is a
/// prefix of what was written, at least as long as the last fsync made
/// durable.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn bmbt_growth_survives_power_cuts() {
    use rxfs::bdev::{for_each_crash_image, sample_points, CrashDevice, CrashMode};
    if skip() {
        return;
    }
    let s = Scratch::new("bmbt-crash");
    let img = s.path("img");
    mkfs_with(&img, 48 << 20, &["-b", "size=1024"], FSTESTS_ENV);
    let mnt = s.path("mnt");
    let m = KernelMount::new(&img, &mnt, "");
    let p = mnt.join("f");
    std::fs::write(&p, b"").unwrap();
    set_xattr(&p, "user.big", &pattern(5, 230));
    use std::os::unix::fs::MetadataExt;
    let ino = Ino(std::fs::metadata(&p).unwrap().ino());
    m.umount();

    let dev = Arc::new(CrashDevice::new(std::fs::read(&img).unwrap(), 1 << 30));
    let opts = rxfs::MountOptions {
        read_only: false,
        ..Default::default()
    };
    let fs = Filesystem::open(dev.clone() as Arc<dyn BlockDevice>, None, opts).unwrap();
    let bs = 1024u64;
    let mut model = Vec::new();
    let mut synced: Vec<(usize, usize)> = Vec::new();
    for i in 0..600u64 {
        let d = pattern(i + 1, bs as usize);
        assert_eq!(fs.write(ino, 2 * i * bs, &d).unwrap(), d.len());
        model.resize((2 * i * bs) as usize, 0);
        model.extend_from_slice(&d);
        if i % 40 == 39 {
            fs.fsync(ino, false).unwrap();
            synced.push((dev.event_count(), model.len()));
        }
    }
    let ip = fs.iget(ino).unwrap();
    assert!(matches!(
        ip.data,
        rxfs::inode::Fork::Extents { btree: true, .. }
    ));
    fs.abandon();
    drop(fs);

    let points = sample_points(&dev.crash_points(), 6, 3);
    let crash = s.path("crash");
    let cm = s.path("cmnt");
    let mut checked = 0;
    for_each_crash_image(
        &dev,
        &points,
        &[CrashMode::Subset, CrashMode::Torn],
        5,
        |ci| {
            std::fs::write(&crash, ci.to_vec()).unwrap();
            let m = KernelMount::new(&crash, &cm, "");
            let got = std::fs::read(cm.join("f")).unwrap();
            m.umount();
            let durable = synced
                .iter()
                .filter(|(at, _)| *at <= ci.point)
                .map(|(_, n)| *n)
                .max()
                .unwrap_or(0);
            assert!(
                got.len() >= durable && got.len() <= model.len(),
                "{ci}: {} bytes, fsync made {durable} durable",
                got.len()
            );
            assert!(got[..] == model[..got.len()], "{ci}: not a prefix");
            repair_ok(&crash);
            // rxfs's own recovery (read-write open) of the same image.
            std::fs::write(&crash, ci.to_vec()).unwrap();
            let fs = open_rw(&crash);
            let ip = fs.iget(ino).unwrap();
            let mut mine = vec![0u8; model.len() + 1];
            let n = fs.read_file(&ip, 0, &mut mine).unwrap();
            assert!(
                n >= durable && mine[..n] == model[..n],
                "{ci}: rxfs recovery"
            );
            fs.unmount().unwrap();
            drop(fs);
            repair_ok(&crash);
            checked += 1;
        },
    )
    .unwrap();
    assert_eq!(checked, points.len() * 2);
}

/// A full filesystem: writes into the holes of a bmbt-format file, each
/// after one block was freed elsewhere, sometimes cannot get the block a
/// leaf split needs. Every write either completes or fails with ENOSPC
/// changing nothing; the image stays consistent and holds the model.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn bmbt_enospc_is_clean() {
    use rxfs::fs::ops_falloc::*;
    if skip() {
        return;
    }
    let s = Scratch::new("bmbt-enospc");
    let img = s.path("img");
    mkfs_with(&img, 32 << 20, &["-b", "size=1024"], FSTESTS_ENV);
    let mnt = s.path("mnt");
    let m = KernelMount::new(&img, &mnt, "");
    std::fs::write(mnt.join("f"), b"").unwrap();
    set_xattr(&mnt.join("f"), "user.big", &pattern(5, 230));
    std::fs::write(mnt.join("filler"), b"").unwrap();
    use std::os::unix::fs::MetadataExt;
    let ino = Ino(std::fs::metadata(mnt.join("f")).unwrap().ino());
    let filler = Ino(std::fs::metadata(mnt.join("filler")).unwrap().ino());
    m.umount();
    let bs = 1024u64;
    let fs = open_rw(&img);
    let mut f = Model {
        ino,
        name: "f".into(),
        bytes: Vec::new(),
    };
    for i in 0..300u64 {
        f.write(&fs, 4 * i * bs, &pattern(i, bs as usize));
    }
    // Fill the rest of the filesystem.
    let r = fs.fallocate(filler, 0, 0, 64 << 20);
    assert!(matches!(r, Err(rxfs::Error::NoSpace)), "{r:?}");
    let fsize = fs.iget(filler).unwrap().core.size;
    assert_eq!(fsize, 0);
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let (mut ok, mut full) = (0, 0);
    eprintln!("after fill: {:?}", fs.statfs().unwrap());
    for k in 0..300u64 {
        // Free one block of the filler (its unwritten preallocation).
        fs.fallocate(
            filler,
            FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
            k * 7 * bs,
            bs,
        )
        .unwrap_or_else(|e| panic!("punch {k}: {e}; {:?}", fs.statfs()));
        let i = rng.gen_range(0..300u64);
        let off = (4 * i + 1 + rng.gen_range(0..3)) * bs;
        let d = pattern(1000 + k, bs as usize);
        match fs.write(ino, off, &d) {
            Ok(n) => {
                assert_eq!(n, d.len());
                let end = off as usize + d.len();
                f.bytes[off as usize..end].copy_from_slice(&d);
                ok += 1;
            }
            Err(rxfs::Error::NoSpace) => full += 1,
            Err(e) => panic!("write: {e}"),
        }
    }
    eprintln!("{ok} writes, {full} ENOSPC");
    assert!(ok > 0 && full > 0, "{ok} writes, {full} ENOSPC");
    assert_eq!(fs.stats().trans_resv_overruns, 0, "log reservation overrun");
    fs.unmount().unwrap();
    drop(fs);
    assert_eq!(fork_shape(&img, ino).0, 3);
    check_image(&s, &img, &[&f]);
}
