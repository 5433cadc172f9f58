//! The image-changing subcommands on filesystems with a realtime section
//! (issue 17): `rxfs put/rm/mkdir/populate/recover -o rtdev=FILE` (image
//! files and loop block devices), and `rxfs mkfs -r rtdev=... -d
//! rtinherit=1 --populate DIR`. This kernel cannot mount realtime
//! filesystems, so the oracles are `xfs_repair -n -r`, `xfs_db` (the root
//! inode `mkfs.xfs -d rtinherit=1` makes) and the library read-only: files
//! made under a directory with the rtinherit flag are realtime, read back
//! identically, and the realtime bitmap, summary and free count agree.
//!
//! Needs mkfs.xfs, xfs_repair and xfs_db; the block-device and populate
//! tests need root (loop devices, a kernel XFS source tree). Fail unless
//! RXFS_SKIP_KERNEL_TESTS=1.

mod common;

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::rt::*;
use common::*;

/// Realtime extent size of the images here (4 blocks).
const REXT: u32 = 16384;

fn os<'a>(v: &'a [&'a str]) -> Vec<&'a OsStr> {
    v.iter().map(OsStr::new).collect()
}

/// Run a subcommand expected to fail with exit code `code` and a message
/// containing `msg`.
fn fails(args: &[&str], code: i32, msg: &str) {
    let out = rxfs(&os(args));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "rxfs {args:?}: {err}");
    assert!(err.contains(msg), "rxfs {args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// `rxfs put IMG - DEST -o rtdev=RT` with `data` on standard input.
fn put_stdin(img: &str, rtopt: &str, dest: &str, data: &[u8]) {
    let mut child = Command::new(RXFS)
        .args(["put", img, "-", dest, "-o", rtopt])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(data).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "put -: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The host tree the commands copy: files of several sizes (one sparse,
/// one empty), a subdirectory, a symlink.
fn host_tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let files = vec![
        ("big".to_string(), pattern(1, 3_000_001)),
        ("small".to_string(), pattern(2, 100)),
        ("empty".to_string(), Vec::new()),
        ("sub/odd".to_string(), pattern(3, REXT as usize * 3 + 5)),
    ];
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    for (p, d) in &files {
        std::fs::write(dir.join(p), d).unwrap();
    }
    let mut sparse = pattern(4, 10_000);
    sparse.resize(2_000_000, 0);
    sparse.extend(pattern(5, 7_000));
    let f = std::fs::File::create(dir.join("sub/sparse")).unwrap();
    use std::os::unix::fs::FileExt;
    f.write_all_at(&sparse[..10_000], 0).unwrap();
    f.write_all_at(&sparse[2_000_000..], 2_000_000).unwrap();
    std::os::unix::fs::symlink("big", dir.join("ln")).unwrap();
    let mut all = files;
    all.push(("sub/sparse".to_string(), sparse));
    all
}

/// put, mkdir, populate, rm through `-o rtdev=` / `--rtdev` on an image
/// made by `mkfs.xfs -d rtinherit=1`: every regular file realtime, read
/// back identically, the rt space given back by rm, repair clean.
/// Without the realtime device the commands refuse with a message that
/// names the option, and `ro` is refused.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn put_mkdir_populate_rm_on_the_realtime_device() {
    require_tools(&["mkfs.xfs", "xfs_repair"]);
    let s = Scratch::new("rtcli-cmds");
    let img = s.path("img");
    let rt = mkfs_rt(&img, 256 << 20, REXT, &["-d", "rtinherit=1"]);
    let (i, r) = (img.to_str().unwrap(), rt.to_str().unwrap());
    let rtopt = format!("rtdev={r}");
    let host = s.path("host");
    let tree = host_tree(&host);
    let h = |p: &str| host.join(p).to_str().unwrap().to_string();
    let big = h("big");

    fails(&["put", i, &big, "/x"], 1, "-o rtdev=FILE");
    fails(&["mkdir", i, "/x"], 1, "realtime section");
    fails(
        &["put", i, &big, "/x", "-o", &format!("ro,{rtopt}")],
        2,
        "ro",
    );
    fails(&["rm", i, "/x", "-o", "norecovery"], 2, "norecovery");
    let free0 = rt_clean_free(&open_ro_rt(&img, &rt));

    rxfs_ok(&os(&["mkdir", i, "/d", "-o", &rtopt]));
    rxfs_ok(&os(&["put", i, &big, "/d", "--rtdev", r]));
    rxfs_ok(&os(&["put", "-o", &rtopt, i, &h("sub/odd"), "/d/odd"]));
    rxfs_ok(&os(&[
        "put",
        i,
        host.to_str().unwrap(),
        "/tree",
        "-o",
        &rtopt,
    ]));
    put_stdin(i, &rtopt, "/d/stdin", &pattern(6, 123_457));
    rxfs_ok(&os(&["mkdir", i, "-p", "/p/q", "-o", &rtopt]));
    rxfs_ok(&os(&[
        "populate",
        i,
        host.to_str().unwrap(),
        "--dest",
        "/p/q",
        "-o",
        &format!("{rtopt},rtsumcache=minlevel"),
    ]));
    repair_clean_rt(&img, &rt);

    let fs = open_ro_rt(&img, &rt);
    let free1 = rt_clean_free(&fs);
    assert!(free1 < free0, "rt free extents {free0} -> {free1}");
    for d in ["/d", "/tree", "/tree/sub", "/p", "/p/q", "/p/q/sub"] {
        assert!(is_rtinherit(&fs, d), "{d} inherits rtinherit");
    }
    assert_image_file(&fs, "/d/big", &tree[0].1);
    assert_image_file(&fs, "/d/odd", &tree[3].1);
    assert_image_file(&fs, "/d/stdin", &pattern(6, 123_457));
    for d in ["/d/big", "/d/odd", "/d/stdin"] {
        assert!(is_realtime(&fs, d), "{d} is realtime");
    }
    for (p, want) in &tree {
        for top in ["/tree", "/p/q"] {
            let path = format!("{top}/{p}");
            assert!(is_realtime(&fs, &path), "{path} is realtime");
            assert_image_file(&fs, &path, want);
        }
    }
    drop(fs);

    rxfs_ok(&os(&["rm", i, "/d/big", "-o", &rtopt]));
    rxfs_ok(&os(&["rm", "-r", i, "/tree", "--rtdev", r]));
    repair_clean_rt(&img, &rt);
    let fs = open_ro_rt(&img, &rt);
    let free2 = rt_clean_free(&fs);
    assert!(free2 > free1, "rm gave rt space back: {free1} -> {free2}");
    assert!(fs.resolve(b"/tree").is_err());
    assert_image_file(&fs, "/p/q/sub/sparse", &tree[4].1);
}

/// Without the rtinherit flag files stay on the data device (the realtime
/// device is still needed to write the filesystem).
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn without_rtinherit_files_stay_on_the_data_device() {
    require_tools(&["mkfs.xfs", "xfs_repair"]);
    let s = Scratch::new("rtcli-plain");
    let img = s.path("img");
    let rt = mkfs_rt(&img, 256 << 20, REXT, &[]);
    let (i, r) = (img.to_str().unwrap(), rt.to_str().unwrap());
    let data = s.path("data");
    std::fs::write(&data, pattern(9, 500_000)).unwrap();
    let free0 = rt_clean_free(&open_ro_rt(&img, &rt));
    rxfs_ok(&os(&["put", i, data.to_str().unwrap(), "/f", "--rtdev", r]));
    repair_clean_rt(&img, &rt);
    let fs = open_ro_rt(&img, &rt);
    assert!(!is_realtime(&fs, "/f"));
    assert_image_file(&fs, "/f", &pattern(9, 500_000));
    assert_eq!(rt_clean_free(&fs), free0);
}

/// A loop device attached to a file, detached on drop.
struct Loop(String);

impl Loop {
    fn attach(file: &Path) -> Loop {
        let out = run_output("losetup", &["-f", "--show", file.to_str().unwrap()]);
        Loop(String::from_utf8(out.stdout).unwrap().trim().to_string())
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.0]).status();
    }
}

/// The same commands on block devices: the data and realtime sections on
/// loop devices, `-o rtdev=/dev/loopN`.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn block_devices() {
    require_root();
    require_tools(&["mkfs.xfs", "xfs_repair", "losetup"]);
    let s = Scratch::new("rtcli-bdev");
    let img = s.path("img");
    let rt = mkfs_rt(&img, 256 << 20, REXT, &["-d", "rtinherit=1"]);
    let data = s.path("data");
    std::fs::write(&data, pattern(11, 1_000_000)).unwrap();
    {
        let (dl, rl) = (Loop::attach(&img), Loop::attach(&rt));
        let rtopt = format!("rtdev={}", rl.0);
        let d = data.to_str().unwrap();
        rxfs_ok(&os(&["mkdir", &dl.0, "/d", "-o", &rtopt]));
        rxfs_ok(&os(&["put", &dl.0, d, "/d/f", "-o", &rtopt]));
        rxfs_ok(&os(&["put", &dl.0, d, "/d/g", "--rtdev", &rl.0]));
        rxfs_ok(&os(&["rm", &dl.0, "/d/g", "-o", &rtopt]));
        repair_clean_rt(Path::new(&dl.0), Path::new(&rl.0));
    }
    let fs = open_ro_rt(&img, &rt);
    assert!(is_realtime(&fs, "/d/f"));
    assert_image_file(&fs, "/d/f", &pattern(11, 1_000_000));
    assert!(fs.resolve(b"/d/g").is_err());
    rt_clean_free(&fs);
}

/// A dirty log with realtime changes (a crash after fsync): `rxfs recover
/// -o rtdev=` replays it as the read-write mount does; `put` recovers a
/// dirty log first too.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn recover_and_put_on_a_dirty_log() {
    require_tools(&["mkfs.xfs", "xfs_repair"]);
    let s = Scratch::new("rtcli-recover");
    for (tag, recover_first) in [("recover", true), ("put", false)] {
        let img = s.path(tag);
        let rt = mkfs_rt(&img, 256 << 20, REXT, &["-d", "rtinherit=1"]);
        let (i, r) = (img.to_str().unwrap(), rt.to_str().unwrap());
        let fs = rxfs::Filesystem::open_path(&img, Some(&rt), Default::default()).unwrap();
        let args = rxfs::fs::ops_ns::CreateArgs::root(0o100644);
        let ip = fs.create(fs.root_ino(), b"f", &args).unwrap();
        assert!(ip.is_realtime());
        fs.write(ip.ino, 0, &pattern(12, 777_777)).unwrap();
        let gone = fs.create(fs.root_ino(), b"gone", &args).unwrap();
        fs.write(gone.ino, 0, &pattern(13, 300_000)).unwrap();
        fs.fsync(ip.ino, false).unwrap();
        fs.fsync(gone.ino, false).unwrap();
        fs.unlink(fs.root_ino(), b"gone").unwrap();
        // The directory's fsync forces the unlink (and everything before).
        fs.fsync(fs.root_ino(), false).unwrap();
        fs.abandon();
        drop(fs);
        if recover_first {
            // Without the realtime device (a copy): in place, the free
            // realtime extents recounted from the bitmap.
            let copy = s.path("copy.img");
            std::fs::copy(&img, &copy).unwrap();
            rxfs_ok(&os(&["recover", copy.to_str().unwrap()]));
            repair_clean_rt(&copy, &rt);
            let out = rxfs_ok(&os(&["recover", i, "-o", &format!("rtdev={r}")]));
            assert!(
                String::from_utf8_lossy(&out).contains("recovered"),
                "{}",
                String::from_utf8_lossy(&out)
            );
        } else {
            let data = s.path("data");
            std::fs::write(&data, b"after the crash").unwrap();
            rxfs_ok(&os(&[
                "put",
                i,
                data.to_str().unwrap(),
                "/after",
                "--rtdev",
                r,
            ]));
        }
        repair_clean_rt(&img, &rt);
        let fs = open_ro_rt(&img, &rt);
        assert_image_file(&fs, "/f", &pattern(12, 777_777));
        assert!(fs.resolve(b"/gone").is_err(), "{tag}");
        rt_clean_free(&fs);
        if !recover_first {
            assert_image_file(&fs, "/after", b"after the crash");
            assert!(is_realtime(&fs, "/after"));
        }
    }
}

/// The manifest of a copy compared with its source's: without inode
/// numbers, change times and block counts (realtime files take whole
/// realtime extents).
fn comparable(lines: &[String]) -> Vec<String> {
    manifest_strip(lines, &COPY_FIELDS)
}

fn rxfs_mkfs(img: &Path, rt: Option<&Path>, extra: &[&OsStr]) {
    let ropt = rt.map(|rt| format!("rtdev={},extsize={REXT}", rt.display()));
    let mut args: Vec<&OsStr> = os(&["mkfs", "-q", "-d", "size=300m,rtinherit=1"]);
    if let Some(r) = &ropt {
        args.extend([OsStr::new("-r"), OsStr::new(r)]);
    }
    args.extend(extra);
    args.push(img.as_os_str());
    rxfs_ok(&args);
}

fn sparse_file(p: &Path, size: u64) {
    std::fs::File::create(p).unwrap().set_len(size).unwrap();
}

/// `-d rtinherit=1` sets the root's RTINHERIT flag exactly as mkfs.xfs
/// does (with and without a realtime section); with `--populate` the
/// tree's regular files are realtime, the copy's manifest equals the
/// source's, repair is clean, and the image file and realtime device
/// inside the source tree are left out.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn mkfs_rtinherit_populate() {
    require_root();
    require_tools(&["mkfs.xfs", "xfs_repair", "xfs_db"]);
    let s = Scratch::new("rtcli-mkfs");
    for with_rt in [true, false] {
        let (want, got) = (s.path("want.img"), s.path("got.img"));
        let (wrt, grt) = (s.path("want.rt"), s.path("got.rt"));
        for p in [&want, &got, &wrt, &grt] {
            let _ = std::fs::remove_file(p);
        }
        sparse_file(&want, 300 << 20);
        let mut a: Vec<String> = vec!["-f".into(), "-q".into(), "-d".into(), "rtinherit=1".into()];
        if with_rt {
            sparse_file(&wrt, RT_DEV_BYTES);
            sparse_file(&grt, RT_DEV_BYTES);
            a.push("-r".into());
            a.push(format!("rtdev={},extsize={REXT}", wrt.display()));
        }
        a.push(want.display().to_string());
        run(
            "mkfs.xfs",
            &a.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        rxfs_mkfs(&got, with_rt.then_some(grt.as_path()), &[]);
        let root = root_inode_print(&want);
        assert!(root.contains(&"core.rtinherit = 1".to_string()), "{root:?}");
        assert_eq!(root, root_inode_print(&got), "root inode (rt: {with_rt})");
        if !with_rt {
            // xfs_repair and rxfs check both accept RTINHERIT without a
            // realtime section (only REALTIME needs one).
            run("xfs_repair", &["-n", got.to_str().unwrap()]);
            rxfs_ok(&os(&["check", "--quiet", got.to_str().unwrap()]));
        }
    }

    // A source tree of every kind on a kernel XFS mount (noatime).
    let src_img = s.path("src.img");
    mkfs(&src_img, 512 << 20, &[]);
    let src = KernelMount::new(&src_img, &s.path("src"), "noatime");
    populate(&src.dir);
    let want = walk_manifest(&src.dir);
    let img = s.path("img");
    let rt: PathBuf = s.path("img.rt");
    sparse_file(&rt, RT_DEV_BYTES);
    rxfs_mkfs(
        &img,
        Some(&rt),
        &[OsStr::new("--populate"), src.dir.as_os_str()],
    );
    repair_clean_rt(&img, &rt);
    let got = rxfs_ok(&[
        OsStr::new("debug"),
        OsStr::new("manifest"),
        OsStr::new("--rtdev"),
        rt.as_os_str(),
        img.as_os_str(),
    ]);
    let got: Vec<String> = String::from_utf8(got)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert_same_manifest(
        "mkfs --populate, realtime",
        &comparable(&want),
        &comparable(&got),
    );
    let fs = open_ro_rt(&img, &rt);
    let mut files = 0;
    for line in &want {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let p = v["path"].as_str().unwrap_or_default();
        if !p.starts_with('/') || p.contains('\\') || !p.is_ascii() {
            continue;
        }
        match v["type"].as_str() {
            Some("reg") => {
                assert!(is_realtime(&fs, p), "{p} is realtime");
                files += 1;
            }
            Some("dir") => assert!(is_rtinherit(&fs, p), "{p} inherits rtinherit"),
            _ => assert_eq!(di_flags(&fs, p), 0, "{p}: no flags"),
        }
    }
    assert!(files > 1000, "{files} regular files checked");
    let free = rt_clean_free(&fs);
    assert!(
        free < fs.sb().rextents,
        "the data went to the realtime device"
    );
    drop(fs);
    src.umount();

    // The image and its realtime device inside the source: left out.
    let tree = s.path("tree");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    std::fs::write(tree.join("sub/f"), b"f").unwrap();
    let (img, rt) = (tree.join("disk.img"), tree.join("disk.rt"));
    sparse_file(&rt, RT_DEV_BYTES);
    rxfs_mkfs(
        &img,
        Some(&rt),
        &[OsStr::new("--populate"), tree.as_os_str()],
    );
    repair_clean_rt(&img, &rt);
    let fs = open_ro_rt(&img, &rt);
    assert_image_file(&fs, "/sub/f", b"f");
    assert!(is_realtime(&fs, "/sub/f"));
    assert!(fs.resolve(b"/disk.img").is_err());
    assert!(fs.resolve(b"/disk.rt").is_err());
}
