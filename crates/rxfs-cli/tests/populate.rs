//! `rxfs populate` (the engine of `mkfs --populate`) against the kernel:
//! a source tree holding every kind of thing is built on a kernel XFS
//! mount (noatime, so reading it changes nothing), copied into a fresh
//! mkfs.xfs image by rxfs, and the image is checked by `xfs_repair -n` and
//! by a kernel mount whose manifest (modes, owners, times, xattrs and
//! ACLs, nlink, rdev, symlink targets, contents) and hole maps must equal
//! the source's. Change times and inode numbers differ by design (the
//! kernel cannot preserve them either); block counts are not compared (the
//! source mount may still hold speculative preallocation), the hole maps
//! are.

mod common;

use std::ffi::OsStr;
use std::io::{Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;

use common::*;

/// What the manifest of a copy must share with its source's: every key
/// but the inode number, change time and block count.
pub fn comparable(lines: &[String]) -> Vec<String> {
    manifest_strip(lines, &COPY_FIELDS)
}

/// [`comparable`] without directory sizes: a directory's size is its
/// format's (blocks of the directory block size), compared only within
/// one format.
fn no_dir_size(lines: &[String]) -> Vec<String> {
    comparable(lines)
        .iter()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            let o = v.as_object_mut().unwrap();
            if o["type"] == "dir" {
                o.remove("size");
            }
            v.to_string()
        })
        .collect()
}

/// The data ranges of a file by SEEK_DATA/SEEK_HOLE.
fn data_map(p: &Path) -> Vec<(u64, u64)> {
    let f = std::fs::File::open(p).unwrap();
    let size = f.metadata().unwrap().len();
    let fd = f.as_raw_fd();
    let mut out = Vec::new();
    let mut off = 0i64;
    while (off as u64) < size {
        let s = unsafe { libc::lseek(fd, off, libc::SEEK_DATA) };
        if s < 0 {
            break;
        }
        let e = unsafe { libc::lseek(fd, s, libc::SEEK_HOLE) };
        assert!(e > s, "SEEK_HOLE after {s} in {}", p.display());
        out.push((s as u64, e as u64));
        off = e;
    }
    out
}

fn chown(p: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::lchown(p, Some(uid), Some(gid)).unwrap();
}

/// More than `populate` makes: a sparse file past 4 GiB, a third link in
/// another directory, a 10k-entry directory, every xattr namespace, a
/// symlink of the longest length, setgid and sticky, odd owners, times
/// past 2038, a 255-byte name, an empty directory.
fn extend(root: &Path) {
    let mut f = std::fs::File::create(root.join("sparse-big")).unwrap();
    f.write_all(&pattern(10, 65536)).unwrap();
    f.seek(SeekFrom::Start((4 << 30) + 12345)).unwrap();
    f.write_all(&pattern(11, 8192)).unwrap();
    f.seek(SeekFrom::Start(5 << 30)).unwrap();
    f.write_all(&pattern(12, 9 << 20)).unwrap(); // more than one 4 MiB chunk
    f.set_len((6 << 30) + 77).unwrap();
    drop(f);
    std::fs::hard_link(root.join("hard1"), root.join("many/hard3")).unwrap();
    let huge = root.join("huge");
    std::fs::create_dir(&huge).unwrap();
    for i in 0..10_000 {
        let p = huge.join(format!("file-with-a-longer-name-{i:05}"));
        if i % 10 == 0 {
            std::fs::write(&p, format!("{i}\n")).unwrap();
        } else {
            std::fs::File::create(&p).unwrap();
        }
    }
    let xf = root.join("xattrs");
    set_xattr(&xf, "security.test", b"sec");
    set_xattr(&xf, "user.huge", &pattern(13, 60000));
    set_xattr(&root.join("dir"), "user.ondir", b"d");
    set_xattr(&root.join("dir"), "trusted.ondir", b"t");
    symlink("y".repeat(1023), root.join("maxsym")).unwrap();
    let sg = root.join("setgid-dir");
    std::fs::create_dir(&sg).unwrap();
    chown(&sg, 0, 777);
    std::fs::set_permissions(&sg, std::fs::Permissions::from_mode(0o2775)).unwrap();
    std::fs::write(sg.join("inherits"), b"g").unwrap();
    let sticky = root.join("tmp");
    std::fs::create_dir(&sticky).unwrap();
    std::fs::set_permissions(&sticky, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let sgf = root.join("setgid-file");
    std::fs::write(&sgf, b"#!/bin/sh\n").unwrap();
    chown(&sgf, 65534, 4_294_967_294);
    std::fs::set_permissions(&sgf, std::fs::Permissions::from_mode(0o2711)).unwrap();
    let odd = root.join("odd-owner");
    std::fs::write(&odd, b"").unwrap();
    chown(&odd, 4_294_967_294, 65534);
    let future = root.join("future");
    std::fs::write(&future, b"2100").unwrap();
    set_times(
        &future,
        (4_102_444_800 + 5, 7),
        (4_102_444_800 + 99, 123_456_789),
    );
    set_times(&root.join("tmp"), (3_000_000_000, 1), (2_999_999_999, 2));
    std::fs::write(root.join("n".repeat(255)), b"long name").unwrap();
    std::fs::create_dir(root.join("emptydir")).unwrap();
    std::os::unix::fs::chown(root, Some(42), Some(43)).unwrap();
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o750)).unwrap();
    set_xattr(root, "user.root", b"r");
    set_times(root, (1_000_000_000, 5), (1_100_000_000, 6));
}

/// A source tree on a kernel XFS mount (noatime).
fn source_mount(s: &Scratch) -> KernelMount {
    let img = s.path("src.img");
    mkfs(&img, 512 << 20, &[]);
    let m = KernelMount::new(&img, &s.path("src"), "noatime");
    populate(&m.dir);
    extend(&m.dir);
    m
}

fn xfs_repair_clean(img: &Path) {
    let out = run_output("xfs_repair", &[OsStr::new("-n"), img.as_os_str()]);
    assert!(
        out.status.success(),
        "xfs_repair -n {}: {}\n{}",
        img.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn populate_every_kind_matches_the_source() {
    let s = Scratch::new("populate-all");
    let src = source_mount(&s);
    let want = walk_manifest(&src.dir);
    assert!(
        want.len() > 11_000,
        "source manifest has {} lines",
        want.len()
    );
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let out = rxfs_ok(&[OsStr::new("populate"), img.as_os_str(), src.dir.as_os_str()]);
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains("copied"), "populate printed: {text}");
    xfs_repair_clean(&img);
    let m = KernelMount::new(&img, &s.path("mnt"), "ro");
    let got = walk_manifest(&m.dir);
    assert_same_manifest(
        "kernel mount of the copy",
        &comparable(&want),
        &comparable(&got),
    );
    for f in ["sparse", "sparse-big", "big", "empty", "dir/file", "xattrs"] {
        let (a, b) = (data_map(&src.dir.join(f)), data_map(&m.dir.join(f)));
        assert_eq!(a, b, "hole map of {f}");
    }
    assert_eq!(data_map(&m.dir.join("sparse-big")).len(), 3);
    // The source is unchanged by the copy (same manifest, atimes too).
    assert_same_manifest("source after the copy", &want, &walk_manifest(&src.dir));
    m.umount();
    src.umount();
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn populate_into_a_subdirectory_and_refusals() {
    let s = Scratch::new("populate-sub");
    let tree = s.path("tree");
    std::fs::create_dir_all(tree.join("a/b")).unwrap();
    std::fs::write(tree.join("a/b/f"), b"content").unwrap();
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let m = KernelMount::new(&img, &s.path("mk"), "");
    std::fs::create_dir(m.dir.join("sub")).unwrap();
    std::fs::create_dir(m.dir.join("sub2")).unwrap();
    std::fs::write(m.dir.join("file"), b"x").unwrap();
    m.umount();
    rxfs_ok(&[
        OsStr::new("populate"),
        img.as_os_str(),
        tree.as_os_str(),
        OsStr::new("--dest"),
        OsStr::new("/sub"),
    ]);
    // A symbolic link to the source directory is followed (its target's
    // attributes go to the destination).
    let link = s.path("treelink");
    symlink(&tree, &link).unwrap();
    set_xattr(&tree, "user.top", b"t");
    rxfs_ok(&[
        OsStr::new("populate"),
        img.as_os_str(),
        link.as_os_str(),
        OsStr::new("--dest"),
        OsStr::new("/sub2"),
        OsStr::new("--threads"),
        OsStr::new("3"),
    ]);
    // Refusals: a missing or non-directory destination, a missing source,
    // and a name that exists already; each names what is wrong.
    let cases: [(&OsStr, &str, &str); 4] = [
        (
            tree.as_os_str(),
            "/nope",
            "/nope: No such file or directory",
        ),
        (tree.as_os_str(), "/file", "/file: Not a directory"),
        (
            OsStr::new("/no/such/source"),
            "/",
            "/no/such/source: stat: No such file",
        ),
        (
            tree.as_os_str(),
            "/sub",
            "/a: mkdir in the image: file exists",
        ),
    ];
    for (src, dest, msg) in cases {
        let out = rxfs(&[
            OsStr::new("populate"),
            img.as_os_str(),
            src,
            OsStr::new("--dest"),
            OsStr::new(dest),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "populate into {dest}: {err}");
        assert!(err.contains(msg), "populate into {dest}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    xfs_repair_clean(&img);
    let m = KernelMount::new(&img, &s.path("mnt"), "ro");
    assert_eq!(std::fs::read(m.dir.join("sub/a/b/f")).unwrap(), b"content");
    assert_eq!(std::fs::read(m.dir.join("sub2/a/b/f")).unwrap(), b"content");
    let top = run_output(
        "getfattr",
        &[
            "-n",
            "user.top",
            "--only-values",
            m.dir.join("sub2").to_str().unwrap(),
        ],
    );
    assert_eq!(top.stdout, b"t");
    m.umount();
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn populate_out_of_space_is_clean() {
    let s = Scratch::new("populate-enospc");
    let tree = s.path("tree");
    std::fs::create_dir_all(&tree).unwrap();
    let chunk = pattern(20, 40 << 20);
    for i in 0..10 {
        std::fs::write(tree.join(format!("f{i}")), &chunk).unwrap();
    }
    let img = s.path("img");
    mkfs(&img, 300 << 20, &[]);
    let out = rxfs(&[OsStr::new("populate"), img.as_os_str(), tree.as_os_str()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no space left on device"), "{err}");
    assert!(
        err.contains(tree.to_str().unwrap()),
        "names the source: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    xfs_repair_clean(&img);
    let m = KernelMount::new(&img, &s.path("mnt"), "ro");
    assert!(std::fs::read_dir(&m.dir).unwrap().count() > 0);
    m.umount();
}

/// The same copy onto other mkfs.xfs variants: 1 KiB blocks, rmapbt, 64
/// KiB directory blocks, no finobt.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn populate_feature_variants() {
    let s = Scratch::new("populate-variants");
    let src = source_mount(&s);
    let want = no_dir_size(&walk_manifest(&src.dir));
    let variants: [&[&str]; 4] = [
        &["-b", "size=1024"],
        &["-m", "rmapbt=1,reflink=0"],
        &["-n", "size=65536"],
        &["-m", "finobt=0"],
    ];
    for (i, v) in variants.iter().enumerate() {
        let img = s.path(&format!("img{i}"));
        mkfs(&img, 512 << 20, v);
        rxfs_ok(&[OsStr::new("populate"), img.as_os_str(), src.dir.as_os_str()]);
        xfs_repair_clean(&img);
        let m = KernelMount::new(&img, &s.path(&format!("mnt{i}")), "ro");
        let got = no_dir_size(&walk_manifest(&m.dir));
        assert_same_manifest(&format!("mkfs {v:?}"), &want, &got);
        let f = "sparse-big";
        assert_eq!(
            data_map(&src.dir.join(f)),
            data_map(&m.dir.join(f)),
            "{v:?}"
        );
        m.umount();
    }
    src.umount();
}

/// `rxfs mkfs --populate`: the same tree into filesystems rxfs makes
/// (defaults, 1 KiB blocks, 64 KiB directory blocks), checked the same way.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn mkfs_populate_matches_the_source() {
    let s = Scratch::new("mkfs-populate");
    let src = source_mount(&s);
    let want = walk_manifest(&src.dir);
    let variants: [&[&str]; 3] = [&[], &["-b", "size=1024"], &["-n", "size=65536"]];
    for (i, v) in variants.iter().enumerate() {
        let img = s.path(&format!("img{i}"));
        let mut args: Vec<&OsStr> = vec![OsStr::new("mkfs"), OsStr::new("-q")];
        args.extend([OsStr::new("-d"), OsStr::new("size=512m")]);
        args.extend(v.iter().map(OsStr::new));
        args.extend([
            OsStr::new("--populate"),
            src.dir.as_os_str(),
            img.as_os_str(),
        ]);
        rxfs_ok(&args);
        xfs_repair_clean(&img);
        let m = KernelMount::new(&img, &s.path(&format!("mnt{i}")), "ro");
        let got = walk_manifest(&m.dir);
        let (w, g) = if v.is_empty() {
            (comparable(&want), comparable(&got))
        } else {
            (no_dir_size(&want), no_dir_size(&got))
        };
        assert_same_manifest(&format!("rxfs mkfs {v:?} --populate"), &w, &g);
        for f in ["sparse", "sparse-big"] {
            let (a, b) = (data_map(&src.dir.join(f)), data_map(&m.dir.join(f)));
            assert_eq!(a, b, "hole map of {f} ({v:?})");
        }
        m.umount();
    }
    // A missing source: refused before the image is even created.
    let img = s.path("never");
    let out = rxfs(&[
        OsStr::new("mkfs"),
        OsStr::new("-d"),
        OsStr::new("size=512m"),
        OsStr::new("--populate"),
        OsStr::new("/no/such/dir"),
        img.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/no/such/dir"));
    assert!(!img.exists());
    src.umount();
}

/// `rxfs mkfs --populate DIR DIR/disk.img`: the image being filled is not
/// copied into itself.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn an_image_inside_its_source_is_left_out() {
    let s = Scratch::new("populate-self");
    let tree = s.path("tree");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    std::fs::write(tree.join("sub/f"), b"f").unwrap();
    let img = tree.join("disk.img");
    rxfs_ok(&[
        OsStr::new("mkfs"),
        OsStr::new("-q"),
        OsStr::new("-d"),
        OsStr::new("size=512m"),
        OsStr::new("--populate"),
        tree.as_os_str(),
        img.as_os_str(),
    ]);
    // `put` of the same tree leaves it out as well.
    rxfs_ok(&[
        OsStr::new("put"),
        img.as_os_str(),
        tree.as_os_str(),
        OsStr::new("/again"),
    ]);
    xfs_repair_clean(&img);
    let m = KernelMount::new(&img, &s.path("mnt"), "ro");
    assert_eq!(std::fs::read(m.dir.join("sub/f")).unwrap(), b"f");
    assert_eq!(std::fs::read(m.dir.join("again/sub/f")).unwrap(), b"f");
    assert!(!m.dir.join("disk.img").exists());
    assert!(!m.dir.join("again/disk.img").exists());
    m.umount();
}
