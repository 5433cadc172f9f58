//! Long-format bmbt block verifier and the records behind it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rxfs::format::bmbt;
use rxfs::types::{Daddr, Ino};

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let ctl = data[0];
    let bs = 512usize << (ctl >> 5).min(7);
    let mut b = data[1..].to_vec();
    b.resize(bs, 0);
    let daddr = 64u64;
    if ctl & 1 == 0 {
        b[0..4].copy_from_slice(b"BMA3");
        rxfs_fuzz::fixup_block(&mut b, daddr, 131);
    }
    let level = (ctl >> 1) as u16 & 3;
    if bmbt::verify_block(&b, Daddr(daddr), Ino(131), &rxfs_fuzz::UUID, level).is_err() {
        return;
    }
    // A verified block's records lie inside the block.
    let n = rxfs::format::be16(&b, 6) as usize;
    if level == 0 {
        assert!(bmbt::LBLOCK_HDR_SIZE + n * 16 <= bs);
        for i in 0..n {
            let _ = bmbt::Extent::decode(&b[bmbt::LBLOCK_HDR_SIZE + i * 16..]);
        }
    } else {
        let max = bmbt::block_maxrecs(bs, false);
        assert!(bmbt::LBLOCK_HDR_SIZE + max * 8 + n * 8 <= bs);
    }
});
