//! `rxfs put`, `rxfs rm` and `rxfs mkdir` against the kernel: each change
//! is made by rxfs on a mkfs.xfs image, then checked with `xfs_repair -n`
//! and a kernel mount; error cases must give a clean message naming the
//! path and exit code 1, and leave the image clean.

mod common;

use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Stdio};

use common::*;

fn xfs_repair_clean(img: &Path) {
    let out = run_output("xfs_repair", &[OsStr::new("-n"), img.as_os_str()]);
    assert!(
        out.status.success(),
        "xfs_repair -n {}: {}",
        img.display(),
        String::from_utf8_lossy(&out.stdout)
    );
}

fn args<'a>(cmd: &'a str, img: &'a Path, rest: &'a [&'a str]) -> Vec<&'a OsStr> {
    let mut v = vec![OsStr::new(cmd), img.as_os_str()];
    v.extend(rest.iter().map(OsStr::new));
    v
}

/// Run a subcommand expected to fail with exit code 1 and a message
/// containing `msg`.
fn fails(cmd: &str, img: &Path, rest: &[&str], msg: &str) {
    let out = rxfs(&args(cmd, img, rest));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "rxfs {cmd} {rest:?}: {err}");
    assert!(err.contains(msg), "rxfs {cmd} {rest:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

fn ok(cmd: &str, img: &Path, rest: &[&str]) {
    rxfs_ok(&args(cmd, img, rest));
}

fn put_stdin(img: &Path, dest: &str, data: &[u8], force: bool) -> std::process::Output {
    let mut c = Command::new(RXFS);
    c.args([
        OsStr::new("put"),
        img.as_os_str(),
        OsStr::new("-"),
        OsStr::new(dest),
    ]);
    if force {
        c.arg("--force");
    }
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(data).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn mkdir_then_kernel_sees_it() {
    let s = Scratch::new("cli-mkdir");
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    ok("mkdir", &img, &["/d", "--mode", "1777", "--owner", "12:34"]);
    ok("mkdir", &img, &["-p", "/x/y/z", "-m", "0700"]);
    ok("mkdir", &img, &["-p", "/x/y"]); // exists: fine with -p
    fails("mkdir", &img, &["/d"], "/d: File exists");
    fails("mkdir", &img, &["/q/r"], "/q: No such file or directory");
    let out = rxfs(&args("mkdir", &img, &["/"]));
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs a last component"));
    xfs_repair_clean(&img);
    let m = KernelMount::new(&img, &s.path("mnt"), "ro");
    let d = std::fs::metadata(m.dir.join("d")).unwrap();
    assert!(d.is_dir());
    assert_eq!(d.mode() & 0o7777, 0o1777);
    assert_eq!((d.uid(), d.gid()), (12, 34));
    let z = std::fs::metadata(m.dir.join("x/y/z")).unwrap();
    assert_eq!(z.mode() & 0o7777, 0o700);
    assert_eq!(
        std::fs::metadata(m.dir.join("x/y")).unwrap().mode() & 0o777,
        0o755
    );
    assert!(!m.dir.join("q").exists());
    m.umount();
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn put_files_trees_and_stdin() {
    let s = Scratch::new("cli-put");
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let host = s.path("host");
    std::fs::create_dir_all(&host).unwrap();
    let file = host.join("file.bin");
    std::fs::write(&file, pattern(5, 3 << 20)).unwrap();
    // A tree with a link, a symlink, a fifo and an xattr.
    let tree = host.join("tree");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    std::fs::write(tree.join("sub/a"), b"aaa").unwrap();
    std::fs::hard_link(tree.join("sub/a"), tree.join("b")).unwrap();
    std::os::unix::fs::symlink("sub/a", tree.join("ln")).unwrap();
    mknod(&tree.join("fifo"), libc::S_IFIFO | 0o600, 0, 0);
    set_xattr(&tree.join("sub"), "user.k", b"v");
    ok("mkdir", &img, &["/d"]);
    let f = file.to_str().unwrap();
    ok("put", &img, &[f, "/d"]); // into the directory
    ok("put", &img, &[f, "/d/renamed"]);
    ok("put", &img, &[tree.to_str().unwrap(), "/tree"]);
    let out = put_stdin(&img, "/d/stdin", b"from stdin\n", false);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Refusals.
    fails(
        "put",
        &img,
        &[f, "/d/renamed"],
        "/d/renamed: File exists (use --force",
    );
    fails(
        "put",
        &img,
        &[f, "/nope/x"],
        "/nope: No such file or directory",
    );
    fails(
        "put",
        &img,
        &["/no/such/host/file", "/d"],
        "/no/such/host/file",
    );
    fails(
        "put",
        &img,
        &[tree.to_str().unwrap(), "/"],
        "/tree: File exists",
    );
    let out = put_stdin(&img, "/d", b"x", false);
    assert_eq!(out.status.code(), Some(1));
    // Replacing.
    let out = put_stdin(&img, "/d/renamed", b"replaced", true);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    xfs_repair_clean(&img);
    let m = KernelMount::new(&img, &s.path("mnt"), "ro");
    assert_eq!(
        std::fs::read(m.dir.join("d/file.bin")).unwrap(),
        pattern(5, 3 << 20)
    );
    assert_eq!(std::fs::read(m.dir.join("d/renamed")).unwrap(), b"replaced");
    assert_eq!(
        std::fs::read(m.dir.join("d/stdin")).unwrap(),
        b"from stdin\n"
    );
    let src_meta = std::fs::metadata(&file).unwrap();
    let got = std::fs::metadata(m.dir.join("d/file.bin")).unwrap();
    assert_eq!(
        (got.mode(), got.mtime(), got.mtime_nsec()),
        (src_meta.mode(), src_meta.mtime(), src_meta.mtime_nsec())
    );
    // The tree, against its source (atimes aside: reading the host
    // source for the manifest may move them).
    let strip = |v: Vec<String>| -> Vec<String> {
        v.iter()
            .map(|l| {
                let mut j: serde_json::Value = serde_json::from_str(l).unwrap();
                let o = j.as_object_mut().unwrap();
                for k in ["ino", "ctime", "blocks", "atime"] {
                    o.remove(k);
                }
                if o["type"] == "dir" {
                    o.remove("size"); // the host's directory format
                }
                j.to_string()
            })
            .collect()
    };
    let want = strip(walk_manifest(&tree));
    let got = strip(walk_manifest(&m.dir.join("tree")));
    assert_same_manifest("put tree", &want, &got);
    m.umount();
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn rm_files_and_trees() {
    let s = Scratch::new("cli-rm");
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let m = KernelMount::new(&img, &s.path("mk"), "");
    populate(&m.dir);
    std::fs::create_dir(m.dir.join("emptydir")).unwrap();
    m.umount();
    ok("rm", &img, &["/dir/file"]);
    ok("rm", &img, &["/emptydir"]);
    fails("rm", &img, &["/many"], "/many: Directory not empty (use -r");
    fails("rm", &img, &["/nope"], "/nope: No such file or directory");
    fails("rm", &img, &["/nope/x"], "/nope: No such file or directory");
    ok("rm", &img, &["-r", "/many"]);
    ok("rm", &img, &["/hard1"]); // one of two links
    ok("rm", &img, &["-r", "/dir"]);
    xfs_repair_clean(&img);
    let m = KernelMount::new(&img, &s.path("mnt"), "ro");
    for gone in ["dir", "emptydir", "many", "hard1"] {
        assert!(!m.dir.join(gone).exists(), "{gone} still there");
    }
    assert_eq!(
        std::fs::read(m.dir.join("big")).unwrap(),
        pattern(1, 3 << 20)
    );
    m.umount();
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn put_out_of_space_is_clean() {
    let s = Scratch::new("cli-put-enospc");
    let img = s.path("img");
    mkfs(&img, 300 << 20, &[]);
    let big = s.path("big");
    let mut f = std::fs::File::create(&big).unwrap();
    let chunk = pattern(7, 16 << 20);
    for _ in 0..25 {
        f.write_all(&chunk).unwrap();
    }
    drop(f);
    fails(
        "put",
        &img,
        &[big.to_str().unwrap(), "/big"],
        "no space left on device",
    );
    xfs_repair_clean(&img);
    // The image still takes changes after that.
    ok("rm", &img, &["/big"]);
    ok("mkdir", &img, &["/after"]);
    xfs_repair_clean(&img);
    let m = KernelMount::new(&img, &s.path("mnt"), "ro");
    assert!(m.dir.join("after").is_dir());
    m.umount();
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn a_dirty_log_is_recovered_first() {
    let s = Scratch::new("cli-dirty");
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    // The kernel writes, then shuts the filesystem down with the log
    // flushed but the metadata not written back: a dirty log.
    let m = KernelMount::new(&img, &s.path("k"), "");
    std::fs::create_dir(m.dir.join("before")).unwrap();
    let mut f = std::fs::File::create(m.dir.join("before/f")).unwrap();
    f.write_all(b"logged").unwrap();
    f.sync_all().unwrap();
    drop(f);
    run(
        "xfs_io",
        &["-x", "-c", "shutdown -f", m.dir.to_str().unwrap()],
    );
    m.umount();
    let logprint = run_output("xfs_logprint", &["-t", img.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&logprint.stdout);
    assert!(
        text.contains("state: <DIRTY>"),
        "the log is not dirty:\n{text}"
    );
    ok("mkdir", &img, &["/before/after"]);
    xfs_repair_clean(&img);
    let m = KernelMount::new(&img, &s.path("mnt"), "ro");
    assert_eq!(std::fs::read(m.dir.join("before/f")).unwrap(), b"logged");
    assert!(m.dir.join("before/after").is_dir());
    m.umount();
}
