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

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use common::*;
use rxfs::bdev::FileDevice;
use rxfs::format::btree::{BtreeKind, InobtRec};
use rxfs::format::dinode_edit as de;
use rxfs::format::inode::Timestamp;
use rxfs::fs::btree::BtreeRoot;
use rxfs::ialloc::{ialloc, ifree, NewInode};
use rxfs::types::{AgNumber, Ino};
use rxfs::xact::memtx::MemTx;
use rxfs::xact::MetaTx;
use rxfs::Filesystem;

fn kernel_ok() -> bool {
    if kernel_tests_disabled() {
        return false;
    }
    require_root();
    require_tools(&["mkfs.xfs", "xfs_repair", "xfs_db", "mount"]);
    true
}

fn memtx(img: &Path) -> MemTx {
    let dev = Arc::new(FileDevice::open(img, false, false).unwrap());
    MemTx::new(dev).unwrap()
}

/// Inode counts per AG, checked for internal consistency.
#[derive(Debug, Clone, PartialEq, Eq)]
struct AgInodes {
    count: u64,
    freecount: u64,
    chunks: usize,
}

/// Walk every AG's inode btrees through the read path and check them
/// against the AGI; return the counts.
fn inode_state(fs: &Filesystem) -> Vec<AgInodes> {
    let sb = fs.sb();
    let mut out = Vec::new();
    for agno in 0..fs.geo().agcount {
        let agno = AgNumber(agno);
        let agi = fs.read_agi(agno).unwrap();
        let root = BtreeRoot::from_agi(BtreeKind::Ino, agno, &agi);
        let recs: Vec<InobtRec> = fs.btree_records(&root).unwrap();
        let iblocks = fs.btree_walk_raw(&root, &mut |_| Ok(true)).unwrap().blocks;
        let count: u64 = recs.iter().map(|r| r.count as u64).sum();
        let freecount: u64 = recs.iter().map(|r| r.freecount as u64).sum();
        assert_eq!(count, agi.count as u64, "AG {agno}: agi count");
        assert_eq!(freecount, agi.freecount as u64, "AG {agno}: agi freecount");
        for r in &recs {
            let avail = (r.free & r.present_mask()).count_ones();
            assert_eq!(avail, r.freecount, "AG {agno}: record {r:?}");
        }
        if sb.has_inobtcount() {
            assert_eq!(agi.iblocks as u64, iblocks, "AG {agno}: iblocks");
        }
        if sb.has_finobt() {
            let froot = BtreeRoot::from_agi(BtreeKind::Fino, agno, &agi);
            let frecs: Vec<InobtRec> = fs.btree_records(&froot).unwrap();
            let fblocks = fs.btree_walk_raw(&froot, &mut |_| Ok(true)).unwrap().blocks;
            let want: Vec<InobtRec> = recs.iter().filter(|r| r.freecount > 0).copied().collect();
            assert_eq!(frecs, want, "AG {agno}: finobt");
            if sb.has_inobtcount() {
                assert_eq!(agi.fblocks as u64, fblocks, "AG {agno}: fblocks");
            }
        }
        out.push(AgInodes {
            count,
            freecount,
            chunks: recs.len(),
        });
    }
    out
}

/// The highest inobt and finobt levels over the AGs.
fn max_levels(fs: &Filesystem) -> (u32, u32) {
    let mut m = (0, 0);
    for agno in 0..fs.geo().agcount {
        let agi = fs.read_agi(AgNumber(agno)).unwrap();
        m.0 = m.0.max(agi.level);
        m.1 = m.1.max(agi.free_level);
    }
    m
}

/// `xfs_db -r -c CMD -c 'p FIELD..'` values, by field name.
fn xfs_db_fields(img: &Path, cmd: &str, fields: &[&str]) -> Vec<u64> {
    let p = format!("p {}", fields.join(" "));
    let out = run_output(
        "xfs_db",
        &["-r", "-c", cmd, "-c", &p, img.to_str().unwrap()],
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    fields
        .iter()
        .map(|f| {
            let line = text
                .lines()
                .find(|l| l.split(" = ").next() == Some(*f))
                .unwrap_or_else(|| panic!("xfs_db {cmd}: no {f} in {text}"));
            line.split(" = ").nth(1).unwrap().trim().parse().unwrap()
        })
        .collect()
}

/// Compare our view of the counters with xfs_db's (AGIs and superblock).
fn check_with_xfs_db(img: &Path, state: &[AgInodes]) {
    for (agno, s) in state.iter().enumerate() {
        let v = xfs_db_fields(img, &format!("agi {agno}"), &["count", "freecount"]);
        assert_eq!(v, vec![s.count, s.freecount], "xfs_db agi {agno}");
    }
    let v = xfs_db_fields(img, "sb 0", &["icount", "ifree"]);
    let icount: u64 = state.iter().map(|s| s.count).sum();
    let ifree: u64 = state.iter().map(|s| s.freecount).sum();
    assert_eq!(v, vec![icount, ifree], "xfs_db sb 0 icount/ifree");
}

fn repair(img: &Path) -> (bool, String) {
    let out = std::process::Command::new("xfs_repair")
        .args(["-n", img.to_str().unwrap()])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn assert_repair_clean(img: &Path, when: &str) {
    let (ok, text) = repair(img);
    assert!(ok, "xfs_repair -n after {when}:\n{text}");
}

fn new_inode(i: usize) -> NewInode {
    // Every 16th a directory (rotor over the AGs), some devices, files.
    let mode = match i % 16 {
        0 => de::S_IFDIR | 0o755,
        5 => de::S_IFCHR | 0o600,
        9 => de::S_IFIFO | 0o644,
        _ => de::S_IFREG | 0o644,
    };
    NewInode {
        mode,
        uid: 1000 + i as u32,
        gid: 100,
        rdev: (1 << 18) | 3,
        nlink: if mode & de::S_IFMT == de::S_IFDIR {
            2
        } else {
            1
        },
        time: Timestamp {
            sec: 1_700_000_000 + i as i64,
            nsec: i as u32,
        },
    }
}

/// Allocate `n` inodes in transactions of `per_tx`; returns (ino, gen)
/// and the number of chunks created.
fn alloc_all(img: &Path, n: usize, per_tx: usize) -> (Vec<(Ino, u32)>, usize) {
    let mut out = Vec::new();
    let mut chunks = 0;
    let mut i = 0;
    while i < n {
        let mut tx = memtx(img);
        let root = Ino(tx.sb().rootino);
        for _ in 0..per_tx.min(n - i) {
            let (ino, ip) = ialloc(&mut tx, root, &new_inode(i)).unwrap();
            if new_inode(i).mode & de::S_IFMT == de::S_IFDIR {
                // An empty shortform directory under the root (what
                // dirop's dir_init writes): count 0, i8count 0, parent.
                let d = tx.inode_mut(ip);
                assert_eq!(de::format(d), rxfs::format::inode::FMT_EXTENTS);
                de::set_format(d, rxfs::format::inode::FMT_LOCAL);
                de::data_fork_mut(d)[..6].copy_from_slice(&[0, 0, 0, 0, 0, root.0 as u8]);
                de::set_size(d, 6);
                assert!(root.0 < 256);
            }
            let d = tx.inode(ip);
            assert_eq!(de::ino(d), ino.0);
            assert_eq!(de::mode(d) as u32, new_inode(i).mode);
            out.push((ino, de::gen(d)));
            i += 1;
        }
        chunks += tx.icreates.len();
        for ic in &tx.icreates {
            assert_eq!(ic.2, 64, "icreate count");
        }
        tx.commit().unwrap();
    }
    (out, chunks)
}

fn free_all(img: &Path, inos: &[(Ino, u32)], per_tx: usize) {
    for batch in inos.chunks(per_tx) {
        let mut tx = memtx(img);
        for &(ino, _) in batch {
            let ip = tx.ijoin(ino).unwrap();
            de::set_nlink(tx.inode_mut(ip), 0);
            ifree(&mut tx, ip, ino).unwrap();
        }
        tx.commit().unwrap();
    }
}

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
            fs.inode_allocated(ino).unwrap(),
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
    // Nothing links the new inodes: repair may only complain about that
    // (and the link counts of the never-linked inodes).
    let (_, text) = repair(&img);
    let mut disconnected = 0;
    for l in text.lines() {
        let l = l.to_lowercase();
        if l.contains("would move to lost+found") {
            disconnected += 1;
            continue;
        }
        let nlink_reset = l.starts_with("would have reset inode") && l.contains("nlinks from");
        assert!(
            nlink_reset
                || !(l.contains("would")
                    || l.contains("bad")
                    || l.contains("corrupt")
                    || l.contains("error")
                    || l.contains("claims")),
            "{name}: xfs_repair -n after alloc: {l}\n{text}"
        );
    }
    assert_eq!(disconnected, n, "{name}: disconnected inodes\n{text}");

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
fn ialloc_default_features() {
    scenario("default", 512 << 20, &[], 300);
}

#[test]
fn ialloc_no_sparse() {
    scenario("nosparse", 512 << 20, &["-i", "sparse=0"], 300);
}

#[test]
fn ialloc_no_finobt() {
    scenario("nofinobt", 512 << 20, &["-m", "finobt=0"], 300);
}

/// Big extent counters and 1 KiB inodes (16-block chunks, 8-block
/// clusters), no bigtime.
#[test]
fn ialloc_nrext64_big_inodes() {
    scenario(
        "nrext64",
        512 << 20,
        &["-i", "nrext64=1,size=1024", "-m", "bigtime=0"],
        300,
    );
}

/// rmapbt filesystems need rmap records for new chunks: refused.
#[test]
fn ialloc_refuses_rmapbt() {
    if !kernel_ok() {
        return;
    }
    let s = Scratch::new("ialloc-rmap");
    let img = s.path("img");
    mkfs(&img, 512 << 20, &["-m", "rmapbt=1"]);
    let mut tx = memtx(&img);
    let root = Ino(tx.sb().rootino);
    assert!(matches!(
        ialloc(&mut tx, root, &new_inode(1)),
        Err(rxfs::Error::NotSupported(_))
    ));
}

/// 1 KiB blocks: 60 inobt records per leaf, so ~80 new chunks split the
/// inobt (and the finobt while the chunks are all free).
#[test]
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

/// The fstests xfs/076 recipe (as in ag_kernel.rs): fill the filesystem
/// with one preallocated file, then from its end backwards punch a
/// chunk-sized hole every two chunks and create inodes until ENOSPC after
/// each punch: free space is too fragmented for whole chunks, so the
/// kernel makes sparse ones.
fn populate_sparse(root: &Path, punches: usize) {
    use std::os::fd::AsRawFd;
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

/// Inodes free in the kernel's sparse chunks (holes must never be handed
/// out), on a full filesystem: allocate every free inode, free them again.
#[test]
fn ialloc_from_kernel_sparse_chunks() {
    if !kernel_ok() {
        return;
    }
    let s = Scratch::new("ialloc-sparse");
    let img = s.path("img");
    mkfs(&img, 320 << 20, &[]);
    let m = KernelMount::new(&img, &s.path("mnt"), "");
    populate_sparse(&m.dir, 60);
    // Free every other inode of every punched directory.
    for e in std::fs::read_dir(&m.dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            for f in std::fs::read_dir(&p).unwrap() {
                let f = f.unwrap().path();
                let i: u64 = f.file_name().unwrap().to_str().unwrap().parse().unwrap();
                if i.is_multiple_of(2) {
                    std::fs::remove_file(&f).unwrap();
                }
            }
        }
    }
    m.umount();

    // Every free, present inode slot of every record, and the sparse ones.
    let fs = open_ro(&img);
    let before = inode_state(&fs);
    let mut free_slots = BTreeSet::new();
    let mut sparse_slots = BTreeSet::new();
    for agno in 0..fs.geo().agcount {
        let agno = AgNumber(agno);
        let agi = fs.read_agi(agno).unwrap();
        let root = BtreeRoot::from_agi(BtreeKind::Ino, agno, &agi);
        let recs: Vec<InobtRec> = fs.btree_records(&root).unwrap();
        for r in recs {
            for idx in 0..64 {
                if r.is_free(idx) && !r.is_hole(idx) {
                    let ino = fs
                        .geo()
                        .agino_to_ino(agno, rxfs::types::AgIno(r.startino + idx));
                    free_slots.insert(ino.0);
                    if r.holemask != 0 {
                        sparse_slots.insert(ino.0);
                    }
                }
            }
        }
    }
    drop(fs);
    let nfree: u64 = before.iter().map(|a| a.freecount).sum();
    assert_eq!(free_slots.len() as u64, nfree);
    assert!(!sparse_slots.is_empty(), "no free inode in a sparse chunk");

    let (inos, chunks) = alloc_all(&img, nfree as usize, 97);
    let new_ok = |ino: u64| chunks > 0 && !free_slots.contains(&ino);
    let mut from_sparse = 0;
    for (ino, _) in &inos {
        assert!(
            free_slots.contains(&ino.0) || new_ok(ino.0),
            "inode {} was not free",
            ino.0
        );
        from_sparse += sparse_slots.contains(&ino.0) as usize;
    }
    eprintln!(
        "sparse: {nfree} free inodes ({} in sparse chunks), {chunks} new chunks, {from_sparse} taken from sparse chunks",
        sparse_slots.len()
    );
    if chunks == 0 {
        assert_eq!(from_sparse, sparse_slots.len());
    } else {
        assert!(from_sparse > 0);
    }
    let fs = open_ro(&img);
    inode_state(&fs);
    for (ino, _) in &inos {
        assert!(fs.inode_allocated(*ino).unwrap());
    }
    drop(fs);
    free_all(&img, &inos, 200);
    assert_repair_clean(&img, "sparse: alloc + free");
    let after = inode_state(&open_ro(&img));
    if chunks == 0 {
        assert_eq!(after, before);
    }
}

/// Take every free block of AG `agno` (in one transaction, committed).
fn fill_ag(img: &Path, agno: u32) -> Vec<rxfs::alloc::AgExtent> {
    use rxfs::alloc::{alloc_extent, AllocReq};
    let mut tx = memtx(img);
    let agblocks = tx.geo().agblocks;
    let mut out = Vec::new();
    for _ in 0..10_000 {
        let req = AllocReq {
            agno: AgNumber(agno),
            near: None,
            minlen: 1,
            maxlen: agblocks,
            align: 1,
            any_ag: false,
            meta: false,
        };
        match alloc_extent(&mut tx, &req) {
            Ok(e) => out.push(e),
            Err(rxfs::Error::NoSpace) => break,
            Err(e) => panic!("filling AG {agno}: {e}"),
        }
    }
    tx.commit().unwrap();
    out
}

/// A full AG sends new chunks to the next AG; a full filesystem gives
/// NoSpace once the last free inode is gone; giving everything back
/// leaves a clean filesystem.
#[test]
fn ialloc_full_ags() {
    if !kernel_ok() {
        return;
    }
    let s = Scratch::new("ialloc-full");
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let before = inode_state(&open_ro(&img));
    assert_eq!(before.len(), 4);
    let free0 = before[0].freecount as usize;

    let mut extents = fill_ag(&img, 0);
    let (inos, chunks) = alloc_all(&img, free0 + 10, 50);
    let geo = open_ro(&img).geo().clone();
    let files: Vec<u32> = inos
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 16 != 0)
        .map(|(_, (ino, _))| geo.ino_agno(*ino).0)
        .collect();
    assert!(chunks >= 1);
    let in_ag0 = files.iter().filter(|&&a| a == 0).count();
    let dirs_in_ag0 = inos
        .iter()
        .enumerate()
        .filter(|(i, (ino, _))| i % 16 == 0 && geo.ino_agno(*ino).0 == 0)
        .count();
    assert_eq!(
        in_ag0 + dirs_in_ag0,
        free0,
        "AG 0 gave exactly its free inodes"
    );
    assert!(files.contains(&1), "files moved on to AG 1");

    // Fill the rest; then allocate until NoSpace.
    for agno in 1..4 {
        extents.extend(fill_ag(&img, agno));
    }
    let mut tx = memtx(&img);
    let root = Ino(tx.sb().rootino);
    let mut more = Vec::new();
    let err = loop {
        match ialloc(&mut tx, root, &new_inode(1)) {
            Ok((ino, _)) => more.push((ino, 0)),
            Err(e) => break e,
        }
        assert!(more.len() < 100_000);
    };
    assert!(matches!(err, rxfs::Error::NoSpace), "{err}");
    assert!(
        tx.icreates.is_empty(),
        "no room for a chunk, yet one was made"
    );
    tx.commit().unwrap();
    let full = inode_state(&open_ro(&img));
    assert_eq!(full.iter().map(|a| a.freecount).sum::<u64>(), 0);
    assert_eq!(
        more.len() as u64,
        inode_state(&open_ro(&img))
            .iter()
            .map(|a| a.count)
            .sum::<u64>()
            - before.iter().map(|a| a.count - a.freecount).sum::<u64>()
            - inos.len() as u64
    );

    // Give it all back.
    let mut tx = memtx(&img);
    for e in &extents {
        rxfs::alloc::free_extent(&mut tx, e.agno, e.agbno, e.len).unwrap();
    }
    tx.commit().unwrap();
    free_all(&img, &inos, 100);
    free_all(&img, &more, 100);
    assert_repair_clean(&img, "full AGs");
    let after = inode_state(&open_ro(&img));
    assert_eq!(after.iter().map(|a| a.count - a.freecount).sum::<u64>(), 3);
}

/// AG 0 with free space only in 4-block pieces at 4 mod 8: no whole
/// chunk fits, so sparse chunks (upper halves, holemask 0x00ff) are made;
/// then the lower halves are freed and the next chunks fill the holes of
/// those records (merge to holemask 0). Everything is given back at the
/// end and xfs_repair must be happy.
#[test]
fn ialloc_makes_sparse_chunks() {
    if !kernel_ok() {
        return;
    }
    let s = Scratch::new("ialloc-mksparse");
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let geo = open_ro(&img).geo().clone();
    assert_eq!(
        (geo.inoalignmt, geo.spino_align),
        (8, 4),
        "mkfs defaults changed"
    );
    let before = inode_state(&open_ro(&img));
    let agblocks = geo.ag_size(AgNumber(0)) as usize;
    // Blocks of AG 0 we hold (allocated by fill_ag, not yet given back).
    let mut owned = vec![false; agblocks];
    for e in fill_ag(&img, 0) {
        owned[e.agbno.0 as usize..(e.agbno.0 + e.len) as usize].fill(true);
    }
    let free_range = |img: &Path, owned: &mut Vec<bool>, ranges: &[(u32, u32)]| {
        let mut tx = memtx(img);
        for &(b, l) in ranges {
            assert!(owned[b as usize..(b + l) as usize].iter().all(|&o| o));
            owned[b as usize..(b + l) as usize].fill(false);
            rxfs::alloc::free_extent(&mut tx, AgNumber(0), rxfs::types::AgBlock(b), l).unwrap();
        }
        tx.commit().unwrap();
    };
    // 24 upper halves of 8-aligned chunks we own entirely.
    let bases: Vec<u32> = (1..agblocks / 8 - 1)
        .map(|k| (k * 8) as u32)
        .filter(|&b| owned[b as usize..b as usize + 8].iter().all(|&o| o))
        .step_by(3)
        .take(24)
        .collect();
    assert_eq!(bases.len(), 24);
    let uppers: Vec<(u32, u32)> = bases.iter().map(|&b| (b + 4, 4)).collect();
    free_range(&img, &mut owned, &uppers);

    // The root chunk's free inodes first, then sparse chunks in AG 0.
    let free0 = before[0].freecount as usize;
    let mut tx = memtx(&img);
    let root = Ino(tx.sb().rootino);
    let mut inos = Vec::new();
    for i in 0..free0 + 200 {
        let init = NewInode {
            mode: de::S_IFREG | 0o600,
            ..new_inode(i)
        };
        let (ino, _) = ialloc(&mut tx, root, &init).unwrap();
        inos.push((ino, 0));
    }
    let sparse_made: Vec<_> = tx.icreates.clone();
    tx.commit().unwrap();
    assert!(sparse_made.len() >= 200 / 32, "{sparse_made:?}");
    for &(agno, agbno, count, len, _) in &sparse_made {
        assert_eq!((agno, count, len), (AgNumber(0), 32, 4), "{sparse_made:?}");
        assert!(bases.contains(&(agbno.0 - 4)), "sparse chunk at {agbno:?}");
    }
    let fs = open_ro(&img);
    let st = inode_state(&fs);
    assert!(inos.iter().all(|(i, _)| fs.geo().ino_agno(*i).0 == 0));
    let holey = |fs: &Filesystem| -> Vec<InobtRec> {
        let agi = fs.read_agi(AgNumber(0)).unwrap();
        let root = BtreeRoot::from_agi(BtreeKind::Ino, AgNumber(0), &agi);
        let recs: Vec<InobtRec> = fs.btree_records(&root).unwrap();
        recs.into_iter().filter(|r| r.holemask != 0).collect()
    };
    let h = holey(&fs);
    assert_eq!(h.len(), sparse_made.len());
    assert!(h.iter().all(|r| r.holemask == 0x00ff && r.count == 32));
    assert_eq!(st[0].count, before[0].count + 32 * sparse_made.len() as u64);
    drop(fs);

    // Free the lower halves under the sparse chunks: the next chunks
    // complete those records.
    let lowers: Vec<(u32, u32)> = sparse_made.iter().map(|&(_, b, ..)| (b.0 - 4, 4)).collect();
    free_range(&img, &mut owned, &lowers);
    let free_now = inode_state(&open_ro(&img))[0].freecount as usize;
    let mut tx = memtx(&img);
    for i in 0..free_now + 64 {
        let init = NewInode {
            mode: de::S_IFREG | 0o600,
            ..new_inode(i)
        };
        let (ino, _) = ialloc(&mut tx, root, &init).unwrap();
        inos.push((ino, 0));
    }
    let merged: Vec<_> = tx.icreates.clone();
    tx.commit().unwrap();
    eprintln!(
        "sparse chunks made: {}, merged: {}",
        sparse_made.len(),
        merged.len()
    );
    assert!(merged.len() >= 2, "{merged:?}");
    for &(_, agbno, count, len, _) in &merged {
        assert_eq!((count, len), (32, 4));
        assert!(lowers.iter().any(|&(b, _)| b == agbno.0), "{agbno:?}");
    }
    let fs = open_ro(&img);
    inode_state(&fs);
    assert_eq!(holey(&fs).len(), sparse_made.len() - merged.len());
    for (ino, _) in &inos {
        assert!(fs.inode_allocated(*ino).unwrap());
    }
    drop(fs);

    // Give everything back.
    free_all(&img, &inos, 150);
    let mut runs = Vec::new();
    let mut b = 0;
    while b < agblocks {
        if owned[b] {
            let s0 = b;
            while b < agblocks && owned[b] {
                b += 1;
            }
            runs.push((s0 as u32, (b - s0) as u32));
        } else {
            b += 1;
        }
    }
    free_range(&img, &mut owned, &runs);
    assert_repair_clean(&img, "sparse chunks made and merged");
    let after = inode_state(&open_ro(&img));
    assert_eq!(
        after.iter().map(|a| a.count - a.freecount).sum::<u64>(),
        before.iter().map(|a| a.count - a.freecount).sum::<u64>()
    );
}
