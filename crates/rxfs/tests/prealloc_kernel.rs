//! Files appended in small pieces, several at once, end up in few extents
//! (speculative preallocation past EOF, see `rxfs::bmap::prealloc`), and the
//! unused preallocation is given back: after unmount no file has blocks
//! past EOF, `xfs_repair -n` is clean and the kernel reads every byte.

mod common;

use std::os::unix::fs::MetadataExt;

use common::*;
use rxfs::fs::ops_ns::CreateArgs;
use rxfs::{Filesystem, MountOptions};

/// A fresh image of `size` bytes (fstests' mkfs options), opened.
fn setup(tag: &str, size: u64) -> (Scratch, std::path::PathBuf, std::sync::Arc<Filesystem>) {
    require_root();
    let s = Scratch::new(tag);
    let img = s.path("img");
    mkfs_with(&img, size, &[], FSTESTS_ENV);
    let fs = Filesystem::open_path(&img, None, MountOptions::default()).unwrap();
    (s, img, fs)
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn interleaved_appends_get_few_extents() {
    let (s, img, fs) = setup("prealloc", 512 << 20);
    let a = CreateArgs::root(0o100644);
    let files: Vec<_> = (0..3)
        .map(|i| {
            fs.create(fs.root_ino(), format!("f{i}").as_bytes(), &a)
                .unwrap()
                .ino
        })
        .collect();
    // 3 files x 8 MiB, 4 KiB appends in turn (plus a 100-byte tail).
    for i in 0..2048u64 {
        for (k, &f) in files.iter().enumerate() {
            fs.write(f, i * 4096, &pattern(i * 3 + k as u64, 4096))
                .unwrap();
        }
    }
    for &f in &files {
        let size = fs.iget(f).unwrap().core.size;
        fs.write(f, size, &[9u8; 100]).unwrap();
    }
    for &f in &files {
        let n = fs.iget(f).unwrap().core.nextents;
        assert!(
            n <= 16,
            "inode {}: {n} extents after interleaved appends",
            f.0
        );
    }
    fs.unmount().unwrap();
    drop(fs);
    let out = std::process::Command::new("xfs_repair")
        .arg("-n")
        .arg(&img)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let mnt = s.path("k");
    let k = KernelMount::new(&img, &mnt, "ro");
    for (idx, _) in files.iter().enumerate() {
        let p = mnt.join(format!("f{idx}"));
        let b = std::fs::read(&p).unwrap();
        assert_eq!(b.len(), 2048 * 4096 + 100);
        for i in [0u64, 1, 777, 2047] {
            let at = (i * 4096) as usize;
            assert_eq!(&b[at..at + 4096], &pattern(i * 3 + idx as u64, 4096)[..]);
        }
        assert_eq!(&b[2048 * 4096..], &[9u8; 100][..]);
        // No preallocation left past EOF.
        let md = std::fs::metadata(&p).unwrap();
        assert_eq!(
            md.blocks() * 512,
            (b.len() as u64).div_ceil(4096) * 4096,
            "{p:?}"
        );
    }
    k.umount();
}

/// Writes from a cache whose owner keeps the times (`write_stamped` with
/// `stamp` false: the kernel's write-back cache under FUSE) leave mtime
/// and ctime alone, including when an append preallocates past EOF (the
/// preallocation is not a change of the file, as in XFS); a plain write
/// stamps them.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn unstamped_writes_and_preallocation_keep_the_times() {
    let (_s, _img, fs) = setup("prealloc_times", 256 << 20);
    let f = fs
        .create(fs.root_ino(), b"f", &CreateArgs::root(0o100644))
        .unwrap()
        .ino;
    let t0 = fs.iget(f).unwrap().core.mtime;
    let tick = || std::thread::sleep(std::time::Duration::from_millis(10));
    // Appends (the second and later ones preallocate), a partial-block
    // overwrite, a block-aligned overwrite (the transaction-less path).
    for i in 0..8u64 {
        tick();
        fs.write_stamped(f, i * 5000, &pattern(i, 5000), false)
            .unwrap();
    }
    tick();
    fs.write_stamped(f, 100, &[7u8; 300], false).unwrap();
    tick();
    fs.write_stamped(f, 4096, &pattern(99, 4096), false)
        .unwrap();
    let ip = fs.iget(f).unwrap();
    assert_eq!(ip.core.size, 40_000);
    assert!(ip.core.nblocks > 40_000 / 4096, "no preallocation past EOF");
    assert_eq!(ip.core.mtime, t0, "mtime moved without a stamp");
    assert_eq!(ip.core.ctime, t0, "ctime moved without a stamp");
    tick();
    fs.write(f, 40_000, &[1u8; 10]).unwrap();
    let ip = fs.iget(f).unwrap();
    assert!(ip.core.mtime != t0 && ip.core.ctime == ip.core.mtime);
    fs.unmount().unwrap();
}
