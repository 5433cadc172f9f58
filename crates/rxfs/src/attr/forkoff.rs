//! Where the attribute fork starts (`di_forkoff`, in 8-byte units from the
//! end of the inode core), chosen the way the kernel chooses it, so that
//! images rxfs writes look like the kernel's and the data fork keeps room:
//!
//! - `litino` = inode size - 176 (the literal area both forks share);
//! - a device inode's attr fork always starts at 8 bytes (the dev_t);
//! - a list of `bytes` that fits the current attr fork keeps the current
//!   offset (a fork never shrinks while attributes remain);
//! - otherwise the attr fork takes `bytes` from the end of the literal
//!   area, rounded down to 8, but never starts before the data fork's
//!   needs (its local bytes or extent records, and at least a bmbt root of
//!   3 records: 52 bytes, rounded up to 8) and never after the point that
//!   leaves an attr bmbt root of 2 records (36 bytes) room;
//! - 0 means "does not fit inline": the list must go to a leaf block.
//!
//! A data fork in btree form keeps its forkoff once it has one; adding an
//! attr fork to it needs its root relaid out, which [`super`] refuses.

use crate::format::dinode_edit as di;
use crate::format::inode::{DINODE_V3_CORE_SIZE, FMT_BTREE, FMT_DEV, FMT_EXTENTS, FMT_LOCAL};

/// Bytes of a bmbt root in the inode with `recs` key/pointer pairs.
pub fn bmdr_space(recs: usize) -> usize {
    4 + recs * 16
}

/// Records a data fork bmbt root must have room for.
const MIN_DATA_BT_PTRS: usize = 3;
/// Records an attr fork bmbt root must have room for.
const MIN_ATTR_BT_PTRS: usize = 2;

/// The literal area of a dinode of `d.len()` bytes.
pub fn litino(d: &[u8]) -> usize {
    d.len() - DINODE_V3_CORE_SIZE
}

/// Bytes the data fork of `d` uses now.
pub fn data_bytes(d: &[u8]) -> usize {
    match di::format(d) {
        FMT_LOCAL => di::size(d) as usize,
        FMT_EXTENTS => di::nextents(d) as usize * 16,
        _ => 0,
    }
}

/// The kernel's default attr fork offset in bytes (used when an attr fork
/// is added for a list that will not fit inline).
pub fn default_offset(d: &[u8]) -> usize {
    if di::format(d) == FMT_DEV {
        return 8;
    }
    if d.len() == 256 {
        litino(d) - bmdr_space(MIN_ATTR_BT_PTRS)
    } else {
        bmdr_space(6 * MIN_ATTR_BT_PTRS)
    }
}

/// The forkoff (8-byte units) for an inline attr list of `bytes` bytes in
/// the inode `d`; 0 when it cannot be inline. See the module docs.
pub fn bytes_fit(d: &[u8], bytes: usize) -> u8 {
    let lit = litino(d);
    if bytes > lit {
        return 0;
    }
    let offset = (lit - bytes) >> 3;
    let cur = di::forkoff(d) as usize;
    if di::format(d) == FMT_DEV {
        return if offset >= 1 { 1 } else { 0 };
    }
    if cur != 0 && bytes <= lit - cur * 8 {
        return cur as u8;
    }
    let mut dsize = data_bytes(d);
    match di::format(d) {
        FMT_EXTENTS if cur == 0 && dsize > default_offset(d) => {
            dsize = bmdr_space(MIN_DATA_BT_PTRS);
        }
        FMT_BTREE => {
            if cur != 0 {
                return if offset < cur { 0 } else { cur as u8 };
            }
            // Needs the root's record count; the caller refuses this case.
            dsize = lit;
        }
        _ => {}
    }
    let minforkoff = dsize.max(bmdr_space(MIN_DATA_BT_PTRS)).div_ceil(8);
    let maxforkoff = (lit - bmdr_space(MIN_ATTR_BT_PTRS)) >> 3;
    if offset >= maxforkoff {
        maxforkoff as u8
    } else if offset >= minforkoff {
        offset as u8
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dinode(size: usize, fmt: u8, dsize: u64) -> Vec<u8> {
        let mut d = vec![0u8; size];
        di::set_format(&mut d, fmt);
        di::set_size(&mut d, dsize);
        d
    }

    #[test]
    fn empty_file_512() {
        // litino 336; max forkoff (336 - 36) / 8 = 37.
        let d = dinode(512, FMT_EXTENTS, 0);
        assert_eq!(bytes_fit(&d, 4 + 3 + 1 + 1), 37);
        // 300 bytes: offset (36) / 8 = 4 < min 7 (52 -> 56 / 8).
        assert_eq!(bytes_fit(&d, 300), 0);
        assert_eq!(bytes_fit(&d, 336 - 56), 7);
        assert_eq!(bytes_fit(&d, 337), 0);
    }

    #[test]
    fn keeps_a_big_enough_fork_and_respects_local_data() {
        let mut d = dinode(512, FMT_LOCAL, 100);
        // dsize 100 -> min forkoff 13.
        assert_eq!(bytes_fit(&d, 336 - 104), 13);
        assert_eq!(bytes_fit(&d, 336 - 100), 0);
        di::set_forkoff(&mut d, 20);
        assert_eq!(bytes_fit(&d, 10), 20);
        assert_eq!(bytes_fit(&d, 336 - 160), 20);
        assert_eq!(bytes_fit(&d, 336 - 152), 19);
    }

    #[test]
    fn device_inodes() {
        let d = dinode(512, FMT_DEV, 0);
        assert_eq!(bytes_fit(&d, 200), 1);
        assert_eq!(default_offset(&d), 8);
    }
}
