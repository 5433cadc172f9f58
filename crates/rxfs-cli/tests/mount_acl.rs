//! POSIX ACLs through `rxfs mount`, with the kernel's XFS as the oracle:
//! the same script of `setfacl`, `chmod`, creations under default ACLs
//! (with several umasks) and access checks as unprivileged users runs on a
//! kernel loop mount and on a FUSE mount of identical fresh images; the
//! modes, the `getfacl` output of every path and every access verdict must
//! be the same. Then the image is repair-clean and the kernel reads the
//! same ACLs from it.
//!
//! Root only; fails unless RXFS_SKIP_KERNEL_TESTS=1.

mod common;

use std::ffi::OsStr;
use std::path::Path;

use common::*;

/// (run as: None = root, Some(uid)), umask, shell command.
const SCRIPT: &[(Option<u32>, u32, &str)] = &[
    (None, 0o022, "mkdir d && chmod 777 d"),
    (None, 0o022, "setfacl -m u:1000:rwx,g:2000:r-x,m::rwx d"),
    (
        None,
        0o022,
        "setfacl -d -m u:1000:rwx,u:1001:r--,g::r-x,o::--- d",
    ),
    (
        Some(1000),
        0o022,
        "touch d/f1 && mkdir d/sub && mkfifo d/fifo",
    ),
    (Some(1000), 0o077, "touch d/f2 && mkdir d/sub2"),
    (Some(1000), 0o022, "touch d/sub/deep"),
    (None, 0o077, "touch plain && mkdir plaindir"),
    (None, 0o002, "touch plain2"),
    (None, 0o022, "chmod 750 d/f1"),
    (
        None,
        0o022,
        "touch secret && chmod 600 secret && setfacl -m u:1000:r secret",
    ),
    (
        None,
        0o022,
        "touch secret2 && setfacl -m u:1000:rw,g:3000:r,m::r secret2",
    ),
    (
        None,
        0o022,
        "touch gone && setfacl -m u:1000:rwx gone && setfacl -b gone",
    ),
    (None, 0o022, "touch same && setfacl -m u::rw,g::r,o::r same"),
    (
        None,
        0o022,
        "mkdir nodef && setfacl -d -m u:1000:rwx nodef && setfacl -k nodef",
    ),
];

/// (uid, path, test flag): `test -r/-w/-x` verdicts compared.
const CHECKS: &[(u32, &str, &str)] = &[
    (1000, "secret", "-r"),
    (1001, "secret", "-r"),
    (1000, "secret", "-w"),
    (1000, "secret2", "-w"),
    (1000, "secret2", "-r"),
    (1002, "secret2", "-r"),
    (1000, "d/f1", "-w"),
    (1001, "d/f1", "-r"),
    (1001, "d/f2", "-r"),
    (1002, "d/f1", "-r"),
    (1000, "d/sub", "-x"),
    (1002, "d/sub", "-x"),
    (1000, "plain", "-r"),
];

const PATHS: &[&str] = &[
    "d",
    "d/f1",
    "d/f2",
    "d/sub",
    "d/sub2",
    "d/sub/deep",
    "d/fifo",
    "plain",
    "plaindir",
    "plain2",
    "secret",
    "secret2",
    "gone",
    "same",
    "nodef",
];

fn sh(dir: &Path, uid: Option<u32>, umask: u32, cmd: &str) -> std::process::Output {
    sh_in(
        dir,
        uid.map(|u| (u, "")),
        &format!("umask {umask:03o} && {cmd}"),
    )
}

/// Run the script in `dir`; returns every observation as text lines.
fn run_script(dir: &Path) -> Vec<String> {
    for (uid, umask, cmd) in SCRIPT {
        let out = sh(dir, *uid, *umask, cmd);
        assert!(
            out.status.success(),
            "in {}: {cmd:?}: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    observe(dir, true)
}

/// Modes, getfacl of every path, and (with `checks`) access verdicts.
fn observe(dir: &Path, checks: bool) -> Vec<String> {
    let mut lines = Vec::new();
    for p in PATHS {
        let st = sh(dir, None, 0o022, &format!("stat -c '%n %f %u %g' {p}"));
        lines.push(String::from_utf8_lossy(&st.stdout).trim().to_string());
        let acl = sh(dir, None, 0o022, &format!("getfacl -n -c -p {p}"));
        assert!(acl.status.success(), "getfacl {p}");
        for l in String::from_utf8_lossy(&acl.stdout).lines() {
            if !l.is_empty() {
                lines.push(format!("{p}: {l}"));
            }
        }
    }
    if checks {
        for (uid, p, flag) in CHECKS {
            let r = sh(dir, Some(*uid), 0o022, &format!("test {flag} {p}"));
            lines.push(format!(
                "uid {uid} test {flag} {p}: {}",
                if r.status.success() { "yes" } else { "no" }
            ));
        }
    }
    lines
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn acls_match_the_kernel() {
    require_root();
    require_tools(&["setfacl", "getfacl", "setpriv"]);
    let s = Scratch::new("mount_acl");
    let kimg = s.path("kimg");
    mkfs(&kimg, 512 << 20, &[]);
    let k = KernelMount::new(&kimg, &s.path("k"), "");
    std::fs::set_permissions(&k.dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let want = run_script(&k.dir);
    k.umount();
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let mnt = s.path("m");
    std::fs::create_dir_all(&mnt).unwrap();
    rxfs_ok(&[
        OsStr::new("mount"),
        img.as_os_str(),
        mnt.as_os_str(),
        OsStr::new("-o"),
        OsStr::new("rw,allow_other"),
    ]);
    let guard = KernelMount::adopt(&mnt);
    std::fs::set_permissions(&mnt, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let got = run_script(&mnt);
    rxfs_ok(&[OsStr::new("umount"), mnt.as_os_str()]);
    guard.disarm();
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w, "FUSE mount vs kernel XFS");
    }
    assert_eq!(got.len(), want.len());
    // The scenario exercised what it claims.
    for must in [
        "uid 1000 test -r secret: yes",
        "uid 1001 test -r secret: no",
        "d/f1: user:1000:rwx",
        "d/sub: default:user:1001:r--",
    ] {
        assert!(
            want.iter().any(|l| l.starts_with(must)),
            "the kernel's run lacks {must:?}: {want:#?}"
        );
    }
    run_output("xfs_repair", &[OsStr::new("-n"), img.as_os_str()]);
    let k = KernelMount::new(&img, &s.path("k2"), "ro");
    let after = observe(&k.dir, false);
    k.umount();
    let want_static: Vec<&String> = want.iter().filter(|l| !l.starts_with("uid ")).collect();
    assert_eq!(
        after.iter().collect::<Vec<_>>(),
        want_static,
        "the kernel's view of the rxfs image"
    );
}
