//! Helpers for the CLI's end-to-end tests: images made by mkfs.xfs and
//! populated through the kernel's XFS (the oracle), the built `rxfs`
//! binary, and the project's manifest walker (tests/manifest.py) over any
//! mounted tree.
//!
//! These tests need root, mkfs.xfs, loop mounts and FUSE: marked ignored
//! for a plain `cargo test`, run by `cargo test -- --include-ignored`
//! (scripts/test-all), where they fail (never skip) without their tools.

#![allow(dead_code)]

use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The library's kernel-test helpers: Scratch, mkfs, KernelMount (also
/// taking over FUSE mounts), run/run_output, require_root, pattern,
/// statvfs...
#[path = "../../../rxfs/tests/common/mod.rs"]
mod kcommon;
pub use kcommon::*;

pub mod matrix;
pub mod rt;

pub const RXFS: &str = env!("CARGO_BIN_EXE_rxfs");

/// Run `rxfs` with arguments; returns the output whatever the status.
pub fn rxfs<S: AsRef<OsStr>>(args: &[S]) -> Output {
    Command::new(RXFS)
        .args(args)
        .output()
        .expect("cannot run the rxfs binary")
}

/// `sh -c CMD` in `dir`: as root (`user` None), or through `setpriv` as
/// uid = gid = `user.0` with the supplementary groups `user.1`
/// (comma-separated; empty: none).
pub fn sh_in(dir: &Path, user: Option<(u32, &str)>, cmd: &str) -> Output {
    let mut c = match user {
        Some((id, groups)) => {
            let mut c = Command::new("setpriv");
            c.args([format!("--reuid={id}"), format!("--regid={id}")]);
            match groups {
                "" => c.arg("--clear-groups"),
                g => c.arg(format!("--groups={g}")),
            };
            c.arg("sh");
            c
        }
        None => Command::new("sh"),
    };
    c.args(["-c", cmd]).current_dir(dir).output().unwrap()
}

/// `rxfs mount IMG MNT [-o OPTS]` (MNT made if missing); the guard
/// unmounts if the test panics before [`rxfs_umount`].
pub fn rxfs_mount(img: &Path, mnt: &Path, opts: &str) -> KernelMount {
    std::fs::create_dir_all(mnt).unwrap();
    let mut args = vec![OsStr::new("mount"), img.as_os_str(), mnt.as_os_str()];
    if !opts.is_empty() {
        args.extend([OsStr::new("-o"), OsStr::new(opts)]);
    }
    rxfs_ok(&args);
    KernelMount::adopt(mnt)
}

/// `rxfs umount MNT` (returns when the daemon has unmounted cleanly and
/// exited), and the guard of [`rxfs_mount`] let go.
pub fn rxfs_umount(mnt: &Path, guard: KernelMount) {
    // EBUSY can be transient: another test thread of this process may
    // have just forked a child (`errno_in_child_as`), which holds copies
    // of every descriptor, ours in this mount included, until it exits.
    for _ in 0..50 {
        let out = rxfs(&[OsStr::new("umount"), mnt.as_os_str()]);
        if out.status.success() {
            guard.disarm();
            return;
        }
        if !String::from_utf8_lossy(&out.stderr).contains("busy") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    rxfs_ok(&[OsStr::new("umount"), mnt.as_os_str()]);
    guard.disarm();
}

/// Run `f` in a child process with uid and gid `id`, no supplementary
/// groups and so no capabilities; its result (an errno, 0 for success)
/// as the child's exit status. `f` must only make system calls.
pub fn errno_in_child_as(id: u32, f: impl FnOnce() -> i32) -> i32 {
    // SAFETY: the child makes system calls only (setgroups, setgid,
    // setuid, and what `f` makes), then _exits without unwinding.
    unsafe {
        let pid = libc::fork();
        assert!(pid >= 0, "fork");
        if pid == 0 {
            let ok = libc::setgroups(0, std::ptr::null()) == 0
                && libc::setgid(id) == 0
                && libc::setuid(id) == 0;
            libc::_exit(if ok { f() } else { 200 });
        }
        let mut status = 0;
        assert_eq!(libc::waitpid(pid, &mut status, 0), pid);
        assert!(libc::WIFEXITED(status), "child: {status:#x}");
        libc::WEXITSTATUS(status)
    }
}

/// The errno of the last failed system call (in a child of
/// [`errno_in_child_as`]).
pub fn last_errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(255)
}

/// Run `rxfs`, expecting success; returns stdout.
pub fn rxfs_ok<S: AsRef<OsStr>>(args: &[S]) -> Vec<u8> {
    let out = rxfs(args);
    let shown: Vec<_> = args.iter().map(|a| a.as_ref().to_owned()).collect();
    assert!(
        out.status.success(),
        "rxfs {shown:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

pub fn is_mounted(dir: &Path) -> bool {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    let want = dir.canonicalize().unwrap_or(dir.to_path_buf());
    mounts
        .lines()
        .any(|l| l.split(' ').nth(1) == Some(want.to_str().unwrap()))
}

/// The /proc/mounts line of a mount point.
pub fn mount_line(dir: &Path) -> Option<String> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    mounts
        .lines()
        .find(|l| l.split(' ').nth(1) == Some(dir.to_str().unwrap()))
        .map(str::to_string)
}

/// A process is gone (or a zombie nobody reaped yet: it has closed
/// everything).
pub fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => {
            s.rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().next())
                == Some("Z")
        }
    }
}

pub fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    f()
}

fn cstr(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

pub fn set_xattr(p: &Path, name: &str, value: &[u8]) {
    let n = CString::new(name).unwrap();
    let r = unsafe {
        libc::lsetxattr(
            cstr(p).as_ptr(),
            n.as_ptr(),
            value.as_ptr() as *const libc::c_void,
            value.len(),
            0,
        )
    };
    assert_eq!(
        r,
        0,
        "setxattr {name} on {}: {}",
        p.display(),
        std::io::Error::last_os_error()
    );
}

/// A POSIX ACL xattr value (Linux format: version 2, then (tag, perm, id)
/// entries, little-endian).
pub fn acl(entries: &[(u16, u16, u32)]) -> Vec<u8> {
    let mut v = 2u32.to_le_bytes().to_vec();
    for (tag, perm, id) in entries {
        v.extend_from_slice(&tag.to_le_bytes());
        v.extend_from_slice(&perm.to_le_bytes());
        v.extend_from_slice(&id.to_le_bytes());
    }
    v
}

pub fn set_times(p: &Path, atime: (i64, i64), mtime: (i64, i64)) {
    let ts = [
        libc::timespec {
            tv_sec: atime.0,
            tv_nsec: atime.1,
        },
        libc::timespec {
            tv_sec: mtime.0,
            tv_nsec: mtime.1,
        },
    ];
    let r = unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            cstr(p).as_ptr(),
            ts.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    assert_eq!(r, 0, "utimensat {}", p.display());
}

pub fn mknod(p: &Path, mode: u32, major: u32, minor: u32) {
    let r = unsafe { libc::mknod(cstr(p).as_ptr(), mode, libc::makedev(major, minor)) };
    assert_eq!(r, 0, "mknod {}", p.display());
}

/// Fill a fresh kernel mount with every kind of thing the CLI must carry.
pub fn populate(root: &Path) {
    use std::io::{Seek, SeekFrom, Write};
    use std::os::unix::fs::{symlink, PermissionsExt};
    let d = root.join("dir");
    std::fs::create_dir(&d).unwrap();
    std::fs::create_dir(d.join("sub")).unwrap();
    std::fs::write(d.join("file"), b"hello\n").unwrap();
    std::fs::write(d.join("sub/deep.txt"), b"deep").unwrap();
    std::fs::write(root.join("empty"), b"").unwrap();
    std::fs::write(root.join("big"), pattern(1, 3 << 20)).unwrap();
    // Sparse: data, a 10 MiB hole, data, then a hole to the end.
    let mut f = std::fs::File::create(root.join("sparse")).unwrap();
    f.write_all(&pattern(2, 8192)).unwrap();
    f.seek(SeekFrom::Start(10 << 20)).unwrap();
    f.write_all(&pattern(3, 4096)).unwrap();
    f.set_len(20 << 20).unwrap();
    drop(f);
    // Many entries: a node-form directory (leafn blocks and a free index).
    let many = root.join("many");
    std::fs::create_dir(&many).unwrap();
    for i in 0..1000 {
        std::fs::write(many.join(format!("entry-{i:04}")), i.to_string()).unwrap();
    }
    symlink("dir/file", root.join("sym")).unwrap();
    symlink("x".repeat(900), root.join("longsym")).unwrap();
    std::fs::write(root.join("hard1"), b"linked").unwrap();
    std::fs::hard_link(root.join("hard1"), d.join("hard2")).unwrap();
    mknod(&root.join("chr"), libc::S_IFCHR | 0o640, 4, 5);
    mknod(&root.join("blk"), libc::S_IFBLK | 0o600, 259, 70000);
    mknod(&root.join("fifo"), libc::S_IFIFO | 0o644, 0, 0);
    drop(std::os::unix::net::UnixListener::bind(root.join("sock")).unwrap());
    let owned = root.join("owned");
    std::fs::write(&owned, b"owned").unwrap();
    std::os::unix::fs::chown(&owned, Some(1234), Some(5678)).unwrap();
    std::fs::set_permissions(&owned, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let xf = root.join("xattrs");
    std::fs::write(&xf, b"x").unwrap();
    set_xattr(&xf, "user.small", b"value");
    set_xattr(&xf, "user.binary", &[0, 1, 2, 255]);
    set_xattr(&xf, "user.big", &pattern(4, 3000));
    set_xattr(&xf, "trusted.t", b"trusted");
    // ACLs: user_obj rw, user 1000 rwx, group_obj r, mask rwx, other r.
    let a = acl(&[
        (0x01, 6, u32::MAX),
        (0x02, 7, 1000),
        (0x04, 4, u32::MAX),
        (0x10, 7, u32::MAX),
        (0x20, 4, u32::MAX),
    ]);
    set_xattr(&xf, "system.posix_acl_access", &a);
    let da = acl(&[
        (0x01, 7, u32::MAX),
        (0x04, 5, u32::MAX),
        (0x08, 5, 4242),
        (0x10, 5, u32::MAX),
        (0x20, 0, u32::MAX),
    ]);
    set_xattr(&d, "system.posix_acl_default", &da);
    set_xattr(&root.join("sym"), "trusted.onlink", b"l");
    std::fs::write(root.join(OsStr::from_bytes(b"bad\xffname")), b"latin").unwrap();
    std::fs::write(root.join("ünïcode"), b"utf8").unwrap();
    // Times with nanoseconds, one before 1970.
    let old = root.join("old");
    std::fs::write(&old, b"old").unwrap();
    set_times(&old, (-100, 123), (-1_500_000_000, 999_999_999));
    set_times(&d.join("file"), (1_600_000_000, 1), (1_600_000_001, 2));
}

/// Make a populated image: mkfs, kernel mount, populate, unmount.
pub fn populated_image(s: &Scratch) -> PathBuf {
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let m = KernelMount::new(&img, &s.path("populate"), "");
    populate(&m.dir);
    m.umount();
    img
}

/// The manifest of a mounted tree through the project's oracle walker,
/// tests/manifest.py (the format's spec), one line per path.
pub fn walk_manifest(root: &Path) -> Vec<String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/manifest.py");
    let out = run_output("python3", &[script.as_os_str(), root.as_os_str()]);
    manifest_lines("manifest.py", out.stdout)
}

/// `rxfs debug manifest IMG` (the same format from the image), one line
/// per path.
pub fn rxfs_manifest(img: &Path) -> Vec<String> {
    let out = rxfs_ok(&[OsStr::new("debug"), OsStr::new("manifest"), img.as_os_str()]);
    manifest_lines("rxfs debug manifest", out)
}

fn manifest_lines(who: &str, out: Vec<u8>) -> Vec<String> {
    String::from_utf8(out)
        .unwrap_or_else(|e| panic!("{who} printed non-UTF-8: {e}"))
        .lines()
        .map(String::from)
        .collect()
}

/// A manifest line without `fields` and without what a build's layout
/// decides anyway: directory sizes, and XFS's own names for the POSIX ACLs
/// (root sees `trusted.SGI_ACL_FILE`/`_DEFAULT` beside `system.posix_acl_*`).
pub fn manifest_sans(line: &str, fields: &[&str]) -> String {
    let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
    let dir = v["type"] == "dir";
    let o = v.as_object_mut().expect("a manifest line is an object");
    for f in fields {
        o.remove(*f);
    }
    if dir {
        o.remove("size");
    }
    if let Some(x) = o.get_mut("xattrs").and_then(|x| x.as_object_mut()) {
        x.remove("trusted.SGI_ACL_FILE");
        x.remove("trusted.SGI_ACL_DEFAULT");
    }
    v.to_string()
}

/// Manifest lines without `fields` only (what a copy must share with its
/// source: every other key, directory sizes included).
pub fn manifest_strip(lines: &[String], fields: &[&str]) -> Vec<String> {
    lines
        .iter()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).expect("manifest line is JSON");
            let o = v.as_object_mut().expect("a manifest line is an object");
            for f in fields {
                o.remove(*f);
            }
            v.to_string()
        })
        .collect()
}

/// What a copy does not keep from its source: inode numbers, change
/// times, block counts.
pub const COPY_FIELDS: [&str; 3] = ["ino", "ctime", "blocks"];

/// The fields a build sets or its layout decides: times, inode numbers,
/// block counts.
pub const BUILD_FIELDS: [&str; 5] = ["atime", "mtime", "ctime", "ino", "blocks"];

/// Compare two manifests line by line, with a readable failure.
pub fn assert_same_manifest(what: &str, want: &[String], got: &[String]) {
    for (i, (w, g)) in want.iter().zip(got.iter()).enumerate() {
        assert_eq!(w, g, "{what}: line {i} differs");
    }
    assert_eq!(want.len(), got.len(), "{what}: line counts differ");
}

/// statx's birth time of `p` (asserts the filesystem reported one).
pub fn btime(p: &Path) -> (i64, u32) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: statx fills the zeroed struct it is given.
    unsafe {
        let mut sx: libc::statx = std::mem::zeroed();
        let r = libc::statx(libc::AT_FDCWD, c.as_ptr(), 0, libc::STATX_BTIME, &mut sx);
        assert_eq!(
            r,
            0,
            "statx {}: {}",
            p.display(),
            std::io::Error::last_os_error()
        );
        assert!(
            sx.stx_mask & libc::STATX_BTIME != 0,
            "{}: no birth time",
            p.display()
        );
        (sx.stx_btime.tv_sec, sx.stx_btime.tv_nsec)
    }
}

/// Name an open unnamed (O_TMPFILE) file at `to` with
/// `linkat(AT_SYMLINK_FOLLOW)` of its `/proc/self/fd` link; the errno if
/// refused.
pub fn name_tmpfile(f: &std::fs::File, to: &Path) -> Result<(), i32> {
    use std::os::fd::AsRawFd;
    let src = std::ffi::CString::new(format!("/proc/self/fd/{}", f.as_raw_fd())).unwrap();
    let dst = std::ffi::CString::new(to.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: two NUL-terminated paths.
    let r = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            src.as_ptr(),
            libc::AT_FDCWD,
            dst.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(last_errno())
    }
}

/// The pid of the one rxfs daemon serving `mnt` (found by its command line).
pub fn daemon_pid(mnt: &Path) -> u32 {
    let want = mnt.as_os_str().as_bytes();
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if process_gone(pid) {
            continue;
        }
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        if cmd.split(|&b| b == 0).any(|a| a == want) {
            found.push(pid);
        }
    }
    assert_eq!(found.len(), 1, "daemons for {}: {found:?}", mnt.display());
    found[0]
}
