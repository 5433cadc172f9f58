//! Writing a file's data into the image from a byte stream: the one copy
//! loop behind every populate source (a host directory, a tar archive, a
//! prototype file).
//!
//! Invariants:
//! - every byte read is written (zeros too: a stream has no holes), with
//!   `write_exact`, so no speculative preallocation is made that a later
//!   close would free (reproducible builds stay byte-identical);
//! - a range longer than one buffer is reserved in one piece first
//!   (unwritten extents past EOF until written), so writers of other files
//!   in other threads cannot interleave their blocks with it; a reservation
//!   refused for fragmented free space is not an error (the data is then
//!   written as it comes and placed where it fits);
//! - a short write is retried, so the error returned is the one that cut
//!   it short; a write that makes no progress is ENOSPC.

use std::io::Read;

use crate::fs::ops_falloc::FALLOC_FL_KEEP_SIZE;
use crate::fs::Filesystem;
use crate::types::Ino;

/// Which side of a stream copy failed.
#[derive(Debug)]
pub enum StreamError {
    /// Reading the source.
    Source(std::io::Error),
    /// Writing the image.
    Image(crate::Error),
}

/// Reserve `len` bytes at `off` of `ino` (see the module doc); ENOSPC is
/// not an error here.
pub fn reserve(fs: &Filesystem, ino: Ino, off: u64, len: u64) -> crate::Result<()> {
    match fs.fallocate(ino, FALLOC_FL_KEEP_SIZE, off, len) {
        Ok(()) | Err(crate::Error::NoSpace) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Write all of `data` at `off` of `ino`.
pub fn write_all(fs: &Filesystem, ino: Ino, mut off: u64, mut data: &[u8]) -> crate::Result<()> {
    while !data.is_empty() {
        let w = fs.write_exact(ino, off, data)?;
        if w == 0 {
            return Err(crate::Error::NoSpace);
        }
        off += w as u64;
        data = &data[w..];
    }
    Ok(())
}

/// Copy `r` to its end into `ino` from offset 0, `buf` at a time;
/// `size` is how long the stream says it is (for the reservation).
/// Returns the bytes written.
pub fn copy_stream(
    fs: &Filesystem,
    ino: Ino,
    r: &mut dyn Read,
    size: u64,
    buf: &mut [u8],
) -> Result<u64, StreamError> {
    if size > buf.len() as u64 {
        reserve(fs, ino, 0, size).map_err(StreamError::Image)?;
    }
    let mut off = 0u64;
    loop {
        let n = match r.read(buf) {
            Ok(0) => return Ok(off),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(StreamError::Source(e)),
        };
        write_all(fs, ino, off, &buf[..n]).map_err(StreamError::Image)?;
        off += n as u64;
    }
}

/// The 32-bit device number of `major:minor` the library's create takes
/// (Linux's encoding, as `stat`'s `st_rdev` of the same device).
pub fn dev_number(major: u32, minor: u32) -> u32 {
    libc::makedev(major, minor) as u32
}
