//! Structural fields of an on-disk inode: the core, and the contents of
//! both forks (extent records, bmbt roots, shortform directories, inline
//! symlinks, shortform attributes), found by parsing the pristine inode.

use rxfs::format::{be16, be32};

use crate::mutate::{f, fx, Ctx, Field};

const CORE: usize = 176;

pub fn inode_fields(ctx: &Ctx, b: &[u8], self_ino: u64) -> Vec<Field> {
    let isize = b.len();
    let forkoff = b[82] as usize;
    let dsize = if forkoff != 0 {
        forkoff * 8
    } else {
        isize - CORE
    };
    // nrext64 inodes keep a u64 data extent count at 24 and a u32 attr
    // extent count at 76; others a u32 at 76 and a u16 at 80.
    let nrext64 = rxfs::format::be64(b, 120) & (1 << 4) != 0;
    let (nextents, anextents) = if nrext64 {
        (rxfs::format::be64(b, 24), be32(b, 76) as u64)
    } else {
        (be32(b, 76) as u64, be16(b, 80) as u64)
    };
    let big = ctx.dblocks;
    let counts = if nrext64 {
        [
            fx(
                24,
                8,
                "nextents64",
                &[0, dsize as u64 / 16 + 1, 1 << 40, big + 1],
            ),
            fx(76, 4, "anextents32", &[0, 1, 0xffff_ffff]),
        ]
    } else {
        [
            fx(
                76,
                4,
                "nextents",
                &[0, dsize as u64 / 16 + 1, 1 << 31, big + 1],
            ),
            fx(80, 2, "anextents", &[0, 1, 0xffff]),
        ]
    };
    let mut v = vec![
        fx(
            2,
            2,
            "mode",
            &[0o100644, 0o40755, 0o120777, 0o20644, 0o170755, 0],
        ),
        fx(4, 1, "version", &[2, 4]),
        fx(5, 1, "format", &[0, 1, 2, 3, 4, 5]),
        f(16, 4, "nlink"),
        fx(
            56,
            8,
            "size",
            &[0, dsize as u64 + 1, 1 << 62, 1 << 63, 1 << 40],
        ),
        fx(64, 8, "nblocks", &[1 << 60]),
        fx(72, 4, "extsize", &[1 << 30]),
        fx(
            76,
            4,
            "nextents",
            &[0, dsize as u64 / 16 + 1, 1 << 31, big + 1],
        ),
        fx(80, 2, "anextents", &[0, 1, 0xffff]),
        fx(82, 1, "forkoff", &[0, 1, (isize - CORE) as u64 / 8, 255]),
        fx(83, 1, "aformat", &[0, 1, 2, 3, 4, 5]),
        fx(90, 2, "flags", &[1, 0xffff]),
        fx(120, 8, "flags2", &[1 << 4, 1 << 3, u64::MAX]),
        fx(96, 4, "next_unlinked", &[0, 128]),
        fx(152, 8, "ino", &[self_ino + 1, 0]),
    ];
    v.extend(counts);
    let mode = be16(b, 2) & 0o170000;
    fork_fields(
        &mut v,
        ctx,
        b,
        CORE,
        dsize,
        b[5],
        nextents,
        self_ino,
        Some(mode),
    );
    if forkoff != 0 {
        let a = CORE + forkoff * 8;
        if a < isize {
            fork_fields(
                &mut v,
                ctx,
                b,
                a,
                isize - a,
                b[83],
                anextents,
                self_ino,
                None,
            );
        }
    }
    v
}

#[allow(clippy::too_many_arguments)]
fn fork_fields(
    v: &mut Vec<Field>,
    ctx: &Ctx,
    b: &[u8],
    at: usize,
    size: usize,
    format: u8,
    nextents: u64,
    self_ino: u64,
    data_mode: Option<u16>,
) {
    match format {
        2 => {
            let n = (nextents as usize).min(size / 16);
            for i in 0..n.min(12) {
                v.push(f(at + 16 * i, 16, "fork extent"));
            }
        }
        3 if size >= 4 => {
            let maxrecs = (size - 4) / 16;
            v.push(fx(at, 2, "bmdr level", &[0, 1, 2, 10, 0xffff]));
            v.push(fx(
                at + 2,
                2,
                "bmdr numrecs",
                &[0, maxrecs as u64 + 1, 0xffff],
            ));
            let n = (be16(b, at + 2) as usize).min(maxrecs);
            // Pointing a second child at the first one's block: a shared
            // subtree (a cycle for a walker that does not remember blocks).
            let first = if n > 0 {
                rxfs::format::be64(b, at + 4 + maxrecs * 8)
            } else {
                0
            };
            for i in 0..n {
                v.push(fx(at + 4 + 8 * i, 8, "bmdr key", &[1 << 53]));
                v.push(fx(
                    at + 4 + maxrecs * 8 + 8 * i,
                    8,
                    "bmdr ptr",
                    &[0, ctx.dblocks, 1 << 40, u64::MAX, first],
                ));
            }
        }
        1 => match data_mode {
            Some(0o040000) => sf_dir_fields(v, ctx, b, at, size, self_ino),
            Some(_) => {}
            None => sf_attr_fields(v, b, at, size),
        },
        _ => {}
    }
}

/// Shortform directory: count u8, i8count u8, parent (4 or 8 bytes), then
/// entries {namelen u8, offset u16, name, [ftype u8], ino (4 or 8)}.
fn sf_dir_fields(v: &mut Vec<Field>, ctx: &Ctx, b: &[u8], at: usize, size: usize, ino: u64) {
    let end = at + size;
    let count = b[at] as usize;
    let i8 = b[at + 1] != 0;
    let isz = if i8 { 8 } else { 4 };
    let inos = [0, ino, ctx.rootino, 1 << 40, (ctx.agcount << 36) | 128];
    v.push(fx(at, 1, "sf count", &[0, 255, count as u64 + 1]));
    v.push(fx(at + 1, 1, "sf i8count", &[1, 255]));
    v.push(fx(at + 2, isz, "sf parent", &inos));
    let mut off = at + 2 + isz;
    for _ in 0..count {
        if off + 3 > end {
            break;
        }
        let nl = b[off] as usize;
        v.push(fx(off, 1, "sf namelen", &[0, 255, (end - off) as u64]));
        v.push(fx(off + 1, 2, "sf offset", &[0, 0xffff, 8]));
        let mut p = off + 3 + nl;
        if ctx.ftype {
            if p >= end {
                break;
            }
            v.push(fx(p, 1, "sf ftype", &[0, 9, 255]));
            p += 1;
        }
        if p + isz > end {
            break;
        }
        v.push(fx(p, isz, "sf ino", &inos));
        off = p + isz;
    }
}

/// Shortform attributes: totsize u16, count u8, pad, then entries
/// {namelen u8, valuelen u8, flags u8, name, value}.
fn sf_attr_fields(v: &mut Vec<Field>, b: &[u8], at: usize, size: usize) {
    if size < 4 {
        return;
    }
    let end = at + size;
    v.push(fx(
        at,
        2,
        "sf attr totsize",
        &[0, 3, size as u64 + 1, 0xffff],
    ));
    v.push(fx(at + 2, 1, "sf attr count", &[0, 255]));
    let mut off = at + 4;
    for _ in 0..b[at + 2] {
        if off + 3 > end {
            break;
        }
        v.push(fx(off, 1, "sf attr namelen", &[0, 255]));
        v.push(fx(off + 1, 1, "sf attr valuelen", &[255]));
        v.push(fx(off + 2, 1, "sf attr flags", &[0, 0x80, 0xff]));
        off += 3 + b[off] as usize + b[off + 1] as usize;
    }
}
