//! The XFS log (journal): on-disk format shared by all log code.
//!
//! The log is a circular area of 512-byte *basic blocks* (BBs): inside the
//! data device at `sb_logstart` for an internal log. Writers append *log
//! records* at the head; the tail is the oldest record whose changes may not
//! yet be on disk. An LSN is `cycle << 32 | block`, where `cycle` counts the
//! passes over the log (starting at 1) and `block` is the BB offset of a
//! record inside the log.
//!
//! This module is split by layer:
//! - here: constants, log sequence helpers, the op header (12 bytes), the
//!   transaction header (`TRAN`), the unmount record, and [`HostOrder`];
//! - [`super::log_record`]: the record header (328 bytes, 0xFEEDBABE), the
//!   extended headers of big log buffers, cycle stamping ("pack"/"unpack"),
//!   and the record CRC;
//! - [`super::log_ops`]: iterating the ops of a record and reassembling the
//!   regions of each transaction (checkpoint), across record boundaries;
//! - [`super::log_items`]: the log item formats (BUF, INODE, ICREATE and the
//!   intent/done pairs) found in the first region of each item.
//!
//! ```text
//!  one log record on disk (basic blocks, wrapping at the end of the log):
//!  +-----------+-----------+-----+-----------------------------------------+
//!  | rec header| ext hdr 1 | ... | payload: h_len bytes, BTOBB(h_len) BBs   |
//!  | 0xFEEDBABE| (h_size > |     | first u32 of every payload BB replaced  |
//!  | 328 B used| 32 KiB)   |     | by the cycle; originals in cycle_data   |
//!  +-----------+-----------+-----+-----------------------------------------+
//!
//!  payload (after unpacking) = a sequence of ops:
//!  +----------------------------+--------------------+
//!  | op header (12 B, BE)       | oh_len bytes of    |
//!  | tid | len | client | flags | region data        |
//!  +----------------------------+--------------------+
//!
//!  a checkpoint (transaction) as ops, possibly spread over many records:
//!  START (len 0) | TRAN header (16 B) | item 0 region 0 | item 0 region 1 |
//!  ... | item N region k | COMMIT (len 0)
//!  The first region of an item is its format header; its second u16 is the
//!  number of regions of the item. A region that does not fit in a record
//!  ends with flag CONTINUE; the next record carries the rest with flag
//!  WAS_CONT (and END on the last piece).
//! ```
//!
//! Byte order: record and op headers are big-endian. The `TRAN` header, the
//! item format headers and the logged inode core are in the byte order of the
//! host that wrote the log (`h_fmt`: 1 little-endian Linux, 2 big-endian
//! Linux); [`HostOrder`] carries that choice. Logged buffer contents are
//! copies of disk blocks (big-endian as on disk).

use crate::error::{Error, Location, Result};
use crate::types::Lsn;

/// Basic block size: the unit of the log.
pub const BBSIZE: usize = 512;
/// log2 of [`BBSIZE`].
pub const BBSHIFT: u32 = 9;

/// Magic of a log record header ("feed babe"); never a valid cycle number.
pub const RECORD_MAGIC: u32 = 0xFEED_BABE;
pub const VERSION_1: u32 = 1;
/// Version 2 logs: log buffers up to 256 KiB, log stripe unit.
pub const VERSION_2: u32 = 2;
pub const VERSION_OKBITS: u32 = VERSION_1 | VERSION_2;

/// Payload bytes whose cycle words fit in one header's cycle data.
pub const HEADER_CYCLE_SIZE: usize = 32 * 1024;
/// Cycle-data words in one (extended) header: one per payload BB.
pub const CYCLE_DATA_WORDS: usize = HEADER_CYCLE_SIZE / BBSIZE;
/// Largest log buffer (record) size of a v2 log.
pub const MAX_RECORD_BSIZE: usize = 256 * 1024;
/// Smallest log buffer size the kernel uses.
pub const MIN_RECORD_BSIZE: usize = 16 * 1024;
/// Log buffers (records in flight) at most.
pub const MAX_ICLOGS: usize = 8;
/// Most header BBs one record can have (`MAX_RECORD_BSIZE / HEADER_CYCLE_SIZE`).
pub const MAX_HEADER_BLOCKS: u32 = (MAX_RECORD_BSIZE / HEADER_CYCLE_SIZE) as u32;

/// `h_fmt` values.
pub const FMT_UNKNOWN: u32 = 0;
pub const FMT_LINUX_LE: u32 = 1;
pub const FMT_LINUX_BE: u32 = 2;
pub const FMT_IRIX_BE: u32 = 3;

/// Op header client ids.
pub const CLIENT_TRANSACTION: u8 = 0x69;
pub const CLIENT_LOG: u8 = 0xaa;

/// Op header flags.
pub const OP_START: u8 = 0x01;
pub const OP_COMMIT: u8 = 0x02;
pub const OP_CONTINUE: u8 = 0x04;
pub const OP_WAS_CONT: u8 = 0x08;
pub const OP_END: u8 = 0x10;
pub const OP_UNMOUNT: u8 = 0x20;

/// Size of an op header.
pub const OP_HEADER_SIZE: usize = 12;

/// Transaction header magic "TRAN" (host order).
pub const TRANS_MAGIC: u32 = 0x5452_414e;
/// Size of a transaction header.
pub const TRANS_HEADER_SIZE: usize = 16;
/// The only transaction type of delayed-logging (CIL) logs.
pub const TRANS_CHECKPOINT: u32 = 40;

/// Magic in the body of an unmount record ("Un").
pub const UNMOUNT_TYPE: u16 = 0x556e;
/// Size of the unmount record body.
pub const UNMOUNT_BODY_SIZE: usize = 8;

/// Number of basic blocks holding `bytes` (rounded up).
pub fn btobb(bytes: u64) -> u64 {
    bytes.div_ceil(BBSIZE as u64)
}

/// Byte order of host-order log structures, from the record's `h_fmt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostOrder {
    Little,
    Big,
}

impl HostOrder {
    /// The byte order a record with format `fmt` was written in.
    pub fn from_fmt(fmt: u32) -> Option<Self> {
        match fmt {
            FMT_LINUX_LE => Some(HostOrder::Little),
            FMT_LINUX_BE | FMT_IRIX_BE => Some(HostOrder::Big),
            _ => None,
        }
    }

    /// The `h_fmt` a writer in this byte order stamps.
    pub fn fmt(self) -> u32 {
        match self {
            HostOrder::Little => FMT_LINUX_LE,
            HostOrder::Big => FMT_LINUX_BE,
        }
    }

    /// The byte order of this machine (what rxfs writes).
    pub fn native() -> Self {
        if cfg!(target_endian = "little") {
            HostOrder::Little
        } else {
            HostOrder::Big
        }
    }

    /// Read a u16 at `off`. Callers bound-check first.
    pub fn u16(self, b: &[u8], off: usize) -> u16 {
        let a = [b[off], b[off + 1]];
        match self {
            HostOrder::Little => u16::from_le_bytes(a),
            HostOrder::Big => u16::from_be_bytes(a),
        }
    }

    /// Read a u32 at `off`. Callers bound-check first.
    pub fn u32(self, b: &[u8], off: usize) -> u32 {
        let a: [u8; 4] = b[off..off + 4].try_into().unwrap();
        match self {
            HostOrder::Little => u32::from_le_bytes(a),
            HostOrder::Big => u32::from_be_bytes(a),
        }
    }

    /// Read a u64 at `off`. Callers bound-check first.
    pub fn u64(self, b: &[u8], off: usize) -> u64 {
        let a: [u8; 8] = b[off..off + 8].try_into().unwrap();
        match self {
            HostOrder::Little => u64::from_le_bytes(a),
            HostOrder::Big => u64::from_be_bytes(a),
        }
    }

    pub fn put_u16(self, b: &mut [u8], off: usize, v: u16) {
        let a = match self {
            HostOrder::Little => v.to_le_bytes(),
            HostOrder::Big => v.to_be_bytes(),
        };
        b[off..off + 2].copy_from_slice(&a);
    }

    pub fn put_u32(self, b: &mut [u8], off: usize, v: u32) {
        let a = match self {
            HostOrder::Little => v.to_le_bytes(),
            HostOrder::Big => v.to_be_bytes(),
        };
        b[off..off + 4].copy_from_slice(&a);
    }

    pub fn put_u64(self, b: &mut [u8], off: usize, v: u64) {
        let a = match self {
            HostOrder::Little => v.to_le_bytes(),
            HostOrder::Big => v.to_be_bytes(),
        };
        b[off..off + 8].copy_from_slice(&a);
    }
}

/// The cycle a log block shows: `h_cycle` for a record header block, the
/// first (stamped) word for any other written block, 0 for a never-written
/// block. Recovery finds the head from these.
pub fn block_cycle(block: &[u8]) -> u32 {
    debug_assert!(block.len() >= 8);
    let w0 = super::be32(block, 0);
    if w0 == RECORD_MAGIC {
        super::be32(block, 4)
    } else {
        w0
    }
}

/// Whether a log block starts a record header.
pub fn is_record_header(block: &[u8]) -> bool {
    block.len() >= 4 && super::be32(block, 0) == RECORD_MAGIC
}

/// Cycle-aware LSN comparison is plain integer comparison: cycles grow and
/// blocks grow within a cycle. (The kernel's `XFS_LSN_CMP` compares the
/// cycle first, then the block, which is the same order.)
pub fn lsn_cmp(a: Lsn, b: Lsn) -> std::cmp::Ordering {
    (a.cycle(), a.block()).cmp(&(b.cycle(), b.block()))
}

/// An op header: 12 bytes, big-endian, before every region in a record.
///
/// ```text
///   0 tid (u32)   4 len (u32: payload bytes in this record)
///   8 clientid (u8)   9 flags (u8)   10 reserved (u16)
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OpHeader {
    pub tid: u32,
    pub len: u32,
    pub clientid: u8,
    pub flags: u8,
    pub reserved: u16,
}

impl OpHeader {
    pub fn decode(b: &[u8]) -> Option<Self> {
        if b.len() < OP_HEADER_SIZE {
            return None;
        }
        Some(OpHeader {
            tid: super::be32(b, 0),
            len: super::be32(b, 4),
            clientid: b[8],
            flags: b[9],
            reserved: super::be16(b, 10),
        })
    }

    pub fn encode(&self, b: &mut [u8]) {
        super::put_be32(b, 0, self.tid);
        super::put_be32(b, 4, self.len);
        b[8] = self.clientid;
        b[9] = self.flags;
        super::put_be16(b, 10, self.reserved);
    }

    /// Human-readable flag names, e.g. `"START|COMMIT"`.
    pub fn flag_names(&self) -> String {
        const NAMES: [(u8, &str); 6] = [
            (OP_START, "START"),
            (OP_COMMIT, "COMMIT"),
            (OP_CONTINUE, "CONTINUE"),
            (OP_WAS_CONT, "WAS_CONT"),
            (OP_END, "END"),
            (OP_UNMOUNT, "UNMOUNT"),
        ];
        let mut s: Vec<String> = NAMES
            .iter()
            .filter(|(bit, _)| self.flags & bit != 0)
            .map(|(_, n)| n.to_string())
            .collect();
        let unknown = self.flags & !0x3f;
        if unknown != 0 {
            s.push(format!("{unknown:#x}"));
        }
        if s.is_empty() {
            "0".into()
        } else {
            s.join("|")
        }
    }
}

/// The transaction header that opens every transaction (checkpoint), host
/// order:
///
/// ```text
///   0 magic "TRAN"   4 type (40 = checkpoint)   8 tid   12 num_items
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransHeader {
    pub magic: u32,
    pub trans_type: u32,
    pub tid: u32,
    pub num_items: u32,
}

impl TransHeader {
    /// Decode 16 bytes; the magic is checked by the caller (it needs the
    /// location for the error).
    pub fn decode(b: &[u8], order: HostOrder) -> Option<Self> {
        if b.len() < TRANS_HEADER_SIZE {
            return None;
        }
        Some(TransHeader {
            magic: order.u32(b, 0),
            trans_type: order.u32(b, 4),
            tid: order.u32(b, 8),
            num_items: order.u32(b, 12),
        })
    }

    pub fn encode(&self, b: &mut [u8], order: HostOrder) {
        order.put_u32(b, 0, self.magic);
        order.put_u32(b, 4, self.trans_type);
        order.put_u32(b, 8, self.tid);
        order.put_u32(b, 12, self.num_items);
    }
}

/// The body of an unmount record op (clientid LOG, flag UNMOUNT), host order:
/// `magic 0x556e (u16), pad (u16), pad (u32)`.
pub fn encode_unmount_body(order: HostOrder) -> [u8; UNMOUNT_BODY_SIZE] {
    let mut b = [0u8; UNMOUNT_BODY_SIZE];
    order.put_u16(&mut b, 0, UNMOUNT_TYPE);
    b
}

/// Whether `op` (with its payload) is an unmount record.
pub fn is_unmount_op(op: &OpHeader) -> bool {
    op.flags & OP_UNMOUNT != 0
}

/// A corruption error about the log at `at`.
pub(crate) fn corrupt(what: &'static str, at: Location, detail: impl Into<String>) -> Error {
    Error::corrupt(what, at, detail)
}

/// Smallest log rxfs walks, in basic blocks (mkfs makes far larger ones).
pub const MIN_LOG_BBS: u64 = 64;

/// Check that a log of `log_bbs` blocks is one rxfs can walk: LSN blocks are
/// 32-bit (and the kernel keeps them below `i32::MAX`), and the head search
/// needs a few blocks to work with.
pub fn check_log_size(log_bbs: u64, at: Location) -> Result<()> {
    if !(MIN_LOG_BBS..=i32::MAX as u64).contains(&log_bbs) {
        return Err(corrupt(
            "log",
            at,
            format!("log of {log_bbs} basic blocks is outside the supported range"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_header_roundtrip() {
        let op = OpHeader {
            tid: 0xdead_beef,
            len: 0x1234,
            clientid: CLIENT_TRANSACTION,
            flags: OP_CONTINUE | OP_WAS_CONT,
            reserved: 0,
        };
        let mut b = [0u8; OP_HEADER_SIZE];
        op.encode(&mut b);
        assert_eq!(&b[..4], &[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(b[8], 0x69);
        assert_eq!(OpHeader::decode(&b), Some(op));
        assert_eq!(op.flag_names(), "CONTINUE|WAS_CONT");
        assert!(OpHeader::decode(&b[..11]).is_none());
    }

    #[test]
    fn trans_header_host_order() {
        let th = TransHeader {
            magic: TRANS_MAGIC,
            trans_type: TRANS_CHECKPOINT,
            tid: 7,
            num_items: 3,
        };
        let mut b = [0u8; 16];
        th.encode(&mut b, HostOrder::Little);
        // "TRAN" in little-endian host order reads "NART" on disk.
        assert_eq!(&b[..4], b"NART");
        assert_eq!(TransHeader::decode(&b, HostOrder::Little), Some(th));
        assert_ne!(TransHeader::decode(&b, HostOrder::Big), Some(th));
        th.encode(&mut b, HostOrder::Big);
        assert_eq!(&b[..4], b"TRAN");
    }

    #[test]
    fn block_cycles() {
        let mut b = [0u8; 512];
        assert_eq!(block_cycle(&b), 0);
        b[..4].copy_from_slice(&5u32.to_be_bytes());
        assert_eq!(block_cycle(&b), 5);
        assert!(!is_record_header(&b));
        b[..4].copy_from_slice(&RECORD_MAGIC.to_be_bytes());
        b[4..8].copy_from_slice(&9u32.to_be_bytes());
        assert_eq!(block_cycle(&b), 9);
        assert!(is_record_header(&b));
    }

    #[test]
    fn unmount_body() {
        let b = encode_unmount_body(HostOrder::Little);
        assert_eq!(b, [0x6e, 0x55, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn host_order_fmt() {
        assert_eq!(HostOrder::from_fmt(1), Some(HostOrder::Little));
        assert_eq!(HostOrder::from_fmt(2), Some(HostOrder::Big));
        assert_eq!(HostOrder::from_fmt(0), None);
        assert_eq!(HostOrder::Little.fmt(), 1);
    }
}
