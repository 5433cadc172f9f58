//! Seed corpora for the cargo-fuzz targets, cut from the fixture's real
//! metadata blocks: `RXFS_FUZZ_CORPUS=DIR cargo test --release --test
//! corruption` writes `DIR/<target>/<kind>-<offset>` files whose first
//! bytes are the control bytes each target of fuzz/fuzz_targets/ expects
//! (then `FUZZ_CORPUS_DIR=DIR scripts/fuzz-smoke`).

use std::collections::BTreeMap;
use std::path::Path;

use rxfs::format::be32;

use crate::classify::{Kind, Target};

/// Files per (target, kind) at most.
const PER_KIND: usize = 20;

/// Control byte of the block-sized targets: block size `512 << (ctl >> 5)`.
fn size_ctl(len: usize) -> u8 {
    ((len / 512).trailing_zeros() as u8) << 5
}

pub fn write(dir: &Path, image: &[u8], targets: &[Target]) {
    let mut counts: BTreeMap<(&str, String), usize> = BTreeMap::new();
    for t in targets {
        let bytes = t.bytes(image);
        let b = &bytes[..];
        let mut files: Vec<(&str, Vec<u8>)> = Vec::new();
        let ctl = size_ctl(t.len);
        match t.kind {
            Kind::Sb => files.push(("sb", [&[0u8; 25][..], b].concat())),
            Kind::Inode => {
                files.push(("inode_core", [&[0u8][..], b].concat()));
                files.push(("fs_inode", [&[0u8][..], b].concat()));
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
