//! `rxfs mkfs --populate-tar`: an archive made by GNU tar (`--xattrs
//! --acls --numeric-owner`, PAX headers) of a tree staged by root (owners,
//! set-uid, devices, a FIFO, hard and symbolic links, user and SELinux
//! xattrs, access and default ACLs, nanosecond mtimes, a file of several
//! MiB), plain and gzip/zstd/xz-compressed and from standard input, built
//! by an unprivileged user: the kernel reads back every path as staged.
//!
//! Root (to stage and mount), tar, gzip, zstd, xz, setfacl, setfattr,
//! setpriv; fails unless RXFS_SKIP_KERNEL_TESTS=1.

mod common;

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Stdio};

use common::*;

/// A manifest without what the build decides or tar does not keep:
/// change and access times, inode numbers, blocks.
fn manifest_of(root: &Path) -> Vec<String> {
    walk_manifest(root)
        .iter()
        .map(|l| manifest_sans(l, &["atime", "ctime", "ino", "blocks"]))
        .collect()
}

fn sh(cmd: &str, dir: &Path) {
    let out = sh_in(dir, None, cmd);
    assert!(out.status.success(), "{cmd}: {out:?}");
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn archive_metadata_lands_as_recorded_without_root() {
    require_root();
    let s = Scratch::new("tar-pop");
    let st = s.path("st");
    std::fs::create_dir(&st).unwrap();
    sh(
        "mkdir -p d/sub && printf hi > d/f && ln d/f d/hard && ln -s ../x d/sym && \
         mknod cdev c 1 3 && mknod bdev b 8 1 && mkfifo fifo && printf s > suid && \
         chmod 4755 suid && chmod 2750 d/sub && chown 1234:5678 d/f && \
         setfattr -n user.color -v blue d/f && \
         setfattr -n security.selinux -v system_u:object_r:etc_t:s0 d/f && \
         setfacl -m u:1000:rx d && setfacl -d -m g:44:rwx d && \
         head -c 3000000 /dev/urandom > big && \
         touch -h -d @1600000000.123456789 d/f d/sym && touch -d @1500000000 d/sub d . ",
        &st,
    );
    let tar = s.path("st.tar");
    sh(
        &format!(
            "tar --xattrs --xattrs-include='*' --acls --numeric-owner -C {} -cpf {} . && \
             gzip -kf {t} && zstd -qkf {t} && xz -kf {t} && chmod 644 {t}*",
            st.display(),
            tar.display(),
            t = tar.display()
        ),
        &s.0,
    );
    let want = manifest_of(&st);
    assert!(
        want.iter().any(|l| l.contains("security.selinux")),
        "staging: {want:?}"
    );

    // An unprivileged builder: uid/gid 65534, no capabilities.
    let out_dir = s.path("out");
    std::fs::create_dir(&out_dir).unwrap();
    sh(&format!("chown 65534:65534 {}", out_dir.display()), &s.0);
    for (i, src) in ["st.tar", "st.tar.gz", "st.tar.zst", "st.tar.xz", "-"]
        .iter()
        .enumerate()
    {
        let img = out_dir.join(format!("img{i}"));
        let archive = if *src == "-" {
            s.path("st.tar.zst")
        } else {
            s.path(src)
        };
        let mut cmd = Command::new("setpriv");
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(RXFS)
            .args(["mkfs", "-q", "-d", "size=300m", "--populate-tar", src])
            .arg(&img)
            .current_dir(&s.0)
            .stdin(if *src == "-" {
                Stdio::from(std::fs::File::open(&archive).unwrap())
            } else {
                Stdio::null()
            });
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{src}: {out:?}");
        let r = run_output("xfs_repair", &["-n", img.to_str().unwrap()]);
        assert!(r.status.success(), "{src}: {r:?}");
        let k = s.path("k");
        let m = KernelMount::new(&img, &k, "ro");
        let got = manifest_of(&k);
        m.umount();
        assert_same_manifest(&format!("--populate-tar {src}"), &want, &got);
    }
}

#[test]
fn dotdot_paths_are_refused() {
    let s = Scratch::new("tar-dotdot");
    // Python's tarfile writes the name as given.
    let tar = s.path("evil.tar");
    let py = format!(
        "import tarfile, io\nt = tarfile.open('{}', 'w')\ni = tarfile.TarInfo('a/../../x')\n\
         i.size = 2\nt.addfile(i, io.BytesIO(b'hi'))\nt.close()\n",
        tar.display()
    );
    let out = Command::new("python3").args(["-c", &py]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let img = s.path("img");
    let out = rxfs(&[
        "mkfs",
        "-q",
        "-d",
        "size=300m",
        "--populate-tar",
        tar.to_str().unwrap(),
        img.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("a '..' component"), "{err}");
}

/// `--owner 0:0` with a directory source: a user's tree becomes root's
/// image, built by that user.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn owner_overrides_a_directory_source() {
    require_root();
    let s = Scratch::new("tar-owner");
    let tree = s.path("tree");
    std::fs::create_dir(&tree).unwrap();
    sh("mkdir d && printf x > d/f && ln -s f d/l", &tree);
    let out_dir = s.path("out");
    std::fs::create_dir(&out_dir).unwrap();
    sh(
        &format!(
            "chown -R 1000:1000 {} {}",
            tree.display(),
            out_dir.display()
        ),
        &s.0,
    );
    let img = out_dir.join("img");
    let out = Command::new("setpriv")
        .args(["--reuid=1000", "--regid=1000", "--clear-groups", "--"])
        .arg(RXFS)
        .args([
            "mkfs",
            "-q",
            "-d",
            "size=300m",
            "--owner",
            "0:0",
            "--populate",
        ])
        .arg(&tree)
        .arg(&img)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let k = s.path("k");
    let m = KernelMount::new(&img, &k, "ro");
    let owners: Vec<String> = walk_manifest(&k)
        .iter()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            format!("{} {}:{}", v["path"], v["uid"], v["gid"])
        })
        .collect();
    m.umount();
    assert_eq!(owners.len(), 4, "{owners:?}");
    assert!(owners.iter().all(|o| o.ends_with(" 0:0")), "{owners:?}");
    // Not numeric: refused.
    let out = rxfs(&[
        "mkfs",
        "-q",
        "--owner",
        "root",
        "-d",
        "size=300m",
        img.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
}

/// `--overrides FILE` with a directory source, built by an unprivileged
/// user: per-path owners, modes (set-uid included), a file capability, a
/// trusted xattr and a removed source xattr, exact paths and `/**`
/// subtrees, later rules winning; the kernel reads back exactly that. A
/// rule naming a path the tree lacks is refused before the image exists;
/// `rxfs populate --overrides` applies the same file to an existing image.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn override_file_sets_owner_mode_and_xattrs_per_path() {
    require_root();
    let s = Scratch::new("populate-overrides");
    let tree = s.path("tree");
    std::fs::create_dir(&tree).unwrap();
    sh(
        "mkdir -p etc home/alice/docs usr/bin && echo secret > etc/shadow && \
         echo x > home/alice/docs/a && printf '\\177ELF' > usr/bin/ping && \
         ln -s ping usr/bin/pong && echo y > 'my file' && \
         setfattr -n user.tmp -v gone etc/shadow && setfattr -n user.keep -v kept etc/shadow && \
         chmod 644 etc/shadow usr/bin/ping 'my file' home/alice/docs/a && \
         chmod 755 . etc home home/alice home/alice/docs usr usr/bin",
        &tree,
    );
    let out_dir = s.path("out");
    std::fs::create_dir(&out_dir).unwrap();
    let rules = out_dir.join("overrides");
    std::fs::write(
        &rules,
        "# the image is root's, whoever builds it\n\
         / owner=7:7\n\
         /** owner=0:0\n\
         /etc/shadow mode=0640 gid=42 -xattr:user.tmp xattr:user.note=\"hello world\"\n\
         /usr/bin/ping mode=4755 xattr:security.capability=0sAQAAAgAgAAAAAAAAAAAAAAAAAAA=\n\
         /home/alice/** owner=1000:1000\n\
         /home/alice/docs mode=0700\n\
         \"/my file\" xattr:trusted.x=0x0102ff\n",
    )
    .unwrap();
    sh(
        &format!(
            "chown -R 1000:1000 {} {}",
            tree.display(),
            out_dir.display()
        ),
        &s.0,
    );
    let as_user = |args: &[&std::ffi::OsStr]| {
        Command::new("setpriv")
            .args(["--reuid=1000", "--regid=1000", "--clear-groups", "--"])
            .arg(RXFS)
            .args(args)
            .output()
            .unwrap()
    };
    let img = out_dir.join("img");
    let mut args: Vec<&std::ffi::OsStr> = ["mkfs", "-q", "-d", "size=300m", "--populate"]
        .iter()
        .map(std::ffi::OsStr::new)
        .collect();
    args.extend([tree.as_os_str(), "--overrides".as_ref(), rules.as_os_str()]);
    args.push(img.as_os_str());
    let out = as_user(&args);
    assert!(out.status.success(), "{out:?}");
    let out = run_output("xfs_repair", &[OsStr::new("-n"), img.as_os_str()]);
    assert!(out.status.success(), "xfs_repair -n: {out:?}");
    let k = s.path("k");
    let view = |img: &Path| {
        let m = KernelMount::new(img, &k, "ro");
        let lines: Vec<String> = walk_manifest(&k)
            .iter()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                format!(
                    "{} {:o} {}:{} {}",
                    v["path"].as_str().unwrap(),
                    v["mode"].as_u64().unwrap(),
                    v["uid"],
                    v["gid"],
                    v["xattrs"]
                )
            })
            .collect();
        m.umount();
        lines
    };
    let want = [
        "/ 755 0:0 {}",
        "/etc 755 0:0 {}",
        "/etc/shadow 640 0:42 {\"user.keep\":\"6b657074\",\"user.note\":\"68656c6c6f20776f726c64\"}",
        "/home 755 0:0 {}",
        "/home/alice 755 1000:1000 {}",
        "/home/alice/docs 700 1000:1000 {}",
        "/home/alice/docs/a 644 1000:1000 {}",
        "/my file 644 0:0 {\"trusted.x\":\"0102ff\"}",
        "/usr 755 0:0 {}",
        "/usr/bin 755 0:0 {}",
        "/usr/bin/ping 4755 0:0 {\"security.capability\":\"0100000200200000000000000000000000000000\"}",
        "/usr/bin/pong 777 0:0 {}",
    ];
    assert_eq!(view(&img), want);

    // A typo in a rule's path: refused naming the line, nothing made.
    let bad = out_dir.join("bad");
    std::fs::write(&bad, "/etc uid=1\n/ect/shadow mode=0600\n").unwrap();
    let img2 = out_dir.join("img2");
    let out = as_user(&[
        "mkfs".as_ref(),
        "-d".as_ref(),
        "size=300m".as_ref(),
        "--populate".as_ref(),
        tree.as_os_str(),
        "--overrides".as_ref(),
        bad.as_os_str(),
        img2.as_os_str(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("line 2: /ect/shadow: not in the source"),
        "{err}"
    );
    assert!(!img2.exists(), "the image was created");

    // `rxfs populate` into an existing image: the same result.
    let img3 = out_dir.join("img3");
    mkfs(&img3, 300 << 20, &[]);
    sh(&format!("chown 1000:1000 {}", img3.display()), &s.0);
    let out = as_user(&[
        "populate".as_ref(),
        img3.as_os_str(),
        tree.as_os_str(),
        "--overrides".as_ref(),
        rules.as_os_str(),
    ]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(view(&img3), want);
}
