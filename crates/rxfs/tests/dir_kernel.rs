//! Directories read by rxfs must list and look up exactly what the kernel
//! shows: every directory form (shortform with 4- and 8-byte inode numbers,
//! block, leaf, node with one leaf, node under DA nodes, btree-format data
//! fork), 255-byte names, hash collisions running across leaf blocks,
//! deleted entries, 64 KiB directory blocks and 1 KiB filesystem blocks.
//!
//! The kernel side is collected through a loop mount (read_dir + inode
//! numbers and file types), the image is unmounted, then rxfs opens it.

mod common;

use rxfs::inode::ReadCtx;
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirEntryExt, FileTypeExt, MetadataExt};
use std::path::Path;

use common::*;
use rxfs::dir::read::DirEntry;
use rxfs::inode::{Fork, Inode};
use rxfs::types::{FileBlock, FileType, ForkKind, Ino};
use rxfs::{Error, Filesystem};

/// What the kernel shows for one directory: its inode and its entries
/// ("." and ".." included) as name -> (inode, type).
#[derive(Debug)]
struct KDir {
    ino: u64,
    entries: BTreeMap<Vec<u8>, (u64, FileType)>,
}

fn ktype(t: std::fs::FileType) -> FileType {
    if t.is_dir() {
        FileType::Directory
    } else if t.is_symlink() {
        FileType::Symlink
    } else if t.is_fifo() {
        FileType::Fifo
    } else if t.is_char_device() {
        FileType::CharDev
    } else if t.is_block_device() {
        FileType::BlockDev
    } else if t.is_socket() {
        FileType::Socket
    } else {
        FileType::Regular
    }
}

/// Every directory under `root` (relative path -> listing).
fn kernel_listing(root: &Path) -> BTreeMap<Vec<u8>, KDir> {
    let mut out = BTreeMap::new();
    let mut stack = vec![(
        Vec::new(),
        root.to_path_buf(),
        root.metadata().unwrap().ino(),
    )];
    while let Some((rel, path, parent_ino)) = stack.pop() {
        let ino = path.metadata().unwrap().ino();
        let mut entries = BTreeMap::new();
        entries.insert(b".".to_vec(), (ino, FileType::Directory));
        entries.insert(b"..".to_vec(), (parent_ino, FileType::Directory));
        for e in std::fs::read_dir(&path).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().as_bytes().to_vec();
            let t = ktype(e.file_type().unwrap());
            let e_ino = e.metadata().unwrap().ino();
            assert_eq!(e.ino(), e_ino, "d_ino and st_ino of {:?}", e.path());
            entries.insert(name.clone(), (e_ino, t));
            if t == FileType::Directory {
                let mut r = rel.clone();
                r.push(b'/');
                r.extend_from_slice(&name);
                stack.push((r, e.path(), ino));
            }
        }
        out.insert(rel, KDir { ino, entries });
    }
    out
}

fn touch(dir: &Path, name: &[u8]) {
    std::fs::File::create(dir.join(OsStr::from_bytes(name))).unwrap();
}

fn files(dir: &Path, n: usize, f: impl Fn(usize) -> Vec<u8>) {
    std::fs::create_dir_all(dir).unwrap();
    for i in 0..n {
        touch(dir, &f(i));
    }
}

/// Names that all have the same XFS name hash: 4-byte chunks taken in
/// pairs; xoring bits 4-5 of the last byte of one chunk and bits 0-1 of the
/// last byte of the next cancels out in the rotating hash.
fn colliding_names(pairs: u32) -> Vec<Vec<u8>> {
    (0..4u32.pow(pairs))
        .map(|k| {
            let mut n = Vec::new();
            for p in 0..pairs {
                let x = ((k >> (2 * p)) & 3) as u8;
                n.extend_from_slice(&[b'a', b'b', b'c', b'a' ^ (x << 4)]);
                n.extend_from_slice(&[b'a', b'b', b'c', b'a' ^ x]);
            }
            n
        })
        .collect()
}

fn long_name(i: usize) -> Vec<u8> {
    format!("{i:0255}").into_bytes()
}

/// Directories of every form (for 4 KiB blocks and directory blocks; other
/// geometries get the same population and different forms).
fn populate(root: &Path) {
    let r = |s: &str| root.join(s);
    std::fs::create_dir(r("empty")).unwrap();
    files(&r("sf"), 5, |i| format!("f{i:04}").into_bytes());
    // Shortform with every file type.
    let m = r("types");
    std::fs::create_dir(&m).unwrap();
    std::fs::create_dir(m.join("d")).unwrap();
    touch(&m, b"f");
    std::os::unix::fs::symlink("target", m.join("l")).unwrap();
    for (name, mode, dev) in [
        ("p", libc::S_IFIFO, 0),
        ("c", libc::S_IFCHR, libc::makedev(1, 3)),
        ("b", libc::S_IFBLK, libc::makedev(7, 0)),
    ] {
        let p = std::ffi::CString::new(m.join(name).as_os_str().as_bytes()).unwrap();
        assert_eq!(unsafe { libc::mknod(p.as_ptr(), mode | 0o644, dev) }, 0);
    }
    std::os::unix::net::UnixListener::bind(m.join("s")).unwrap();
    files(&r("blk"), 50, |i| format!("f{i:04}").into_bytes());
    files(&r("leaf"), 300, |i| format!("f{i:04}").into_bytes());
    files(&r("node1"), 502, |i| format!("f{i:04}").into_bytes());
    files(&r("node"), 1000, |i| format!("f{i:04}").into_bytes());
    files(&r("big"), 20000, |i| format!("n{i:06}").into_bytes());
    files(&r("long_sf"), 1, long_name);
    files(&r("long_blk"), 10, long_name);
    files(&r("long_leaf"), 300, long_name);
    // Deleted entries: unused slots, stale leaf entries.
    files(&r("holes"), 3000, |i| format!("h{i:05}").into_bytes());
    for i in (1..3000).step_by(2) {
        std::fs::remove_file(r("holes").join(format!("h{i:05}"))).unwrap();
    }
    // One hash shared by 1024 names: the run spans several leaf blocks;
    // some removed so the run holds stale entries.
    let coll = colliding_names(5);
    std::fs::create_dir(r("coll")).unwrap();
    for n in &coll {
        touch(&r("coll"), n);
    }
    for n in coll.iter().step_by(9) {
        std::fs::remove_file(r("coll").join(OsStr::from_bytes(n))).unwrap();
    }
    // Whole data blocks emptied in the middle: the kernel frees them and
    // leaves holes in the data segment.
    files(&r("gaps"), 1500, |i| format!("g{i:04}").into_bytes());
    for i in 300..900 {
        std::fs::remove_file(r("gaps").join(format!("g{i:04}"))).unwrap();
    }
    std::fs::create_dir(r("coll_blk")).unwrap();
    for n in colliding_names(2) {
        touch(&r("coll_blk"), &n);
    }
}

/// The on-disk form of a directory, as a short label.
fn form(fs: &Filesystem, ip: &Inode) -> String {
    let fsbs = fs.geo().dir_fsbs();
    match &ip.data {
        Fork::Local(_) => "sf".into(),
        Fork::Extents { list, btree } => {
            if list.last().unwrap().end() == fsbs as u64 {
                return "block".into();
            }
            let leaf = FileBlock((32u64 << 30) >> fs.geo().blocklog);
            let (_, b) = fs
                .read_fork_blocks(ip, ForkKind::Data, leaf, fsbs)
                .unwrap()
                .unwrap();
            let f = match u16::from_be_bytes([b[8], b[9]]) {
                0x3df1 => "leaf",
                0x3dff => "leafn",
                0x3ebe => "danode",
                _ => "?",
            };
            let mut f = f.to_string();
            if *btree {
                f += "+btree";
            }
            // Holes among the data blocks.
            let data_end = ip.core.size >> fs.geo().blocklog;
            let mut next = 0;
            for e in list.iter().take_while(|e| e.off.0 < data_end) {
                if e.off.0 > next {
                    f += "+gaps";
                    break;
                }
                next = e.end();
            }
            f
        }
        Fork::Dev(_) => "dev".into(),
    }
}

fn full_listing(fs: &Filesystem, ip: &Inode) -> Vec<DirEntry> {
    let mut v = Vec::new();
    fs.readdir(ip, 0, &mut |e| {
        v.push(e.clone());
        true
    })
    .unwrap();
    v
}

/// Check one directory against the kernel; returns its form.
fn check_dir(fs: &Filesystem, rel: &[u8], k: &KDir) -> String {
    let what = String::from_utf8_lossy(rel).into_owned();
    let path = if rel.is_empty() {
        b"/".to_vec()
    } else {
        rel.to_vec()
    };
    let ino = fs.resolve(&path).unwrap();
    assert_eq!(ino.0, k.ino, "{what}: resolved inode");
    let ip = fs.iget(ino).unwrap();
    let list = full_listing(fs, &ip);
    // Same names, inodes and types as the kernel.
    let mut got = BTreeMap::new();
    for e in &list {
        let t = e.ftype.expect("ftype filesystem");
        assert!(
            got.insert(e.name.clone(), (e.ino.0, t)).is_none(),
            "{what}: {:?} listed twice",
            String::from_utf8_lossy(&e.name)
        );
    }
    assert_eq!(got.len(), k.entries.len(), "{what}: entry count");
    assert!(got == k.entries, "{what}: listings differ");
    assert_eq!(&list[0].name, b".", "{what}: first entry");
    assert_eq!(&list[1].name, b"..", "{what}: second entry");
    // Cookies increase, and resuming from any of them continues the walk.
    assert!(list.windows(2).all(|w| w[0].next_cookie < w[1].next_cookie));
    let step = (list.len() / 50).max(1);
    let mut resumed = Vec::new();
    let mut cookie = 0;
    loop {
        let mut n = 0;
        fs.readdir(&ip, cookie, &mut |e| {
            resumed.push(e.clone());
            cookie = e.next_cookie;
            n += 1;
            n < step
        })
        .unwrap();
        if n == 0 {
            break;
        }
        assert!(
            resumed.len() <= list.len(),
            "{what}: resumed walk repeats entries"
        );
    }
    assert!(resumed == list, "{what}: resumed walk differs");
    // Lookups of every name, and of names that are not there.
    for (name, (ino, _)) in &k.entries {
        let got = fs
            .lookup(&ip, name)
            .unwrap_or_else(|e| panic!("{what}: lookup {:?}: {e}", String::from_utf8_lossy(name)));
        assert_eq!(
            got.0,
            *ino,
            "{what}: lookup {:?}",
            String::from_utf8_lossy(name)
        );
    }
    for name in k.entries.keys().take(200) {
        let mut absent = name.clone();
        if absent.len() < 255 {
            absent.push(b'~');
        } else {
            absent[100] = b'~';
        }
        if !k.entries.contains_key(&absent) {
            assert!(
                matches!(fs.lookup(&ip, &absent), Err(Error::NotFound)),
                "{what}"
            );
        }
    }
    assert!(matches!(
        fs.lookup(&ip, &[b'x'; 256]),
        Err(Error::NameTooLong)
    ));
    form(fs, &ip)
}

/// Build an image, populate it through the kernel, and compare every
/// directory. Returns the form of each directory and the kernel's view.
fn check_variant(
    name: &str,
    size: u64,
    opts: &[&str],
    pop: fn(&Path),
) -> (BTreeMap<String, String>, BTreeMap<Vec<u8>, KDir>) {
    let s = Scratch::new(&format!("dir-{name}"));
    let img = s.path("img");
    mkfs(&img, size, opts);
    check_image(&img, &s.path("mnt"), pop)
}

/// Mount `img`, run `pop`, collect the kernel's view, unmount, and compare
/// every directory with rxfs.
fn check_image(
    img: &Path,
    mnt: &Path,
    pop: fn(&Path),
) -> (BTreeMap<String, String>, BTreeMap<Vec<u8>, KDir>) {
    let m = KernelMount::new(img, mnt, "");
    pop(&m.dir);
    let kernel = kernel_listing(&m.dir);
    m.umount();
    let fs = open_ro(img);
    let mut forms = BTreeMap::new();
    for (rel, k) in &kernel {
        let f = check_dir(&fs, rel, k);
        forms.insert(String::from_utf8_lossy(rel).into_owned(), f);
    }
    // Directory calls on a non-directory.
    let file = kernel
        .values()
        .flat_map(|k| k.entries.values())
        .find(|(_, t)| *t == FileType::Regular)
        .expect("a regular file");
    let f = fs.iget(Ino(file.0)).unwrap();
    assert!(matches!(fs.lookup(&f, b"x"), Err(Error::NotDir)));
    assert!(matches!(
        fs.readdir(&f, 0, &mut |_| true),
        Err(Error::NotDir)
    ));
    (forms, kernel)
}

fn expect_forms(forms: &BTreeMap<String, String>, want: &[(&str, &str)]) {
    for (dir, f) in want {
        assert_eq!(forms[*dir], *f, "form of {dir}: {forms:?}");
    }
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn dirs_default_geometry() {
    let (forms, _) = check_variant("default", 1 << 30, &[], populate);
    expect_forms(
        &forms,
        &[
            ("", "sf"),
            ("/empty", "sf"),
            ("/sf", "sf"),
            ("/types", "sf"),
            ("/long_sf", "block"),
            ("/blk", "block"),
            ("/long_blk", "block"),
            ("/coll_blk", "block"),
            ("/leaf", "leaf"),
            ("/long_leaf", "leaf"),
            ("/node1", "leafn"),
            ("/node", "danode"),
            ("/coll", "danode+btree"),
            ("/holes", "danode+btree"),
            ("/gaps", "danode+gaps"),
            ("/big", "danode+btree"),
        ],
    );
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn dirs_64k_dir_blocks() {
    let (forms, _) = check_variant("n64k", 1 << 30, &["-n", "size=65536"], populate);
    expect_forms(
        &forms,
        &[
            ("/sf", "sf"),
            ("/node", "block"),
            ("/coll", "block"),
            ("/long_leaf", "leaf"),
            ("/big", "danode+btree"),
        ],
    );
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn dirs_1k_blocks() {
    // Directory blocks stay 4 KiB: each spans four filesystem blocks.
    let (forms, _) = check_variant("b1k", 1 << 30, &["-b", "size=1024"], populate);
    expect_forms(
        &forms,
        &[
            ("/sf", "sf"),
            ("/blk", "block"),
            ("/leaf", "leaf"),
            ("/node1", "leafn"),
            ("/node", "danode"),
            ("/big", "danode+btree"),
        ],
    );
}

/// Inode numbers above 2^32 (an AG past the first 4 Gi inodes): shortform
/// directories store every inode number in 8 bytes.
fn populate_wide(root: &Path) {
    for i in 0..6 {
        let d = root.join(format!("d{i}"));
        files(&d, 5, |j| format!("f{j:04}").into_bytes());
        files(&d.join("blk"), 50, |j| format!("f{j:04}").into_bytes());
        files(&d.join("leaf"), 300, |j| format!("f{j:04}").into_bytes());
    }
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn dirs_wide_inode_numbers() {
    // 3 TiB sparse image: 1 TiB AGs put AG 2's inode numbers above 2^32.
    let (forms, kernel) = check_variant("wide", 3 << 40, &["-l", "size=64m"], populate_wide);
    let d2 = &kernel[&b"/d2".to_vec()];
    assert!(d2.ino > u32::MAX as u64, "d2 should live above 2^32");
    assert!(
        d2.entries
            .values()
            .filter(|e| e.0 > u32::MAX as u64)
            .count()
            >= 5
    );
    assert_eq!(forms[""], "sf");
    assert_eq!(forms["/d2"], "sf");
    assert_eq!(forms["/d2/blk"], "block");
    assert_eq!(forms["/d2/leaf"], "leaf");
}

/// The kernel gives every new inode an attribute fork, which leaves a
/// shortform directory 192 bytes: too little for a 255-byte name. mkfs
/// protofiles make inodes without one, so 255-byte names fit shortform.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn dirs_from_protofile_long_names() {
    let s = Scratch::new("dir-proto");
    let l = "L".repeat(255);
    let m = "M".repeat(255);
    let l2 = format!("{}2", "L".repeat(254));
    let m3 = format!("{}3", "M".repeat(254));
    let proto = format!(
        "/dev/null\n0 0\nd--755 0 0\n\
         long_sf d--755 0 0\n{l} ---644 0 0 /dev/null\n{m} d--755 0 0\n$\n$\n\
         long_blk d--755 0 0\n{l} ---644 0 0 /dev/null\n{m} ---644 0 0 /dev/null\n\
         {l2} ---644 0 0 /dev/null\n{m3} p--644 0 0\n$\n$\n"
    );
    let pf = s.path("proto");
    std::fs::write(&pf, proto).unwrap();
    let img = s.path("img");
    mkfs(
        &img,
        1 << 30,
        &["-i", "size=1024", "-p", pf.to_str().unwrap()],
    );
    let (forms, _) = check_image(&img, &s.path("mnt"), |_| {});
    expect_forms(&forms, &[("/long_sf", "sf"), ("/long_blk", "block")]);
}

fn is_corrupt<T: std::fmt::Debug>(r: rxfs::Result<T>) -> bool {
    matches!(r, Err(Error::Corrupt { .. }))
}

/// Damaged directories give corruption errors: never a panic, a hang or a
/// wrong answer.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn damaged_dirs_are_corruption() {
    let s = Scratch::new("dir-damage");
    let base = s.path("base");
    mkfs(&base, 300 << 20, &[]);
    let m = KernelMount::new(&base, &s.path("mnt"), "");
    let root = m.dir.clone();
    files(&root.join("sf"), 5, |i| format!("f{i:04}").into_bytes());
    files(&root.join("blk"), 50, |i| format!("f{i:04}").into_bytes());
    files(&root.join("leaf"), 300, |i| format!("f{i:04}").into_bytes());
    files(&root.join("node"), 1000, |i| {
        format!("f{i:04}").into_bytes()
    });
    let coll = colliding_names(5);
    std::fs::create_dir(root.join("coll")).unwrap();
    for n in &coll[1..] {
        touch(&root.join("coll"), n);
    }
    m.umount();

    let fs = open_ro(&base);
    let bs = fs.geo().blocksize as usize;
    let isize = fs.geo().inodesize as usize;
    let leaf_dablk = FileBlock((32u64 << 30) >> fs.geo().blocklog);
    let dir = |p: &str| fs.iget(fs.resolve(p.as_bytes()).unwrap()).unwrap();
    let block_at = |ip: &Inode, fb: FileBlock| {
        fs.read_fork_blocks(ip, ForkKind::Data, fb, 1)
            .unwrap()
            .unwrap()
    };
    let case = |name: &str, daddr: u64, len: usize, crc: usize, edit: &dyn Fn(&mut [u8])| {
        let img = s.path(name);
        std::fs::copy(&base, &img).unwrap();
        patch(&img, daddr, len, crc, edit);
        open_ro(&img)
    };

    // Shortform: an entry count larger than the fork holds (the inode
    // CRC covers the inode only).
    let ip = dir("/sf");
    let (d, off) = fs.geo().ino_location(ip.ino);
    let ino_daddr = d.0 + (off >> 9) as u64;
    let fsx = case("sf", ino_daddr, isize, 100, &|b| b[176] = 200);
    let ipx = fsx.iget(ip.ino).unwrap();
    assert!(is_corrupt(fsx.readdir(&ipx, 0, &mut |_| true)));
    assert!(is_corrupt(fsx.lookup(&ipx, b"f0001")));

    // Block form: a '/' inside the name of the entry at 96.
    let ip = dir("/blk");
    let (d, _) = block_at(&ip, FileBlock(0));
    let fsx = case("blk", d.0, bs, 4, &|b| b[96 + 9 + 2] = b'/');
    let ipx = fsx.iget(ip.ino).unwrap();
    assert!(is_corrupt(fsx.readdir(&ipx, 0, &mut |_| true)));

    // Leaf form: an entry pointing at an inode past the device.
    let ip = dir("/leaf");
    let (d, b) = block_at(&ip, FileBlock(0));
    let name = b[96 + 9..96 + 9 + b[96 + 8] as usize].to_vec();
    let fsx = case("leaf", d.0, bs, 4, &|b| {
        b[96..104].copy_from_slice(&(1u64 << 50).to_be_bytes())
    });
    let ipx = fsx.iget(ip.ino).unwrap();
    assert!(is_corrupt(fsx.readdir(&ipx, 0, &mut |_| true)));
    assert!(is_corrupt(fsx.lookup(&ipx, &name)));

    // DA node whose first child is the node itself.
    let ip = dir("/node");
    let (d, b) = block_at(&ip, leaf_dablk);
    assert_eq!(&b[8..10], &[0x3e, 0xbe]);
    fs.lookup(&ip, b"f0000").unwrap();
    let fsx = case("node", d.0, bs, 12, &|b| {
        let n = u16::from_be_bytes([b[56], b[57]]) as usize;
        for i in 0..n {
            b[64 + i * 8 + 4..64 + i * 8 + 8].copy_from_slice(&(leaf_dablk.0 as u32).to_be_bytes());
        }
    });
    let ipx = fsx.iget(ip.ino).unwrap();
    assert!(is_corrupt(fsx.lookup(&ipx, b"f0000")));
    // readdir does not use the index and still works.
    assert_eq!(full_listing(&fsx, &ipx).len(), 1002);

    // A leaf sibling chain that loops: every leafn's forw points to
    // itself, and the colliding name looked up is absent, so the walk
    // would follow the chain forever.
    let ip = dir("/coll");
    let (_, node) = block_at(&ip, leaf_dablk);
    let n = u16::from_be_bytes([node[56], node[57]]) as usize;
    let img = s.path("coll");
    std::fs::copy(&base, &img).unwrap();
    for i in 0..n {
        let o = 64 + i * 8 + 4;
        let child = u32::from_be_bytes(node[o..o + 4].try_into().unwrap());
        let (d, _) = block_at(&ip, FileBlock(child as u64));
        patch(&img, d.0, bs, 12, |b| {
            b[0..4].copy_from_slice(&child.to_be_bytes())
        });
    }
    let fsx = open_ro(&img);
    let ipx = fsx.iget(ip.ino).unwrap();
    assert!(is_corrupt(fsx.lookup(&ipx, &coll[0])));
    assert!(matches!(fs.lookup(&ip, &coll[0]), Err(Error::NotFound)));
    assert_eq!(
        fs.lookup(&ip, &coll[1]).unwrap(),
        fs.lookup(&ip, &coll[1]).unwrap()
    );
}
