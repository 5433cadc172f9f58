//! The crash simulator and the fault injector around a real kernel-made
//! image: rxfs reads through them unchanged, crash images of recorded writes
//! open (or fail) as the model says, and an injected device error surfaces
//! as `Error::Io` with its errno, never as a panic or a corruption error.

mod common;

use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use common::*;
use rxfs::bdev::{
    for_each_crash_image, BlockDevice, CrashDevice, CrashMode, Fault, FaultDevice, MemDevice,
};
use rxfs::types::{AgBlock, Ino};
use rxfs::{Error, Filesystem, MountOptions};

const RO: MountOptions = MountOptions {
    read_only: true,
    norecovery: false,
    direct_io: false,
    logbufs: None,
    logbsize: None,
    ablate_delaylog: false,
    allocsize: None,
    inject_latency: None,
    atime: rxfs::fs::atime::AtimeMode::Relatime,
    nodiratime: false,
    rtsumcache: rxfs::cache::rtsum::RtSumMode::Memory,
    within: None,
};

/// A kernel-populated image: a directory of 200 small files (several inode
/// chunks). Returns the image bytes and the inode number of d/f150.
fn kernel_image(scratch: &Scratch) -> (Vec<u8>, u64) {
    let img = scratch.path("img");
    mkfs(&img, 320 << 20, &[]);
    let mnt = KernelMount::new(&img, &scratch.path("mnt"), "");
    let d = mnt.dir.join("d");
    std::fs::create_dir(&d).unwrap();
    for i in 0..200 {
        std::fs::write(d.join(format!("f{i}")), format!("file {i}\n")).unwrap();
    }
    let ino = std::fs::metadata(d.join("f150")).unwrap().ino();
    mnt.umount();
    (std::fs::read(&img).unwrap(), ino)
}

fn read_whole(fs: &Filesystem, path: &[&[u8]]) -> rxfs::Result<Vec<u8>> {
    let mut ip = fs.iget(fs.root_ino())?;
    for name in path {
        ip = fs.iget(fs.lookup(&ip, name)?)?;
    }
    let mut buf = vec![0u8; ip.core.size as usize];
    let n = fs.read_file(&ip, 0, &mut buf)?;
    buf.truncate(n);
    Ok(buf)
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn crash_and_fault_devices_around_a_kernel_image() {
    let scratch = Scratch::new("bdev-sim");
    let (bytes, ino) = kernel_image(&scratch);

    // Reads pass through the crash device; a read-only open records nothing.
    let crash = Arc::new(CrashDevice::new(bytes.clone(), 1 << 20));
    let fs = Filesystem::open(crash.clone(), None, RO).unwrap();
    assert_eq!(read_whole(&fs, &[b"d", b"f150"]).unwrap(), b"file 150\n");
    assert_eq!(crash.event_count(), 0);
    drop(fs);

    // Unflushed damage to the superblock: lost in a Lost crash, present in
    // an All crash; a flushed write (to the last block, free space of the
    // last AG) survives every crash.
    let free = crash.size() - 4096;
    crash.write_at(&[0xee; 512], free).unwrap();
    crash.flush().unwrap();
    crash.write_at(&[0u8; 512], 0).unwrap();
    let end = crash.event_count();
    let mut opened = Vec::new();
    let n = for_each_crash_image(&crash, &[end], &CrashMode::EVERY, 42, |img| {
        let dev = img.device();
        let mut b = [0u8; 512];
        dev.read_at(&mut b, free).unwrap();
        assert_eq!(b, [0xee; 512], "{img}: durable write lost");
        let r = Filesystem::open(dev, None, RO);
        opened.push((img.mode, r.is_ok()));
        if let Err(e) = r {
            assert!(e.is_corrupt(), "{img}: {e}");
        }
    })
    .unwrap();
    assert_eq!(n, 4);
    assert!(opened.contains(&(CrashMode::Lost, true)));
    assert!(opened.contains(&(CrashMode::All, false)));
    // The same crash image as a file, for the kernel's tools: the Lost image
    // is a clean filesystem to xfs_repair.
    for_each_crash_image(&crash, &[end], &[CrashMode::Lost], 42, |img| {
        let f = scratch.path("crash.img");
        img.device().write_image(&f).unwrap();
        run("xfs_repair", &["-n", f.to_str().unwrap()]);
        std::fs::remove_file(&f).unwrap();
    })
    .unwrap();
    let lost = crash.crash_image(end, CrashMode::Lost, 0).unwrap();
    let fs = Filesystem::open(Arc::new(MemDevice::new(lost)), None, RO).unwrap();
    assert_eq!(read_whole(&fs, &[b"d", b"f7"]).unwrap(), b"file 7\n");
    drop(fs);

    // A failing read of the inode btree root: iget reports EIO.
    let fault = Arc::new(FaultDevice::new(Arc::new(MemDevice::new(bytes)), 1));
    let fs = Filesystem::open(fault.clone(), None, RO).unwrap();
    let agno = fs.geo().ino_agno(Ino(ino));
    let agi = fs.read_agi(agno).unwrap();
    let root = fs.geo().agb_to_daddr(agno, AgBlock(agi.root));
    let bbs = (fs.geo().blocksize >> 9) as u64;
    fault.arm("inobt-root", Fault::reads().daddr_range(root, bbs));
    match fs.iget(Ino(ino)) {
        Err(e @ Error::Io { .. }) => assert_eq!(e.errno(), libc::EIO),
        Err(e) => panic!("expected an I/O error, got {e:?}"),
        Ok(_) => panic!("iget succeeded although the inobt root is unreadable"),
    }
    assert!(fault.fired("inobt-root").unwrap() >= 1);
    assert!(fault.stats().read_errors >= 1);
    // The failure was not cached: with the fault gone the inode reads.
    fault.disarm("inobt-root");
    let ip = fs.iget(Ino(ino)).unwrap();
    assert_eq!(ip.core.size, 9);

    // The device goes away: every later read fails with EIO, cleanly.
    fault.arm("gone", Fault::gone_after_writes(0));
    let e = read_whole(&fs, &[b"d", b"f3"]).unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e:?}");
}
