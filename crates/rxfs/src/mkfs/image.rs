//! Making a filesystem on an image file or block device by path, with
//! mkfs.xfs's safety rules: what the library bindings call (`rxfs mkfs`
//! adds its command-line options, partitions and populates around the
//! same steps).
//!
//! Invariants:
//! - without `force`, a device that holds a filesystem, partition table or
//!   RAID member ([`super::probe`]) is refused before anything is written,
//!   created or grown;
//! - an image file this call creates is removed again if the call fails
//!   before the filesystem is written.

use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use super::{mkfs, MkfsOptions, Plan};
use crate::bdev::{BlockDevice, FileDevice};
use crate::error::{Error, Result};
use crate::format::inode::Timestamp;

/// "Now" for a new filesystem: the fixed clock of a reproducible build
/// (`SOURCE_DATE_EPOCH`), else the wall clock.
pub fn build_time() -> Timestamp {
    if let Some(t) = crate::clock::fixed() {
        return t;
    }
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Timestamp {
        sec: d.as_secs() as i64,
        nsec: d.subsec_nanos(),
    }
}

/// Refuse `path` if it holds a filesystem, partition table or RAID
/// member (a path that does not exist holds nothing).
pub fn refuse_existing(path: &Path) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("open", 0, 0, e)),
    };
    let m = f.metadata().map_err(|e| Error::io("stat", 0, 0, e))?;
    let size = if m.file_type().is_block_device() {
        crate::bdev::block_device_size(&f)?
    } else {
        m.len()
    };
    let mut read = |off: u64, buf: &mut [u8]| f.read_exact_at(buf, off);
    match super::probe::probe(size, &mut read) {
        Ok(None) => Ok(()),
        Ok(Some(found)) => Err(Error::HasFilesystem(format!(
            "{} appears to contain {found}",
            path.display()
        ))),
        Err(e) => Err(Error::io("probe", 0, 0, e)),
    }
}

/// Make a filesystem with options `o` on `path`: an existing block device
/// or image file (grown to `o.dsize` if shorter), or a new sparse image
/// file of `o.dsize` bytes. Returns the geometry it chose.
pub fn make_image(path: &Path, o: &MkfsOptions, force: bool) -> Result<Plan> {
    if !force {
        refuse_existing(path)?;
    }
    let meta = std::fs::metadata(path);
    let mut created = None;
    match (&meta, o.dsize) {
        (Err(e), Some(size)) if e.kind() == std::io::ErrorKind::NotFound => {
            let f = std::fs::File::create(path).map_err(|e| Error::io("create", 0, 0, e))?;
            created = Some(RemoveOnDrop(path));
            f.set_len(size)
                .map_err(|e| Error::io("set_len", size, 0, e))?;
        }
        (Err(e), None) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::Invalid(format!(
                "{} does not exist: give a size to create it",
                path.display()
            )))
        }
        (Err(_), _) => {
            let e = std::fs::metadata(path).unwrap_err();
            return Err(Error::io("stat", 0, 0, e));
        }
        (Ok(m), Some(size)) if m.is_file() && m.len() < size => {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(|e| Error::io("open", 0, 0, e))?;
            f.set_len(size)
                .map_err(|e| Error::io("set_len", size, 0, e))?;
        }
        _ => {}
    }
    let is_bdev = meta.as_ref().is_ok_and(|m| m.file_type().is_block_device());
    let sectsize = if is_bdev {
        std::fs::File::open(path)
            .map(|f| crate::bdev::block_device_sectsize(&f))
            .unwrap_or(512)
    } else {
        512
    };
    let dev = FileDevice::open(path, false, false)?;
    let plan = Plan::new(o, dev.size(), sectsize, None)?;
    if let Some(c) = created.as_mut() {
        c.0 = Path::new("");
    }
    mkfs(&dev as &dyn BlockDevice, None, o, sectsize, build_time())?;
    Ok(plan)
}

/// A file removed when dropped (unless its path was emptied).
struct RemoveOnDrop<'a>(&'a Path);

impl Drop for RemoveOnDrop<'_> {
    fn drop(&mut self) {
        if !self.0.as_os_str().is_empty() {
            let _ = std::fs::remove_file(self.0);
        }
    }
}
