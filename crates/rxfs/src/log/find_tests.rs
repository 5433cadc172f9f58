//! Unit tests of the head/tail search on synthetic logs built with the
//! format layer's encoder.

use super::*;
use crate::bdev::MemDevice;
use crate::format::log::{TransHeader, UNMOUNT_BODY_SIZE};
use crate::format::log::{CLIENT_LOG, CLIENT_TRANSACTION, FMT_LINUX_LE, OP_COMMIT, OP_CONTINUE};
use crate::format::log::{OP_END, OP_START, OP_WAS_CONT, TRANS_CHECKPOINT, TRANS_MAGIC};
use crate::format::log_ops::push_op;
use crate::format::log_record::LogRecord;

const UUID: Uuid = [0x5a; 16];
const O: HostOrder = HostOrder::Little;

/// Writes records into an in-memory log the way the kernel lays them out.
struct Builder {
    log: Vec<u8>,
    bbs: u32,
    cycle: u32,
    blk: u32,
    tail: Lsn,
    buf_size: u32,
    /// Header blocks of each record written.
    written: Vec<u32>,
}

impl Builder {
    fn new(bbs: u32, buf_size: u32) -> Self {
        Builder {
            log: vec![0; bbs as usize * 512],
            bbs,
            cycle: 1,
            blk: 0,
            tail: Lsn::new(1, 0),
            buf_size,
            written: vec![],
        }
    }

    /// Payload capacity of one record.
    fn cap(&self) -> usize {
        self.buf_size as usize
            - 512 * crate::format::log_record::header_blocks_for(2, self.buf_size) as usize
    }

    fn write_record(&mut self, payload: &[u8], num_ops: u32) -> u32 {
        let len = payload.len().div_ceil(512) * 512;
        let lsn = Lsn::new(self.cycle, self.blk);
        let mut h = RecordHeader::new(
            self.cycle,
            lsn,
            self.tail,
            FMT_LINUX_LE,
            UUID,
            self.buf_size,
        );
        h.len = len as u32;
        h.num_logops = num_ops;
        let mut data = payload.to_vec();
        data.resize(len, 0);
        let mut r = LogRecord {
            header: h,
            ext: vec![],
            data,
            packed: false,
            crc: CrcCheck::Unset,
        };
        r.pack();
        let total = r.header.total_blocks();
        let wrap = (self.blk + total > self.bbs).then_some(self.bbs - self.blk);
        let raw = r.encode(wrap);
        for i in 0..total {
            let b = ((self.blk + i) % self.bbs) as usize;
            self.log[b * 512..(b + 1) * 512]
                .copy_from_slice(&raw[i as usize * 512..(i as usize + 1) * 512]);
        }
        let at = self.blk;
        self.written.push(at);
        self.blk += total;
        if self.blk >= self.bbs {
            self.blk -= self.bbs;
            self.cycle += 1;
        }
        at
    }

    fn unmount(&mut self) -> u32 {
        let mut p = Vec::new();
        let body = crate::format::log::encode_unmount_body(O);
        assert_eq!(body.len(), UNMOUNT_BODY_SIZE);
        push_op(&mut p, 0xb0c0d0d0, CLIENT_LOG, OP_UNMOUNT, &body);
        self.write_record(&p, 1)
    }

    /// A checkpoint with `items` items of `region_len`-byte data regions,
    /// split over records like the kernel does.
    fn checkpoint(&mut self, tid: u32, items: usize, region_len: usize) {
        let mut th = [0u8; 16];
        TransHeader {
            magic: TRANS_MAGIC,
            trans_type: TRANS_CHECKPOINT,
            tid,
            num_items: items as u32,
        }
        .encode(&mut th, O);
        let mut ops: Vec<(u8, Vec<u8>)> = vec![(OP_START, vec![]), (0, th.to_vec())];
        for i in 0..items {
            let mut f = vec![0u8; 24];
            O.put_u16(&mut f, 0, 0x123c);
            O.put_u16(&mut f, 2, 2);
            O.put_u64(&mut f, 8, i as u64 * 8);
            O.put_u32(&mut f, 16, 1);
            ops.push((0, f));
            ops.push((0, vec![i as u8; region_len]));
        }
        ops.push((OP_COMMIT, vec![]));
        let cap = self.cap();
        let (mut rec, mut n) = (Vec::new(), 0u32);
        for (flags, data) in ops {
            let mut rest: &[u8] = &data;
            let mut first = true;
            loop {
                if rec.len() + 12 + rest.len().min(1) > cap {
                    self.write_record(&rec, n);
                    (rec, n) = (Vec::new(), 0);
                }
                let room = cap - rec.len() - 12;
                let cont = if first { 0 } else { OP_WAS_CONT };
                if rest.len() <= room {
                    let end = if first { 0 } else { OP_END };
                    push_op(&mut rec, tid, CLIENT_TRANSACTION, flags | cont | end, rest);
                    n += 1;
                    break;
                }
                push_op(
                    &mut rec,
                    tid,
                    CLIENT_TRANSACTION,
                    cont | OP_CONTINUE,
                    &rest[..room],
                );
                n += 1;
                rest = &rest[room..];
                first = false;
            }
        }
        if !rec.is_empty() {
            self.write_record(&rec, n);
        }
    }

    fn dev(&self) -> MemDevice {
        MemDevice::new(self.log.clone())
    }
}

fn state(b: &Builder) -> (LogState, LogContents) {
    let dev = b.dev();
    let log = Log::from_parts(&dev, Daddr(0), b.bbs, UUID).unwrap();
    let st = log.find_state().unwrap();
    let c = log.contents(&st).unwrap();
    (st, c)
}

#[test]
fn zeroed_log() {
    let b = Builder::new(1000, 32768);
    let (st, c) = state(&b);
    assert!(st.zeroed && st.clean);
    assert_eq!(c.records, 0);
}

#[test]
fn fresh_unmount_record() {
    let mut b = Builder::new(1000, 32768);
    b.unmount();
    let (st, _) = state(&b);
    assert!(st.clean && !st.zeroed, "{st}");
    assert_eq!(st.head, Lsn::new(1, 2));
    assert_eq!(st.tail, st.head);
    assert!(st.last_record.as_ref().unwrap().unmount);
}

#[test]
fn dirty_then_clean() {
    let mut b = Builder::new(4000, 32768);
    b.unmount();
    b.tail = Lsn::new(1, 2);
    b.checkpoint(7, 60, 700);
    b.checkpoint(8, 3, 100);
    let (st, c) = state(&b);
    assert!(!st.clean, "{st}");
    assert_eq!(st.head, Lsn::new(1, b.blk));
    assert_eq!(st.tail, Lsn::new(1, 2));
    assert_eq!(c.transactions.len(), 2);
    assert_eq!(c.transactions[0].items.len(), 60);
    assert_eq!(c.transactions[0].items[59].regions[1], vec![59u8; 700]);
    assert_eq!(c.transactions[1].items.len(), 3);
    assert_eq!(c.uncommitted, 0);
    assert!(b.written.len() > 3, "checkpoint 7 spans records");

    b.tail = Lsn::new(1, b.blk);
    b.unmount();
    let (st, c) = state(&b);
    assert!(st.clean, "{st}");
    assert_eq!(c.records, 0);
}

#[test]
fn wrapped_log_with_extended_headers() {
    // 256 KiB buffers (8 header blocks) in logs that wrap a few times; the
    // small one is inside the in-flight scan window, the big one is not.
    for (bbs, n) in [(1200u32, 20u32), (5000, 60), (4111, 57)] {
        let mut b = Builder::new(bbs, 256 * 1024);
        for i in 0..n {
            b.tail = Lsn::new(b.cycle, b.blk);
            b.checkpoint(100 + i, 30, 3000);
        }
        assert!(b.cycle >= 3, "wrapped: cycle {}", b.cycle);
        let (st, c) = state(&b);
        assert!(!st.clean);
        assert_eq!(st.head, Lsn::new(b.cycle, b.blk), "bbs {bbs}");
        assert_eq!(st.tail, b.tail);
        assert_eq!(c.transactions.len(), 1);
        assert_eq!(c.transactions[0].tid, 100 + n - 1);
        assert_eq!(c.transactions[0].items.len(), 30);
        // From five records back, across the wrap point where there is one.
        let from = b.written[b.written.len() - 5];
        let dev = b.dev();
        let log = Log::from_parts(&dev, Daddr(0), b.bbs, UUID).unwrap();
        let mut k = 0;
        log.for_each_record(from, b.blk, |r| {
            assert!(r.record.crc.is_ok());
            k += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(k, 5);
    }
}

#[test]
fn torn_last_record_is_cut() {
    let mut b = Builder::new(4000, 32768);
    b.checkpoint(1, 10, 500);
    let good_head = b.blk;
    b.checkpoint(2, 10, 500);
    let last = *b.written.last().unwrap();
    // Flip a payload byte of the last record: its CRC fails.
    let off = (last as usize + 1) * 512 + 100;
    b.log[off] ^= 0xff;
    let (st, c) = state(&b);
    assert_eq!(st.torn_from, Some(b.blk));
    assert_eq!(st.head.block(), last);
    assert!(st.head.block() >= good_head);
    assert_eq!(
        c.transactions.len(),
        1,
        "only checkpoint 1 commits before the cut"
    );
}

#[test]
fn partial_record_moves_head_back() {
    let mut b = Builder::new(4000, 32768);
    b.checkpoint(1, 4, 300);
    let keep = b.blk;
    b.checkpoint(2, 60, 400);
    let last = *b.written.last().unwrap();
    // The last block of the last record never made it (still zero).
    let end = b.blk as usize;
    b.log[(end - 1) * 512..end * 512].fill(0);
    let (st, _) = state(&b);
    assert_eq!(st.head.block(), last);
    assert!(last >= keep);
}

#[test]
fn garbage_never_panics() {
    use rand::{Rng, SeedableRng};
    for seed in 0..200u64 {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut b = Builder::new(600, 32768);
        for i in 0..rng.gen_range(0..6) {
            b.checkpoint(i, rng.gen_range(1..20), rng.gen_range(1..900));
        }
        // Scribble: random bytes, planted magics and cycles.
        for _ in 0..rng.gen_range(1..40) {
            let blk = rng.gen_range(0..600usize);
            let off = blk * 512 + rng.gen_range(0..3) * 4 * rng.gen_range(0..3);
            let v: u32 = match rng.gen_range(0..4) {
                0 => 0xFEED_BABE,
                1 => rng.gen_range(0..4),
                _ => rng.gen(),
            };
            b.log[off..off + 4].copy_from_slice(&v.to_be_bytes());
        }
        let dev = b.dev();
        let log = Log::from_parts(&dev, Daddr(0), b.bbs, UUID).unwrap();
        if let Ok(st) = log.find_state() {
            assert!(
                st.head.block() < 600 && st.tail.block() < 600,
                "seed {seed}"
            );
            let _ = log.contents(&st);
        }
    }
}

#[test]
fn foreign_uuid_is_corrupt() {
    let mut b = Builder::new(1000, 32768);
    b.unmount();
    let dev = b.dev();
    let log = Log::from_parts(&dev, Daddr(0), b.bbs, [1; 16]).unwrap();
    assert!(log.find_state().unwrap_err().is_corrupt());
}
