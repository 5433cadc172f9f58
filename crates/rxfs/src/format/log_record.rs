//! Log records: the record header, extended headers, cycle stamping, CRC.
//!
//! Record header (first BB of a record, big-endian except the CRC):
//! ```text
//!   0 magic 0xFEEDBABE   4 cycle   8 version (2)   12 len (payload bytes)
//!  16 lsn (u64)   24 tail_lsn (u64)   32 crc (u32 LE)   36 prev_block
//!  40 num_logops   44 cycle_data[64] (u32 each)   300 fmt   304 fs uuid[16]
//! 320 size (log buffer bytes, v2)   324 pad (0)   328..512 zero
//! ```
//! Extended header (one more BB per further 32 KiB of log buffer):
//! ```text
//!   0 cycle   4 cycle_data[64]   260..512 zero
//! ```
//! A record with log buffer size `h_size > 32 KiB` (v2 logs, `logbsize` of
//! 64k..256k) has `ceil(h_size / 32 KiB)` header BBs: the record header and
//! `ceil(h_size / 32 KiB) - 1` extended headers; all are written, whatever
//! the record's length.
//!
//! Cycle stamping ("packing"): before the write, the first u32 of every
//! payload BB `i` is saved in cycle-data word `i` (words 0..63 in the record
//! header, word `i` >= 64 in extended header `i / 64`, slot `i % 64`) and
//! replaced by the record's cycle, so that every written BB of the log tells
//! which pass over the log wrote it. Reading undoes it ("unpacking"). A
//! record that wraps past the end of the log gets the BBs written at the
//! start of the log stamped with cycle + 1 (they belong to the next pass).
//!
//! CRC32c (stored little-endian at 32, computed with that field zero) covers,
//! in this order: the first 328 bytes of the record header; the first 260
//! bytes (cycle + cycle data) of extended headers 1..ceil(h_len / 32 KiB)
//! (by the record *length*, not the buffer size); then the `h_len` payload
//! bytes as they are on disk (stamped). A stored CRC of 0 means "no CRC"
//! (mkfs and `xfs_db logformat` write such records; the kernel accepts them).
//! Kernels built for i386 cover 324 header bytes instead of 328; both are
//! accepted, as the kernel does.

use super::log::{btobb, corrupt, BBSIZE, CYCLE_DATA_WORDS, HEADER_CYCLE_SIZE, MAX_HEADER_BLOCKS};
use super::log::{MAX_RECORD_BSIZE, RECORD_MAGIC, VERSION_2, VERSION_OKBITS};
use super::{be32, be64, put_be32, put_be64, Uuid};
use crate::error::{Location, Result};
use crate::types::Lsn;

/// Bytes of the record header that the CRC covers (64-bit layout).
pub const REC_CRC_SIZE: usize = 328;
/// Bytes of the record header that an i386 kernel's CRC covers.
pub const REC_CRC_SIZE_I386: usize = 324;
/// Bytes of an extended header that the CRC covers.
pub const EXT_CRC_SIZE: usize = 4 + 4 * CYCLE_DATA_WORDS;
/// Offset of the CRC in the record header.
pub const CRC_OFF: usize = 32;
const CYCLE_DATA_OFF: usize = 44;

/// A decoded record header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordHeader {
    pub cycle: u32,
    pub version: u32,
    /// Payload bytes (`h_len`).
    pub len: u32,
    pub lsn: Lsn,
    /// Oldest LSN with changes not yet on disk when this record was written.
    pub tail_lsn: Lsn,
    /// Stored CRC (0: none).
    pub crc: u32,
    /// Log block of the previous record (`u32::MAX`: none).
    pub prev_block: u32,
    pub num_logops: u32,
    pub cycle_data: [u32; CYCLE_DATA_WORDS],
    pub fmt: u32,
    pub uuid: Uuid,
    /// Log buffer size (`h_size`), v2 only.
    pub size: u32,
}

impl RecordHeader {
    /// A header with the given identity and everything else zero.
    pub fn new(cycle: u32, lsn: Lsn, tail_lsn: Lsn, fmt: u32, uuid: Uuid, size: u32) -> Self {
        RecordHeader {
            cycle,
            version: VERSION_2,
            len: 0,
            lsn,
            tail_lsn,
            crc: 0,
            prev_block: u32::MAX,
            num_logops: 0,
            cycle_data: [0; CYCLE_DATA_WORDS],
            fmt,
            uuid,
            size,
        }
    }

    /// Decode and check a record header from the first BB of a record.
    /// `at` locates the block for errors.
    pub fn decode(b: &[u8], at: Location) -> Result<Self> {
        if b.len() < BBSIZE {
            return Err(corrupt("log record header", at, "short buffer"));
        }
        let magic = be32(b, 0);
        if magic != RECORD_MAGIC {
            return Err(corrupt(
                "log record header",
                at,
                format!("bad magic {magic:#x}"),
            ));
        }
        let mut cycle_data = [0u32; CYCLE_DATA_WORDS];
        for (i, w) in cycle_data.iter_mut().enumerate() {
            *w = be32(b, CYCLE_DATA_OFF + 4 * i);
        }
        let h = RecordHeader {
            cycle: be32(b, 4),
            version: be32(b, 8),
            len: be32(b, 12),
            lsn: Lsn(be64(b, 16) as i64),
            tail_lsn: Lsn(be64(b, 24) as i64),
            crc: u32::from_le_bytes(b[CRC_OFF..CRC_OFF + 4].try_into().unwrap()),
            prev_block: be32(b, 36),
            num_logops: be32(b, 40),
            cycle_data,
            fmt: be32(b, 300),
            uuid: b[304..320].try_into().unwrap(),
            size: be32(b, 320),
        };
        h.check(at)?;
        Ok(h)
    }

    fn check(&self, at: Location) -> Result<()> {
        let bad = |d: String| Err(corrupt("log record header", at, d));
        if self.version == 0 || self.version & !VERSION_OKBITS != 0 {
            return bad(format!("unknown log version {}", self.version));
        }
        if self.len as usize > MAX_RECORD_BSIZE {
            return bad(format!("record length {} over 256 KiB", self.len));
        }
        if self.version & VERSION_2 != 0 && self.size as usize > MAX_RECORD_BSIZE {
            return bad(format!("log buffer size {} over 256 KiB", self.size));
        }
        if self.cycle == 0 || self.lsn.cycle() != self.cycle {
            return bad(format!(
                "cycle {} disagrees with lsn {}",
                self.cycle, self.lsn
            ));
        }
        Ok(())
    }

    /// Encode into the first BB of a record (the rest of the BB is zeroed).
    /// The CRC field is written as stored in `self.crc`.
    pub fn encode(&self, b: &mut [u8]) {
        b[..BBSIZE].fill(0);
        put_be32(b, 0, RECORD_MAGIC);
        put_be32(b, 4, self.cycle);
        put_be32(b, 8, self.version);
        put_be32(b, 12, self.len);
        put_be64(b, 16, self.lsn.0 as u64);
        put_be64(b, 24, self.tail_lsn.0 as u64);
        b[CRC_OFF..CRC_OFF + 4].copy_from_slice(&self.crc.to_le_bytes());
        put_be32(b, 36, self.prev_block);
        put_be32(b, 40, self.num_logops);
        for (i, w) in self.cycle_data.iter().enumerate() {
            put_be32(b, CYCLE_DATA_OFF + 4 * i, *w);
        }
        put_be32(b, 300, self.fmt);
        b[304..320].copy_from_slice(&self.uuid);
        put_be32(b, 320, self.size);
    }

    /// Header BBs of this record: 1, or `ceil(h_size / 32 KiB)` for v2
    /// records with buffers over 32 KiB. At most [`MAX_HEADER_BLOCKS`].
    pub fn header_blocks(&self) -> u32 {
        header_blocks_for(self.version, self.size)
    }

    /// Payload BBs (`BTOBB(h_len)`).
    pub fn data_blocks(&self) -> u32 {
        btobb(self.len as u64) as u32
    }

    /// BBs the whole record occupies in the log.
    pub fn total_blocks(&self) -> u32 {
        self.header_blocks() + self.data_blocks()
    }

    /// Extended headers the CRC covers (by the record length).
    pub fn crc_ext_headers(&self) -> u32 {
        if self.version & VERSION_2 == 0 {
            return 0;
        }
        (self.len as usize)
            .div_ceil(HEADER_CYCLE_SIZE)
            .saturating_sub(1) as u32
    }
}

/// Header BBs of a record with this version and log buffer size.
pub fn header_blocks_for(version: u32, size: u32) -> u32 {
    if version & VERSION_2 != 0 && size as usize > HEADER_CYCLE_SIZE {
        let n = (size as usize).div_ceil(HEADER_CYCLE_SIZE) as u32;
        n.min(MAX_HEADER_BLOCKS)
    } else {
        1
    }
}

/// An extended header: more cycle data for buffers over 32 KiB.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtHeader {
    pub cycle: u32,
    pub cycle_data: [u32; CYCLE_DATA_WORDS],
}

impl ExtHeader {
    pub fn new(cycle: u32) -> Self {
        ExtHeader {
            cycle,
            cycle_data: [0; CYCLE_DATA_WORDS],
        }
    }

    /// Decode from one BB (callers bound-check: `b.len() >= 512`).
    pub fn decode(b: &[u8]) -> Self {
        let mut cycle_data = [0u32; CYCLE_DATA_WORDS];
        for (i, w) in cycle_data.iter_mut().enumerate() {
            *w = be32(b, 4 + 4 * i);
        }
        ExtHeader {
            cycle: be32(b, 0),
            cycle_data,
        }
    }

    /// Encode into one BB (the rest of the BB is zeroed).
    pub fn encode(&self, b: &mut [u8]) {
        b[..BBSIZE].fill(0);
        put_be32(b, 0, self.cycle);
        for (i, w) in self.cycle_data.iter().enumerate() {
            put_be32(b, 4 + 4 * i, *w);
        }
    }
}

/// The CRC check of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrcCheck {
    /// The stored CRC matches.
    Good,
    /// No CRC stored (0): accepted as the kernel does.
    Unset,
    Bad {
        stored: u32,
        computed: u32,
    },
}

impl CrcCheck {
    /// Whether recovery accepts the record.
    pub fn is_ok(self) -> bool {
        !matches!(self, CrcCheck::Bad { .. })
    }
}

/// CRC of a record from its raw header BBs and raw (stamped) payload, with
/// `hdr_size` header bytes covered (328, or 324 for i386 writers). `None` if
/// the buffers are too short for what the header says.
pub fn compute_crc(raw_hdr: &[u8], raw_data: &[u8], hdr_size: usize) -> Option<u32> {
    if raw_hdr.len() < BBSIZE || hdr_size > BBSIZE {
        return None;
    }
    let version = be32(raw_hdr, 8);
    let len = be32(raw_hdr, 12) as usize;
    if raw_data.len() < len {
        return None;
    }
    let mut c = crc32c::crc32c(&raw_hdr[..CRC_OFF]);
    c = crc32c::crc32c_append(c, &[0u8; 4]);
    c = crc32c::crc32c_append(c, &raw_hdr[CRC_OFF + 4..hdr_size]);
    if version & VERSION_2 != 0 {
        let xheads = len.div_ceil(HEADER_CYCLE_SIZE);
        for i in 1..xheads {
            let ext = raw_hdr.get(i * BBSIZE..i * BBSIZE + EXT_CRC_SIZE)?;
            c = crc32c::crc32c_append(c, ext);
        }
    }
    Some(crc32c::crc32c_append(c, &raw_data[..len]))
}

/// Check the stored CRC of a raw record against both header coverages.
pub fn check_crc(raw_hdr: &[u8], raw_data: &[u8]) -> Option<CrcCheck> {
    if raw_hdr.len() < BBSIZE {
        return None;
    }
    let stored = u32::from_le_bytes(raw_hdr[CRC_OFF..CRC_OFF + 4].try_into().unwrap());
    let computed = compute_crc(raw_hdr, raw_data, REC_CRC_SIZE)?;
    if stored == computed {
        return Some(CrcCheck::Good);
    }
    if compute_crc(raw_hdr, raw_data, REC_CRC_SIZE_I386) == Some(stored) {
        return Some(CrcCheck::Good);
    }
    if stored == 0 {
        return Some(CrcCheck::Unset);
    }
    Some(CrcCheck::Bad { stored, computed })
}

/// A whole record in memory: header, extended headers and payload.
///
/// After [`LogRecord::decode`] the payload is as on disk (stamped) and
/// `crc` holds the CRC check of the raw bytes; [`LogRecord::unpack`]
/// restores the payload. Writers fill `data` (unpacked), then
/// [`LogRecord::pack`] and [`LogRecord::encode`].
#[derive(Debug, Clone)]
pub struct LogRecord {
    pub header: RecordHeader,
    /// `header_blocks() - 1` extended headers.
    pub ext: Vec<ExtHeader>,
    /// `data_blocks() * 512` bytes; the first `header.len` are the payload.
    pub data: Vec<u8>,
    /// Whether the payload's first words are the stamped cycles.
    pub packed: bool,
    /// CRC check of the bytes this record was decoded from.
    pub crc: CrcCheck,
}

impl LogRecord {
    /// A record to write: `payload` (unpacked ops, padded by the caller as
    /// the log stripe unit requires) becomes the record's `h_len` bytes.
    pub fn new(mut header: RecordHeader, mut payload: Vec<u8>) -> Self {
        debug_assert!(payload.len() <= MAX_RECORD_BSIZE);
        header.len = payload.len() as u32;
        payload.resize(header.data_blocks() as usize * BBSIZE, 0);
        LogRecord {
            header,
            ext: Vec::new(),
            data: payload,
            packed: false,
            crc: CrcCheck::Unset,
        }
    }

    /// Decode a record from its raw BBs: header BBs followed by payload BBs
    /// (`raw.len() >= total_blocks() * 512`).
    pub fn decode(raw: &[u8], at: Location) -> Result<Self> {
        let header = RecordHeader::decode(raw, at)?;
        let hblks = header.header_blocks() as usize;
        let dblks = header.data_blocks() as usize;
        let need = (hblks + dblks) * BBSIZE;
        if raw.len() < need {
            return Err(corrupt(
                "log record",
                at,
                format!("record needs {need} bytes, have {}", raw.len()),
            ));
        }
        if header.crc_ext_headers() as usize >= hblks.max(1) && header.crc_ext_headers() > 0 {
            return Err(corrupt(
                "log record",
                at,
                format!(
                    "length {} needs more extended headers than buffer size {} has",
                    header.len, header.size
                ),
            ));
        }
        let ext = (1..hblks)
            .map(|i| ExtHeader::decode(&raw[i * BBSIZE..(i + 1) * BBSIZE]))
            .collect();
        let raw_hdr = &raw[..hblks * BBSIZE];
        let data = raw[hblks * BBSIZE..need].to_vec();
        let crc = check_crc(raw_hdr, &data)
            .ok_or_else(|| corrupt("log record", at, "record too short for its CRC"))?;
        Ok(LogRecord {
            header,
            ext,
            data,
            packed: true,
            crc,
        })
    }

    /// Where cycle-data word `i` lives: `None` for the record header's own
    /// words, `Some(j)` for extended header `j` (0-based in `ext`).
    fn word_slot(&mut self, i: usize) -> Option<&mut u32> {
        if i < CYCLE_DATA_WORDS {
            return Some(&mut self.header.cycle_data[i]);
        }
        let j = i / CYCLE_DATA_WORDS - 1;
        self.ext
            .get_mut(j)
            .map(|x| &mut x.cycle_data[i % CYCLE_DATA_WORDS])
    }

    /// Restore the first word of every payload BB from the cycle data.
    /// A record whose length needs more cycle data than its headers hold is
    /// corrupt.
    pub fn unpack(&mut self, at: Location) -> Result<()> {
        if !self.packed {
            return Ok(());
        }
        let blocks = self.header.data_blocks() as usize;
        if self.data.len() < blocks * BBSIZE {
            return Err(corrupt("log record", at, "payload shorter than h_len"));
        }
        for i in 0..blocks {
            let Some(w) = self.word_slot(i).copied() else {
                return Err(corrupt(
                    "log record",
                    at,
                    format!("payload block {i} has no cycle data slot"),
                ));
            };
            put_be32(&mut self.data, i * BBSIZE, w);
        }
        self.packed = false;
        Ok(())
    }

    /// Stamp the cycle into the first word of every payload BB, saving the
    /// originals in the cycle data (record header, then extended headers,
    /// which are created as the log buffer size `header.size` requires).
    /// `header.len` must already cover the payload.
    pub fn pack(&mut self) {
        if self.packed {
            return;
        }
        let cycle = self.header.lsn.cycle();
        let hblks = self.header.header_blocks() as usize;
        self.ext.resize(hblks - 1, ExtHeader::new(cycle));
        for x in &mut self.ext {
            x.cycle = cycle;
        }
        let blocks = self.header.data_blocks() as usize;
        debug_assert!(blocks <= hblks * CYCLE_DATA_WORDS, "record over its buffer");
        self.data.resize(blocks * BBSIZE, 0);
        for i in 0..blocks.min(hblks * CYCLE_DATA_WORDS) {
            let w = be32(&self.data, i * BBSIZE);
            if let Some(slot) = self.word_slot(i) {
                *slot = w;
            }
            put_be32(&mut self.data, i * BBSIZE, cycle);
        }
        self.packed = true;
    }

    /// The raw BBs of this (packed) record, with the CRC computed and stored
    /// in `header.crc`. `wrap_at`: if the record crosses the end of the
    /// log, the number of its BBs before the end; the BBs after it get their
    /// stamped cycle bumped by one (before the CRC, as the kernel does).
    pub fn encode(&mut self, wrap_at: Option<u32>) -> Vec<u8> {
        let mut raw = self.encode_header(wrap_at);
        raw.extend_from_slice(self.data_bytes());
        raw
    }

    /// [`Self::encode`] without copying the payload: the header BBs are
    /// returned and the record is them followed by [`Self::data_bytes`],
    /// whose BBs past `wrap_at` get their stamped cycle bumped in place.
    /// Call once per packed record.
    pub fn encode_header(&mut self, wrap_at: Option<u32>) -> Vec<u8> {
        debug_assert!(self.packed, "encode a packed record");
        let hblks = self.header.header_blocks() as usize;
        let blocks = self.header.data_blocks() as usize;
        let mut hdr = vec![0u8; hblks * BBSIZE];
        self.header.crc = 0;
        self.header.encode(&mut hdr[..BBSIZE]);
        for (j, x) in self.ext.iter().enumerate() {
            x.encode(&mut hdr[(j + 1) * BBSIZE..(j + 2) * BBSIZE]);
        }
        if let Some(split) = wrap_at {
            // Never the first header BB: a record starts before the end.
            let split = split as usize;
            let data = &mut self.data[..blocks * BBSIZE];
            if split < hblks {
                bump_wrapped_cycles(&mut hdr, split);
                bump_wrapped_cycles(data, 0);
            } else {
                bump_wrapped_cycles(data, split - hblks);
            }
        }
        let crc = compute_crc(&hdr, &self.data[..blocks * BBSIZE], REC_CRC_SIZE)
            .expect("encoded record is complete");
        self.header.crc = crc;
        hdr[CRC_OFF..CRC_OFF + 4].copy_from_slice(&crc.to_le_bytes());
        self.crc = CrcCheck::Good;
        hdr
    }

    /// The payload BBs as written (`data_blocks() * 512` bytes).
    pub fn data_bytes(&self) -> &[u8] {
        &self.data[..self.header.data_blocks() as usize * BBSIZE]
    }
}

/// Add one to the stamped cycle of every BB of `raw` from BB `from` on (the
/// part of a record written at the start of the log). The record magic is
/// never produced: a cycle that would become 0xFEEDBABE skips it.
pub fn bump_wrapped_cycles(raw: &mut [u8], from: usize) {
    let mut i = from;
    while (i + 1) * BBSIZE <= raw.len() {
        let mut c = be32(raw, i * BBSIZE).wrapping_add(1);
        if c == RECORD_MAGIC {
            c = c.wrapping_add(1);
        }
        put_be32(raw, i * BBSIZE, c);
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::log::FMT_LINUX_LE;

    fn sample_header(size: u32, len: u32) -> RecordHeader {
        let mut h = RecordHeader::new(
            3,
            Lsn::new(3, 100),
            Lsn::new(2, 4000),
            FMT_LINUX_LE,
            [7; 16],
            size,
        );
        h.len = len;
        h.num_logops = 5;
        h.prev_block = 36;
        h
    }

    #[test]
    fn header_roundtrip() {
        let mut h = sample_header(32768, 1024);
        for (i, w) in h.cycle_data.iter_mut().enumerate() {
            *w = i as u32 * 3;
        }
        h.crc = 0x1234_5678;
        let mut b = vec![0xffu8; 512];
        h.encode(&mut b);
        assert_eq!(be32(&b, 0), RECORD_MAGIC);
        assert_eq!(&b[32..36], &0x1234_5678u32.to_le_bytes());
        assert!(b[324..].iter().all(|&x| x == 0));
        let d = RecordHeader::decode(&b, Location::Unknown).unwrap();
        assert_eq!(d, h);
        assert_eq!(d.header_blocks(), 1);
        assert_eq!(d.data_blocks(), 2);
    }

    #[test]
    fn header_rejects_garbage() {
        let h = sample_header(32768, 512);
        let mut b = vec![0u8; 512];
        h.encode(&mut b);
        let mut bad = b.clone();
        bad[0] = 0;
        assert!(RecordHeader::decode(&bad, Location::Unknown)
            .unwrap_err()
            .is_corrupt());
        let mut bad = b.clone();
        put_be32(&mut bad, 8, 4);
        assert!(RecordHeader::decode(&bad, Location::Unknown).is_err());
        let mut bad = b.clone();
        put_be32(&mut bad, 12, 300 * 1024);
        assert!(RecordHeader::decode(&bad, Location::Unknown).is_err());
        let mut bad = b.clone();
        put_be32(&mut bad, 320, u32::MAX);
        assert!(RecordHeader::decode(&bad, Location::Unknown).is_err());
        let mut bad = b.clone();
        put_be32(&mut bad, 4, 9);
        assert!(RecordHeader::decode(&bad, Location::Unknown).is_err());
        assert!(RecordHeader::decode(&b[..100], Location::Unknown).is_err());
    }

    #[test]
    fn header_block_counts() {
        assert_eq!(header_blocks_for(2, 32768), 1);
        assert_eq!(header_blocks_for(2, 32769), 2);
        assert_eq!(header_blocks_for(2, 65536), 2);
        assert_eq!(header_blocks_for(2, 262144), 8);
        assert_eq!(header_blocks_for(1, 262144), 1);
        assert_eq!(header_blocks_for(2, 0), 1);
    }

    fn payload(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 512) as u8).collect()
    }

    #[test]
    fn pack_unpack_roundtrip_small() {
        let data = payload(3 * 512);
        let mut r = LogRecord {
            header: sample_header(32768, 3 * 512),
            ext: vec![],
            data: data.clone(),
            packed: false,
            crc: CrcCheck::Unset,
        };
        r.pack();
        for i in 0..3 {
            assert_eq!(be32(&r.data, i * 512), 3, "block {i} stamped");
            assert_eq!(r.header.cycle_data[i], be32(&data, i * 512));
        }
        let raw = r.encode(None);
        assert_eq!(raw.len(), 4 * 512);
        let mut d = LogRecord::decode(&raw, Location::Unknown).unwrap();
        assert_eq!(d.crc, CrcCheck::Good);
        d.unpack(Location::Unknown).unwrap();
        assert_eq!(d.data, data);
    }

    #[test]
    fn pack_unpack_with_extended_headers() {
        // 256 KiB buffer: 8 header blocks; 100 KiB payload needs ext 1..3.
        let len = 100 * 1024;
        let data = payload(len);
        let mut r = LogRecord {
            header: sample_header(256 * 1024, len as u32),
            ext: vec![],
            data: data.clone(),
            packed: false,
            crc: CrcCheck::Unset,
        };
        r.pack();
        assert_eq!(r.ext.len(), 7);
        assert!(r.ext.iter().all(|x| x.cycle == 3));
        assert_eq!(r.ext[0].cycle_data[0], be32(&data, 64 * 512));
        assert_eq!(r.ext[2].cycle_data[7], be32(&data, (3 * 64 + 7) * 512));
        let raw = r.encode(None);
        assert_eq!(raw.len(), (8 + 200) * 512);
        // Every BB of the record shows cycle 3.
        for i in 0..raw.len() / 512 {
            assert_eq!(
                crate::format::log::block_cycle(&raw[i * 512..]),
                3,
                "bb {i}"
            );
        }
        let mut d = LogRecord::decode(&raw, Location::Unknown).unwrap();
        assert_eq!(d.crc, CrcCheck::Good);
        d.unpack(Location::Unknown).unwrap();
        assert_eq!(d.data, data);

        // The CRC covers the cycle data of ext header 1 (by length) ...
        let mut raw2 = raw.clone();
        raw2[512 + 8] ^= 1;
        assert!(!LogRecord::decode(&raw2, Location::Unknown)
            .unwrap()
            .crc
            .is_ok());
        // ... but not ext header 5 (past the length), nor its reserved bytes.
        let mut raw3 = raw.clone();
        raw3[5 * 512 + 8] ^= 1;
        raw3[512 + 300] ^= 1;
        assert_eq!(
            LogRecord::decode(&raw3, Location::Unknown).unwrap().crc,
            CrcCheck::Good
        );
        // Payload bytes are covered.
        let mut raw4 = raw.clone();
        raw4[9 * 512 + 100] ^= 0x80;
        assert!(matches!(
            LogRecord::decode(&raw4, Location::Unknown).unwrap().crc,
            CrcCheck::Bad { .. }
        ));
    }

    #[test]
    fn zero_crc_is_unset_and_wrap_bump() {
        let mut r = LogRecord {
            header: sample_header(32768, 1024),
            ext: vec![],
            data: payload(1024),
            packed: false,
            crc: CrcCheck::Unset,
        };
        r.pack();
        let mut raw = r.encode(Some(2));
        assert_eq!(be32(&raw, 512), 3);
        assert_eq!(be32(&raw, 1024), 4, "wrapped block carries the next cycle");
        assert_eq!(
            LogRecord::decode(&raw, Location::Unknown).unwrap().crc,
            CrcCheck::Good
        );
        raw[32..36].fill(0);
        assert_eq!(
            LogRecord::decode(&raw, Location::Unknown).unwrap().crc,
            CrcCheck::Unset
        );
    }

    #[test]
    fn i386_header_coverage_is_accepted() {
        let mut r = LogRecord::new(sample_header(32768, 0), payload(512));
        r.pack();
        let mut raw = r.encode(None);
        // An i386 kernel leaves bytes 324..328 out of the CRC.
        raw[324] = 0x77;
        let (h, d) = raw.split_at(512);
        let c = compute_crc(h, d, REC_CRC_SIZE_I386).unwrap();
        raw[CRC_OFF..CRC_OFF + 4].copy_from_slice(&c.to_le_bytes());
        assert_eq!(
            LogRecord::decode(&raw, Location::Unknown).unwrap().crc,
            CrcCheck::Good
        );
        raw[300] ^= 1;
        assert!(!LogRecord::decode(&raw, Location::Unknown)
            .unwrap()
            .crc
            .is_ok());
    }

    #[test]
    fn unpack_without_slots_is_corrupt() {
        // A record claiming 64 KiB of payload in a 32 KiB buffer.
        let mut h = sample_header(32768, 64 * 1024);
        h.len = 64 * 1024;
        let mut raw = vec![0u8; 129 * 512];
        h.encode(&mut raw);
        assert!(LogRecord::decode(&raw, Location::Unknown)
            .unwrap_err()
            .is_corrupt());
    }
}
