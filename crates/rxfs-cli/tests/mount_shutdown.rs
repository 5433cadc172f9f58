//! The XFS shutdown ioctl through `rxfs mount` (issue 14): after
//! `XFS_IOC_GOINGDOWN` (what `xfs_io -x -c shutdown` and fstests' godown
//! send) every operation fails with EIO, the unmount writes nothing (the
//! log stays dirty), and both the kernel's XFS and rxfs recover the image
//! with every fsync'd change intact (a file, a rename into a new
//! directory, a link); the image is repair-clean after the kernel's
//! recovery. An unprivileged caller gets EPERM and changes nothing.
//!
//! Root only; fails unless RXFS_SKIP_KERNEL_TESTS=1.

mod common;

use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Command;

use common::*;

const XFS_IOC_GOINGDOWN: libc::c_ulong = 0x8004_587d;
const NOLOGFLUSH: u32 = 2;

fn goingdown(path: &Path, flags: u32) -> std::io::Result<()> {
    let f = File::open(path)?;
    let mut v = flags;
    // SAFETY: the ioctl reads one u32 through the pointer, valid for the call.
    let r = unsafe { libc::ioctl(f.as_raw_fd(), XFS_IOC_GOINGDOWN as _, &mut v as *mut u32) };
    match r {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// The shutdown ioctl from a child process running as `uid`; its errno,
/// 0 on success.
fn goingdown_as(path: &Path, uid: u32, flags: u32) -> i32 {
    let c = cpath(path);
    errno_in_child_as(uid, || {
        let mut v = flags;
        // SAFETY: a NUL-terminated path, and the ioctl reads one u32.
        unsafe {
            let fd = libc::open(c.as_ptr(), libc::O_RDONLY);
            if fd < 0 || libc::ioctl(fd, XFS_IOC_GOINGDOWN as _, &mut v as *mut u32) != 0 {
                return last_errno();
            }
        }
        0
    })
}

fn errno_of<T>(r: std::io::Result<T>) -> Option<i32> {
    r.err().and_then(|e| e.raw_os_error())
}

fn write_synced(p: &Path, data: &[u8]) {
    let mut f = File::create(p).unwrap();
    f.write_all(data).unwrap();
    f.sync_all().unwrap();
}

fn fsync_dir(p: &Path) {
    File::open(p).unwrap().sync_all().unwrap();
}

/// What must have survived, read below `root`.
fn check_survivors(root: &Path, what: &str) {
    assert_eq!(
        fs::read(root.join("kept")).unwrap(),
        pattern(1, 100_000),
        "{what}: kept"
    );
    assert_eq!(
        fs::read(root.join("d/moved")).unwrap(),
        b"moved\n",
        "{what}: d/moved"
    );
    assert!(!root.join("tomove").exists(), "{what}: tomove still there");
    assert_eq!(
        fs::read(root.join("d/hard")).unwrap(),
        pattern(1, 100_000),
        "{what}: d/hard"
    );
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn shutdown_ioctl_stops_everything_and_the_log_recovers() {
    require_root();
    let s = Scratch::new("mount_shutdown");
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let mnt = s.path("m");
    let guard = rxfs_mount(&img, &mnt, "rw,allow_other");
    fs::set_permissions(&mnt, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();

    // fsync'd changes of every kind users fsync around.
    write_synced(&mnt.join("kept"), &pattern(1, 100_000));
    write_synced(&mnt.join("tomove"), b"moved\n");
    fs::create_dir(mnt.join("d")).unwrap();
    fs::rename(mnt.join("tomove"), mnt.join("d/moved")).unwrap();
    fs::hard_link(mnt.join("kept"), mnt.join("d/hard")).unwrap();
    fsync_dir(&mnt.join("d"));
    fsync_dir(&mnt);
    // And one that is not: it may or may not survive.
    fs::write(mnt.join("unsynced"), b"maybe\n").unwrap();

    // An unprivileged caller is refused and changes nothing.
    assert_eq!(
        goingdown_as(&mnt, 1000, NOLOGFLUSH),
        libc::EPERM,
        "unprivileged shutdown"
    );
    assert_eq!(fs::read(mnt.join("kept")).unwrap(), pattern(1, 100_000));

    // Another ioctl is not ours: ENOTTY.
    let f = File::open(&mnt).unwrap();
    let mut flags: libc::c_long = 0;
    // SAFETY: FS_IOC_GETVERSION-like probe of an ioctl rxfs does not
    // serve (XFS_IOC_GETVERSION = _IOR('v', 1, long)); writes at most a long.
    let r = unsafe {
        libc::ioctl(
            f.as_raw_fd(),
            0x8008_7601_u32 as _,
            &mut flags as *mut libc::c_long,
        )
    };
    let e = std::io::Error::last_os_error().raw_os_error();
    assert!(
        r == -1 && e == Some(libc::ENOTTY),
        "unknown ioctl: {r} {e:?}"
    );
    drop(f);

    goingdown(&mnt, NOLOGFLUSH).expect("shutdown ioctl");
    // Everything fails with EIO now; a second shutdown is harmless.
    assert_eq!(errno_of(fs::metadata(mnt.join("kept2"))), Some(libc::EIO));
    assert_eq!(errno_of(fs::read(mnt.join("unsynced"))), Some(libc::EIO));
    assert_eq!(
        errno_of(fs::read_dir(mnt.join("d")).and_then(|mut d| d.next().transpose())),
        Some(libc::EIO)
    );
    assert_eq!(errno_of(File::create(mnt.join("new"))), Some(libc::EIO));
    assert_eq!(
        errno_of(OpenOptions::new().append(true).open(mnt.join("kept"))),
        Some(libc::EIO)
    );
    let _ = goingdown(&mnt, NOLOGFLUSH);
    rxfs_umount(&mnt, guard);

    // The log was left dirty: xfs_repair -n refuses to look at it.
    let r = Command::new("xfs_repair")
        .arg("-n")
        .arg(&img)
        .output()
        .unwrap();
    assert!(
        !r.status.success(),
        "xfs_repair -n accepted a log that should be dirty"
    );
    // rxfs recovers it (a read-only mount recovers in memory)...
    let copy = s.path("copy");
    fs::copy(&img, &copy).unwrap();
    let m2 = s.path("m2");
    fs::create_dir_all(&m2).unwrap();
    rxfs_ok(&[
        OsStr::new("mount"),
        copy.as_os_str(),
        m2.as_os_str(),
        OsStr::new("-o"),
        OsStr::new("ro"),
    ]);
    let g2 = KernelMount::adopt(&m2);
    check_survivors(&m2, "rxfs recovery");
    rxfs_ok(&[OsStr::new("umount"), m2.as_os_str()]);
    g2.disarm();
    // ... and so does the kernel, leaving a repair-clean image.
    let k = KernelMount::new(&img, &s.path("k"), "");
    check_survivors(&k.dir, "kernel recovery");
    k.umount();
    run_output("xfs_repair", &[OsStr::new("-n"), img.as_os_str()]);
}
