//! Inode core decode and the fork layout derived from it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rxfs::format::bmbt;
use rxfs::format::inode::{self, FMT_BTREE, FMT_EXTENTS};
use rxfs::types::Ino;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let ctl = data[0];
    let isize = 512usize << (ctl >> 6).min(2);
    let mut b = data[1..].to_vec();
    b.resize(isize, 0);
    let ino = 128 + (ctl as u64 & 0x3f);
    if ctl & 1 == 0 {
        rxfs_fuzz::fixup_inode(&mut b, ino);
    }
    let nrext64 = ctl & 2 != 0;
    let Ok(core) = inode::decode_core(&b, Ino(ino), &rxfs_fuzz::UUID, nrext64) else {
        return;
    };
    if core.mode == 0 {
        return;
    }
    // The fork slices a reader takes must lie inside the inode.
    let dsize = core.data_fork_size(isize);
    assert!(inode::DINODE_V3_CORE_SIZE + dsize <= isize);
    let dfork = &b[inode::DINODE_V3_CORE_SIZE..inode::DINODE_V3_CORE_SIZE + dsize];
    if core.forkoff != 0 {
        let a = core.attr_fork_offset();
        assert!(a < isize);
        assert_eq!(a + core.attr_fork_size(isize), isize);
    }
    match core.format {
        FMT_EXTENTS => {
            for rec in dfork.chunks_exact(bmbt::EXTENT_REC_SIZE) {
                let e = bmbt::Extent::decode(rec);
                let mut again = [0u8; 16];
                if e.len <= bmbt::MAX_EXTLEN && e.off.0 <= bmbt::MAX_STARTOFF {
                    e.encode(&mut again);
                    assert_eq!(bmbt::Extent::decode(&again), e);
                }
            }
        }
        FMT_BTREE if dfork.len() >= 4 => {
            let _ = (bmbt::root_level(dfork), bmbt::root_numrecs(dfork));
            let _ = bmbt::root_maxrecs(dfork.len());
        }
        _ => {}
    }
    let _ = inode::decode_rdev(core.nlink);
});
