//! One allocation group as mkfs leaves it: the space map (static metadata,
//! log, AGFL blocks, the root inode chunk and the realtime metadata files
//! in AG 0, free space), and the header sectors and btree root blocks that
//! describe it.
//!
//! Invariants: the [`AgSpace`] pieces tile `[0, ag_len)` exactly once
//! (checked by `debug_assert`); every btree root is a single leaf block
//! (mkfs never needs more: a fresh AG has at most two free extents and a
//! handful of reverse mappings); records are written in the tree's order.

use super::plan::Plan;
use crate::format::ag::{
    AGFL_CRC_OFF, AGFL_MAGIC, AGF_CRC_OFF, AGF_MAGIC, AGI_CRC_OFF, AGI_MAGIC, AG_VERSION,
};
use crate::format::btree::{BtreeKind, SBlockHdr, SBLOCK_CRC_OFF};
pub use crate::format::btree::{
    RMAP_OWN_AG as OWN_AG, RMAP_OWN_FS as OWN_FS, RMAP_OWN_INOBT as OWN_INOBT,
    RMAP_OWN_INODES as OWN_INODES, RMAP_OWN_LOG as OWN_LOG, RMAP_OWN_REFC as OWN_REFC,
};
use crate::format::btree_rec::{AllocRec, InobtRec, RmapRec};
use crate::format::{crc, put_be32};

const NULL32: u32 = u32::MAX;

/// Where the pieces of one AG are.
#[derive(Debug, Clone)]
pub struct AgSpace {
    pub agno: u32,
    pub len: u32,
    /// AGFL blocks (in AGFL order).
    pub agfl: Vec<u32>,
    /// Free extents (start, len), ascending.
    pub free: Vec<(u32, u32)>,
    /// Reverse mappings (start, len, owner, offset), ascending.
    pub rmaps: Vec<(u32, u32, u64, u64)>,
    /// Inode chunk records of this AG: (first agino, free mask).
    pub chunks: Vec<(u32, u64)>,
}

/// Block numbers of the static metadata of every AG.
#[derive(Debug, Clone, Copy)]
pub struct Roots {
    pub bno: u32,
    pub cnt: u32,
    pub ino: u32,
    pub fino: Option<u32>,
    pub rmap: Option<u32>,
    pub refc: Option<u32>,
}

impl Roots {
    pub fn of(p: &Plan) -> Roots {
        let agfl_block = (3 * p.sectsize) / p.blocksize;
        let bno = agfl_block + 1;
        let ino = bno + 2;
        let mut next = ino + 1;
        let mut take = |on: bool| {
            on.then(|| {
                next += 1;
                next - 1
            })
        };
        let fino = take(p.features.finobt);
        let rmap = take(p.features.rmapbt);
        let refc = take(p.features.reflink);
        debug_assert_eq!(next, p.prealloc_blocks);
        Roots {
            bno,
            cnt: bno + 1,
            ino,
            fino,
            rmap,
            refc,
        }
    }
}

/// Extra used extents of AG 0 beyond the static layout: the root chunk and
/// the realtime bitmap and summary blocks, as (start, len, rmap owner,
/// offset) — the caller decides where the realtime files go.
pub fn layout(p: &Plan, agno: u32, ag0_extra: &[(u32, u32, u64, u64)]) -> AgSpace {
    let len = p.ag_len(agno);
    let r = Roots::of(p);
    let mut used: Vec<(u32, u32, u64, u64)> = Vec::new();
    used.push((0, r.bno, OWN_FS, 0));
    used.push((r.bno, 2, OWN_AG, 0));
    used.push((r.ino, 1 + u32::from(r.fino.is_some()), OWN_INOBT, 0));
    if let Some(b) = r.rmap {
        used.push((b, 1, OWN_AG, 0));
    }
    if let Some(b) = r.refc {
        used.push((b, 1, OWN_REFC, 0));
    }
    let mut free_start = p.prealloc_blocks;
    if agno == p.logagno {
        used.push((p.log_agbno, p.logblocks, OWN_LOG, 0));
        free_start = p.log_agbno + p.logblocks;
    }
    // The AGFL is filled first, from the start of the AG's free space.
    let agfl: Vec<u32> = (free_start..free_start + p.agfl_fill).collect();
    used.push((free_start, p.agfl_fill, OWN_AG, 0));
    let mut chunks = Vec::new();
    if agno == 0 {
        used.extend_from_slice(ag0_extra);
        let inopblog = p.blocklog - p.inodelog;
        for c in 0..p.chunk_inodes / 64 {
            let agino = (p.chunk_agbno << inopblog) + c * 64;
            // The first chunk holds the root directory and the two realtime
            // inodes.
            let mask = if c == 0 { !0u64 << 3 } else { !0u64 };
            chunks.push((agino, mask));
        }
    }
    used.sort_unstable();
    // Free space: the complement of `used`.
    let mut free = Vec::new();
    let mut at = 0;
    for &(s, l, _, _) in &used {
        debug_assert!(s >= at, "overlapping AG pieces in AG {agno}: {used:?}");
        if s > at {
            free.push((at, s - at));
        }
        at = at.max(s + l);
    }
    if at < len {
        free.push((at, len - at));
    }
    // Reverse mappings: adjacent pieces of the same non-inode owner merge,
    // as the kernel's rmap code merges them.
    let mut rmaps: Vec<(u32, u32, u64, u64)> = Vec::new();
    for u in used {
        if let Some(last) = rmaps.last_mut() {
            if last.2 == u.2 && last.2 >= OWN_REFC && last.0 + last.1 == u.0 {
                last.1 += u.1;
                continue;
            }
        }
        rmaps.push(u);
    }
    AgSpace {
        agno,
        len,
        agfl,
        free,
        rmaps,
        chunks,
    }
}

fn block_header(p: &Plan, kind: BtreeKind, agno: u32, agbno: u32, numrecs: usize, buf: &mut [u8]) {
    let daddr = p.byte(agno, agbno) >> 9;
    SBlockHdr {
        magic: kind.magic(),
        level: 0,
        numrecs: numrecs as u16,
        leftsib: NULL32,
        rightsib: NULL32,
        blkno: daddr,
        lsn: 0,
        uuid: p.uuid,
        owner: agno,
    }
    .encode(buf);
}

/// One btree root leaf holding `recs` (already encoded, in order).
fn leaf(p: &Plan, kind: BtreeKind, agno: u32, agbno: u32, recs: &[Vec<u8>]) -> Vec<u8> {
    let mut b = vec![0u8; p.blocksize as usize];
    block_header(p, kind, agno, agbno, recs.len(), &mut b);
    let hdr = crate::format::btree::SBLOCK_HDR_SIZE;
    for (i, r) in recs.iter().enumerate() {
        let at = hdr + i * kind.rec_size();
        b[at..at + r.len()].copy_from_slice(r);
    }
    crc::update(&mut b, SBLOCK_CRC_OFF);
    b
}

fn alloc_rec(start: u32, len: u32) -> Vec<u8> {
    let mut r = vec![0u8; BtreeKind::Bno.rec_size()];
    AllocRec { start, len }.encode(&mut r);
    r
}

/// A full chunk (no holes) with the inodes of `free` free.
fn inobt_rec(p: &Plan, startino: u32, free: u64) -> Vec<u8> {
    let mut r = vec![0u8; BtreeKind::Ino.rec_size()];
    InobtRec {
        startino,
        holemask: 0,
        count: 64,
        freecount: free.count_ones(),
        free,
    }
    .encode(&mut r, p.features.sparse);
    r
}

/// The blocks of AG `s.agno` to write: (byte offset, bytes). Sector-sized
/// headers are padded to a sector.
pub fn encode(p: &Plan, s: &AgSpace) -> Vec<(u64, Vec<u8>)> {
    let r = Roots::of(p);
    let ss = p.sectsize as usize;
    let base = p.byte(s.agno, 0);
    let mut out = Vec::new();
    let freeblks: u32 = s.free.iter().map(|f| f.1).sum();
    let longest = s.free.iter().map(|f| f.1).max().unwrap_or(0);

    // AGF.
    let mut agf = vec![0u8; ss];
    put_be32(&mut agf, 0, AGF_MAGIC);
    put_be32(&mut agf, 4, AG_VERSION);
    put_be32(&mut agf, 8, s.agno);
    put_be32(&mut agf, 12, s.len);
    put_be32(&mut agf, 16, r.bno);
    put_be32(&mut agf, 20, r.cnt);
    put_be32(&mut agf, 24, r.rmap.unwrap_or(0));
    put_be32(&mut agf, 28, 1);
    put_be32(&mut agf, 32, 1);
    put_be32(&mut agf, 36, u32::from(r.rmap.is_some()));
    put_be32(&mut agf, 40, 1); // flfirst
    put_be32(&mut agf, 44, s.agfl.len() as u32); // fllast
    put_be32(&mut agf, 48, s.agfl.len() as u32); // flcount
    put_be32(&mut agf, 52, freeblks);
    put_be32(&mut agf, 56, longest);
    put_be32(&mut agf, 60, 0); // btreeblks
    agf[64..80].copy_from_slice(&p.uuid);
    put_be32(&mut agf, 80, u32::from(r.rmap.is_some())); // rmap_blocks
    put_be32(&mut agf, 84, u32::from(r.refc.is_some())); // refcount_blocks
    put_be32(&mut agf, 88, r.refc.unwrap_or(0));
    put_be32(&mut agf, 92, u32::from(r.refc.is_some()));
    crc::update(&mut agf, AGF_CRC_OFF);
    out.push((base + ss as u64, agf));

    // AGI.
    let mut agi = vec![0u8; ss];
    let count: u32 = s.chunks.len() as u32 * 64;
    let ifree: u32 = s.chunks.iter().map(|c| c.1.count_ones()).sum();
    put_be32(&mut agi, 0, AGI_MAGIC);
    put_be32(&mut agi, 4, AG_VERSION);
    put_be32(&mut agi, 8, s.agno);
    put_be32(&mut agi, 12, s.len);
    put_be32(&mut agi, 16, count);
    put_be32(&mut agi, 20, r.ino);
    put_be32(&mut agi, 24, 1);
    put_be32(&mut agi, 28, ifree);
    put_be32(&mut agi, 32, s.chunks.first().map_or(NULL32, |c| c.0));
    put_be32(&mut agi, 36, NULL32); // dirino
    for b in 0..64 {
        put_be32(&mut agi, 40 + 4 * b, NULL32);
    }
    agi[296..312].copy_from_slice(&p.uuid);
    put_be32(&mut agi, 328, r.fino.unwrap_or(0));
    put_be32(&mut agi, 332, u32::from(r.fino.is_some()));
    if p.features.inobtcount {
        put_be32(&mut agi, 336, 1);
        put_be32(&mut agi, 340, u32::from(r.fino.is_some()));
    }
    crc::update(&mut agi, AGI_CRC_OFF);
    out.push((base + 2 * ss as u64, agi));

    // AGFL: entries from index 1 (the kernel's empty list starts with
    // flfirst 1, fllast 0, and each put advances fllast first).
    let mut agfl = vec![0u8; ss];
    put_be32(&mut agfl, 0, AGFL_MAGIC);
    put_be32(&mut agfl, 4, s.agno);
    agfl[8..24].copy_from_slice(&p.uuid);
    let slots = (ss - 36) / 4;
    for i in 0..slots {
        put_be32(&mut agfl, 36 + 4 * i, NULL32);
    }
    for (i, b) in s.agfl.iter().enumerate() {
        put_be32(&mut agfl, 36 + 4 * (i + 1), *b);
    }
    crc::update(&mut agfl, AGFL_CRC_OFF);
    out.push((base + 3 * ss as u64, agfl));

    // Free space btrees.
    let by_bno: Vec<Vec<u8>> = s.free.iter().map(|&(a, l)| alloc_rec(a, l)).collect();
    let mut sized = s.free.clone();
    sized.sort_unstable_by_key(|&(a, l)| (l, a));
    let by_cnt: Vec<Vec<u8>> = sized.iter().map(|&(a, l)| alloc_rec(a, l)).collect();
    let blk = |agbno: u32| p.byte(s.agno, agbno);
    out.push((blk(r.bno), leaf(p, BtreeKind::Bno, s.agno, r.bno, &by_bno)));
    out.push((blk(r.cnt), leaf(p, BtreeKind::Cnt, s.agno, r.cnt, &by_cnt)));

    // Inode btrees.
    let inos: Vec<Vec<u8>> = s.chunks.iter().map(|&(a, m)| inobt_rec(p, a, m)).collect();
    out.push((blk(r.ino), leaf(p, BtreeKind::Ino, s.agno, r.ino, &inos)));
    if let Some(b) = r.fino {
        let free: Vec<Vec<u8>> = s
            .chunks
            .iter()
            .filter(|c| c.1 != 0)
            .map(|&(a, m)| inobt_rec(p, a, m))
            .collect();
        out.push((blk(b), leaf(p, BtreeKind::Fino, s.agno, b, &free)));
    }
    if let Some(b) = r.rmap {
        let recs: Vec<Vec<u8>> = s
            .rmaps
            .iter()
            .map(|&(start, len, owner, offset)| {
                let mut r = vec![0u8; BtreeKind::Rmap.rec_size()];
                RmapRec {
                    start,
                    len,
                    owner,
                    offset,
                    attr_fork: false,
                    bmbt_block: false,
                    unwritten: false,
                    unknown_bits: 0,
                }
                .encode(&mut r);
                r
            })
            .collect();
        out.push((blk(b), leaf(p, BtreeKind::Rmap, s.agno, b, &recs)));
    }
    if let Some(b) = r.refc {
        out.push((blk(b), leaf(p, BtreeKind::Refcount, s.agno, b, &[])));
    }
    out
}
