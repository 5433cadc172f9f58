//! The CLI's edges, as a user hits them: a mistyped subcommand is named
//! as one (never taken for the mount-helper form and mounted), a closed
//! standard error never turns an error into a panic (exit 101), a file
//! too short for a superblock is "not an XFS filesystem" for every
//! subcommand, and plain `umount` (util-linux, through the
//! `umount.fuse.rxfs` helper that `rxfs install-helper` installs) returns
//! only when the image is clean and closed.
//!
//! The umount test needs root, mkfs.xfs, xfs_repair and FUSE, and installs
//! the helpers into /sbin (left there, pointing at the binary under test);
//! the others run anywhere.

mod common;

use std::ffi::OsStr;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

#[test]
fn mistyped_subcommand_is_named_not_mounted() {
    let s = Scratch::new("cli-typo");
    let img = s.path("doc.img");
    std::fs::write(&img, b"").unwrap();
    let dir = s.path("dir");
    std::fs::create_dir(&dir).unwrap();
    let out = rxfs(&[OsStr::new("chek"), img.as_os_str()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("unrecognized subcommand 'chek'"), "{err}");
    assert!(err.contains("'check'"), "no suggestion: {err}");
    // Two paths without -o: not the mount.fuse3 form either.
    let out = rxfs(&[img.as_os_str(), dir.as_os_str()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!is_mounted(&dir));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unrecognized subcommand"));
}

/// Run rxfs with its stderr (and stdout) a pipe whose reader is gone.
fn with_closed_pipes(args: &[&str]) -> std::process::ExitStatus {
    let (r, w) = std::io::pipe().unwrap();
    drop(r);
    let w2 = w.try_clone().unwrap();
    Command::new(RXFS)
        .args(args)
        .stdout(Stdio::from(w))
        .stderr(Stdio::from(w2))
        .status()
        .unwrap()
}

#[test]
fn closed_stderr_is_never_a_panic() {
    let s = Scratch::new("cli-pipe");
    let missing = s.path("nope.img");
    let m = missing.to_str().unwrap();
    // A read-only subcommand ends as other Unix tools do: SIGPIPE.
    let st = with_closed_pipes(&["ls", m, "/"]);
    assert_eq!(st.signal(), Some(libc::SIGPIPE), "{st:?}");
    // One that changes images keeps its documented exit code.
    let st = with_closed_pipes(&["put", m, "/etc/hostname", "/h"]);
    assert_eq!(st.code(), Some(1), "{st:?}");
    let st = with_closed_pipes(&["mount", m, s.0.to_str().unwrap()]);
    assert_eq!(st.code(), Some(32), "{st:?}");
}

#[test]
fn too_short_for_a_superblock_is_not_xfs() {
    let s = Scratch::new("cli-empty");
    let img = s.path("empty.img");
    std::fs::write(&img, b"").unwrap();
    for sub in ["info", "check", "ls"] {
        let mut args = vec![OsStr::new(sub), img.as_os_str()];
        if sub == "ls" {
            args.push(OsStr::new("/"));
        }
        let out = rxfs(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{sub}");
        assert!(err.contains("not an XFS filesystem"), "{sub}: {err}");
        assert!(!err.contains("I/O error"), "{sub}: {err}");
    }
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn plain_umount_returns_with_the_image_clean() {
    require_root();
    rxfs_ok(&["install-helper"]);
    let s = Scratch::new("cli-umount");
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    for round in 0..3 {
        let mnt = s.path("m");
        let guard = rxfs_mount(&img, &mnt, "");
        let pid = daemon_pid(&mnt);
        // Enough new metadata that the daemon's last write-back and
        // unmount record take a while after the kernel lets go.
        for d in 0..20 {
            let dir = mnt.join(format!("r{round}-{d}"));
            std::fs::create_dir(&dir).unwrap();
            for f in 0..100 {
                std::fs::write(dir.join(format!("f{f}")), [f as u8; 100]).unwrap();
            }
        }
        let t0 = Instant::now();
        let out = Command::new("umount").arg(&mnt).output().unwrap();
        assert!(out.status.success(), "umount: {out:?}");
        guard.disarm();
        // Returned with the log clean and the image closed: xfs_repair -n
        // and a read-write open (refused at once while owned) right away.
        let r = Command::new("xfs_repair")
            .arg("-n")
            .arg(&img)
            .output()
            .unwrap();
        assert!(
            r.status.success(),
            "round {round}: xfs_repair -n right after umount: {}",
            String::from_utf8_lossy(&r.stderr)
        );
        rxfs_ok(&["mkdir", img.to_str().unwrap(), &format!("/after{round}")]);
        // (The daemon has let go; its process may take a moment to end.)
        assert!(
            wait_until(Duration::from_secs(10), || process_gone(pid)),
            "daemon {pid}"
        );
        assert!(t0.elapsed() < Duration::from_secs(60));
    }
}

/// `rxfs man DIR` writes a page for rxfs and one per visible command,
/// from the same definition as `--help`; `rxfs completions SHELL` prints
/// a script naming the commands. No root needed.
#[test]
fn man_pages_and_completions_come_from_the_cli_definition() {
    let s = Scratch::new("man");
    let dir = s.path("man1");
    rxfs_ok(&["man", dir.to_str().unwrap()]);
    let help = String::from_utf8(rxfs_ok(&["--help"])).unwrap();
    let mut pages = 0;
    for line in help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
    {
        let Some(name) = line.split_whitespace().next() else {
            break;
        };
        if name == "help" {
            continue;
        }
        let page = std::fs::read_to_string(dir.join(format!("rxfs-{name}.1")))
            .unwrap_or_else(|e| panic!("no page for {name}: {e}"));
        assert!(page.contains(".TH"), "{name}: not a man page");
        pages += 1;
    }
    assert!(pages >= 15, "only {pages} commands found in --help");
    let mkfs = std::fs::read_to_string(dir.join("rxfs-mkfs.1")).unwrap();
    assert!(
        mkfs.contains("overrides") && mkfs.contains("populate"),
        "rxfs-mkfs.1 lacks options"
    );
    for shell in ["bash", "zsh", "fish"] {
        let out = String::from_utf8(rxfs_ok(&["completions", shell])).unwrap();
        assert!(
            out.contains("mkfs") && out.contains("mount"),
            "{shell}: {out:.200}"
        );
    }
    let out = rxfs(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
}
