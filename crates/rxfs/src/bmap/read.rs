//! File reads over the decoded extent lists: what `read(2)` of a regular
//! file returns (holes and unwritten extents read as zeros; realtime files
//! from the realtime device).
//!
//! Invariant: extents in a [`crate::inode::Fork`] are sorted,
//! non-overlapping and point inside their device (checked when the inode
//! was loaded, [`crate::inode::decode`]), so the mapping code here only has
//! to clip to the request.

use crate::error::{Error, Result};
use crate::inode::{Inode, ReadCtx};
use crate::types::{FileBlock, FileType, FsBlock, RtBlock};

/// Largest single device read issued for file data.
const READ_CHUNK_BYTES: u64 = 1 << 20;

/// Read up to `buf.len()` bytes of a regular file at byte `offset`;
/// holes and unwritten extents read as zeros. Returns the byte count
/// (short only at EOF).
///
/// On a read-write mount the read holds the file's I/O lock shared
/// ([`ReadCtx::data_read_lock`]: no truncate, punch or allocation runs
/// meanwhile, so the blocks mapped stay the file's) and takes its mapping
/// from a copy of the inode read under the shared ilock
/// ([`ReadCtx::read_locked`]).
pub fn read_file(
    fs: &(impl ReadCtx + ?Sized),
    ip: &Inode,
    offset: u64,
    buf: &mut [u8],
) -> Result<usize> {
    let _io = fs.data_read_lock(ip.ino)?;
    // The mapping as of now; the ilock is not needed past this (the
    // I/O lock keeps the blocks the file's).
    let cur = fs.read_locked(ip)?.fresh();
    read_file_in(fs, cur.as_deref().unwrap_or(ip), offset, buf)
}

fn read_file_in(
    fs: &(impl ReadCtx + ?Sized),
    ip: &Inode,
    offset: u64,
    buf: &mut [u8],
) -> Result<usize> {
    match ip.file_type() {
        Some(FileType::Regular) => {}
        Some(FileType::Directory) => return Err(Error::IsDir),
        _ => return Err(Error::Invalid("not a regular file".into())),
    }
    let size = ip.core.size;
    if offset >= size {
        return Ok(0);
    }
    let want = (buf.len() as u64).min(size - offset) as usize;
    let buf = &mut buf[..want];
    let bs = fs.geo().blocksize as u64;
    let blocklog = fs.geo().blocklog;
    let realtime = ip.is_realtime();
    let mut done = 0usize;
    while done < want {
        let pos = offset + done as u64;
        let fb = FileBlock(pos >> blocklog);
        let in_block = pos & (bs - 1);
        let (ext, run_blocks) = ip.data.map(fb);
        // Bytes this mapping covers from pos, clipped to the request.
        let run_bytes = run_blocks
            .saturating_mul(bs)
            .saturating_sub(in_block)
            .min((want - done) as u64)
            .min(READ_CHUNK_BYTES) as usize;
        let dst = &mut buf[done..done + run_bytes];
        match ext {
            Some(e) if !e.unwritten => {
                let blk = e.start + (fb.0 - e.off.0);
                if realtime {
                    let rt = fs.rtdev().ok_or_else(|| {
                        Error::NotSupported(format!(
                            "inode {} is a realtime file: give the realtime device (-o rtdev=FILE)",
                            ip.ino.0
                        ))
                    })?;
                    let byte = fs.geo().rtb_to_byte(RtBlock(blk)) + in_block;
                    rt.read_at(dst, byte)?;
                } else {
                    let byte = fs.geo().fsb_to_daddr(FsBlock(blk)).bytes() + in_block;
                    fs.dev().read_at(dst, byte)?;
                }
            }
            _ => dst.fill(0),
        }
        done += run_bytes;
    }
    Ok(want)
}
