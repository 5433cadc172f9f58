//! Mounting a write-protected block device, as mount(8) and the kernel's
//! XFS do it (issue 14, fstests generic/050), on a loop device set
//! read-only with `blockdev --setro`:
//! - `mount -t fuse.rxfs DEV MNT` (the helper, which mount(8) always hands
//!   `rw`) and `rxfs mount DEV MNT` mount it read-only with mount(8)'s
//!   warning; writes fail with EROFS; `rxfs mount -o rw` (read-write asked
//!   for explicitly) fails;
//! - a filesystem whose log needs recovery is refused ("cannot mount ...
//!   read-only"), since its recovery must write; with `-o norecovery` it
//!   mounts;
//! - once writable again, a read-only mount made right after the
//!   read-write mount's `umount` returned waits for the daemon to let go
//!   of the device, and sees every file.
//!
//! Root only; fails unless RXFS_SKIP_KERNEL_TESTS=1.

mod common;

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

use common::*;

const XFS_IOC_GOINGDOWN: libc::c_ulong = 0x8004_587d;
const NOLOGFLUSH: u32 = 2;

/// A loop device over an image, detached on drop.
struct Loop(String);

impl Loop {
    fn new(img: &Path) -> Loop {
        let out = run_output("losetup", &["-f", "--show", img.to_str().unwrap()]);
        Loop(String::from_utf8(out.stdout).unwrap().trim().to_string())
    }
    fn set_ro(&self, ro: bool) {
        run(
            "blockdev",
            &[if ro { "--setro" } else { "--setrw" }, &self.0],
        );
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = std::process::Command::new("losetup")
            .args(["-d", &self.0])
            .status();
    }
}

fn helper_mount(dev: &str, mnt: &Path, opts: &str) -> std::process::Output {
    std::fs::create_dir_all(mnt).unwrap();
    std::process::Command::new("mount")
        .args(["-t", "fuse.rxfs", dev, mnt.to_str().unwrap(), "-o", opts])
        .output()
        .unwrap()
}

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn write_protected_devices_mount_read_only_as_mount8_does() {
    require_root();
    require_tools(&["losetup", "blockdev"]);
    let s = Scratch::new("mount_wp");
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let lo = Loop::new(&img);
    let mnt = s.path("m");
    // rxfs install-helper puts /sbin/mount.fuse.rxfs in place.
    rxfs_ok(&["install-helper"]);

    // A clean filesystem on a write-protected device.
    lo.set_ro(true);
    let o = helper_mount(&lo.0, &mnt, "allow_other");
    assert!(o.status.success(), "helper mount: {}", text(&o));
    assert!(
        text(&o).contains("write-protected, mounted read-only"),
        "no mount(8) warning: {}",
        text(&o)
    );
    assert!(mount_line(&mnt).unwrap().contains(" ro,"), "not read-only");
    let err = std::fs::write(mnt.join("f"), b"x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EROFS), "{err}");
    rxfs_ok(&["umount".as_ref(), mnt.as_os_str()]);
    let o = rxfs(&["mount".as_ref(), lo.0.as_ref(), mnt.as_os_str()]);
    assert!(o.status.success(), "rxfs mount: {}", text(&o));
    assert!(text(&o).contains("write-protected, mounted read-only"));
    rxfs_ok(&["umount".as_ref(), mnt.as_os_str()]);
    let o = rxfs(&[
        "mount".as_ref(),
        lo.0.as_ref(),
        mnt.as_os_str(),
        "-o".as_ref(),
        "rw".as_ref(),
    ]);
    assert!(
        !o.status.success(),
        "explicit rw mounted a write-protected device"
    );
    assert!(!is_mounted(&mnt));

    // Leave the log dirty: files, then a shutdown that flushes nothing.
    lo.set_ro(false);
    let o = helper_mount(&lo.0, &mnt, "allow_other");
    assert!(o.status.success(), "{}", text(&o));
    for i in 0..20 {
        std::fs::write(mnt.join(format!("f{i}")), b"data").unwrap();
    }
    {
        let f = File::open(&mnt).unwrap();
        let mut v = NOLOGFLUSH;
        // SAFETY: the ioctl reads one u32 through the pointer.
        let r = unsafe { libc::ioctl(f.as_raw_fd(), XFS_IOC_GOINGDOWN as _, &mut v as *mut u32) };
        assert_eq!(r, 0, "shutdown: {}", std::io::Error::last_os_error());
    }
    rxfs_ok(&["umount".as_ref(), mnt.as_os_str()]);
    lo.set_ro(true);
    let o = helper_mount(&lo.0, &mnt, "allow_other");
    assert!(
        !o.status.success(),
        "a log needing recovery mounted on a write-protected device"
    );
    assert!(
        text(&o).contains("cannot mount") && text(&o).contains("read-only"),
        "{}",
        text(&o)
    );
    assert!(!is_mounted(&mnt));
    let o = helper_mount(&lo.0, &mnt, "allow_other,norecovery");
    assert!(o.status.success(), "norecovery: {}", text(&o));
    rxfs_ok(&["umount".as_ref(), mnt.as_os_str()]);

    // Writable again: a read-write mount recovers; a read-only mount made
    // as soon as `umount` returns finds the log clean.
    lo.set_ro(false);
    for round in 0..3 {
        let o = helper_mount(&lo.0, &mnt, "allow_other");
        assert!(o.status.success(), "{}", text(&o));
        std::fs::write(mnt.join(format!("g{round}")), b"more").unwrap();
        run("umount", &[mnt.to_str().unwrap()]);
        let o = helper_mount(&lo.0, &mnt, "allow_other,ro");
        assert!(o.status.success(), "{}", text(&o));
        for r in 0..=round {
            assert_eq!(
                std::fs::read(mnt.join(format!("g{r}"))).unwrap(),
                b"more",
                "round {round}: g{r}"
            );
        }
        rxfs_ok(&["umount".as_ref(), mnt.as_os_str()]);
        assert!(
            !text(&o).contains("still open read-write"),
            "round {round}: {}",
            text(&o)
        );
    }
    drop(lo);
    run_output("xfs_repair", &["-n", img.to_str().unwrap()]);
}
