//! File data operations on top of the extent map, generic over
//! [`MetaTx`]: one bounded write step, size changes (truncate/extend) and
//! attribute changes. The [`crate::fs::Filesystem`] wrappers
//! (`fs/ops_data.rs`) lock, run these in a transaction and commit.
//!
//! Data is not logged: it goes straight to the device. The ordering rules
//! that keep a crash harmless:
//! - new blocks get their data (and zeros around it) written *before* the
//!   transaction that maps them commits: a crash before the commit leaves
//!   them free, never leaves a mapping to stale contents;
//! - blocks freed by a truncate are busy until the freeing checkpoint is on
//!   disk, so no write can land in them while the old mapping could still
//!   be recovered;
//! - bytes between the old EOF and the start of a write (or a new, larger
//!   size) that lie in mapped written blocks are zeroed on disk first, so a
//!   grown file never exposes old block contents; a truncate zeroes the
//!   tail of the new last block.
//!
//! Writes into unwritten extents convert the written blocks (whole blocks,
//! zero-filled) in the same transaction.
//!
//! Limits: writes into REFLINK-flagged inodes (possibly shared blocks:
//! copy-on-write) are `NotSupported`; the setuid
//! bit is not dropped on write (no caller credentials here).

use super::{free_tail, prepare_write, read_map, set_size, set_times, ExtentMap, Placement};
use crate::bdev::BlockDevice;
use crate::error::{Error, Result};
use crate::format::bmbt::Extent;
use crate::format::dinode_edit as di;
use crate::format::inode::{Timestamp, DIFLAG2_REFLINK};
use crate::types::{FileBlock, FsBlock, Ino};
use crate::xact::{InodeId, MetaTx};

/// Attribute changes (`None`: unchanged). Setting `size` truncates or
/// extends; ctime is set to `ctime` or now when anything changes.
#[derive(Debug, Clone, Copy, Default)]
pub struct SetAttr {
    /// Permission bits (the file type bits are kept).
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<Timestamp>,
    pub mtime: Option<Timestamp>,
    pub ctime: Option<Timestamp>,
}

/// Most blocks one write transaction allocates (bounds its log space).
pub const WRITE_TX_BLOCKS: u64 = 1024;

/// Largest single device write of zeros.
const ZERO_CHUNK_BYTES: u64 = 1 << 20;

const S_IFMT: u16 = 0o170000;
const S_IFREG: u16 = 0o100000;
const S_IFDIR: u16 = 0o040000;
const S_ISUID: u16 = 0o4000;
const S_ISGID: u16 = 0o2000;
const S_IXGRP: u16 = 0o0010;

/// The tick of the clock file times are stamped with (see [`now`]): the
/// kernel's timer tick (4 ms with `HZ=250`), as `clock_getres` reports it
/// for the coarse clock.
pub fn timestamp_tick_ns() -> u32 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_getres writes one timespec we own.
    let r = unsafe { libc::clock_getres(libc::CLOCK_REALTIME_COARSE, &mut ts) };
    if r != 0 || ts.tv_sec != 0 || ts.tv_nsec <= 0 {
        return 4_000_000;
    }
    ts.tv_nsec as u32
}

/// The current time for inode timestamps: the kernel's coarse real-time
/// clock, the one its `current_time` reads for filesystems without
/// fine-grained stamps (FUSE mounts among them). So the times rxfs stamps
/// and those the kernel stamps on a FUSE mount's files (its write-back
/// cache owns mtime and ctime, and relatime compares atime with them)
/// come from one clock and never go backwards against each other; and an
/// overwrite can tell whether the tick changed since the inode's last
/// stamp (see [`crate::fs::overwrite`]).
pub fn now() -> Timestamp {
    if let Some(t) = crate::clock::fixed() {
        return t;
    }
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) };
    if r == 0 && (0..1_000_000_000).contains(&ts.tv_nsec) {
        return Timestamp {
            sec: ts.tv_sec,
            nsec: ts.tv_nsec as u32,
        };
    }
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Timestamp {
        sec: d.as_secs() as i64,
        nsec: d.subsec_nanos(),
    }
}

pub(super) fn require_regular(tx: &dyn MetaTx, ip: InodeId) -> Result<()> {
    match di::mode(tx.inode(ip)) & S_IFMT {
        S_IFREG => Ok(()),
        S_IFDIR => Err(Error::IsDir),
        _ => Err(Error::Invalid("not a regular file".into())),
    }
}

pub(super) fn refuse_reflink(tx: &dyn MetaTx, ip: InodeId) -> Result<()> {
    if di::flags2(tx.inode(ip)) & DIFLAG2_REFLINK != 0 {
        return Err(Error::NotSupported(
            "writing a reflinked file (copy-on-write)".into(),
        ));
    }
    Ok(())
}

/// How a write step runs.
#[derive(Debug, Clone, Copy)]
pub struct WriteOpts {
    /// The new mtime and ctime; `None` leaves them as they are (a write
    /// from a cache whose owner stamps the times itself: the kernel's page
    /// cache under FUSE_WRITEBACK_CACHE, which sends them with SETATTR).
    pub now: Option<Timestamp>,
    /// Where new blocks go ([`Placement::Anywhere`] for the retry after
    /// `NoSpace` in a fresh transaction).
    pub place: Placement,
    /// Most new blocks this step allocates (0..=[`WRITE_TX_BLOCKS`]; 0:
    /// only already mapped blocks, `NoSpace` if the write starts in a
    /// hole).
    pub max_blocks: u64,
}

impl WriteOpts {
    /// Now, near the file's blocks.
    pub fn now() -> Self {
        WriteOpts {
            now: Some(now()),
            place: Placement::Near,
            max_blocks: WRITE_TX_BLOCKS,
        }
    }
}

/// Write a prefix of `data` at byte `off` of regular file `ip`, allocating
/// at most `opts.max_blocks` new blocks; returns how many bytes were
/// written (at least one block's worth unless `data` is shorter). Data
/// reaches the device before this returns; the caller commits. Sets the
/// size when the write goes past EOF, and mtime = ctime = `opts.now`
/// (unless that is `None`).
pub fn write_step(
    tx: &mut dyn MetaTx,
    dev: &dyn BlockDevice,
    ip: InodeId,
    ino: Ino,
    off: u64,
    data: &[u8],
    opts: WriteOpts,
) -> Result<usize> {
    let now = opts.now;
    require_regular(&*tx, ip)?;
    refuse_reflink(&*tx, ip)?;
    if data.is_empty() {
        return Ok(0);
    }
    let geo = tx.geo();
    let (bs, bl, agblklog) = (geo.blocksize as u64, geo.blocklog, geo.agblklog);
    let end = off
        .checked_add(data.len() as u64)
        .filter(|e| *e <= i64::MAX as u64)
        .ok_or_else(|| Error::Invalid("write past the largest file size".into()))?;
    let old = ExtentMap::new(read_map(tx, ip)?, agblklog);
    let fb0 = off >> bl;
    let fb_end = end.div_ceil(bs);
    // Bound the allocation: cut the step where the hole budget runs out.
    let mut budget = opts.max_blocks.min(WRITE_TX_BLOCKS);
    let mut cut = fb_end;
    for (h, n) in old.holes(fb0, fb_end - fb0) {
        if n > budget {
            cut = h + budget;
            break;
        }
        budget -= n;
    }
    let step_end = end.min(cut << bl);
    if step_end <= off {
        // The first block needs an allocation the budget does not allow.
        return Err(Error::NoSpace);
    }
    let data = &data[..(step_end - off) as usize];
    let size = di::size(tx.inode(ip));
    if off > size {
        zero_written(&*tx, ip, dev, &old, size, off)?;
    }
    let (new, converted) = prepare_write(tx, ip, ino, FileBlock(fb0), cut - fb0, opts.place)?;
    let rt = super::is_rt(tx.inode(ip));
    // Old written mappings: in place, read-modify-write of partial blocks.
    for e in overlapping(&old, fb0, cut).filter(|e| !e.unwritten) {
        write_run(&*tx, dev, rt, e, off, data, false)?;
    }
    // New and formerly unwritten mappings: whole blocks, zero-filled
    // around the data.
    for e in new.iter().chain(&converted) {
        write_run(&*tx, dev, rt, e, off, data, true)?;
    }
    if rt {
        // Whole rt extents were mapped: zero their blocks the data does
        // not reach.
        let (d0, d1) = (off >> bl, step_end.div_ceil(bs));
        for e in &new {
            zero_blocks(&*tx, dev, e, e.off.0, e.end().min(d0))?;
            zero_blocks(&*tx, dev, e, e.off.0.max(d1), e.end())?;
        }
    }
    if step_end > size {
        set_size(tx, ip, step_end);
    }
    if now.is_some() {
        set_times(tx, ip, None, now, now);
    }
    di::bump_changecount(tx.inode_mut(ip), 1);
    Ok(data.len())
}

/// Extents of `map` overlapping file blocks `[fb0, fb1)`.
fn overlapping(map: &ExtentMap, fb0: u64, fb1: u64) -> impl Iterator<Item = &Extent> {
    let i = map.exts.partition_point(|e| e.end() <= fb0);
    map.exts[i..].iter().take_while(move |e| e.off.0 < fb1)
}

/// Write the part of `data` (file bytes from `off`) that falls in extent
/// `e`. `fresh`: the blocks are new, so whole blocks are written with zeros
/// around the data; else partial blocks are read first.
/// Byte address of block `blk` of a data fork mapping: an rt block on
/// the realtime device (`rt`), else a filesystem block.
pub fn disk_bytes(tx: &dyn MetaTx, rt: bool, blk: u64) -> u64 {
    let geo = tx.geo();
    if rt {
        blk << geo.blocklog
    } else {
        geo.fsb_to_daddr(FsBlock(blk)).bytes()
    }
}

/// Write zeros to file blocks `[fb0, fb1)` of the (realtime) mapping `e`.
fn zero_blocks(
    tx: &dyn MetaTx,
    dev: &dyn BlockDevice,
    e: &Extent,
    fb0: u64,
    fb1: u64,
) -> Result<()> {
    let bl = tx.geo().blocklog;
    let mut b = fb0;
    while b < fb1 {
        let n = (fb1 - b).min(ZERO_CHUNK_BYTES >> bl);
        let zeros = vec![0u8; (n << bl) as usize];
        dev.write_at(&zeros, disk_bytes(tx, true, e.start + (b - e.off.0)))?;
        b += n;
    }
    Ok(())
}

fn write_run(
    tx: &dyn MetaTx,
    dev: &dyn BlockDevice,
    rt: bool,
    e: &Extent,
    off: u64,
    data: &[u8],
    fresh: bool,
) -> Result<()> {
    let geo = tx.geo();
    let (bs, bl) = (geo.blocksize as u64, geo.blocklog);
    let end = off + data.len() as u64;
    let lo = off.max(e.off.0 << bl);
    let hi = end.min(e.end() << bl);
    if lo >= hi {
        return Ok(());
    }
    // Whole blocks touched, as file blocks and bytes.
    let b0 = lo >> bl;
    let b1 = hi.div_ceil(bs);
    let mut buf = vec![0u8; ((b1 - b0) << bl) as usize];
    let disk = disk_bytes(tx, rt, e.start + (b0 - e.off.0));
    let nb = buf.len();
    if !fresh {
        if lo & (bs - 1) != 0 {
            dev.read_at(&mut buf[..bs as usize], disk)?;
        }
        if hi & (bs - 1) != 0 && (b1 - 1 > b0 || lo & (bs - 1) == 0) {
            let at = nb - bs as usize;
            dev.read_at(&mut buf[at..], disk + at as u64)?;
        }
    }
    let s = (lo - (b0 << bl)) as usize;
    buf[s..s + (hi - lo) as usize].copy_from_slice(&data[(lo - off) as usize..(hi - off) as usize]);
    dev.write_at(&buf, disk)
}

/// Zero file bytes `[from, to)` wherever they are mapped to written
/// blocks (holes and unwritten extents already read as zeros).
pub fn zero_written(
    tx: &dyn MetaTx,
    ip: InodeId,
    dev: &dyn BlockDevice,
    map: &ExtentMap,
    from: u64,
    to: u64,
) -> Result<()> {
    let geo = tx.geo();
    let bl = geo.blocklog;
    if from >= to {
        return Ok(());
    }
    let rt = super::is_rt(tx.inode(ip));
    let mut zeros = Vec::new();
    for e in overlapping(map, from >> bl, to.div_ceil(geo.blocksize as u64)) {
        if e.unwritten {
            continue;
        }
        if zeros.is_empty() {
            // Shared blocks would need copy-on-write.
            refuse_reflink(tx, ip)?;
            zeros = vec![0u8; ZERO_CHUNK_BYTES as usize];
        }
        let mut lo = from.max(e.off.0 << bl);
        let hi = to.min(e.end() << bl);
        let base = disk_bytes(tx, rt, e.start);
        while lo < hi {
            let n = (hi - lo).min(ZERO_CHUNK_BYTES);
            dev.write_at(&zeros[..n as usize], base + (lo - (e.off.0 << bl)))?;
            lo += n;
        }
    }
    Ok(())
}

/// Change the size of regular file `ip`: down (or same) frees the blocks
/// past the new EOF (the highest [`super::TRUNCATE_TX_EXTENTS`] extents
/// in this transaction: call [`trim_eof_step`] in fresh transactions
/// until it returns false) and zeroes the tail of the new last block; up
/// zeroes whatever written blocks lie between the old and the new EOF.
/// Times untouched.
pub fn set_file_size(
    tx: &mut dyn MetaTx,
    dev: &dyn BlockDevice,
    ip: InodeId,
    size: u64,
) -> Result<()> {
    require_regular(&*tx, ip)?;
    if size > i64::MAX as u64 {
        return Err(Error::Invalid("size past the largest file size".into()));
    }
    let old = di::size(tx.inode(ip));
    let geo = tx.geo();
    let (bs, agblklog) = (geo.blocksize as u64, geo.agblklog);
    let map = ExtentMap::new(read_map(tx, ip)?, agblklog);
    if size <= old {
        // Tail of the new last block (if partial), then every block past
        // it, including preallocations past the old EOF (as the kernel
        // does for a truncate to the same or a smaller size).
        let tail_end = size.div_ceil(bs) * bs;
        if size < old {
            zero_written(&*tx, ip, dev, &map, size, tail_end)?;
        }
        free_tail(tx, ip, FileBlock(size.div_ceil(bs)), false)?;
    } else {
        zero_written(&*tx, ip, dev, &map, old, size)?;
    }
    set_size(tx, ip, size);
    Ok(())
}

/// Free the next batch of blocks past EOF (after a truncate); returns
/// whether more remain. `low_first`: the retry after `NoSpace` (see
/// [`super::fork::store_with`]).
pub fn trim_eof_step(tx: &mut dyn MetaTx, ip: InodeId, low_first: bool) -> Result<bool> {
    require_regular(&*tx, ip)?;
    let bs = tx.geo().blocksize as u64;
    let size = di::size(tx.inode(ip));
    free_tail(tx, ip, FileBlock(size.div_ceil(bs)), low_first)
}

/// Apply `attr` to joined inode `ip` (ctime = `attr.ctime` or `now`).
/// chown/chgrp of a non-directory drops setuid, and setgid when group
/// execute is set, unless the mode is set in the same call (as Linux
/// does). A size change also sets mtime unless given.
pub fn setattr(
    tx: &mut dyn MetaTx,
    dev: &dyn BlockDevice,
    ip: InodeId,
    attr: &SetAttr,
    now: Timestamp,
) -> Result<()> {
    let mut mtime = attr.mtime;
    if let Some(size) = attr.size {
        set_file_size(tx, dev, ip, size)?;
        mtime = mtime.or(Some(now));
    }
    let d = tx.inode_mut(ip);
    let mut mode = di::mode(d);
    if let Some(m) = attr.mode {
        mode = (mode & S_IFMT) | (m as u16 & !S_IFMT);
    } else if (attr.uid.is_some() || attr.gid.is_some()) && mode & S_IFMT != S_IFDIR {
        mode &= !S_ISUID;
        if mode & S_IXGRP != 0 {
            mode &= !S_ISGID;
        }
    }
    di::set_mode(d, mode);
    if let Some(u) = attr.uid {
        di::set_uid(d, u);
    }
    if let Some(g) = attr.gid {
        di::set_gid(d, g);
    }
    set_times(tx, ip, attr.atime, mtime, Some(attr.ctime.unwrap_or(now)));
    di::bump_changecount(tx.inode_mut(ip), 1);
    Ok(())
}
