//! Inode core v3 (`IN`) and fork layout.
//!
//! ```text
//!   0 magic "IN"  2 mode  4 version(3)  5 format  6 metatype/onlink  8 uid
//!  12 gid  16 nlink  20 projid_lo  22 projid_hi  24 big_nextents (nrext64)
//!  32 atime  40 mtime  48 ctime  56 size  64 nblocks  72 extsize
//!  76 nextents (u32) | big_anextents (nrext64)  80 anextents (u16)
//!  82 forkoff (x8 bytes)  83 aformat  84 dmevmask  88 dmstate  90 flags
//!  92 gen  96 next_unlinked  100 crc (LE)  104 changecount  112 lsn
//! 120 flags2  128 cowextsize  132 pad[12]  144 crtime  152 ino  160 uuid
//! 176 data fork ... attr fork at 176 + forkoff * 8
//! ```
//! Timestamps are `{sec: i32, nsec: u32}` or, with the BIGTIME flag in
//! flags2, a u64 count of nanoseconds since 1901-12-13T20:45:52Z.
