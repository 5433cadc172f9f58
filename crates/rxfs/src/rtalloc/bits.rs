//! Bitmap and summary access inside a transaction holding the realtime
//! lock: word-at-a-time scans of the bitmap, counter reads and changes of
//! the summary (through the in-memory copy or the summary blocks, as the
//! mode says), each change logged in its buffer.

use std::sync::Arc;

use crate::cache::rtsum::{RtMaps, RtSumMode};
use crate::error::{Error, Location, Result};
use crate::format::bufkind::BufKind;
use crate::format::rt::{self as fmt, RtLayout, RTWORD_BITS, RTWORD_BYTES};
use crate::xact::{BufId, MetaTx};

/// The disk address of every block of a realtime metadata file below
/// `bytes`, from its extents (in file order): every block must be mapped
/// by a written extent inside the AGs. Shared by the mount (from the
/// decoded inode) and by transactions of a mount that did not load the
/// files (recovery's, from the dinode).
pub fn file_blocks(
    geo: &crate::geometry::Geometry,
    extents: impl IntoIterator<Item = crate::format::bmbt::Extent>,
    bytes: u64,
    what: &'static str,
    ino: u64,
) -> Result<Vec<crate::types::Daddr>> {
    let at = Location::Ino(ino);
    let want = bytes >> geo.blocklog;
    let mut out = Vec::with_capacity(want as usize);
    for e in extents {
        if out.len() as u64 >= want {
            break;
        }
        if e.off.0 != out.len() as u64 || e.unwritten {
            return Err(Error::corrupt(what, at, "hole or unwritten extent"));
        }
        if !geo.fsb_extent_valid(crate::types::FsBlock(e.start), e.len) {
            return Err(Error::corrupt(what, at, "extent outside the AGs"));
        }
        for i in 0..e.len.min(want - out.len() as u64) {
            out.push(geo.fsb_to_daddr(crate::types::FsBlock(e.start + i)));
        }
    }
    if (out.len() as u64) < want {
        return Err(Error::corrupt(what, at, "blocks not mapped"));
    }
    Ok(out)
}

/// The blocks of the bitmap and summary files, from their dinodes as the
/// transaction sees them (for transactions of a mount that did not load
/// them: recovery's). Extents-format forks only (the files mkfs makes; a
/// btree-format bitmap is refused as not supported); the checks are
/// [`file_blocks`]'s.
fn maps_from_dinodes(tx: &mut dyn MetaTx, l: &RtLayout) -> Result<RtMaps> {
    use crate::format::bmbt::{Extent, EXTENT_REC_SIZE};
    use crate::format::dinode_edit as di;
    use crate::format::inode::FMT_EXTENTS;
    let (rbmino, rsumino) = (tx.sb().rbmino, tx.sb().rsumino);
    let mut one = |ino: u64, bytes: u64, what: &'static str| -> Result<Vec<crate::types::Daddr>> {
        let d = tx.read_dinode_raw(crate::types::Ino(ino))?;
        if di::format(&d) != FMT_EXTENTS {
            return Err(Error::NotSupported(format!(
                "{what} in btree format (a realtime section this large)"
            )));
        }
        let n = di::nextents(&d) as usize;
        let fork = di::data_fork(&d);
        if n * EXTENT_REC_SIZE > fork.len() {
            return Err(Error::corrupt(
                what,
                Location::Ino(ino),
                format!("{n} extents do not fit"),
            ));
        }
        let exts = fork
            .chunks_exact(EXTENT_REC_SIZE)
            .take(n)
            .map(Extent::decode);
        file_blocks(tx.geo(), exts, bytes, what, ino)
    };
    Ok(RtMaps {
        bitmap: one(rbmino, l.bitmap_bytes(), "rt bitmap inode")?,
        summary: one(rsumino, l.summary_bytes(), "rt summary inode")?,
    })
}

/// floor(log2(n)), n >= 1: the summary level of a run of `n` extents.
pub fn level_of(n: u64) -> u32 {
    debug_assert!(n > 0);
    63 - n.leading_zeros()
}

/// The realtime bitmap and summary as one transaction sees them.
pub struct RtBits<'t> {
    pub tx: &'t mut dyn MetaTx,
    pub l: RtLayout,
    maps: Arc<RtMaps>,
    bs: usize,
    /// The last bitmap block joined (scans stay in one block for long).
    last: Option<(u64, BufId)>,
}

impl<'t> RtBits<'t> {
    /// Take the realtime lock of `tx` and set up access. In memory mode
    /// the in-memory summary is loaded on first use.
    pub fn new(tx: &'t mut dyn MetaTx) -> Result<Self> {
        let l = RtLayout::of(tx.sb());
        if l.is_empty() {
            return Err(Error::NoSpace);
        }
        let bs = l.blocksize as usize;
        if tx.rt_lock()?.maps.is_none() {
            let m = Arc::new(maps_from_dinodes(&mut *tx, &l)?);
            tx.rt_lock()?.maps = Some(m);
        }
        let st = tx.rt_lock()?;
        let maps = st.maps.clone().expect("set above");
        let load = st.mode() == RtSumMode::Memory && st.mem().is_none();
        let mut me = RtBits {
            tx,
            l,
            maps,
            bs,
            last: None,
        };
        if load {
            me.load_summary()?;
        }
        Ok(me)
    }

    fn load_summary(&mut self) -> Result<()> {
        let n = self.l.summary_counters() as usize;
        if n as u64 * RTWORD_BYTES as u64 > crate::cache::rtsum::MAX_MEM_SUMMARY_BYTES {
            // Too large to keep: search through the blocks instead.
            return Ok(());
        }
        let mut counters = Vec::with_capacity(n);
        let per = self.bs / RTWORD_BYTES;
        for (i, &daddr) in self.maps.summary.iter().enumerate() {
            if counters.len() >= n {
                break;
            }
            let b = self.tx.read_buf(daddr, self.bs, BufKind::RtSummary)?;
            let buf = self.tx.buf(b);
            let take = per.min(n - i * per);
            counters.extend((0..take).map(|w| fmt::word(buf, w)));
        }
        self.tx.rt_lock()?.set_mem(counters);
        Ok(())
    }

    // ------------------------------------------------------------ bitmap

    pub fn bitmap_buf(&mut self, block: u64) -> Result<BufId> {
        if let Some((b, id)) = self.last {
            if b == block {
                return Ok(id);
            }
        }
        let daddr = *self.maps.bitmap.get(block as usize).ok_or_else(|| {
            Error::corrupt(
                "rt bitmap inode",
                Location::Daddr(0),
                format!("bitmap block {block} past the file"),
            )
        })?;
        let id = self.tx.read_buf(daddr, self.bs, BufKind::RtBitmap)?;
        self.tx.rt_lock()?.stats.bitmap_reads += 1;
        self.last = Some((block, id));
        Ok(id)
    }

    /// Whether rt extent `x` is free.
    pub fn is_free(&mut self, x: u64) -> Result<bool> {
        let bpb = self.l.bits_per_block();
        let id = self.bitmap_buf(x / bpb)?;
        Ok(fmt::bit_is_free(self.tx.buf(id), x % bpb))
    }

    /// The end of the run of extents whose bits say `free` that starts at
    /// `x`, looking no further than `end` (<= rextents).
    pub fn run_end(&mut self, x: u64, end: u64, free: bool) -> Result<u64> {
        let bpb = self.l.bits_per_block();
        let mut p = x;
        while p < end {
            let block = p / bpb;
            let id = self.bitmap_buf(block)?;
            let buf = self.tx.buf(id);
            let block_end = ((block + 1) * bpb).min(end);
            while p < block_end {
                let bit = p % bpb;
                let w = fmt::word(buf, (bit / RTWORD_BITS) as usize);
                // Bits that differ from what we are following.
                let diff = if free { !w } else { w } >> (bit % RTWORD_BITS);
                if diff != 0 {
                    return Ok((p + diff.trailing_zeros() as u64).min(end));
                }
                p += RTWORD_BITS - bit % RTWORD_BITS;
            }
            p = p.min(block_end);
        }
        Ok(end)
    }

    /// The start of the run of extents whose bits say `free` that ends at
    /// `x` (inclusive; `x`'s own bit must say `free`).
    pub fn run_start(&mut self, x: u64, free: bool) -> Result<u64> {
        let bpb = self.l.bits_per_block();
        let mut p = x; // p's bit says `free`; look at p and below
        loop {
            let block = p / bpb;
            let id = self.bitmap_buf(block)?;
            let buf = self.tx.buf(id);
            let block_start = block * bpb;
            loop {
                let bit = p % bpb;
                let wbase = p - bit % RTWORD_BITS;
                let w = fmt::word(buf, (bit / RTWORD_BITS) as usize);
                let keep = bit % RTWORD_BITS + 1; // bits 0..=p of the word
                let mask = if keep >= 32 {
                    u32::MAX
                } else {
                    (1u32 << keep) - 1
                };
                let diff = if free { !w } else { w } & mask;
                if diff != 0 {
                    return Ok(wbase + (31 - diff.leading_zeros()) as u64 + 1);
                }
                if wbase == 0 {
                    return Ok(0);
                }
                p = wbase - 1;
                if p < block_start {
                    break;
                }
            }
        }
    }

    /// Mark `[x, x + n)` free or used and log the words changed.
    pub fn set_range(&mut self, x: u64, n: u64, free: bool) -> Result<()> {
        let bpb = self.l.bits_per_block();
        let mut p = x;
        let end = x + n;
        while p < end {
            let block = p / bpb;
            let first = p % bpb;
            let cnt = (bpb - first).min(end - p);
            let id = self.bitmap_buf(block)?;
            let st = self.tx.rt_lock()?;
            st.note_change(block);
            let old = st.take_runs(block);
            fmt::set_bits(self.tx.buf_mut(id), first, cnt, free);
            if let Some(old) = old {
                // The block's runs, kept up to date (see rtalloc::runs).
                let base = block * bpb;
                let nbits = self.l.bits_in_block(block);
                let new = super::runs::update_runs(&old, p, p + cnt, self.tx.buf(id), base, nbits);
                self.tx.rt_lock()?.set_block_runs(block, new.into());
            }
            let w0 = (first / RTWORD_BITS) as usize * RTWORD_BYTES;
            let w1 = (first + cnt).div_ceil(RTWORD_BITS) as usize * RTWORD_BYTES;
            self.tx.log_buf(id, w0..w1);
            p += cnt;
        }
        Ok(())
    }

    // ----------------------------------------------------------- summary

    /// Summary counter `(log, bbno)`.
    pub fn sum_get(&mut self, log: u32, bbno: u64) -> Result<u32> {
        let idx = self.index(log, bbno)?;
        let st = self.tx.rt_lock()?;
        if let Some(m) = st.mem() {
            return Ok(m[idx]);
        }
        st.stats.summary_reads += 1;
        let (id, off) = self.summary_word(idx)?;
        Ok(fmt::word(self.tx.buf(id), off))
    }

    /// Add `delta` to counter `(log, bbno)` (logged; the in-memory copy
    /// and the min-level bound follow).
    pub fn sum_add(&mut self, log: u32, bbno: u64, delta: i32) -> Result<()> {
        let idx = self.index(log, bbno)?;
        let (id, off) = self.summary_word(idx)?;
        let old = fmt::word(self.tx.buf(id), off);
        let new = old.checked_add_signed(delta).ok_or_else(|| {
            Error::corrupt(
                "rt summary inode",
                Location::Daddr(0),
                format!("counter of level {log}, bitmap block {bbno} is {old}, cannot add {delta}"),
            )
        })?;
        fmt::put_word(self.tx.buf_mut(id), off, new);
        self.tx
            .log_buf(id, off * RTWORD_BYTES..(off + 1) * RTWORD_BYTES);
        let st = self.tx.rt_lock()?;
        st.mem_put(idx, log, bbno, new);
        if new > 0 {
            st.loosen(bbno, log);
        }
        Ok(())
    }

    fn index(&self, log: u32, bbno: u64) -> Result<usize> {
        self.l.summary_index(log, bbno).ok_or_else(|| {
            Error::Invalid(format!("summary counter level {log}, bitmap block {bbno}"))
        })
    }

    fn summary_word(&mut self, idx: usize) -> Result<(BufId, usize)> {
        let per = self.bs / RTWORD_BYTES;
        let daddr = *self.maps.summary.get(idx / per).ok_or_else(|| {
            Error::corrupt(
                "rt summary inode",
                Location::Daddr(0),
                format!("summary counter {idx} past the file"),
            )
        })?;
        let id = self.tx.read_buf(daddr, self.bs, BufKind::RtSummary)?;
        Ok((id, idx % per))
    }
}
