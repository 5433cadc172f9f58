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

use std::path::Path;
use std::process::{Command, Stdio};

use common::*;

/// A manifest line without what the build decides or tar does not keep:
/// change and access times, inode numbers, blocks, directory sizes, XFS's
/// own names for ACLs.
fn comparable(l: &str) -> String {
    let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
    let dir = v["type"] == "dir";
    let o = v.as_object_mut().unwrap();
    for f in ["atime", "ctime", "ino", "blocks"] {
        o.remove(f);
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

fn manifest_of(root: &Path) -> Vec<String> {
    walk_manifest(root).iter().map(|l| comparable(l)).collect()
}

fn sh(cmd: &str, dir: &Path) {
    let out = sh_in(dir, None, cmd);
    assert!(out.status.success(), "{cmd}: {out:?}");
}

#[test]
fn archive_metadata_lands_as_recorded_without_root() {
    if kernel_tests_disabled() {
        return;
    }
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
fn owner_overrides_a_directory_source() {
    if kernel_tests_disabled() {
        return;
    }
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
