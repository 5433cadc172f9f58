//! Directories (v3, CRC-enabled filesystems): the shared pieces.
//!
//! A directory takes one of five shapes, chosen by its size:
//!
//! | form      | where the entries live                    | hash index            |
//! |-----------|-------------------------------------------|-----------------------|
//! | shortform | inside the inode's data fork ([`super::dir_sf`]) | none           |
//! | block     | one `XDB3` block at directory offset 0    | in that block's tail  |
//! | leaf      | `XDD3` data blocks                        | one leaf1 block `0x3df1` |
//! | node      | `XDD3` data blocks                        | leafn blocks `0x3dff` (under DA nodes `0x3ebe` once there are several) + `XDF3` free index |
//! | btree     | like leaf/node, but the data fork is a bmbt | (same)              |
//!
//! The data fork is one 96 GiB address space cut in three segments, counted
//! in directory blocks of `dirblksize` bytes (which may span several
//! filesystem blocks):
//!
//! ```text
//!  byte 0            32 GiB             64 GiB            96 GiB
//!  | data blocks      | leaf / DA nodes   | free index       |
//! ```
//!
//! DA block numbers (`dablk`, in DA node `before` pointers and leaf
//! forw/back links) are fork offsets in *filesystem* blocks.
//!
//! A **data pointer** (`dataptr`, the `address` of a leaf entry) is a byte
//! offset inside the data segment shifted right by 3 (entries are 8-byte
//! aligned), so it fits 32 bits. rxfs uses the data pointer of an entry as
//! its readdir cookie, as the kernel does; a shortform entry carries the
//! offset it would have in a block-form directory (its `offset` tag), so
//! cookies survive the conversion between shortform and block form. "." and
//! ".." of a shortform directory get the fixed pointers of the first two
//! entries of a data block: [`DOT_COOKIE`] and [`DOTDOT_COOKIE`].
//!
//! Invariants the decoders enforce on every name they hand out: 1..=255
//! bytes, no '/' and no NUL; every inode number is range-checked by the
//! caller (through the geometry) before use.

use crate::error::{Error, Location, Result};

/// Start of the leaf segment, in bytes of the directory address space.
pub const LEAF_OFFSET_BYTES: u64 = 32 << 30;
/// Start of the free-index segment, in bytes.
pub const FREE_OFFSET_BYTES: u64 = 64 << 30;
/// Entries in data blocks are aligned to this many bytes.
pub const DATA_ALIGN: usize = 8;
/// Longest name a directory entry holds.
pub const MAXNAMELEN: usize = 255;
/// v3 data block / free block header size (XDB3, XDD3, XDF3).
pub const DIR3_HDR_SIZE: usize = 64;
/// Offset of the CRC in XDB3/XDD3/XDF3 blocks.
pub const DIR3_CRC_OFF: usize = 4;

/// Entry sizes of "." (1 byte name) and ".." in a data block. The ftype
/// byte does not change them: both round up to 16 bytes either way.
const DOT_ENTSIZE: u64 = 16;
const DOTDOT_ENTSIZE: u64 = 16;
/// Cookie of "." (its data pointer in block 0).
pub const DOT_COOKIE: u64 = DIR3_HDR_SIZE as u64 >> 3;
/// Cookie of "..".
pub const DOTDOT_COOKIE: u64 = (DIR3_HDR_SIZE as u64 + DOT_ENTSIZE) >> 3;
/// Byte offset of the first ordinary entry in a data block that starts
/// with "." and "..": the lowest offset a shortform entry may carry.
pub const DATA_FIRST_OFFSET: usize = DIR3_HDR_SIZE + (DOT_ENTSIZE + DOTDOT_ENTSIZE) as usize;

/// File type byte values of directory entries (`XFS_DIR3_FT_*`): 0 unknown,
/// 1..=7 the POSIX types, 8 whiteout. Values above are corruption.
pub const FT_MAX_VALID: u8 = 8;

/// Directory geometry as the decoders need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirGeo {
    /// Directory block size in bytes.
    pub blksize: u32,
    /// log2 of the directory block size in bytes.
    pub blklog: u8,
    /// log2 of the filesystem block size.
    pub fsblog: u8,
    /// Whether entries carry a file-type byte.
    pub ftype: bool,
}

impl DirGeo {
    pub fn new(fs_blocklog: u8, dirblklog: u8, ftype: bool) -> Self {
        DirGeo {
            blksize: 1 << (fs_blocklog + dirblklog),
            blklog: fs_blocklog + dirblklog,
            fsblog: fs_blocklog,
            ftype,
        }
    }

    /// Filesystem blocks per directory block.
    pub fn fsbs(&self) -> u32 {
        1 << (self.blklog - self.fsblog)
    }

    /// First fork block (fs blocks) of the leaf segment.
    pub fn leaf_dablk(&self) -> u64 {
        LEAF_OFFSET_BYTES >> self.fsblog
    }

    /// First fork block (fs blocks) of the free-index segment.
    pub fn free_dablk(&self) -> u64 {
        FREE_OFFSET_BYTES >> self.fsblog
    }

    /// Number of directory blocks the data segment can hold.
    pub fn max_data_blocks(&self) -> u64 {
        LEAF_OFFSET_BYTES >> self.blklog
    }

    /// Fork block (fs blocks) of data block `db`.
    pub fn db_to_dablk(&self, db: u64) -> u64 {
        db << (self.blklog - self.fsblog)
    }

    /// Data pointer of byte `off` in data block `db`.
    pub fn dataptr(&self, db: u64, off: usize) -> u64 {
        ((db << self.blklog) + off as u64) >> 3
    }

    /// Data block and byte offset a data pointer designates.
    pub fn dataptr_split(&self, ptr: u64) -> (u64, usize) {
        let byte = ptr << 3;
        (
            byte >> self.blklog,
            (byte & (self.blksize as u64 - 1)) as usize,
        )
    }

    /// Size of a data-block entry with a name of `namelen` bytes:
    /// inumber (8) + namelen (1) + name + ftype (0/1) + tag (2), rounded up
    /// to 8.
    pub fn data_entsize(&self, namelen: usize) -> usize {
        let raw = 8 + 1 + namelen + self.ftype as usize + 2;
        raw.div_ceil(DATA_ALIGN) * DATA_ALIGN
    }
}

/// Whether `name` is a valid directory entry name.
pub fn name_valid(name: &[u8]) -> bool {
    !name.is_empty() && name.len() <= MAXNAMELEN && !name.iter().any(|&c| c == b'/' || c == 0)
}

/// Corruption unless `name` is a valid entry name.
pub fn check_name(what: &'static str, at: Location, name: &[u8]) -> Result<()> {
    if name_valid(name) {
        Ok(())
    } else {
        Err(Error::corrupt(
            what,
            at,
            format!("bad entry name {:?}", String::from_utf8_lossy(name)),
        ))
    }
}

/// Corruption unless `ft` is a known file type byte.
pub fn check_ftype(what: &'static str, at: Location, ft: u8) -> Result<()> {
    if ft <= FT_MAX_VALID {
        Ok(())
    } else {
        Err(Error::corrupt(what, at, format!("bad file type {ft}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_4k() {
        let g = DirGeo::new(12, 0, true);
        assert_eq!(g.blksize, 4096);
        assert_eq!(g.leaf_dablk(), 8388608);
        assert_eq!(g.free_dablk(), 16777216);
        assert_eq!(g.fsbs(), 1);
        assert_eq!(g.dataptr(5, 0x90), (5 * 4096 + 0x90) >> 3);
        assert_eq!(g.dataptr_split(g.dataptr(5, 0x90)), (5, 0x90));
        assert_eq!(DOT_COOKIE, 8);
        assert_eq!(DOTDOT_COOKIE, 10);
        assert_eq!(DATA_FIRST_OFFSET, 0x60);
    }

    #[test]
    fn geometry_64k_dirs_on_4k_blocks() {
        let g = DirGeo::new(12, 4, true);
        assert_eq!(g.blksize, 65536);
        assert_eq!(g.fsbs(), 16);
        assert_eq!(g.db_to_dablk(3), 48);
        assert_eq!(g.leaf_dablk(), 8388608);
        assert_eq!(g.max_data_blocks(), 524288);
        let g1k = DirGeo::new(10, 0, true);
        assert_eq!(g1k.leaf_dablk(), 32 << 20);
    }

    #[test]
    fn entry_sizes() {
        let g = DirGeo::new(12, 0, true);
        assert_eq!(g.data_entsize(1), 16);
        assert_eq!(g.data_entsize(2), 16);
        assert_eq!(g.data_entsize(5), 24);
        assert_eq!(g.data_entsize(255), 272);
        let nf = DirGeo::new(12, 0, false);
        assert_eq!(nf.data_entsize(1), 16);
        assert_eq!(nf.data_entsize(2), 16);
        assert_eq!(nf.data_entsize(5), 16);
    }

    #[test]
    fn names() {
        assert!(name_valid(b"a"));
        assert!(name_valid(&[b'x'; 255]));
        assert!(!name_valid(b""));
        assert!(!name_valid(&[b'x'; 256]));
        assert!(!name_valid(b"a/b"));
        assert!(!name_valid(b"a\0b"));
    }
}
