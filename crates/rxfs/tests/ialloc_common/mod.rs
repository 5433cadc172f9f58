//! Helpers shared by the inode allocation kernel tests.

#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use crate::common::*;
use rxfs::bdev::FileDevice;
use rxfs::btree::walk::BtreeRoot;
use rxfs::format::btree::{BtreeKind, InobtRec};
use rxfs::format::dinode_edit as de;
use rxfs::format::inode::Timestamp;
use rxfs::ialloc::{ialloc, ifree, NewInode};
use rxfs::recover::memtx::MemTx;
use rxfs::types::{AgNumber, Ino};
use rxfs::xact::MetaTx;
use rxfs::Filesystem;

pub fn kernel_ok() -> bool {
    if kernel_tests_disabled() {
        return false;
    }
    require_root();
    require_tools(&["mkfs.xfs", "xfs_repair", "xfs_db", "mount"]);
    true
}

/// An unlogged transaction on `img`, with a directory rotor of its own
/// per image (placement independent of the other tests in the process).
pub fn memtx(img: &Path) -> MemTx {
    use std::collections::HashMap;
    use std::sync::atomic::AtomicU32;
    use std::sync::Mutex;
    static ROTORS: Mutex<Option<HashMap<std::path::PathBuf, Arc<AtomicU32>>>> = Mutex::new(None);
    let dev = Arc::new(FileDevice::open(img, false, false).unwrap());
    let mut tx = MemTx::new(dev).unwrap();
    let rotor = ROTORS
        .lock()
        .unwrap()
        .get_or_insert_with(HashMap::new)
        .entry(img.to_path_buf())
        .or_default()
        .clone();
    tx.dir_rotor = Some(rotor);
    tx
}

/// Inode counts per AG, checked for internal consistency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgInodes {
    pub count: u64,
    pub freecount: u64,
    pub chunks: usize,
}

/// Walk every AG's inode btrees through the read path and check them
/// against the AGI; return the counts.
pub fn inode_state(fs: &Filesystem) -> Vec<AgInodes> {
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
pub fn max_levels(fs: &Filesystem) -> (u32, u32) {
    let mut m = (0, 0);
    for agno in 0..fs.geo().agcount {
        let agi = fs.read_agi(AgNumber(agno)).unwrap();
        m.0 = m.0.max(agi.level);
        m.1 = m.1.max(agi.free_level);
    }
    m
}

/// `xfs_db -r -c CMD -c 'p FIELD..'` values, by field name.
pub fn xfs_db_fields(img: &Path, cmd: &str, fields: &[&str]) -> Vec<u64> {
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
pub fn check_with_xfs_db(img: &Path, state: &[AgInodes]) {
    for (agno, s) in state.iter().enumerate() {
        let v = xfs_db_fields(img, &format!("agi {agno}"), &["count", "freecount"]);
        assert_eq!(v, vec![s.count, s.freecount], "xfs_db agi {agno}");
    }
    let v = xfs_db_fields(img, "sb 0", &["icount", "ifree"]);
    let icount: u64 = state.iter().map(|s| s.count).sum();
    let ifree: u64 = state.iter().map(|s| s.freecount).sum();
    assert_eq!(v, vec![icount, ifree], "xfs_db sb 0 icount/ifree");
}

pub fn repair(img: &Path) -> (bool, String) {
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

pub fn assert_repair_clean(img: &Path, when: &str) {
    let (ok, text) = repair(img);
    assert!(ok, "xfs_repair -n after {when}:\n{text}");
}

pub fn new_inode(i: usize) -> NewInode {
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

/// Make new directory `ip` an empty shortform directory under `parent`
/// (what dirop's dir_init writes): count 0, i8count 0, 4-byte parent.
pub fn empty_sf_dir(tx: &mut dyn MetaTx, ip: rxfs::xact::InodeId, parent: Ino) {
    let d = tx.inode_mut(ip);
    assert_eq!(de::format(d), rxfs::format::inode::FMT_EXTENTS);
    assert!(parent.0 <= u32::MAX as u64);
    de::set_format(d, rxfs::format::inode::FMT_LOCAL);
    de::data_fork_mut(d)[..2].fill(0);
    de::data_fork_mut(d)[2..6].copy_from_slice(&(parent.0 as u32).to_be_bytes());
    de::set_size(d, 6);
}

/// Allocate `n` inodes in transactions of `per_tx`; returns (ino, gen)
/// and the number of chunks created.
pub fn alloc_all(img: &Path, n: usize, per_tx: usize) -> (Vec<(Ino, u32)>, usize) {
    let mut out = Vec::new();
    let mut chunks = 0;
    let mut i = 0;
    while i < n {
        let mut tx = memtx(img);
        let root = Ino(tx.sb().rootino);
        for _ in 0..per_tx.min(n - i) {
            let (ino, ip) = ialloc(&mut tx, root, &new_inode(i)).unwrap();
            if new_inode(i).mode & de::S_IFMT == de::S_IFDIR {
                empty_sf_dir(&mut tx, ip, root);
            }
            let d = tx.inode(ip);
            assert_eq!(de::ino(d), ino.0);
            assert_eq!(de::mode(d) as u32, new_inode(i).mode);
            out.push((ino, de::gen(d)));
            i += 1;
        }
        chunks += tx.icreates.len();
        for ic in &tx.icreates {
            let geo = tx.geo();
            assert_eq!(ic.2 * geo.inodesize, ic.3 * geo.blocksize, "icreate {ic:?}");
        }
        tx.commit().unwrap();
    }
    (out, chunks)
}

pub fn free_all(img: &Path, inos: &[(Ino, u32)], per_tx: usize) {
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

/// xfs_repair -n may only report `n` disconnected inodes (never linked
/// into a directory) and their link counts, nothing else.
pub fn assert_repair_only_disconnected(img: &Path, n: usize, name: &str) {
    let (_, text) = repair(img);
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
}

/// The fstests xfs/076 recipe (as in ag_kernel.rs): fill the filesystem
/// with one preallocated file, then from its end backwards punch a
/// chunk-sized hole every two chunks and create inodes until ENOSPC after
/// each punch: free space is too fragmented for whole chunks, so the
/// kernel makes sparse ones.
pub fn populate_sparse(root: &Path, punches: usize) {
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

/// Take every free block of AG `agno` (in one transaction, committed).
pub fn fill_ag(img: &Path, agno: u32) -> Vec<rxfs::alloc::AgExtent> {
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
