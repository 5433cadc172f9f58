//! A copy-on-write device: a shared read-only base image plus a private map
//! of changed 512-byte sectors.
//!
//! The crash simulator hands out one of these per crash image: the base is
//! the durable image of a flush epoch (shared by every crash image of that
//! epoch through an `Arc`), the overlay holds the sectors the power cut left
//! from the unflushed window, and whatever the code under test writes
//! afterwards (log recovery, repair) lands in the overlay too. Making a crash
//! image therefore costs the size of the window, not the size of the disk.
//!
//! ```text
//!   read_at(off, len):  base[off..off+len]  then, for every overlay sector
//!                       intersecting the range, its bytes on top
//!   write_at(off, len): for every sector touched: copy it from the base into
//!                       the overlay on first touch, then patch it
//! ```
//!
//! Invariants: overlay keys are sector indexes below `ceil(len / 512)`; each
//! entry has the length of its sector (512, or less for a short last sector
//! of a base whose length is not a multiple of 512); the base never changes.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, RwLock};

use super::BlockDevice;
use crate::error::{Error, Result};

/// Sector size of the simulators: the unit the device writes atomically.
pub const SECTOR_SIZE: u64 = 512;

pub struct CowDevice {
    base: Arc<Vec<u8>>,
    overlay: RwLock<BTreeMap<u64, Box<[u8]>>>,
}

impl CowDevice {
    /// A device that reads `base` until written.
    pub fn new(base: Arc<Vec<u8>>) -> Self {
        CowDevice {
            base,
            overlay: RwLock::new(BTreeMap::new()),
        }
    }

    /// Number of sectors that differ (or may differ) from the base.
    pub fn dirty_sectors(&self) -> usize {
        self.overlay.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// The whole image as one vector (a full copy).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = (*self.base).clone();
        let ov = self.overlay.read().unwrap_or_else(|e| e.into_inner());
        for (&s, data) in ov.iter() {
            let off = (s * SECTOR_SIZE) as usize;
            v[off..off + data.len()].copy_from_slice(data);
        }
        v
    }

    /// Write the whole image to a file (created or truncated), e.g. for a
    /// kernel loop mount of a crash image.
    pub fn write_image(&self, path: &Path) -> Result<()> {
        let io = |e| Error::io("write image", 0, 0, e);
        let mut f = std::fs::File::create(path).map_err(io)?;
        f.write_all(&self.base).map_err(io)?;
        let ov = self.overlay.read().unwrap_or_else(|e| e.into_inner());
        for (&s, data) in ov.iter() {
            std::os::unix::fs::FileExt::write_all_at(&f, data, s * SECTOR_SIZE).map_err(io)?;
        }
        f.sync_all().map_err(io)
    }

    fn check(&self, op: &'static str, offset: u64, len: usize) -> Result<u64> {
        offset
            .checked_add(len as u64)
            .filter(|&e| e <= self.base.len() as u64)
            .ok_or_else(|| {
                Error::io(
                    op,
                    offset,
                    len,
                    std::io::Error::from_raw_os_error(libc::EIO),
                )
            })
    }
}

impl BlockDevice for CowDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let end = self.check("read", offset, buf.len())?;
        buf.copy_from_slice(&self.base[offset as usize..end as usize]);
        if buf.is_empty() {
            return Ok(());
        }
        let ov = self.overlay.read().unwrap_or_else(|e| e.into_inner());
        let (first, last) = (offset / SECTOR_SIZE, (end - 1) / SECTOR_SIZE);
        for (&s, data) in ov.range(first..=last) {
            let s_start = s * SECTOR_SIZE;
            let lo = s_start.max(offset);
            let hi = (s_start + data.len() as u64).min(end);
            buf[(lo - offset) as usize..(hi - offset) as usize]
                .copy_from_slice(&data[(lo - s_start) as usize..(hi - s_start) as usize]);
        }
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let end = self.check("write", offset, buf.len())?;
        if buf.is_empty() {
            return Ok(());
        }
        let mut ov = self.overlay.write().unwrap_or_else(|e| e.into_inner());
        let (first, last) = (offset / SECTOR_SIZE, (end - 1) / SECTOR_SIZE);
        for s in first..=last {
            let s_start = s * SECTOR_SIZE;
            let s_end = (s_start + SECTOR_SIZE).min(self.base.len() as u64);
            let data = ov.entry(s).or_insert_with(|| {
                self.base[s_start as usize..s_end as usize]
                    .to_vec()
                    .into_boxed_slice()
            });
            let lo = s_start.max(offset);
            let hi = s_end.min(end);
            data[(lo - s_start) as usize..(hi - s_start) as usize]
                .copy_from_slice(&buf[(lo - offset) as usize..(hi - offset) as usize]);
        }
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn size(&self) -> u64 {
        self.base.len() as u64
    }

    fn read_only(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn short_last_sector_and_bounds() {
        let d = CowDevice::new(Arc::new(vec![1u8; 1000]));
        d.write_at(&[9; 10], 995).unwrap_err();
        d.write_at(&[9; 5], 995).unwrap();
        let mut b = [0u8; 8];
        d.read_at(&mut b, 992).unwrap();
        assert_eq!(b, [1, 1, 1, 9, 9, 9, 9, 9]);
        assert_eq!(d.dirty_sectors(), 1);
        assert!(d.read_at(&mut b, 993).is_err());
        assert_eq!(d.to_vec()[995..], [9; 5]);
    }

    #[test]
    fn write_image_matches_to_vec() {
        let d = CowDevice::new(Arc::new((0..3000).map(|i| i as u8).collect()));
        d.write_at(&[7; 700], 1000).unwrap();
        d.write_at(&[8; 10], 2995).unwrap_err();
        d.write_at(&[8; 5], 2995).unwrap();
        let dir = std::env::temp_dir().join(format!("rxfs-cow-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("img");
        d.write_image(&f).unwrap();
        let got = std::fs::read(&f).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(got, d.to_vec());
        assert_eq!(got[1000..1700], [7; 700]);
    }

    proptest! {
        /// The device behaves exactly like a plain vector.
        #[test]
        fn matches_a_vector(
            len in 1usize..5000,
            ops in proptest::collection::vec((0usize..5000, 0usize..1500, any::<u8>(), any::<bool>()), 0..40),
        ) {
            let base: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            let mut model = base.clone();
            let d = CowDevice::new(Arc::new(base.clone()));
            for (off, n, byte, is_write) in ops {
                let ok = off + n <= len;
                if is_write {
                    let data = vec![byte; n];
                    prop_assert_eq!(d.write_at(&data, off as u64).is_ok(), ok);
                    if ok {
                        model[off..off + n].copy_from_slice(&data);
                    }
                } else {
                    let mut buf = vec![0u8; n];
                    prop_assert_eq!(d.read_at(&mut buf, off as u64).is_ok(), ok);
                    if ok {
                        prop_assert_eq!(&buf[..], &model[off..off + n]);
                    }
                }
            }
            prop_assert_eq!(d.to_vec(), model);
        }
    }
}
