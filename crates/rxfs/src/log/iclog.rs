//! In-core log buffers: their states, filling them with ops, and turning a
//! switched-out buffer into the bytes of a log record.
//!
//! ```text
//!  one iclog of logbsize bytes:
//!  +-------------------+----------------------------------------------+
//!  | header BBs (1, or | payload: ops appended by writers, at most    |
//!  | logbsize / 32 KiB)| logbsize - header bytes; padded to a BB at   |
//!  | filled at I/O time| switch-out (h_len includes the padding, v2)  |
//!  +-------------------+----------------------------------------------+
//! ```
//!
//! Invariants: `data.len() <= capacity`; every op header lies whole in the
//! payload; a buffer takes ops only while ACTIVE and current; its `lsn` is
//! set when the first op goes in and cleared when it returns to ACTIVE.

use crate::error::{Error, Result};
use crate::format::log::VERSION_2;
use crate::format::log::{btobb, BBSIZE, MAX_RECORD_BSIZE, MIN_RECORD_BSIZE, OP_COMMIT};
use crate::format::log::{OP_CONTINUE, OP_END, OP_HEADER_SIZE, OP_START, OP_WAS_CONT};
use crate::format::log_ops::push_op;
use crate::format::log_record::{header_blocks_for, LogRecord, RecordHeader};
use crate::types::Lsn;

/// Smallest and largest number of log buffers.
pub const MIN_LOGBUFS: usize = 2;
pub const MAX_LOGBUFS: usize = crate::format::log::MAX_ICLOGS;

/// State of one log buffer (see the module doc of [`crate::log`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IclogState {
    /// Accepting ops (when current) or idle.
    Active,
    /// Switched out: no more ops; about to be handed to its I/O thread.
    WantSync,
    /// Its write is in flight.
    Syncing,
    /// Its write finished; waits for earlier buffers' completions.
    DoneSync,
    /// In a completion pass (callbacks running).
    Callback,
}

/// Called once the record holding an LSN is on disk (`Ok(record lsn)`), or
/// the log shut down first (`Err`).
pub type StableCallback = Box<dyn FnOnce(Result<Lsn>) + Send>;

/// Check `logbufs` / `logbsize` as the kernel's mount options do.
pub fn check_buffers(logbufs: usize, logbsize: u32) -> Result<()> {
    if !(MIN_LOGBUFS..=MAX_LOGBUFS).contains(&logbufs) {
        return Err(Error::Invalid(format!(
            "invalid logbufs {logbufs} [not {MIN_LOGBUFS}..{MAX_LOGBUFS}]"
        )));
    }
    let s = logbsize as usize;
    if !(MIN_RECORD_BSIZE..=MAX_RECORD_BSIZE).contains(&s) || !s.is_power_of_two() {
        return Err(Error::Invalid(format!(
            "invalid logbufsize {logbsize} [not 16k, 32k, 64k, 128k or 256k]"
        )));
    }
    Ok(())
}

/// Header BBs of a record written from a buffer of `logbsize` bytes.
pub fn header_bbs(logbsize: u32) -> u32 {
    header_blocks_for(VERSION_2, logbsize)
}

/// Payload bytes one buffer of `logbsize` bytes holds.
pub fn payload_capacity(logbsize: u32) -> usize {
    logbsize as usize - header_bbs(logbsize) as usize * BBSIZE
}

/// The write a switched-out buffer hands to its I/O thread.
pub(crate) struct IoJob {
    pub header: RecordHeader,
    /// Unpacked payload, padded to a whole BB; `header.len` bytes.
    pub payload: Vec<u8>,
    /// Submission order (ring order).
    pub seq: u64,
    /// Holds a commit (or unmount) record: PREFLUSH + FUA semantics.
    pub need_flush: bool,
}

/// One in-core log buffer.
pub(crate) struct Iclog {
    pub state: IclogState,
    /// LSN of the record (set when the first op goes in).
    pub lsn: Lsn,
    /// Block of the record before this one (`h_prev_block`).
    pub prev_block: u32,
    pub data: Vec<u8>,
    pub num_ops: u32,
    pub need_flush: bool,
    /// A commit waits in this ACTIVE buffer for the commit slot to free.
    pub push_when_idle: bool,
    /// Forces sleeping until this buffer is stable (the commit gate counts
    /// them as coming back soon).
    pub forcers: usize,
    pub job: Option<IoJob>,
    pub callbacks: Vec<StableCallback>,
    /// The write's result, set by the I/O thread.
    pub io_error: Option<String>,
}

impl Iclog {
    pub fn new(capacity: usize) -> Self {
        Iclog {
            state: IclogState::Active,
            lsn: Lsn(0),
            prev_block: u32::MAX,
            data: Vec::with_capacity(capacity),
            num_ops: 0,
            need_flush: false,
            push_when_idle: false,
            forcers: 0,
            job: None,
            callbacks: Vec::new(),
            io_error: None,
        }
    }

    /// Whether ops were written into this (ACTIVE) buffer.
    pub fn is_open(&self) -> bool {
        self.state == IclogState::Active && !self.data.is_empty()
    }

    /// Back to ACTIVE after a completion pass, reusing `buf`'s memory.
    pub fn reset(&mut self, mut buf: Vec<u8>) {
        buf.clear();
        self.data = buf;
        self.state = IclogState::Active;
        self.lsn = Lsn(0);
        self.num_ops = 0;
        self.need_flush = false;
        self.push_when_idle = false;
        self.forcers = 0;
        self.io_error = None;
    }

    /// Append as much of one op as fits in `capacity`: returns the payload
    /// bytes taken. `first`: this is the op's first piece. The caller made
    /// sure at least one op header and one byte (or the whole of an empty
    /// op) fit.
    pub fn append_op(
        &mut self,
        capacity: usize,
        op: (u32, u8, u8),
        data: &[u8],
        first: bool,
    ) -> usize {
        let (tid, clientid, mut flags) = op;
        let space = capacity - self.data.len();
        debug_assert!(space >= OP_HEADER_SIZE + (!data.is_empty()) as usize);
        let take = data.len().min(space - OP_HEADER_SIZE);
        if !first {
            flags = (flags & !(OP_START | OP_COMMIT)) | OP_WAS_CONT;
        }
        if take < data.len() {
            flags |= OP_CONTINUE;
        } else if !first {
            flags |= OP_END;
        }
        push_op(&mut self.data, tid, clientid, flags, &data[..take]);
        self.num_ops += 1;
        take
    }
}

/// Whether a buffer holding `used` payload bytes must be switched out
/// before another op goes in (no room for an op header and one byte).
pub fn is_full(capacity: usize, used: usize) -> bool {
    capacity - used < OP_HEADER_SIZE + 1
}

/// One record ready for the device: its header BBs and its payload BBs
/// (the buffer the payload was filled in, stamped in place), and where it
/// goes.
pub(crate) struct RecordBytes {
    header: Vec<u8>,
    /// The filled buffer; its first `data_len` bytes are the payload BBs.
    pub data: Vec<u8>,
    data_len: usize,
    block: u32,
    /// BBs before the end of the log when the record crosses it.
    wrap: Option<u32>,
}

impl RecordBytes {
    /// The device writes, one per piece: (log block, byte range of the
    /// record) once, or twice when the record crosses the end of the log
    /// (the piece at block 0 carries the next cycle in its stamped words,
    /// as the format requires). The record's bytes are laid out whole in
    /// `out` (a buffer the caller keeps from record to record: the copy
    /// costs less than a fresh buffer's page faults).
    pub fn lay_out(&self, out: &mut Vec<u8>) -> Vec<(u32, std::ops::Range<usize>)> {
        out.clear();
        out.extend_from_slice(&self.header);
        out.extend_from_slice(&self.data[..self.data_len]);
        match self.wrap {
            None => vec![(self.block, 0..out.len())],
            Some(first) => {
                let cut = first as usize * BBSIZE;
                vec![(self.block, 0..cut), (0, cut..out.len())]
            }
        }
    }
}

/// Pack and stamp the record of `job` for a log of `log_bbs` blocks.
pub(crate) fn record_bytes(job: IoJob, log_bbs: u32) -> RecordBytes {
    let block = job.header.lsn.block();
    let mut rec = LogRecord::new(job.header, job.payload);
    rec.pack();
    let total = rec.header.total_blocks();
    debug_assert!(total < log_bbs);
    let wrap = (block as u64 + total as u64 > log_bbs as u64).then(|| log_bbs - block);
    let header = rec.encode_header(wrap);
    let data_len = rec.data_bytes().len();
    RecordBytes {
        header,
        data: rec.data,
        data_len,
        block,
        wrap,
    }
}

/// Payload bytes after padding `len` to a whole BB.
pub fn padded_len(len: usize) -> usize {
    btobb(len as u64) as usize * BBSIZE
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::log::{CLIENT_TRANSACTION, FMT_LINUX_LE};

    #[test]
    fn kernel_buffer_rules() {
        for s in [16384, 32768, 65536, 131072, 262144] {
            check_buffers(8, s).unwrap();
        }
        for s in [8192, 49152, 524288, 0] {
            assert!(check_buffers(8, s).is_err(), "{s}");
        }
        assert!(check_buffers(1, 32768).is_err());
        assert!(check_buffers(9, 32768).is_err());
        check_buffers(2, 32768).unwrap();
        assert_eq!(header_bbs(32768), 1);
        assert_eq!(header_bbs(262144), 8);
        assert_eq!(payload_capacity(32768), 32768 - 512);
        assert_eq!(payload_capacity(65536), 65536 - 1024);
    }

    #[test]
    fn split_op_flags() {
        let mut ic = Iclog::new(64);
        let data = [7u8; 100];
        let take = ic.append_op(64, (5, CLIENT_TRANSACTION, 0), &data, true);
        assert_eq!(take, 52);
        assert_eq!(ic.data[9], OP_CONTINUE);
        assert!(is_full(64, ic.data.len()));
        let mut ic2 = Iclog::new(64);
        let t2 = ic2.append_op(64, (5, CLIENT_TRANSACTION, 0), &data[52..], false);
        assert_eq!(t2, 48);
        assert_eq!(ic2.data[9], OP_WAS_CONT | OP_END);
    }

    #[test]
    fn wrapped_record_is_two_pieces() {
        let h = RecordHeader::new(
            3,
            Lsn::new(3, 98),
            Lsn::new(3, 0),
            FMT_LINUX_LE,
            [1; 16],
            32768,
        );
        let job = IoJob {
            header: h,
            payload: vec![0x11; 1024],
            seq: 0,
            need_flush: false,
        };
        let r = record_bytes(job, 100);
        let mut raw = Vec::new();
        let p: Vec<(u32, Vec<u8>)> = r
            .lay_out(&mut raw)
            .into_iter()
            .map(|(b, at)| (b, raw[at].to_vec()))
            .collect();
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].0, p[0].1.len()), (98, 1024));
        assert_eq!((p[1].0, p[1].1.len()), (0, 512));
        assert_eq!(crate::format::log::block_cycle(&p[1].1), 4);
        assert_eq!(crate::format::log::block_cycle(&p[0].1[512..]), 3);
    }
}
