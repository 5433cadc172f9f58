//! Realtime files written by rxfs (issue 17), with xfsprogs as the oracle
//! (this kernel has no CONFIG_XFS_RT and cannot mount them): mkfs.xfs
//! makes an image with a realtime device, rxfs creates realtime files in
//! an RTINHERIT directory and writes, overwrites, truncates, punches,
//! preallocates and removes them; then `xfs_repair -n -r` must be clean,
//! rxfs's own bitmap/summary/sb_frextents check and `rxfs check` (realtime
//! extents against the bitmap included) must be clean, and every
//! file must read back as a model of it says, after a clean unmount and
//! after a crash (the log left dirty) recovered by rxfs.
//!
//! Each workload runs under the three summary modes (`rtsumcache=`): the
//! search is the same, only how the summary is read differs, so the
//! three bitmaps must come out identical.
//!
//! Needs mkfs.xfs and xfs_repair (not root). Fails when they are missing,
//! unless RXFS_SKIP_KERNEL_TESTS=1.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;
use rxfs::bmap::data::SetAttr;
use rxfs::cache::rtsum::RtSumMode;
use rxfs::cred::Cred;
use rxfs::format::xflags::{XFLAG_REALTIME, XFLAG_RTINHERIT};
use rxfs::fs::ops_ns::CreateArgs;
use rxfs::types::Ino;
use rxfs::{Filesystem, MountOptions};

const KEEP_SIZE: i32 = 0x01;
const PUNCH_HOLE: i32 = 0x02;
const ZERO_RANGE: i32 = 0x10;

/// Make a data image and a realtime device; returns (image, rt device).
fn make(s: &Scratch, tag: &str, block: u32, rext: u32) -> (PathBuf, PathBuf) {
    let img = s.path(&format!("{tag}.img"));
    let rt = s.path(&format!("{tag}.rt"));
    let f = std::fs::File::create(&rt).unwrap();
    f.set_len(64 << 20).unwrap();
    drop(f);
    let b = format!("size={block}");
    let r = format!("rtdev={},extsize={rext}", rt.display());
    mkfs_with(&img, 256 << 20, &["-b", &b, "-r", &r], FSTESTS_ENV);
    (img, rt)
}

fn open(img: &Path, rt: &Path, mode: RtSumMode) -> Arc<Filesystem> {
    let o = MountOptions {
        rtsumcache: mode,
        ..Default::default()
    };
    Filesystem::open_path(img, Some(rt), o).unwrap()
}

fn repair_clean(img: &Path, rt: &Path) {
    let out = run_output(
        "xfs_repair",
        &["-n", "-r", rt.to_str().unwrap(), img.to_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "xfs_repair -n -r: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn args(mode: u32) -> CreateArgs {
    CreateArgs::root(mode)
}

/// Files: name -> expected bytes.
type Model = BTreeMap<String, Vec<u8>>;

fn write(fs: &Filesystem, ino: Ino, m: &mut Vec<u8>, off: u64, data: &[u8]) {
    assert_eq!(fs.write(ino, off, data).unwrap(), data.len());
    let end = off as usize + data.len();
    if m.len() < end {
        m.resize(end, 0);
    }
    m[off as usize..end].copy_from_slice(data);
}

/// The workload: returns the model and the rt directory's inode.
fn workload(fs: &Filesystem, rext_bytes: u64) -> (Model, Ino) {
    let root = fs.root_ino();
    let dir = fs.mkdir(root, b"rt", &args(0o40755)).unwrap().ino;
    let mut x = fs.get_fsxattr(dir).unwrap();
    x.xflags |= XFLAG_RTINHERIT;
    fs.set_fsxattr(dir, &x, true, &Cred::root()).unwrap();
    let mut model = Model::new();
    let mut inos = BTreeMap::new();
    for (i, name) in ["seq", "sparse", "odd", "gone", "punched", "falloc"]
        .iter()
        .enumerate()
    {
        let ip = fs.create(dir, name.as_bytes(), &args(0o100644)).unwrap();
        assert!(ip.is_realtime(), "{name}: RTINHERIT makes realtime files");
        assert_ne!(fs.get_fsxattr(ip.ino).unwrap().xflags & XFLAG_REALTIME, 0);
        inos.insert(name.to_string(), ip.ino);
        model.insert(name.to_string(), Vec::new());
        // A non-realtime neighbour, to interleave data-device allocations.
        let n = format!("plain{i}");
        let p = fs.create(root, n.as_bytes(), &args(0o100644)).unwrap();
        assert!(!p.is_realtime());
        let mut m = Vec::new();
        write(fs, p.ino, &mut m, 0, &pattern(i as u64 + 100, 20_000));
        model.insert(n, m);
    }
    let m = |model: &mut Model, n: &str| std::mem::take(model.get_mut(n).unwrap());
    // Sequential, in pieces of odd sizes.
    let (ino, mut b) = (inos["seq"], m(&mut model, "seq"));
    let mut off = 0;
    for k in 0..40u64 {
        let d = pattern(k, 7_777 + (k as usize * 977) % 20_000);
        write(fs, ino, &mut b, off, &d);
        off += d.len() as u64;
    }
    // Overwrite in the middle.
    write(fs, ino, &mut b, 123_457, &pattern(999, 50_000));
    model.insert("seq".into(), b);
    // Sparse: far apart, unaligned.
    let (ino, mut b) = (inos["sparse"], m(&mut model, "sparse"));
    for (k, o) in [5_000_000u64, 3, 1_234_567, 9_999_999, 700_001]
        .iter()
        .enumerate()
    {
        write(
            fs,
            ino,
            &mut b,
            *o,
            &pattern(k as u64 + 7, 3_000 + k * 5_000),
        );
    }
    model.insert("sparse".into(), b);
    // Grow, truncate down to an odd size, grow again past a partial rt
    // extent (whose kept blocks must read as zeros).
    let (ino, mut b) = (inos["odd"], m(&mut model, "odd"));
    write(fs, ino, &mut b, 0, &pattern(31, 300_000));
    let cut = 70_001u64;
    fs.setattr(
        ino,
        &SetAttr {
            size: Some(cut),
            ..Default::default()
        },
    )
    .unwrap();
    b.truncate(cut as usize);
    write(
        fs,
        ino,
        &mut b,
        cut + rext_bytes / 2 + 5,
        &pattern(32, 1_000),
    );
    model.insert("odd".into(), b);
    // Written, then removed.
    let ino = inos["gone"];
    let mut b = m(&mut model, "gone");
    write(fs, ino, &mut b, 0, &pattern(41, 2_000_000));
    fs.unlink(dir, b"gone").unwrap();
    model.remove("gone");
    // Punch holes (aligned and not) and zero a range.
    let (ino, mut b) = (inos["punched"], m(&mut model, "punched"));
    write(fs, ino, &mut b, 0, &pattern(51, 1_500_000));
    for (o, l) in [
        (100_000u64, 300_000u64),
        (777_777, 12_345),
        (1_200_000, 65_536),
    ] {
        fs.fallocate(ino, PUNCH_HOLE | KEEP_SIZE, o, l).unwrap();
        b[o as usize..(o + l) as usize].fill(0);
    }
    fs.fallocate(ino, ZERO_RANGE | KEEP_SIZE, 50_000, 20_000)
        .unwrap();
    b[50_000..70_000].fill(0);
    model.insert("punched".into(), b);
    // Preallocated (unwritten, reads as zeros), then written in part.
    let (ino, mut b) = (inos["falloc"], m(&mut model, "falloc"));
    fs.fallocate(ino, 0, 0, 1_000_000).unwrap();
    b.resize(1_000_000, 0);
    write(fs, ino, &mut b, 333_333, &pattern(61, 100_000));
    model.insert("falloc".into(), b);
    (model, dir)
}

fn check_model(fs: &Filesystem, dir: Ino, model: &Model) {
    let root = fs.iget(fs.root_ino()).unwrap();
    let d = fs.iget(dir).unwrap();
    for (name, want) in model {
        let parent = if name.starts_with("plain") { &root } else { &d };
        let ino = fs.lookup(parent, name.as_bytes()).unwrap();
        let ip = fs.iget(ino).unwrap();
        assert_eq!(ip.core.size, want.len() as u64, "{name}: size");
        assert_eq!(ip.is_realtime(), !name.starts_with("plain"), "{name}");
        let mut got = vec![0xa5u8; want.len()];
        let n = fs.read_file(&ip, 0, &mut got).unwrap();
        assert_eq!(n, want.len(), "{name}: short read");
        if got != *want {
            let at = got.iter().zip(want).position(|(a, b)| a != b).unwrap();
            panic!("{name}: differs at byte {at}");
        }
    }
    assert!(fs.lookup(&d, b"gone").is_err());
}

/// statfs per inode on the read-write mount, as XFS's: the rtinherit
/// directory and its realtime files report the realtime section with the
/// in-core free count (the superblock's is written only at unmount), the
/// root (no rtinherit) the data device; FSCOUNTS the same free count.
fn statfs_reports_the_section(fs: &Filesystem, dir: Ino, free: u64) {
    let (rblocks, rextsize) = (fs.sb().rblocks, fs.sb().rextsize as u64);
    let d = fs.iget(dir).unwrap();
    let file = fs.lookup(&d, b"seq").unwrap();
    for ino in [dir, file] {
        let st = fs.statfs_of(ino).unwrap();
        assert_eq!(
            (st.blocks, st.bfree, st.bavail),
            (rblocks, free * rextsize, free * rextsize)
        );
    }
    let root = fs.statfs().unwrap();
    assert_eq!(root, fs.statfs_of(fs.root_ino()).unwrap());
    assert_ne!(root.blocks, rblocks, "the root reports the data device");
    assert_eq!(fs.fs_counts().unwrap().freertx, free);
}

fn bitmap(img: &Path, rt: &Path) -> Vec<u8> {
    let fs = open_ro_rt(img, rt);
    let bmp = rxfs::rt::bitmap_inode(&*fs).unwrap();
    let l = rxfs::rt::layout(&*fs);
    (0..l.rbmblocks as u64)
        .flat_map(|b| rxfs::rt::bitmap_block(&*fs, &bmp, b).unwrap())
        .collect()
}

fn run_geometry(tag: &str, block: u32, rext: u32) {
    if kernel_tests_disabled() {
        return;
    }
    require_tools(&["mkfs.xfs", "xfs_repair"]);
    let s = Scratch::new(&format!("rtw-{tag}"));
    let mut maps = Vec::new();
    for mode in [RtSumMode::None, RtSumMode::MinLevel, RtSumMode::Memory] {
        let t = format!("{tag}-{mode:?}");
        let (img, rt) = make(&s, &t, block, rext);
        let fs = open(&img, &rt, mode);
        let free0 = fs.rw().unwrap().counters().frextents;
        let (model, dir) = workload(&fs, rext as u64);
        let st = fs.stats();
        assert!(st.rt.allocs > 0 && st.rt.frees > 0, "{t}: {:?}", st.rt);
        match mode {
            RtSumMode::Memory => assert_eq!(st.rt.summary_reads, 0, "{t}: {:?}", st.rt),
            _ => assert!(st.rt.summary_reads > 0, "{t}: {:?}", st.rt),
        }
        let free1 = fs.rw().unwrap().counters().frextents;
        assert!(free1 < free0, "{t}: frextents {free0} -> {free1}");
        statfs_reports_the_section(&fs, dir, free1 as u64);
        check_model(&fs, dir, &model);
        fs.unmount().unwrap();
        drop(fs);
        repair_clean(&img, &rt);
        let ro = open_ro_rt(&img, &rt);
        let c = rxfs::rt::check(&*ro).unwrap();
        assert!(c.is_clean(), "{t}: {c:?}");
        let r = rxfs::check::check(&ro, &mut |_, _, _| {});
        assert!(r.clean(), "{t}: rxfs check: {:?}", r.findings);
        assert_eq!(c.free_extents, free1 as u64, "{t}: in-core frextents");
        check_model(&ro, dir, &model);
        drop(ro);
        maps.push(bitmap(&img, &rt));
    }
    assert!(
        maps.windows(2).all(|w| w[0] == w[1]),
        "{tag}: modes allocated differently"
    );
}

#[test]
fn rt_files_4k_blocks_rextsize_1() {
    run_geometry("b4k-r1", 4096, 4096);
}

#[test]
fn rt_files_1k_blocks_rextsize_16() {
    run_geometry("b1k-r16", 1024, 16384);
}

/// A crash (the daemon gone, the log as it was) after fsync: rxfs
/// recovers, recounts sb_frextents from the bitmap, and the image is
/// clean with every fsync'd byte.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn rt_crash_recovers() {
    require_tools(&["mkfs.xfs", "xfs_repair"]);
    let s = Scratch::new("rtw-crash");
    let (img, rt) = make(&s, "c", 4096, 8192);
    let fs = open(&img, &rt, RtSumMode::Memory);
    let (model, dir) = workload(&fs, 8192);
    for name in model.keys() {
        let parent = if name.starts_with("plain") {
            fs.iget(fs.root_ino()).unwrap()
        } else {
            fs.iget(dir).unwrap()
        };
        let ino = fs.lookup(&parent, name.as_bytes()).unwrap();
        fs.fsync(ino, false).unwrap();
    }
    fs.abandon();
    drop(fs);
    let fs = open(&img, &rt, RtSumMode::MinLevel);
    assert!(fs.recovery_stats().is_some(), "the log was dirty");
    check_model(&fs, dir, &model);
    let free = fs.rw().unwrap().counters().frextents;
    fs.unmount().unwrap();
    drop(fs);
    repair_clean(&img, &rt);
    let ro = open_ro_rt(&img, &rt);
    let c = rxfs::rt::check(&*ro).unwrap();
    assert!(c.is_clean(), "{c:?}");
    let r = rxfs::check::check(&ro, &mut |_, _, _| {});
    assert!(r.clean(), "rxfs check: {:?}", r.findings);
    assert_eq!(c.free_extents, free as u64);
}

/// Filling the realtime device: writes stop with ENOSPC (NoSpace) while
/// the data device still has room, the free count reaches 0, and space
/// given back by an unlink is written again; xfs_repair -n -r clean.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn rt_enospc() {
    require_tools(&["mkfs.xfs", "xfs_repair"]);
    let s = Scratch::new("rtw-enospc");
    let (img, rt) = make(&s, "e", 4096, 16384);
    let fs = open(&img, &rt, RtSumMode::Memory);
    let root = fs.root_ino();
    let mut x = fs.get_fsxattr(root).unwrap();
    x.xflags |= XFLAG_RTINHERIT;
    fs.set_fsxattr(root, &x, true, &Cred::root()).unwrap();
    let chunk = pattern(5, 1 << 20);
    let mut written = Vec::new();
    let mut full = false;
    'files: for i in 0..100 {
        let name = format!("big{i}");
        let ino = fs
            .create(root, name.as_bytes(), &args(0o100644))
            .unwrap()
            .ino;
        let mut off = 0u64;
        loop {
            match fs.write(ino, off, &chunk) {
                Ok(n) if n == chunk.len() => off += n as u64,
                Ok(n) => {
                    off += n as u64;
                    written.push((name, off));
                    full = true;
                    break 'files;
                }
                Err(rxfs::Error::NoSpace) => {
                    written.push((name, off));
                    full = true;
                    break 'files;
                }
                Err(e) => panic!("write: {e}"),
            }
            if off >= 16 << 20 {
                written.push((name, off));
                break;
            }
        }
    }
    assert!(full, "the 64 MiB realtime device never filled");
    let free = fs.rw().unwrap().counters().frextents;
    assert_eq!(free, 0, "full device, frextents {free}");
    // The data device still takes data.
    let plain = fs.create(root, b"plain", &args(0o100644)).unwrap().ino;
    let mut x = fs.get_fsxattr(plain).unwrap();
    x.xflags &= !XFLAG_REALTIME;
    fs.set_fsxattr(plain, &x, true, &Cred::root()).unwrap();
    assert_eq!(fs.write(plain, 0, &chunk).unwrap(), chunk.len());
    // Space comes back.
    let (first, _) = written.remove(0);
    fs.unlink(root, first.as_bytes()).unwrap();
    let again = fs.create(root, b"again", &args(0o100644)).unwrap().ino;
    assert_eq!(fs.write(again, 0, &chunk).unwrap(), chunk.len());
    fs.unmount().unwrap();
    drop(fs);
    repair_clean(&img, &rt);
    let ro = open_ro_rt(&img, &rt);
    assert!(rxfs::rt::check(&*ro).unwrap().is_clean());
    let r = ro.iget(ro.root_ino()).unwrap();
    for (name, size) in written {
        let ip = ro.iget(ro.lookup(&r, name.as_bytes()).unwrap()).unwrap();
        assert_eq!(ip.core.size, size, "{name}");
        assert!(ip.is_realtime());
    }
}

/// A crash with realtime files unlinked while open (and a realtime
/// O_TMPFILE) on the AGI unlinked lists: rxfs's recovery frees their
/// realtime extents (whole rt extents back in the bitmap and summary,
/// sb_frextents recounted), in the read-write mount and in the
/// read-only in-memory replay alike.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn rt_crash_with_open_unlinked_files_recovers() {
    require_tools(&["mkfs.xfs", "xfs_repair"]);
    let s = Scratch::new("rtw-iunlink");
    let (img, rt) = make(&s, "u", 4096, 16384);
    let fs = open(&img, &rt, RtSumMode::Memory);
    let free0 = fs.rw().unwrap().counters().frextents;
    let dir = fs.mkdir(fs.root_ino(), b"rt", &args(0o40755)).unwrap().ino;
    let mut x = fs.get_fsxattr(dir).unwrap();
    x.xflags |= XFLAG_RTINHERIT;
    fs.set_fsxattr(dir, &x, true, &Cred::root()).unwrap();
    let keep = fs.create(dir, b"keep", &args(0o100644)).unwrap().ino;
    fs.write(keep, 0, &pattern(1, 100_000)).unwrap();
    for i in 0..8u64 {
        let name = format!("o{i}");
        let ip = fs.create(dir, name.as_bytes(), &args(0o100644)).unwrap();
        assert!(ip.is_realtime());
        // Sparse and unaligned, some past one extent record.
        for k in 0..(1 + i % 3) {
            let off = k * 1_000_003 + i * 7;
            fs.write(ip.ino, off, &pattern(10 + i, 50_000 + i as usize))
                .unwrap();
        }
        fs.inode_ref(ip.ino);
        fs.unlink(dir, name.as_bytes()).unwrap();
    }
    let t = fs.tmpfile(dir, &args(0o100600)).unwrap();
    assert!(t.is_realtime());
    fs.write(t.ino, 0, &pattern(99, 300_000)).unwrap();
    fs.log_force().unwrap();
    assert!(fs.rw().unwrap().counters().frextents < free0);
    fs.abandon();
    drop(fs);
    // The read-only view replays and frees them in memory.
    let ro = open_ro_rt(&img, &rt);
    let c = rxfs::rt::check(&*ro).unwrap();
    assert!(c.is_clean(), "read-only replay: {c:?}");
    drop(ro);
    let fs = open(&img, &rt, RtSumMode::MinLevel);
    let st = fs.recovery_stats().cloned().unwrap();
    assert_eq!(st.unlinked_inodes_freed, 9, "{st}");
    let free = fs.rw().unwrap().counters().frextents;
    fs.unmount().unwrap();
    drop(fs);
    repair_clean(&img, &rt);
    let ro = open_ro_rt(&img, &rt);
    let c = rxfs::rt::check(&*ro).unwrap();
    assert!(c.is_clean(), "{c:?}");
    assert_eq!(c.free_extents, free as u64);
    // Only "keep" (100,000 bytes: 7 rt extents of 16 KiB) holds rt space.
    assert_eq!(c.free_extents, free0 as u64 - 7);
    let d = ro.iget(dir).unwrap();
    let ip = ro.iget(ro.lookup(&d, b"keep").unwrap()).unwrap();
    let mut buf = vec![0u8; 100_000];
    ro.read_file(&ip, 0, &mut buf).unwrap();
    assert!(buf == pattern(1, 100_000));
}

/// Threads writing, truncating, renaming over and removing realtime files
/// at once (the realtime lock against the AGIs of unlinks and the AGFs of
/// bmbt splits: a lock-order mistake hangs here), then xfs_repair -n -r
/// clean and the survivors read back.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn rt_concurrent_writers_and_removers() {
    require_tools(&["mkfs.xfs", "xfs_repair"]);
    let s = Scratch::new("rtw-conc");
    let (img, rt) = make(&s, "c", 4096, 4096);
    let fs = open(&img, &rt, RtSumMode::Memory);
    let root = fs.root_ino();
    let mut x = fs.get_fsxattr(root).unwrap();
    x.xflags |= XFLAG_RTINHERIT;
    fs.set_fsxattr(root, &x, true, &Cred::root()).unwrap();
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let fs = fs.clone();
            std::thread::spawn(move || {
                let dir = fs
                    .mkdir(root, format!("d{t}").as_bytes(), &args(0o40755))
                    .unwrap()
                    .ino;
                let mut keep = Model::new();
                let mut seed = t * 7919 + 1;
                let mut rnd = || {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed
                };
                for i in 0..150u64 {
                    let name = format!("f{}", i % 10);
                    let ino = match fs.create(dir, name.as_bytes(), &args(0o100644)) {
                        Ok(ip) => ip.ino,
                        Err(rxfs::Error::Exists) => {
                            let d = fs.iget(dir).unwrap();
                            fs.lookup(&d, name.as_bytes()).unwrap()
                        }
                        Err(e) => panic!("create: {e}"),
                    };
                    let mut b = keep.remove(&name).unwrap_or_default();
                    // Sparse writes: many extents, bmbt forks.
                    for _ in 0..8 {
                        let off = rnd() % 4_000_000;
                        write(
                            &fs,
                            ino,
                            &mut b,
                            off,
                            &pattern(rnd(), 4096 + (rnd() % 9000) as usize),
                        );
                    }
                    match rnd() % 4 {
                        0 => {
                            fs.unlink(dir, name.as_bytes()).unwrap();
                        }
                        1 => {
                            let cut = rnd() % (b.len() as u64 + 1);
                            fs.setattr(
                                ino,
                                &SetAttr {
                                    size: Some(cut),
                                    ..Default::default()
                                },
                            )
                            .unwrap();
                            b.truncate(cut as usize);
                            keep.insert(name, b);
                        }
                        _ => {
                            keep.insert(name, b);
                        }
                    }
                }
                (dir, keep)
            })
        })
        .collect();
    let results: Vec<_> = threads.into_iter().map(|h| h.join().unwrap()).collect();
    fs.unmount().unwrap();
    drop(fs);
    repair_clean(&img, &rt);
    let ro = open_ro_rt(&img, &rt);
    assert!(rxfs::rt::check(&*ro).unwrap().is_clean());
    for (dir, keep) in results {
        let d = ro.iget(dir).unwrap();
        for (name, want) in keep {
            let ip = ro.iget(ro.lookup(&d, name.as_bytes()).unwrap()).unwrap();
            let mut got = vec![0u8; want.len()];
            assert_eq!(ro.read_file(&ip, 0, &mut got).unwrap(), want.len());
            assert!(got == want, "{name}: content");
        }
    }
}

/// The rt extents of a file (first rt block, blocks).
fn rt_extents(fs: &Filesystem, ino: Ino) -> Vec<(u64, u64)> {
    match &fs.iget(ino).unwrap().data {
        rxfs::inode::Fork::Extents { list, .. } => list.iter().map(|e| (e.start, e.len)).collect(),
        other => panic!("extents fork expected, got {other:?}"),
    }
}

/// Realtime extents freed by a committed transaction are not handed out
/// again before that transaction's checkpoint is on disk (its file's old
/// mapping could still be recovered and would see the new owner's data),
/// in every summary mode: on a device filled to the last extent, a file
/// removed without a log force leaves only busy space, so the next
/// allocation must force the log first (counted in `busy_forces`) and
/// only then may use it. The allocator reads busy ranges from the
/// realtime lock's mirror of the CIL's list (`cache::rtbusy`), already
/// filled for the block by the allocations before the removal: a removal
/// the mirror missed would be reused without the force.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn rt_freed_extents_wait_for_their_checkpoint() {
    require_tools(&["mkfs.xfs", "xfs_repair"]);
    for mode in [RtSumMode::None, RtSumMode::MinLevel, RtSumMode::Memory] {
        let s = Scratch::new("rtw-busy");
        let (img, rt) = make(&s, "b", 4096, 4096);
        let fs = open(&img, &rt, mode);
        let root = fs.root_ino();
        let mut x = fs.get_fsxattr(root).unwrap();
        x.xflags |= XFLAG_RTINHERIT;
        fs.set_fsxattr(root, &x, true, &Cred::root()).unwrap();
        // Fill the device: 1 MiB files, then one-extent files.
        let mut files = Vec::new();
        for (size, prefix) in [(1u64 << 20, "m"), (4096, "s")] {
            loop {
                let name = format!("{prefix}{}", files.len());
                let ino = fs
                    .create(root, name.as_bytes(), &args(0o100644))
                    .unwrap()
                    .ino;
                match fs.fallocate(ino, 0, 0, size) {
                    Ok(()) => files.push((name, ino)),
                    Err(rxfs::Error::NoSpace) => {
                        fs.unlink(root, name.as_bytes()).unwrap();
                        break;
                    }
                    Err(e) => panic!("{mode:?}: fallocate: {e}"),
                }
            }
        }
        assert_eq!(fs.rw().unwrap().counters().frextents, 0, "{mode:?}: full");
        // The last allocation failed and its transaction was cancelled,
        // which drops the realtime cache: one stable free extent, taken
        // again, brings the busy mirror of the block back.
        let (last, last_ino) = files.pop().unwrap();
        let blocks: u64 = rt_extents(&fs, last_ino).iter().map(|e| e.1).sum();
        fs.unlink(root, last.as_bytes()).unwrap();
        fs.log_force().unwrap();
        let probe = fs.create(root, b"probe", &args(0o100644)).unwrap().ino;
        fs.fallocate(probe, 0, 0, blocks * 4096).unwrap();
        assert_eq!(fs.rw().unwrap().counters().frextents, 0, "{mode:?}: full");
        // Everything so far is stable; then one file goes, no force.
        fs.log_force().unwrap();
        let (gone, gone_ino) = files[3].clone();
        let freed = rt_extents(&fs, gone_ino);
        fs.unlink(root, gone.as_bytes()).unwrap();
        let forces = fs.stats().rt.busy_forces;
        let ino = fs.create(root, b"new", &args(0o100644)).unwrap().ino;
        fs.fallocate(ino, 0, 0, 64 << 10).unwrap();
        let got = rt_extents(&fs, ino);
        let reused = got
            .iter()
            .any(|&(s, n)| freed.iter().any(|&(fs_, fn_)| s < fs_ + fn_ && fs_ < s + n));
        assert!(
            reused,
            "{mode:?}: the freed extents are the only free space"
        );
        assert_eq!(
            fs.stats().rt.busy_forces,
            forces + 1,
            "{mode:?}: busy extents reused without a log force first"
        );
        fs.unmount().unwrap();
        drop(fs);
        repair_clean(&img, &rt);
    }
}
