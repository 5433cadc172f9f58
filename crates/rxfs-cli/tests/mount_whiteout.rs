//! `RENAME_WHITEOUT` through `rxfs mount` (issue 14), with the kernel's
//! XFS as the oracle: a rename that leaves a whiteout (a 0:0 character
//! device, mode 0) under the source name, over an existing target, of a
//! directory, onto another link of the same inode (nothing happens), and
//! refused with RENAME_EXCHANGE; the same renames on a kernel loop mount
//! and on a FUSE mount give the same results and trees. Then an overlayfs
//! with its upper layer on rxfs: removing and renaming lower files leaves
//! whiteouts in the upper layer and the merged view the kernel's
//! overlayfs computes; the image is repair-clean and the kernel reads the
//! same upper layer.
//!
//! Root only; fails unless RXFS_SKIP_KERNEL_TESTS=1.

mod common;

use std::ffi::OsStr;
use std::fs;
use std::path::Path;
use std::process::Command;

use common::*;

const RENAME_EXCHANGE: u32 = 2;
const RENAME_WHITEOUT: u32 = 4;

fn renameat2(dir: &Path, from: &str, to: &str, flags: u32) -> String {
    let (a, b) = (cpath(&dir.join(from)), cpath(&dir.join(to)));
    // SAFETY: two NUL-terminated paths valid for the call.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            flags,
        )
    };
    let e = if r == 0 {
        0
    } else {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(-1)
    };
    format!("renameat2 {from} {to} {flags:#x} => {e}")
}

fn tree(dir: &Path) -> String {
    let out = Command::new("sh")
        .args(["-c", "find . -path ./lost+found -prune -o -print | sort | xargs stat -c '%n %F %a %t:%T %h %s'"])
        .current_dir(dir)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn script(dir: &Path) -> Vec<String> {
    for d in ["d", "d/sub"] {
        fs::create_dir(dir.join(d)).unwrap();
    }
    for (f, c) in [
        ("a", "a\n"),
        ("b", "b\n"),
        ("c", "c\n"),
        ("x", "x\n"),
        ("d/sub/f", "f\n"),
    ] {
        fs::write(dir.join(f), c).unwrap();
    }
    fs::hard_link(dir.join("x"), dir.join("x2")).unwrap();
    let out = vec![
        renameat2(dir, "a", "a2", RENAME_WHITEOUT),
        renameat2(dir, "b", "c", RENAME_WHITEOUT),
        renameat2(dir, "d/sub", "sub2", RENAME_WHITEOUT),
        renameat2(dir, "x", "x2", RENAME_WHITEOUT),
        renameat2(dir, "a2", "c", RENAME_WHITEOUT | RENAME_EXCHANGE),
        renameat2(dir, "nothere", "y", RENAME_WHITEOUT),
        tree(dir),
    ];
    out
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn whiteouts_match_the_kernel_and_serve_overlayfs() {
    require_root();
    let s = Scratch::new("mount_whiteout");
    let kimg = s.path("kimg");
    mkfs(&kimg, 512 << 20, &[]);
    let k = KernelMount::new(&kimg, &s.path("k"), "");
    let want = script(&k.dir);
    k.umount();
    assert!(
        want[0].ends_with("=> 0") && want[4].ends_with("=> 22"),
        "{want:?}"
    );
    assert!(
        want[6].contains("./a character special file 0 0:0 1 0"),
        "{}",
        want[6]
    );

    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let mnt = s.path("m");
    fs::create_dir_all(&mnt).unwrap();
    rxfs_ok(&[
        OsStr::new("mount"),
        img.as_os_str(),
        mnt.as_os_str(),
        OsStr::new("-o"),
        OsStr::new("rw"),
    ]);
    let guard = KernelMount::adopt(&mnt);
    let got = script(&mnt);
    assert_eq!(got, want, "FUSE mount vs kernel XFS");

    // overlayfs, upper layer on rxfs.
    let lower = s.path("lower");
    fs::create_dir_all(lower.join("ld")).unwrap();
    for f in ["l1", "l2", "ld/l3"] {
        fs::write(lower.join(f), f).unwrap();
    }
    fs::create_dir_all(mnt.join("upper")).unwrap();
    fs::create_dir_all(mnt.join("work")).unwrap();
    let ovl = s.path("ovl");
    fs::create_dir_all(&ovl).unwrap();
    let opts = format!(
        "lowerdir={},upperdir={},workdir={}",
        lower.display(),
        mnt.join("upper").display(),
        mnt.join("work").display()
    );
    run_output(
        "mount",
        &[
            OsStr::new("-t"),
            OsStr::new("overlay"),
            OsStr::new("overlay"),
            OsStr::new("-o"),
            OsStr::new(&opts),
            ovl.as_os_str(),
        ],
    );
    fs::remove_file(ovl.join("l1")).unwrap();
    fs::rename(ovl.join("l2"), ovl.join("l2moved")).unwrap();
    fs::remove_file(ovl.join("ld/l3")).unwrap();
    fs::write(ovl.join("new"), b"new\n").unwrap();
    let merged = tree(&ovl);
    run_output("umount", &[ovl.as_os_str()]);
    assert!(
        !merged.contains("./l1 ") && !merged.contains("./ld/l3 "),
        "{merged}"
    );
    assert!(merged.contains("./l2moved regular file"), "{merged}");
    let upper = tree(&mnt.join("upper"));
    assert!(
        upper.contains("./l1 character special file 0 0:0"),
        "{upper}"
    );
    assert!(
        upper.contains("./ld/l3 character special file 0 0:0"),
        "{upper}"
    );
    rxfs_umount(&mnt, guard);
    run_output("xfs_repair", &[OsStr::new("-n"), img.as_os_str()]);
    let k = KernelMount::new(&img, &s.path("k2"), "ro");
    assert_eq!(
        tree(&k.dir.join("upper")),
        upper,
        "the kernel's view of the upper layer"
    );
    k.umount();
}
