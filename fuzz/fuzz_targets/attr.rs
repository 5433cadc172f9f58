//! Attribute decoders: shortform fork, leaf block, remote value and remote
//! symlink blocks, inline symlinks, XFS ACL conversion, name splitting.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rxfs::format::{attr, attr_acl, put_be16, symlink};
use rxfs::types::{Daddr, Ino};

fuzz_target!(|data: &[u8]| {
    if data.len() < 9 {
        return;
    }
    let ctl = data[0];
    let offset = u32::from_le_bytes(data[1..5].try_into().unwrap()) & 0x1ffff;
    let remaining = u32::from_le_bytes(data[5..9].try_into().unwrap()) & 0x1ffff;
    let body = &data[9..];
    let ino = Ino(300);
    let daddr = 96u64;
    let bs = 512usize << (ctl >> 5).min(7);
    match (ctl >> 1) & 7 {
        0 => {
            if let Ok(ents) = attr::decode_shortform(body, ino) {
                for e in &ents {
                    let _ = (e.namespace(), e.incomplete());
                }
            }
        }
        1 => {
            let mut b = body.to_vec();
            b.resize(bs, 0);
            if ctl & 1 == 0 {
                put_be16(&mut b, 8, attr::ATTR3_LEAF_MAGIC);
                rxfs_fuzz::fixup_block(&mut b, daddr, ino.0);
            }
            if let Ok(leaf) = attr::decode_leaf(&b, Daddr(daddr), ino, &rxfs_fuzz::UUID) {
                let _ = leaf.last_hash();
                for e in &leaf.entries {
                    if let attr::AttrValue::Local(v) = &e.value {
                        assert!(v.len() <= bs);
                    }
                }
            }
        }
        2 | 3 => {
            let symlink = (ctl >> 1) & 7 == 3;
            let mut b = body.to_vec();
            b.resize(bs, 0);
            if ctl & 1 == 0 {
                b[0..4].copy_from_slice(if symlink { b"XSLM" } else { b"XARM" });
                rxfs_fuzz::fixup_block(&mut b, daddr, ino.0);
            }
            let r = if symlink {
                symlink::verify_remote_run(
                    &b,
                    Daddr(daddr),
                    ino,
                    &rxfs_fuzz::UUID,
                    offset,
                    remaining,
                )
            } else {
                rxfs::format::attr_remote::verify_attr_rmt_block(
                    &b,
                    Daddr(daddr),
                    ino,
                    &rxfs_fuzz::UUID,
                    offset,
                    remaining,
                )
            };
            if let Ok(p) = r {
                assert!(p.len() <= remaining as usize);
            }
        }
        4 => {
            let size = remaining;
            if let Ok(t) = symlink::decode_local(body, size, ino) {
                assert!(t.len() <= body.len());
            }
            let _ = symlink::check_size(offset as u64, ino);
            let _ = symlink::remote_blocks(offset, bs as u32);
        }
        5 => {
            let _ = attr_acl::xfs_acl_to_xattr(body, ino);
        }
        _ => {
            let _ = attr::split_name(body);
            let _ = attr_acl::acl_xattr_name(body);
            let _ = rxfs::format::da::hashname(body);
        }
    }
});
