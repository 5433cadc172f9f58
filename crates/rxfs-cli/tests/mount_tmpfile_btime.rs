//! `O_TMPFILE` and statx's birth time through `rxfs mount` (FUSE_TMPFILE
//! and FUSE_STATX, served by our own FUSE transport).
//!
//! - An `O_TMPFILE` file is written unnamed and then named with
//!   `linkat(AT_SYMLINK_FOLLOW)` of its `/proc/self/fd` link; one opened
//!   with `O_EXCL` cannot be named; one closed unnamed is freed.
//!   The kernel then reads the named ones, and the image passes
//!   `xfs_repair -n` (an unnamed inode left allocated would be an error).
//! - statx's `stx_btime` through rxfs equals what the kernel's XFS reports
//!   for the same inode afterwards (XFS's `di_crtime`), for a file created
//!   through rxfs and one made by the kernel before.
//!
//! Root only; fails unless RXFS_SKIP_KERNEL_TESTS=1.

mod common;

use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use common::*;

fn tmpfile(dir: &Path, excl: bool) -> std::fs::File {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .mode(0o640)
        .custom_flags(libc::O_TMPFILE | if excl { libc::O_EXCL } else { 0 })
        .open(dir)
        .unwrap_or_else(|e| panic!("O_TMPFILE in {}: {e}", dir.display()))
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn tmpfiles_and_birth_times() {
    require_root();
    let s = Scratch::new("mount_tmpfile_btime");
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    // A file the kernel made, with its birth time.
    let k = KernelMount::new(&img, &s.path("k0"), "");
    std::fs::create_dir(k.dir.join("d")).unwrap();
    std::fs::write(k.dir.join("from-kernel"), b"k").unwrap();
    let kernel_born = btime(&k.dir.join("from-kernel"));
    k.umount();

    let mnt = s.path("m");
    let guard = rxfs_mount(&img, &mnt, "rw");
    assert_eq!(
        btime(&mnt.join("from-kernel")),
        kernel_born,
        "birth time of a kernel-made file"
    );

    // Written unnamed, then named.
    let f = tmpfile(&mnt, false);
    f.write_all_at(&pattern(5, 300_000), 0).unwrap();
    f.sync_all().unwrap();
    name_tmpfile(&f, &mnt.join("named")).unwrap();
    f.write_all_at(b"after naming", 0).unwrap();
    drop(f);
    // In a subdirectory, named twice.
    let g = tmpfile(&mnt.join("d"), false);
    g.write_all_at(b"twice", 0).unwrap();
    name_tmpfile(&g, &mnt.join("d/one")).unwrap();
    name_tmpfile(&g, &mnt.join("two")).unwrap();
    drop(g);
    // O_EXCL: never to be named.
    let x = tmpfile(&mnt, true);
    x.write_all_at(b"secret", 0).unwrap();
    assert!(
        name_tmpfile(&x, &mnt.join("never")).is_err(),
        "an O_EXCL tmpfile was named"
    );
    drop(x);
    // Closed unnamed: freed.
    for _ in 0..5 {
        let t = tmpfile(&mnt.join("d"), false);
        t.write_all_at(&pattern(6, 70_000), 0).unwrap();
    }
    let md = std::fs::metadata(mnt.join("named")).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&md.permissions()) & 0o7777,
        0o640
    );
    let mut want_named = pattern(5, 300_000);
    want_named[..12].copy_from_slice(b"after naming");
    assert!(std::fs::read(mnt.join("named")).unwrap() == want_named);
    assert_eq!(std::fs::metadata(mnt.join("two")).unwrap().len(), 5);
    assert_eq!(
        std::os::unix::fs::MetadataExt::nlink(&std::fs::metadata(mnt.join("two")).unwrap()),
        2
    );
    // A new file's birth time: now, and as the kernel will read it.
    std::fs::write(mnt.join("new"), b"n").unwrap();
    let rxfs_born: Vec<_> = ["new", "named", "two", "from-kernel"]
        .iter()
        .map(|n| btime(&mnt.join(n)))
        .collect();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!(
        (now - rxfs_born[0].0).abs() < 60,
        "birth time {:?}",
        rxfs_born[0]
    );
    rxfs_umount(&mnt, guard);

    run_output("xfs_repair", &["-n", img.to_str().unwrap()]);
    let k = KernelMount::new(&img, &s.path("k"), "ro");
    let kernel_born: Vec<_> = ["new", "named", "two", "from-kernel"]
        .iter()
        .map(|n| btime(&k.dir.join(n)))
        .collect();
    let named = std::fs::read(k.dir.join("named")).unwrap();
    let one = std::fs::read(k.dir.join("d/one")).unwrap();
    let entries = std::fs::read_dir(&k.dir).unwrap().count();
    k.umount();
    assert_eq!(rxfs_born, kernel_born, "birth times: rxfs vs the kernel");
    assert!(named == want_named, "the kernel reads the named tmpfile");
    assert_eq!(one, b"twice");
    // d, from-kernel, named, two, new: nothing else got a name.
    assert_eq!(entries, 5);
}
