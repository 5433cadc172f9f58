//! The on-disk format of XFS v5, declared once, with no I/O.
//!
//! Each submodule holds one family of structures: its byte layout (zerocopy
//! big-endian structs with `const` size assertions, or offset constants), its
//! in-memory decoded form, and its verifier (magic, CRC, self-describing
//! owner / block number / UUID). Code outside `format` never interprets raw
//! bytes of a metadata block itself.
//!
//! Decoders take untrusted bytes: every length and offset read from disk is
//! bounds-checked and bad bytes become [`crate::Error::Corrupt`], never a
//! panic.

pub mod ag;
pub mod attr;
pub mod attr_acl;
pub mod attr_enc;
pub mod attr_remote;
pub mod bmbt;
pub mod btree;
pub mod btree_rec;
pub mod bufkind;
pub mod crc;
pub mod da;
pub mod dinode_edit;
pub mod dir;
pub mod dir_data;
pub mod dir_leaf;
pub mod dir_sf;
pub mod fsop_geom;
pub mod inode;
pub mod log;
pub mod log_dinode;
pub mod log_items;
pub mod log_ops;
pub mod log_record;
pub mod meta_header;
pub mod rt;
pub mod sb;
pub mod symlink;
pub mod xflags;

/// Read a big-endian u16 at `off`. Callers bound-check first.
#[inline]
pub fn be16(b: &[u8], off: usize) -> u16 {
    u16::from_be_bytes([b[off], b[off + 1]])
}

/// Read a big-endian u32 at `off`. Callers bound-check first.
#[inline]
pub fn be32(b: &[u8], off: usize) -> u32 {
    u32::from_be_bytes(b[off..off + 4].try_into().unwrap())
}

/// Read a big-endian u64 at `off`. Callers bound-check first.
#[inline]
pub fn be64(b: &[u8], off: usize) -> u64 {
    u64::from_be_bytes(b[off..off + 8].try_into().unwrap())
}

#[inline]
pub fn put_be16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_be_bytes());
}

#[inline]
pub fn put_be32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_be_bytes());
}

#[inline]
pub fn put_be64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_be_bytes());
}

/// A 16-byte filesystem UUID.
pub type Uuid = [u8; 16];

/// Format a UUID the way xfs_info / blkid print it.
pub fn uuid_string(u: &Uuid) -> String {
    let h: Vec<String> = u.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        h[0..4].concat(),
        h[4..6].concat(),
        h[6..8].concat(),
        h[8..10].concat(),
        h[10..16].concat()
    )
}
