//! Structural fields of directory data blocks, directory leaf blocks and
//! attribute leaf blocks, found by parsing the pristine block.

use rxfs::format::{be16, be32, be64};

use crate::classify::Kind;
use crate::mutate::{f, fx, Ctx, Field};

/// Entries looked at per block at most (the rng picks among them).
const MAX_ENTRIES: usize = 16;

/// Directory data block (XDB3 / XDD3): 64-byte header with bestfree[3] at
/// 48, entries from 64; block form ends with leaf entries and a tail
/// {count u32, stale u32}.
pub fn data_fields(ctx: &Ctx, b: &[u8], _dablk: u64) -> Vec<Field> {
    let bs = b.len();
    let owner = be64(b, 40);
    let block_form = &b[0..4] == b"XDB3";
    let mut v = Vec::new();
    for i in 0..3 {
        v.push(fx(
            48 + 4 * i,
            2,
            "bestfree offset",
            &[0, 1, bs as u64, bs as u64 - 2],
        ));
        v.push(fx(50 + 4 * i, 2, "bestfree length", &[bs as u64, 0xffff]));
    }
    let mut end = bs;
    if block_form {
        let count = be32(b, bs - 8) as usize;
        v.push(fx(
            bs - 8,
            4,
            "block tail count",
            &[0, 0xffff_ffff, bs as u64 / 8],
        ));
        v.push(fx(
            bs - 4,
            4,
            "block tail stale",
            &[count as u64 + 1, 0xffff_ffff],
        ));
        let leaf = (bs - 8).saturating_sub(count * 8);
        if leaf >= 64 {
            end = leaf;
            for i in 0..count.min(MAX_ENTRIES) {
                v.push(f(leaf + 8 * i, 4, "block leaf hash"));
                v.push(fx(
                    leaf + 8 * i + 4,
                    4,
                    "block leaf address",
                    &[0, 1, bs as u64 / 8, 0xffff_ffff],
                ));
            }
        }
    }
    let inos = [0, owner, ctx.rootino, 1 << 40, (ctx.agcount << 36) | 128];
    let mut off = 64;
    let mut n = 0;
    while off + 8 <= end && n < MAX_ENTRIES {
        n += 1;
        if be16(b, off) == 0xffff {
            let len = be16(b, off + 2) as usize;
            v.push(fx(
                off + 2,
                2,
                "unused length",
                &[0, 1, 7, bs as u64, 0xfff8],
            ));
            if len < 8 || off + len > end {
                break;
            }
            v.push(fx(off + len - 2, 2, "unused tag", &[0, bs as u64]));
            off += len;
        } else {
            let nl = b[off + 8] as usize;
            let esz = (8 + 1 + nl + ctx.ftype as usize + 2).next_multiple_of(8);
            v.push(fx(off, 8, "entry inumber", &inos));
            v.push(fx(
                off + 8,
                1,
                "entry namelen",
                &[0, 255, (end - off) as u64],
            ));
            if off + esz > end {
                break;
            }
            if ctx.ftype {
                v.push(fx(off + 9 + nl, 1, "entry ftype", &[0, 8, 255]));
            }
            v.push(fx(off + esz - 2, 2, "entry tag", &[0, 1, bs as u64]));
            off += esz;
        }
    }
    v
}

/// Directory leaf1 (0x3df1) / leafn (0x3dff): DA blkinfo, count u16 @56,
/// stale u16 @58, entries {hashval, address} @64; leaf1 ends with bests[]
/// and a bestcount u32.
pub fn leaf_fields(kind: Kind, b: &[u8], dablk: u64, root: u64) -> Vec<Field> {
    let bs = b.len();
    let count = be16(b, 56) as u64;
    let mut v = vec![
        fx(0, 4, "forw", &[dablk, root, 1]),
        fx(4, 4, "back", &[dablk, root, 1]),
        fx(56, 2, "count", &[0, (bs as u64 - 64) / 8 + 1, 0xffff]),
        fx(58, 2, "stale", &[count + 1, 0xffff]),
    ];
    for i in 0..(count as usize).min((bs - 64) / 8).min(MAX_ENTRIES) {
        v.push(f(64 + 8 * i, 4, "leaf hashval"));
        v.push(fx(
            68 + 8 * i,
            4,
            "leaf address",
            &[0, 1 << 29, 0xffff_fffe, 7],
        ));
    }
    if kind == Kind::DirLeaf1 {
        let bestcount = be32(b, bs - 4) as usize;
        v.push(fx(bs - 4, 4, "bestcount", &[0, 0xffff_ffff, bs as u64 / 2]));
        let bests = (bs - 4).saturating_sub(2 * bestcount);
        for i in 0..bestcount.min(4) {
            if bests + 2 * i + 2 <= bs - 4 && bests >= 64 {
                v.push(fx(bests + 2 * i, 2, "best", &[0, bs as u64 + 8]));
            }
        }
    }
    v
}

/// Attribute leaf (0x3bee): DA blkinfo, count u16 @56, usedbytes @58,
/// firstused @60, holes u8 @62, freemap[3] {base, size} @64, entries
/// {hashval u32, nameidx u16, flags u8, pad} @80; names at nameidx: local
/// {valuelen u16, namelen u8, name, value}, remote {valueblk u32,
/// valuelen u32, namelen u8, name}.
pub fn attr_leaf_fields(b: &[u8], dablk: u64, root: u64) -> Vec<Field> {
    let bs = b.len();
    let bsz = bs as u64;
    let mut v = vec![
        fx(0, 4, "forw", &[dablk, root, 1]),
        fx(4, 4, "back", &[dablk, root, 1]),
        fx(56, 2, "count", &[0, (bsz - 80) / 8 + 1, 0xffff]),
        fx(58, 2, "usedbytes", &[0, bsz]),
        fx(60, 2, "firstused", &[0, 1, 80, bsz]),
        f(62, 1, "holes"),
    ];
    for i in 0..3 {
        v.push(fx(64 + 4 * i, 2, "freemap base", &[0, bsz, 0xffff]));
        v.push(fx(66 + 4 * i, 2, "freemap size", &[bsz, 0xffff]));
    }
    let count = (be16(b, 56) as usize).min((bs - 80) / 8);
    for i in 0..count.min(MAX_ENTRIES) {
        let e = 80 + 8 * i;
        v.push(f(e, 4, "attr hashval"));
        v.push(fx(e + 4, 2, "nameidx", &[0, 8, bsz - 1, bsz, 0xffff]));
        v.push(fx(e + 6, 1, "attr flags", &[0, 1, 0x80, 0xff]));
        let idx = be16(b, e + 4) as usize;
        if idx + 9 > bs {
            continue;
        }
        if b[e + 6] & 1 != 0 {
            v.push(fx(idx, 2, "local valuelen", &[0xffff, bsz]));
            v.push(fx(idx + 2, 1, "local namelen", &[0, 255]));
        } else {
            v.push(fx(idx, 4, "remote valueblk", &[0, 0xffff_ffff, 1 << 30]));
            v.push(fx(
                idx + 4,
                4,
                "remote valuelen",
                &[0, 65537, 1 << 30, 0xffff_ffff],
            ));
            v.push(fx(idx + 8, 1, "remote namelen", &[0, 255]));
        }
    }
    v
}
