//! DA node decode (directory and attribute btrees) and the name hash.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rxfs::format::da;
use rxfs::types::{Daddr, Ino};

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let ctl = data[0];
    let _ = da::hashname(&data[1..]);
    let bs = 512usize << (ctl >> 5).min(7);
    let mut b = data[1..].to_vec();
    b.resize(bs, 0);
    if ctl & 1 == 0 {
        rxfs::format::put_be16(&mut b, 8, da::DA3_NODE_MAGIC);
        rxfs_fuzz::fixup_block(&mut b, 24, 200);
    }
    let _ = da::BlkInfo::decode(&b);
    if let Ok(node) = da::decode_node(&b, Daddr(24), Ino(200), &rxfs_fuzz::UUID) {
        assert!(!node.entries.is_empty());
        assert!(da::DA3_NODE_HDR_SIZE + node.entries.len() * 8 <= bs);
        assert!(node
            .entries
            .windows(2)
            .all(|w| w[0].hashval <= w[1].hashval));
    }
});
