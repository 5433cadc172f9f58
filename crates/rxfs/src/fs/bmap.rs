//! File reads and fork block reads on top of the decoded extent lists.
//!
//! Invariant: extents in a [`Fork`] are sorted, non-overlapping and point
//! inside their device (checked when the inode was loaded), so the mapping
//! code here only has to clip to the request.

use super::inode::{Fork, Inode};
use super::Filesystem;
use crate::error::{Error, Location, Result};
use crate::types::{Daddr, FileBlock, FileType, ForkKind, FsBlock, RtBlock};

/// Largest single device read issued for file data.
const READ_CHUNK_BYTES: u64 = 1 << 20;

impl Filesystem {
    /// Read up to `buf.len()` bytes of a regular file at byte `offset`;
    /// holes and unwritten extents read as zeros. Returns the byte count
    /// (short only at EOF).
    ///
    /// On a read-write mount the read holds the file's I/O lock shared
    /// (no truncate, punch or allocation runs meanwhile, so the blocks
    /// mapped stay the file's) and takes its mapping from a copy of the
    /// inode read under the shared ilock (see [`super::read_lock`]).
    pub fn read_file(&self, ip: &Inode, offset: u64, buf: &mut [u8]) -> Result<usize> {
        self.check_live()?;
        let _io = self.iolock(ip.ino, false);
        // The mapping as of now; the ilock is not needed past this (the
        // I/O lock keeps the blocks the file's).
        let cur = self.read_locked(ip)?.fresh();
        self.read_file_in(cur.as_deref().unwrap_or(ip), offset, buf)
    }

    fn read_file_in(&self, ip: &Inode, offset: u64, buf: &mut [u8]) -> Result<usize> {
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
        let bs = self.geo().blocksize as u64;
        let blocklog = self.geo().blocklog;
        let realtime = ip.is_realtime();
        let mut done = 0usize;
        while done < want {
            let pos = offset + done as u64;
            let fb = FileBlock(pos >> blocklog);
            let in_block = pos & (bs - 1);
            let (ext, run_blocks) = self.bmap(&ip.data, fb);
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
                        let rt = self.rtdev().ok_or_else(|| {
                            Error::NotSupported(format!(
                                "inode {} is a realtime file: give the realtime device (-o rtdev=FILE)",
                                ip.ino.0
                            ))
                        })?;
                        let byte = self.geo().rtb_to_byte(RtBlock(blk)) + in_block;
                        rt.read_at(dst, byte)?;
                    } else {
                        let byte = self.geo().fsb_to_daddr(FsBlock(blk)).bytes() + in_block;
                        self.dev().read_at(dst, byte)?;
                    }
                }
                _ => dst.fill(0),
            }
            done += run_bytes;
        }
        Ok(want)
    }

    /// Read `count` filesystem blocks of a directory or attribute fork
    /// starting at fork block `off` (one directory/attr block, which may
    /// span several extents). `Ok(None)` if the whole range is a hole; a
    /// range that is partly mapped, or mapped unwritten, is corruption.
    /// Returns the disk address of the first block (what the block's
    /// self-describing `blkno` must say) and the bytes.
    pub fn read_fork_blocks(
        &self,
        ip: &Inode,
        fork: ForkKind,
        off: FileBlock,
        count: u32,
    ) -> Result<Option<(Daddr, Vec<u8>)>> {
        let at = Location::Ino(ip.ino.0);
        let f = match self.fork(ip, fork) {
            Some(f @ Fork::Extents { .. }) => f,
            _ => {
                return Err(Error::corrupt(
                    "inode fork",
                    at,
                    "block read from a fork that has no extents",
                ))
            }
        };
        let geo = self.geo();
        let bs = geo.blocksize as usize;
        let mut out = vec![0u8; count as usize * bs];
        let mut first: Option<Daddr> = None;
        let mut holes = 0u32;
        let mut i = 0u32;
        while i < count {
            let fb = FileBlock(off.0 + i as u64);
            let (ext, run) = self.bmap(f, fb);
            let n = run.min((count - i) as u64) as u32;
            match ext {
                None => holes += n,
                Some(e) => {
                    if e.unwritten {
                        return Err(Error::corrupt(
                            "inode fork",
                            at,
                            "unwritten extent in a metadata fork",
                        ));
                    }
                    let fsb = FsBlock(e.start + (fb.0 - e.off.0));
                    let daddr = geo.fsb_to_daddr(fsb);
                    first.get_or_insert(daddr);
                    let dst = &mut out[i as usize * bs..(i + n) as usize * bs];
                    self.dev().read_at(dst, daddr.bytes())?;
                }
            }
            i += n;
        }
        match first {
            None => Ok(None),
            Some(_) if holes > 0 => Err(Error::corrupt(
                "inode fork",
                at,
                format!("block {} of the fork is partly a hole", off.0),
            )),
            Some(d) => Ok(Some((d, out))),
        }
    }
}
