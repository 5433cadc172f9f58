//! Symbolic links: inline targets and remote (`XSLM`) targets, format in
//! [`crate::format::symlink`].
//!
//! The target length comes from the inode size (1..=1024). A remote target
//! is read from data fork blocks `0..n` one physically contiguous run at a
//! time (as the kernel maps and writes it: one header per run), every run
//! verified and required to carry exactly the next part of the target.
//! Like Linux, a remote target is cut at its first NUL byte (the kernel
//! hands the target on as a C string).

use crate::error::{Error, Location, Result};
use crate::format::symlink;
use crate::inode::{Fork, Inode, ReadCtx};
use crate::types::{FileBlock, FileType, ForkKind};

/// The target of symlink `ip`. `Err(NotSymlink)` for other files.
pub fn readlink(fs: &(impl ReadCtx + ?Sized), ip: &Inode) -> Result<Vec<u8>> {
    let held = fs.read_locked(ip)?;
    let ip: &Inode = &held;
    if ip.file_type() != Some(FileType::Symlink) {
        return Err(Error::NotSymlink);
    }
    let size = symlink::check_size(ip.core.size, ip.ino)?;
    match &ip.data {
        Fork::Local(b) => Ok(symlink::decode_local(b, size, ip.ino)?.to_vec()),
        Fork::Extents { .. } => readlink_remote(fs, ip, size),
        Fork::Dev(_) => Err(Error::corrupt(
            "symlink",
            Location::Ino(ip.ino.0),
            "device-format data fork",
        )),
    }
}

fn readlink_remote(fs: &(impl ReadCtx + ?Sized), ip: &Inode, size: u32) -> Result<Vec<u8>> {
    let uuid = fs.sb().metadata_uuid();
    let nblocks = symlink::remote_blocks(size, fs.geo().blocksize) as u64;
    let mut target = Vec::with_capacity(size as usize);
    let mut fb = 0u64;
    // Each pass consumes at least one block: at most nblocks passes.
    while fb < nblocks {
        let run = contiguous_run(ip, fb, nblocks - fb)?;
        let (daddr, buf) = fs
            .read_fork_blocks(ip, ForkKind::Data, FileBlock(fb), run as u32)?
            .ok_or_else(|| symlink_hole(ip, fb, size))?;
        let off = target.len() as u32;
        let part = symlink::verify_remote_run(&buf, daddr, ip.ino, &uuid, off, size - off)?;
        target.extend_from_slice(part);
        fb += run;
    }
    if target.len() != size as usize {
        return Err(Error::corrupt(
            "symlink",
            Location::Ino(ip.ino.0),
            format!("{} of {size} target bytes found", target.len()),
        ));
    }
    if let Some(nul) = target.iter().position(|&c| c == 0) {
        target.truncate(nul);
    }
    Ok(target)
}

/// Length (>= 1, <= `max`) of the physically contiguous run of data
/// fork blocks starting at `fb`: extents that continue each other on
/// disk form one run, as in the kernel's block mapping.
fn contiguous_run(ip: &Inode, fb: u64, max: u64) -> Result<u64> {
    let (first, len) = ip.data.map(FileBlock(fb));
    let first = first.ok_or_else(|| symlink_hole(ip, fb, ip.core.size as u32))?;
    let mut run = len.min(max);
    let mut phys_end = first.start + (fb - first.off.0) + run;
    while run < max {
        match ip.data.map(FileBlock(fb + run)) {
            (Some(e), len) if e.start == phys_end && e.unwritten == first.unwritten => {
                let n = len.min(max - run);
                run += n;
                phys_end += n;
            }
            _ => break,
        }
    }
    Ok(run)
}

fn symlink_hole(ip: &Inode, fb: u64, size: u32) -> Error {
    Error::corrupt(
        "symlink",
        Location::Ino(ip.ino.0),
        format!("block {fb} of a {size}-byte target is a hole"),
    )
}
