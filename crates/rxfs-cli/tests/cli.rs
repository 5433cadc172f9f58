//! End-to-end tests of the read-only subcommands on images made and
//! populated by the kernel: info, ls, cat, stat, get, debug manifest, and
//! the error paths (missing image, non-XFS file, missing path).

mod common;

use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;

use common::*;

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn info_reports_geometry_features_and_log() {
    let s = Scratch::new("info");
    let img = populated_image(&s);
    let out = String::from_utf8(rxfs_ok(&[OsStr::new("info"), img.as_os_str()])).unwrap();
    for want in [
        "meta-data=",
        "isize=512",
        "agcount=4",
        "crc=1        finobt=1, sparse=1, rmapbt=0",
        "reflink=1    bigtime=1 inobtcount=1 nrext64=0",
        "data     =                       bsize=4096   blocks=131072, imaxpct=25",
        "naming   =version 2              bsize=4096   ascii-ci=0, ftype=1",
        "log      =internal log",
        "realtime =none",
        "log state=clean",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
    // The xfs_info lines match xfs_db's own report line by line.
    let db = run_output(
        "xfs_db",
        &[
            OsStr::new("-r"),
            OsStr::new("-c"),
            OsStr::new("info"),
            img.as_os_str(),
        ],
    );
    let db = String::from_utf8(db.stdout).unwrap();
    for (ours, theirs) in out.lines().skip(1).zip(db.lines().skip(1)).take(9) {
        assert_eq!(ours, theirs);
    }
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn ls_cat_stat() {
    let s = Scratch::new("lscat");
    let img = populated_image(&s);
    let i = img.as_os_str();
    let ls = rxfs_ok(&[OsStr::new("ls"), i, OsStr::new("/dir")]);
    assert_eq!(ls, b"file\nhard2\nsub\n");
    let ls = rxfs_ok(&[OsStr::new("ls"), i, OsStr::new("/")]);
    let names: Vec<&[u8]> = ls
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    assert!(names.contains(&&b"bad\xffname"[..]), "{names:?}");
    assert_eq!(names.len(), 17, "{}", String::from_utf8_lossy(&ls));
    let many = rxfs_ok(&[OsStr::new("ls"), i, OsStr::new("/many")]);
    assert_eq!(
        many.split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .count(),
        1000
    );
    let long = String::from_utf8_lossy(&rxfs_ok(&[
        OsStr::new("ls"),
        i,
        OsStr::new("/"),
        OsStr::new("-l"),
    ]))
    .into_owned();
    assert!(
        long.contains("lrwxrwxrwx   1     0     0          8 "),
        "{long}"
    );
    assert!(long.contains(" sym -> dir/file\n"), "{long}");
    assert!(
        long.contains("crw-r-----   1     0     0       4, 5 "),
        "{long}"
    );
    assert!(
        long.contains("-rwsr-xr-x   1  1234  5678          5 "),
        "{long}"
    );

    assert_eq!(
        rxfs_ok(&[OsStr::new("cat"), i, OsStr::new("/dir/file")]),
        b"hello\n"
    );
    assert_eq!(
        rxfs_ok(&[OsStr::new("cat"), i, OsStr::new("/big")]),
        pattern(1, 3 << 20)
    );
    let sparse = rxfs_ok(&[OsStr::new("cat"), i, OsStr::new("/sparse")]);
    assert_eq!(sparse.len(), 20 << 20);
    assert_eq!(&sparse[..8192], &pattern(2, 8192)[..]);
    assert!(sparse[8192..10 << 20].iter().all(|&b| b == 0));
    assert_eq!(&sparse[10 << 20..(10 << 20) + 4096], &pattern(3, 4096)[..]);
    // Intermediate symlinks are followed.
    assert_eq!(
        rxfs_ok(&[OsStr::new("cat"), i, OsStr::new("/dir/../dir/sub/deep.txt")]),
        b"deep"
    );

    // stat agrees with the kernel.
    let m = KernelMount::new(&img, &s.path("k"), "ro");
    let kst = std::fs::symlink_metadata(m.dir.join("chr")).unwrap();
    let st = String::from_utf8(rxfs_ok(&[OsStr::new("stat"), i, OsStr::new("/chr")])).unwrap();
    assert!(
        st.contains(&format!("Inode: {:<11} Links: 1", kst.ino())),
        "{st}"
    );
    assert!(st.contains("Device type: 4,5"), "{st}");
    assert!(st.contains("character special file"), "{st}");
    let kx = std::fs::symlink_metadata(m.dir.join("xattrs")).unwrap();
    let st = String::from_utf8(rxfs_ok(&[OsStr::new("stat"), i, OsStr::new("/xattrs")])).unwrap();
    assert!(
        st.contains(&format!(
            "Blocks: {:<10} IO Block: {:<6}",
            kx.blocks(),
            kx.blksize()
        )),
        "{st}"
    );
    assert!(st.contains("user.small"), "{st}");
    assert!(st.contains("system.posix_acl_access"), "{st}");
    let ko = std::fs::symlink_metadata(m.dir.join("old")).unwrap();
    assert_eq!((ko.mtime(), ko.mtime_nsec()), (-1_500_000_000, 999_999_999));
    let st = String::from_utf8(rxfs_ok(&[OsStr::new("stat"), i, OsStr::new("/old")])).unwrap();
    assert!(
        st.contains("Modify: 1922-06-20 21:20:00.999999999 +0000"),
        "{st}"
    );
    m.umount();
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn manifest_matches_kernel() {
    let s = Scratch::new("manifest");
    let img = populated_image(&s);
    let ours = rxfs_manifest(&img);
    let m = KernelMount::new(&img, &s.path("k"), "ro");
    let kernel = walk_manifest(&m.dir);
    m.umount();
    assert_same_manifest("rxfs debug manifest vs kernel", &kernel, &ours);
    assert!(
        ours[0].starts_with(r#"{"path":"/","type":"dir","ino":128,"#),
        "{}",
        ours[0]
    );
    assert!(ours
        .iter()
        .any(|l| l.starts_with(r#"{"path":"/bad\\xffname","#)));
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn get_copies_tree_like_the_kernel_shows_it() {
    let s = Scratch::new("get");
    let img = populated_image(&s);
    // Copy onto a fresh kernel XFS (mounted noatime, so walking the
    // copy does not change what we compare).
    let dimg = s.path("dimg");
    mkfs(&dimg, 512 << 20, &[]);
    let dm = KernelMount::new(&dimg, &s.path("d"), "noatime");
    let dest = dm.dir.join("out");
    rxfs_ok(&[
        OsStr::new("get"),
        img.as_os_str(),
        OsStr::new("/"),
        dest.as_os_str(),
    ]);
    let m = KernelMount::new(&img, &s.path("k"), "ro");
    // A copy gets new inode numbers, ctimes and (for directories) sizes
    // and blocks; everything else must be what the kernel shows.
    let strip = |l: &String| -> String {
        let mut v: serde_json::Map<String, serde_json::Value> = serde_json::from_str(l).unwrap();
        for k in ["ino", "ctime", "blocks"] {
            v.remove(k);
        }
        if v["type"] == "dir" {
            v.remove("size");
        }
        // (Both sides go through the same sorted map.)
        serde_json::to_string(&v).unwrap()
    };
    let kernel: Vec<String> = walk_manifest(&m.dir).iter().map(strip).collect();
    let copy: Vec<String> = walk_manifest(&dest).iter().map(strip).collect();
    assert_same_manifest("rxfs get vs kernel", &kernel, &copy);
    // Hard links are links again; holes stay holes.
    let h1 = std::fs::metadata(dest.join("hard1")).unwrap();
    let h2 = std::fs::metadata(dest.join("dir/hard2")).unwrap();
    assert_eq!((h1.ino(), h1.nlink()), (h2.ino(), 2));
    let sp = std::fs::metadata(dest.join("sparse")).unwrap();
    assert_eq!(sp.len(), 20 << 20);
    assert!(
        sp.blocks() * 512 < 1 << 20,
        "holes were written: {} blocks",
        sp.blocks()
    );
    // A single file into an existing directory keeps its name.
    let one = s.path("one");
    std::fs::create_dir(&one).unwrap();
    rxfs_ok(&[
        OsStr::new("get"),
        img.as_os_str(),
        OsStr::new("/dir/file"),
        one.as_os_str(),
    ]);
    assert_eq!(std::fs::read(one.join("file")).unwrap(), b"hello\n");
    let t = std::fs::metadata(one.join("file")).unwrap();
    assert_eq!((t.mtime(), t.mtime_nsec()), (1_600_000_001, 2));
    m.umount();
    dm.umount();
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn errors_have_messages_and_exit_codes() {
    let s = Scratch::new("errors");
    // Missing image.
    let out = rxfs(&[OsStr::new("info"), s.path("nope").as_os_str()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nope: No such file or directory"), "{err}");
    // Not XFS.
    let junk = s.path("junk");
    std::fs::write(&junk, vec![0u8; 1 << 20]).unwrap();
    for cmd in ["info", "ls", "debug"] {
        let args: Vec<&OsStr> = match cmd {
            "debug" => vec![
                OsStr::new("debug"),
                OsStr::new("manifest"),
                junk.as_os_str(),
            ],
            _ => vec![OsStr::new(cmd), junk.as_os_str()],
        };
        let out = rxfs(&args);
        assert_eq!(out.status.code(), Some(1), "{cmd}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("not an XFS filesystem"), "{cmd}: {err}");
    }
    // Missing path inside a good image.
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    for cmd in ["cat", "stat", "ls"] {
        let out = rxfs(&[OsStr::new(cmd), img.as_os_str(), OsStr::new("/no/such")]);
        assert_eq!(out.status.code(), Some(1), "{cmd}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("/no/such: No such file or directory"),
            "{cmd}: {err}"
        );
    }
    let out = rxfs(&[
        OsStr::new("get"),
        img.as_os_str(),
        OsStr::new("/missing"),
        s.path("dst").as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(!s.path("dst").exists());
    // Bad options are usage errors.
    let out = rxfs(&[
        OsStr::new("info"),
        img.as_os_str(),
        OsStr::new("-o"),
        OsStr::new("bogus"),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown option 'bogus'"));
    // cat of a directory.
    let out = rxfs(&[OsStr::new("cat"), img.as_os_str(), OsStr::new("/")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Is a directory"));
}

#[test]
fn every_subcommand_has_help() {
    for sub in [
        &["info"][..],
        &["ls"],
        &["cat"],
        &["stat"],
        &["get"],
        &["mount"],
        &["umount"],
        &["install-helper"],
        &["recover"],
        &["debug", "manifest"],
    ] {
        let mut args: Vec<&str> = sub.to_vec();
        args.push("--help");
        let out = rxfs(&args);
        assert!(out.status.success(), "{sub:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("Usage: rxfs"), "{sub:?}: {text}");
    }
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn dirty_log_recovered_in_memory_or_norecovery() {
    let s = Scratch::new("dirty");
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let m = KernelMount::new(&img, &s.path("k"), "");
    std::fs::write(m.dir.join("f"), b"data").unwrap();
    run(
        "xfs_io",
        &["-x", "-c", "shutdown -f", m.dir.to_str().unwrap()],
    );
    m.umount();
    let info = String::from_utf8(rxfs_ok(&[OsStr::new("info"), img.as_os_str()])).unwrap();
    assert!(info.contains("log state=dirty"), "{info}");
    // Read-only opens replay the log in memory: the file is there.
    let ls = String::from_utf8(rxfs_ok(&[
        OsStr::new("ls"),
        img.as_os_str(),
        OsStr::new("/"),
    ]))
    .unwrap();
    assert!(ls.contains('f'), "{ls}");
    rxfs_ok(&[
        OsStr::new("ls"),
        img.as_os_str(),
        OsStr::new("/"),
        OsStr::new("-o"),
        OsStr::new("ro,norecovery"),
    ]);
    // `rxfs recover` writes the replay and a clean log.
    rxfs_ok(&[OsStr::new("recover"), img.as_os_str()]);
    let info = String::from_utf8(rxfs_ok(&[OsStr::new("info"), img.as_os_str()])).unwrap();
    assert!(info.contains("log state=clean"), "{info}");
    run("xfs_repair", &["-n", img.to_str().unwrap()]);
}
