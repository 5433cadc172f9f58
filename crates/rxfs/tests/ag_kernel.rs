//! AG headers, the per-AG btrees, inode allocation and statfs, checked
//! against images the kernel populated and against the kernel's own
//! statvfs of a read-only mount.

mod common;

use std::collections::BTreeSet;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use common::*;
use rxfs::btree::walk::BtreeRoot;
use rxfs::format::btree::{AllocRec, BtreeKind, InobtRec, RefcountRec, RmapRec};
use rxfs::types::{AgNumber, Ino};
use rxfs::{Filesystem, MountOptions};

/// `FICLONE` ioctl: share all blocks of one file with another.
const FICLONE: libc::c_ulong = 0x4004_9409;

/// Many small files in one directory (many inode chunks in one AG: a
/// multi-level inobt), fragmented free space (files of two blocks, every
/// other one deleted: a multi-level bnobt/cntbt), deleted inodes (free
/// inodes in allocated chunks: a non-empty finobt), and reflinked files.
fn populate(root: &Path, nfiles: usize, reflink: bool) {
    let many = root.join("many");
    std::fs::create_dir(&many).unwrap();
    for i in 0..nfiles {
        std::fs::write(many.join(format!("f{i}")), b"x").unwrap();
    }
    let frag = root.join("frag");
    std::fs::create_dir(&frag).unwrap();
    for i in 0..3000 {
        std::fs::write(frag.join(format!("g{i}")), vec![i as u8; 8192]).unwrap();
    }
    run("sync", &[]);
    for i in (0..3000).step_by(2) {
        std::fs::remove_file(frag.join(format!("g{i}"))).unwrap();
    }
    for i in (0..nfiles).step_by(3) {
        std::fs::remove_file(many.join(format!("f{i}"))).unwrap();
    }
    let sub = root.join("sub/deeper");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(sub.join("big"), vec![7u8; 3 << 20]).unwrap();
    if reflink {
        let src = std::fs::File::open(sub.join("big")).unwrap();
        for i in 0..3 {
            let dst = std::fs::File::create(sub.join(format!("clone{i}"))).unwrap();
            let rc = unsafe { libc::ioctl(dst.as_raw_fd(), FICLONE, src.as_raw_fd()) };
            assert_eq!(rc, 0, "FICLONE: {}", std::io::Error::last_os_error());
        }
        // Overwrite part of one clone: the shared range splits.
        std::fs::OpenOptions::new()
            .write(true)
            .open(sub.join("clone0"))
            .map(|f| std::os::unix::fs::FileExt::write_at(&f, &[1u8; 65536], 1 << 20).unwrap())
            .unwrap();
    }
}

/// Every inode number reachable from `root`.
fn kernel_inodes(root: &Path, out: &mut BTreeSet<u64>) {
    out.insert(std::fs::symlink_metadata(root).unwrap().ino());
    for e in std::fs::read_dir(root).unwrap() {
        let e = e.unwrap();
        let md = e.metadata().unwrap();
        out.insert(md.ino());
        if md.is_dir() {
            kernel_inodes(&e.path(), out);
        }
    }
}

/// What one AG's trees say, checked against its headers.
#[derive(Default)]
struct AgSeen {
    btree_blocks: u64,
    max_levels: [u32; 6],
    holemasks: u64,
}

fn check_ag(fs: &Filesystem, agno: AgNumber, allocated: &mut BTreeSet<u64>, seen: &mut AgSeen) {
    let sb = fs.sb();
    let agf = fs.read_agf(agno).unwrap();
    let agi = fs.read_agi(agno).unwrap();
    let agfl = fs.read_agfl(agno).unwrap();
    let c = fs.ag_check(agno).unwrap();
    let fl = agfl.active_blocks(&agf, &c).unwrap();
    assert_eq!(fl.len() as u32, agf.flcount);

    // Free space: both trees hold the same extents; they sum to freeblks.
    let bno_root = BtreeRoot::from_agf(BtreeKind::Bno, agno, &agf);
    let cnt_root = BtreeRoot::from_agf(BtreeKind::Cnt, agno, &agf);
    let bno: Vec<AllocRec> = fs.btree_records(&bno_root).unwrap();
    let cnt: Vec<AllocRec> = fs.btree_records(&cnt_root).unwrap();
    let mut cnt_sorted = cnt.clone();
    cnt_sorted.sort();
    assert_eq!(bno, cnt_sorted, "AG {agno}: bnobt and cntbt disagree");
    let free: u64 = bno.iter().map(|r| r.len as u64).sum();
    assert_eq!(free, agf.freeblks as u64, "AG {agno}: freeblks");
    let longest = cnt.last().map_or(0, |r| r.len);
    assert_eq!(longest, agf.longest, "AG {agno}: longest");
    let bno_blocks = fs
        .btree_walk_raw(&bno_root, &mut |_| Ok(true))
        .unwrap()
        .blocks;
    let cnt_blocks = fs
        .btree_walk_raw(&cnt_root, &mut |_| Ok(true))
        .unwrap()
        .blocks;
    let mut btreeblks = bno_blocks - 1 + cnt_blocks - 1;
    seen.max_levels[0] = seen.max_levels[0].max(agf.bno_level);
    seen.max_levels[1] = seen.max_levels[1].max(agf.cnt_level);
    // A free-space lookup finds the extent at or before a block.
    if let Some(r) = bno.get(bno.len() / 2) {
        let key = rxfs::format::btree::BtreeKey(r.start as u64 + r.len as u64 - 1, 0, 0);
        let hit: Option<AllocRec> = fs.btree_lookup_le(&bno_root, key).unwrap();
        assert_eq!(hit, Some(*r));
    }

    if sb.has_rmapbt() {
        let root = BtreeRoot::from_agf(BtreeKind::Rmap, agno, &agf);
        let mut n = 0u64;
        let st = fs
            .btree_walk(&root, |_: RmapRec| {
                n += 1;
                Ok(true)
            })
            .unwrap();
        assert!(n > 0);
        assert_eq!(st.blocks, agf.rmap_blocks as u64, "AG {agno}: rmap_blocks");
        btreeblks += st.blocks - 1;
        seen.max_levels[4] = seen.max_levels[4].max(agf.rmap_level);
    }
    assert_eq!(btreeblks, agf.btreeblks as u64, "AG {agno}: btreeblks");
    if sb.has_reflink() {
        let root = BtreeRoot::from_agf(BtreeKind::Refcount, agno, &agf);
        let recs: Vec<RefcountRec> = fs.btree_records(&root).unwrap();
        let st = fs.btree_walk_raw(&root, &mut |_| Ok(true)).unwrap();
        assert_eq!(
            st.blocks, agf.refcount_blocks as u64,
            "AG {agno}: refcount_blocks"
        );
        assert!(recs.iter().all(|r| r.refcount >= 2 && !r.cow));
        seen.max_levels[5] = seen.max_levels[5].max(agf.refcount_level);
    }

    // Inodes: counts agree with the AGI, the finobt holds exactly the
    // chunks with free inodes.
    let ino_root = BtreeRoot::from_agi(BtreeKind::Ino, agno, &agi);
    let recs: Vec<InobtRec> = fs.btree_records(&ino_root).unwrap();
    let ino_blocks = fs
        .btree_walk_raw(&ino_root, &mut |_| Ok(true))
        .unwrap()
        .blocks;
    seen.max_levels[2] = seen.max_levels[2].max(agi.level);
    let count: u64 = recs.iter().map(|r| r.count as u64).sum();
    let freecount: u64 = recs.iter().map(|r| r.freecount as u64).sum();
    assert_eq!(count, agi.count as u64, "AG {agno}: agi count");
    assert_eq!(freecount, agi.freecount as u64, "AG {agno}: agi freecount");
    if sb.has_finobt() {
        let root = BtreeRoot::from_agi(BtreeKind::Fino, agno, &agi);
        let frecs: Vec<InobtRec> = fs.btree_records(&root).unwrap();
        let fblocks = fs.btree_walk_raw(&root, &mut |_| Ok(true)).unwrap().blocks;
        let want: Vec<InobtRec> = recs.iter().filter(|r| r.freecount > 0).copied().collect();
        assert_eq!(frecs, want, "AG {agno}: finobt");
        if sb.has_inobtcount() {
            assert_eq!(agi.fblocks as u64, fblocks, "AG {agno}: fblocks");
        }
        seen.max_levels[3] = seen.max_levels[3].max(agi.free_level);
    }
    if sb.has_inobtcount() {
        assert_eq!(agi.iblocks as u64, ino_blocks, "AG {agno}: iblocks");
    }
    let geo = fs.geo();
    let mut free_checked = 0;
    for r in &recs {
        if r.holemask != 0 {
            seen.holemasks += 1;
        }
        for idx in 0..64 {
            let ino = geo
                .agino_to_ino(agno, rxfs::types::AgIno(r.startino + idx))
                .0;
            if r.is_allocated(idx) {
                allocated.insert(ino);
            } else if free_checked < 300 || r.is_hole(idx) {
                free_checked += 1;
                assert!(
                    !rxfs::ialloc::read::inode_allocated(fs, Ino(ino)).unwrap(),
                    "free/hole inode {ino} reported allocated"
                );
            }
        }
    }
    seen.btree_blocks += bno_blocks + cnt_blocks + ino_blocks;
}

/// The fstests xfs/076 recipe for sparse inode chunks: fill the
/// filesystem with one preallocated file, then from its end backwards punch
/// a chunk-sized hole every two chunks and create inodes until ENOSPC after
/// each punch. Free space is then too fragmented for whole chunks.
fn populate_sparse(root: &Path, punches: usize) {
    let st = statvfs(root);
    let avail = st.f_bavail * st.f_bsize;
    let size = ((avail >> 20) - 1) << 20;
    let spc = std::fs::File::create(root.join("spc")).unwrap();
    let rc = unsafe { libc::fallocate(spc.as_raw_fd(), 0, 0, size as i64) };
    assert_eq!(rc, 0, "fallocate: {}", std::io::Error::last_os_error());
    let chunk: i64 = 64 * 512;
    let mut off = size as i64 - 2 * chunk;
    let mut n = 0;
    while off >= 0 && n < punches {
        let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
        let rc = unsafe { libc::fallocate(spc.as_raw_fd(), mode, off, chunk) };
        assert_eq!(rc, 0, "punch: {}", std::io::Error::last_os_error());
        let d = root.join(format!("o{off}"));
        if std::fs::create_dir(&d).is_ok() {
            for i in 0.. {
                if std::fs::File::create(d.join(i.to_string())).is_err() {
                    break;
                }
            }
        }
        off -= 2 * chunk;
        n += 1;
    }
}

enum Populate {
    Mixed { nfiles: usize },
    Sparse { punches: usize },
}

struct Variant<'a> {
    name: &'a str,
    opts: &'a [&'a str],
    size: u64,
    populate: Populate,
}

/// Damage the bnobt of AG 0 in copies of `img` (CRCs restamped, so only
/// the tree checks can notice) and check that walks and lookups report
/// corruption instead of looping or returning wrong records.
fn corrupt_walks(img: &Path) {
    use rxfs::bdev::MemDevice;
    use rxfs::format::btree::{BtreeKey, NULL_AGBLOCK, SBLOCK_CRC_OFF};
    let fs = open_ro(img);
    let agf = fs.read_agf(AgNumber(0)).unwrap();
    assert!(agf.bno_level >= 2, "need a bnobt with a node");
    let geo = fs.geo().clone();
    let bs = geo.blocksize as usize;
    let off = |agbno: u32| {
        geo.agb_to_daddr(AgNumber(0), rxfs::types::AgBlock(agbno))
            .bytes() as usize
    };
    let maxnode = BtreeKind::Bno.max_recs(bs, false);
    let ptr_off = |i: usize| off(agf.bno_root) + 56 + maxnode * 8 + 4 * i;
    let image = std::fs::read(img).unwrap();
    let be32 = |b: &[u8], o: usize| u32::from_be_bytes(b[o..o + 4].try_into().unwrap());
    let (p0, p1) = (be32(&image, ptr_off(0)), be32(&image, ptr_off(1)));
    let root = agf.bno_root;
    let leftsib = |agbno: u32| off(agbno) + 8;
    let rightsib = |agbno: u32| off(agbno) + 12;
    // (what, [(byte offset, new u32)], blocks to restamp)
    type Damage<'a> = (&'a str, Vec<(usize, u32)>, Vec<u32>);
    let damages: Vec<Damage> = vec![
        ("shared subtree", vec![(ptr_off(1), p0)], vec![root]),
        ("self cycle", vec![(ptr_off(0), root)], vec![root]),
        (
            "swapped children",
            vec![(ptr_off(0), p1), (ptr_off(1), p0)],
            vec![root],
        ),
        (
            "cut sibling chain",
            vec![(rightsib(p0), NULL_AGBLOCK)],
            vec![p0],
        ),
        (
            "sibling points to itself",
            vec![(leftsib(p1), p1)],
            vec![p1],
        ),
    ];
    for (what, writes, blocks) in damages {
        let mut copy = image.clone();
        for (o, v) in writes {
            copy[o..o + 4].copy_from_slice(&v.to_be_bytes());
        }
        for b in blocks {
            let o = off(b);
            rxfs::format::crc::update(&mut copy[o..o + bs], SBLOCK_CRC_OFF);
        }
        let dev = std::sync::Arc::new(MemDevice::new_read_only(copy));
        let opts = MountOptions {
            read_only: true,
            ..Default::default()
        };
        let fs = Filesystem::open(dev, None, opts).unwrap();
        let root = BtreeRoot::from_agf(
            BtreeKind::Bno,
            AgNumber(0),
            &fs.read_agf(AgNumber(0)).unwrap(),
        );
        let err = fs.btree_walk_raw(&root, &mut |_| Ok(true)).unwrap_err();
        assert!(err.is_corrupt(), "{what}: {err}");
        for k in [0u64, 1000, 1 << 20, u32::MAX as u64] {
            if let Err(e) = fs.btree_lookup_le::<AllocRec>(&root, BtreeKey(k, 0, 0)) {
                assert!(e.is_corrupt(), "{what}: lookup {k}: {e}");
            }
        }
    }
}

fn check_variant(v: Variant) -> AgSeen {
    check_variant_then(v, |_| {})
}

/// The variants run one at a time: a child process forked by one test
/// thread holds copies of another thread's open directory descriptors until
/// it execs, which can make that thread's umount fail with EBUSY.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn check_variant_then(v: Variant, then: impl FnOnce(&Path)) -> AgSeen {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let s = Scratch::new(&format!("ag-{}", v.name));
    let img = s.path("img");
    mkfs(&img, v.size, v.opts);
    let reflink = open_ro(&img).sb().has_reflink();
    let m = KernelMount::new(&img, &s.path("mnt"), "");
    match v.populate {
        Populate::Mixed { nfiles } => populate(&m.dir, nfiles, reflink),
        Populate::Sparse { punches } => populate_sparse(&m.dir, punches),
    }
    m.umount();

    // The kernel's view from a read-only mount of the clean image.
    let m = KernelMount::new(&img, &s.path("mnt"), "ro");
    let kst = statvfs(&m.dir);
    let mut kernel_set = BTreeSet::new();
    kernel_inodes(&m.dir, &mut kernel_set);
    m.umount();

    let fs = open_ro(&img);
    let sb = fs.sb().clone();
    let mut allocated = BTreeSet::new();
    let mut seen = AgSeen::default();
    for agno in 0..sb.agcount {
        check_ag(&fs, AgNumber(agno), &mut allocated, &mut seen);
    }

    // Every inode the kernel shows is allocated; the only allocated inodes
    // it does not show are the hidden metadata inodes.
    for &ino in &kernel_set {
        assert!(
            rxfs::ialloc::read::inode_allocated(&*fs, Ino(ino)).unwrap(),
            "{}: inode {ino} not allocated",
            v.name
        );
    }
    let hidden: BTreeSet<u64> = allocated.difference(&kernel_set).copied().collect();
    let metadata: BTreeSet<u64> = [sb.rbmino, sb.rsumino, sb.uquotino, sb.gquotino, sb.pquotino]
        .into_iter()
        .filter(|&i| i != 0 && i != u64::MAX)
        .collect();
    assert!(
        hidden.is_subset(&metadata),
        "{}: unexplained inodes {hidden:?}",
        v.name
    );
    assert!(
        kernel_set.is_subset(&allocated),
        "{}: kernel inodes missing",
        v.name
    );
    let past_end = (sb.agcount as u64) << fs.geo().agino_log();
    assert!(!rxfs::ialloc::read::inode_allocated(&*fs, Ino(past_end + 64)).unwrap());
    assert!(!rxfs::ialloc::read::inode_allocated(&*fs, Ino(0)).unwrap());

    // Summary counters: the AG headers agree with the clean superblock.
    let sum = fs.ag_summary().unwrap();
    assert_eq!(
        (sum.fdblocks, sum.icount, sum.ifree),
        (sb.fdblocks, sb.icount, sb.ifree)
    );

    let st = fs.statfs().unwrap();
    let got = (
        st.bsize as u64,
        st.blocks,
        st.bfree,
        st.bavail,
        st.files,
        st.ffree,
        st.namelen as u64,
    );
    let want = (
        kst.f_bsize as u64,
        kst.f_blocks as u64,
        kst.f_bfree as u64,
        kst.f_bavail as u64,
        kst.f_files as u64,
        kst.f_ffree as u64,
        kst.f_namemax as u64,
    );
    assert_eq!(
        got, want,
        "{}: statfs (bsize blocks bfree bavail files ffree namelen)",
        v.name
    );
    assert_eq!(st.frsize as u64, kst.f_frsize as u64);
    then(&img);
    seen
}

macro_rules! variant {
    ($test:ident, $name:expr, $opts:expr, $size:expr, $nfiles:expr, |$seen:ident| $extra:block) => {
        #[test]
        #[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
        fn $test() {
            let $seen = check_variant(Variant {
                name: $name,
                opts: $opts,
                size: $size,
                populate: Populate::Mixed { nfiles: $nfiles },
            });
            $extra
        }
    };
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn ag_default() {
    let v = Variant {
        name: "default",
        opts: &[],
        size: 512 << 20,
        populate: Populate::Mixed { nfiles: 20_000 },
    };
    let seen = check_variant_then(v, corrupt_walks);
    assert!(seen.max_levels[0] >= 2, "bnobt should have grown a level");
    assert!(seen.max_levels[2] >= 2, "inobt should have grown a level");
}
variant!(
    ag_rmap_nrext64,
    "rmap",
    &["-m", "rmapbt=1", "-i", "nrext64=1"],
    512 << 20,
    20_000,
    |seen| {
        assert!(seen.max_levels[4] >= 2, "rmapbt should have grown a level");
    }
);
variant!(
    ag_noreflink,
    "noreflink",
    &["-m", "reflink=0"],
    512 << 20,
    6000,
    |seen| {
        assert!(seen.btree_blocks > 0);
    }
);
variant!(
    ag_noresv,
    "noresv",
    &["-m", "reflink=0,finobt=0"],
    512 << 20,
    6000,
    |seen| {
        assert!(seen.max_levels[0] >= 2);
    }
);
variant!(
    ag_1k_blocks,
    "b1k",
    &["-b", "size=1024"],
    512 << 20,
    6000,
    |seen| {
        assert!(seen.max_levels[2] >= 2 && seen.max_levels[3] >= 2);
    }
);
variant!(
    ag_16_ags,
    "ag16",
    &["-d", "agcount=16"],
    2 << 30,
    6000,
    |seen| {
        assert!(seen.btree_blocks > 0);
    }
);
variant!(
    ag_4k_sectors,
    "s4k",
    &["-s", "size=4096"],
    512 << 20,
    6000,
    |seen| {
        assert!(seen.btree_blocks > 0);
    }
);

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn ag_sparse_inodes() {
    let seen = check_variant(Variant {
        name: "sparse",
        opts: &[],
        size: 320 << 20,
        populate: Populate::Sparse { punches: 300 },
    });
    assert!(seen.holemasks > 0, "no sparse inode chunk was made");
}

/// After a crash the kernel recomputes its counters from the AG headers,
/// which reads every AGF: the free-space btree blocks leave statfs even
/// on a filesystem without per-AG reservations.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn ag_dirty_log_statfs() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let s = Scratch::new("ag-dirty");
    let img = s.path("img");
    mkfs(&img, 512 << 20, &["-m", "reflink=0,finobt=0"]);
    let m = KernelMount::new(&img, &s.path("mnt"), "");
    populate(&m.dir, 3000, false);
    // Freezing writes every dirty metadata block home; the shutdown then
    // leaves a log without an unmount record.
    let dir = m.dir.to_str().unwrap().to_string();
    run("xfs_freeze", &["-f", &dir]);
    run("xfs_freeze", &["-u", &dir]);
    run("xfs_io", &["-x", "-c", "shutdown", &dir]);
    m.umount();

    // rxfs does not replay logs: it reads the dirty image with norecovery
    // (the metadata is all home, so that is the recovered state), where
    // the kernel's counters come from the AG headers as after recovery.
    let opts = MountOptions {
        read_only: true,
        norecovery: true,
        ..Default::default()
    };
    let fs = Filesystem::open_path(&img, None, opts).unwrap();
    assert!(
        fs.log_state().unwrap().needs_recovery(),
        "the log should be dirty"
    );
    let dirty = fs.statfs().unwrap();
    assert_eq!(dirty, fs.statfs_with(false).unwrap());
    let clean = fs.statfs_with(true).unwrap();
    let sum = fs.ag_summary().unwrap();
    drop(fs);
    assert!(
        sum.allocbt_blocks > 0,
        "free space should need btree blocks"
    );
    assert_eq!(clean.bfree, dirty.bfree + sum.allocbt_blocks);

    let kernel = |opts: &str| {
        let m = KernelMount::on_rw_loop(&img, &s.path("mnt"), opts);
        let k = statvfs(&m.dir);
        (k.f_blocks, k.f_bfree, k.f_bavail, k.f_files, k.f_ffree)
    };
    let got = (
        dirty.blocks,
        dirty.bfree,
        dirty.bavail,
        dirty.files,
        dirty.ffree,
    );
    assert_eq!(got, kernel("ro,norecovery"), "statfs without recovery");
    assert_eq!(got, kernel("ro"), "statfs after log recovery");
    // Recovery marked the log clean: now the superblock counters count.
    let fs = open_ro(&img);
    let st = fs.statfs().unwrap();
    let got = (st.blocks, st.bfree, st.bavail, st.files, st.ffree);
    assert_eq!(got, kernel("ro"), "statfs of the recovered image");
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn ag_64k_blocks() {
    let seen = check_variant(Variant {
        name: "b64k",
        opts: &["-b", "size=65536"],
        size: 1 << 30,
        populate: Populate::Mixed { nfiles: 3000 },
    });
    assert!(seen.btree_blocks > 0);
}
