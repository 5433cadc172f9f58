//! A read-write FUSE mount of a filesystem with a realtime section
//! (`rxfs mount IMG MNT -o rtdev=FILE`, issue 17): the realtime flags
//! through FS_IOC_FSGETXATTR/FSSETXATTR (`xfs_io chattr +t` on a
//! directory, `chattr +r` on an empty file, extent size hints) with the
//! kernel's refusals (EINVAL for `chattr +r` on a file with data, and for
//! a realtime file's hint that is not whole realtime extents), data
//! written under an rtinherit directory with cp, dd (buffered and
//! O_DIRECT), truncate and fallocate, and statfs per path: a directory or
//! file with the rtinherit or realtime flag reports the realtime section,
//! the others the data device, as XFS does.
//!
//! This kernel cannot mount realtime filesystems, so the oracles are a
//! host directory that took the same commands (file contents), `xfs_repair
//! -n -r` after the unmount, the library (flags, bytes, the realtime
//! bitmap against the free count statfs showed), and a read-only remount.
//!
//! Root, FUSE, mkfs.xfs, xfs_repair and xfs_io; fails unless
//! RXFS_SKIP_KERNEL_TESTS=1.

mod common;

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

use common::rt::*;
use common::*;

/// Realtime extent size of the image (4 blocks of 4 KiB).
const REXT: u32 = 16384;
const BLOCK: u64 = 4096;

const FS_IOC_FSGETXATTR: libc::c_ulong = 0x801c_581f;
const FS_IOC_FSSETXATTR: libc::c_ulong = 0x401c_5820;
const XFLAG_REALTIME: u32 = 0x1;
const XFLAG_PREALLOC: u32 = 0x2;
const XFLAG_RTINHERIT: u32 = 0x100;
const XFLAG_EXTSIZE: u32 = 0x800;

/// `sh -c CMD` in `dir`: (exit code, stdout and stderr).
fn sh(dir: &Path, cmd: &str) -> (i32, String) {
    let out = sh_in(dir, None, cmd);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

fn sh_ok(dir: &Path, cmd: &str) -> String {
    let (code, text) = sh(dir, cmd);
    assert_eq!(code, 0, "{cmd}: {text}");
    text
}

/// FSGETXATTR of `p`: (xflags, extent size hint in bytes).
fn fsxattr(p: &Path) -> (u32, u32) {
    let f = File::open(p).unwrap();
    let mut b = [0u32; 7];
    // SAFETY: FSGETXATTR writes one 28-byte struct fsxattr into `b`.
    let r = unsafe { libc::ioctl(f.as_raw_fd(), FS_IOC_FSGETXATTR as _, b.as_mut_ptr()) };
    assert_eq!(r, 0, "FSGETXATTR {}", p.display());
    (b[0] & !0x8000_0000, b[1])
}

/// FSSETXATTR of `p` with `xflags` added and hint `extsize` (bytes): the
/// errno (0: done). (`xfs_io extsize` refuses filesystems that are not
/// XFS by statfs's magic, which a FUSE mount's is not.)
fn set_hint(p: &Path, xflags: u32, extsize: u32) -> i32 {
    let f = File::open(p).unwrap();
    let mut b = [0u32; 7];
    // SAFETY: as in `fsxattr`.
    let r = unsafe { libc::ioctl(f.as_raw_fd(), FS_IOC_FSGETXATTR as _, b.as_mut_ptr()) };
    assert_eq!(r, 0);
    b[0] |= xflags;
    b[1] = extsize;
    // SAFETY: FSSETXATTR reads one 28-byte struct fsxattr from `b`.
    let r = unsafe { libc::ioctl(f.as_raw_fd(), FS_IOC_FSSETXATTR as _, b.as_ptr()) };
    if r == 0 {
        0
    } else {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(-1)
    }
}

/// The data commands, run in the mount's rtinherit directory and in a
/// host directory (`DIRECT`: `oflag=direct` on the mount; the host's
/// filesystem need not take O_DIRECT).
const DATA: &str = "cp ../../src1 a && cp ../../src1 b && cp ../../src2 c \
    && dd if=../../src2 of=d bs=100k count=7 seek=3 status=none \
    && dd if=../../src1 of=c bs=64k count=5 seek=9 conv=notrunc status=none \
    && truncate -s 100001 a && truncate -s 5M e && truncate -s 3000 c \
    && fallocate -p -o 12345 -l 200000 b && fallocate -p -o 0 -l 16384 d \
    && fallocate -o 1M -l 2M f && dd if=../../src2 of=f bs=4k count=3 seek=300 conv=notrunc status=none \
    && dd if=../../src1 of=g bs=16k count=10 DIRECT status=none \
    && mkdir sub && cp ../../src2 sub/h";

const FILES: &[&str] = &["a", "b", "c", "d", "e", "f", "g", "sub/h"];

/// statfs of `p`: (blocks, free, available, files).
fn statfs(p: &Path) -> (u64, u64, u64, u64) {
    let s = statvfs(p);
    assert_eq!(s.f_frsize, BLOCK, "{}", p.display());
    (s.f_blocks, s.f_bfree, s.f_bavail, s.f_files)
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn realtime_flags_data_and_statfs_through_the_mount() {
    require_root();
    require_tools(&["mkfs.xfs", "xfs_repair", "xfs_io", "fallocate", "truncate"]);
    let s = Scratch::new("mount_rt");
    let img = s.path("img");
    let rt = mkfs_rt(&img, 512 << 20, REXT, &[]);
    std::fs::write(s.path("src1"), pattern(1, 3_000_001)).unwrap();
    std::fs::write(s.path("src2"), pattern(2, 777_777)).unwrap();
    let host = s.path("host/rt");
    std::fs::create_dir_all(&host).unwrap();
    sh_ok(&host, &DATA.replace("DIRECT", ""));

    let mnt = s.path("m");
    std::fs::create_dir_all(&mnt).unwrap();
    // Read-write needs the realtime device.
    let out = rxfs(&[
        std::ffi::OsStr::new("mount"),
        img.as_os_str(),
        mnt.as_os_str(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("-o rtdev=FILE"),
        "{err}"
    );
    assert!(!is_mounted(&mnt));
    let guard = rxfs_mount(&img, &mnt, &format!("rtdev={}", rt.display()));
    let m = |p: &str| mnt.join(p);
    sh_ok(
        &mnt,
        "mkdir rt plain && touch e f && echo data > g && echo data > plain/x",
    );

    // The flags, and what the kernel refuses.
    sh_ok(&mnt, "xfs_io -c 'chattr +t' rt && xfs_io -c 'chattr +r' e");
    let (code, text) = sh(&mnt, "xfs_io -c 'chattr +r' g");
    assert!(
        code != 0 && text.contains("Invalid argument"),
        "chattr +r on a file with data: {code} {text}"
    );
    assert_eq!(set_hint(&m("f"), XFLAG_EXTSIZE, 4096), 0, "a 4k hint");
    let (code, text) = sh(&mnt, "xfs_io -c 'chattr +r' f");
    assert!(
        code != 0 && text.contains("Invalid argument"),
        "chattr +r with a hint of part of an rt extent: {code} {text}"
    );
    assert_eq!(set_hint(&m("e"), XFLAG_EXTSIZE, 8192), libc::EINVAL);
    assert_eq!(set_hint(&m("e"), XFLAG_EXTSIZE, 65536), 0);
    sh_ok(&mnt, "xfs_io -c 'chattr -r' e && xfs_io -c 'chattr +r' e");
    assert_eq!(fsxattr(&m("e")), (XFLAG_REALTIME | XFLAG_EXTSIZE, 65536));
    assert_eq!(fsxattr(&m("rt")), (XFLAG_RTINHERIT, 0));
    assert_eq!(fsxattr(&m("f")), (XFLAG_EXTSIZE, 4096));
    assert_eq!(fsxattr(&m("g")), (0, 0));
    let lsattr = sh_ok(&mnt, "xfs_io -r -c 'lsattr -v' rt e f g");
    let want = "[rt-inherit] rt \n[realtime, extsize] e \n[extsize] f \n[] g \n";
    assert_eq!(lsattr, want, "xfs_io lsattr -v");

    // Data in the rtinherit directory and in a plain one.
    sh_ok(&m("rt"), &DATA.replace("DIRECT", "oflag=direct"));
    sh_ok(&m("plain"), "cp ../../src1 big");
    for f in FILES {
        let got = std::fs::read(m("rt").join(f)).unwrap();
        assert!(got == std::fs::read(host.join(f)).unwrap(), "rt/{f}");
        // `f` was fallocated: XFS marks such a file PREALLOC (checked
        // against the kernel on the data device: `falloc_full_kernel`).
        let prealloc = if *f == "f" { XFLAG_PREALLOC } else { 0 };
        assert_eq!(
            fsxattr(&m("rt").join(f)).0,
            XFLAG_REALTIME | prealloc,
            "rt/{f}"
        );
    }
    assert_eq!(fsxattr(&m("rt/sub")).0, XFLAG_RTINHERIT);
    assert_eq!(fsxattr(&m("plain/big")).0, 0);

    // statfs per path.
    sh_ok(&mnt, "sync");
    let rblocks = RT_DEV_BYTES / BLOCK;
    let rt_st = statfs(&m("rt"));
    let data_st = statfs(&mnt);
    assert_eq!(rt_st.0, rblocks, "realtime blocks");
    assert!(rt_st.1 < rblocks && rt_st.1 == rt_st.2, "{rt_st:?}");
    assert_eq!(rt_st.3, data_st.3, "inode numbers stay the data device's");
    assert!(data_st.0 > rblocks, "{data_st:?}");
    for p in ["rt/a", "rt/sub", "rt/sub/h", "e"] {
        assert_eq!(statfs(&m(p)), rt_st, "statfs {p}: the realtime section");
    }
    for p in ["plain", "plain/big", "g", "f"] {
        // (Free data blocks may still move: a file's unused EOF
        // preallocation is trimmed when the kernel sends its release,
        // after close returned.)
        let st = statfs(&m(p));
        assert_eq!((st.0, st.3), (data_st.0, data_st.3), "statfs {p}: data");
        assert!(st.1 > rblocks && st.1 == st.2, "statfs {p}: {st:?}");
    }
    let df = sh_ok(&mnt, "df -k --output=size rt . | tail -n 2");
    let df: Vec<u64> = df.split_whitespace().map(|v| v.parse().unwrap()).collect();
    assert_eq!(df, [rblocks * 4, data_st.0 * 4], "df -k");
    rxfs_umount(&mnt, guard);

    repair_clean_rt(&img, &rt);
    let fs = open_ro_rt(&img, &rt);
    let free = rt_clean_free(&fs);
    assert_eq!(
        free * (REXT as u64 / BLOCK),
        rt_st.1,
        "statfs's free realtime blocks are the bitmap's"
    );
    for f in FILES {
        let p = format!("/rt/{f}");
        assert!(is_realtime(&fs, &p), "{p}");
        assert_image_file(&fs, &p, &std::fs::read(host.join(f)).unwrap());
    }
    assert!(is_rtinherit(&fs, "/rt") && is_rtinherit(&fs, "/rt/sub"));
    assert!(is_realtime(&fs, "/e") && !is_realtime(&fs, "/plain/big"));
    assert_image_file(&fs, "/plain/big", &pattern(1, 3_000_001));
    drop(fs);

    // Read-only again: the same bytes, flags and statfs.
    let guard = rxfs_mount(&img, &mnt, &format!("ro,rtdev={}", rt.display()));
    sh_ok(
        &s.path("host"),
        &format!("diff -r rt {}", m("rt").display()),
    );
    assert_eq!(sh_ok(&mnt, "xfs_io -r -c 'lsattr -v' rt e f g"), want);
    assert_eq!(statfs(&m("rt")).1, rt_st.1, "free rt blocks after remount");
    rxfs_umount(&mnt, guard);
}

/// `kill -9` of the daemon while a realtime file unlinked but still open
/// sits on the AGI unlinked list: the next rxfs mount recovers and gives
/// its realtime extents back (the kernel here cannot mount the image to
/// do it).
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn kill_9_with_an_open_unlinked_realtime_file() {
    require_root();
    require_tools(&["mkfs.xfs", "xfs_repair", "xfs_io"]);
    let s = Scratch::new("mount_rt_kill9");
    let img = s.path("img");
    let rt = mkfs_rt(&img, 512 << 20, REXT, &[]);
    let opts = format!("rtdev={}", rt.display());
    let mnt = s.path("m");
    let guard = rxfs_mount(&img, &mnt, &opts);
    sh_ok(&mnt, "mkdir rt && xfs_io -c 'chattr +t' rt");
    std::fs::write(mnt.join("rt/keep"), pattern(3, 100_000)).unwrap();
    let mut open = File::create(mnt.join("rt/gone")).unwrap();
    std::io::Write::write_all(&mut open, &pattern(4, 500_000)).unwrap();
    open.sync_all().unwrap();
    std::fs::remove_file(mnt.join("rt/gone")).unwrap();
    // The unlink made durable: the directory's fsync forces the log.
    File::open(mnt.join("rt")).unwrap().sync_all().unwrap();
    let pid = daemon_pid(&mnt);
    // SAFETY: kill(2) of the daemon this test started.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    assert!(wait_until(std::time::Duration::from_secs(10), || {
        process_gone(pid)
    }));
    drop(open);
    drop(guard);
    assert!(wait_until(std::time::Duration::from_secs(10), || {
        !is_mounted(&mnt)
    }));

    // The log holds the file on an unlinked list (replayed in memory).
    let ro = open_ro_rt(&img, &rt);
    let st = ro.recovery_stats().cloned().expect("a dirty log");
    assert_eq!(st.unlinked_inodes_freed, 1, "{st}");
    drop(ro);

    let guard = rxfs_mount(&img, &mnt, &opts);
    assert_eq!(
        std::fs::read(mnt.join("rt/keep")).unwrap(),
        pattern(3, 100_000)
    );
    assert!(!mnt.join("rt/gone").exists());
    rxfs_umount(&mnt, guard);
    repair_clean_rt(&img, &rt);
    let fs = open_ro_rt(&img, &rt);
    // Only "keep" holds realtime space: 100,000 bytes in 16 KiB extents.
    assert_eq!(rt_clean_free(&fs), fs.sb().rextents - 7);
}
