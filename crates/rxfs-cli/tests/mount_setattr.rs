//! The setattr rules of a kernel filesystem through `rxfs mount`, with the
//! kernel's XFS as the oracle: the same script of shell steps (some run as
//! an unprivileged user through `setpriv`) on a kernel loop mount and on a
//! FUSE mount of identical fresh images must leave identical modes, owners,
//! sizes and (where the script sets them) timestamps:
//! - chown of a set-uid/set-gid file clears both bits (group-executable);
//! - a write or truncate by a non-root user clears set-uid, and set-gid
//!   when group-executable (not set-gid without group exec);
//! - chmod g+s by a user outside the file's group drops the set-gid bit;
//! - new files in a set-gid directory take its group, new directories its
//!   set-gid bit;
//! - nanosecond timestamps, and times before 1970 and after 2038 (bigtime).
//!
//! Root only; fails unless RXFS_SKIP_KERNEL_TESTS=1.

mod common;

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

use common::*;

/// (as user 1000?, shell command run in the mount's root).
const SCRIPT: &[(bool, &str)] = &[
    (false, "mkdir d && chown 0:50 d && chmod 2777 d"),
    (false, "touch f && chmod 6775 f && chown 1000:1000 f"),
    (false, "chmod 6775 f"),
    (true, "echo x >> f"),
    (false, "touch g && chown 1000:1000 g && chmod 2745 g"),
    (true, "echo y >> g"),
    (false, "touch h && chown 1000:1000 h && chmod 4755 h"),
    (true, "truncate -s 10 h"),
    (true, "touch d/n1 && mkdir d/sub && touch d/sub/n2"),
    (true, "chmod 2755 d/n1"),
    (false, "touch e && chown 1000:1000 e && chmod 6755 e"),
    (false, "chown 2000 e"),
    (false, "echo z >> e && chmod 4755 e && truncate -s 3 e"),
    (false, "touch -d '2100-01-02 03:04:05.123456789' t"),
    (false, "touch -d '1950-06-07 08:09:10.5' t2"),
    (false, "touch -m -d '2038-01-19 03:14:08.999999999' t3"),
    (
        false,
        "mkdir -m 1777 sticky && chmod 0 sticky && chmod 1755 sticky",
    ),
];

/// What is compared for each path.
const STAT: &str = "%n %f %u %g %s %y";
const PATHS: &[&str] = &[
    "d", "f", "g", "h", "d/n1", "d/sub", "d/sub/n2", "e", "t", "t2", "t3", "sticky",
];

fn sh(dir: &Path, as_user: bool, cmd: &str) -> Result<(), String> {
    let mut c = if as_user {
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid=1000",
            "--regid=1000",
            "--clear-groups",
            "sh",
            "-c",
            cmd,
        ]);
        c
    } else {
        let mut c = Command::new("sh");
        c.args(["-c", cmd]);
        c
    };
    let out = c.current_dir(dir).env("TZ", "UTC").output().unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?} ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn run_script(dir: &Path) -> Vec<String> {
    for (user, cmd) in SCRIPT {
        if let Err(e) = sh(dir, *user, cmd) {
            panic!("in {}: {e}", dir.display());
        }
    }
    stat_all(dir)
}

/// `stat` of every path; the modification time only of the files whose
/// times the script sets (t*), the others' depend on when it ran.
fn stat_all(dir: &Path) -> Vec<String> {
    let out = Command::new("stat")
        .arg("-c")
        .arg(STAT)
        .args(PATHS)
        .current_dir(dir)
        .env("TZ", "UTC")
        .output()
        .unwrap();
    assert!(out.status.success(), "stat failed");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            if l.starts_with('t') {
                l.to_string()
            } else {
                l.splitn(6, ' ').take(5).collect::<Vec<_>>().join(" ")
            }
        })
        .collect()
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn setattr_rules_match_the_kernel() {
    require_root();
    let s = Scratch::new("setattr_rules");
    // The kernel's XFS.
    let kimg = s.path("kimg");
    mkfs(&kimg, 512 << 20, &[]);
    let k = KernelMount::new(&kimg, &s.path("k"), "");
    std::fs::set_permissions(&k.dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let want = run_script(&k.dir);
    k.umount();
    // rxfs through FUSE (allow_other: the unprivileged steps).
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
    assert_eq!(got, want, "FUSE mount vs kernel XFS");
    // And the image says the same through the kernel.
    run_output("xfs_repair", &[OsStr::new("-n"), img.as_os_str()]);
    let k = KernelMount::new(&img, &s.path("k2"), "ro");
    let after = stat_all(&k.dir);
    k.umount();
    assert_eq!(after, want, "kernel view of the rxfs image");
    // The rules really fired (a script that changed nothing would pass).
    let mode = |p: &str| {
        let l = want
            .iter()
            .find(|l| l.split(' ').next() == Some(p))
            .unwrap();
        u32::from_str_radix(l.split(' ').nth(1).unwrap(), 16).unwrap() & 0o7777
    };
    assert_eq!(mode("f"), 0o775, "write clears set-uid and set-gid");
    assert_eq!(mode("g"), 0o2745, "set-gid without group exec stays");
    assert_eq!(mode("h"), 0o755, "truncate clears set-uid");
    assert_eq!(
        mode("d/sub") & 0o2000,
        0o2000,
        "set-gid directories inherit"
    );
    assert_eq!(mode("d/n1"), 0o755, "chmod g+s outside the group");
}
