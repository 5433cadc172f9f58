//! Inode flags through `rxfs mount` (issue 14), with the kernel's XFS as
//! the oracle: `chattr`/`lsattr` (FS_IOC_SETFLAGS/GETFLAGS), `xfs_io
//! lsattr/chattr/chproj` and extent size hints (FS_IOC_FSGETXATTR/
//! FSSETXATTR) stored and shown as the kernel does, and what immutable
//! and append-only files and directories refuse (open for writing,
//! truncate, chmod, chown, times, unlink, rename, link, xattrs,
//! fallocate, entries of a directory). The same script runs on a kernel
//! loop mount and on a FUSE mount of identical fresh images; every
//! command's exit status and error text, and the final flags, modes and
//! sizes, must be the same. Then the image is repair-clean and the kernel
//! reads the same flags from it.
//!
//! Root only; fails unless RXFS_SKIP_KERNEL_TESTS=1.

mod common;

use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

use common::*;

const FS_IOC_FSGETXATTR: libc::c_ulong = 0x801c_581f;
const FS_IOC_FSSETXATTR: libc::c_ulong = 0x401c_5820;
const XFLAG_EXTSIZE: u32 = 0x800;
const XFLAG_EXTSZINHERIT: u32 = 0x1000;

/// A step of the script.
enum Step {
    /// A shell command as root.
    Sh(&'static str),
    /// A shell command as uid/gid 1000.
    User(&'static str),
    /// FSGETXATTR, then FSSETXATTR with these xflags added and this
    /// extent size hint (bytes), on a path.
    Hint(&'static str, u32, u32),
}

use Step::*;

const SETUP: &[Step] = &[
    Sh("mkdir d di da && touch f i a s e big d/f di/x da/x && echo data > i && echo data > a"),
    Sh("echo data > big && chown 1000:1000 s f && chmod 6755 s f"),
    Sh("chattr +i i && chattr +a a && chattr +S s && chattr +A d/f && chattr +d f"),
    Sh("chattr +i di && chattr +a da && chattr +P d"),
    Sh("lsattr i a s d/f f && lsattr -d di da d"),
];

const SCRIPT: &[Step] = &[
    // Immutable file.
    Sh("cat i"),
    Sh("echo x >> i"),
    Sh("echo x > i"),
    Sh("truncate -s 0 i"),
    Sh("chmod 600 i"),
    Sh("chown 1:1 i"),
    Sh("touch -d 2020-01-01 i"),
    Sh("touch i"),
    Sh("rm -f i"),
    Sh("mv i i2"),
    Sh("ln i i3"),
    Sh("setfattr -n user.x -v 1 i"),
    Sh("fallocate -n -l 8192 i"),
    // Append-only file.
    Sh("echo x >> a"),
    Sh("echo x > a"),
    Sh("truncate -s 0 a"),
    Sh("chmod 600 a"),
    Sh("touch a"),
    Sh("touch -d 2020-01-01 a"),
    Sh("rm -f a"),
    Sh("mv a a2"),
    Sh("ln a a3"),
    Sh("setfattr -n user.x -v 1 a"),
    // Immutable directory.
    Sh("ls di"),
    Sh("touch di/y"),
    Sh("mkdir di/sub"),
    Sh("rm di/x"),
    Sh("mv di/x di/z"),
    Sh("mv d/f di/f"),
    Sh("ln e di/l"),
    Sh("touch di/x"),
    // Append-only directory.
    Sh("touch da/y"),
    Sh("rm da/x"),
    Sh("mv da/x da/z"),
    Sh("mv da/y da/x"),
    Sh("ln e da/l"),
    Sh("mkdir da/sub && rmdir da/sub"),
    // Sync and noatime files work as usual.
    Sh("echo x >> s && cat s"),
    Sh("cat d/f"),
    // SETFLAGS by the owner keeps set-id bits; FSSETXATTR without
    // CAP_FSETID drops them (XFS's rule).
    User("chattr +d s"),
    User("xfs_io -c 'chattr +d' f"),
    // Project ids and extent size hints.
    Sh("xfs_io -c 'chproj 42' e && xfs_io -c 'lsproj' e"),
    Hint("e", XFLAG_EXTSIZE, 65536),
    Hint("e", XFLAG_EXTSIZE, 1000),
    Hint("big", XFLAG_EXTSIZE, 65536),
    Hint("d", XFLAG_EXTSZINHERIT, 1 << 20),
    Hint("f", XFLAG_EXTSZINHERIT, 65536),
    Sh("touch d/new"),
    // (has-xattr left out, see `hint`.)
    Sh("xfs_io -r -c 'lsattr -v' e big d/new f i a | sed 's/,* *has-xattr//'"),
    // copy_file_range into a file that became immutable while open
    // (fstests generic/553), and between ordinary files.
    Sh("xfs_io -f -c 'pwrite -S 0x61 0 128k' src >/dev/null && xfs_io -f -c 'pwrite -S 0x62 0 64k' -c fsync cr >/dev/null"),
    Sh("xfs_io -f -c 'chattr +i' -c 'copy_range -l 32k src' cr"),
    Sh("xfs_io -r -c 'chattr -i' cr && xfs_io -c 'copy_range -s 4096 -d 100 -l 70000 src' cr && md5sum cr && stat -c %s cr"),
    // Lifting the flags lifts the refusals.
    Sh("chattr -i i && echo y >> i && chattr -a a && truncate -s 1 a && chattr -i di && rm di/x"),
];

fn sh(dir: &Path, user: bool, cmd: &str) -> String {
    let out = sh_in(dir, user.then_some((1000, "")), cmd);
    format!(
        "{cmd} => {:?}\n{}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// FSGETXATTR, add `xflags`, set the hint `extsize`, FSSETXATTR: the
/// outcome (errno) and the fields read back.
fn hint(dir: &Path, path: &str, xflags: u32, extsize: u32) -> String {
    let f = File::open(dir.join(path)).unwrap();
    let mut b = [0u32; 7];
    // SAFETY: FSGETXATTR writes one 28-byte struct fsxattr into `b`.
    let r = unsafe { libc::ioctl(f.as_raw_fd(), FS_IOC_FSGETXATTR as _, b.as_mut_ptr()) };
    assert_eq!(r, 0, "FSGETXATTR {path}");
    b[0] |= xflags;
    b[1] = extsize;
    // SAFETY: FSSETXATTR reads one 28-byte struct fsxattr from `b`.
    let r = unsafe { libc::ioctl(f.as_raw_fd(), FS_IOC_FSSETXATTR as _, b.as_ptr()) };
    let e = if r == 0 {
        0
    } else {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(-1)
    };
    // SAFETY: as above.
    let r = unsafe { libc::ioctl(f.as_raw_fd(), FS_IOC_FSGETXATTR as _, b.as_mut_ptr()) };
    assert_eq!(r, 0, "FSGETXATTR {path}");
    // HASATTR (an attribute fork exists) is left out: a kernel built
    // with LSMs gives every new inode an empty attribute fork, rxfs only
    // when it gets an attribute.
    b[0] &= !0x8000_0000;
    format!(
        "hint {path} +{xflags:#x} {extsize} => errno {e}; xflags {:#x} extsize {} nextents {} projid {}\n",
        b[0], b[1], b[2], b[3]
    )
}

fn run(dir: &Path, steps: &[Step]) -> Vec<String> {
    steps
        .iter()
        .map(|s| match s {
            Sh(c) => sh(dir, false, c),
            User(c) => sh(dir, true, c),
            Hint(p, x, n) => hint(dir, p, *x, *n),
        })
        .collect()
}

fn state(dir: &Path) -> Vec<String> {
    vec![
        sh(dir, false, "lsattr i a s d/f f e big && lsattr -d di da d"),
        sh(dir, false, "stat -c '%n %a %s' i a s f e big di da d d/new"),
        sh(dir, false, "ls di da | sort"),
    ]
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn inode_flags_match_the_kernel() {
    require_root();
    require_tools(&[
        "chattr",
        "lsattr",
        "setfattr",
        "setpriv",
        "xfs_io",
        "fallocate",
    ]);
    let s = Scratch::new("mount_flags");
    let kimg = s.path("kimg");
    mkfs(&kimg, 512 << 20, &[]);
    let k = KernelMount::new(&kimg, &s.path("k"), "");
    run(&k.dir, SETUP);
    let want = run(&k.dir, SCRIPT);
    let want_state = state(&k.dir);
    k.umount();
    // The script exercised what it claims on the kernel.
    for (i, must) in [
        (1, "Operation not permitted"),
        (13, "=> Some(0)"),
        (14, "Operation not permitted"),
        (17, "=> Some(0)"),
        (24, "Operation not permitted"),
        (31, "=> Some(0)"),
        (32, "Operation not permitted"),
    ] {
        assert!(
            want[i].contains(must),
            "the kernel's step {i} lacks {must:?}: {}",
            want[i]
        );
    }

    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let mnt = s.path("m");
    let guard = rxfs_mount(&img, &mnt, "rw,allow_other");
    run(&mnt, SETUP);
    let got = run(&mnt, SCRIPT);
    let got_state = state(&mnt);
    rxfs_umount(&mnt, guard);
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w, "FUSE mount vs kernel XFS");
    }
    assert_eq!(
        got_state, want_state,
        "final state: FUSE mount vs kernel XFS"
    );
    run_output("xfs_repair", &[OsStr::new("-n"), img.as_os_str()]);
    let k = KernelMount::new(&img, &s.path("k2"), "");
    let after = state(&k.dir);
    k.umount();
    assert_eq!(after, want_state, "the kernel's view of the rxfs image");
}

/// The label through `xfs_io -c label` (FS_IOC_GETFSLABEL/SETFSLABEL),
/// as on the kernel's XFS: shown, set, refused when too long or by an
/// unprivileged caller, and on disk in every AG's superblock afterwards.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn label_matches_the_kernel() {
    require_root();
    require_tools(&["xfs_io", "xfs_db", "setpriv"]);
    let s = Scratch::new("mount_label");
    const STEPS: &[Step] = &[
        Sh("xfs_io -c label ."),
        Sh("xfs_io -c 'label -s twelve_bytes' ."),
        Sh("xfs_io -c 'label -s thirteen_byte' ."),
        User("xfs_io -c 'label -s user' ."),
        Sh("xfs_io -c label ."),
        Sh("xfs_io -c 'label -c' . && xfs_io -c 'label -s new' . && xfs_io -c label ."),
    ];
    let mut seen = Vec::new();
    for (name, fuse) in [("kimg", false), ("img", true)] {
        let img = s.path(name);
        mkfs(&img, 512 << 20, &["-L", "start"]);
        let dir = s.path(&format!("{name}-m"));
        let out = if fuse {
            let g = rxfs_mount(&img, &dir, "rw,allow_other");
            let out = run(&dir, STEPS);
            rxfs_umount(&dir, g);
            out
        } else {
            let k = KernelMount::new(&img, &dir, "");
            let out = run(&k.dir, STEPS);
            k.umount();
            out
        };
        run_output("xfs_repair", &[OsStr::new("-n"), img.as_os_str()]);
        let mut labels = Vec::new();
        for ag in 0..4 {
            let o = run_output(
                "xfs_db",
                &[
                    OsStr::new("-r"),
                    OsStr::new("-c"),
                    OsStr::new(&format!("sb {ag}")),
                    OsStr::new("-c"),
                    OsStr::new("p fname"),
                    img.as_os_str(),
                ],
            );
            labels.push(String::from_utf8_lossy(&o.stdout).trim().to_string());
        }
        seen.push((out, labels));
    }
    assert!(seen[0].0[2].contains("Invalid argument"), "{:?}", seen[0].0);
    assert!(
        seen[0].0[3].contains("Operation not permitted"),
        "{:?}",
        seen[0].0
    );
    assert_eq!(seen[1].0, seen[0].0, "FUSE mount vs kernel XFS");
    assert!(
        seen[0]
            .1
            .iter()
            .all(|l| l.starts_with("fname = \"new\\000")),
        "kernel's superblocks: {:?}",
        seen[0].1
    );
    assert_eq!(seen[1].1, seen[0].1, "every AG's superblock label");
}
