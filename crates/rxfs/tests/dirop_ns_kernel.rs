//! Namespace operations (`rxfs::ns`: create, mkdir, unlink,
//! rmdir) against the kernel and xfs_repair: through an unlogged `MemTx`
//! on a kernel-made tree, and through the `Filesystem` wrappers of a
//! read-write mount. After each round `xfs_repair -n` exits 0 and our read
//! path and the kernel (loop mount, read-only) see exactly the model:
//! names, inode numbers, file kinds, link counts.

mod common;
mod dirop_support;

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirEntryExt, MetadataExt};
use std::path::{Path, PathBuf};

use common::*;
use dirop_support::*;
use rxfs::ns;
use rxfs::types::Ino;
use rxfs::xact::MetaTx;

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
            assert_eq!(ns::unlink(&mut tx, dp, &name, ts(*clock)).unwrap().0, ino);
            let n = t.nlink.get_mut(&ino).unwrap();
            *n -= 1;
            if *n == 0 {
                t.nlink.remove(&ino);
            }
        } else {
            assert_eq!(ns::rmdir(&mut tx, dp, &name, ts(*clock)).unwrap().0, ino);
            t.dirs.remove(&ino);
        }
        tx.commit().unwrap();
        t.dirs.get_mut(&d).unwrap().1.remove(&name);
    }
}

/// The kernel's starting tree: `/work` (empty), `/kdata` (12 files with
/// data), `/kblk` (40 files: a block directory). Returns the model and the
/// inode numbers of the root, kblk and kdata.
fn kernel_tree(img: &Path, mnt: &Path) -> (Tree, u64, u64, u64) {
    let mut t = Tree {
        dirs: BTreeMap::new(),
        nlink: BTreeMap::new(),
    };
    let m = KernelMount::new(img, mnt, "");
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
    let root = std::fs::metadata(mnt).unwrap().ino();
    let subs: BTreeMap<_, _> = t
        .dirs
        .iter()
        .map(|(i, (p, _))| (p.as_os_str().as_bytes().to_vec(), (*i, Kind::Dir)))
        .collect();
    t.dirs.insert(root, (PathBuf::new(), subs));
    m.umount();
    let by = |p: &str| {
        *t.dirs
            .iter()
            .find(|(_, (pp, _))| pp == Path::new(p))
            .unwrap()
            .0
    };
    let (kblk, kdata) = (by("kblk"), by("kdata"));
    (t, root, kblk, kdata)
}

/// create / mkdir / unlink / rmdir through `dirop::ns` in random sequences,
/// on a kernel-made tree with data files and a block directory, which ends
/// up emptied (converted back to shortform) and removed.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn dirop_namespace_ops_kernel() {
    if !kernel_ok() {
        return;
    }
    let scratch = Scratch::new("dirop-ns");
    let img = scratch.path("img");
    let mnt = scratch.path("mnt");
    mkfs(&img, 320 << 20, &[]);
    let (mut t, root, kblk, kdata) = kernel_tree(&img, &mnt);
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
                    let args = ns::NsCreate {
                        mode,
                        uid: 1000,
                        gid: 100,
                        rdev: (1 << 18) | 3,
                        umask: 0,
                        time: ts(clock),
                        alloc_from_ag0: false,
                    };
                    let r = ns::create(&mut tx, dp, &name, &args);
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
                    let args = ns::NsCreate {
                        mode: 0o040755,
                        uid: 0,
                        gid: 0,
                        rdev: 0,
                        umask: 0,
                        time: ts(clock),
                        alloc_from_ag0: false,
                    };
                    let (ino, _) = ns::mkdir(&mut tx, dp, &name, &args).unwrap();
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
                    let r = ns::rmdir(&mut tx, dp, &name, ts(clock));
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
                        let r = ns::unlink(&mut tx, sdp, &sname, ts(clock));
                        assert!(matches!(r, Err(rxfs::Error::IsDir)), "{r:?}");
                        errs += 1;
                    }
                    let r = ns::unlink(&mut tx, dp, &name, ts(clock)).unwrap();
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
            ns::rmdir(&mut tx, dp, name.as_bytes(), ts(clock))
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

/// [`empty_tree`] through the `Filesystem` wrappers.
fn fs_empty_tree(fs: &rxfs::Filesystem, t: &mut Tree, d: u64) {
    let names: Vec<(Vec<u8>, u64, Kind)> = t.dirs[&d]
        .1
        .iter()
        .map(|(n, (i, k))| (n.clone(), *i, *k))
        .collect();
    for (name, ino, kind) in names {
        if kind == Kind::Dir {
            fs_empty_tree(fs, t, ino);
            fs.rmdir(Ino(d), &name).unwrap();
            t.dirs.remove(&ino);
        } else {
            fs.unlink(Ino(d), &name).unwrap();
            t.nlink.remove(&ino);
        }
        t.dirs.get_mut(&d).unwrap().1.remove(&name);
    }
}

fn open_rw(img: &Path) -> std::sync::Arc<rxfs::Filesystem> {
    let dev: std::sync::Arc<dyn rxfs::bdev::BlockDevice> =
        std::sync::Arc::new(rxfs::bdev::FileDevice::open(img, false, false).unwrap());
    let opts = rxfs::MountOptions {
        read_only: false,
        ..Default::default()
    };
    rxfs::Filesystem::open(dev, None, opts).unwrap()
}

/// The same operations through the `Filesystem` wrappers of a read-write
/// mount (inode locks, logged transactions, commit), checked live through
/// the read path, then after unmount by xfs_repair and the kernel; the
/// modes, owners and device numbers given are what the kernel sees.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn dirop_filesystem_ns_ops_kernel() {
    use rxfs::fs::ops_ns::CreateArgs;
    use rxfs::Error;
    if !kernel_ok() {
        return;
    }
    let scratch = Scratch::new("dirop-fsns");
    let img = scratch.path("img");
    let mnt = scratch.path("mnt");
    mkfs(&img, 320 << 20, &[]);
    let (mut t, root, kblk, kdata) = kernel_tree(&img, &mnt);
    // Inode -> (mode, uid, gid, Linux rdev) of what we create.
    let mut meta: BTreeMap<u64, (u32, u32, u32, u64)> = BTreeMap::new();
    let fs = open_rw(&img);
    let mut rng = Rng::new(99);
    let mut counts = [0usize; 5];
    let dev = libc::makedev(1, 3);
    for step in 0..400 {
        let dirs: Vec<u64> = t.dirs.keys().copied().collect();
        let d = dirs[rng.below(dirs.len() as u64) as usize];
        match rng.below(10) {
            0..=3 => {
                let max = if rng.below(8) == 0 { 255 } else { 30 };
                let name = rng.name(1, max);
                let mode = [0o100644, 0o010600, 0o140755, 0o020600][rng.below(4) as usize];
                let args = CreateArgs {
                    mode,
                    uid: 1000 + step,
                    gid: 100,
                    rdev: dev as u32,
                    umask: 0,
                };
                let r = fs.create(Ino(d), &name, &args);
                if t.dirs[&d].1.contains_key(&name) {
                    assert!(matches!(r, Err(Error::Exists)), "{r:?}");
                    counts[4] += 1;
                    continue;
                }
                let ip = r.unwrap();
                assert_eq!(ip.core.mode as u32, mode);
                let rdev = if mode & 0o170000 == 0o020000 { dev } else { 0 };
                meta.insert(ip.ino.0, (mode, 1000 + step, 100, rdev));
                t.nlink.insert(ip.ino.0, 1);
                t.dirs
                    .get_mut(&d)
                    .unwrap()
                    .1
                    .insert(name, (ip.ino.0, Kind::File));
                counts[0] += 1;
            }
            4 | 5 => {
                let name = rng.name(1, 20);
                let args = CreateArgs {
                    mode: 0o040750,
                    uid: 7,
                    gid: 8,
                    rdev: 0,
                    umask: 0,
                };
                let r = fs.mkdir(Ino(d), &name, &args);
                if t.dirs[&d].1.contains_key(&name) {
                    assert!(matches!(r, Err(Error::Exists)), "{r:?}");
                    continue;
                }
                let ip = r.unwrap();
                meta.insert(ip.ino.0, (0o040750, 7, 8, 0));
                let path = t.dirs[&d].0.join(std::ffi::OsStr::from_bytes(&name));
                t.dirs
                    .get_mut(&d)
                    .unwrap()
                    .1
                    .insert(name, (ip.ino.0, Kind::Dir));
                t.dirs.insert(ip.ino.0, (path, BTreeMap::new()));
                counts[1] += 1;
            }
            6 => {
                let subs = t.subdirs();
                if subs.is_empty() {
                    continue;
                }
                let (pd, name, ino) = subs[rng.below(subs.len() as u64) as usize].clone();
                // Unlink refuses a directory whatever it holds.
                assert!(matches!(fs.unlink(Ino(pd), &name), Err(Error::IsDir)));
                let r = fs.rmdir(Ino(pd), &name);
                if !t.dirs[&ino].1.is_empty() {
                    assert!(matches!(r, Err(Error::NotEmpty)), "{r:?}");
                    counts[4] += 1;
                    continue;
                }
                r.unwrap();
                t.dirs.get_mut(&pd).unwrap().1.remove(&name);
                t.dirs.remove(&ino);
                counts[2] += 1;
            }
            _ => {
                let files = t.files();
                if files.is_empty() {
                    continue;
                }
                let (pd, name, ino) = files[rng.below(files.len() as u64) as usize].clone();
                if rng.below(4) == 0 {
                    assert!(matches!(fs.rmdir(Ino(pd), &name), Err(Error::NotDir)));
                }
                fs.unlink(Ino(pd), &name).unwrap();
                assert!(matches!(fs.unlink(Ino(pd), &name), Err(Error::NotFound)));
                t.dirs.get_mut(&pd).unwrap().1.remove(&name);
                t.nlink.remove(&ino);
                counts[3] += 1;
            }
        }
        // Live: the read path of the mount sees the change (d may just
        // have been removed: then look at the root).
        let d = if t.dirs.contains_key(&d) { d } else { root };
        let dir = fs.iget(Ino(d)).unwrap();
        let mut got = BTreeMap::new();
        fs.readdir(&dir, 0, &mut |e| {
            if e.name != b"." && e.name != b".." {
                got.insert(e.name.clone(), e.ino.0);
            }
            true
        })
        .unwrap();
        let want: BTreeMap<_, _> = t.dirs[&d]
            .1
            .iter()
            .map(|(n, (i, _))| (n.clone(), *i))
            .collect();
        assert_eq!(got, want, "live readdir after step {step}");
    }
    assert!(matches!(
        fs.create(
            Ino(root),
            &[b'x'; 256],
            &CreateArgs {
                mode: 0o100644,
                uid: 0,
                gid: 0,
                rdev: 0,
                umask: 0,
            }
        ),
        Err(Error::NameTooLong)
    ));
    // Empty the block directory through the wrappers (back to shortform)
    // and remove it.
    fs_empty_tree(&fs, &mut t, kblk);
    assert_eq!(form_of(&fs, kblk), Form::Short);
    fs.rmdir(Ino(root), b"kblk").unwrap();
    t.dirs.remove(&kblk);
    t.dirs.get_mut(&root).unwrap().1.remove(b"kblk".as_slice());
    let _ = kdata;
    fs.unmount().unwrap();
    drop(fs);
    verify_tree(&img, &mnt, &t);
    let m = KernelMount::new(&img, &mnt, "ro");
    for (d, (path, ents)) in &t.dirs {
        let _ = d;
        for (n, (i, _)) in ents {
            if let Some(&(mode, uid, gid, rdev)) = meta.get(i) {
                let md =
                    std::fs::symlink_metadata(mnt.join(path).join(std::ffi::OsStr::from_bytes(n)))
                        .unwrap();
                assert_eq!(
                    (md.mode(), md.uid(), md.gid(), md.rdev()),
                    (mode, uid, gid, rdev),
                    "attributes of {i}"
                );
            }
        }
    }
    m.umount();
    eprintln!(
        "filesystem ns: create {} mkdir {} rmdir {} unlink {}, refused {}",
        counts[0], counts[1], counts[2], counts[3], counts[4]
    );
    assert!(counts[..4].iter().all(|&c| c > 5), "{counts:?}");
}

/// A directory whose AG (and every higher one) is full gets its block from
/// AG 0 when asked to (the wrappers' retry after `NoSpace`).
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn dirop_block_from_ag0_when_high_ags_are_full_kernel() {
    use rxfs::alloc::{alloc_extent, free_extent, AllocReq};
    use rxfs::types::{AgBlock, AgNumber};
    if !kernel_ok() {
        return;
    }
    let scratch = Scratch::new("dirop-ag0");
    let img = scratch.path("img");
    let mnt = scratch.path("mnt");
    mkfs(&img, 320 << 20, &["-d", "agcount=4"]);
    let m = KernelMount::new(&img, &mnt, "");
    let mut dirs = Vec::new();
    for d in ["a", "b", "c", "d"] {
        std::fs::create_dir(mnt.join(d)).unwrap();
        dirs.push(std::fs::metadata(mnt.join(d)).unwrap().ino());
    }
    m.umount();
    let mut tx = memtx(&img);
    let geo = tx.geo().clone();
    let (dir, dag) = dirs
        .iter()
        .map(|&i| (i, geo.ino_agno(Ino(i)).0))
        .max_by_key(|&(_, a)| a)
        .unwrap();
    assert!(dag >= 1, "all test directories in AG 0");
    // Fill the directory's AG and every higher one.
    let mut fillers = Vec::new();
    for ag in dag..geo.agcount {
        loop {
            let req = AllocReq {
                agno: AgNumber(ag),
                near: None,
                minlen: 1,
                maxlen: geo.agblocks,
                align: 1,
                any_ag: false,
                meta: false,
            };
            match alloc_extent(&mut tx, &req) {
                Ok(e) => fillers.push(e),
                Err(rxfs::Error::NoSpace) => break,
                Err(e) => panic!("filling AG {ag}: {e}"),
            }
        }
    }
    tx.commit().unwrap();
    let args = |i: u64, ag0| ns::NsCreate {
        mode: 0o100644,
        uid: 0,
        gid: 0,
        rdev: 0,
        umask: 0,
        time: ts(1_700_000_000 + i as i64),
        alloc_from_ag0: ag0,
    };
    let mut names = Vec::new();
    let mut refused = None;
    for i in 0..100u64 {
        let name = format!("file-with-a-long-name-{i:04}").into_bytes();
        let mut tx = memtx(&img);
        let dp = tx.ijoin(Ino(dir)).unwrap();
        match ns::create(&mut tx, dp, &name, &args(i, false)) {
            Ok(_) => {
                tx.commit().unwrap();
                names.push(name);
            }
            Err(rxfs::Error::NoSpace) => {
                drop(tx);
                let mut tx = memtx(&img);
                let dp = tx.ijoin(Ino(dir)).unwrap();
                ns::create(&mut tx, dp, &name, &args(i, true)).unwrap();
                let d = tx.inode(dp);
                assert_eq!(rxfs::format::dinode_edit::format(d), 2, "extents");
                let fork = rxfs::format::dinode_edit::data_fork(d);
                let ext = rxfs::format::bmbt::Extent::decode(&fork[..16]);
                let agno = geo.fsb_agno(rxfs::types::FsBlock(ext.start));
                tx.commit().unwrap();
                names.push(name);
                refused = Some((i, agno));
                break;
            }
            Err(e) => panic!("create {i}: {e}"),
        }
    }
    let (at, agno) = refused.expect("the shortform directory never needed a block");
    assert!(agno.0 < dag, "block in AG {}, dir in AG {dag}", agno.0);
    eprintln!(
        "ag0 retry: {at} entries in shortform, block from AG {}",
        agno.0
    );
    let mut tx = memtx(&img);
    for e in &fillers {
        free_extent(&mut tx, e.agno, AgBlock(e.agbno.0), e.len).unwrap();
    }
    tx.commit().unwrap();
    let out = std::process::Command::new("xfs_repair")
        .args(["-n", img.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "xfs_repair -n: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let m = KernelMount::new(&img, &mnt, "ro");
    let d = ["a", "b", "c", "d"][dirs.iter().position(|&i| i == dir).unwrap()];
    let mut got: Vec<Vec<u8>> = std::fs::read_dir(mnt.join(d))
        .unwrap()
        .map(|e| e.unwrap().file_name().as_bytes().to_vec())
        .collect();
    got.sort();
    names.sort();
    assert_eq!(got, names);
    m.umount();
}

/// A shortform directory churned by creates and unlinks keeps its entries'
/// data-block offsets, so its holes fragment; an addition that no longer
/// fits the inode then converts it to a block whose free space has no
/// room for the entry. The kernel goes on to the leaf form in the same
/// transaction (sf -> block -> leaf); rxfs used to answer EOPNOTSUPP
/// ("leaf directories") there. Every operation must succeed, and the
/// kernel and xfs_repair must agree with the model afterwards.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn shortform_churn_converts_through_block_to_leaf() {
    use rxfs::fs::ops_ns::CreateArgs;
    if !kernel_ok() {
        return;
    }
    let scratch = Scratch::new("dirop-sfchurn");
    let img = scratch.path("img");
    let mnt = scratch.path("mnt");
    mkfs(&img, 320 << 20, &[]);
    let fs = open_rw(&img);
    let args = |mode| CreateArgs {
        mode,
        uid: 0,
        gid: 0,
        rdev: 0,
        umask: 0,
    };
    let root = fs.root_ino();
    let mut forms = BTreeMap::new();
    let mut models = Vec::new();
    // Per directory: one entry kept at the front; a second one replaced
    // `k` times (create the next, unlink the last), so offsets are
    // appended towards the end of the block; the last one stays. Then
    // more entries: they go into the front hole until the block form's
    // leaf would reach the last entry, and the directory must leave the
    // shortform through the block into the leaf form. (`k` around the
    // number of appends that fit, so one of them lands exactly there.)
    for k in 150..=175u32 {
        let dname = format!("w{k}");
        let d = fs
            .mkdir(root, dname.as_bytes(), &args(0o040755))
            .unwrap()
            .ino;
        let mut model: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
        let mut create = |model: &mut BTreeMap<Vec<u8>, u64>, name: Vec<u8>| {
            let ip = fs
                .create(d, &name, &args(0o100644))
                .unwrap_or_else(|e| panic!("{dname}: create with {} entries: {e}", model.len()));
            model.insert(name, ip.ino.0);
            let dip = fs.iget(d).unwrap();
            *forms
                .entry((dip.core.format, dip.core.nblocks > 1))
                .or_insert(0usize) += 1;
        };
        create(&mut model, b"keep".to_vec());
        for i in 0..=k {
            create(&mut model, format!("n{i:04}").into_bytes());
            if i > 0 {
                let old = format!("n{:04}", i - 1).into_bytes();
                fs.unlink(d, &old).unwrap();
                model.remove(&old);
            }
        }
        for j in 0..10 {
            create(&mut model, format!("m{j:04}").into_bytes());
        }
        models.push((dname, model));
    }
    for (dname, model) in &models {
        let d = fs
            .lookup(&fs.iget(root).unwrap(), dname.as_bytes())
            .unwrap();
        let dip = fs.iget(d).unwrap();
        for (name, ino) in model {
            let got = fs.lookup(&dip, name).unwrap_or_else(|e| {
                panic!(
                    "{dname}: rxfs lookup of {}: {e}",
                    String::from_utf8_lossy(name)
                )
            });
            assert_eq!(got.0, *ino);
        }
    }
    fs.unmount().unwrap();
    drop(fs);
    eprintln!("directory forms seen (format, more than one block): {forms:?}");
    assert!(
        forms.keys().any(|(_, big)| *big),
        "the churn never needed the leaf form: {forms:?}"
    );
    let out = std::process::Command::new("xfs_repair")
        .args(["-n", img.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "xfs_repair -n: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let km = KernelMount::new(&img, &mnt, "ro");
    for (dname, model) in &models {
        let mut got = BTreeMap::new();
        for e in std::fs::read_dir(mnt.join(dname)).unwrap() {
            let e = e.unwrap();
            got.insert(e.file_name().as_bytes().to_vec(), e.ino());
        }
        assert_eq!(
            &got, model,
            "{dname}: the kernel's listing differs from the model"
        );
        // Lookups by name (the leaf hash index, not the data blocks).
        for (name, ino) in model {
            let p = mnt.join(dname).join(std::ffi::OsStr::from_bytes(name));
            let md = std::fs::symlink_metadata(&p)
                .unwrap_or_else(|e| panic!("kernel lookup of {}: {e}", p.display()));
            assert_eq!(md.ino(), *ino, "{}", p.display());
        }
    }
    km.umount();
}
