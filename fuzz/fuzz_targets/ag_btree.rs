//! AG headers (AGF, AGI, AGFL) and short-format btree blocks (bnobt,
//! cntbt, inobt, finobt, rmapbt, refcountbt) with every record check.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rxfs::format::ag::{AgCheck, Agf, Agfl, Agi};
use rxfs::format::btree::{BlockCheck, BtreeKey, BtreeKind, SBlock};
use rxfs::format::crc;
use rxfs::types::{AgNumber, Daddr};

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let (ctl, arg) = (data[0], data[1]);
    let body = &data[2..];
    let fix = ctl & 1 == 0;
    let agno = AgNumber((arg & 3) as u32);
    let sectsize = 512u32 << ((ctl >> 6) & 1);
    let blocklog = 10 + ((ctl >> 4) & 3);
    let bs = 1usize << blocklog;
    let ag_len = 1000 + (arg as u32) * 37;
    let c = AgCheck {
        agno,
        ag_len,
        agblocks: ag_len,
        sectsize,
        blocklog,
        inopblog: blocklog - 9,
        uuid: rxfs_fuzz::UUID,
        has_rmapbt: arg & 4 != 0,
        has_reflink: arg & 8 != 0,
        has_finobt: arg & 16 != 0,
        has_inobtcount: arg & 32 != 0,
        maxlevels_alloc: 5,
        maxlevels_inobt: 5,
        maxlevels_rmap: 9,
        maxlevels_refc: 5,
    };
    match (ctl >> 1) & 7 {
        0..=2 => {
            let mut b = body.to_vec();
            b.resize(sectsize as usize, 0);
            let which = (ctl >> 1) & 7;
            if fix {
                let (magic, crc_off, uuid_off): (&[u8; 4], usize, usize) = match which {
                    0 => (b"XAGF", 216, 64),
                    1 => (b"XAGI", 312, 296),
                    _ => (b"XAFL", 32, 8),
                };
                b[0..4].copy_from_slice(magic);
                let seq_off = if which == 2 { 4 } else { 8 };
                b[seq_off..seq_off + 4].copy_from_slice(&agno.0.to_be_bytes());
                b[uuid_off..uuid_off + 16].copy_from_slice(&rxfs_fuzz::UUID);
                crc::update(&mut b, crc_off);
            }
            match which {
                0 => {
                    if let Ok(agf) = Agf::decode(&b, &c) {
                        let _ = agf.agfl_needs_reset();
                        let _ = agf.agfl_active();
                        let mut fl = vec![0u8; sectsize as usize];
                        fl[0..4].copy_from_slice(b"XAFL");
                        fl[4..8].copy_from_slice(&agno.0.to_be_bytes());
                        fl[8..24].copy_from_slice(&rxfs_fuzz::UUID);
                        for (i, w) in fl[36..].chunks_exact_mut(4).enumerate() {
                            w.copy_from_slice(&(8 + i as u32).to_be_bytes());
                        }
                        crc::update(&mut fl, 32);
                        if let Ok(agfl) = Agfl::decode(&fl, &c) {
                            let _ = agfl.active_blocks(&agf, &c);
                        }
                    }
                }
                1 => {
                    let _ = Agi::decode(&b, &c);
                }
                _ => {
                    let _ = Agfl::decode(&b, &c);
                }
            }
        }
        _ => {
            let kind = BtreeKind::ALL[(arg >> 5) as usize % BtreeKind::ALL.len()];
            let mut b = body.to_vec();
            b.resize(bs, 0);
            let daddr = Daddr(((agno.0 as u64 * ag_len as u64 + 10) << (blocklog - 9)) as u64);
            if fix {
                b[0..4].copy_from_slice(&kind.magic().to_be_bytes());
                b[48..52].copy_from_slice(&agno.0.to_be_bytes());
                rxfs_fuzz::fixup_block(&mut b, daddr.0, 0);
            }
            let bc = BlockCheck {
                agno,
                ag_len,
                first_agbno: c.first_usable_agbno(),
                uuid: rxfs_fuzz::UUID,
                blocksize: bs,
                sparse_inodes: arg & 2 != 0,
                inopblog: blocklog - 9,
                max_ino: 1 << 40,
                tree_levels: 1 + (ctl >> 4 & 3) as u32 * 2,
            };
            if let Ok(blk) = SBlock::verify(&b, kind, daddr, &bc) {
                for i in 0..blk.numrecs() {
                    let _ = blk.entry_key(i);
                    if !blk.is_leaf() {
                        assert!(blk.ptr(i) < ag_len);
                        let _ = blk.high_key(i);
                    }
                }
                let _ = blk.max_high_key();
                let k = body.first().copied().unwrap_or(0) as u64 * 13;
                if let Some(i) = blk.last_le(BtreeKey(k, 0, 0)) {
                    assert!(i < blk.numrecs());
                }
            }
        }
    }
});
