//! Seeded mutations of one metadata block.
//!
//! Classes: (a) flip random bytes, CRC left stale; (b) bad magic (CRC left
//! stale or recomputed, sometimes the magic of a sibling structure so the
//! type check itself is exercised); (c) change one structural field to a
//! hostile value and RECOMPUTE the CRC, so the verifier's structural checks
//! and the decoders' bounds are what must hold; (d) zero the whole block.

use rxfs::format::bmbt::Extent;
use rxfs::format::{be16, be32, be64, crc};
use rxfs::types::FileBlock;

use crate::classify::{Kind, Target};

/// SplitMix64: one seed, one sequence, on every platform and rand version.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x5851_f42d_4c95_7f2d)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in 0..n (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Flip,
    Magic,
    Field,
    Zero,
}

impl Class {
    /// Whether the walk must report corruption when it reads the block.
    pub fn must_detect(self) -> bool {
        self != Class::Field
    }
}

/// Facts about the image the mutations need.
pub struct Ctx {
    pub agblocks: u64,
    pub agcount: u64,
    pub dblocks: u64,
    pub rootino: u64,
    pub ftype: bool,
}

/// A field: byte offset in the block, width in bytes (1, 2, 4, 8), name,
/// and values worth trying beyond the generic ones.
pub struct Field {
    pub off: usize,
    pub width: usize,
    pub name: String,
    pub extra: Vec<u64>,
}

pub fn f(off: usize, width: usize, name: &str) -> Field {
    Field {
        off,
        width,
        name: name.into(),
        extra: vec![],
    }
}

pub fn fx(off: usize, width: usize, name: &str, extra: &[u64]) -> Field {
    Field {
        off,
        width,
        name: name.into(),
        extra: extra.to_vec(),
    }
}

fn get(b: &[u8], off: usize, width: usize) -> u64 {
    match width {
        1 => b[off] as u64,
        2 => be16(b, off) as u64,
        4 => be32(b, off) as u64,
        _ => be64(b, off),
    }
}

fn put(b: &mut [u8], off: usize, width: usize, v: u64) {
    let bytes = v.to_be_bytes();
    b[off..off + width].copy_from_slice(&bytes[8 - width..]);
}

/// Apply one seeded mutation to `block` (a copy of the target's bytes).
/// Returns a description.
pub fn mutate(rng: &mut Rng, t: &Target, ctx: &Ctx, block: &mut [u8], class: Class) -> String {
    match class {
        Class::Flip => {
            let n = 1 + rng.below(4);
            let mut at = Vec::new();
            for _ in 0..n {
                let i = rng.below(block.len());
                block[i] ^= 1 + rng.below(255) as u8;
                at.push(i);
            }
            format!("flip bytes at {at:?}")
        }
        Class::Magic => {
            let Some((off, width)) = t.kind.magic_field() else {
                return mutate(rng, t, ctx, block, Class::Flip);
            };
            let cur = get(block, off, width);
            let sibling = sibling_magic(cur, width);
            let v = match sibling {
                Some(s) if rng.below(3) == 0 => s,
                _ => cur ^ (1 + rng.next() % ((1u64 << (8 * width)) - 1)),
            };
            put(block, off, width, v);
            let fix = rng.below(2) == 0;
            if fix {
                if let Some(c) = t.kind.crc_off() {
                    crc::update(block, c);
                }
            }
            format!(
                "magic {cur:#x} -> {v:#x}, crc {}",
                if fix { "recomputed" } else { "stale" }
            )
        }
        Class::Zero => {
            block.fill(0);
            "zero block".into()
        }
        Class::Field => {
            let fields = fields(t, ctx, block);
            if fields.is_empty() {
                return mutate(rng, t, ctx, block, Class::Flip);
            }
            let fld = rng.pick(&fields);
            let desc = match fld.width {
                // Width 16: a whole extent record, mutated through its decoder.
                16 => mutate_extent(rng, ctx, block, fld.off),
                w => {
                    let cur = get(block, fld.off, w);
                    let max = if w == 8 {
                        u64::MAX
                    } else {
                        (1u64 << (8 * w)) - 1
                    };
                    let mut cands = vec![
                        0,
                        max,
                        cur.wrapping_add(1) & max,
                        cur.wrapping_sub(1) & max,
                        cur ^ (1 << rng.below(8 * w)),
                        rng.next() & max,
                        (cur << 1) & max,
                    ];
                    cands.extend(fld.extra.iter().map(|v| v & max));
                    // Hostile values are the point: prefer the extras.
                    let v = if !fld.extra.is_empty() && rng.below(2) == 0 {
                        *rng.pick(&fld.extra) & max
                    } else {
                        *rng.pick(&cands)
                    };
                    put(block, fld.off, w, v);
                    format!("{} @{} {cur:#x} -> {v:#x}", fld.name, fld.off)
                }
            };
            if let Some(c) = t.kind.crc_off() {
                if t.kind != Kind::Log {
                    crc::update(block, c);
                }
            }
            desc + ", crc recomputed"
        }
    }
}

fn sibling_magic(cur: u64, width: usize) -> Option<u64> {
    let pairs: [(&[u8], &[u8]); 5] = [
        (b"AB3B", b"AB3C"),
        (b"IAB3", b"FIB3"),
        (b"XDB3", b"XDD3"),
        (b"XDD3", b"XDF3"),
        (b"RMB3", b"R3FC"),
    ];
    if width == 2 {
        return match cur {
            0x3df1 => Some(0x3dff),
            0x3dff => Some(0x3df1),
            0x3ebe => Some(0x3bee),
            0x3bee => Some(0x3ebe),
            _ => None,
        };
    }
    for (a, b) in pairs {
        let (a, b) = (be32(a, 0) as u64, be32(b, 0) as u64);
        if cur == a {
            return Some(b);
        }
        if cur == b {
            return Some(a);
        }
    }
    None
}

fn mutate_extent(rng: &mut Rng, ctx: &Ctx, b: &mut [u8], off: usize) -> String {
    let mut e = Extent::decode(&b[off..]);
    let old = e;
    let agsz = 1u64 << (64 - (ctx.agblocks - 1).leading_zeros());
    match rng.below(8) {
        0 => e.start = ctx.agcount * agsz + 3, // AG past the end
        1 => e.start = agsz - 1,               // block past the AG's end
        2 => e.len = 0,
        3 => e.len = (1 << 21) - 1,
        4 => e.off = FileBlock(0),             // overlaps earlier extents
        5 => e.off = FileBlock((1 << 54) - 2), // past the largest offset
        6 => e.unwritten = !e.unwritten,
        _ => e.start = rng.next() & ((1 << 52) - 1),
    }
    e.encode(&mut b[off..]);
    format!("extent @{off} {old:?} -> {e:?}")
}

/// Structural fields of a block, found by parsing the pristine bytes.
fn fields(t: &Target, ctx: &Ctx, b: &[u8]) -> Vec<Field> {
    let bs = b.len();
    let sa = t.self_addr.unwrap_or(0);
    let ra = t.root_addr.unwrap_or(sa);
    let agb = ctx.agblocks;
    match t.kind {
        Kind::Sb => sb_fields(ctx),
        Kind::Agf => {
            let mut v = vec![f(4, 4, "versionnum"), fx(8, 4, "seqno", &[ctx.agcount])];
            v.push(fx(12, 4, "length", &[agb + 1, agb * 2]));
            for (i, n) in ["bno_root", "cnt_root", "rmap_root"].iter().enumerate() {
                v.push(fx(16 + 4 * i, 4, n, &[0, 1, agb, agb - 1]));
                v.push(fx(28 + 4 * i, 4, "level", &[0, 6, 10, 0xffff]));
            }
            for (o, n) in [(40, "flfirst"), (44, "fllast"), (48, "flcount")] {
                v.push(fx(o, 4, n, &[118, 119, 120, 1000]));
            }
            v.extend([
                f(52, 4, "freeblks"),
                f(56, 4, "longest"),
                f(60, 4, "btreeblks"),
            ]);
            v.push(fx(88, 4, "refcount_root", &[0, agb]));
            v.push(fx(92, 4, "refcount_level", &[0, 9, 100]));
            v.push(f(80, 4, "rmap_blocks"));
            v.push(f(84, 4, "refcount_blocks"));
            v
        }
        Kind::Agi => {
            let mut v = vec![f(4, 4, "versionnum"), fx(8, 4, "seqno", &[ctx.agcount])];
            v.push(fx(12, 4, "length", &[agb + 1]));
            v.extend([f(16, 4, "count"), f(28, 4, "freecount")]);
            v.push(fx(20, 4, "root", &[0, 2, agb]));
            v.push(fx(24, 4, "level", &[0, 6, 10]));
            v.push(fx(32, 4, "newino", &[0, agb << 3]));
            v.push(fx(36, 4, "dirino", &[0]));
            for i in [0usize, 7, 63] {
                v.push(fx(40 + 4 * i, 4, "unlinked", &[128, agb << 4]));
            }
            v.push(fx(328, 4, "free_root", &[0, 3, agb]));
            v.push(fx(332, 4, "free_level", &[0, 6, 10]));
            v.extend([f(336, 4, "iblocks"), f(340, 4, "fblocks")]);
            v
        }
        Kind::Agfl => {
            let mut v = vec![fx(4, 4, "seqno", &[ctx.agcount])];
            for i in [0usize, 1, 5, 118] {
                v.push(fx(36 + 4 * i, 4, "agfl slot", &[agb, 0, 0xffff_ffff]));
            }
            v
        }
        Kind::ShortBt(m) => short_bt_fields(m, b, sa, ra, agb),
        Kind::Bmbt => {
            let mut v = vec![
                fx(4, 2, "level", &[0, 1, 9, 0xffff]),
                fx(6, 2, "numrecs", &[0, (bs / 16) as u64, 0xffff]),
                fx(8, 8, "leftsib", &[sa, ctx.dblocks]),
                fx(16, 8, "rightsib", &[sa, ctx.dblocks]),
                f(24, 8, "blkno"),
                fx(56, 8, "owner", &[ctx.rootino]),
            ];
            let n = (be16(b, 6) as usize).min((bs - 72) / 16);
            if be16(b, 4) == 0 {
                for i in 0..n.min(8) {
                    v.push(f(72 + 16 * i, 16, "extent"));
                }
            } else {
                let maxrecs = (bs - 72) / 16;
                for i in 0..n.min(8) {
                    v.push(fx(72 + 8 * i, 8, "key", &[1 << 53]));
                    v.push(fx(
                        72 + maxrecs * 8 + 8 * i,
                        8,
                        "ptr",
                        &[sa, 0, ctx.dblocks],
                    ));
                }
            }
            v
        }
        Kind::Inode => crate::mutate_inode::inode_fields(ctx, b, sa),
        Kind::DirData(_) => crate::mutate_dir::data_fields(ctx, b, sa),
        Kind::DirFree => {
            let mut v = vec![
                fx(48, 4, "firstdb", &[1 << 30, 0xffff_ffff]),
                fx(52, 4, "nvalid", &[(bs / 2) as u64, 0xffff_ffff]),
                fx(56, 4, "nused", &[(bs / 2) as u64]),
            ];
            let n = (be32(b, 52) as usize).min((bs - 64) / 2);
            for i in 0..n.min(4) {
                v.push(fx(64 + 2 * i, 2, "best", &[bs as u64 + 8]));
            }
            v
        }
        Kind::DaNode => {
            let mut v = vec![
                fx(0, 4, "forw", &[sa, ra]),
                fx(4, 4, "back", &[sa, ra]),
                fx(56, 2, "count", &[0, ((bs - 64) / 8 + 1) as u64, 0xffff]),
                fx(58, 2, "level", &[0, 1, 5, 6, 0xffff]),
            ];
            let n = (be16(b, 56) as usize).min((bs - 64) / 8);
            for i in 0..n.min(8) {
                v.push(f(64 + 8 * i, 4, "hashval"));
                v.push(fx(68 + 8 * i, 4, "before", &[sa, ra, 0, 1 << 31]));
            }
            v
        }
        Kind::DirLeaf1 | Kind::DirLeafN => crate::mutate_dir::leaf_fields(t.kind, b, sa, ra),
        Kind::AttrLeaf => crate::mutate_dir::attr_leaf_fields(b, sa, ra),
        // Remote value and symlink blocks: magic, offset, bytes, crc,
        // uuid @16, owner @32, blkno @40, lsn @48.
        Kind::AttrRemote | Kind::Symlink => vec![
            fx(4, 4, "offset", &[1, 1 << 16, 0xffff_ffff]),
            fx(8, 4, "bytes", &[0, bs as u64, 0xffff_ffff]),
            f(32, 8, "owner"),
            f(40, 8, "blkno"),
        ],
        Kind::Log => {
            if be32(b, 0) != 0xfeed_babe {
                return vec![f(0, 4, "cycle")];
            }
            vec![
                f(4, 4, "cycle"),
                fx(12, 4, "len", &[0, 1 << 30]),
                f(16, 8, "lsn"),
                f(24, 8, "tail_lsn"),
                f(36, 4, "prev_block"),
                fx(40, 4, "num_logops", &[0xffff_ffff]),
                fx(320, 4, "size", &[0, 1 << 31]),
            ]
        }
    }
}

fn sb_fields(ctx: &Ctx) -> Vec<Field> {
    let mut v = vec![
        fx(4, 4, "blocksize", &[1024, 65536, 1 << 20]),
        fx(8, 8, "dblocks", &[ctx.dblocks + 1, ctx.dblocks * 4]),
        fx(16, 8, "rblocks", &[1 << 20]),
        fx(48, 8, "logstart", &[ctx.dblocks, 0]),
        fx(56, 8, "rootino", &[0, 129, 64, 1 << 40]),
        fx(80, 4, "rextsize", &[0]),
        fx(84, 4, "agblocks", &[ctx.agblocks * 2, 63, 1 << 31]),
        fx(88, 4, "agcount", &[ctx.agcount + 1, 1 << 31]),
        fx(96, 4, "logblocks", &[0, 1 << 30]),
        fx(100, 2, "versionnum", &[0xb4a4, 0xb4a5 & !0x8000]),
        fx(102, 2, "sectsize", &[4096, 1 << 15, 3]),
        fx(104, 2, "inodesize", &[256, 1024, 2048, 4096]),
        fx(106, 2, "inopblock", &[16, 4]),
        fx(120, 1, "blocklog", &[10, 16, 63]),
        fx(121, 1, "sectlog", &[12, 63]),
        fx(122, 1, "inodelog", &[8, 10, 63]),
        fx(123, 1, "inopblog", &[4, 2, 63]),
        fx(124, 1, "agblklog", &[31, 32, 63]),
        f(128, 8, "icount"),
        f(136, 8, "ifree"),
        f(144, 8, "fdblocks"),
        fx(180, 4, "inoalignmt", &[0, 1 << 20]),
        fx(192, 1, "dirblklog", &[1, 4, 200]),
        fx(193, 1, "logsectlog", &[63]),
        fx(194, 2, "logsectsize", &[3, 1 << 15]),
        f(200, 4, "features2"),
        fx(212, 4, "ro_compat", &[0xffff_ffff, 1 << 31]),
        fx(216, 4, "incompat", &[1 << 4, 1 << 9, 1 << 30]),
        fx(220, 4, "log_incompat", &[1, 1 << 31]),
        fx(228, 4, "spino_align", &[0, 1 << 20]),
        fx(64, 8, "rbmino", &[0, 1 << 40]),
        fx(72, 8, "rsumino", &[0, 1 << 40]),
        f(160, 8, "uquotino"),
        f(232, 8, "pquotino"),
        f(184, 4, "unit"),
        f(188, 4, "width"),
        f(92, 4, "rbmblocks"),
    ];
    v.retain(|x| x.off + x.width <= 512);
    v
}

fn short_bt_fields(magic: u32, b: &[u8], sa: u64, ra: u64, agb: u64) -> Vec<Field> {
    let bs = b.len();
    let mm = magic.to_be_bytes();
    // (record size, key size: rmap nodes keep low and high keys)
    let (rec, key) = match &mm {
        b"IAB3" | b"FIB3" => (16, 4),
        b"RMB3" => (24, 40),
        b"R3FC" => (12, 4),
        _ => (8, 8),
    };
    let mut v = vec![
        fx(4, 2, "level", &[0, 1, 9, 0xffff]),
        fx(6, 2, "numrecs", &[0, (bs / rec) as u64, 0xffff]),
        fx(8, 4, "leftsib", &[sa, agb, 0]),
        fx(12, 4, "rightsib", &[sa, agb, 0]),
        f(16, 8, "blkno"),
        fx(48, 4, "owner (agno)", &[1, 1 << 20]),
    ];
    let level = be16(b, 4);
    let nrecs = be16(b, 6) as usize;
    if level == 0 {
        let n = nrecs.min((bs - 56) / rec);
        for i in 0..n.min(8) {
            let o = 56 + i * rec;
            match &mm {
                b"IAB3" | b"FIB3" => {
                    v.push(fx(o, 4, "startino", &[0, agb << 4, 0xffff_ffc0]));
                    v.push(fx(o + 4, 2, "holemask", &[0xffff, 0x00ff]));
                    v.push(fx(o + 6, 1, "count", &[0, 65, 255]));
                    v.push(fx(o + 7, 1, "freecount", &[65, 255]));
                    v.push(f(o + 8, 8, "free mask"));
                }
                _ => {
                    v.push(fx(o, 4, "startblock", &[agb, agb - 1, 0]));
                    v.push(fx(o + 4, 4, "blockcount", &[0, agb, 1 << 31]));
                    if rec > 8 {
                        v.push(f(o + 8, 4, "rec field 3"));
                    }
                }
            }
        }
    } else {
        let maxrecs = (bs - 56) / (key + 4);
        let n = nrecs.min(maxrecs);
        for i in 0..n.min(8) {
            v.push(f(56 + i * key, 4, "key"));
            v.push(fx(
                56 + maxrecs * key + 4 * i,
                4,
                "ptr",
                &[sa, ra, 0, agb, 1],
            ));
        }
    }
    v
}
