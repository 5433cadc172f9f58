//! Attr fork mappings against the kernel oracle: `bmap::load/store`
//! with `WhichFork::Attr` on kernel-made EXTENTS and BTREE attr forks, and
//! `bmap::attrfork` mapping/unmapping blocks. After each change:
//! `xfs_repair -n` exit 0 and the kernel's xattrs intact.

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
/// sector start) of every mapped range.
fn kernel_attr_bmap(p: &Path) -> Vec<(u64, u64, u64)> {
    let out = run_output("xfs_io", &["-r", "-c", "bmap -a", p.to_str().unwrap()]);
    let text = String::from_utf8(out.stdout).unwrap();
    let mut v = Vec::new();
    for line in text.lines().skip(1) {
        // "\t0: [0..7]: 12345..12352"
        let parts: Vec<&str> = line.split(':').map(str::trim).collect();
        if parts.len() < 3 || parts[2] == "hole" {
            continue;
        }
        let fr = parts[1].trim_matches(|c| c == '[' || c == ']');
        let (a, b) = fr.split_once("..").unwrap();
        let (d, _) = parts[2].split_once("..").unwrap();
        v.push((a.parse().unwrap(), b.parse().unwrap(), d.parse().unwrap()));
    }
    v
}

/// The attr fork of a kernel-made file with a leaf block and remote
/// values (EXTENTS format): rxfs's map equals what the kernel's bmap
/// reports; storing it back unchanged is a no-op for repair; removing
/// every mapping (as xattr removal of the whole fork does) leaves a
/// consistent filesystem whose file has no xattrs.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn attr_fork_extents_load_store() {
    if skip() {
        return;
    }
    let s = Scratch::new("bmbt-attr-ext");
    let img = s.path("img");
    mkfs_with(&img, 64 << 20, &[], FSTESTS_ENV);
    let mnt = s.path("mnt");
    let m = KernelMount::new(&img, &mnt, "");
    let p = mnt.join("f");
    std::fs::write(&p, pattern(1, 10000)).unwrap();
    for i in 0..20 {
        set_xattr(&p, &format!("user.a{i:03}"), &pattern(100 + i, 200));
    }
    set_xattr(&p, "user.remote1", &pattern(7, 20000));
    set_xattr(&p, "user.remote2", &pattern(8, 9000));
    let kmap = kernel_attr_bmap(&p);
    use std::os::unix::fs::MetadataExt;
    let ino = Ino(std::fs::metadata(&p).unwrap().ino());
    m.umount();
    attr_fork_check(&s, &img, &p, ino, kmap, FMT_EXTENTS);
}

/// The same with a BTREE-format attr fork (two files' remote values
/// interleaved on 1 KiB blocks): the walk, and the conversion back to
/// EXTENTS (every bmbt block freed) when the fork is emptied.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn attr_fork_btree_load_store() {
    if skip() {
        return;
    }
    let s = Scratch::new("bmbt-attr-bt");
    let img = s.path("img");
    mkfs_with(&img, 64 << 20, &["-b", "size=1024"], FSTESTS_ENV);
    let mnt = s.path("mnt");
    let m = KernelMount::new(&img, &mnt, "");
    let p = mnt.join("f");
    let q = mnt.join("g");
    std::fs::write(&p, pattern(1, 10000)).unwrap();
    std::fs::write(&q, b"").unwrap();
    for i in 0..120 {
        set_xattr(&p, &format!("user.x{i:04}"), &pattern(i, 1500));
        set_xattr(&q, &format!("user.x{i:04}"), &pattern(i, 1500));
    }
    let kmap = kernel_attr_bmap(&p);
    use std::os::unix::fs::MetadataExt;
    let ino = Ino(std::fs::metadata(&p).unwrap().ino());
    m.umount();
    attr_fork_check(&s, &img, &p, ino, kmap, rxfs::format::inode::FMT_BTREE);
}

fn attr_fork_check(
    s: &Scratch,
    img: &Path,
    p: &Path,
    ino: Ino,
    kmap: Vec<(u64, u64, u64)>,
    format: u8,
) {
    let mnt = s.path("mnt");
    assert!(!kmap.is_empty(), "the kernel made no attr fork blocks");
    let dev = open_dev(img);
    // Load: same mappings as the kernel reports.
    let mut tx = MemTx::new(dev.clone()).unwrap();
    let ip = tx.ijoin(ino).unwrap();
    assert_eq!(di::aformat(tx.inode(ip)), format);
    let (map, max) = bmap::load(&mut tx, ip, WhichFork::Attr).unwrap();
    assert!(max >= map.exts.len());
    let geo = tx.geo().clone();
    let sec = geo.blocksize as u64 / 512;
    let mut got: Vec<(u64, u64, u64)> = map
        .exts
        .iter()
        .map(|e| {
            (
                e.off.0 * sec,
                e.end() * sec - 1,
                geo.fsb_to_daddr(FsBlock(e.start)).0,
            )
        })
        .collect();
    // The kernel's bmap merges nothing we did not: compare range by range
    // after joining adjacent ranges on both sides.
    let join = |v: &mut Vec<(u64, u64, u64)>| {
        let mut out: Vec<(u64, u64, u64)> = Vec::new();
        for r in v.drain(..) {
            if let Some(l) = out.last_mut() {
                if l.1 + 1 == r.0 && l.2 + (l.1 + 1 - l.0) == r.2 {
                    l.1 = r.1;
                    continue;
                }
            }
            out.push(r);
        }
        *v = out;
    };
    let mut kmap = kmap;
    join(&mut got);
    join(&mut kmap);
    assert_eq!(got, kmap, "attr fork map vs the kernel's bmap -a");
    // Store unchanged: the same inode bytes.
    let before = tx.inode(ip).to_vec();
    bmap::store(&mut tx, ip, WhichFork::Attr, &map, &map, 0).unwrap();
    assert_eq!(tx.inode(ip), &before[..]);
    tx.commit().unwrap();
    repair_ok(img);

    // Remove the whole attr fork: free its blocks, empty map, no fork.
    let mut tx = MemTx::new(dev.clone()).unwrap();
    let ip = tx.ijoin(ino).unwrap();
    let (map, _) = bmap::load(&mut tx, ip, WhichFork::Attr).unwrap();
    let empty = bmap::ExtentMap::new(Vec::new(), map.agblklog);
    let blocks = map.blocks();
    for e in &map.exts {
        let f = FsBlock(e.start);
        let (agno, agbno) = (geo.fsb_agno(f), geo.fsb_agbno(f));
        tx.defer_free(agno, agbno, e.len as u32).unwrap();
    }
    let nb0 = di::nblocks(tx.inode(ip));
    bmap::store(&mut tx, ip, WhichFork::Attr, &map, &empty, -(blocks as i64)).unwrap();
    assert_eq!(di::anextents(tx.inode(ip)), 0);
    let nb1 = di::nblocks(tx.inode(ip));
    if format == FMT_EXTENTS {
        assert_eq!(nb1, nb0 - blocks);
    } else {
        assert!(nb1 < nb0 - blocks, "bmbt blocks not freed");
    }
    let d = tx.inode_mut(ip);
    di::set_forkoff(d, 0);
    di::set_aformat(d, FMT_EXTENTS);
    tx.commit().unwrap();
    drop(dev);
    repair_ok(img);
    let m = KernelMount::new(img, &mnt, "");
    let names = run_output("getfattr", &["-d", "-m", "-", p.to_str().unwrap()]);
    assert!(
        String::from_utf8_lossy(&names.stdout).trim().is_empty(),
        "xattrs left: {}",
        String::from_utf8_lossy(&names.stdout)
    );
    assert_eq!(std::fs::read(p).unwrap(), pattern(1, 10000));
    m.umount();
}

/// `bmap::attrfork`: blocks mapped into and unmapped from a kernel-made
/// attr fork (EXTENTS), one at a time at scattered offsets, so that the
/// fork becomes a bmbt and back; the kernel's xattrs are intact and the
/// image passes repair at each stage.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn attrfork_alloc_free_grows_and_shrinks() {
    use rxfs::bmap::attrfork::{attr_alloc, attr_free, attr_map};
    use rxfs::format::inode::FMT_BTREE;
    use rxfs::types::FileBlock;
    if skip() {
        return;
    }
    let s = Scratch::new("bmbt-attrfork");
    let img = s.path("img");
    mkfs_with(&img, 64 << 20, &[], FSTESTS_ENV);
    let mnt = s.path("mnt");
    let m = KernelMount::new(&img, &mnt, "");
    let p = mnt.join("f");
    std::fs::write(&p, pattern(1, 5000)).unwrap();
    for i in 0..30 {
        set_xattr(&p, &format!("user.a{i:03}"), &pattern(100 + i, 150));
    }
    set_xattr(&p, "user.remote", &pattern(7, 9000));
    let want = run_output(
        "getfattr",
        &["-d", "-m", "-", "-e", "hex", p.to_str().unwrap()],
    )
    .stdout;
    use std::os::unix::fs::MetadataExt;
    let ino = Ino(std::fs::metadata(&p).unwrap().ino());
    m.umount();
    let dev = open_dev(&img);
    let (n0, aformat, geo) = {
        let mut tx = MemTx::new(dev.clone()).unwrap();
        let ip = tx.ijoin(ino).unwrap();
        let n0 = attr_map(&mut tx, ip).unwrap().exts.len();
        (n0, di::aformat(tx.inode(ip)), tx.geo().clone())
    };
    assert_eq!(aformat, FMT_EXTENTS);
    // Far offsets, every other block: none merge.
    for i in 0..40u64 {
        let mut tx = MemTx::new(dev.clone()).unwrap();
        let ip = tx.ijoin(ino).unwrap();
        let new = attr_alloc(&mut tx, ip, ino, FileBlock(5000 + 2 * i), 1).unwrap();
        assert_eq!(new.len(), 1);
        // Nothing references the block: zero it so stale bytes never
        // matter.
        tx.commit().unwrap();
        let z = vec![0u8; 4096];
        dev.write_at(&z, geo.fsb_to_daddr(FsBlock(new[0].start)).bytes())
            .unwrap();
    }
    {
        let mut tx = MemTx::new(dev.clone()).unwrap();
        let ip = tx.ijoin(ino).unwrap();
        assert_eq!(di::aformat(tx.inode(ip)), FMT_BTREE);
        assert_eq!(attr_map(&mut tx, ip).unwrap().exts.len(), n0 + 40);
    }
    repair_ok(&img);
    for i in 0..40u64 {
        let mut tx = MemTx::new(dev.clone()).unwrap();
        let ip = tx.ijoin(ino).unwrap();
        attr_free(&mut tx, ip, FileBlock(5000 + 2 * i), 1).unwrap();
        tx.commit().unwrap();
    }
    {
        let mut tx = MemTx::new(dev.clone()).unwrap();
        let ip = tx.ijoin(ino).unwrap();
        assert_eq!(di::aformat(tx.inode(ip)), FMT_EXTENTS);
        assert_eq!(attr_map(&mut tx, ip).unwrap().exts.len(), n0);
    }
    drop(dev);
    repair_ok(&img);
    let m = KernelMount::new(&img, &mnt, "ro");
    let got = run_output(
        "getfattr",
        &["-d", "-m", "-", "-e", "hex", p.to_str().unwrap()],
    )
    .stdout;
    assert_eq!(got, want, "xattrs changed");
    m.umount();
}
