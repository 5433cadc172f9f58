//! The C example (examples/c/rxfs-tree.c) built against the installed
//! header, library and pkg-config file (scripts/install-capi into a
//! scratch prefix) and run: its listing of a kernel-made image equals
//! what the kernel's XFS shows (mode, size, path of every entry); `cat`
//! gives a file's bytes; `put` writes a file that `xfs_repair -n` accepts
//! and the kernel reads back, with its xattr. Null handles and bad
//! arguments give errno values, never a crash.
//!
//! Root, mkfs.xfs, cc, pkg-config, loop mounts; fails unless
//! RXFS_SKIP_KERNEL_TESTS=1.

#[path = "../../rxfs/tests/common/mod.rs"]
mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};

use common::*;

fn top() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The kernel's listing: "mode size path" per entry, sorted.
fn kernel_listing(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        let m = std::fs::symlink_metadata(&p).unwrap();
        let rel = p.strip_prefix(root).unwrap();
        let shown = format!("/{}", rel.display());
        out.push(format!("{:06o} {} {}", m.mode(), m.size(), shown));
        if m.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                stack.push(e.unwrap().path());
            }
        }
    }
    out.sort();
    out
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn c_example_builds_against_the_installed_library_and_agrees_with_the_kernel() {
    require_root();
    let s = Scratch::new("capi");
    // Install what `cargo test` built (the cdylib is beside the deps dir).
    let exe = std::env::current_exe().unwrap();
    let target = exe.parent().unwrap().parent().unwrap();
    assert!(
        target.join("librxfs_capi.so").exists(),
        "no cdylib in {}",
        target.display()
    );
    let prefix = s.path("prefix");
    let out = Command::new(top().join("scripts/install-capi"))
        .args(["--no-build", "--prefix"])
        .arg(&prefix)
        .env("CARGO_TARGET_DIR", target.parent().unwrap())
        .output()
        .unwrap();
    assert!(out.status.success(), "install-capi: {out:?}");
    let pc = prefix.join("lib/pkgconfig");
    let flags = Command::new("pkg-config")
        .args(["--cflags", "--libs", "rxfs"])
        .env("PKG_CONFIG_PATH", &pc)
        .output()
        .unwrap();
    assert!(flags.status.success(), "pkg-config: {flags:?}");
    let flags = String::from_utf8(flags.stdout).unwrap();
    let bin = s.path("rxfs-tree");
    let cc = Command::new("cc")
        .args([
            "-Wall",
            "-Wextra",
            "-Werror",
            "-std=c11",
            "-D_DEFAULT_SOURCE",
        ])
        .arg(top().join("examples/c/rxfs-tree.c"))
        .args(flags.split_whitespace())
        .arg("-o")
        .arg(&bin)
        .output()
        .unwrap();
    assert!(
        cc.status.success(),
        "cc: {}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let run = |args: &[&str], stdin: &[u8]| {
        let mut c = Command::new(&bin)
            .args(args)
            .env("LD_LIBRARY_PATH", prefix.join("lib"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        c.stdin.take().unwrap().write_all(stdin).unwrap();
        c.wait_with_output().unwrap()
    };

    // A kernel-made image.
    let img = s.path("img");
    mkfs(&img, 300 << 20, &[]);
    let data = pattern(9, 700_000);
    let m = KernelMount::new(&img, &s.path("k"), "");
    std::fs::create_dir_all(m.dir.join("d/e")).unwrap();
    std::fs::write(m.dir.join("d/e/data"), &data).unwrap();
    std::os::unix::fs::symlink("d/e/data", m.dir.join("link")).unwrap();
    for i in 0..300 {
        std::fs::write(m.dir.join(format!("d/f{i}")), vec![b'x'; i]).unwrap();
    }
    std::fs::set_permissions(m.dir.join("d/f7"), std::fs::Permissions::from_mode(0o4711)).unwrap();
    let want = kernel_listing(&m.dir);
    m.umount();

    let out = run(&[img.to_str().unwrap()], b"");
    assert!(out.status.success(), "{out:?}");
    let mut got: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    got.sort();
    assert_eq!(got, want);
    let out = run(&[img.to_str().unwrap(), "cat", "/link"], b"");
    assert!(out.status.success(), "{out:?}");
    assert!(out.stdout == data, "cat gave other bytes");
    let out = run(&[img.to_str().unwrap(), "cat", "/nope"], b"");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("No such file"),
        "{out:?}"
    );

    let payload = pattern(3, 2_000_000);
    let out = run(&[img.to_str().unwrap(), "put", "/d/from-c"], &payload);
    assert!(out.status.success(), "{out:?}");
    let r = run_output("xfs_repair", &["-n", img.to_str().unwrap()]);
    assert!(r.status.success(), "xfs_repair -n: {r:?}");
    let m = KernelMount::new(&img, &s.path("k"), "ro");
    let back = std::fs::read(m.dir.join("d/from-c")).unwrap();
    let origin = run_output(
        "getfattr",
        &[
            "--only-values",
            "-n",
            "user.origin",
            m.dir.join("d/from-c").to_str().unwrap(),
        ],
    );
    m.umount();
    assert!(back == payload, "the kernel read other bytes");
    assert_eq!(String::from_utf8_lossy(&origin.stdout), "c-example");
    // Writing it again: EEXIST (RXFS_OPEN_EXCL), the image unchanged.
    let out = run(&[img.to_str().unwrap(), "put", "/d/from-c"], b"x");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("File exists"),
        "{out:?}"
    );
}

/// The ABI's guards, called directly: NULL handles and strings are
/// EINVAL with a message, a missing image ENOENT, corruption EUCLEAN.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn null_and_bad_arguments_are_errno_values() {
    use rxfs_capi::*;
    use std::ffi::{CStr, CString};
    let msg = || {
        unsafe { CStr::from_ptr(rxfs_last_error()) }
            .to_string_lossy()
            .into_owned()
    };
    unsafe {
        let mut fs: *mut rxfs_fs = std::ptr::null_mut();
        assert_eq!(
            rxfs_open(std::ptr::null(), std::ptr::null(), &mut fs),
            libc::EINVAL
        );
        assert!(msg().contains("path is NULL"), "{}", msg());
        let missing = CString::new("/nonexistent/rxfs.img").unwrap();
        assert_eq!(
            rxfs_open(missing.as_ptr(), std::ptr::null(), &mut fs),
            libc::ENOENT
        );
        let mut st = std::mem::zeroed::<rxfs_stat>();
        let root = CString::new("/").unwrap();
        assert_eq!(
            rxfs_stat(std::ptr::null(), root.as_ptr(), 1, &mut st),
            libc::EINVAL
        );
        assert_eq!(rxfs_close(std::ptr::null_mut()), libc::EINVAL);
        assert_eq!(rxfs_file_close(std::ptr::null_mut()), libc::EINVAL);
        assert_eq!(rxfs_closedir(std::ptr::null_mut()), 0);
    }
    if kernel_tests_disabled() {
        return;
    }
    require_root();
    let s = Scratch::new("capi-corrupt");
    let img = s.path("img");
    mkfs(&img, 300 << 20, &[]);
    let m = KernelMount::new(&img, &s.path("k"), "");
    std::fs::create_dir(m.dir.join("dir")).unwrap();
    let ino = std::fs::metadata(m.dir.join("dir")).unwrap().ino();
    m.umount();
    let w = run_output(
        "xfs_db",
        &[
            "-x",
            "-c",
            &format!("inode {ino}"),
            "-c",
            "write -d core.magic 0",
            img.to_str().unwrap(),
        ],
    );
    assert!(w.status.success(), "{w:?}");
    unsafe {
        let path = CString::new(img.to_str().unwrap()).unwrap();
        let mut fs: *mut rxfs_fs = std::ptr::null_mut();
        assert_eq!(
            rxfs_open(path.as_ptr(), std::ptr::null(), &mut fs),
            0,
            "{}",
            msg()
        );
        let dir = CString::new("/dir").unwrap();
        let mut st = std::mem::zeroed::<rxfs_stat>();
        assert_eq!(rxfs_stat(fs, dir.as_ptr(), 1, &mut st), libc::EUCLEAN);
        assert!(msg().contains("corrupt"), "{}", msg());
        assert_eq!(rxfs_close(fs), 0);
        let mut findings = 0u64;
        assert_eq!(rxfs_check(path.as_ptr(), &mut findings), 0);
        assert!(findings > 0);
    }
}

/// mkfs, populate, mknod and statvfs through the ABI: `xfs_repair -n`
/// is clean and the kernel reads the tree back.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn mkfs_populate_mknod_statvfs() {
    use rxfs_capi::*;
    use std::ffi::{CStr, CString};
    if kernel_tests_disabled() {
        return;
    }
    require_root();
    let msg = || {
        unsafe { CStr::from_ptr(rxfs_last_error()) }
            .to_string_lossy()
            .into_owned()
    };
    let s = Scratch::new("capi-populate");
    let src = s.path("src");
    std::fs::create_dir_all(src.join("a/b")).unwrap();
    std::fs::write(src.join("a/b/f"), pattern(4, 300_000)).unwrap();
    let img = CString::new(s.path("img").to_str().unwrap()).unwrap();
    unsafe {
        assert_eq!(
            rxfs_mkfs(img.as_ptr(), 300 << 20, std::ptr::null(), 0),
            0,
            "{}",
            msg()
        );
        // A second mkfs without force: EEXIST, naming XFS.
        assert_eq!(
            rxfs_mkfs(img.as_ptr(), 300 << 20, std::ptr::null(), 0),
            libc::EEXIST
        );
        assert!(msg().contains("xfs"), "{}", msg());
        let o = rxfs_open_options {
            writable: 1,
            rtdev: std::ptr::null(),
            offset: 0,
            partition: 0,
        };
        let mut fs: *mut rxfs_fs = std::ptr::null_mut();
        assert_eq!(rxfs_open(img.as_ptr(), &o, &mut fs), 0, "{}", msg());
        let csrc = CString::new(src.to_str().unwrap()).unwrap();
        let root = CString::new("/").unwrap();
        let (mut paths, mut bytes) = (0u64, 0u64);
        assert_eq!(
            rxfs_populate(fs, csrc.as_ptr(), root.as_ptr(), &mut paths, &mut bytes),
            0,
            "{}",
            msg()
        );
        // The root (filled from the source directory), a, a/b, a/b/f.
        assert_eq!((paths, bytes), (4, 300_000));
        let fifo = CString::new("/fifo").unwrap();
        assert_eq!(
            rxfs_mknod(fs, fifo.as_ptr(), libc::S_IFIFO | 0o640, 0, 0),
            0,
            "{}",
            msg()
        );
        let mut st = std::mem::zeroed::<rxfs_statvfs>();
        assert_eq!(rxfs_statvfs(fs, &mut st), 0);
        assert_eq!((st.bsize, st.namemax), (4096, 255));
        assert!(st.bfree < st.blocks && st.ffree < st.files);
        assert_eq!(rxfs_close(fs), 0, "{}", msg());
    }
    let r = run_output("xfs_repair", &["-n", s.path("img").to_str().unwrap()]);
    assert!(r.status.success(), "xfs_repair -n: {r:?}");
    let m = KernelMount::new(&s.path("img"), &s.path("k"), "ro");
    assert_eq!(
        std::fs::read(m.dir.join("a/b/f")).unwrap(),
        pattern(4, 300_000)
    );
    let f = std::fs::symlink_metadata(m.dir.join("fifo")).unwrap();
    assert_eq!(f.mode(), libc::S_IFIFO | 0o640);
    m.umount();
}
