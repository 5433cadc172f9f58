//! Seed corpora for the cargo-fuzz targets, cut from the fixture's real
//! metadata blocks: `RXFS_FUZZ_CORPUS=DIR cargo test --release --test
//! corruption` writes `DIR/<target>/<kind>-<offset>` files whose first
//! bytes are the control bytes each target of fuzz/fuzz_targets/ expects
//! (then `FUZZ_CORPUS_DIR=DIR scripts/fuzz-smoke`).

use std::collections::BTreeMap;
use std::path::Path;

use rxfs::format::{be16, be32};

use crate::classify::{Kind, Target};

/// Files per (target, kind) at most.
const PER_KIND: usize = 20;

/// Control byte of the block-sized targets: block size `512 << (ctl >> 5)`.
fn size_ctl(len: usize) -> u8 {
    ((len / 512).trailing_zeros() as u8) << 5
}

/// Selector of the `dir` target's control byte, for a kind.
fn dir_sel(k: Kind) -> Option<u8> {
    Some(match k {
        Kind::DirData(m) if m == u32::from_be_bytes(*b"XDB3") => 1,
        Kind::DirData(_) => 0,
        Kind::DirLeaf1 => 2,
        Kind::DirLeafN => 3,
        Kind::DirFree => 4,
        _ => return None,
    })
}

/// `blocklog` / `dirblklog`: the fixture's geometry (the `dir` and
/// `ag_btree` targets take it from their control byte).
pub fn write(dir: &Path, image: &[u8], targets: &[Target], blocklog: u8, dirblklog: u8) {
    let mut counts: BTreeMap<(&str, String), usize> = BTreeMap::new();
    for t in targets {
        let bytes = t.bytes(image);
        let b = &bytes[..];
        let mut files: Vec<(&str, Vec<u8>)> = Vec::new();
        let ctl = size_ctl(t.len);
        match t.kind {
            Kind::Sb => files.push(("sb", [&[0u8; 25][..], b].concat())),
            k if dir_sel(k).is_some() => {
                let c = ((blocklog - 9) << 6) | (dirblklog << 4) | (dir_sel(k).unwrap() << 1);
                files.push(("dir", [&[c, 0][..], b].concat()));
            }
            Kind::Agf | Kind::Agi | Kind::Agfl => {
                let sel = match t.kind {
                    Kind::Agf => 0,
                    Kind::Agi => 1,
                    _ => 2,
                };
                let c = ((blocklog - 10) << 4) | (sel << 1);
                files.push(("ag_btree", [&[c, 0x1c][..], b].concat()));
            }
            Kind::ShortBt(m) => {
                let idx = [b"AB3B", b"AB3C", b"IAB3", b"FIB3", b"RMB3", b"R3FC"]
                    .iter()
                    .position(|x| u32::from_be_bytes(**x) == m)
                    .unwrap_or(0) as u8;
                let c = ((blocklog - 10) << 4) | (3 << 1);
                files.push(("ag_btree", [&[c, (idx << 5) | 0x1c][..], b].concat()));
            }
            Kind::Inode => {
                files.push(("inode_core", [&[0u8][..], b].concat()));
                files.push(("fs_inode", [&[0u8][..], b].concat()));
                if b[5] == 1 && be16(b, 2) & 0o170000 == 0o040000 {
                    let size = (rxfs::format::be64(b, 56) as usize).min(b.len() - 176);
                    let c = ((blocklog - 9) << 6) | (dirblklog << 4) | (5 << 1);
                    files.push(("dir", [&[c, 0][..], &b[176..176 + size]].concat()));
                }
                let forkoff = b[82] as usize;
                if forkoff != 0 && b[83] == 1 {
                    let a = 176 + forkoff * 8;
                    files.push(("attr", [&[0u8; 9][..], &b[a..]].concat()));
                }
            }
            Kind::Bmbt => {
                let level = (b[5] & 3) << 1;
                files.push(("bmbt_block", [&[ctl | level][..], b].concat()));
            }
            Kind::DaNode => files.push(("da_node", [&[ctl][..], b].concat())),
            Kind::AttrLeaf => {
                files.push(("attr", [&[ctl | 2, 0, 0, 0, 0, 0, 0, 0, 0][..], b].concat()))
            }
            Kind::AttrRemote | Kind::Symlink => {
                let sel = if t.kind == Kind::Symlink {
                    3 << 1
                } else {
                    2 << 1
                };
                let mut head = vec![ctl | sel];
                head.extend_from_slice(&be32(b, 4).to_le_bytes());
                head.extend_from_slice(&be32(b, 8).to_le_bytes());
                files.push(("attr", [&head[..], b].concat()));
            }
            Kind::Log if be32(b, 0) == 0xfeed_babe => {
                let end = (t.offset as usize + (64 << 10)).min(image.len());
                files.push((
                    "log_record",
                    [&[0u8][..], &image[t.offset as usize..end]].concat(),
                ));
            }
            _ => {}
        }
        // Inodes: a few of each (file type, data fork format, attr format).
        let class = if t.kind == Kind::Inode {
            format!("Inode{:o}-{}-{}", b[2] >> 4, b[5], b[83])
        } else {
            t.kind.name()
        };
        for (target, data) in files {
            let n = counts.entry((target, class.clone())).or_default();
            if *n >= PER_KIND {
                continue;
            }
            *n += 1;
            let d = dir.join(target);
            std::fs::create_dir_all(&d).unwrap();
            let name = format!("{}-{:x}", t.kind.name(), t.offset);
            std::fs::write(d.join(name), data).unwrap();
        }
    }
    eprintln!("fuzz seed corpus written to {}: {counts:?}", dir.display());
}
