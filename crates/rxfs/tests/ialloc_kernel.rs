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

fn scenario(name: &str, size: u64, mkfs_opts: &[&str], n: usize) {
    if !kernel_ok() {
        return;
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
    }
    drop(fs);
    check_with_xfs_db(&img, &after);
    // Nothing links the new inodes: repair may only complain about that.
    let (_, text) = repair(&img);
    for l in text.lines() {
        let l = l.to_lowercase();
        assert!(
            !(l.contains("bad")
                || l.contains("corrupt")
                || l.contains("mismatch")
                || l.contains("would fix")
                || l.contains("claims")),
            "{name}: xfs_repair -n after alloc: {l}\n{text}"
        );
    }

    // ---- free ----
    free_all(&img, &inos, 53);
    assert_repair_clean(&img, &format!("{name}: alloc + free"));
    let freed = inode_state(&open_ro(&img));
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

/// 1 KiB blocks: 60 inobt records per leaf, so ~80 new chunks split the
/// inobt (and the finobt while the chunks are all free).
#[test]
fn ialloc_btree_splits() {
    scenario("split", 512 << 20, &["-b", "size=1024"], 5000);
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
