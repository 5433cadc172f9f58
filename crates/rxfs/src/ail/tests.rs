//! The AIL's tail rule, against a real log writer on a memory device.

use super::*;
use crate::bdev::MemDevice;
use crate::format::log::{HostOrder, BBSIZE};
use crate::format::sb::Superblock;
use crate::log::LogConfig;
use crate::types::Daddr;

const HDR: &[u8] = include_bytes!("../format/testdata/ag2_hdr.bin");
pub(crate) const LOG_BBS: u32 = 2048;

/// A device of the log (blocks `0..LOG_BBS`) and 64 more blocks.
pub(crate) struct Rig {
    pub dev: Arc<dyn BlockDevice>,
    pub view: Arc<CacheDevice>,
    pub bufs: Arc<BufCache>,
    pub geo: Geometry,
}

fn setup() -> (Arc<Ail>, Arc<LogWriter>) {
    let (ail, log, _) = setup_rig();
    (ail, log)
}

pub(crate) fn setup_rig() -> (Arc<Ail>, Arc<LogWriter>, Rig) {
    let bytes = (LOG_BBS as usize + 64) * 512;
    let dev: Arc<dyn BlockDevice> = Arc::new(MemDevice::new(vec![0u8; bytes]));
    let sb = Superblock::decode_unverified(&HDR[..512]).unwrap();
    let geo = Geometry::new(&sb);
    let view = Arc::new(CacheDevice::new(dev.clone()));
    let bufs = Arc::new(BufCache::new(16));
    let ail = Ail::new(
        dev.clone(),
        view.clone(),
        bufs.clone(),
        geo.clone(),
        [7; 16],
    );
    let head = Lsn::new(1, 0);
    let cfg = LogConfig {
        start: Daddr(0),
        size_bbs: LOG_BBS,
        uuid: [7; 16],
        logbufs: 2,
        logbsize: 32768,
        head,
        tail: head,
        prev_block: u32::MAX,
        order: HostOrder::native(),
        sunit: BBSIZE as u32,
    };
    let log = Arc::new(LogWriter::new(dev.clone(), cfg, ail.clone()).unwrap());
    let _ = ail.log.set(Arc::downgrade(&log));
    let rig = Rig {
        dev,
        view,
        bufs,
        geo,
    };
    (ail, log, rig)
}

/// One checkpoint of one small region, forced to disk.
fn checkpoint(log: &LogWriter) -> crate::log::CheckpointLsns {
    let mut t = log.reserve(16384, 1, false).unwrap();
    let region = [0x5au8; 200];
    let lsns = log
        .write_checkpoint_regions(&mut t, &[vec![&region[..]]])
        .unwrap();
    log.grant().ungrant(t);
    log.force(lsns.commit).unwrap();
    lsns
}

/// A checkpoint whose commit record is on disk but whose items are not
/// in the AIL yet (its stable callback not run) must hold the tail, even
/// with the AIL empty: a tail moved to `last_sync_lsn` then would leave
/// the checkpoint out of recovery before its items are written back (a
/// new inode chunk lost that way: its creation behind the tail, its
/// cluster never written).
#[test]
fn tail_waits_for_a_checkpoint_between_write_and_insertion() {
    let (ail, log) = setup();
    checkpoint(&log);
    ail.move_tail();
    let before = log.grant().tail();
    ail.checkpoint_begin();
    let lsns = checkpoint(&log);
    assert!(lsns.start > before && log.last_sync_lsn() >= lsns.commit);
    ail.move_tail();
    assert_eq!(
        log.grant().tail(),
        before,
        "tail moved past a checkpoint not in the AIL"
    );

    // Inserted (nothing to write back: no items): the tail may move on.
    ail.checkpoint_done(lsns.start, Vec::new(), true);
    ail.move_tail();
    assert_eq!(log.grant().tail(), log.last_sync_lsn());
}

/// With nothing in flight, an empty AIL puts the tail at the last record
/// on disk; an abandoned checkpoint does not hold it forever.
#[test]
fn empty_ail_tail_follows_the_log_when_nothing_is_in_flight() {
    let (ail, log) = setup();
    let lsns = checkpoint(&log);
    ail.move_tail();
    assert!(log.grant().tail() >= lsns.commit);

    ail.checkpoint_begin();
    ail.checkpoint_abandoned();
    let l2 = checkpoint(&log);
    ail.move_tail();
    assert!(log.grant().tail() >= l2.commit);
}
