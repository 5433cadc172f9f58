//! One writer per image, as the kernel owns a mounted device: a
//! read-write open of an image that is already owned fails at once with
//! a one-line reason naming the owner, and `-o wait=SECS` waits instead,
//! saying so. Owners: the kernel's XFS through a loop device backed by the
//! image file, the kernel's XFS on a block device, another rxfs.
//! Read-only commands are not refused (they read what is there).
//!
//! Root, mkfs.xfs, losetup, loop mounts and FUSE; fails unless
//! RXFS_SKIP_KERNEL_TESTS=1.

mod common;

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// `rxfs ARGS`: exit code, stderr, and how long it took.
fn timed(args: &[&OsStr]) -> (Option<i32>, String, Duration) {
    let t0 = Instant::now();
    let out = rxfs(args);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        t0.elapsed(),
    )
}

fn put(img: &Path, dest: &str, extra: &[&str]) -> (Option<i32>, String, Duration) {
    let mut args: Vec<&OsStr> = vec![OsStr::new("put")];
    args.extend(extra.iter().map(OsStr::new));
    args.extend([
        img.as_os_str(),
        OsStr::new("/etc/hostname"),
        OsStr::new(dest),
    ]);
    timed(&args)
}

fn assert_refused(what: &str, r: &(Option<i32>, String, Duration), code: i32, says: &[&str]) {
    let (c, err, took) = r;
    assert_eq!(*c, Some(code), "{what}: {err}");
    assert!(
        *took < Duration::from_secs(5),
        "{what}: refusal took {took:?}"
    );
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "{what}: not one line: {err}"
    );
    for s in says {
        assert!(err.contains(s), "{what}: {s:?} not in {err:?}");
    }
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn image_mounted_by_the_kernel_through_a_loop_device() {
    require_root();
    let s = Scratch::new("excl-loop");
    let img = s.path("img");
    mkfs(&img, 300 << 20, &[]);
    let k = s.path("k");
    let km = KernelMount::new(&img, &k, "");
    let f = s.path("f");
    std::fs::create_dir(&f).unwrap();
    let says = [
        "in use: the backing file of /dev/loop",
        &format!("mounted at {}", k.display()),
    ];
    let r = timed(&[OsStr::new("mount"), img.as_os_str(), f.as_os_str()]);
    assert_refused("rxfs mount", &r, 32, &says);
    assert!(!is_mounted(&f));
    assert_refused("rxfs put", &put(&img, "/h", &[]), 1, &says);
    // Readers are not refused.
    rxfs_ok(&[OsStr::new("ls"), img.as_os_str(), OsStr::new("/")]);
    km.umount();
    // Once the kernel let go: writable, and clean for the kernel.
    let (c, err, _) = put(&img, "/h", &[]);
    assert_eq!(c, Some(0), "{err}");
    let r = run_output("xfs_repair", &["-n", img.to_str().unwrap()]);
    assert!(r.status.success(), "{r:?}");
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn block_device_mounted_by_the_kernel() {
    require_root();
    let s = Scratch::new("excl-bdev");
    let img = s.path("img");
    mkfs(&img, 300 << 20, &[]);
    let out = run_output("losetup", &["-f", "--show", img.to_str().unwrap()]);
    let dev = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let detach = LoopGuard(dev.clone());
    let k = s.path("k");
    std::fs::create_dir(&k).unwrap();
    run("mount", &[&dev, k.to_str().unwrap()]);
    let km = KernelMount::adopt(&k);
    let r = put(Path::new(&dev), "/h", &[]);
    assert_refused(
        "rxfs put on the device",
        &r,
        1,
        &["in use: mounted at", k.to_str().unwrap()],
    );
    // The image file behind the loop device is refused too.
    let r = put(&img, "/h", &[]);
    assert_refused(
        "rxfs put on its backing file",
        &r,
        1,
        &["the backing file of"],
    );
    km.umount();
    // An attached but idle loop device is no owner.
    let (c, err, _) = put(Path::new(&dev), "/h", &[]);
    assert_eq!(c, Some(0), "{err}");
    drop(detach);
}

/// Detaches the loop device when dropped.
struct LoopGuard(String);

impl Drop for LoopGuard {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.0]).status();
    }
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn another_rxfs_is_named_and_can_be_waited_for() {
    require_root();
    let s = Scratch::new("excl-rxfs");
    let img = s.path("img");
    mkfs(&img, 300 << 20, &[]);
    let m = s.path("m");
    let guard = rxfs_mount(&img, &m, "");
    let pid = daemon_pid(&m);
    let m2 = s.path("m2");
    std::fs::create_dir(&m2).unwrap();
    let said = format!("in use: open read-write by rxfs (pid {pid})");
    let r = timed(&[OsStr::new("mount"), img.as_os_str(), m2.as_os_str()]);
    assert_refused("second rxfs mount", &r, 32, &[&said]);
    assert_refused("rxfs put", &put(&img, "/h", &[]), 1, &[&said]);

    // With wait=: says so once, and goes on when the owner lets go.
    let mut child = Command::new(RXFS)
        .args(["put", "-o", "wait=120"])
        .arg(&img)
        .args(["/etc/hostname", "/waited"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        child.try_wait().unwrap().is_none(),
        "put -o wait= did not wait"
    );
    rxfs_umount(&m, guard);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&said) && err.contains("waiting up to 120 s"),
        "{err}"
    );
    let r = run_output("xfs_repair", &["-n", img.to_str().unwrap()]);
    assert!(r.status.success(), "{r:?}");
    let ls = rxfs_ok(&[OsStr::new("ls"), img.as_os_str(), OsStr::new("/")]);
    assert_eq!(ls, b"waited\n");
}
