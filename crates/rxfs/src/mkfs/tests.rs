//! mkfs against the read side: a made filesystem opens, verifies and reads
//! as empty.

use super::*;
use crate::bdev::MemDevice;
use crate::fs::{Filesystem, MountOptions};
use std::sync::Arc;

fn made(o: &MkfsOptions, bytes: u64) -> Arc<MemDevice> {
    let dev = Arc::new(MemDevice::new(vec![0u8; bytes as usize]));
    let now = Timestamp {
        sec: 1_700_000_000,
        nsec: 5,
    };
    mkfs(&*dev, None, o, 512, now).unwrap();
    dev
}

#[test]
fn default_300m_opens_empty() {
    let dev = made(&MkfsOptions::default(), 300 << 20);
    let fs = Filesystem::open(
        dev,
        None,
        MountOptions {
            read_only: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(fs.sb().rootino, 128);
    assert_eq!(fs.sb().agcount, 4);
    assert_eq!(fs.sb().logblocks, 16384);
    assert_eq!(fs.sb().fdblocks, 60384);
    assert_eq!(fs.sb().icount, 64);
    assert_eq!(fs.sb().ifree, 61);
    assert_eq!(fs.sb().inprogress, 0);
}

#[test]
fn rmapbt_and_1k_blocks_open() {
    let mut o = MkfsOptions::default();
    o.features.rmapbt = true;
    o.blocksize = Some(1024);
    let dev = made(&o, 400 << 20);
    let fs = Filesystem::open(
        dev,
        None,
        MountOptions {
            read_only: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(fs.sb().has_rmapbt());
    assert_eq!(fs.sb().blocksize, 1024);
}

/// A power cut at any write of mkfs (writes lost, reordered subsets, torn
/// sectors) leaves either a filesystem nothing opens (the primary
/// superblock missing or still marked in progress, as the kernel refuses
/// it) or the complete one, which the checker finds clean.
#[test]
fn a_crash_during_mkfs_leaves_nothing_or_everything() {
    use crate::bdev::{for_each_crash_image, CrashDevice, CrashMode};
    let dev = Arc::new(CrashDevice::new(vec![0u8; 300 << 20], 160 << 20));
    let now = Timestamp {
        sec: 1_700_000_000,
        nsec: 0,
    };
    mkfs(&*dev, None, &MkfsOptions::default(), 512, now).unwrap();
    let points = dev.crash_points();
    let (mut refused, mut complete) = (0, 0);
    for_each_crash_image(&dev, &points, &CrashMode::EVERY, 11, |img| {
        let ro = MountOptions {
            read_only: true,
            norecovery: true,
            ..Default::default()
        };
        match Filesystem::open(img.device(), None, ro) {
            Err(crate::Error::Corrupt { .. }) => refused += 1,
            Err(e) => panic!("{img}: unexpected error {e}"),
            Ok(fs) => {
                let report = crate::check::check(&fs, &mut |_, _, _| {});
                assert!(report.clean(), "{img}: {:?}", report.findings);
                complete += 1;
            }
        }
    })
    .unwrap();
    assert!(
        refused > 0 && complete > 0,
        "refused {refused}, complete {complete}"
    );
}
