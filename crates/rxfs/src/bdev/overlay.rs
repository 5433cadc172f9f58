//! A read-only view of a device with some sectors replaced.
//!
//! Log recovery of a read-only mount replays the log into memory instead of
//! onto the device: the replayed blocks form an [`Overlay`] (512-byte
//! sectors keyed by daddr), and [`OverlayDevice`] serves reads from the
//! overlay where it has a sector and from the underlying device elsewhere.
//!
//! ```text
//!   read(offset, len):  underlying bytes ──┐
//!                        overlay sectors ──┴─> sectors present in the overlay win
//! ```
//!
//! Invariants: overlay sectors are exactly 512 bytes; writes are refused
//! (the view is what recovery would have written, never a place for new
//! writes); memory is bounded by the caller (recovery caps the overlay).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::BlockDevice;
use crate::error::{Error, Result};

/// Sector size of the overlay.
pub const SECTOR: usize = 512;

/// Replayed sectors: daddr -> 512 bytes.
#[derive(Debug, Clone, Default)]
pub struct Overlay {
    sectors: BTreeMap<u64, Box<[u8; SECTOR]>>,
}

impl Overlay {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of sectors held.
    pub fn sectors(&self) -> usize {
        self.sectors.len()
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.sectors.len() * SECTOR
    }

    /// Store `buf` (a whole number of sectors) at `daddr`.
    pub fn put(&mut self, daddr: u64, buf: &[u8]) {
        debug_assert!(buf.len().is_multiple_of(SECTOR));
        for (i, s) in buf.chunks_exact(SECTOR).enumerate() {
            let mut b = Box::new([0u8; SECTOR]);
            b.copy_from_slice(s);
            self.sectors.insert(daddr + i as u64, b);
        }
    }

    /// Copy the overlay's sectors over `buf`, which holds the bytes at byte
    /// `offset` of the device.
    pub fn apply(&self, buf: &mut [u8], offset: u64) {
        if buf.is_empty() || self.sectors.is_empty() {
            return;
        }
        let end = offset + buf.len() as u64;
        let first = offset / SECTOR as u64;
        let last = (end - 1) / SECTOR as u64;
        for (&s, data) in self.sectors.range(first..=last) {
            let s_off = s * SECTOR as u64;
            let from = s_off.max(offset);
            let to = (s_off + SECTOR as u64).min(end);
            buf[(from - offset) as usize..(to - offset) as usize]
                .copy_from_slice(&data[(from - s_off) as usize..(to - s_off) as usize]);
        }
    }

    /// Runs of consecutive sectors: (first daddr, bytes), in daddr order.
    pub fn runs(&self) -> Vec<(u64, Vec<u8>)> {
        let mut out: Vec<(u64, Vec<u8>)> = Vec::new();
        for (&s, data) in &self.sectors {
            match out.last_mut() {
                Some((start, bytes))
                    if *start + (bytes.len() / SECTOR) as u64 == s && bytes.len() < (1 << 20) =>
                {
                    bytes.extend_from_slice(&data[..])
                }
                _ => out.push((s, data.to_vec())),
            }
        }
        out
    }
}

/// A device whose reads see an [`Overlay`] over `inner`; writes are refused.
pub struct OverlayDevice {
    inner: Arc<dyn BlockDevice>,
    overlay: Overlay,
}

impl OverlayDevice {
    pub fn new(inner: Arc<dyn BlockDevice>, overlay: Overlay) -> Self {
        OverlayDevice { inner, overlay }
    }

    pub fn overlay(&self) -> &Overlay {
        &self.overlay
    }
}

impl BlockDevice for OverlayDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.inner.read_at(buf, offset)?;
        self.overlay.apply(buf, offset);
        Ok(())
    }

    fn write_at(&self, _buf: &[u8], _offset: u64) -> Result<()> {
        Err(Error::ReadOnly(
            "the device is a read-only view of the recovered filesystem".into(),
        ))
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn size(&self) -> u64 {
        self.inner.size()
    }

    fn read_only(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bdev::MemDevice;

    #[test]
    fn reads_see_overlay_writes_refused() {
        let mem = Arc::new(MemDevice::new(vec![1u8; 4096]));
        let mut ov = Overlay::new();
        ov.put(2, &[7u8; 1024]);
        ov.put(7, &[9u8; 512]);
        assert_eq!(ov.runs().len(), 2);
        assert_eq!(ov.runs()[0].1.len(), 1024);
        let d = OverlayDevice::new(mem, ov);
        let mut b = vec![0u8; 1100];
        d.read_at(&mut b, 1000).unwrap();
        assert_eq!(b[0], 1); // byte 1000: sector 1
        assert_eq!(b[24], 7); // byte 1024: sector 2
        assert_eq!(b[1047], 7); // byte 2047
        assert_eq!(b[1048], 1); // byte 2048: sector 4
        let mut c = vec![0u8; 10];
        d.read_at(&mut c, 7 * 512 + 500).unwrap();
        assert_eq!(&c[..], &[9, 9, 9, 9, 9, 9, 9, 9, 9, 9][..]);
        assert!(d.write_at(&[0], 0).is_err());
        assert!(d.read_only());
    }
}
