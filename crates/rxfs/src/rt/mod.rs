//! The realtime section: the checks made at open, the bitmap and summary
//! files, free-space queries (over [`ReadCtx`], as every read path).
//!
//! Formats are in [`crate::format::rt`]. What this module adds:
//!
//! - At open (`check_at_open`) the superblock's realtime geometry is
//!   validated like the kernel's superblock verifier does, always; when a
//!   realtime device is given it must hold `rblocks * blocksize` bytes, and
//!   giving one to a filesystem without realtime section is an error.
//!   Without a realtime device a realtime filesystem still opens: its
//!   metadata (bitmap, summary) lives on the data device and stays
//!   readable, but reading realtime file data fails with `NotSupported`
//!   naming `-o rtdev=FILE` (in [`crate::bmap::read::read_file`]).
//! - Realtime file data: the data-fork records of an inode with
//!   DIFLAG_REALTIME hold rt block numbers (checked against `rblocks` when
//!   the inode is loaded), read from the rt device at `rtblock * blocksize`.
//! - The bitmap inode (sb_rbmino) and summary inode (sb_rsumino) must be
//!   regular, non-realtime files of exactly `rbmblocks` blocks and
//!   `summary_bytes()` bytes (what xfs_repair demands), with every block
//!   mapped and written: they have no headers or CRCs, so a hole or an
//!   unwritten extent there is corruption, never "zeros".
//!
//! Memory: bitmap scans hold one block at a time; the summary counters are
//! loaded whole, refused above [`MAX_SUMMARY_LOAD_BYTES`]. Work is bounded
//! by `rbmblocks` (a u32), every block read once per scan.

use std::sync::Arc;

use crate::bdev::BlockDevice;
use crate::error::{Error, Location, Result};
use crate::format::rt::{self as fmt, FreeRunScanner, RangeState, RtExtentNo, RtLayout, RtSummary};
use crate::format::sb::Superblock;
use crate::inode::{Fork, Inode, ReadCtx};
use crate::types::{FileType, Ino};

/// Largest summary file [`summary`] loads into memory
/// (a 1 PiB rt device with 4 KiB extents needs about 1.3 GiB; anything
/// that large is refused rather than allocated).
pub const MAX_SUMMARY_LOAD_BYTES: u64 = 256 << 20;

/// Superblock and device checks made by `Filesystem::open`.
pub(crate) fn check_at_open(sb: &Superblock, rtdev: Option<&dyn BlockDevice>) -> Result<()> {
    let layout = RtLayout::validate(sb).map_err(|d| {
        Error::corrupt(
            "superblock",
            Location::Daddr(0),
            format!("realtime geometry: {d}"),
        )
    })?;
    let Some(dev) = rtdev else {
        return Ok(());
    };
    if layout.rblocks == 0 {
        return Err(Error::Invalid(
            "rtdev given but the filesystem has no realtime section".into(),
        ));
    }
    let need = layout
        .rblocks
        .checked_mul(layout.blocksize as u64)
        .ok_or_else(|| {
            Error::corrupt(
                "superblock",
                Location::Daddr(0),
                format!("rblocks {} overflows", layout.rblocks),
            )
        })?;
    if dev.size() < need {
        return Err(Error::Invalid(format!(
            "realtime device has {} bytes, filesystem needs {need} ({} blocks of {})",
            dev.size(),
            layout.rblocks,
            layout.blocksize
        )));
    }
    Ok(())
}

/// Result of [`check`]: the bitmap compared with the
/// summary file and the superblock's free count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RtCheck {
    /// Free rt extents counted in the bitmap.
    pub free_extents: u64,
    /// What the superblock says (`sb_frextents`).
    pub sb_frextents: u64,
    /// Free runs found in the bitmap.
    pub free_runs: u64,
    /// Counters that differ: (log, bitmap block, on disk, from the bitmap).
    pub summary_mismatches: Vec<(u32, u64, u32, u32)>,
    /// Free runs that fit no summary counter (longer than rextslog allows).
    pub runs_outside_summary: u64,
}

impl RtCheck {
    /// Bitmap, summary and superblock agree.
    pub fn is_clean(&self) -> bool {
        self.free_extents == self.sb_frextents
            && self.summary_mismatches.is_empty()
            && self.runs_outside_summary == 0
    }
}

/// The realtime geometry (validated at open).
pub fn layout(fs: &(impl ReadCtx + ?Sized)) -> RtLayout {
    RtLayout::of(fs.sb())
}

/// The realtime bitmap inode, checked (see the module documentation).
pub fn bitmap_inode(fs: &(impl ReadCtx + ?Sized)) -> Result<Arc<Inode>> {
    let l = layout(fs);
    meta_inode(fs, fs.sb().rbmino, "rt bitmap inode", l.bitmap_bytes())
}

/// The realtime summary inode, checked (see the module documentation).
pub fn summary_inode(fs: &(impl ReadCtx + ?Sized)) -> Result<Arc<Inode>> {
    let l = layout(fs);
    meta_inode(fs, fs.sb().rsumino, "rt summary inode", l.summary_bytes())
}

fn meta_inode(
    fs: &(impl ReadCtx + ?Sized),
    ino: u64,
    what: &'static str,
    bytes: u64,
) -> Result<Arc<Inode>> {
    let at = Location::Ino(ino);
    if !fs.geo().ino_valid(Ino(ino)) {
        return Err(Error::corrupt(
            "superblock",
            Location::Daddr(0),
            format!("{what} number {ino} out of range"),
        ));
    }
    let ip = match fs.iget(Ino(ino)) {
        Err(Error::NotFound) => return Err(Error::corrupt(what, at, "inode is free")),
        r => r?,
    };
    if ip.file_type() != Some(FileType::Regular) {
        return Err(Error::corrupt(
            what,
            at,
            format!("mode {:#o} is not a regular file", ip.core.mode),
        ));
    }
    if ip.is_realtime() {
        return Err(Error::corrupt(what, at, "has the realtime flag"));
    }
    if ip.core.size != bytes {
        return Err(Error::corrupt(
            what,
            at,
            format!("size {} but the superblock implies {bytes}", ip.core.size),
        ));
    }
    let Fork::Extents { list, .. } = &ip.data else {
        return Err(Error::corrupt(
            what,
            at,
            "data fork is not extents or btree",
        ));
    };
    // Every block below EOF mapped by a written extent, in order.
    let blocks = bytes >> fs.geo().blocklog;
    let mut next = 0u64;
    for e in list.iter().take_while(|e| e.off.0 < blocks) {
        if e.off.0 != next {
            return Err(Error::corrupt(what, at, format!("hole at block {next}")));
        }
        if e.unwritten {
            return Err(Error::corrupt(
                what,
                at,
                format!("unwritten extent at block {}", e.off.0),
            ));
        }
        next = e.end();
    }
    if next < blocks {
        return Err(Error::corrupt(
            what,
            at,
            format!("blocks {next}..{blocks} are not mapped"),
        ));
    }
    Ok(ip)
}

/// The disk addresses of every block of the bitmap and summary files
/// (both checked: fully mapped, written), for the allocator.
pub fn maps(fs: &(impl ReadCtx + ?Sized)) -> Result<crate::cache::rtsum::RtMaps> {
    let l = layout(fs);
    let bmp = bitmap_inode(fs)?;
    let sum = summary_inode(fs)?;
    let one = |ip: &Inode, bytes: u64, what| {
        crate::rtalloc::file_blocks(
            fs.geo(),
            ip.data.extents().iter().copied(),
            bytes,
            what,
            ip.ino.0,
        )
    };
    Ok(crate::cache::rtsum::RtMaps {
        bitmap: one(&bmp, l.bitmap_bytes(), "rt bitmap inode")?,
        summary: one(&sum, l.summary_bytes(), "rt summary inode")?,
    })
}

/// Read bitmap block `bbno` of the (checked) bitmap inode `bmp`.
pub fn bitmap_block(fs: &(impl ReadCtx + ?Sized), bmp: &Inode, bbno: u64) -> Result<Vec<u8>> {
    let l = layout(fs);
    if bbno >= l.rbmblocks as u64 {
        return Err(Error::Invalid(format!(
            "bitmap block {bbno} of {}",
            l.rbmblocks
        )));
    }
    let bs = l.blocksize as usize;
    let mut buf = vec![0u8; bs];
    let n = crate::bmap::read::read_file(fs, bmp, bbno * bs as u64, &mut buf)?;
    if n != bs {
        return Err(Error::corrupt(
            "rt bitmap inode",
            Location::Ino(bmp.ino.0),
            format!("short read of block {bbno}"),
        ));
    }
    Ok(buf)
}

/// Free realtime extents according to the bitmap (equal to
/// `sb_frextents` on a clean filesystem). 0 without realtime section.
pub fn free_extents(fs: &(impl ReadCtx + ?Sized)) -> Result<u64> {
    let l = layout(fs);
    if l.is_empty() {
        return Ok(0);
    }
    let bmp = bitmap_inode(fs)?;
    let mut free = 0;
    for b in 0..l.rbmblocks as u64 {
        let blk = bitmap_block(fs, &bmp, b)?;
        free += fmt::count_free(&blk, l.bits_in_block(b));
    }
    Ok(free)
}

/// The summary counters as stored in the summary file.
pub fn summary(fs: &(impl ReadCtx + ?Sized)) -> Result<RtSummary> {
    let l = layout(fs);
    check_summary_size(&l)?;
    if l.is_empty() {
        return Ok(RtSummary::zeroed(&l));
    }
    let sip = summary_inode(fs)?;
    let mut buf = vec![0u8; l.summary_bytes() as usize];
    let n = crate::bmap::read::read_file(fs, &sip, 0, &mut buf)?;
    let at = Location::Ino(sip.ino.0);
    if n != buf.len() {
        return Err(Error::corrupt("rt summary inode", at, "short read"));
    }
    RtSummary::decode(&buf, &l).map_err(|d| Error::corrupt("rt summary inode", at, d))
}

fn check_summary_size(l: &RtLayout) -> Result<()> {
    if l.summary_bytes() > MAX_SUMMARY_LOAD_BYTES {
        return Err(Error::NotSupported(format!(
            "realtime summary of {} bytes is larger than the {MAX_SUMMARY_LOAD_BYTES} bytes rxfs loads",
            l.summary_bytes()
        )));
    }
    Ok(())
}

/// Whether rt extents `start .. start + count` are free, in use, or
/// mixed, according to the bitmap. The range must lie inside the
/// realtime section and not be empty.
pub fn extent_state(
    fs: &(impl ReadCtx + ?Sized),
    start: RtExtentNo,
    count: u64,
) -> Result<RangeState> {
    let l = layout(fs);
    if count == 0 || start.0.checked_add(count).is_none_or(|e| e > l.rextents) {
        return Err(Error::Invalid(format!(
            "rt extents {}+{count} outside 0..{}",
            start.0, l.rextents
        )));
    }
    let bmp = bitmap_inode(fs)?;
    let bpb = l.bits_per_block();
    let end = start.0 + count;
    let mut state: Option<RangeState> = None;
    let mut x = start.0;
    while x < end {
        let b = x / bpb;
        let n = ((b + 1) * bpb).min(end) - x;
        let blk = bitmap_block(fs, &bmp, b)?;
        let s = fmt::range_state(&blk, x - b * bpb, n);
        state = Some(match state {
            None => s,
            Some(p) if p == s => s,
            Some(_) => RangeState::Mixed,
        });
        if state == Some(RangeState::Mixed) {
            break;
        }
        x += n;
    }
    Ok(state.unwrap_or(RangeState::Mixed))
}

/// Recompute the free count and the summary from the bitmap and compare
/// them with the superblock and the summary file (what xfs_repair's
/// realtime checks compare, minus the inodes' extents).
pub fn check(fs: &(impl ReadCtx + ?Sized)) -> Result<RtCheck> {
    let l = layout(fs);
    check_summary_size(&l)?;
    let ondisk = summary(fs)?;
    let mut computed = RtSummary::zeroed(&l);
    let (mut free, mut runs, mut outside) = (0u64, 0u64, 0u64);
    if !l.is_empty() {
        let bmp = bitmap_inode(fs)?;
        let bpb = l.bits_per_block();
        let mut scan = FreeRunScanner::new(&l);
        let mut found = |s: u64, n: u64| {
            free += n;
            runs += 1;
            if !computed.add_run(s, n, bpb) {
                outside += 1;
            }
        };
        for b in 0..l.rbmblocks as u64 {
            let blk = bitmap_block(fs, &bmp, b)?;
            scan.feed(&blk, &mut found);
        }
        scan.finish(&mut found);
    }
    Ok(RtCheck {
        free_extents: free,
        sb_frextents: fs.sb().frextents,
        free_runs: runs,
        summary_mismatches: ondisk.diff(&computed),
        runs_outside_summary: outside,
    })
}
