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
