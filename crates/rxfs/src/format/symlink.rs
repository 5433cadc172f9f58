//! Symbolic link targets.
//!
//! The target length is the inode's `size` (1..=1024 bytes). A short target
//! lives inline in the data fork (fork format "local"): exactly `size`
//! bytes, no terminator, no NUL inside. A longer one lives in data fork
//! blocks `0 .. ceil(size / (blocksize - 56))`.
//!
//! Unlike remote attribute values, a remote target has one 56-byte header
//! per *contiguous mapping* of those blocks, not per block: the kernel
//! writes (and reads) each physically contiguous run of the blocks as one
//! buffer, with one header at its start and the CRC over the whole run.
//! With 1 KiB blocks, a 1000-byte target in one 2-block extent has a single
//! header saying 1000 bytes; in two separate 1-block extents it has two
//! headers (968 + 32 bytes). The header is the one of
//! [`super::attr_remote`] under the magic `XSLM`:
//! ```text
//!  0 magic "XSLM"  4 offset u32  8 bytes u32  12 crc u32 (LE, whole run)
//! 16 uuid[16]     32 owner u64  40 blkno u64 (daddr of the run)
//! 48 lsn u64      56 target bytes ...
//! ```
//! Each run holds the next `min(remaining, run bytes - 56)` bytes of the
//! target; `offset + bytes` never exceeds 1024.

use super::attr_remote::{self, RmtExpect};
use super::Uuid;
use crate::error::{Error, Location, Result};
use crate::types::{Daddr, Ino};

pub const SYMLINK_MAGIC: u32 = 0x5853_4c4d; // "XSLM"
pub const SYMLINK_HDR_SIZE: usize = attr_remote::RMT_HDR_SIZE;
pub const SYMLINK_CRC_OFF: usize = attr_remote::RMT_CRC_OFF;
/// Longest symlink target XFS stores (MAXPATHLEN).
pub const SYMLINK_MAXLEN: u64 = 1024;

/// Blocks a remote target of `len` bytes occupies (counted as if every
/// block had its own header, which is how the kernel sizes the allocation).
pub fn remote_blocks(len: u32, blocksize: u32) -> u32 {
    attr_remote::rmt_blocks(len, blocksize)
}

/// Check a symlink's size (from the inode core) before reading the target.
pub fn check_size(size: u64, ino: Ino) -> Result<u32> {
    if size == 0 || size > SYMLINK_MAXLEN {
        return Err(Error::corrupt(
            "symlink",
            Location::Ino(ino.0),
            format!("target length {size}"),
        ));
    }
    Ok(size as u32)
}

/// Check an inline target: `fork` holds at least `size` bytes, and the
/// first `size` contain no NUL. Returns the target.
pub fn decode_local(fork: &[u8], size: u32, ino: Ino) -> Result<&[u8]> {
    let at = Location::Ino(ino.0);
    let size = size as usize;
    if fork.len() < size {
        return Err(Error::corrupt(
            "inline symlink",
            at,
            format!("{} inline bytes for a {size}-byte target", fork.len()),
        ));
    }
    let t = &fork[..size];
    if t.contains(&0) {
        return Err(Error::corrupt("inline symlink", at, "NUL byte in target"));
    }
    Ok(t)
}

/// Verify one contiguous run of remote symlink blocks of inode `owner`
/// read at `daddr` (`buf` is the whole run), expected to hold target bytes
/// from `offset`, with `remaining` bytes of the target still to read.
/// Returns this run's part of the target.
pub fn verify_remote_run<'b>(
    buf: &'b [u8],
    daddr: Daddr,
    owner: Ino,
    uuid: &Uuid,
    offset: u32,
    remaining: u32,
) -> Result<&'b [u8]> {
    attr_remote::verify_rmt_block(
        buf,
        daddr,
        &RmtExpect {
            what: "remote symlink",
            magic: SYMLINK_MAGIC,
            max_len: SYMLINK_MAXLEN as u32,
            owner,
            uuid,
            offset,
            remaining,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const BLK: &[u8] = include_bytes!("../../tests/data/attr/symlink_900.bin");
    const UUID: Uuid = [
        0x80, 0xca, 0xae, 0xd9, 0x6c, 0xee, 0x42, 0x28, 0x9f, 0x7e, 0x8a, 0x58, 0x31, 0xdd, 0x8c,
        0x01,
    ];
    // Inode 139, data fork block 0 at fsblock 137 (daddr 1096).
    const OWNER: Ino = Ino(139);
    const DADDR: Daddr = Daddr(1096);

    #[test]
    fn kernel_remote_block() {
        let size = check_size(899, OWNER).unwrap();
        assert_eq!(remote_blocks(size, BLK.len() as u32), 1);
        let t = verify_remote_run(BLK, DADDR, OWNER, &UUID, 0, size).unwrap();
        let want: Vec<u8> = ["abcdefgh"; 100].join("/").into_bytes();
        assert_eq!(t, &want[..]);
    }

    #[test]
    fn kernel_remote_block_rejects() {
        assert!(verify_remote_run(BLK, Daddr(1097), OWNER, &UUID, 0, 899).is_err());
        assert!(verify_remote_run(BLK, DADDR, Ino(138), &UUID, 0, 899).is_err());
        assert!(verify_remote_run(BLK, DADDR, OWNER, &[0; 16], 0, 899).is_err());
        assert!(verify_remote_run(BLK, DADDR, OWNER, &UUID, 0, 898).is_err());
        let mut b = BLK.to_vec();
        b[500] ^= 0x20;
        assert!(verify_remote_run(&b, DADDR, OWNER, &UUID, 0, 899)
            .unwrap_err()
            .is_corrupt());
        // An attribute block magic is not a symlink block.
        let mut b = BLK.to_vec();
        b[0..4].copy_from_slice(b"XARM");
        crate::format::crc::update(&mut b, SYMLINK_CRC_OFF);
        assert!(verify_remote_run(&b, DADDR, OWNER, &UUID, 0, 899).is_err());
    }

    /// With 1 KiB blocks, the kernel wrote a 1000-byte target into one
    /// 2-block extent with a single header (inode 68, fsblock 29 = daddr 58,
    /// filesystem UUID 32bf7e57-1909-4478-b1d1-35a27b636881).
    #[test]
    fn kernel_two_block_run() {
        const RUN: &[u8] = include_bytes!("../../tests/data/attr/symlink_1000_b1k.bin");
        let uuid: Uuid = [
            0x32, 0xbf, 0x7e, 0x57, 0x19, 0x09, 0x44, 0x78, 0xb1, 0xd1, 0x35, 0xa2, 0x7b, 0x63,
            0x68, 0x81,
        ];
        assert_eq!(remote_blocks(1000, 1024), 2);
        let t = verify_remote_run(RUN, Daddr(58), Ino(68), &uuid, 0, 1000).unwrap();
        assert_eq!(t, &[b'a'; 1000][..]);
        // Read block by block, the first block fails its CRC and holds
        // only 968 bytes: a per-block reader cannot get this right.
        assert!(verify_remote_run(&RUN[..1024], Daddr(58), Ino(68), &uuid, 0, 1000).is_err());
    }

    #[test]
    fn local_and_sizes() {
        assert_eq!(
            decode_local(b"xxxxxxxxxxxx", 12, Ino(1)).unwrap(),
            b"xxxxxxxxxxxx"
        );
        assert!(decode_local(b"abc", 4, Ino(1)).is_err());
        assert!(decode_local(b"a\0c", 3, Ino(1)).is_err());
        assert_eq!(decode_local(b"abc\0\0", 3, Ino(1)).unwrap(), b"abc");
        assert!(check_size(0, Ino(1)).is_err());
        assert!(check_size(1025, Ino(1)).is_err());
        assert_eq!(check_size(1024, Ino(1)).unwrap(), 1024);
        assert_eq!(remote_blocks(1024, 512), 3);
    }
}
