//! The CIL with a real AIL and log writer on a memory device.

use super::*;
use crate::ail::tests::{setup_rig, LOG_BBS};
use crate::format::bufkind::BufKind;
use crate::types::Daddr;

fn ail_positions(ail: &Ail) -> Vec<Lsn> {
    ail.positions()
}

/// A new inode cluster (an ordered buffer: its contents come from the
/// ICREATE of its checkpoint) relogged by a later checkpoint (an unlinked
/// pointer changed in it) keeps its AIL place at the creating checkpoint
/// until written back: moved to the later checkpoint, it would let the
/// tail pass the ICREATE while the cluster on disk is still the old
/// blocks, and recovery would replay the pointer into garbage.
#[test]
fn relogged_new_inode_cluster_keeps_its_ail_place() {
    let (ail, log, rig) = setup_rig();
    let cil = Cil::new(
        log.clone(),
        ail.clone(),
        rig.view.clone(),
        rig.geo.clone(),
        [7; 16],
        false,
    );
    let len = 16384;
    let b = rig
        .bufs
        .get(
            &*rig.dev,
            &[7; 16],
            Daddr(LOG_BBS as u64),
            len,
            BufKind::Dino,
            false,
        )
        .unwrap();
    let commit = |ordered: bool, map: Vec<u32>| {
        let mut t = log.reserve(65536, 1, false).unwrap();
        let seq = cil
            .commit(
                &mut t,
                vec![TxBuf {
                    buf: b.clone(),
                    data: vec![0x11; len],
                    kind: BufKind::Dino,
                    map,
                    stale: false,
                    ordered,
                    verified: None,
                }],
                Vec::new(),
                Vec::new(),
                Vec::new(),
            )
            .unwrap();
        log.grant().ungrant(t);
        cil.force_seq(seq).unwrap();
    };
    commit(true, Vec::new());
    let first = ail_positions(&ail);
    assert_eq!(first.len(), 1, "the new cluster is in the AIL");
    // A later checkpoint logs one 128-byte chunk of it.
    commit(false, vec![1]);
    assert_eq!(
        ail_positions(&ail),
        first,
        "relogging moved the new cluster"
    );
    assert!(b.st.lock().alloc_pending);
    cil.stop();
}
