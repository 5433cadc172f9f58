//! A corrupt inode through the mount looks as it does on the kernel's XFS:
//! its name is listed (`ls -l` shows `-?????????`), `stat`, `open` and
//! `cp -a` fail with EUCLEAN, `find` lists it; nothing is hidden. (Before,
//! readdirplus gave the entry inode number 0, which libc's readdir skips:
//! `ls`, `find` and `cp -a` succeeded with the file silently missing.)
//! The daemon reports the corruption once, however many lookups hit it.
//! A root inode that cannot be read fails the mount, as the kernel's does.
//!
//! Corruption: `xfs_db` writes an invalid file type into the inode's mode,
//! which XFS's inode verifier rejects (its cluster buffer stays readable,
//! so the kernel mounts the image and shows the one bad entry).
//!
//! Root, mkfs.xfs, xfs_db, loop mounts and FUSE; fails unless
//! RXFS_SKIP_KERNEL_TESTS=1.

mod common;

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;

/// What a user sees of directory `d` under `root`: exit codes and the
/// names each command shows, with "EUCLEAN" where it said so.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    ls: (i32, Vec<String>, bool),
    stat_bad: (i32, bool),
    cat_bad: (i32, bool),
    find: (i32, Vec<String>),
    cp: (i32, bool),
}

fn seen(root: &Path, scratch: &Path) -> Seen {
    let sh = |cmd: &str| {
        let o = sh_in(root, None, cmd);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            err.contains("Structure needs cleaning"),
        )
    };
    let (c, out, e) = sh("LC_ALL=C ls -la d");
    let mut names: Vec<String> = out
        .lines()
        .skip(1)
        .map(|l| format!("{} {}", &l[..10], l.rsplit(' ').next().unwrap()))
        .collect();
    names.sort();
    let ls = (c, names, e);
    let (c, _, e) = sh("stat d/bad");
    let stat_bad = (c, e);
    let (c, _, e) = sh("cat d/bad");
    let cat_bad = (c, e);
    let (fc, out, _) = sh("find d");
    let mut f: Vec<String> = out.lines().map(String::from).collect();
    f.sort();
    let dst = scratch.join(format!("cp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dst);
    let (c, _, e) = sh(&format!("cp -a d {}", dst.display()));
    let _ = std::fs::remove_dir_all(&dst);
    Seen {
        ls,
        stat_bad,
        cat_bad,
        find: (fc, f),
        cp: (c, e),
    }
}

fn inode_of(img: &Path, s: &Scratch, path: &str) -> u64 {
    let k = s.path("k-ino");
    let m = KernelMount::new(img, &k, "ro");
    let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(k.join(path)).unwrap());
    m.umount();
    ino
}

fn corrupt_mode(img: &Path, ino: u64, mode: &str) {
    run(
        "xfs_db",
        &[
            "-x",
            "-c",
            &format!("inode {ino}"),
            "-c",
            &format!("write core.mode {mode}"),
            img.to_str().unwrap(),
        ],
    );
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn corrupt_inode_is_listed_and_fails_as_on_the_kernel() {
    require_root();
    let s = Scratch::new("corrupt-ino");
    let img = s.path("img");
    mkfs(&img, 300 << 20, &[]);
    {
        let k = s.path("k0");
        let m = KernelMount::new(&img, &k, "");
        std::fs::create_dir(k.join("d")).unwrap();
        std::fs::write(k.join("d/good"), b"good\n").unwrap();
        std::fs::write(k.join("d/bad"), b"bad\n").unwrap();
        m.umount();
    }
    let bad = inode_of(&img, &s, "d/bad");
    corrupt_mode(&img, bad, "0170644");

    let k = s.path("k");
    let m = KernelMount::new(&img, &k, "ro");
    let kernel = seen(&k, &s.0);
    m.umount();
    // The oracle shows what the test is about.
    assert!(
        kernel.ls.1.iter().any(|n| n == "-????????? bad"),
        "{kernel:?}"
    );
    assert_eq!(kernel.stat_bad, (1, true), "{kernel:?}");

    for opts in ["ro", ""] {
        let f = s.path("f");
        let guard = rxfs_mount(&img, &f, opts);
        let ours = seen(&f, &s.0);
        rxfs_umount(&f, guard);
        assert_eq!(ours, kernel, "-o {opts:?}");
    }

    // One report of the corruption, however many lookups met it.
    let f = s.path("ffg");
    std::fs::create_dir_all(&f).unwrap();
    let child = Command::new(RXFS)
        .args([
            OsStr::new("mount"),
            OsStr::new("-f"),
            img.as_os_str(),
            f.as_os_str(),
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(20), || is_mounted(&f)),
        "foreground mount"
    );
    let guard = KernelMount::adopt(&f);
    let again = seen(&f, &s.0);
    let again2 = seen(&f, &s.0);
    assert_eq!((&again, &again2), (&kernel, &kernel));
    rxfs_umount(&f, guard);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let reports: Vec<&str> = err
        .lines()
        .filter(|l| l.contains(&format!("inode {bad}")))
        .collect();
    assert_eq!(reports.len(), 1, "{err}");
    assert!(reports[0].contains("corrupt"), "{err}");
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn unreadable_root_inode_fails_the_mount() {
    require_root();
    let s = Scratch::new("corrupt-root");
    for (name, mode, says) in [
        ("badtype", "0170755", "cannot read the root inode 128"),
        ("notdir", "0100644", "cannot read the root inode 128"),
    ] {
        let img = s.path(name);
        mkfs(&img, 300 << 20, &[]);
        corrupt_mode(&img, 128, mode);
        // The kernel refuses it.
        let k = s.path("k");
        std::fs::create_dir_all(&k).unwrap();
        let out = run_output_any(
            "mount",
            &["-o", "loop,ro", img.to_str().unwrap(), k.to_str().unwrap()],
        );
        if out.status.success() {
            KernelMount::adopt(&k).umount();
            panic!("{name}: the kernel mounted it");
        }
        for opts in ["", "ro"] {
            let f = s.path("f");
            std::fs::create_dir_all(&f).unwrap();
            let mut args = vec![OsStr::new("mount"), img.as_os_str(), f.as_os_str()];
            if !opts.is_empty() {
                args.extend([OsStr::new("-o"), OsStr::new(opts)]);
            }
            let out = rxfs(&args);
            let err = String::from_utf8_lossy(&out.stderr);
            if is_mounted(&f) {
                KernelMount::adopt(&f).umount();
                panic!("{name} -o {opts:?}: mounted");
            }
            assert_eq!(out.status.code(), Some(32), "{name} -o {opts:?}: {err}");
            assert!(err.contains(says), "{name}: {err}");
            assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        }
    }
}

/// Run a command that may fail; its output.
fn run_output_any(cmd: &str, args: &[&str]) -> std::process::Output {
    Command::new(cmd).args(args).output().unwrap()
}
