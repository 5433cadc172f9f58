//! The populate engine through the library API: progress reaches the
//! scan's totals, data is copied in many chunks by several threads, the
//! summary names the new root, and a failure names the source path and
//! leaves an image that unmounts cleanly (`xfs_repair -n`, kernel mount).

mod common;

use std::path::Path;
use std::sync::Mutex;

use common::*;
use rxfs::populate::{populate, Dest, Options, Progress};
use rxfs::{Filesystem, MountOptions};

fn repair_clean(img: &Path) {
    let out = run_output("xfs_repair", &["-n", img.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "xfs_repair -n: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn progress_reaches_the_totals() {
    let s = Scratch::new("populate-lib");
    let tree = s.path("tree");
    std::fs::create_dir_all(tree.join("a/b")).unwrap();
    let mut bytes = 0u64;
    for i in 0..40u64 {
        let len = (i * 37_000) as usize;
        std::fs::write(tree.join(format!("a/f{i}")), pattern(i, len)).unwrap();
        bytes += len as u64;
    }
    std::fs::write(tree.join("a/b/big"), pattern(99, 3 << 20)).unwrap();
    bytes += 3 << 20;
    std::fs::hard_link(tree.join("a/b/big"), tree.join("big-link")).unwrap();
    let paths = 1 + 2 + 40 + 1 + 1; // root, a, a/b, files, big, link
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let fs = Filesystem::open_path(&img, None, MountOptions::default()).unwrap();
    let seen: Mutex<Vec<Progress>> = Mutex::new(Vec::new());
    let opts = Options {
        threads: 3,
        chunk_bytes: 64 << 10,
        ..Options::default()
    };
    let dest = Dest::New {
        parent: fs.root_ino(),
        name: b"copy".to_vec(),
    };
    let sum = populate(&fs, &tree, dest, &opts, &|p| seen.lock().unwrap().push(*p)).unwrap();
    let seen = seen.into_inner().unwrap();
    let last = *seen.last().unwrap();
    assert_eq!(last.files_total, paths);
    assert_eq!(last.bytes_total, bytes);
    assert_eq!(sum.files, paths);
    assert_eq!(sum.bytes, bytes);
    assert!(seen
        .iter()
        .all(|p| p.files_done <= p.files_total && p.bytes_done <= p.bytes_total));
    assert!(seen
        .iter()
        .any(|p| p.files_done == p.files_total && p.bytes_done == p.bytes_total));
    // 64 KiB chunks: the 3 MiB file alone reported 48 times.
    assert!(seen.len() > 48 + paths as usize, "{} reports", seen.len());
    assert_eq!(fs.resolve(b"/copy").unwrap(), sum.root);
    let big = fs.iget(fs.resolve(b"/copy/a/b/big").unwrap()).unwrap();
    assert_eq!(big.core.nlink, 2);
    fs.unmount().unwrap();
    repair_clean(&img);
    let m = KernelMount::new(&img, &s.path("mnt"), "ro");
    assert_eq!(
        std::fs::read(m.dir.join("copy/big-link")).unwrap(),
        pattern(99, 3 << 20)
    );
    assert_eq!(
        std::fs::read(m.dir.join("copy/a/f7")).unwrap(),
        pattern(7, 7 * 37_000)
    );
    m.umount();
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn a_failure_names_the_path_and_leaves_a_clean_image() {
    let s = Scratch::new("populate-lib-err");
    let tree = s.path("tree");
    std::fs::create_dir_all(tree.join("d")).unwrap();
    std::fs::write(tree.join("d/x"), b"x").unwrap();
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let fs = Filesystem::open_path(&img, None, MountOptions::default()).unwrap();
    let root = fs.root_ino();
    let dest = |name: &[u8]| Dest::New {
        parent: root,
        name: name.to_vec(),
    };
    populate(&fs, &tree, dest(b"t"), &Options::default(), &|_| {}).unwrap();
    // The same name again: EEXIST naming the source root.
    let e = populate(&fs, &tree, dest(b"t"), &Options::default(), &|_| {}).unwrap_err();
    assert!(
        matches!(e.cause, rxfs::populate::Cause::Image(rxfs::Error::Exists)),
        "{e}"
    );
    assert_eq!(e.path, tree);
    // A file as the source of Dest::Into: ENOTDIR.
    let e = populate(
        &fs,
        &tree.join("d/x"),
        Dest::Into(root),
        &Options::default(),
        &|_| {},
    )
    .unwrap_err();
    assert!(e.to_string().contains("d/x"), "{e}");
    // A missing source.
    let e = populate(
        &fs,
        &tree.join("nope"),
        dest(b"n"),
        &Options::default(),
        &|_| {},
    )
    .unwrap_err();
    assert!(matches!(e.cause, rxfs::populate::Cause::Source(_)), "{e}");
    fs.unmount().unwrap();
    repair_clean(&img);
}
