//! The realtime section: geometry, the free-space bitmap and the summary
//! counters (filesystems without rtgroups, which is every filesystem rxfs
//! accepts: the rtgroups feature is an incompat bit rxfs does not know).
//!
//! The realtime device holds file data only, allocated in *realtime
//! extents* of `rextsize` filesystem blocks. Realtime extent `x` covers rt
//! blocks `x * rextsize .. (x + 1) * rextsize`. The bmbt records of a
//! realtime inode (DIFLAG_REALTIME) hold rt *block* numbers, so one record
//! may start or end inside an rt extent (the kernel splits a written and
//! an unwritten part at any block); the allocation unit is still the whole
//! rt extent.
//!
//! Free space is described by two regular files on the data device, named
//! by the superblock (sb_rbmino, sb_rsumino). They have no block headers,
//! no magic and no CRC: their only verification is their size and the
//! consistency between them (see [`crate::rt`]).
//!
//! ```text
//! bitmap file (sb_rbmblocks blocks), words of 32 bits in HOST byte order:
//!   block b | word w (bytes 4w..4w+4) | bit i (1 << i)
//!   -> rt extent x = b * (blocksize * 8) + w * 32 + i;  bit 1 = free, 0 = used
//!   bits for x >= sb_rextents carry no meaning (mkfs leaves them 0)
//!
//! summary file, (sb_rextslog + 1) * sb_rbmblocks u32 counters in HOST byte
//! order, the file size rounded up to whole blocks:
//!   counter[log * rbmblocks + b] = number of maximal free runs whose length
//!     (in rt extents) is in [2^log, 2^(log+1)) and whose FIRST extent has
//!     its bit in bitmap block b (a run may continue into later blocks)
//! ```
//!
//! "Host byte order" is literal: the kernel reads and writes these words
//! natively, so an image made on a little-endian machine has little-endian
//! words. rxfs does as the kernel on the same host does ([`u32::from_ne_bytes`]).
//!
//! Superblock invariants ([`RtLayout::validate`], as the kernel's superblock
//! verifier checks them):
//! - `4 KiB <= rextsize * blocksize <= 1 GiB`, also without a realtime section;
//! - `rblocks == 0` implies `rextents == rbmblocks == rextslog == frextents == 0`;
//! - otherwise `rextents == rblocks / rextsize` (a tail shorter than one rt
//!   extent is unused), `rextents > 0`,
//!   `rbmblocks == ceil(rextents / (blocksize * 8))` and
//!   `rextslog == floor(log2(rextents))`. mkfs up to xfsprogs 6.x computed
//!   the log of `rextents` truncated to 32 bits; that value is accepted too.
//! - on a clean filesystem `frextents` equals the number of free bits.

use super::sb::Superblock;
use crate::types::RtBlock;

/// Bytes of one bitmap word / one summary counter.
pub const RTWORD_BYTES: usize = 4;
/// Bits of one bitmap word.
pub const RTWORD_BITS: u64 = 32;
/// Smallest realtime extent, in bytes.
pub const MIN_RTEXTSIZE_BYTES: u64 = 4096;
/// Largest realtime extent, in bytes.
pub const MAX_RTEXTSIZE_BYTES: u64 = 1 << 30;

/// A realtime extent number (rt block / rextsize).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct RtExtentNo(pub u64);

/// floor(log2(n)), 0 for 0: what `sb_rextslog` must be for `n` rt extents.
pub fn compute_rextslog(rextents: u64) -> u8 {
    if rextents == 0 {
        0
    } else {
        (63 - rextents.leading_zeros()) as u8
    }
}

/// The value mkfs up to xfsprogs 6.x wrote: the log of `rextents`
/// truncated to 32 bits (equal to [`compute_rextslog`] below 2^32 extents).
fn legacy_rextslog(rextents: u64) -> u8 {
    compute_rextslog(rextents & 0xffff_ffff)
}

/// Realtime geometry, taken from the superblock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtLayout {
    pub blocksize: u32,
    /// Filesystem blocks per rt extent.
    pub rextsize: u32,
    /// Blocks on the rt device.
    pub rblocks: u64,
    pub rextents: u64,
    /// Blocks of the bitmap file.
    pub rbmblocks: u32,
    /// floor(log2(rextents)); the summary has `rextslog + 1` levels.
    pub rextslog: u8,
}

impl RtLayout {
    /// The layout the superblock describes (not validated).
    pub fn of(sb: &Superblock) -> Self {
        RtLayout {
            blocksize: sb.blocksize,
            rextsize: sb.rextsize,
            rblocks: sb.rblocks,
            rextents: sb.rextents,
            rbmblocks: sb.rbmblocks,
            rextslog: sb.rextslog,
        }
    }

    /// The layout mkfs writes for an rt device of `rblocks` blocks.
    /// `blocksize` is a power of two >= 512, `rextsize` > 0.
    pub fn compute(blocksize: u32, rextsize: u32, rblocks: u64) -> Self {
        debug_assert!(blocksize.is_power_of_two() && blocksize >= 512 && rextsize > 0);
        let rextents = rblocks / rextsize as u64;
        let rblocks = if rextents == 0 { 0 } else { rblocks };
        let bits = blocksize as u64 * 8;
        RtLayout {
            blocksize,
            rextsize,
            rblocks,
            rextents,
            rbmblocks: rextents.div_ceil(bits) as u32,
            rextslog: compute_rextslog(rextents),
        }
    }

    /// Check the superblock's realtime fields against each other
    /// (the invariants in the module documentation).
    pub fn validate(sb: &Superblock) -> Result<Self, String> {
        let l = Self::of(sb);
        if !sb.blocksize.is_power_of_two() || sb.blocksize < 512 {
            return Err(format!("block size {}", sb.blocksize));
        }
        let ext_bytes = sb.rextsize as u64 * sb.blocksize as u64;
        if !(MIN_RTEXTSIZE_BYTES..=MAX_RTEXTSIZE_BYTES).contains(&ext_bytes) {
            return Err(format!(
                "realtime extent size {} blocks ({ext_bytes} bytes) outside 4 KiB..1 GiB",
                sb.rextsize
            ));
        }
        if sb.rblocks == 0 {
            if sb.rextents != 0 || sb.rbmblocks != 0 || sb.rextslog != 0 || sb.frextents != 0 {
                return Err(format!(
                    "no realtime blocks but rextents {}, rbmblocks {}, rextslog {}, frextents {}",
                    sb.rextents, sb.rbmblocks, sb.rextslog, sb.frextents
                ));
            }
            return Ok(l);
        }
        let want = Self::compute(sb.blocksize, sb.rextsize, sb.rblocks);
        if want.rextents == 0 || sb.rextents != want.rextents {
            return Err(format!(
                "rextents {} but {} blocks / rextsize {} = {}",
                sb.rextents, sb.rblocks, sb.rextsize, want.rextents
            ));
        }
        if sb.rbmblocks != want.rbmblocks {
            return Err(format!(
                "rbmblocks {} but {} rt extents need {}",
                sb.rbmblocks, sb.rextents, want.rbmblocks
            ));
        }
        if sb.rextslog != want.rextslog && sb.rextslog != legacy_rextslog(sb.rextents) {
            return Err(format!(
                "rextslog {} but log2({}) = {}",
                sb.rextslog, sb.rextents, want.rextslog
            ));
        }
        if sb.frextents > sb.rextents {
            return Err(format!(
                "frextents {} > rextents {}",
                sb.frextents, sb.rextents
            ));
        }
        Ok(l)
    }

    pub fn is_empty(&self) -> bool {
        self.rextents == 0
    }

    /// Rt extents described by one bitmap block.
    pub fn bits_per_block(&self) -> u64 {
        self.blocksize as u64 * 8
    }

    /// Bytes of the bitmap file.
    pub fn bitmap_bytes(&self) -> u64 {
        self.rbmblocks as u64 * self.blocksize as u64
    }

    /// Levels of the summary (size classes 2^0 .. 2^rextslog).
    /// A filesystem without a realtime section still has one level of
    /// zero bitmap blocks, i.e. an empty summary.
    pub fn summary_levels(&self) -> u32 {
        self.rextslog as u32 + 1
    }

    /// Counters in the summary.
    pub fn summary_counters(&self) -> u64 {
        self.summary_levels() as u64 * self.rbmblocks as u64
    }

    /// Bytes of the summary file: the counters rounded up to whole blocks.
    pub fn summary_bytes(&self) -> u64 {
        (self.summary_counters() * RTWORD_BYTES as u64).next_multiple_of(self.blocksize as u64)
    }

    /// Index of the counter for runs of size class `log` starting in
    /// bitmap block `bbno`; `None` outside the summary.
    pub fn summary_index(&self, log: u32, bbno: u64) -> Option<usize> {
        if log >= self.summary_levels() || bbno >= self.rbmblocks as u64 {
            return None;
        }
        Some((log as u64 * self.rbmblocks as u64 + bbno) as usize)
    }

    /// The rt extent holding rt block `rtb`, and the block's index in it.
    pub fn rtb_to_rtx(&self, rtb: RtBlock) -> (RtExtentNo, u32) {
        let r = self.rextsize as u64;
        (RtExtentNo(rtb.0 / r), (rtb.0 % r) as u32)
    }

    /// The first rt block of rt extent `rtx`.
    pub fn rtx_to_rtb(&self, rtx: RtExtentNo) -> RtBlock {
        RtBlock(rtx.0 * self.rextsize as u64)
    }

    /// The rt extents that `len` blocks from `rtb` touch: (first, count).
    pub fn rtx_span(&self, rtb: RtBlock, len: u64) -> (RtExtentNo, u64) {
        let r = self.rextsize as u64;
        let first = rtb.0 / r;
        let end = rtb.0.saturating_add(len).div_ceil(r);
        (RtExtentNo(first), end - first)
    }

    /// The bitmap block holding the bit of `rtx`.
    pub fn rtx_bitmap_block(&self, rtx: RtExtentNo) -> u64 {
        rtx.0 / self.bits_per_block()
    }

    /// Valid bits (rt extents below `rextents`) in bitmap block `bbno`.
    pub fn bits_in_block(&self, bbno: u64) -> u64 {
        let first = bbno.saturating_mul(self.bits_per_block());
        self.rextents
            .saturating_sub(first)
            .min(self.bits_per_block())
    }
}

// ---------------------------------------------------------------- bitmap

/// Bitmap word `i` of `buf` (host byte order); 0 (all used) past the end.
pub fn word(buf: &[u8], i: usize) -> u32 {
    match buf.get(i * RTWORD_BYTES..(i + 1) * RTWORD_BYTES) {
        Some(b) => u32::from_ne_bytes([b[0], b[1], b[2], b[3]]),
        None => 0,
    }
}

/// Store bitmap word `i` of `buf` (host byte order).
pub fn put_word(buf: &mut [u8], i: usize, v: u32) {
    buf[i * RTWORD_BYTES..(i + 1) * RTWORD_BYTES].copy_from_slice(&v.to_ne_bytes());
}

/// Whether bit `bit` of a bitmap buffer says free. Bits past the buffer
/// read as used.
pub fn bit_is_free(buf: &[u8], bit: u64) -> bool {
    let w = word(buf, (bit / RTWORD_BITS) as usize);
    w >> (bit % RTWORD_BITS) & 1 == 1
}

/// Mark bits `first .. first + count` free or used (encoder, for writers
/// and tests). The range must lie inside `buf`.
pub fn set_bits(buf: &mut [u8], first: u64, count: u64, free: bool) {
    debug_assert!(first + count <= buf.len() as u64 * 8);
    let mut bit = first;
    let end = first + count;
    while bit < end {
        let wi = (bit / RTWORD_BITS) as usize;
        let lo = bit % RTWORD_BITS;
        let n = (RTWORD_BITS - lo).min(end - bit);
        let mask = low_mask(n) << lo;
        let w = word(buf, wi);
        put_word(buf, wi, if free { w | mask } else { w & !mask });
        bit += n;
    }
}

/// A mask of the low `n` bits (n <= 32).
fn low_mask(n: u64) -> u32 {
    if n >= 32 {
        u32::MAX
    } else {
        (1u32 << n) - 1
    }
}

/// Free bits among bits `0 .. nbits` of `buf` (bits past the buffer count
/// as used).
pub fn count_free(buf: &[u8], nbits: u64) -> u64 {
    let nbits = nbits.min(buf.len() as u64 * 8);
    let full = (nbits / RTWORD_BITS) as usize;
    let mut n: u64 = (0..full).map(|i| word(buf, i).count_ones() as u64).sum();
    let rest = nbits % RTWORD_BITS;
    if rest > 0 {
        n += (word(buf, full) & low_mask(rest)).count_ones() as u64;
    }
    n
}

/// The state of a range of rt extents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeState {
    /// Every extent is free.
    Free,
    /// Every extent is in use.
    Allocated,
    /// Some of each.
    Mixed,
}

/// The state of bits `first .. first + count` of `buf` (count > 0).
/// Bits past the buffer count as used.
pub fn range_state(buf: &[u8], first: u64, count: u64) -> RangeState {
    debug_assert!(count > 0);
    let (mut free, mut used) = (false, false);
    let end = first.saturating_add(count);
    let mut bit = first;
    while bit < end && !(free && used) {
        let lo = bit % RTWORD_BITS;
        let n = (RTWORD_BITS - lo).min(end - bit);
        let mask = low_mask(n) << lo;
        let w = word(buf, (bit / RTWORD_BITS) as usize) & mask;
        free |= w != 0;
        used |= w != mask;
        bit += n;
    }
    match (free, used) {
        (true, false) => RangeState::Free,
        (false, true) => RangeState::Allocated,
        _ => RangeState::Mixed,
    }
}

/// Finds the maximal free runs of a bitmap fed block by block, in order.
/// Runs may continue across blocks; each is reported once, when it ends.
#[derive(Debug, Clone)]
pub struct FreeRunScanner {
    layout: RtLayout,
    next_block: u64,
    /// Start and length of the run in progress.
    run: Option<(u64, u64)>,
}

impl FreeRunScanner {
    pub fn new(layout: &RtLayout) -> Self {
        FreeRunScanner {
            layout: *layout,
            next_block: 0,
            run: None,
        }
    }

    /// A scanner that starts at bitmap block `block` (a run free at its
    /// first bit starts there, whatever precedes it).
    pub fn at(layout: &RtLayout, block: u64) -> Self {
        FreeRunScanner {
            layout: *layout,
            next_block: block,
            run: None,
        }
    }

    /// The bitmap block expected next.
    pub fn next_block(&self) -> u64 {
        self.next_block
    }

    /// Scan the next bitmap block; `found(start, len)` is called for every
    /// run that ends inside it. Bits past `rextents` are ignored.
    pub fn feed(&mut self, block: &[u8], mut found: impl FnMut(u64, u64)) {
        let base = self.next_block * self.layout.bits_per_block();
        let nbits = self.layout.bits_in_block(self.next_block);
        self.next_block += 1;
        let mut bit = 0u64;
        while bit < nbits {
            let n_valid = (nbits - bit).min(RTWORD_BITS);
            let w = word(block, (bit / RTWORD_BITS) as usize);
            // Whole words in use or free (most of a bitmap) in one step.
            if n_valid == RTWORD_BITS && (w == 0 || w == u32::MAX) {
                if w == 0 {
                    if let Some((s, l)) = self.run.take() {
                        found(s, l);
                    }
                } else {
                    match &mut self.run {
                        Some((_, len)) => *len += RTWORD_BITS,
                        None => self.run = Some((base + bit, RTWORD_BITS)),
                    }
                }
                bit += RTWORD_BITS;
                continue;
            }
            let mut pos = 0u64;
            while pos < n_valid {
                let v = w >> pos;
                if v & 1 == 1 {
                    let n = (v.trailing_ones() as u64).min(n_valid - pos);
                    match &mut self.run {
                        Some((_, len)) => *len += n,
                        None => self.run = Some((base + bit + pos, n)),
                    }
                    pos += n;
                } else {
                    let n = (v.trailing_zeros() as u64).min(n_valid - pos);
                    if let Some((s, l)) = self.run.take() {
                        found(s, l);
                    }
                    pos += n;
                }
            }
            bit += n_valid;
        }
    }

    /// End of the bitmap: report the last run, if any.
    pub fn finish(self, mut found: impl FnMut(u64, u64)) {
        if let Some((s, l)) = self.run {
            found(s, l);
        }
    }
}

// ---------------------------------------------------------------- summary

/// Decoded (or computed) summary counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RtSummary {
    levels: u32,
    rbmblocks: u32,
    counts: Vec<u32>,
}

impl RtSummary {
    /// All-zero counters for `layout`. The caller bounds
    /// `layout.summary_counters()` (it allocates one u32 per counter).
    pub fn zeroed(layout: &RtLayout) -> Self {
        RtSummary {
            levels: layout.summary_levels(),
            rbmblocks: layout.rbmblocks,
            counts: vec![0; layout.summary_counters() as usize],
        }
    }

    /// Decode the summary file's bytes. `buf` shorter than the counters
    /// is an error (the caller names the structure).
    pub fn decode(buf: &[u8], layout: &RtLayout) -> Result<Self, String> {
        let n = layout.summary_counters();
        if (buf.len() as u64) < n * RTWORD_BYTES as u64 {
            return Err(format!(
                "{} bytes hold fewer than {n} summary counters",
                buf.len()
            ));
        }
        let mut s = Self::zeroed(layout);
        for (i, c) in s.counts.iter_mut().enumerate() {
            *c = word(buf, i);
        }
        Ok(s)
    }

    /// Encode into a summary file image (`layout.summary_bytes()` bytes).
    pub fn encode(&self, layout: &RtLayout) -> Vec<u8> {
        let mut buf = vec![0u8; layout.summary_bytes() as usize];
        for (i, &c) in self.counts.iter().enumerate() {
            put_word(&mut buf, i, c);
        }
        buf
    }

    /// Count one free run of `len` rt extents starting at rt extent
    /// `start`. False if its size class or block is outside the summary
    /// (a run longer than rextslog allows, or past the bitmap).
    pub fn add_run(&mut self, start: u64, len: u64, bits_per_block: u64) -> bool {
        if len == 0 {
            return false;
        }
        let log = 63 - len.leading_zeros();
        let bbno = start / bits_per_block;
        if log >= self.levels || bbno >= self.rbmblocks as u64 {
            return false;
        }
        let i = (log as u64 * self.rbmblocks as u64 + bbno) as usize;
        self.counts[i] = self.counts[i].saturating_add(1);
        true
    }

    /// The counter of size class `log` (runs of 2^log .. 2^(log+1) - 1
    /// extents) for bitmap block `bbno`; 0 outside the summary.
    pub fn get(&self, log: u32, bbno: u64) -> u32 {
        if log >= self.levels || bbno >= self.rbmblocks as u64 {
            return 0;
        }
        self.counts[(log as u64 * self.rbmblocks as u64 + bbno) as usize]
    }

    pub fn levels(&self) -> u32 {
        self.levels
    }

    pub fn rbmblocks(&self) -> u32 {
        self.rbmblocks
    }

    /// Every non-zero counter as (log, bitmap block, count), in file order.
    pub fn nonzero(&self) -> impl Iterator<Item = (u32, u64, u32)> + '_ {
        let bmb = self.rbmblocks.max(1) as usize;
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c != 0)
            .map(move |(i, &c)| ((i / bmb) as u32, (i % bmb) as u64, c))
    }

    /// Counters that differ from `other`: (log, bitmap block, self, other).
    pub fn diff(&self, other: &RtSummary) -> Vec<(u32, u64, u32, u32)> {
        let mut out = Vec::new();
        let levels = self.levels.max(other.levels);
        let blocks = self.rbmblocks.max(other.rbmblocks) as u64;
        for log in 0..levels {
            for b in 0..blocks {
                let (a, o) = (self.get(log, b), other.get(log, b));
                if a != o {
                    out.push((log, b, a, o));
                }
            }
        }
        out
    }
}

#[cfg(test)]
#[path = "rt_tests.rs"]
mod tests;
