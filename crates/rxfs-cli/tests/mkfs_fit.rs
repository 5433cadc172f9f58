//! `rxfs mkfs -d size=fit`: the image holds the tree (the kernel reads it
//! back identically), keeps the free space asked for (`--free-space`,
//! checked with the kernel's statfs), is sparse, passes `xfs_repair -n`,
//! and is close to the smallest that does: 5% smaller fails to hold the
//! tree with that margin.
//!
//! Root, mkfs.xfs tools, loop mounts; fails unless RXFS_SKIP_KERNEL_TESTS=1.

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use common::*;

/// Free bytes the kernel reports, and whether the tree reads back.
fn check(s: &Scratch, img: &Path, tree: &Path) -> u64 {
    let r = run_output("xfs_repair", &["-n", img.to_str().unwrap()]);
    assert!(r.status.success(), "{r:?}");
    let k = s.path("k");
    let m = KernelMount::new(img, &k, "ro");
    let st = statvfs(&k);
    let got = rxfs_manifest(img);
    m.umount();
    let want = walk_manifest(tree);
    let strip = |v: &[String]| -> Vec<String> {
        v.iter()
            .map(|l| manifest_sans(l, &["ctime", "ino", "blocks", "atime"]))
            .collect()
    };
    assert_same_manifest("size=fit", &strip(&want), &strip(&got));
    st.f_bfree * st.f_frsize
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn fitted_images_hold_the_tree_with_the_margin_and_are_near_the_smallest() {
    require_root();
    let s = Scratch::new("mkfs-fit");
    let tree = s.path("tree");
    std::fs::create_dir(&tree).unwrap();
    for i in 0..4u8 {
        std::fs::write(tree.join(format!("big{i}")), pattern(i as u64, 100 << 20)).unwrap();
    }
    let small = tree.join("small");
    std::fs::create_dir(&small).unwrap();
    for i in 0..2000 {
        std::fs::write(small.join(format!("f{i}")), vec![b'x'; i % 5000]).unwrap();
    }
    // The default geometry, and one with other block, inode and
    // directory block sizes (the measure counts in the chosen units).
    let geometries: [&[&str]; 3] = [
        &[],
        &[],
        &["-b", "size=2048", "-i", "size=1024", "-n", "size=16384"],
    ];
    for ((margin, want), geometry) in [("10%", None), ("64m", Some(64u64 << 20)), ("10%", None)]
        .into_iter()
        .zip(geometries)
    {
        let img = s.path("img");
        let _ = std::fs::remove_file(&img);
        let t = tree.to_str().unwrap();
        let mut args = vec!["mkfs", "-q", "-d", "size=fit", "--free-space", margin];
        args.extend(geometry);
        args.extend(["--populate", t, img.to_str().unwrap()]);
        rxfs_ok(&args);
        let len = std::fs::metadata(&img).unwrap().len();
        let alloc = std::fs::metadata(&img).unwrap().blocks() * 512;
        assert!(alloc < len, "{margin}: not sparse ({alloc} of {len})");
        let free = check(&s, &img, &tree);
        let need = want.unwrap_or(len / 10);
        assert!(free >= need, "{margin}: {free} free < {need}");
        // 5% smaller does not do.
        let smaller = (len - len / 20) >> 20;
        let img2 = s.path("img2");
        let _ = std::fs::remove_file(&img2);
        let size = format!("size={smaller}m");
        let mut args = vec!["mkfs", "-q", "-d", &size];
        args.extend(geometry);
        args.extend(["--populate", t, img2.to_str().unwrap()]);
        let out = rxfs(&args);
        if out.status.success() {
            let k = s.path("k2");
            let m = KernelMount::new(&img2, &k, "ro");
            let st = statvfs(&k);
            m.umount();
            let free2 = st.f_bfree * st.f_frsize;
            let need2 = want.unwrap_or((smaller << 20) / 10);
            assert!(
                free2 < need2,
                "{margin}: {smaller} MiB also holds it ({free2} free)"
            );
        }
    }
    // A block device or standard input cannot be fitted; nor without a source.
    let out = rxfs(&[
        "mkfs",
        "-q",
        "-d",
        "size=fit",
        s.path("x").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
}
