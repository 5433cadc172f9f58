//! Directories past one block on rmapbt filesystems: every directory block
//! gets exactly one reverse mapping (through the fork store's rmap delta),
//! as the directory grows block -> leaf -> node and shrinks back. Oracle:
//! `xfs_repair -n` (which cross-checks the rmapbt) and a kernel mount.

mod common;

use common::*;
use rxfs::fs::ops_ns::CreateArgs;
use rxfs::{Filesystem, MountOptions};

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn directories_grow_and_shrink_on_rmapbt() {
    let s = Scratch::new("rmap-dir");
    let img = s.path("img");
    mkfs(&img, 512 << 20, &["-m", "rmapbt=1,reflink=0"]);
    let fs = Filesystem::open_path(&img, None, MountOptions::default()).unwrap();
    let dir = CreateArgs {
        mode: libc::S_IFDIR | 0o755,
        uid: 0,
        gid: 0,
        rdev: 0,
        umask: 0,
    };
    let file = CreateArgs {
        mode: libc::S_IFREG | 0o644,
        ..dir
    };
    let d = fs.mkdir(fs.root_ino(), b"d", &dir).unwrap().ino;
    let name = |i: u32| format!("a-rather-long-file-name-{i:05}").into_bytes();
    for i in 0..3000 {
        fs.create(d, &name(i), &file)
            .unwrap_or_else(|e| panic!("create {i}: {e}"));
    }
    for i in (0..3000).step_by(2) {
        fs.unlink(d, &name(i))
            .unwrap_or_else(|e| panic!("unlink {i}: {e}"));
    }
    fs.unmount().unwrap();
    let out = run_output("xfs_repair", &["-n", img.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "xfs_repair -n: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let m = KernelMount::new(&img, &s.path("mnt"), "ro");
    assert_eq!(std::fs::read_dir(m.dir.join("d")).unwrap().count(), 1500);
    m.umount();
}
