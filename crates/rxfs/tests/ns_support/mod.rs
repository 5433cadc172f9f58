//! Shared by the namespace tests (`ns_link_kernel`, `ns_rename_kernel`):
//! read-write opens, create arguments, and the kernel's view of a tree
//! (inode numbers, link counts, symlink targets, file bytes) compared with
//! a model after `xfs_repair -n`.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;

use crate::common::*;
use rxfs::types::Ino;
use rxfs::{Filesystem, MountOptions};

pub fn rw(img: &Path) -> Arc<Filesystem> {
    Filesystem::open_path(img, None, MountOptions::default()).expect("rw open")
}

/// What the kernel shows for a path: inode, link count, symlink target or
/// file bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub ino: u64,
    pub nlink: u64,
    pub what: Vec<u8>,
}

pub fn kernel_view(mnt: &Path) -> BTreeMap<String, Seen> {
    let mut out = BTreeMap::new();
    let mut stack = vec![(String::new(), mnt.to_path_buf())];
    while let Some((rel, p)) = stack.pop() {
        for e in std::fs::read_dir(&p).unwrap() {
            let e = e.unwrap();
            let name = format!("{rel}/{}", e.file_name().to_string_lossy());
            let md = std::fs::symlink_metadata(e.path()).unwrap();
            let what = if md.file_type().is_symlink() {
                use std::os::unix::ffi::OsStrExt;
                std::fs::read_link(e.path())
                    .unwrap()
                    .as_os_str()
                    .as_bytes()
                    .to_vec()
            } else if md.is_dir() {
                stack.push((name.clone(), e.path()));
                b"<dir>".to_vec()
            } else {
                std::fs::read(e.path()).unwrap()
            };
            out.insert(
                name,
                Seen {
                    ino: md.ino(),
                    nlink: md.nlink(),
                    what,
                },
            );
        }
    }
    out
}

pub fn check(img: &Path, s: &Scratch, want: &BTreeMap<String, Seen>) {
    if let Err(e) = repair(img) {
        panic!("{e}");
    }
    check_kernel(img, s, want);
}

/// The kernel's view (after its own recovery of a dirty log), then repair.
pub fn check_kernel(img: &Path, s: &Scratch, want: &BTreeMap<String, Seen>) {
    let mnt = s.path("mnt");
    let m = KernelMount::new(img, &mnt, "");
    let got = kernel_view(&mnt);
    m.umount();
    assert_eq!(&got, want);
    if let Err(e) = repair(img) {
        panic!("after the kernel mount: {e}");
    }
}

pub fn repair(img: &Path) -> Result<(), String> {
    let out = std::process::Command::new("xfs_repair")
        .arg("-n")
        .arg(img)
        .output()
        .unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "xfs_repair -n failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

pub fn setup(name: &str, opts: &[&str]) -> (Scratch, std::path::PathBuf) {
    require_root();
    require_tools(&["mkfs.xfs", "xfs_repair"]);
    let s = Scratch::new(name);
    let img = s.path("img");
    mkfs_with(&img, 64 << 20, opts, FSTESTS_ENV);
    (s, img)
}

pub fn seen(ino: Ino, nlink: u64, what: &[u8]) -> Seen {
    Seen {
        ino: ino.0,
        nlink,
        what: what.to_vec(),
    }
}
