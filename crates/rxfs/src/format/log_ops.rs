//! Ops of a log record, and transactions reassembled from them.
//!
//! The unpacked payload of a record is a sequence of `num_logops` ops, each
//! a 12-byte [`OpHeader`] followed by `oh_len` bytes. [`OpIter`] walks them
//! with bounds checks. [`TransAssembler`] follows the ops of consecutive
//! records (tail to head) and rebuilds each transaction the way recovery
//! needs it:
//!
//! - an op with flag START and an unknown tid opens a transaction;
//! - ops of tids that were never opened are skipped (they belong to
//!   transactions that started before the tail);
//! - the first data op of a transaction is its `TRAN` header (it may be
//!   split across records: the rest comes with WAS_CONT);
//! - every further op with flags 0 or CONTINUE starts a new region; the
//!   first region of an item is its format header, whose second u16 (host
//!   order) is the item's region count, so the assembler knows when the
//!   next region starts a new item;
//! - an op with WAS_CONT appends to the last region (a region split across
//!   records); END only marks the last piece;
//! - COMMIT closes the transaction and yields it; an UNMOUNT op of an open
//!   transaction drops it.
//!
//! Invariants: memory held is bounded by the payload fed in (the caller bounds
//! that by the log size); an item never has more regions than its format
//! header declares, and at most [`MAX_REGIONS_IN_ITEM`].

use std::collections::HashMap;

use super::log::{corrupt, HostOrder, OpHeader, TransHeader, CLIENT_LOG, CLIENT_TRANSACTION};
use super::log::{OP_COMMIT, OP_CONTINUE, OP_END, OP_HEADER_SIZE, OP_START, OP_UNMOUNT};
use super::log::{OP_WAS_CONT, TRANS_HEADER_SIZE, TRANS_MAGIC};
use super::log_items::ItemFormat;
use crate::error::{Location, Result};
use crate::types::Lsn;

/// Most regions one logged item can have: a buffer of the largest block
/// size (64 KiB) logged in every other 128-byte chunk, plus its format.
pub const MAX_REGIONS_IN_ITEM: usize = 65536 / 128 / 2 + 1;

/// One op of a record: its header and its payload in this record.
#[derive(Debug, Clone, Copy)]
pub struct Op<'a> {
    pub header: OpHeader,
    pub payload: &'a [u8],
    /// Byte offset of the op header in the record payload.
    pub offset: usize,
}

/// Iterator over the ops of one unpacked record payload.
pub struct OpIter<'a> {
    data: &'a [u8],
    off: usize,
    remaining: u32,
    at: Location,
    failed: bool,
}

/// The ops of an unpacked record payload (`data` = the first `h_len` bytes).
pub fn record_ops(data: &[u8], num_logops: u32, at: Location) -> OpIter<'_> {
    OpIter {
        data,
        off: 0,
        remaining: num_logops,
        at,
        failed: false,
    }
}

impl<'a> Iterator for OpIter<'a> {
    type Item = Result<Op<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.remaining == 0 || self.off >= self.data.len() {
            return None;
        }
        let fail = |s: &mut Self, d: String| {
            s.failed = true;
            Some(Err(corrupt("log op header", s.at, d)))
        };
        let Some(header) = OpHeader::decode(&self.data[self.off..]) else {
            let d = format!("op header at byte {} overruns the record", self.off);
            return fail(self, d);
        };
        if header.clientid != CLIENT_TRANSACTION && header.clientid != CLIENT_LOG {
            let d = format!("bad client id {:#x} at byte {}", header.clientid, self.off);
            return fail(self, d);
        }
        let start = self.off + OP_HEADER_SIZE;
        let end = start as u64 + header.len as u64;
        if end > self.data.len() as u64 {
            let d = format!(
                "op at byte {} with length {} overruns the record ({} bytes)",
                self.off,
                header.len,
                self.data.len()
            );
            return fail(self, d);
        }
        let op = Op {
            header,
            payload: &self.data[start..end as usize],
            offset: self.off,
        };
        self.off = end as usize;
        self.remaining -= 1;
        Some(Ok(op))
    }
}

/// A logged item: its regions, the first being the item format header.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogItem {
    /// Region count declared by the format header.
    pub total: usize,
    pub regions: Vec<Vec<u8>>,
}

impl LogItem {
    /// The item type (first u16 of the format header, host order).
    pub fn item_type(&self, order: HostOrder) -> u16 {
        match self.regions.first() {
            Some(r) if r.len() >= 2 => order.u16(r, 0),
            _ => 0,
        }
    }

    /// Whether all declared regions arrived.
    pub fn is_complete(&self) -> bool {
        self.total > 0 && self.regions.len() == self.total
    }

    /// Decode the item's format header.
    pub fn format(&self, order: HostOrder, at: Location) -> Result<ItemFormat> {
        ItemFormat::decode(&self.regions, order, at)
    }

    /// Payload bytes of all regions.
    pub fn bytes(&self) -> usize {
        self.regions.iter().map(Vec::len).sum()
    }
}

/// A committed transaction (a checkpoint on delayed-logging filesystems).
#[derive(Debug, Clone)]
pub struct Transaction {
    pub tid: u32,
    /// LSN of the record holding the START op (recovery's transaction LSN).
    pub lsn: Lsn,
    /// LSN of the record holding the COMMIT op.
    pub commit_lsn: Lsn,
    pub header: TransHeader,
    pub items: Vec<LogItem>,
}

#[derive(Debug)]
struct Pending {
    tid: u32,
    lsn: Lsn,
    theader: Vec<u8>,
    header: Option<TransHeader>,
    items: Vec<LogItem>,
}

/// Counters of what the assembler saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AssemblyStats {
    pub records: u64,
    pub ops: u64,
    /// Ops of transactions that started before the first record fed.
    pub skipped_ops: u64,
    pub commits: u64,
    pub unmounts: u64,
}

/// Rebuilds transactions from the ops of consecutive records.
#[derive(Debug)]
pub struct TransAssembler {
    order: HostOrder,
    open: HashMap<u32, Pending>,
    pub stats: AssemblyStats,
}

impl TransAssembler {
    pub fn new(order: HostOrder) -> Self {
        TransAssembler {
            order,
            open: HashMap::new(),
            stats: AssemblyStats::default(),
        }
    }

    /// Feed the ops of one record (unpacked payload, `h_len` bytes) whose
    /// LSN is `rec_lsn`; committed transactions are pushed to `out`.
    pub fn add_record(
        &mut self,
        rec_lsn: Lsn,
        data: &[u8],
        num_logops: u32,
        at: Location,
        out: &mut Vec<Transaction>,
    ) -> Result<()> {
        self.stats.records += 1;
        for op in record_ops(data, num_logops, at) {
            self.add_op(rec_lsn, &op?, at, out)?;
        }
        Ok(())
    }

    /// Feed one op.
    pub fn add_op(
        &mut self,
        rec_lsn: Lsn,
        op: &Op<'_>,
        at: Location,
        out: &mut Vec<Transaction>,
    ) -> Result<()> {
        self.stats.ops += 1;
        let h = op.header;
        let Some(p) = self.open.get_mut(&h.tid) else {
            if h.flags & OP_START != 0 {
                self.open.insert(
                    h.tid,
                    Pending {
                        tid: h.tid,
                        lsn: rec_lsn,
                        theader: Vec::new(),
                        header: None,
                        items: Vec::new(),
                    },
                );
            } else {
                if h.flags & OP_UNMOUNT != 0 {
                    self.stats.unmounts += 1;
                }
                self.stats.skipped_ops += 1;
            }
            return Ok(());
        };
        let mut flags = h.flags & !OP_END;
        if flags & OP_WAS_CONT != 0 {
            flags &= !OP_CONTINUE;
        }
        let bad = |d: String| Err(corrupt("log transaction", at, d));
        match flags {
            0 | OP_CONTINUE => add_region(p, op.payload, self.order, at),
            OP_WAS_CONT => add_continuation(p, op.payload, self.order, at),
            OP_COMMIT => {
                let p = self.open.remove(&h.tid).expect("present");
                out.push(finish(p, rec_lsn, at)?);
                self.stats.commits += 1;
                Ok(())
            }
            OP_UNMOUNT => {
                self.open.remove(&h.tid);
                self.stats.unmounts += 1;
                Ok(())
            }
            _ => bad(format!(
                "unexpected op flags {} for open transaction {:#x}",
                h.flag_names(),
                h.tid
            )),
        }
    }

    /// Transactions opened but not committed (yet).
    pub fn open_transactions(&self) -> usize {
        self.open.len()
    }
}

fn add_region(p: &mut Pending, data: &[u8], order: HostOrder, at: Location) -> Result<()> {
    if data.is_empty() {
        return Ok(());
    }
    let bad = |d: String| Err(corrupt("log transaction", at, d));
    if p.header.is_none() {
        if data.len() < 4 || order.u32(data, 0) != TRANS_MAGIC {
            return bad(format!("transaction {:#x} lacks its TRAN header", p.tid));
        }
        if data.len() > TRANS_HEADER_SIZE {
            return bad(format!("transaction header of {} bytes", data.len()));
        }
        p.theader = data.to_vec();
        if data.len() == TRANS_HEADER_SIZE {
            p.header = TransHeader::decode(&p.theader, order);
        }
        return Ok(());
    }
    match p.items.last_mut() {
        Some(it) if it.regions.len() < it.total => {
            it.regions.push(data.to_vec());
            return Ok(());
        }
        _ => {}
    }
    if data.len() < 4 {
        return bad(format!("item format header of {} bytes", data.len()));
    }
    let total = order.u16(data, 2) as usize;
    if total == 0 || total > MAX_REGIONS_IN_ITEM {
        return bad(format!(
            "item type {:#x} declares {total} regions",
            order.u16(data, 0)
        ));
    }
    p.items.push(LogItem {
        total,
        regions: vec![data.to_vec()],
    });
    Ok(())
}

fn add_continuation(p: &mut Pending, data: &[u8], order: HostOrder, at: Location) -> Result<()> {
    let bad = |d: String| Err(corrupt("log transaction", at, d));
    if p.header.is_none() {
        if p.theader.len() + data.len() > TRANS_HEADER_SIZE {
            return bad(format!(
                "transaction header continued to {} bytes",
                p.theader.len() + data.len()
            ));
        }
        p.theader.extend_from_slice(data);
        if p.theader.len() == TRANS_HEADER_SIZE {
            p.header = TransHeader::decode(&p.theader, order);
        }
        return Ok(());
    }
    match p.items.last_mut().and_then(|it| it.regions.last_mut()) {
        Some(r) => {
            r.extend_from_slice(data);
            Ok(())
        }
        None => bad(format!(
            "continued region with no region open in transaction {:#x}",
            p.tid
        )),
    }
}

fn finish(p: Pending, commit_lsn: Lsn, at: Location) -> Result<Transaction> {
    let Some(header) = p.header else {
        return Err(corrupt(
            "log transaction",
            at,
            format!("transaction {:#x} committed without a TRAN header", p.tid),
        ));
    };
    if let Some((i, it)) = p.items.iter().enumerate().find(|(_, it)| !it.is_complete()) {
        return Err(corrupt(
            "log transaction",
            at,
            format!(
                "transaction {:#x} item {i} has {} of {} regions",
                p.tid,
                it.regions.len(),
                it.total
            ),
        ));
    }
    Ok(Transaction {
        tid: p.tid,
        lsn: p.lsn,
        commit_lsn,
        header,
        items: p.items,
    })
}

/// Append one op (header + payload) to a record payload under construction.
pub fn push_op(buf: &mut Vec<u8>, tid: u32, clientid: u8, flags: u8, payload: &[u8]) {
    let mut h = [0u8; OP_HEADER_SIZE];
    OpHeader {
        tid,
        len: payload.len() as u32,
        clientid,
        flags,
        reserved: 0,
    }
    .encode(&mut h);
    buf.extend_from_slice(&h);
    buf.extend_from_slice(payload);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::log::TRANS_CHECKPOINT;

    const O: HostOrder = HostOrder::Little;
    const AT: Location = Location::Unknown;

    fn theader(n: u32) -> Vec<u8> {
        let mut b = vec![0u8; 16];
        TransHeader {
            magic: TRANS_MAGIC,
            trans_type: TRANS_CHECKPOINT,
            tid: 1,
            num_items: n,
        }
        .encode(&mut b, O);
        b
    }

    fn format_region(ty: u16, regions: u16, len: usize) -> Vec<u8> {
        let mut b = vec![0xabu8; len];
        O.put_u16(&mut b, 0, ty);
        O.put_u16(&mut b, 2, regions);
        b
    }

    #[test]
    fn ops_iterate_and_bound() {
        let mut d = Vec::new();
        push_op(&mut d, 5, CLIENT_TRANSACTION, OP_START, &[]);
        push_op(&mut d, 5, CLIENT_TRANSACTION, 0, &[1, 2, 3, 4]);
        let ops: Vec<_> = record_ops(&d, 10, AT).collect::<Result<_>>().unwrap();
        assert_eq!(ops.len(), 2);
        assert_eq!(ops[1].payload, &[1, 2, 3, 4]);
        assert_eq!(ops[1].offset, 12);
        // num_logops limits the walk.
        assert_eq!(record_ops(&d, 1, AT).count(), 1);
        // An op overrunning the payload is corrupt, once.
        let r: Vec<_> = record_ops(&d[..20], 10, AT).collect();
        assert_eq!(r.len(), 2);
        assert!(r[1].as_ref().unwrap_err().is_corrupt());
        // A bad client id is corrupt.
        let mut bad = d.clone();
        bad[8] = 0x42;
        assert!(record_ops(&bad, 10, AT).next().unwrap().is_err());
    }

    #[test]
    fn assemble_across_records() {
        // Record 1: START, TRAN (split 10 + 6), ...
        let th = theader(2);
        let buf_fmt = format_region(0x123c, 2, 24);
        let buf_data = vec![0x55u8; 300];
        let ino_fmt = format_region(0x123b, 1, 56);
        let mut r1 = Vec::new();
        push_op(&mut r1, 9, CLIENT_TRANSACTION, 0, b"junk"); // not open: skipped
        push_op(&mut r1, 9, CLIENT_TRANSACTION, OP_START, &[]);
        push_op(&mut r1, 9, CLIENT_TRANSACTION, OP_CONTINUE, &th[..10]);
        let mut r2 = Vec::new();
        push_op(
            &mut r2,
            9,
            CLIENT_TRANSACTION,
            OP_WAS_CONT | OP_END,
            &th[10..],
        );
        push_op(&mut r2, 9, CLIENT_TRANSACTION, 0, &buf_fmt);
        push_op(
            &mut r2,
            9,
            CLIENT_TRANSACTION,
            OP_CONTINUE,
            &buf_data[..100],
        );
        let mut r3 = Vec::new();
        push_op(
            &mut r3,
            9,
            CLIENT_TRANSACTION,
            OP_WAS_CONT | OP_CONTINUE,
            &buf_data[100..200],
        );
        let mut r4 = Vec::new();
        push_op(
            &mut r4,
            9,
            CLIENT_TRANSACTION,
            OP_WAS_CONT | OP_END,
            &buf_data[200..],
        );
        push_op(&mut r4, 9, CLIENT_TRANSACTION, 0, &ino_fmt);
        push_op(&mut r4, 9, CLIENT_TRANSACTION, OP_COMMIT, &[]);

        let mut a = TransAssembler::new(O);
        let mut out = Vec::new();
        for (i, r) in [&r1, &r2, &r3, &r4].iter().enumerate() {
            a.add_record(Lsn::new(1, i as u32 * 10), r, 100, AT, &mut out)
                .unwrap();
            if i < 3 {
                assert!(out.is_empty());
            }
        }
        assert_eq!(out.len(), 1);
        let t = &out[0];
        assert_eq!(t.lsn, Lsn::new(1, 0));
        assert_eq!(t.commit_lsn, Lsn::new(1, 30));
        assert_eq!(t.header.num_items, 2);
        assert_eq!(t.items.len(), 2);
        assert_eq!(t.items[0].item_type(O), 0x123c);
        assert_eq!(t.items[0].regions[1], buf_data);
        assert_eq!(t.items[1].item_type(O), 0x123b);
        assert_eq!(a.stats.skipped_ops, 1);
        assert_eq!(a.open_transactions(), 0);
    }

    #[test]
    fn assembler_rejects_bad_streams() {
        let mut out = Vec::new();
        // Data without TRAN header.
        let mut a = TransAssembler::new(O);
        a.add_op(Lsn::new(1, 0), &op(1, OP_START, &[]), AT, &mut out)
            .unwrap();
        assert!(a
            .add_op(Lsn::new(1, 0), &op(1, 0, &[0; 8]), AT, &mut out)
            .is_err());
        // Region count 0.
        let mut a = TransAssembler::new(O);
        a.add_op(Lsn::new(1, 0), &op(1, OP_START, &[]), AT, &mut out)
            .unwrap();
        a.add_op(Lsn::new(1, 0), &op(1, 0, &theader(1)), AT, &mut out)
            .unwrap();
        let f = format_region(0x123c, 0, 24);
        assert!(a
            .add_op(Lsn::new(1, 0), &op(1, 0, &f), AT, &mut out)
            .is_err());
        // Commit with an incomplete item.
        let mut a = TransAssembler::new(O);
        a.add_op(Lsn::new(1, 0), &op(1, OP_START, &[]), AT, &mut out)
            .unwrap();
        a.add_op(Lsn::new(1, 0), &op(1, 0, &theader(1)), AT, &mut out)
            .unwrap();
        let f = format_region(0x123c, 3, 24);
        a.add_op(Lsn::new(1, 0), &op(1, 0, &f), AT, &mut out)
            .unwrap();
        assert!(a
            .add_op(Lsn::new(1, 0), &op(1, OP_COMMIT, &[]), AT, &mut out)
            .is_err());
        // Unmount drops an open transaction.
        let mut a = TransAssembler::new(O);
        a.add_op(Lsn::new(1, 0), &op(1, OP_START, &[]), AT, &mut out)
            .unwrap();
        a.add_op(Lsn::new(1, 0), &op(1, OP_UNMOUNT, &[]), AT, &mut out)
            .unwrap();
        assert_eq!(a.open_transactions(), 0);
        assert!(out.is_empty());
    }

    fn op(tid: u32, flags: u8, payload: &[u8]) -> Op<'_> {
        Op {
            header: OpHeader {
                tid,
                len: payload.len() as u32,
                clientid: CLIENT_TRANSACTION,
                flags,
                reserved: 0,
            },
            payload,
            offset: 0,
        }
    }
}
