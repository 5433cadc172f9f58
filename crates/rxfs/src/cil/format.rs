//! Formatting log items into log vectors: buffers (`XFS_LI_BUF`) and
//! inodes (`XFS_LI_INODE`), the layouts recovery (ours and the kernel's)
//! reads back.
//!
//! ```text
//! BUF item:   region 0: xfs_buf_log_format (host order)
//!               type u16 | size u16 (regions) | flags u16 (BLFT<<11|CANCEL) | len u16 (BBs)
//!               blkno i64 | map_size u32 (words) | data_map[map_size] u32
//!             region 1..: one per run of set bits (128-byte chunks), the bytes
//! INODE item: region 0: xfs_inode_log_format (56 bytes, host order)
//!             region 1: xfs_log_dinode (176 bytes, host order)
//!             region 2: data fork bytes (local / extents), if any
//!             region 3: attr fork bytes (local / extents), if any
//! ```
//! Buffers are logged with the bytes of their dirty chunks as of the
//! commit: every chunk changed since the buffer was last written back, not
//! only this checkpoint's (as XFS's buffer items do), because a relogged
//! item moves to its newest checkpoint in the AIL and the tail may then
//! pass the older ones. An item relogged in the same checkpoint is
//! re-formatted from that union (the checkpoint carries each item once).

use crate::format::inode as dinode;
use crate::format::log::HostOrder;
use crate::format::log_dinode::{
    disk_to_log_dinode, ILOG_ABROOT, ILOG_ADATA, ILOG_AEXT, ILOG_CORE, ILOG_DBROOT, ILOG_DDATA,
    ILOG_DEV, ILOG_DEXT,
};
use crate::format::log_items::{
    BLFT_SHIFT, BLF_CANCEL, BLF_CHUNK, BLF_INODE_BUF, LI_BUF, LI_INODE,
};
use crate::format::{be16, be32, be64};
use crate::geometry::Geometry;
use crate::log::LogVec;
use crate::types::{Daddr, Ino};

/// Bytes of a buf log format header with `words` bitmap words.
pub fn buf_hdr_len(words: usize) -> usize {
    20 + 4 * words
}

/// Bitmap words for a buffer of `len` bytes.
pub fn map_words(len: usize) -> usize {
    (len / BLF_CHUNK).div_ceil(32)
}

/// Set the chunks covering `[start, end)` in `map`.
pub fn map_set(map: &mut Vec<u32>, len: usize, start: usize, end: usize) {
    if map.len() < map_words(len) {
        map.resize(map_words(len), 0);
    }
    if start >= end {
        return;
    }
    for c in start / BLF_CHUNK..=(end - 1) / BLF_CHUNK {
        map[c / 32] |= 1 << (c % 32);
    }
}

/// OR `src` into `dst`.
pub fn map_union(dst: &mut Vec<u32>, src: &[u32]) {
    if dst.len() < src.len() {
        dst.resize(src.len(), 0);
    }
    for (d, s) in dst.iter_mut().zip(src) {
        *d |= s;
    }
}

/// Runs of set chunks: `(first chunk, count)`.
pub fn map_runs(map: &[u32]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let nbits = map.len() * 32;
    // The bit at `i` and those after it in its word.
    let word_from = |i: usize| map[i / 32] >> (i % 32);
    let mut i = 0;
    while i < nbits {
        // Skip clear bits a word at a time.
        let w = word_from(i);
        if w == 0 {
            i = (i / 32 + 1) * 32;
            continue;
        }
        i += w.trailing_zeros() as usize;
        let s = i;
        loop {
            let ones = (!word_from(i)).trailing_zeros() as usize;
            let left = 32 - i % 32;
            i += ones.min(left);
            if ones < left || i >= nbits {
                break;
            }
        }
        out.push((s, i - s));
    }
    out
}

/// Size of a buffer item: (payload bytes, regions).
pub fn buf_size(len: usize, map: &[u32], stale: bool) -> (usize, usize) {
    let hdr = buf_hdr_len(map_words(len));
    if stale {
        return (hdr, 1);
    }
    let runs = map_runs(map);
    let bytes: usize = runs.iter().map(|(_, n)| n * BLF_CHUNK).sum();
    (hdr + bytes, 1 + runs.len())
}

/// Format a buffer item into `lv` (sized by [`buf_size`]).
pub fn format_buf(
    lv: &mut LogVec,
    o: HostOrder,
    daddr: Daddr,
    data: &[u8],
    blft: u16,
    map: &[u32],
    stale: bool,
) {
    let words = map_words(data.len());
    let runs = if stale { Vec::new() } else { map_runs(map) };
    // A logged inode cluster carries `di_next_unlinked` changes only: an
    // inode buffer item (recovery replays just those fields).
    let inode_buf = !stale && blft == crate::format::bufkind::BufKind::Dino.blft();
    let flags = (blft << BLFT_SHIFT)
        | if stale { BLF_CANCEL } else { 0 }
        | if inode_buf { BLF_INODE_BUF } else { 0 };
    lv.push_with(buf_hdr_len(words), |h| {
        o.put_u16(h, 0, LI_BUF);
        o.put_u16(h, 2, (1 + runs.len()) as u16);
        o.put_u16(h, 4, flags);
        o.put_u16(h, 6, (data.len() / 512) as u16);
        o.put_u64(h, 8, daddr.0);
        o.put_u32(h, 16, words as u32);
        if !stale {
            for (i, w) in map.iter().take(words).enumerate() {
                o.put_u32(h, 20 + 4 * i, *w);
            }
        }
    });
    for (c, n) in runs {
        let s = c * BLF_CHUNK;
        let e = ((c + n) * BLF_CHUNK).min(data.len());
        lv.push(&data[s..e]);
    }
}

/// What of an inode's forks is logged: (fields, data fork bytes, attr fork
/// bytes), each fork as its logged bytes.
pub struct InodeLayout {
    pub fields: u32,
    pub dfork: Option<Vec<u8>>,
    pub afork: Option<Vec<u8>>,
    pub rdev: u32,
}

/// A BTREE-format fork's root (on-disk bmdr form, `fork` bytes) in the
/// form the log carries it (the kernel's in-core root, which recovery
/// converts back): a 72-byte long btree block header (magic, level,
/// numrecs, NULL siblings and blkno, uuid, owner) then `numrecs` keys and
/// `numrecs` pointers. None if the root is unusable (logged as nothing).
fn broot_for_log(d: &[u8], fork: &[u8]) -> Option<Vec<u8>> {
    if fork.len() < 4 {
        return None;
    }
    let level = be16(fork, 0);
    let n = be16(fork, 2) as usize;
    let fmax = (fork.len() - 4) / 16;
    if n == 0 || n > fmax {
        return None;
    }
    let hdr = crate::format::bmbt::LBLOCK_HDR_SIZE;
    let mut b = vec![0u8; hdr + n * 16];
    b[0..4].copy_from_slice(&crate::format::bmbt::BMAP_CRC_MAGIC.to_be_bytes());
    b[4..6].copy_from_slice(&level.to_be_bytes());
    b[6..8].copy_from_slice(&(n as u16).to_be_bytes());
    b[8..32].fill(0xff);
    b[40..56].copy_from_slice(&d[160..176]);
    b[56..64].copy_from_slice(&d[152..160]);
    b[hdr..hdr + n * 8].copy_from_slice(&fork[4..4 + n * 8]);
    b[hdr + n * 8..].copy_from_slice(&fork[4 + fmax * 8..4 + fmax * 8 + n * 8]);
    Some(b)
}

/// Decide what to log of dinode `d` (v3). BTREE-format fork roots are
/// logged in the kernel's in-core form (`broot_for_log`).
pub fn inode_layout(d: &[u8], isize: usize) -> InodeLayout {
    let core = dinode::DINODE_V3_CORE_SIZE;
    let forkoff = d[82] as usize * 8;
    let dend = if forkoff != 0 { core + forkoff } else { isize };
    let dmax = dend.saturating_sub(core);
    let nrext64 = be64(d, 120) & dinode::DIFLAG2_NREXT64 != 0;
    let (next, anext) = if nrext64 {
        (be64(d, 24), be32(d, 76) as u64)
    } else {
        (be32(d, 76) as u64, be16(d, 80) as u64)
    };
    let mut l = InodeLayout {
        fields: ILOG_CORE,
        dfork: None,
        afork: None,
        rdev: 0,
    };
    match d[5] {
        dinode::FMT_DEV => {
            l.fields |= ILOG_DEV;
            l.rdev = be32(d, core);
        }
        dinode::FMT_LOCAL => {
            let size = (be64(d, 56) as usize).next_multiple_of(4).min(dmax);
            if size > 0 {
                l.fields |= ILOG_DDATA;
                l.dfork = Some(d[core..core + size].to_vec());
            }
        }
        dinode::FMT_EXTENTS => {
            let size = (next as usize * 16).min(dmax);
            if size > 0 {
                l.fields |= ILOG_DEXT;
                l.dfork = Some(d[core..core + size].to_vec());
            }
        }
        dinode::FMT_BTREE => {
            l.dfork = broot_for_log(d, &d[core..core + dmax]);
            if l.dfork.is_some() {
                l.fields |= ILOG_DBROOT;
            }
        }
        _ => {}
    }
    if forkoff != 0 {
        let amax = isize.saturating_sub(dend);
        match d[83] {
            dinode::FMT_LOCAL => {
                let size = (be16(d, dend) as usize).next_multiple_of(4).min(amax);
                if size > 0 {
                    l.fields |= ILOG_ADATA;
                    l.afork = Some(d[dend..dend + size].to_vec());
                }
            }
            dinode::FMT_EXTENTS => {
                let size = (anext as usize * 16).min(amax);
                if size > 0 {
                    l.fields |= ILOG_AEXT;
                    l.afork = Some(d[dend..dend + size].to_vec());
                }
            }
            dinode::FMT_BTREE => {
                l.afork = broot_for_log(d, &d[dend..isize.min(d.len())]);
                if l.afork.is_some() {
                    l.fields |= ILOG_ABROOT;
                }
            }
            _ => {}
        }
    }
    l
}

/// Size of an inode item: (payload bytes, regions).
pub fn inode_size(d: &[u8], isize: usize) -> (usize, usize) {
    let l = inode_layout(d, isize);
    let mut bytes = 56 + LOG_DINODE;
    let mut n = 2;
    for f in [l.dfork, l.afork].into_iter().flatten() {
        bytes += f.len();
        n += 1;
    }
    (bytes, n)
}

const LOG_DINODE: usize = 176;

/// Format an inode item of `ino` (dinode bytes `d`) into `lv`.
pub fn format_inode(lv: &mut LogVec, o: HostOrder, geo: &Geometry, ino: Ino, d: &[u8], lsn: u64) {
    let isize = geo.inodesize as usize;
    let l = inode_layout(d, isize);
    let (cdaddr, clen, boff) = geo.inode_cluster(ino);
    let n = 2 + l.dfork.is_some() as u16 + l.afork.is_some() as u16;
    lv.push_with(56, |h| {
        o.put_u16(h, 0, LI_INODE);
        o.put_u16(h, 2, n);
        o.put_u32(h, 4, l.fields);
        o.put_u16(h, 8, l.afork.as_ref().map_or(0, |a| a.len()) as u16);
        o.put_u16(h, 10, l.dfork.as_ref().map_or(0, |a| a.len()) as u16);
        o.put_u64(h, 16, ino.0);
        o.put_u32(h, 24, l.rdev);
        o.put_u64(h, 40, cdaddr.0);
        o.put_u32(h, 48, clen);
        o.put_u32(h, 52, boff);
    });
    lv.push_with(LOG_DINODE, |ld| disk_to_log_dinode(d, o, ld, lsn));
    for f in [l.dfork, l.afork].into_iter().flatten() {
        lv.push(&f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::log_dinode::log_dinode_to_disk;
    use crate::types::Lsn;

    #[test]
    fn bitmap_runs() {
        let mut m = Vec::new();
        map_set(&mut m, 4096, 0, 1);
        map_set(&mut m, 4096, 300, 600);
        map_set(&mut m, 4096, 4000, 4096);
        assert_eq!(map_runs(&m), vec![(0, 1), (2, 3), (31, 1)]);
        let (bytes, n) = buf_size(4096, &m, false);
        assert_eq!((bytes, n), (24 + 5 * 128, 4));
    }

    /// The word-at-a-time scan finds the runs a bit-by-bit one does,
    /// runs crossing words and ending at the map's end included.
    #[test]
    fn bitmap_runs_match_a_bitwise_scan() {
        let mut r = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..2000 {
            r ^= r << 13;
            r ^= r >> 7;
            r ^= r << 17;
            let words = 1 + (r % 5) as usize;
            let m: Vec<u32> = (0..words)
                .map(|k| match (round + k) % 4 {
                    0 => 0,
                    1 => u32::MAX,
                    _ => (r >> (k * 7)) as u32,
                })
                .collect();
            let mut want = Vec::new();
            let mut i = 0;
            while i < words * 32 {
                if m[i / 32] & (1 << (i % 32)) == 0 {
                    i += 1;
                    continue;
                }
                let s = i;
                while i < words * 32 && m[i / 32] & (1 << (i % 32)) != 0 {
                    i += 1;
                }
                want.push((s, i - s));
            }
            assert_eq!(map_runs(&m), want, "{m:x?}");
        }
    }

    #[test]
    fn log_dinode_round_trip() {
        let mut d = vec![0u8; 512];
        for (i, b) in d.iter_mut().enumerate().take(176) {
            *b = (i * 7 + 3) as u8;
        }
        d[0] = 0x49;
        d[1] = 0x4e;
        // bigtime on, so timestamps are 64-bit words.
        d[120..128].copy_from_slice(&(dinode::DIFLAG2_BIGTIME).to_be_bytes());
        let mut ld = vec![0u8; 176];
        disk_to_log_dinode(&d, HostOrder::Little, &mut ld, 0);
        let mut back = vec![0u8; 176];
        back[96..104].copy_from_slice(&d[96..104]);
        log_dinode_to_disk(
            &ld,
            HostOrder::Little,
            &mut back,
            Lsn(i64::from_be_bytes(d[112..120].try_into().unwrap())),
        );
        // Everything but next_unlinked/crc (kept from disk) round-trips.
        assert_eq!(&back[..96], &d[..96]);
        assert_eq!(&back[104..176], &d[104..176]);
    }
}
