//! mkfs: write a new, empty XFS v5 filesystem, as mkfs.xfs makes it.
//!
//! - [`plan`]: the geometry from the options and the device sizes
//!   (mkfs.xfs's rules; pure);
//! - [`ag`]: each AG's space map, header sectors and btree roots;
//! - [`inodes`]: the root inode chunk and the realtime bitmap/summary.
//!
//! Write order and crash safety. A new filesystem has no log to protect
//! it yet, so mkfs does what mkfs.xfs does: the primary superblock goes
//! out first with `sb_inprogress = 1` (the kernel and xfs_repair refuse such
//! a filesystem), then the log (zeroed, one unmount record at block 0,
//! cycle 1), the AG headers and roots, the root chunk and the realtime
//! files; a flush; then the primary superblock with `sb_inprogress = 0`
//! and the final counters; a flush. A crash before the last write leaves
//! a filesystem that nothing mounts; after it, a complete one.
//!
//! What mkfs.xfs leaves that is kept here exactly: every AG's headers and
//! roots, the secondary superblocks (written while the root inode did not
//! exist: rootino NULL, inprogress 1, zero inode counts; the last one and
//! the middle one then get the root inode number), the AGFL filled from
//! index 1, the root inode chunk right after the AGFL blocks, aligned.
//! Old XFS superblocks on the device are wiped first, like mkfs.xfs does,
//! so xfs_repair never finds a stale secondary.

pub mod ag;
pub mod image;
pub mod inodes;
pub mod plan;
pub mod probe;

pub use plan::{Features, MkfsOptions, Plan};

use crate::bdev::BlockDevice;
use crate::error::{Error, Result};
use crate::format::inode::Timestamp;
use crate::format::sb::{Superblock, SB_MAGIC};
use inodes::RtFile;

/// Bytes wiped at the start and the end of the data device (old
/// filesystem signatures, MD superblocks), as mkfs.xfs does.
const WHACK_BYTES: u64 = 128 * 1024;

/// What mkfs made.
#[derive(Debug, Clone)]
pub struct Made {
    pub plan: Plan,
    pub sb: Superblock,
}

/// Make a filesystem on `dev` (and `rtdev`). `dev_sectsize` is the data
/// device's sector size (512 for image files); `now` stamps the new inodes.
pub fn mkfs(
    dev: &dyn BlockDevice,
    rtdev: Option<&dyn BlockDevice>,
    o: &MkfsOptions,
    dev_sectsize: u32,
    now: Timestamp,
) -> Result<Made> {
    if dev.read_only() || rtdev.is_some_and(|d| d.read_only()) {
        return Err(Error::ReadOnly("mkfs needs a writable device".into()));
    }
    let plan = Plan::new(o, dev.size(), dev_sectsize, rtdev.map(|d| d.size()))?;
    let p = &plan;
    let tmpl = p.superblock();

    wipe_old_xfs(dev)?;
    let whack = WHACK_BYTES.min(dev.size());
    dev.zero_range(0, whack)?;
    dev.zero_range(dev.size() - whack, whack)?;
    let mut sect = vec![0u8; p.sectsize as usize];
    tmpl.encode(&mut sect);
    dev.write_at(&sect, 0)?;

    write_log(dev, p)?;

    // AG 0's extra pieces: the root chunk, then the realtime files at the
    // first free blocks that hold them (where mkfs.xfs's allocator puts
    // them).
    let chunk = (p.chunk_agbno, p.chunk_blocks, ag::OWN_INODES, 0);
    let mut extra = vec![chunk];
    let mut rt_files = [None, None];
    for (i, len) in [p.rbmblocks, p.rsumblocks].into_iter().enumerate() {
        if len == 0 {
            continue;
        }
        let space = ag::layout(p, 0, &extra);
        let Some(&(start, _)) = space.free.iter().find(|f| f.1 >= len) else {
            return Err(Error::Invalid(
                "no room in AG 0 for the realtime bitmap and summary".into(),
            ));
        };
        let owner = p.chunk_ino(1 + i as u32);
        extra.push((start, len, owner, 0));
        rt_files[i] = Some(RtFile {
            start: p.fsb(0, start),
            len,
        });
    }

    let mut free_total = 0u64;
    for agno in 0..p.agcount {
        let space = ag::layout(p, agno, if agno == 0 { &extra } else { &[] });
        free_total += space.free.iter().map(|f| f.1 as u64).sum::<u64>() + space.agfl.len() as u64;
        if agno > 0 {
            let mut s = vec![0u8; p.sectsize as usize];
            tmpl.encode(&mut s);
            dev.write_at(&s, p.byte(agno, 0))?;
        }
        for (off, bytes) in ag::encode(p, &space) {
            // The write verifier of every header and btree root.
            crate::format::meta_header::verify_for_write(&bytes, off / 512, &tmpl.metadata_uuid())?;
            dev.write_at(&bytes, off)?;
        }
    }

    let mut sb = tmpl.clone();
    sb.rootino = p.chunk_ino(0);
    sb.rbmino = p.chunk_ino(1);
    sb.rsumino = p.chunk_ino(2);
    sb.icount = p.chunk_inodes as u64;
    sb.ifree = p.chunk_inodes as u64 - 3;
    sb.fdblocks = free_total;
    sb.frextents = p.rextents;

    let chunk_bytes = inodes::chunk(p, &sb, now, rt_files[0], rt_files[1], o.rtinherit);
    // Every inode of the root chunk through the inode verifier.
    let isz = p.inodesize as usize;
    for (i, raw) in chunk_bytes.chunks(isz).enumerate() {
        let ino = crate::types::Ino(p.chunk_ino(i as u32));
        crate::format::inode::decode_core(raw, ino, &sb.metadata_uuid(), o.features.nrext64)?;
    }
    dev.write_at(&chunk_bytes, p.byte(0, p.chunk_agbno))?;
    if let (Some(rbm), Some(rsum)) = (rt_files[0], rt_files[1]) {
        dev.write_at(&inodes::rt_bitmap(p), rbm.start << p.blocklog)?;
        dev.write_at(&inodes::rt_summary(p), rsum.start << p.blocklog)?;
    }
    if let Some(rt) = rtdev {
        if p.rblocks > 0 {
            // Like mkfs.xfs: make sure the end of the realtime area is
            // writable.
            let last = (p.rblocks - 1) << p.blocklog;
            rt.write_at(&vec![0u8; p.blocksize as usize], last)?;
            rt.flush()?;
        }
    }

    // The secondaries mkfs.xfs rewrites with the root inode number.
    let mut again = vec![p.agcount - 1];
    if p.agcount > 2 {
        again.push((p.agcount - 1) / 2);
    }
    for agno in again {
        let mut s2 = tmpl.clone();
        s2.rootino = sb.rootino;
        let mut s = vec![0u8; p.sectsize as usize];
        s2.encode(&mut s);
        dev.write_at(&s, p.byte(agno, 0))?;
    }
    dev.flush()?;

    sb.inprogress = 0;
    sb.encode(&mut sect);
    dev.write_at(&sect, 0)?;
    dev.flush()?;
    Ok(Made { plan, sb })
}

/// Zero the superblock sectors of an old XFS filesystem found on `dev`
/// (its secondaries would otherwise mislead xfs_repair), when its primary
/// superblock still describes a sane geometry.
fn wipe_old_xfs(dev: &dyn BlockDevice) -> Result<()> {
    if dev.size() < 512 {
        return Ok(());
    }
    let mut s = vec![0u8; 512];
    dev.read_at(&mut s, 0)?;
    if crate::format::be32(&s, 0) != SB_MAGIC {
        return Ok(());
    }
    let Ok(old) = Superblock::decode_unverified(&s) else {
        return Ok(());
    };
    let bs = old.blocksize as u64;
    let ss = old.sectsize as u64;
    if !bs.is_power_of_two()
        || !(512..=65536).contains(&bs)
        || !ss.is_power_of_two()
        || ss < 512
        || old.agblocks < 64
    {
        return Ok(());
    }
    let zeros = vec![0u8; ss as usize];
    let ags = (dev.size() / (old.agblocks as u64 * bs)).min((old.agcount as u64).saturating_sub(1));
    for agno in 1..=ags {
        let off = agno * old.agblocks as u64 * bs;
        if off + ss > dev.size() {
            break;
        }
        dev.write_at(&zeros, off)?;
    }
    Ok(())
}

/// Zero the log and write one unmount record at block 0, cycle 1 (tail =
/// head): a clean log that the kernel continues from.
fn write_log(dev: &dyn BlockDevice, p: &Plan) -> Result<()> {
    let start = p.byte(p.logagno, p.log_agbno);
    let bytes = (p.logblocks as u64) << p.blocklog;
    dev.zero_range(start, bytes)?;
    let sunit = if p.sectsize > 512 { p.sectsize } else { 0 };
    let rec =
        crate::recover::clean::unmount_record(crate::types::Lsn::new(1, 0), p.uuid, sunit, None);
    let mut rec = rec;
    let raw = rec.encode(None);
    dev.write_at(&raw, start)
}

#[cfg(test)]
mod tests;
