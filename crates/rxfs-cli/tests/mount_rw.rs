//! End-to-end tests of read-write FUSE mounts: `rxfs mount` on a fresh
//! mkfs.xfs image, every supported kind of change made through the mount
//! point with ordinary system calls, `rxfs stats` on the live mount, the
//! unmount paths (`rxfs umount`, `fusermount3 -u`, SIGTERM) leaving a
//! clean image, and `kill -9` leaving a log the kernel recovers.
//!
//! The oracle: after the unmount, `xfs_repair -n` must exit 0 and a kernel
//! loop mount (read-only, which refuses a dirty log) must show exactly the
//! tree we made: the same manifest (tests/manifest.py: types, modes,
//! owners, sizes, times, device numbers, sha256 of every file) as the FUSE
//! mount showed just before the unmount, and the values of an independent
//! model of what the test did.
//!
//! Root only; these FAIL unless RXFS_SKIP_KERNEL_TESTS=1.

mod common;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::*;
use sha2::{Digest, Sha256};

fn errno_of<T>(r: std::io::Result<T>) -> Option<i32> {
    r.err().and_then(|e| e.raw_os_error())
}

fn sha(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `rxfs stats MNT` as (name -> value); also returns stderr.
fn stats(mnt: &Path) -> (BTreeMap<String, u64>, String) {
    let out = rxfs(&[OsStr::new("stats"), mnt.as_os_str()]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "rxfs stats: {err}");
    let mut m = BTreeMap::new();
    for l in String::from_utf8(out.stdout).unwrap().lines() {
        let (k, v) = l
            .split_once(' ')
            .unwrap_or_else(|| panic!("bad line {l:?}"));
        m.insert(k.to_string(), v.parse().unwrap());
    }
    (m, err)
}

fn stats_json(mnt: &Path) -> serde_json::Value {
    let out = rxfs_ok(&[OsStr::new("stats"), OsStr::new("--json"), mnt.as_os_str()]);
    serde_json::from_slice(&out).unwrap()
}

fn daemon_pid(mnt: &Path) -> u32 {
    stats_json(mnt)["pid"].as_u64().unwrap() as u32
}

/// The manifest as path -> JSON object.
fn manifest_map(lines: &[String]) -> BTreeMap<String, serde_json::Value> {
    lines
        .iter()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["path"].as_str().unwrap().to_string(), v)
        })
        .collect()
}

/// What one path must look like.
#[derive(Debug, Clone)]
struct Want {
    kind: &'static str,
    mode: u32,
    uid: u32,
    gid: u32,
    /// Contents of regular files.
    data: Option<Vec<u8>>,
    rdev: Option<(u32, u32)>,
    /// (atime, mtime) in ns, where the test set them.
    times: Option<(i64, i64)>,
}

impl Want {
    fn dir(mode: u32) -> Want {
        Want {
            kind: "dir",
            mode,
            uid: 0,
            gid: 0,
            data: None,
            rdev: None,
            times: None,
        }
    }
    fn file(mode: u32, data: &[u8]) -> Want {
        Want {
            kind: "reg",
            data: Some(data.to_vec()),
            ..Want::dir(mode)
        }
    }
    fn node(kind: &'static str, mode: u32, rdev: Option<(u32, u32)>) -> Want {
        Want {
            kind,
            rdev,
            ..Want::dir(mode)
        }
    }
}

/// Compare a manifest with the model: the same paths, and every field the
/// model knows.
fn check_model(
    what: &str,
    got: &BTreeMap<String, serde_json::Value>,
    want: &BTreeMap<String, Want>,
) {
    let gp: Vec<_> = got.keys().collect();
    let wp: Vec<_> = want.keys().collect();
    assert_eq!(gp, wp, "{what}: paths differ");
    for (p, w) in want {
        let g = &got[p];
        assert_eq!(g["type"], w.kind, "{what}: {p} type");
        assert_eq!(
            g["mode"].as_u64().unwrap() as u32,
            w.mode,
            "{what}: {p} mode {g}"
        );
        assert_eq!(g["uid"].as_u64().unwrap() as u32, w.uid, "{what}: {p} uid");
        assert_eq!(g["gid"].as_u64().unwrap() as u32, w.gid, "{what}: {p} gid");
        if let Some(d) = &w.data {
            assert_eq!(
                g["size"].as_u64().unwrap(),
                d.len() as u64,
                "{what}: {p} size"
            );
            assert_eq!(g["sha256"].as_str().unwrap(), sha(d), "{what}: {p} sha256");
        }
        match w.rdev {
            Some((ma, mi)) => assert_eq!(g["rdev"], serde_json::json!([ma, mi]), "{what}: {p}"),
            None => assert!(g["rdev"].is_null(), "{what}: {p} rdev"),
        }
        if let Some((a, m)) = w.times {
            assert_eq!(g["atime"].as_i64().unwrap(), a, "{what}: {p} atime");
            assert_eq!(g["mtime"].as_i64().unwrap(), m, "{what}: {p} mtime");
        }
    }
}

/// Do every supported change under `m`, recording the expected result.
fn make_tree(m: &Path) -> BTreeMap<String, Want> {
    let mut want = BTreeMap::new();
    let mut put = |p: &str, w: Want| {
        want.insert(p.to_string(), w);
    };
    put("/", Want::dir(0o755));

    // Directories (mode given explicitly, umask 022).
    std::fs::DirBuilder::new()
        .mode(0o750)
        .create(m.join("d"))
        .unwrap();
    std::fs::create_dir(m.join("d/sub")).unwrap();
    put("/d", Want::dir(0o750));
    put("/d/sub", Want::dir(0o755));
    std::fs::write(m.join("d/hello"), b"hello\n").unwrap();
    put("/d/hello", Want::file(0o644, b"hello\n"));
    std::fs::write(m.join("d/sub/empty"), b"").unwrap();
    put("/d/sub/empty", Want::file(0o644, b""));

    // A 3 MiB file (several 1 MiB writes), then an overwrite inside it.
    let mut big = pattern(1, 3 << 20);
    std::fs::write(m.join("big"), &big).unwrap();
    let patch = pattern(2, 5000);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(m.join("big"))
        .unwrap();
    f.seek(SeekFrom::Start((1 << 20) + 100)).unwrap();
    f.write_all(&patch).unwrap();
    f.sync_all().unwrap();
    drop(f);
    big[(1 << 20) + 100..(1 << 20) + 100 + 5000].copy_from_slice(&patch);
    put("/big", Want::file(0o644, &big));

    // O_APPEND from separate opens.
    for i in 0..3 {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(m.join("log"))
            .unwrap();
        writeln!(f, "line {i}").unwrap();
    }
    put("/log", Want::file(0o644, b"line 0\nline 1\nline 2\n"));

    // Truncate down, extend (a hole), O_TRUNC.
    let t = pattern(3, 100_000);
    std::fs::write(m.join("shrunk"), &t).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(m.join("shrunk"))
        .unwrap()
        .set_len(10_000)
        .unwrap();
    put("/shrunk", Want::file(0o644, &t[..10_000]));
    std::fs::write(m.join("grown"), b"x").unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(m.join("grown"))
        .unwrap()
        .set_len(1 << 20)
        .unwrap();
    let mut g = vec![0u8; 1 << 20];
    g[0] = b'x';
    put("/grown", Want::file(0o644, &g));
    std::fs::write(m.join("otrunc"), pattern(4, 50_000)).unwrap();
    std::fs::write(m.join("otrunc"), b"new").unwrap();
    put("/otrunc", Want::file(0o644, b"new"));

    // chmod, chown, utimens (nanoseconds, and before 1970).
    std::fs::write(m.join("owned"), b"o").unwrap();
    std::os::unix::fs::chown(m.join("owned"), Some(1234), Some(5678)).unwrap();
    std::fs::set_permissions(m.join("owned"), std::fs::Permissions::from_mode(0o4711)).unwrap();
    put(
        "/owned",
        Want {
            uid: 1234,
            gid: 5678,
            ..Want::file(0o4711, b"o")
        },
    );
    std::fs::write(m.join("timed"), b"t").unwrap();
    set_times(&m.join("timed"), (1_600_000_000, 5), (-86_400, 999_999_999));
    put(
        "/timed",
        Want {
            times: Some((1_600_000_000_000_000_005, -86_400_000_000_000 + 999_999_999)),
            ..Want::file(0o644, b"t")
        },
    );

    // Special files.
    mknod(&m.join("fifo"), libc::S_IFIFO | 0o644, 0, 0);
    put("/fifo", Want::node("fifo", 0o644, None));
    mknod(&m.join("chr"), libc::S_IFCHR | 0o640, 4, 5);
    put("/chr", Want::node("chr", 0o640, Some((4, 5))));
    mknod(&m.join("blk"), libc::S_IFBLK | 0o600, 259, 70000);
    put("/blk", Want::node("blk", 0o600, Some((259, 70000))));
    drop(std::os::unix::net::UnixListener::bind(m.join("sock")).unwrap());
    put("/sock", Want::node("sock", 0o755, None));

    // Enough entries for a block directory, then remove some.
    std::fs::create_dir(m.join("many")).unwrap();
    put("/many", Want::dir(0o755));
    for i in 0..60 {
        let name = format!("many/entry-{i:02}");
        std::fs::write(m.join(&name), i.to_string()).unwrap();
        if i % 6 == 0 {
            std::fs::remove_file(m.join(&name)).unwrap();
        } else {
            put(
                &format!("/{name}"),
                Want::file(0o644, i.to_string().as_bytes()),
            );
        }
    }

    // Removed again.
    std::fs::write(m.join("gone"), pattern(5, 70_000)).unwrap();
    std::fs::remove_file(m.join("gone")).unwrap();
    std::fs::create_dir(m.join("d/rmme")).unwrap();
    std::fs::remove_dir(m.join("d/rmme")).unwrap();

    // fsync of a file and of a directory.
    std::fs::File::open(m.join("d/hello"))
        .unwrap()
        .sync_all()
        .unwrap();
    std::fs::File::open(m.join("d"))
        .unwrap()
        .sync_all()
        .unwrap();
    want
}

/// Errors of operations the mount refuses.
fn check_errors(m: &Path) {
    let e = |r| errno_of(r);
    assert_eq!(e(std::fs::create_dir(m.join("d"))), Some(libc::EEXIST));
    assert_eq!(
        e(std::fs::remove_dir(m.join("many"))),
        Some(libc::ENOTEMPTY)
    );
    assert_eq!(e(std::fs::remove_file(m.join("nope"))), Some(libc::ENOENT));
    assert_eq!(e(std::fs::remove_dir(m.join("big"))), Some(libc::ENOTDIR));
    assert_eq!(
        errno_of(
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(m.join("big"))
        ),
        Some(libc::EEXIST)
    );
    // rename refusals: nothing changed.
    assert_eq!(
        e(std::fs::rename(m.join("d"), m.join("d/inside"))),
        Some(libc::EINVAL)
    );
    assert_eq!(
        e(std::fs::rename(m.join("big"), m.join("many"))),
        Some(libc::EISDIR)
    );
    assert_eq!(
        e(std::fs::hard_link(m.join("d"), m.join("dirlink"))),
        Some(libc::EPERM)
    );
    // Names longer than 255 bytes.
    assert_eq!(
        e(std::fs::write(m.join("n".repeat(256)), b"")),
        Some(libc::ENAMETOOLONG)
    );
}

/// Without the write-back cache: every write(2) served at once.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn rw_mount_end_to_end() {
    end_to_end("rwmount", "rw,logbufs=4,logbsize=64k,nowriteback_cache");
}

/// The same with the kernel's write-back cache (`writeback_cache=on`): the
/// times `stat` showed are those on disk after the unmount (the kernel owns
/// mtime and ctime; a WRITE from its cache and our preallocation past EOF
/// leave them).
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn rw_mount_end_to_end_writeback_cache() {
    end_to_end("rwmount_wb", "rw,writeback_cache=on");
}

/// The default mount (no options but `rw`).
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn rw_mount_end_to_end_defaults() {
    end_to_end("rwmount_def", "rw");
}

fn end_to_end(tag: &str, opts: &str) {
    if kernel_tests_disabled() {
        return;
    }
    require_root();
    unsafe { libc::umask(0o022) };
    let s = Scratch::new(tag);
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let mnt = s.path("m");
    let guard = rxfs_mount(&img, &mnt, opts);
    let line = mount_line(&mnt).expect("mounted");
    assert!(line.contains(" fuse.rxfs rw,"), "{line}");
    let before = statvfs(&mnt);

    let want = make_tree(&mnt);
    check_errors(&mnt);

    // Read back through the mount (O_NOATIME: a plain read would move
    // the atimes the model checks, as on the kernel's XFS).
    for (p, w) in &want {
        if let Some(d) = &w.data {
            let mut got = Vec::new();
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOATIME)
                .open(mnt.join(&p[1..]))
                .and_then(|mut f| std::io::Read::read_to_end(&mut f, &mut got))
                .unwrap();
            assert!(got == *d, "{p}: contents differ through FUSE");
        }
    }
    // statfs follows the changes (3 MiB and more were allocated).
    let after = statvfs(&mnt);
    assert!(
        before.f_bfree.saturating_sub(after.f_bfree) >= (3 << 20) / after.f_bsize,
        "free blocks {} -> {}",
        before.f_bfree,
        after.f_bfree
    );
    assert!(after.f_ffree < before.f_ffree || after.f_files > before.f_files);

    // Counters of the live mount.
    let (live, err) = stats(&mnt);
    assert!(err.is_empty(), "{err}");
    assert!(live["trans_commits"] > 0, "{live:?}");
    assert!(live["checkpoints"] > 0, "{live:?}");
    assert!(live["log_writes"] > 0, "{live:?}");
    let j = stats_json(&mnt);
    assert_eq!(j["live"], true);
    assert!(j["counters"]["trans_commits"].as_u64().unwrap() >= live["trans_commits"]);

    let fuse_manifest = walk_manifest(&mnt);
    let fuse_map = manifest_map(&fuse_manifest);
    check_model("FUSE", &fuse_map, &want);
    let st_fuse = statvfs(&mnt);

    let pid = daemon_pid(&mnt);
    rxfs_ok(&[OsStr::new("umount"), mnt.as_os_str()]);
    guard.disarm();
    assert!(!is_mounted(&mnt));
    assert!(
        process_gone(pid),
        "daemon {pid} still running after rxfs umount"
    );

    // The final counters stay readable.
    let (fin, err) = stats(&mnt);
    assert!(err.contains("not mounted"), "{err}");
    assert!(fin["trans_commits"] >= live["trans_commits"]);

    run_output("xfs_repair", &[OsStr::new("-n"), img.as_os_str()]);
    // A read-only loop mount refuses a dirty log: this one must be clean.
    let k = KernelMount::new(&img, &s.path("k"), "ro");
    let kernel = walk_manifest(&k.dir);
    let st_k = statvfs(&k.dir);
    k.umount();
    assert_same_manifest(
        "kernel after rxfs umount vs FUSE before",
        &fuse_manifest,
        &kernel,
    );
    check_model("kernel", &manifest_map(&kernel), &want);
    assert_eq!(
        (st_fuse.f_files, st_fuse.f_ffree),
        (st_k.f_files, st_k.f_ffree),
        "inode counts: FUSE rw vs kernel ro"
    );
    // The kernel's read-only view has no reserved blocks; ours may.
    assert!(st_fuse.f_bfree <= st_k.f_bfree);
}

/// A tiny tree through a fresh mount; returns the model.
fn small_tree(m: &Path, seed: u64) -> (Vec<u8>, BTreeMap<String, Want>) {
    let data = pattern(seed, 200_000);
    std::fs::create_dir(m.join("dir")).unwrap();
    std::fs::write(m.join("dir/data"), &data).unwrap();
    let mut want = BTreeMap::new();
    want.insert("/".to_string(), Want::dir(0o755));
    want.insert("/dir".to_string(), Want::dir(0o755));
    want.insert("/dir/data".to_string(), Want::file(0o644, &data));
    (data, want)
}

/// After the daemon ended: repair clean, a read-only kernel mount (clean
/// log) shows the model.
fn check_clean_image(s: &Scratch, img: &Path, want: &BTreeMap<String, Want>) {
    run_output("xfs_repair", &[OsStr::new("-n"), img.as_os_str()]);
    let k = KernelMount::new(img, &s.path("k"), "ro");
    let kernel = manifest_map(&walk_manifest(&k.dir));
    k.umount();
    check_model("kernel", &kernel, want);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn fusermount_and_sigterm_unmount_cleanly() {
    require_root();
    unsafe { libc::umask(0o022) };
    let s = Scratch::new("rwends");

    // Daemon, ended by a plain fusermount3 -u.
    let img = s.path("img1");
    mkfs(&img, 512 << 20, &[]);
    let mnt = s.path("m1");
    let guard = rxfs_mount(&img, &mnt, "");
    let (_, want) = small_tree(&mnt, 11);
    let pid = daemon_pid(&mnt);
    run_output("fusermount3", &[OsStr::new("-u"), mnt.as_os_str()]);
    guard.disarm();
    assert!(
        wait_until(Duration::from_secs(60), || process_gone(pid)),
        "daemon {pid} survived fusermount3 -u"
    );
    check_clean_image(&s, &img, &want);

    // Foreground, ended by SIGTERM.
    let img = s.path("img2");
    mkfs(&img, 512 << 20, &[]);
    let mnt = s.path("m2");
    std::fs::create_dir(&mnt).unwrap();
    let mut child = Command::new(RXFS)
        .args([
            OsStr::new("mount"),
            OsStr::new("-f"),
            img.as_os_str(),
            mnt.as_os_str(),
        ])
        .spawn()
        .unwrap();
    let guard = KernelMount::adopt(&mnt);
    assert!(wait_until(Duration::from_secs(10), || is_mounted(&mnt)));
    let (_, want) = small_tree(&mnt, 12);
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    guard.disarm();
    assert!(status.success(), "{status}");
    assert!(!is_mounted(&mnt));
    check_clean_image(&s, &img, &want);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn kill_9_leaves_a_log_the_kernel_recovers() {
    require_root();
    unsafe { libc::umask(0o022) };
    let s = Scratch::new("rwkill");
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let mnt = s.path("m");
    let guard = rxfs_mount(&img, &mnt, "");
    let (data, _) = small_tree(&mnt, 13);
    // fsync makes the file durable: it must survive the crash.
    std::fs::File::open(mnt.join("dir/data"))
        .unwrap()
        .sync_all()
        .unwrap();
    std::fs::File::open(mnt.join("dir"))
        .unwrap()
        .sync_all()
        .unwrap();
    let pid = daemon_pid(&mnt);
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    assert!(wait_until(Duration::from_secs(10), || process_gone(pid)));
    drop(guard); // the dead connection's mount goes (lazily if needed)
    assert!(wait_until(Duration::from_secs(10), || !is_mounted(&mnt)));

    // The kernel replays our log on a read-write mount.
    let k = KernelMount::on_rw_loop(&img, &s.path("k"), "rw");
    assert_eq!(std::fs::read(k.dir.join("dir/data")).unwrap(), data);
    k.umount();
    run_output("xfs_repair", &[OsStr::new("-n"), img.as_os_str()]);
}

/// A loop device attached read-only, detached on drop.
struct RoLoop(String);

impl Drop for RoLoop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.0]).status();
    }
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn rw_mount_refusals() {
    require_root();
    let s = Scratch::new("rwrefuse");
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let mnt = s.path("m");
    std::fs::create_dir(&mnt).unwrap();
    let out = run_output("losetup", &["-r", "-f", "--show", img.to_str().unwrap()]);
    let dev = RoLoop(String::from_utf8(out.stdout).unwrap().trim().to_string());
    let dev_path = PathBuf::from(&dev.0);
    let cases: Vec<(&Path, &str, &str)> = vec![
        // (Without an explicit rw it mounts read-only with mount(8)'s
        // warning: tests/mount_write_protected.rs.)
        (&dev_path, "rw", "cannot open for writing"),
        (&img, "norecovery", "norecovery needs a read-only mount"),
        (&img, "rw,norecovery", "norecovery needs a read-only mount"),
        (&img, "logbufs=9", "bad logbufs"),
        (&img, "logbsize=48k", "bad logbsize"),
        (&img, "ro,frob", "unknown mount option"),
    ];
    for (src, opts, msg) in cases {
        let mut a = vec![OsStr::new("mount"), src.as_os_str(), mnt.as_os_str()];
        if !opts.is_empty() {
            a.extend([OsStr::new("-o"), OsStr::new(opts)]);
        }
        let out = rxfs(&a);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{opts:?} succeeded");
        assert!(err.contains(msg), "{opts:?}: {err}");
        assert!(!is_mounted(&mnt), "{opts:?} left a mount");
    }
    // The read-only device mounts read-only; writes are EROFS there.
    let m = rxfs_mount(&dev_path, &mnt, "ro");
    assert_eq!(
        errno_of(std::fs::write(mnt.join("x"), b"x")),
        Some(libc::EROFS)
    );
    let (st, _) = stats(&mnt);
    assert_eq!(st.get("trans_commits"), Some(&0));
    rxfs_ok(&[OsStr::new("umount"), mnt.as_os_str()]);
    m.disarm();
    drop(dev);
}
