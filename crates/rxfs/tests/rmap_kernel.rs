//! Read-write mounts of filesystems with the reverse-mapping btree
//! (`mkfs.xfs -m rmapbt=1`, with and without reflink, 4 KiB and 1 KiB
//! blocks) through the `Filesystem` API: namespace changes, writes with
//! holes, truncates, directories converting shortform <-> block, inode
//! chunk allocation, thousands of files (rmapbt splits to depth 2+), then
//! removal of most of them (merges). After each phase: unmount,
//! `xfs_repair -n` exits 0 (it cross-checks every rmap record against the
//! blocks it finds in use), and a kernel mount sees exactly the model.
//! The crash variant abandons the mount after a log force: the kernel
//! recovers our log, and repair stays clean.

mod common;
mod crash_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;
use rxfs::bdev::{BlockDevice, FileDevice};
use rxfs::bmap::data::SetAttr;
use rxfs::fs::ops_ns::CreateArgs;
use rxfs::types::Ino;
use rxfs::{Filesystem, MountOptions};

fn kernel_ok() -> bool {
    if kernel_tests_disabled() {
        return false;
    }
    require_root();
    require_tools(&["mkfs.xfs", "xfs_repair", "xfs_db", "mount"]);
    true
}

/// Path under the root -> inode and contents (`None` = directory).
struct Model {
    root: Ino,
    ents: BTreeMap<PathBuf, (Ino, Option<Vec<u8>>)>,
}

impl Model {
    fn ino(&self, p: &Path) -> Ino {
        if p.as_os_str().is_empty() {
            return self.root;
        }
        self.ents[p].0
    }
}

fn open_rw(img: &Path) -> Arc<Filesystem> {
    let dev: Arc<dyn BlockDevice> = Arc::new(FileDevice::open(img, false, false).unwrap());
    let opts = MountOptions {
        read_only: false,
        ..Default::default()
    };
    Filesystem::open(dev, None, opts).unwrap()
}

fn name_of(p: &Path) -> Vec<u8> {
    p.file_name().unwrap().as_encoded_bytes().to_vec()
}

fn parent_of(p: &Path) -> PathBuf {
    p.parent().unwrap().to_path_buf()
}

fn mkdir(fs: &Filesystem, m: &mut Model, p: &str) {
    let p = PathBuf::from(p);
    let dir = m.ino(&parent_of(&p));
    let ip = fs
        .mkdir(dir, &name_of(&p), &CreateArgs::root(0o40755))
        .unwrap();
    m.ents.insert(p, (ip.ino, None));
}

fn create(fs: &Filesystem, m: &mut Model, p: &str) {
    let p = PathBuf::from(p);
    let dir = m.ino(&parent_of(&p));
    let ip = fs
        .create(dir, &name_of(&p), &CreateArgs::root(0o100644))
        .unwrap();
    m.ents.insert(p, (ip.ino, Some(Vec::new())));
}

/// How the model holds a symlink: its target behind a marker.
fn link_content(target: &[u8]) -> Vec<u8> {
    let mut v = b"symlink->".to_vec();
    v.extend_from_slice(target);
    v
}

fn symlink(fs: &Filesystem, m: &mut Model, p: &str, target: &[u8]) {
    let p = PathBuf::from(p);
    let dir = m.ino(&parent_of(&p));
    let ip = fs
        .symlink(dir, &name_of(&p), target, &CreateArgs::root(0o120777))
        .unwrap();
    m.ents.insert(p, (ip.ino, Some(link_content(target))));
}

/// Files the kernel makes before rxfs mounts: written data, and a
/// preallocated (unwritten) file with a written island; they join the
/// model with the inode numbers the kernel gave them.
fn kernel_files(img: &Path, mnt: &Path, m: &mut Model) {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::{FileExt, MetadataExt};
    let k = KernelMount::new(img, mnt, "");
    std::fs::create_dir(mnt.join("k")).unwrap();
    let ino = |p: &Path| Ino(std::fs::metadata(p).unwrap().ino());
    m.ents.insert("k".into(), (ino(&mnt.join("k")), None));
    let data = pattern(70, 200_000);
    std::fs::write(mnt.join("k/data"), &data).unwrap();
    m.ents
        .insert("k/data".into(), (ino(&mnt.join("k/data")), Some(data)));
    let f = std::fs::File::create(mnt.join("k/pre")).unwrap();
    assert_eq!(
        unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, 256 << 10) },
        0
    );
    let island = pattern(71, 8192);
    f.write_at(&island, 64 << 10).unwrap();
    f.sync_all().unwrap();
    drop(f);
    let mut c = vec![0u8; 256 << 10];
    c[64 << 10..(64 << 10) + 8192].copy_from_slice(&island);
    m.ents
        .insert("k/pre".into(), (ino(&mnt.join("k/pre")), Some(c)));
    k.umount();
}

fn write(fs: &Filesystem, m: &mut Model, p: &str, off: u64, d: &[u8]) {
    let e = m.ents.get_mut(Path::new(p)).unwrap();
    assert_eq!(fs.write(e.0, off, d).unwrap(), d.len());
    let c = e.1.as_mut().unwrap();
    let end = off as usize + d.len();
    if c.len() < end {
        c.resize(end, 0);
    }
    c[off as usize..end].copy_from_slice(d);
}

fn truncate(fs: &Filesystem, m: &mut Model, p: &str, size: u64) {
    let e = m.ents.get_mut(Path::new(p)).unwrap();
    let a = SetAttr {
        size: Some(size),
        ..Default::default()
    };
    fs.setattr(e.0, &a).unwrap();
    e.1.as_mut().unwrap().resize(size as usize, 0);
}

fn remove(fs: &Filesystem, m: &mut Model, p: &str) {
    let p = PathBuf::from(p);
    let dir = m.ino(&parent_of(&p));
    match m.ents[&p].1 {
        Some(_) => fs.unlink(dir, &name_of(&p)).unwrap(),
        None => fs.rmdir(dir, &name_of(&p)).unwrap(),
    }
    m.ents.remove(&p);
}

fn repair_clean(img: &Path) {
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
}

/// `xfs_db` field of AG `agno`'s AGF.
fn agf_field(img: &Path, agno: u32, field: &str) -> u64 {
    let out = run_output(
        "xfs_db",
        &[
            "-r",
            "-c",
            &format!("agf {agno}"),
            "-c",
            &format!("p {field}"),
            img.to_str().unwrap(),
        ],
    );
    let s = String::from_utf8_lossy(&out.stdout);
    s.split('=').nth(1).unwrap().trim().parse().unwrap()
}

fn agi_field(img: &Path, agno: u32, field: &str) -> u64 {
    let out = run_output(
        "xfs_db",
        &[
            "-r",
            "-c",
            &format!("agi {agno}"),
            "-c",
            &format!("p {field}"),
            img.to_str().unwrap(),
        ],
    );
    let s = String::from_utf8_lossy(&out.stdout);
    s.split('=').nth(1).unwrap().trim().parse().unwrap()
}

/// What `xfs_repair -n` does not check (it compares only file, inode
/// chunk and fixed-metadata observations with the rmapbt): in every AG
/// the rmap records and the free extents tile the AG exactly, OWN_AG
/// covers exactly the AGFL plus the free-space and rmap btree blocks,
/// OWN_INOBT exactly the inode btree blocks, OWN_REFC the refcount btree.
fn rmap_tiles_ags(img: &Path) {
    use rxfs::btree::{records, Tree};
    use rxfs::format::btree::{AllocRec, RMAP_OWN_AG, RMAP_OWN_INOBT, RMAP_OWN_REFC};
    use rxfs::types::AgNumber;
    use rxfs::xact::MetaTx;
    let dev = Arc::new(FileDevice::open(img, false, false).unwrap());
    let mut tx = rxfs::recover::memtx::MemTx::new(dev).unwrap();
    let agcount = tx.geo().agcount;
    for a in 0..agcount {
        let agno = AgNumber(a);
        let len = tx.geo().ag_size(agno) as u64;
        let rmaps = rxfs::rmap::edit::records(&mut tx, agno, usize::MAX).unwrap();
        let free = records(&mut tx, Tree::Bno, agno, usize::MAX).unwrap();
        let mut spans: Vec<(u64, u64, String)> = rmaps
            .iter()
            .map(|r| (r.start as u64, r.len as u64, format!("{r:?}")))
            .collect();
        for f in &free {
            let f = AllocRec::decode(f);
            spans.push((f.start as u64, f.len as u64, format!("free {f:?}")));
        }
        spans.sort();
        let mut at = 0;
        for (start, n, what) in &spans {
            assert_eq!(
                *start, at,
                "AG {a}: {what} does not start where the last ended"
            );
            at = start + n;
        }
        assert_eq!(at, len, "AG {a}: records end at {at} of {len}");
        let owned = |o: u64| -> u64 {
            rmaps
                .iter()
                .filter(|r| r.owner == o)
                .map(|r| r.len as u64)
                .sum()
        };
        let ag = agf_field(img, a, "flcount") + agf_field(img, a, "btreeblks") + 3;
        assert_eq!(owned(RMAP_OWN_AG), ag, "AG {a}: OWN_AG blocks");
        assert!(agf_field(img, a, "rmapblocks") >= 1);
        let ino = agi_field(img, a, "ino_blocks") + agi_field(img, a, "fino_blocks");
        assert_eq!(owned(RMAP_OWN_INOBT), ino, "AG {a}: OWN_INOBT blocks");
        if tx.sb().has_reflink() {
            let refc = agf_field(img, a, "refcntblocks");
            assert_eq!(owned(RMAP_OWN_REFC), refc, "AG {a}: OWN_REFC blocks");
        }
    }
}

/// The kernel (read-only mount) sees exactly the model.
fn kernel_sees(img: &Path, mnt: &Path, m: &Model) {
    let k = KernelMount::new(img, mnt, "ro");
    let mut seen = BTreeMap::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(mnt.join(&d)).unwrap() {
            let e = e.unwrap();
            let rel = d.join(e.file_name());
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                stack.push(rel.clone());
                seen.insert(rel, None);
            } else if ft.is_symlink() {
                let t = std::fs::read_link(mnt.join(&rel)).unwrap();
                seen.insert(rel, Some(link_content(t.as_os_str().as_encoded_bytes())));
            } else {
                seen.insert(rel.clone(), Some(std::fs::read(mnt.join(&rel)).unwrap()));
            }
        }
    }
    let want: BTreeMap<PathBuf, Option<Vec<u8>>> = m
        .ents
        .iter()
        .map(|(p, (_, c))| (p.clone(), c.clone()))
        .collect();
    assert_eq!(seen.len(), want.len(), "entry count");
    for (p, c) in &want {
        assert!(seen.get(p) == Some(c), "{}: differs", p.display());
    }
    k.umount();
}

/// The kernel works on the rmapbt we left (its verifiers and btree code
/// read our node keys and records): it writes, overwrites and removes
/// files on a read-write mount, then xfs_repair must still be clean.
fn kernel_uses(img: &Path, mnt: &Path) {
    let k = KernelMount::new(img, mnt, "");
    std::fs::create_dir(mnt.join("kernel")).unwrap();
    for i in 0..60u64 {
        let data = pattern(900 + i, 1024 * (1 + (i as usize * 7) % 29));
        std::fs::write(mnt.join(format!("kernel/f{i}")), data).unwrap();
    }
    run("sync", &[]);
    for i in (0..60u64).step_by(2) {
        std::fs::remove_file(mnt.join(format!("kernel/f{i}"))).unwrap();
    }
    let mut stack = vec![mnt.to_path_buf()];
    let mut removed = 0;
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else if removed % 3 == 0 {
                std::fs::remove_file(e.path()).unwrap();
            }
            removed += 1;
        }
    }
    k.umount();
    repair_clean(img);
}

/// Unmount, repair clean, kernel sees the model; returns a new mount.
fn check(fs: Arc<Filesystem>, img: &Path, mnt: &Path, m: &Model) -> Arc<Filesystem> {
    let st = fs.stats();
    assert_eq!(st.trans_resv_overruns, 0, "log reservations too small");
    assert_eq!(st.trans_cancels, 0, "cancelled transactions");
    assert_eq!(
        fs.stats().ag_lock_order_violations,
        0,
        "AG header lock order"
    );
    fs.unmount().unwrap();
    drop(fs);
    rmap_tiles_ags(img);
    repair_clean(img);
    kernel_sees(img, mnt, m);
    open_rw(img)
}

/// Namespace changes, sparse writes, truncates and sf <-> block
/// directories on a filesystem with `opts`.
fn mixed_ops(name: &str, opts: &[&str]) {
    if !kernel_ok() {
        return;
    }
    let s = Scratch::new(name);
    let img = s.path("img");
    let mnt = s.path("mnt");
    mkfs_with(&img, 128 << 20, opts, FSTESTS_ENV);
    let mut m = Model {
        root: Ino(0),
        ents: BTreeMap::new(),
    };
    kernel_files(&img, &mnt, &mut m);
    let fs = open_rw(&img);
    m.root = Ino(fs.sb().rootino);
    mkdir(&fs, &mut m, "d");
    mkdir(&fs, &mut m, "d/sub");
    create(&fs, &mut m, "a");
    write(&fs, &mut m, "a", 0, &pattern(1, 10_000));
    create(&fs, &mut m, "holes");
    for i in 0..8u64 {
        // One block every other 4 KiB: separate extents (and records).
        write(&fs, &mut m, "holes", i * 8192, &pattern(10 + i, 4096));
    }
    create(&fs, &mut m, "d/big");
    write(&fs, &mut m, "d/big", 0, &pattern(2, 700_000));
    symlink(&fs, &mut m, "d/short", b"a/b/c");
    symlink(&fs, &mut m, "d/long", &[b'x'; 1000]);
    // Written into unwritten space (conversions split the kernel's
    // unwritten record), kernel data overwritten and extended.
    write(&fs, &mut m, "k/pre", 4096, &pattern(72, 8192));
    write(&fs, &mut m, "k/pre", 60 << 10, &pattern(73, 4096));
    write(&fs, &mut m, "k/pre", (256 << 10) - 4096, &pattern(74, 4096));
    write(&fs, &mut m, "k/data", 100_000, &pattern(75, 150_000));
    // A directory that grows into block form.
    mkdir(&fs, &mut m, "blk");
    for i in 0..40 {
        create(&fs, &mut m, &format!("blk/entry-{i:04}"));
    }
    let fs = check(fs, &img, &mnt, &m);

    // Extend, overwrite holes, truncate (the middle of a mapping and
    // whole mappings), unlink with data, shrink the block directory back.
    write(&fs, &mut m, "a", 10_000, &pattern(3, 50_000));
    write(&fs, &mut m, "holes", 4096, &pattern(4, 4096));
    truncate(&fs, &mut m, "holes", 5 * 8192 + 100);
    truncate(&fs, &mut m, "d/big", 300_001);
    write(&fs, &mut m, "d/big", 900_000, &pattern(5, 3000));
    remove(&fs, &mut m, "a");
    remove(&fs, &mut m, "d/long");
    write(&fs, &mut m, "k/pre", 0, &pattern(76, 256 << 10));
    truncate(&fs, &mut m, "k/data", 50_000);
    for i in 0..38 {
        remove(&fs, &mut m, &format!("blk/entry-{i:04}"));
    }
    let fs = check(fs, &img, &mnt, &m);

    // Empty everything; all records but the fixed ones go.
    let all: Vec<PathBuf> = m.ents.keys().rev().cloned().collect();
    for p in all {
        remove(&fs, &mut m, p.to_str().unwrap());
    }
    let fs = check(fs, &img, &mnt, &m);
    assert_eq!(
        fs.stats().ag_lock_order_violations,
        0,
        "AG header lock order"
    );
    fs.unmount().unwrap();
    kernel_uses(&img, &mnt);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn rmap_mixed_ops_noreflink_kernel() {
    mixed_ops(
        "rmap-mixed",
        &["-l", "size=16m", "-m", "rmapbt=1,reflink=0"],
    );
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn rmap_mixed_ops_reflink_kernel() {
    mixed_ops(
        "rmap-mixed-rl",
        &["-l", "size=16m", "-m", "rmapbt=1,reflink=1"],
    );
}

/// Directory `d` of [`many_files`] (20 per group: block directories).
fn dir_path(d: usize) -> String {
    format!("g{}/d{d:03}", d / 20)
}

/// Many small files in many shortform directories on 1 KiB blocks: one
/// rmap record per file (different owners never merge), so the rmapbt
/// grows to depth 2+; then most are removed (merges, root shrink).
fn many_files(fs: &Filesystem, m: &mut Model, dirs: usize, per: usize) {
    for d in 0..dirs {
        if d % 20 == 0 {
            mkdir(fs, m, &format!("g{}", d / 20));
        }
        mkdir(fs, m, &dir_path(d));
        for f in 0..per {
            let p = format!("{}/f{f}", dir_path(d));
            create(fs, m, &p);
            write(fs, m, &p, 0, &pattern((d * 100 + f) as u64, 700));
        }
    }
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn rmap_deep_tree_kernel() {
    if !kernel_ok() {
        return;
    }
    let s = Scratch::new("rmap-deep");
    let img = s.path("img");
    let mnt = s.path("mnt");
    mkfs_with(
        &img,
        96 << 20,
        &[
            "-l",
            "size=16m",
            "-b",
            "size=1024",
            "-m",
            "rmapbt=1",
            "-d",
            "agcount=2",
        ],
        FSTESTS_ENV,
    );
    let fs = open_rw(&img);
    let mut m = Model {
        root: Ino(fs.sb().rootino),
        ents: BTreeMap::new(),
    };
    many_files(&fs, &mut m, 200, 10);
    assert_eq!(
        fs.stats().ag_lock_order_violations,
        0,
        "AG header lock order"
    );
    fs.unmount().unwrap();
    drop(fs);
    let levels = (0..2)
        .map(|a| agf_field(&img, a, "rmaplevel"))
        .max()
        .unwrap();
    eprintln!("rmapbt levels: {levels}");
    assert!(levels >= 3, "rmapbt only {levels} levels deep");
    let fs = open_rw(&img);
    let fs = check(fs, &img, &mnt, &m);
    // Remove 9 of every 10 files and most directories.
    for d in 0..200 {
        for f in 1..10 {
            remove(&fs, &mut m, &format!("{}/f{f}", dir_path(d)));
        }
        if d % 4 != 0 {
            remove(&fs, &mut m, &format!("{}/f0", dir_path(d)));
            remove(&fs, &mut m, &dir_path(d));
        }
    }
    let fs = check(fs, &img, &mnt, &m);
    assert_eq!(
        fs.stats().ag_lock_order_violations,
        0,
        "AG header lock order"
    );
    fs.unmount().unwrap();
    kernel_uses(&img, &mnt);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn rmap_crash_recovery_kernel() {
    if !kernel_ok() {
        return;
    }
    let s = Scratch::new("rmap-crash");
    let img = s.path("img");
    let mnt = s.path("mnt");
    mkfs_with(
        &img,
        96 << 20,
        &["-l", "size=16m", "-m", "rmapbt=1"],
        FSTESTS_ENV,
    );
    let fs = open_rw(&img);
    let mut m = Model {
        root: Ino(fs.sb().rootino),
        ents: BTreeMap::new(),
    };
    many_files(&fs, &mut m, 10, 8);
    create(&fs, &mut m, "holes");
    for i in 0..6u64 {
        write(&fs, &mut m, "holes", i * 8192, &pattern(20 + i, 4096));
    }
    truncate(&fs, &mut m, "holes", 3 * 8192);
    for f in 0..8 {
        remove(&fs, &mut m, &format!("{}/f{f}", dir_path(3)));
    }
    remove(&fs, &mut m, &dir_path(3));
    fs.log_force().unwrap();
    fs.abandon();
    drop(fs);
    // The kernel replays our log; then everything must be consistent.
    let k = KernelMount::new(&img, &mnt, "");
    k.umount();
    rmap_tiles_ags(&img);
    repair_clean(&img);
    kernel_sees(&img, &mnt, &m);
}

/// The crash-consistency harness (seeded workloads of namespace and data
/// operations on a `CrashDevice`, crash images recovered by rxfs and
/// some by the kernel, each `xfs_repair -n` clean and true to the model)
/// on an rmapbt filesystem: deferred frees, AGFL fix-ups and rmapbt splits
/// cut at any write.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn rmap_crash_workload_kernel() {
    use crash_support::workload::Params;
    use crash_support::*;
    if kernel_tests_disabled() {
        return;
    }
    require_root();
    let run = SeedRun {
        params: Params {
            ops: env_usize("RXFS_CRASH_OPS", 120),
            ..Params::default()
        },
        opts: crash_support::rwapi::rw(),
        points: env_usize("RXFS_CRASH_POINTS", 8),
        kernel_every: 3,
        prefill_log: None,
        lying_flush: false,
    };
    let scr = Scratch::new("rmap-crash-wl");
    let base = fresh_image(&scr, &["-m", "rmapbt=1", "-l", "size=16m"]);
    let mut tot = Totals::default();
    for seed in 4101..4101 + env_usize("RXFS_CRASH_SEEDS", 2) as u64 {
        run_seed(&scr, &base, seed, &run, &mut tot);
    }
    eprintln!("{}", tot.report("rmap-crash-wl"));
    assert!(
        tot.failures.is_empty(),
        "{} failing crash images; first:\n{}",
        tot.failures.len(),
        tot.failures[0]
    );
    assert!(tot.stops.is_empty(), "workloads stopped: {:?}", tot.stops);
    assert!(tot.kernel_images > 0 && tot.exact > 0, "nothing checked");
}

/// Record-level edits on a real rmapbt (unlogged, never committed): merges
/// left, right and on both sides, trims, a middle split, and refusals of
/// overlapping or mismatched requests.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn rmap_record_edits() {
    use rxfs::format::btree::RMAP_OWN_AG;
    use rxfs::rmap::{rmap_alloc, rmap_free, RmapOwner};
    use rxfs::types::WhichFork;
    use rxfs::types::{AgBlock, AgNumber};
    if !kernel_ok() {
        return;
    }
    let s = Scratch::new("rmap-recs");
    let img = s.path("img");
    mkfs_with(
        &img,
        96 << 20,
        &["-l", "size=16m", "-m", "rmapbt=1"],
        FSTESTS_ENV,
    );
    let dev = Arc::new(FileDevice::open(&img, false, false).unwrap());
    let mut tx = rxfs::recover::memtx::MemTx::new(dev).unwrap();
    let ag = AgNumber(1);
    let file = |offset: u64, unwritten: bool| RmapOwner::File {
        ino: Ino(131),
        fork: WhichFork::Data,
        offset,
        bmbt: false,
        unwritten,
    };
    let recs = |tx: &mut rxfs::recover::memtx::MemTx| -> Vec<(u32, u32, u64, u64)> {
        rxfs::rmap::edit::records(tx, ag, usize::MAX)
            .unwrap()
            .into_iter()
            .filter(|r| r.start >= 1000)
            .map(|r| (r.start, r.len, r.owner, r.offset))
            .collect()
    };
    let b = AgBlock;
    rmap_alloc(&mut tx, ag, b(1000), 4, &file(0, false)).unwrap();
    rmap_alloc(&mut tx, ag, b(1004), 2, &file(4, false)).unwrap();
    assert_eq!(recs(&mut tx), vec![(1000, 6, 131, 0)], "merge left");
    rmap_alloc(&mut tx, ag, b(1008), 2, &file(8, false)).unwrap();
    rmap_alloc(&mut tx, ag, b(1006), 2, &file(6, false)).unwrap();
    assert_eq!(recs(&mut tx), vec![(1000, 10, 131, 0)], "merge both");
    rmap_alloc(&mut tx, ag, b(1010), 1, &file(20, false)).unwrap();
    rmap_alloc(&mut tx, ag, b(1011), 1, &file(21, true)).unwrap();
    assert_eq!(recs(&mut tx).len(), 3, "offset gap, flag change: no merge");
    rmap_free(&mut tx, ag, b(1003), 2, &file(3, false)).unwrap();
    assert_eq!(
        recs(&mut tx)[..2],
        [(1000, 3, 131, 0), (1005, 5, 131, 5)],
        "middle split"
    );
    rmap_free(&mut tx, ag, b(1000), 3, &file(0, false)).unwrap();
    rmap_free(&mut tx, ag, b(1008), 2, &file(8, false)).unwrap();
    assert_eq!(recs(&mut tx)[0], (1005, 3, 131, 5), "trims");
    // Wrong state, wrong offset, overlap: refused.
    assert!(rmap_free(&mut tx, ag, b(1011), 1, &file(21, false)).is_err());
    assert!(rmap_free(&mut tx, ag, b(1005), 1, &file(6, false)).is_err());
    assert!(rmap_alloc(&mut tx, ag, b(1006), 4, &file(6, false)).is_err());
    // Special owners merge on block adjacency alone.
    rmap_alloc(&mut tx, ag, b(2000), 1, &RmapOwner::Ag).unwrap();
    rmap_alloc(&mut tx, ag, b(2002), 1, &RmapOwner::Ag).unwrap();
    rmap_alloc(&mut tx, ag, b(2001), 1, &RmapOwner::Ag).unwrap();
    let r = recs(&mut tx);
    assert_eq!(*r.last().unwrap(), (2000, 3, RMAP_OWN_AG, 0));
    // Recovered frees of unknown owner: nothing there, or one owner's.
    use rxfs::rmap::rmap_free_any_owner;
    rmap_free_any_owner(&mut tx, ag, b(3000), 5).unwrap();
    rmap_free_any_owner(&mut tx, ag, b(1006), 1).unwrap();
    assert_eq!(recs(&mut tx)[..2], [(1005, 1, 131, 5), (1007, 1, 131, 7)]);
    rmap_free_any_owner(&mut tx, ag, b(2001), 2).unwrap();
    assert_eq!(*recs(&mut tx).last().unwrap(), (2000, 1, RMAP_OWN_AG, 0));
    assert!(rmap_free_any_owner(&mut tx, ag, b(1999), 2).is_err());
}
