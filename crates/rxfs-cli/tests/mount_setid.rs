//! Set-id bits dropped by changes through `rxfs mount`, with the kernel's
//! XFS as the oracle (issue 14: fstests generic/375, 683-685): fallocate,
//! punch and zero-range by an unprivileged writer, and `setfacl` by an
//! owner outside the file's group, writes, truncates, chown and chgrp
//! clear set-gid (and set-uid) exactly when the kernel's XFS does; root (CAP_FSETID) and a member of the
//! file's group keep them. The same script runs on a kernel loop mount and
//! on a FUSE mount of identical fresh images; every file's mode, owners
//! and size must be the same. Then the image is repair-clean.
//!
//! Root only; fails unless RXFS_SKIP_KERNEL_TESTS=1.

mod common;

use std::ffi::OsStr;
use std::path::Path;

use common::*;

/// Who runs a step: root, or a uid (its gid the same) with these
/// supplementary groups.
#[derive(Clone, Copy)]
enum As {
    Root,
    User(u32, &'static str),
}

const FILES: &[&str] = &[
    "a", "b", "c", "d", "e", "g", "h", "h2", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s",
    "t", "u", "v",
];

const SCRIPT: &[(As, &str)] = &[
    (
        As::Root,
        "touch a b c d e g h h2 i j k l m n o p q r s t u v && \
         chown 1000:3000 a b c d e h h2 i j k l m n o s t u v",
    ),
    (
        As::Root,
        "chmod 2666 a d e h h2 i m n o s v && chmod 6666 b j t && chmod 2676 c k u && \
         chmod 4666 l",
    ),
    // g: owned by 1000 in its own group, set-gid without group execute.
    (As::Root, "chown 1000:1000 g && chmod 2666 g"),
    // fallocate modes by an unprivileged writer outside the group.
    (As::User(1000, ""), "fallocate -l 4096 a"),
    (As::User(1000, ""), "fallocate -p -o 0 -l 4096 b"),
    (As::User(1000, ""), "fallocate -z -o 0 -l 8192 c"),
    (As::User(1000, ""), "fallocate -n -l 8192 d"),
    (As::User(1000, ""), "fallocate -l 4096 l"),
    // Inside the data of a set-uid file (fstests generic/683): the
    // kernel drops set-uid by a SETATTR first and caches that mode.
    (
        As::Root,
        "head -c 196608 /dev/zero > p && chown 1000:3000 p && chmod 6666 p",
    ),
    (
        As::User(1000, ""),
        "fallocate -o 65536 -l 65536 p && stat -c 'at once: %a' p",
    ),
    // root keeps them (CAP_FSETID); a group member keeps set-gid
    // without group execute, but not with it.
    (As::Root, "fallocate -l 4096 e"),
    (As::User(1000, ""), "fallocate -l 4096 g"),
    (As::User(1000, "3000"), "fallocate -l 4096 k"),
    // An access ACL rewriting the mode (setxattr): the owner outside the
    // group loses set-gid, inside it keeps it. A change of base entries
    // only is a chmod (setfacl's shortcut), which the kernel's side
    // decides.
    (As::User(1000, ""), "setfacl -m u:1001:r h"),
    (As::User(1000, ""), "setfacl -m o::r h2"),
    (As::User(1000, "3000"), "setfacl -m u:1001:r i"),
    // Writes and truncates: the kernel's FUSE side drops set-uid and
    // set-gid with group execute; set-gid alone is rxfs's to drop.
    (As::User(1000, ""), "echo x >> j"),
    (As::User(1000, ""), "echo x >> m"),
    (As::User(1000, ""), "truncate -s 100 n"),
    (As::User(1000, "3000"), "echo x >> o"),
    // chown and chgrp (with FUSE_HANDLE_KILLPRIV_V2 the daemon's to
    // drop): root drops set-uid always, set-gid only with group execute;
    // the owner outside the old group drops set-gid, inside it keeps it.
    (As::Root, "chown 1001 t u"),
    (As::User(1000, "4000"), "chgrp 4000 s"),
    (As::User(1000, "3000,4000"), "chgrp 4000 v"),
    // A direct overwrite of written blocks inside EOF (rxfs's fast path,
    // no transaction) drops set-gid alone too.
    (
        As::Root,
        "head -c 8192 /dev/zero > q && chown 1000:3000 q && chmod 2666 q",
    ),
    (
        As::User(1000, ""),
        "dd if=/dev/zero of=q bs=4096 count=1 seek=1 conv=notrunc oflag=direct status=none",
    ),
    // A direct write: the kernel's FUSE side drops nothing itself then
    // (fstests generic/355), set-uid and set-gid with group execute too.
    (
        As::Root,
        "head -c 8192 /dev/zero > r && chown 1000:3000 r && chmod 6776 r",
    ),
    (
        As::User(1000, ""),
        "dd if=/dev/zero of=r bs=4096 count=1 conv=notrunc oflag=direct status=none",
    ),
];

fn sh(dir: &Path, who: As, cmd: &str) -> std::process::Output {
    match who {
        As::Root => sh_in(dir, None, cmd),
        As::User(u, groups) => sh_in(dir, Some((u, groups)), cmd),
    }
}

/// Run the script in `dir`; every file's `name mode uid gid size` after
/// each step (at once: a mode the kernel still caches from before the
/// step must not show).
fn run_script(dir: &Path) -> Vec<String> {
    let mut seen = Vec::new();
    for (who, cmd) in SCRIPT {
        let out = sh(dir, *who, cmd);
        assert!(
            out.status.success(),
            "in {}: {cmd:?}: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        seen.push(format!(
            "after {cmd}: {}",
            String::from_utf8_lossy(&out.stdout).trim()
        ));
        seen.extend(observe(dir));
    }
    seen
}

fn observe(dir: &Path) -> Vec<String> {
    FILES
        .iter()
        .map(|f| {
            let st = sh(dir, As::Root, &format!("stat -c '%n %a %u %g %s' {f}"));
            assert!(st.status.success(), "stat {f}");
            String::from_utf8_lossy(&st.stdout).trim().to_string()
        })
        .collect()
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn setid_bits_dropped_as_the_kernel_drops_them() {
    require_root();
    require_tools(&["setfacl", "setpriv", "fallocate"]);
    let s = Scratch::new("mount_setid");
    let kimg = s.path("kimg");
    mkfs(&kimg, 512 << 20, &[]);
    let k = KernelMount::new(&kimg, &s.path("k"), "");
    std::fs::set_permissions(&k.dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let want = run_script(&k.dir);
    k.umount();
    let want_final = &want[want.len() - FILES.len()..];
    // The script exercised what it claims on the kernel.
    for must in [
        "a 666 ",
        "b 666 ",
        "c 676 ",
        "d 666 ",
        "e 2666 ",
        "g 2666 ",
        "h 666 ",
        "h2 664 ",
        "i 2666 ",
        "j 666 ",
        "k 676 ",
        "l 666 ",
        "m 666 ",
        "n 666 ",
        "o 2666 ",
        "p 666 ",
        "q 666 ",
        "r 776 ",
        "s 666 1000 4000",
        "t 2666 1001",
        "u 676 1001",
        "v 2666 1000 4000",
    ] {
        assert!(
            want_final.iter().any(|l| l.starts_with(must)),
            "the kernel's run lacks {must:?}: {want_final:#?}"
        );
    }
    // With the write-back cache and without it (the default): the
    // kernel sends writes by other paths.
    for opts in ["rw,allow_other,writeback_cache=on", "rw,allow_other"] {
        let img = s.path("img");
        mkfs(&img, 512 << 20, &[]);
        let mnt = s.path("m");
        let guard = rxfs_mount(&img, &mnt, opts);
        std::fs::set_permissions(&mnt, std::os::unix::fs::PermissionsExt::from_mode(0o777))
            .unwrap();
        let got = run_script(&mnt);
        rxfs_umount(&mnt, guard);
        assert_eq!(got, want, "FUSE mount ({opts}) vs kernel XFS");
        run_output("xfs_repair", &[OsStr::new("-n"), img.as_os_str()]);
        let k = KernelMount::new(&img, &s.path("k2"), "ro");
        let after = observe(&k.dir);
        k.umount();
        assert_eq!(
            after, want_final,
            "the kernel's view of the rxfs image ({opts})"
        );
    }
}
