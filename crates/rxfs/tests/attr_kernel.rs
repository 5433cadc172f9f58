//! Extended attributes, POSIX ACLs and symlink targets read by rxfs must
//! equal what the kernel shows: the kernel writes attributes in every fork
//! shape (shortform, leaf, DA node, multi-level node, btree-format fork,
//! remote values), ACLs and symlinks of every size; we record
//! llistxattr/lgetxattr/readlink through the kernel mount, unmount, and
//! compare rxfs's answers byte for byte, on several geometries.

mod common;

use rxfs::inode::ReadCtx;
use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use rxfs::types::Ino;
use rxfs::{Error, Filesystem, MountOptions};

fn removex(p: &Path, name: &str) {
    let n = CString::new(name).unwrap();
    let rc = unsafe { libc::lremovexattr(cpath(p).as_ptr(), n.as_ptr()) };
    assert_eq!(rc, 0, "removexattr {p:?} {name}");
}

/// The kernel's list, in its order (one call with a large buffer).
fn listx(p: &Path) -> Vec<Vec<u8>> {
    let mut buf = vec![0u8; 1 << 20];
    let n = unsafe { libc::llistxattr(cpath(p).as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    assert!(
        n >= 0,
        "listxattr {p:?}: {}",
        std::io::Error::last_os_error()
    );
    buf[..n as usize]
        .split(|&c| c == 0)
        .filter(|s| !s.is_empty())
        .map(|s| s.to_vec())
        .collect()
}

/// The kernel's value, or its errno.
fn getx(p: &Path, name: &[u8]) -> Result<Vec<u8>, i32> {
    let n = CString::new(name).unwrap();
    let mut buf = vec![0u8; 1 << 17];
    let r = unsafe {
        libc::lgetxattr(
            cpath(p).as_ptr(),
            n.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap());
    }
    buf.truncate(r as usize);
    Ok(buf)
}

fn sh(cmd: &str, args: &[&str]) {
    run(cmd, args);
}

fn pattern(seed: u32, len: usize) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(7).wrapping_add(seed * 13) % 251) as u8)
        .collect()
}

fn touch(root: &Path, name: &str) -> PathBuf {
    let p = root.join(name);
    std::fs::write(&p, b"").unwrap();
    p
}

/// Names used to query values that must not exist.
const ABSENT: &[&[u8]] = &[
    b"user.absent",
    b"trusted.absent",
    b"security.absent",
    b"system.posix_acl_access",
    b"system.posix_acl_default",
    b"trusted.SGI_ACL_FILE",
];

fn populate(root: &Path, blocksize: usize) {
    touch(root, "noattr");
    set_xattr(&touch(root, "small"), "user.a", b"hello");
    set_xattr(&touch(root, "empty_value"), "user.e", b"");
    let p = touch(root, "namespaces");
    for (ns, v) in [("user", "u"), ("trusted", "t"), ("security", "s")] {
        set_xattr(&p, &format!("{ns}.same"), v.as_bytes());
        set_xattr(&p, &format!("{ns}.{ns}_only"), b"x");
    }
    let p = touch(root, "longname");
    set_xattr(&p, &format!("user.{}", "n".repeat(250)), b"long name");
    set_xattr(
        &p,
        &format!("trusted.{}", "t".repeat(247)),
        b"long trusted name",
    );
    // One leaf block.
    let p = touch(root, "leaf30");
    for i in 0..30 {
        set_xattr(&p, &format!("user.attr{i}"), format!("{i:0100}").as_bytes());
    }
    // Leaf with holes: remove every third.
    let p = touch(root, "leaf_holes");
    for i in 0..40 {
        set_xattr(&p, &format!("user.h{i}"), &pattern(i, 90));
    }
    for i in (0..40).step_by(3) {
        removex(&p, &format!("user.h{i}"));
    }
    // Back to shortform after growing.
    let p = touch(root, "shrunk");
    for i in 0..30 {
        set_xattr(&p, &format!("user.s{i}"), &pattern(i, 100));
    }
    for i in 1..30 {
        removex(&p, &format!("user.s{i}"));
    }
    // DA node (two levels with 1 KiB blocks).
    let p = touch(root, "node2000");
    for i in 0..2000 {
        set_xattr(&p, &format!("user.n{i}"), format!("{i:0100}").as_bytes());
    }
    // Remote values, the largest allowed, one just over the local limit.
    let p = touch(root, "remote");
    set_xattr(&p, "user.big", &pattern(1, 20000));
    set_xattr(&p, "user.max", &pattern(2, 65536));
    set_xattr(&p, "trusted.rem", &pattern(3, 5000));
    set_xattr(&p, "user.one", b"1");
    set_xattr(&p, "user.edge", &pattern(4, blocksize * 3 / 4));
    set_xattr(&p, "user.edge1", &pattern(5, blocksize * 3 / 4 + 1));
    // Remote values inside a node-format fork.
    let p = touch(root, "node_remote");
    for i in 0..300 {
        let len = if i % 10 == 0 { 3000 + i as usize } else { 60 };
        set_xattr(&p, &format!("user.r{i}"), &pattern(i, len));
    }
    // A node-format fork that shrank: freed leaf blocks leave holes in the
    // attr fork address space, with remote values beyond them.
    let p = touch(root, "node_holes");
    for i in 0..1000 {
        set_xattr(&p, &format!("user.k{i}"), &pattern(i, 100));
        if i % 100 == 0 {
            set_xattr(&p, &format!("user.big{i}"), &pattern(i, 5000));
        }
    }
    for i in (0..1000).filter(|i| i % 10 != 0) {
        removex(&p, &format!("user.k{i}"));
    }
    // Two files grown in turns: their attr blocks interleave, making many
    // extents (btree-format attr forks).
    let (a, b) = (touch(root, "frag_a"), touch(root, "frag_b"));
    for i in 0..1500 {
        set_xattr(&a, &format!("user.f{i}"), &pattern(i, 100));
        set_xattr(&b, &format!("user.g{i}"), &pattern(i + 1, 100));
    }
    // POSIX ACLs.
    let p = touch(root, "acl");
    sh("setfacl", &["-m", "u:1234:rw", p.to_str().unwrap()]);
    let p = touch(root, "acl_big");
    let spec: Vec<String> = (0..40)
        .map(|i| format!("u:{}:r,g:{}:w", 2000 + i, 3000 + i))
        .collect();
    sh("setfacl", &["-m", &spec.join(","), p.to_str().unwrap()]);
    set_xattr(&p, "user.withacl", b"v");
    let d = root.join("dacl");
    std::fs::create_dir(&d).unwrap();
    sh("setfacl", &["-d", "-m", "u:1234:rwx", d.to_str().unwrap()]);
    sh("setfacl", &["-m", "g:55:r", d.to_str().unwrap()]);
    // Inherits the default ACL.
    std::fs::write(d.join("child"), b"").unwrap();
    std::fs::create_dir(d.join("subdir")).unwrap();
    set_xattr(&d, "user.dirattr", b"on a directory");
    // Symlinks of every size.
    for len in [1usize, 12, 60, 200, 900, 1000, 1023] {
        let t: String = (0..len)
            .map(|i| {
                if i % 9 == 8 {
                    '/'
                } else {
                    (b'a' + (i % 26) as u8) as char
                }
            })
            .collect();
        std::os::unix::fs::symlink(&t, root.join(format!("sym{len}"))).unwrap();
    }
    let s = root.join("sym_attr");
    std::os::unix::fs::symlink("target", &s).unwrap();
    set_xattr(&s, "trusted.on_link", b"link attr");
    set_xattr(&s, "security.on_link", &pattern(9, 3000));
}

/// A getxattr answer: the value or the errno.
type Answer = Result<Vec<u8>, i32>;

/// Everything the kernel shows about one file.
#[derive(Debug)]
struct Seen {
    ino: u64,
    list: Vec<Vec<u8>>,
    values: Vec<(Vec<u8>, Answer)>,
    link: Option<Vec<u8>>,
}

fn record(root: &Path) -> BTreeMap<String, Seen> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        let md = std::fs::symlink_metadata(&p).unwrap();
        if md.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                stack.push(e.unwrap().path());
            }
        }
        let list = listx(&p);
        let mut values: Vec<_> = list.iter().map(|n| (n.clone(), getx(&p, n))).collect();
        for n in ABSENT {
            if !list.iter().any(|l| l == n) {
                values.push((n.to_vec(), getx(&p, n)));
            }
        }
        let link = md.file_type().is_symlink().then(|| {
            std::fs::read_link(&p)
                .unwrap()
                .as_os_str()
                .as_bytes()
                .to_vec()
        });
        let key = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
        out.insert(
            key,
            Seen {
                ino: md.ino(),
                list,
                values,
                link,
            },
        );
    }
    out
}

/// The attribute fork shape of an inode, as rxfs sees it: none, local,
/// leaf, nodeN (DA tree of N node levels), with a btree- prefix for
/// btree-format forks.
fn attr_shape(fs: &Filesystem, ip: &rxfs::inode::Inode) -> String {
    use rxfs::inode::Fork;
    match &ip.attr {
        None => "none".into(),
        Some(Fork::Local(_)) => "local".into(),
        Some(Fork::Dev(_)) => "dev".into(),
        Some(Fork::Extents { list, .. }) if list.is_empty() => "none".into(),
        Some(Fork::Extents { btree, .. }) => {
            let (_, b) = fs
                .read_fork_blocks(
                    ip,
                    rxfs::types::ForkKind::Attr,
                    rxfs::types::FileBlock(0),
                    1,
                )
                .unwrap()
                .unwrap();
            let pre = if *btree { "btree-" } else { "" };
            match u16::from_be_bytes([b[8], b[9]]) {
                0x3bee => format!("{pre}leaf"),
                0x3ebe => format!("{pre}node{}", u16::from_be_bytes([b[58], b[59]])),
                m => format!("{pre}magic{m:#x}"),
            }
        }
    }
}

fn lossy(names: &[Vec<u8>]) -> Vec<String> {
    names
        .iter()
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .collect()
}

/// A short description of a getxattr answer for failure messages.
fn summary(r: &Result<Vec<u8>, i32>) -> String {
    match r {
        Err(e) => format!("errno {e}"),
        Ok(v) => {
            let h: String = v.iter().take(24).map(|b| format!("{b:02x}")).collect();
            format!("{} bytes {h}..", v.len())
        }
    }
}

fn errno_of(r: rxfs::Result<Vec<u8>>) -> Result<Vec<u8>, i32> {
    r.map_err(|e| e.errno())
}

fn check_variant(name: &str, opts: &[&str], blocksize: usize) {
    if kernel_tests_disabled() {
        return;
    }
    let s = Scratch::new(&format!("attr-{name}"));
    let img = s.path("img");
    mkfs(&img, 512 << 20, opts);
    let m = KernelMount::new(&img, &s.path("mnt"), "");
    populate(&m.dir, blocksize);
    let seen = record(&m.dir);
    m.umount();
    // Show the forms the kernel built, to prove the test covers them.
    let shapes = |ino: u64| {
        let o = Command::new("xfs_db")
            .args([
                "-r",
                "-c",
                &format!("inode {ino}"),
                "-c",
                "print core.aformat core.naextents",
            ])
            .arg(&img)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).replace('\n', " ")
    };
    let fs = Filesystem::open_path(
        &img,
        None,
        MountOptions {
            read_only: true,
            ..Default::default()
        },
    )
    .unwrap();
    let mut census: BTreeMap<String, usize> = BTreeMap::new();
    for (path, k) in &seen {
        let ip = fs.iget(Ino(k.ino)).unwrap();
        *census.entry(attr_shape(&fs, &ip)).or_default() += 1;
        let list = fs
            .listxattr(&ip)
            .unwrap_or_else(|e| panic!("{name}/{path}: listxattr: {e} ({})", shapes(k.ino)));
        assert_eq!(
            lossy(&list),
            lossy(&k.list),
            "{name}/{path}: listxattr differs ({})",
            shapes(k.ino)
        );
        for (n, want) in &k.values {
            let got = errno_of(fs.getxattr(&ip, n));
            assert!(
                got == *want,
                "{name}/{path}: getxattr {:?}: rxfs {}, kernel {}",
                String::from_utf8_lossy(n),
                summary(&got),
                summary(want),
            );
        }
        match &k.link {
            Some(t) => assert_eq!(&fs.readlink(&ip).unwrap(), t, "{name}/{path}: readlink"),
            None => assert!(
                matches!(fs.readlink(&ip), Err(Error::NotSymlink)),
                "{name}/{path}: readlink of a non-symlink"
            ),
        }
    }
    assert_eq!(seen.len(), 28, "{name}: files walked");
    let holes = fs.iget(Ino(seen["node_holes"].ino)).unwrap();
    let ext = holes.attr.as_ref().unwrap().extents().to_vec();
    assert!(
        ext.windows(2).any(|w| w[0].off.0 + w[0].len < w[1].off.0),
        "{name}: node_holes should have a sparse attr fork: {ext:?}"
    );
    // Every fork shape was exercised.
    let has = |k: &str| census.keys().any(|c| c.starts_with(k));
    for shape in ["none", "local", "leaf", "node1", "btree-node"] {
        assert!(has(shape), "{name}: no {shape} attr fork in {census:?}");
    }
    if name == "b1k" {
        assert!(has("node2"), "{name}: no two-level DA tree in {census:?}");
    }
    // Lookups beyond what the kernel was asked.
    let node = fs.iget(Ino(seen["node2000"].ino)).unwrap();
    for i in [0, 1, 999, 1999] {
        assert_eq!(
            fs.getxattr(&node, format!("user.n{i}").as_bytes()).unwrap(),
            format!("{i:0100}").into_bytes()
        );
    }
    assert!(matches!(
        fs.getxattr(&node, b"user.n2000"),
        Err(Error::NoAttr)
    ));
    assert!(matches!(
        fs.getxattr(&node, b"trusted.n1"),
        Err(Error::NoAttr)
    ));
    assert!(matches!(
        fs.getxattr(&node, b"user."),
        Err(Error::Invalid(_))
    ));
    assert!(matches!(
        fs.getxattr(&node, b"foo.bar"),
        Err(Error::NotSupported(_))
    ));
    let long = [b"user.".to_vec(), vec![b'a'; 251]].concat();
    assert!(matches!(fs.getxattr(&node, &long), Err(Error::Range)));
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn attrs_default() {
    check_variant("default", &[], 4096);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn attrs_inode_1k() {
    check_variant("i1k", &["-i", "size=1024"], 4096);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn attrs_block_1k() {
    check_variant("b1k", &["-b", "size=1024"], 1024);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn attrs_rmap_nrext64() {
    check_variant("rmap", &["-m", "rmapbt=1", "-i", "nrext64=1"], 4096);
}

/// Damaged attribute trees, remote values and symlink blocks (with valid
/// CRCs, so only the structure checks can notice) give corruption errors,
/// never hangs or wrong answers.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn corrupt_structures() {
    use rxfs::types::{FileBlock, ForkKind};
    if kernel_tests_disabled() {
        return;
    }
    let s = Scratch::new("attr-corrupt");
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let m = KernelMount::new(&img, &s.path("mnt"), "");
    let node = touch(&m.dir, "node");
    for i in 0..2000 {
        set_xattr(&node, &format!("user.n{i}"), format!("{i:0100}").as_bytes());
    }
    let remote = touch(&m.dir, "remote");
    set_xattr(&remote, "user.big", &pattern(1, 20000));
    let link = m.dir.join("link");
    std::os::unix::fs::symlink("l".repeat(900), &link).unwrap();
    let inos: Vec<u64> = [&node, &remote, &link]
        .iter()
        .map(|p| std::fs::symlink_metadata(p).unwrap().ino())
        .collect();
    m.umount();
    let (node_ino, remote_ino, link_ino) = (Ino(inos[0]), Ino(inos[1]), Ino(inos[2]));

    let fs = open_ro(&img);
    let ip = fs.iget(node_ino).unwrap();
    let ablock = |ip: &rxfs::inode::Inode, blk: u64| {
        fs.read_fork_blocks(ip, ForkKind::Attr, FileBlock(blk), 1)
            .unwrap()
            .unwrap()
    };
    let (root_daddr, root) = ablock(&ip, 0);
    let first = u32::from_be_bytes(root[68..72].try_into().unwrap());
    let second = u32::from_be_bytes(root[76..80].try_into().unwrap());
    let (second_daddr, _) = ablock(&ip, second as u64);
    let (rip, lip) = (fs.iget(remote_ino).unwrap(), fs.iget(link_ino).unwrap());
    let (rleaf_daddr, _) = ablock(&rip, 0);
    let (xarm2_daddr, _) = ablock(&rip, 2);
    let (link_daddr, _) = fs
        .read_fork_blocks(&lip, ForkKind::Data, FileBlock(0), 1)
        .unwrap()
        .unwrap();
    drop(fs);

    let check = |daddr: Daddr, crc_off: usize, f: &dyn Fn(&mut [u8]), t: &dyn Fn(&Filesystem)| {
        let orig = patch(&img, daddr.0, 4096, crc_off, f);
        t(&open_ro(&img));
        restore(&img, daddr.0, &orig);
    };
    use rxfs::types::Daddr;
    // The second leaf's forw points back to the first: a cycle.
    check(
        second_daddr,
        12,
        &|b| b[0..4].copy_from_slice(&first.to_be_bytes()),
        &|fs| assert_corrupt(fs.listxattr(&fs.iget(node_ino).unwrap()), "leaf cycle"),
    );
    // The root's first child is the root itself.
    check(
        root_daddr,
        12,
        &|b| b[68..72].copy_from_slice(&0u32.to_be_bytes()),
        &|fs| assert_corrupt(fs.listxattr(&fs.iget(node_ino).unwrap()), "node self-loop"),
    );
    // The root claims level 2 above leaves.
    check(
        root_daddr,
        12,
        &|b| b[58..60].copy_from_slice(&2u16.to_be_bytes()),
        &|fs| {
            let ip = fs.iget(node_ino).unwrap();
            assert_corrupt(fs.listxattr(&ip), "node level");
            assert_corrupt(fs.getxattr(&ip, b"user.n5"), "node level lookup");
        },
    );
    // The third XARM block says it holds other bytes of the value.
    check(
        xarm2_daddr,
        12,
        &|b| b[4..8].copy_from_slice(&1u32.to_be_bytes()),
        &|fs| {
            let ip = fs.iget(remote_ino).unwrap();
            assert_eq!(fs.listxattr(&ip).unwrap(), vec![b"user.big".to_vec()]);
            assert_corrupt(fs.getxattr(&ip, b"user.big"), "XARM offset");
        },
    );
    // The remote value starts past the attr fork's blocks.
    check(
        rleaf_daddr,
        12,
        &|b| {
            let idx = u16::from_be_bytes([b[84], b[85]]) as usize;
            b[idx..idx + 4].copy_from_slice(&1000u32.to_be_bytes());
        },
        &|fs| {
            let ip = fs.iget(remote_ino).unwrap();
            assert_corrupt(fs.getxattr(&ip, b"user.big"), "valueblk out of the fork");
        },
    );
    // The symlink block claims one byte fewer than the inode size.
    check(
        link_daddr,
        12,
        &|b| b[8..12].copy_from_slice(&899u32.to_be_bytes()),
        &|fs| assert_corrupt(fs.readlink(&fs.iget(link_ino).unwrap()), "XSLM bytes"),
    );
    // Untouched image: everything reads.
    let fs = open_ro(&img);
    assert_eq!(
        fs.listxattr(&fs.iget(node_ino).unwrap()).unwrap().len(),
        2000
    );
    assert_eq!(
        fs.readlink(&fs.iget(link_ino).unwrap()).unwrap(),
        "l".repeat(900).into_bytes()
    );
}

/// With 1 KiB blocks and only single free blocks left, the kernel puts a
/// long symlink target in two separate 1-block extents, each with its own
/// XSLM header (968 + 32 bytes), unlike the one-header 2-block extent of a
/// roomy filesystem. rxfs must read both layouts.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn symlink_split_extents_1k() {
    let s = Scratch::new("attr-symsplit");
    let img = s.path("img");
    // No per-AG reservations (reflink/finobt) so the fill below can take
    // every free block.
    mkfs(
        &img,
        320 << 20,
        &["-b", "size=1024", "-m", "reflink=0,finobt=0"],
    );
    let m = KernelMount::new(&img, &s.path("mnt"), "");
    run(
        "xfs_io",
        &["-x", "-c", "resblks 0", m.dir.to_str().unwrap()],
    );
    let fill = std::fs::File::create(m.dir.join("fill")).unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&fill);
    let (mut off, mut chunk) = (0i64, 64i64 << 20);
    while chunk >= 1024 {
        if unsafe { libc::fallocate(fd, 0, off, chunk) } == 0 {
            off += chunk;
        } else {
            chunk /= 2;
        }
    }
    // Free every other block of the first 8 MiB: only 1-block holes remain.
    let punch = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    for o in (0..8i64 << 20).step_by(2048) {
        assert_eq!(unsafe { libc::fallocate(fd, punch, o, 1024) }, 0);
    }
    fill.sync_all().unwrap();
    drop(fill);
    let mut want = BTreeMap::new();
    for len in [1000usize, 1023] {
        let t: String = (0..len).map(|i| (b'a' + (i % 23) as u8) as char).collect();
        let p = m.dir.join(format!("sym{len}"));
        std::os::unix::fs::symlink(&t, &p).unwrap();
        let ino = std::fs::symlink_metadata(&p).unwrap().ino();
        want.insert(
            ino,
            std::fs::read_link(&p)
                .unwrap()
                .as_os_str()
                .as_bytes()
                .to_vec(),
        );
    }
    m.umount();
    let fs = open_ro(&img);
    for (ino, t) in &want {
        let ip = fs.iget(Ino(*ino)).unwrap();
        assert_eq!(
            ip.data.extents().len(),
            2,
            "inode {ino}: expected a split target"
        );
        assert_eq!(&fs.readlink(&ip).unwrap(), t, "inode {ino}: readlink");
    }
}
