//! Helpers shared by the `dirop` kernel tests: MemTx on an image, a
//! seeded generator, directory forms as the read path sees them.

#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use crate::common::*;
use rxfs::bdev::FileDevice;
use rxfs::format::da::hashname;
use rxfs::inode::Fork;
use rxfs::recover::memtx::MemTx;
use rxfs::types::Ino;
use rxfs::Filesystem;

pub fn kernel_ok() -> bool {
    if kernel_tests_disabled() {
        return false;
    }
    require_root();
    require_tools(&["mkfs.xfs", "xfs_repair", "mount"]);
    true
}

pub fn memtx(img: &Path) -> MemTx {
    let dev = Arc::new(FileDevice::open(img, false, false).unwrap());
    MemTx::new(dev).unwrap()
}

/// xorshift64.
pub struct Rng(pub u64);
impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
    pub fn name(&mut self, min: usize, max: usize) -> Vec<u8> {
        let len = min + self.below((max - min + 1) as u64) as usize;
        (0..len)
            .map(|_| match b'0' + self.below(75) as u8 {
                b'/' => b'-',
                c => c,
            })
            .collect()
    }
}

/// The form of a directory as our read path sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Short,
    Block,
}

pub fn form_of(fs: &Filesystem, ino: u64) -> Form {
    match &fs.iget(Ino(ino)).unwrap().data {
        Fork::Local(_) => Form::Short,
        Fork::Extents { list, .. } => {
            assert_eq!(list.len(), 1, "one extent");
            Form::Block
        }
        Fork::Dev(_) => panic!("device fork on a directory"),
    }
}

/// A different valid name with the same XFS name hash, if `name` has two
/// neighbouring bytes inside one 4-byte hash group: flip bit 0 of the
/// first and bit 7 of the second (the hash takes them 7 bits apart).
pub fn collide(name: &[u8]) -> Option<Vec<u8>> {
    let full = name.len() / 4 * 4;
    (0..name.len().saturating_sub(1))
        .filter(|&i| if i + 1 < full { i % 4 != 3 } else { i >= full })
        .map(|i| {
            let mut n = name.to_vec();
            n[i] ^= 1;
            n[i + 1] ^= 0x80;
            n
        })
        .find(|n| !n.contains(&0) && !n.contains(&b'/'))
        .inspect(|n| assert_eq!(hashname(n), hashname(name)))
}
