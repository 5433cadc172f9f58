//! The CIL with a real AIL and log writer on a memory device.

use super::*;
use crate::ail::tests::{setup_rig, LOG_BBS};
use crate::format::bufkind::BufKind;
use crate::types::Daddr;

fn ail_positions(ail: &Ail) -> Vec<Lsn> {
    ail.positions()
}

/// A CIL over the rig's log, AIL and caches.
fn cil_on(ail: &Arc<Ail>, log: &Arc<LogWriter>, rig: &crate::ail::tests::Rig) -> Arc<Cil> {
    Cil::new(
        log.clone(),
        ail.clone(),
        rig.view.clone(),
        rig.geo.clone(),
        [7; 16],
        false,
    )
}

/// Commit one buffer in a transaction of its own and force it to the log.
fn commit_one(cil: &Arc<Cil>, log: &LogWriter, tb: TxBuf) {
    let mut t = log.reserve(65536, 1, false).unwrap();
    let seq = cil
        .commit(&mut t, vec![tb], Vec::new(), Vec::new(), Vec::new())
        .unwrap();
    log.grant().ungrant(t);
    cil.force_seq(seq).unwrap();
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
    let cil = cil_on(&ail, &log, &rig);
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
        let tb = TxBuf {
            buf: b.clone(),
            data: vec![0x11; len],
            kind: BufKind::Dino,
            map,
            stale: false,
            ordered,
            verified: None,
            base: None,
        };
        commit_one(&cil, &log, tb);
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

/// A buffer committed from the bytes it was joined with gets its CRC from
/// the chunks the transaction logged ([`crc::restamp`]): the committed
/// image verifies after each commit, and a change outside the logged
/// chunks would leave it wrong (the MetaTx contract it relies on).
#[test]
fn committed_crc_is_restamped_from_the_logged_chunks() {
    use crate::format::dir::DIR3_CRC_OFF;
    let (ail, log, rig) = setup_rig();
    let cil = cil_on(&ail, &log, &rig);
    let len = 4096;
    let daddr = Daddr(LOG_BBS as u64);
    let b = rig
        .bufs
        .get(&*rig.dev, &[7; 16], daddr, len, BufKind::DirData, false)
        .unwrap();
    let commit = |data: Vec<u8>, map: Vec<u32>, base: Option<Arc<Vec<u8>>>| {
        let tb = TxBuf {
            buf: b.clone(),
            data,
            kind: BufKind::DirData,
            map,
            stale: false,
            ordered: false,
            verified: None,
            base,
        };
        commit_one(&cil, &log, tb);
    };
    // A new data block, CRC computed whole.
    let mut first = vec![0x5a; len];
    first[..4].copy_from_slice(b"XDD3");
    first[8..16].copy_from_slice(&daddr.0.to_be_bytes());
    first[24..40].copy_from_slice(&[7; 16]);
    commit(first, vec![u32::MAX], None);
    let c1 = b.st.lock().committed.clone();
    assert!(crc::verify(&c1, DIR3_CRC_OFF));
    // Chunks 0 (the header with the CRC field) and 5 change.
    let mut second = (*c1).clone();
    second[48] ^= 0xff;
    second[5 * 128 + 7] ^= 0x11;
    commit(second.clone(), vec![1 | 1 << 5], Some(c1.clone()));
    let c2 = b.st.lock().committed.clone();
    assert!(crc::verify(&c2, DIR3_CRC_OFF));
    assert_ne!(
        c1[DIR3_CRC_OFF..DIR3_CRC_OFF + 4],
        c2[DIR3_CRC_OFF..DIR3_CRC_OFF + 4]
    );
    // A change the map does not name is not hashed.
    let mut third = (*c2).clone();
    third[31 * 128] ^= 1;
    third[2 * 128] ^= 1;
    commit(third, vec![1 << 2], Some(c2.clone()));
    assert!(!crc::verify(&b.st.lock().committed, DIR3_CRC_OFF));
    // Write-back finds it, counts it, and writes a valid CRC.
    assert_eq!(ail.stats().unlogged, 0);
    ail.start(&log, &cil);
    ail.drain(std::time::Duration::from_secs(30)).unwrap();
    assert_eq!(ail.stats().unlogged, 1);
    let mut disk = vec![0u8; len];
    rig.dev.read_at(&mut disk, daddr.bytes()).unwrap();
    assert!(crc::verify(&disk, DIR3_CRC_OFF));
    cil.stop();
}

/// The write verifier: a committed buffer corrupted in memory (its magic
/// overwritten after the commit, as a stray write would) is refused at
/// write-back: nothing reaches the disk, write-back reports the
/// corruption and the log is shut down (later reservations fail), as XFS
/// shuts down on a write verifier failure.
#[test]
fn corrupted_buffer_is_refused_at_write_back_and_shuts_down() {
    let (ail, log, rig) = setup_rig();
    let cil = cil_on(&ail, &log, &rig);
    let len = 4096;
    let daddr = Daddr(LOG_BBS as u64);
    let b = rig
        .bufs
        .get(&*rig.dev, &[7; 16], daddr, len, BufKind::DirData, false)
        .unwrap();
    let mut data = vec![0x5a; len];
    data[..4].copy_from_slice(b"XDD3");
    data[8..16].copy_from_slice(&daddr.0.to_be_bytes());
    data[24..40].copy_from_slice(&[7; 16]);
    let tb = TxBuf {
        buf: b.clone(),
        data,
        kind: BufKind::DirData,
        map: vec![u32::MAX],
        stale: false,
        ordered: false,
        verified: None,
        base: None,
    };
    commit_one(&cil, &log, tb);
    let mut before = vec![0u8; len];
    rig.dev.read_at(&mut before, daddr.bytes()).unwrap();
    // A stray write in memory: the magic is gone.
    {
        let mut st = b.st.lock();
        let mut bad = (*st.committed).clone();
        bad[..4].copy_from_slice(b"JUNK");
        st.committed = Arc::new(bad);
    }
    ail.start(&log, &cil);
    let e = ail
        .drain(std::time::Duration::from_secs(30))
        .expect_err("a corrupt buffer was written back");
    assert!(e.to_string().contains("bad magic"), "{e}");
    let mut after = vec![0u8; len];
    rig.dev.read_at(&mut after, daddr.bytes()).unwrap();
    assert!(after == before, "the corrupt buffer reached the disk");
    assert!(
        matches!(
            log.reserve(4096, 1, false),
            Err(crate::error::Error::Shutdown)
        ),
        "the log is not shut down"
    );
    cil.stop();
}
