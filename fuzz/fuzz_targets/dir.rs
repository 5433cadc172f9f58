//! Directory decoders: data blocks (XDD3), block-form blocks (XDB3) with
//! their leaf, leaf1/leafn index blocks, free index blocks and shortform
//! directories.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rxfs::format::dir::DirGeo;
use rxfs::format::dir_data::DataBlock;
use rxfs::format::dir_leaf::{decode_free, decode_leaf, hash_range, LEAF1_MAGIC, LEAFN_MAGIC};
use rxfs::format::dir_sf::decode_sf;
use rxfs::format::put_be16;
use rxfs::types::{Daddr, Ino};

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let ctl = data[0];
    let arg = data[1];
    let body = &data[2..];
    // 512 B .. 64 KiB directory blocks of 512 B .. 4 KiB filesystem blocks.
    let blocklog = 9 + (ctl >> 6);
    let dirblklog = (ctl >> 4) & 3;
    let geo = DirGeo::new(blocklog, dirblklog, arg & 1 == 0);
    let bs = geo.blksize as usize;
    let owner = Ino(400);
    let daddr = Daddr(200);
    let uuid = &rxfs_fuzz::UUID;
    let mut b = body.to_vec();
    b.resize(bs, 0);
    let fix = ctl & 1 == 0;
    match (ctl >> 1) & 7 {
        0 | 1 => {
            let block = (ctl >> 1) & 7 == 1;
            if fix {
                b[0..4].copy_from_slice(if block { b"XDB3" } else { b"XDD3" });
                rxfs_fuzz::fixup_block(&mut b, daddr.0, owner.0);
            }
            let r = if block {
                DataBlock::block(&b, &geo, daddr, owner, uuid)
            } else {
                DataBlock::data(&b, &geo, daddr, owner, uuid)
            };
            if let Ok(db) = r {
                assert!(db.end() <= bs);
                let mut offs = Vec::new();
                let _ = db.walk(0, |e| {
                    assert!(e.off + e.size <= bs);
                    offs.push(e.off);
                    offs.len() < 10_000
                });
                let from = (arg as usize) * 8;
                let _ = db.walk(from, |_| true);
                for o in offs.iter().take(64) {
                    assert!(db.entry_at(*o).is_ok());
                }
                let _ = db.entry_at(from);
                for e in db.leaf.iter().take(64) {
                    let _ = db.entry_at((e.address as usize).wrapping_mul(8) % (bs + 8));
                }
            }
        }
        2 | 3 => {
            let magic = if (ctl >> 1) & 7 == 2 {
                LEAF1_MAGIC
            } else {
                LEAFN_MAGIC
            };
            if fix {
                put_be16(&mut b, 8, magic);
                rxfs_fuzz::fixup_block(&mut b, daddr.0, owner.0);
            }
            if let Ok(leaf) = decode_leaf(&b, magic, daddr, owner, uuid) {
                let h = u32::from_le_bytes([arg, body[0], 0, 0]);
                let r = hash_range(&leaf.entries, h);
                assert!(r.start <= r.end && r.end <= leaf.entries.len());
            }
        }
        4 => {
            if fix {
                b[0..4].copy_from_slice(b"XDF3");
                rxfs_fuzz::fixup_block(&mut b, daddr.0, owner.0);
            }
            let _ = decode_free(&b, daddr, owner, uuid);
        }
        _ => {
            if let Ok(sf) = decode_sf(body, &geo, owner) {
                let _ = sf;
            }
            let _ = geo.dataptr_split(u64::from_le_bytes({
                let mut w = [0u8; 8];
                let n = body.len().min(8);
                w[..n].copy_from_slice(&body[..n]);
                w
            }));
        }
    }
});
