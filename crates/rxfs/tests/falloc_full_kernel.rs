//! Punching single blocks out of a preallocation that fills the whole
//! filesystem: every punch splits an extent (the fork grows into a bmbt)
//! and frees one block whose free-space record may split a free-space
//! btree leaf while every other free block is busy. No punch may fail
//! (before this test a deferred free could find the free list empty and
//! shut the filesystem down); a fragmented write then uses the holes.
//! Repair is clean and the kernel reads the model.

mod common;

use std::sync::Arc;

use common::*;
use rxfs::bdev::{BlockDevice, FileDevice};
use rxfs::fs::ops_falloc::*;
use rxfs::types::Ino;
use rxfs::Filesystem;

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn punch_full_filesystem_then_fragmented_write() {
    require_root();
    require_tools(&["mkfs.xfs", "xfs_repair"]);
    let s = Scratch::new("falloc-full");
    let img = s.path("img");
    mkfs_with(&img, 64 << 20, &["-b", "size=1024"], FSTESTS_ENV);
    let mnt = s.path("mnt");
    let m = KernelMount::new(&img, &mnt, "");
    std::fs::write(mnt.join("frag"), b"").unwrap();
    std::fs::write(mnt.join("f"), b"").unwrap();
    use std::os::unix::fs::MetadataExt;
    let frag = Ino(std::fs::metadata(mnt.join("frag")).unwrap().ino());
    let f = Ino(std::fs::metadata(mnt.join("f")).unwrap().ino());
    m.umount();
    let dev: Arc<dyn BlockDevice> = Arc::new(FileDevice::open(&img, false, false).unwrap());
    let opts = rxfs::MountOptions {
        read_only: false,
        ..Default::default()
    };
    let fs = Filesystem::open(dev, None, opts).unwrap();
    let r = fs.fallocate(frag, 0, 0, 80 << 20);
    assert!(matches!(r, Err(rxfs::Error::NoSpace)), "{r:?}");
    for i in 0..1500u64 {
        fs.fallocate(
            frag,
            FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
            2 * i * 1024,
            1024,
        )
        .unwrap_or_else(|e| panic!("punch {i}: {e}"));
    }
    let d = pattern(9, 1 << 20);
    let n = fs.write(f, 0, &d).unwrap();
    assert!(n > 0);
    assert_eq!(fs.stats().trans_resv_overruns, 0, "log reservation overrun");
    fs.unmount().unwrap();
    drop(fs);
    let out = std::process::Command::new("xfs_repair")
        .args(["-n", img.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "xfs_repair -n: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let m = KernelMount::new(&img, &mnt, "ro");
    let got = std::fs::read(mnt.join("f")).unwrap();
    assert!(got[..] == d[..n], "contents");
    m.umount();
}

/// fstests generic/274 through the library: a KEEP_SIZE preallocation
/// past EOF of a file that also had speculative preallocation (two
/// appends) is the user's. Filling the filesystem to ENOSPC gives back
/// speculative preallocation, never theirs: every write into it then
/// succeeds, fragmenting it (odd 64 KiB chunks, then the even ones). The
/// file carries DIFLAG_PREALLOC, as the kernel's XFS marks it.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn keep_size_preallocation_survives_enospc() {
    require_root();
    require_tools(&["mkfs.xfs", "xfs_repair"]);
    let s = Scratch::new("falloc-keep-enospc");
    let img = s.path("img");
    mkfs_with(&img, 64 << 20, &[], FSTESTS_ENV);
    let mnt = s.path("mnt");
    let m = KernelMount::new(&img, &mnt, "");
    std::fs::write(mnt.join("test"), b"").unwrap();
    std::fs::write(mnt.join("fill"), b"").unwrap();
    use std::os::unix::fs::MetadataExt;
    let test = Ino(std::fs::metadata(mnt.join("test")).unwrap().ino());
    let fill = Ino(std::fs::metadata(mnt.join("fill")).unwrap().ino());
    m.umount();
    let dev: Arc<dyn BlockDevice> = Arc::new(FileDevice::open(&img, false, false).unwrap());
    let opts = rxfs::MountOptions {
        read_only: false,
        ..Default::default()
    };
    let fs = Filesystem::open(dev, None, opts).unwrap();
    const CHUNK: u64 = 64 << 10;
    const PREALLOC: u64 = 8 << 20;
    let mut want = pattern(1, CHUNK as usize);
    assert_eq!(fs.write(test, 0, &want[..32 << 10]).unwrap(), 32 << 10);
    assert_eq!(
        fs.write(test, 32 << 10, &want[32 << 10..]).unwrap(),
        32 << 10
    );
    fs.fallocate(test, FALLOC_FL_KEEP_SIZE, CHUNK, PREALLOC)
        .unwrap();
    let x = fs.get_fsxattr(test).unwrap();
    assert_ne!(x.xflags & rxfs::format::xflags::XFLAG_PREALLOC, 0, "{x:?}");
    // Fill: the writes end at ENOSPC.
    let big = vec![0x5au8; 1 << 20];
    let mut off = 0u64;
    loop {
        match fs.write(fill, off, &big) {
            Ok(n) if n == big.len() => off += n as u64,
            Ok(_) | Err(rxfs::Error::NoSpace) => break,
            Err(e) => panic!("fill: {e}"),
        }
    }
    assert!(matches!(
        fs.write(fill, 1 << 40, &big[..4096]),
        Err(rxfs::Error::NoSpace)
    ));
    let chunks = PREALLOC / CHUNK;
    for i in (1..=chunks).step_by(2).chain((2..=chunks).step_by(2)) {
        let d = pattern(i + 7, CHUNK as usize);
        let n = fs
            .write(test, i * CHUNK, &d)
            .unwrap_or_else(|e| panic!("write of chunk {i} into the preallocation: {e}"));
        assert_eq!(n as u64, CHUNK, "chunk {i}");
        let at = (i * CHUNK) as usize;
        if want.len() < at + d.len() {
            want.resize(at + d.len(), 0);
        }
        want[at..at + d.len()].copy_from_slice(&d);
    }
    fs.unmount().unwrap();
    drop(fs);
    run_output("xfs_repair", &["-n", img.to_str().unwrap()]);
    let m = KernelMount::new(&img, &mnt, "ro");
    let got = std::fs::read(mnt.join("test")).unwrap();
    m.umount();
    assert!(got == want, "the kernel reads every chunk written");
}
