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
//! Invariants: overlay sectors are exactly 512 bytes; memory is bounded by
//! the caller (recovery caps the overlay). A view made with
//! [`OverlayDevice::new`] refuses writes (it is what recovery would have
//! written, never a place for new writes). One made with
//! [`OverlayDevice::writable`] takes writes into the overlay, never into
//! the device below: recovery finishes intents and frees unlinked inodes
//! through an unlogged transaction on it, then takes the overlay back
//! ([`OverlayDevice::into_overlay`]).
//!
//! ```text
//!   write(offset, buf):  partial sectors read (device + overlay), patched,
//!                        then every touched sector stored in the overlay
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

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

/// A device whose reads see an [`Overlay`] over `inner`; writes are refused
/// or go into the overlay (see the module doc).
pub struct OverlayDevice {
    inner: Arc<dyn BlockDevice>,
    overlay: RwLock<Overlay>,
    writable: bool,
}

impl OverlayDevice {
    /// A read-only view.
    pub fn new(inner: Arc<dyn BlockDevice>, overlay: Overlay) -> Self {
        OverlayDevice {
            inner,
            overlay: RwLock::new(overlay),
            writable: false,
        }
    }

    /// A view whose writes land in the overlay (the device is never
    /// written).
    pub fn writable(inner: Arc<dyn BlockDevice>, overlay: Overlay) -> Self {
        OverlayDevice {
            inner,
            overlay: RwLock::new(overlay),
            writable: true,
        }
    }

    /// A copy of the overlay as it is now.
    pub fn overlay(&self) -> Overlay {
        self.lock_read().clone()
    }

    /// The overlay, with every write made through this device.
    pub fn into_overlay(self) -> Overlay {
        self.overlay.into_inner().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_read(&self) -> std::sync::RwLockReadGuard<'_, Overlay> {
        self.overlay.read().unwrap_or_else(|e| e.into_inner())
    }
}

impl BlockDevice for OverlayDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.inner.read_at(buf, offset)?;
        self.lock_read().apply(buf, offset);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        if !self.writable {
            return Err(Error::ReadOnly(
                "the device is a read-only view of the recovered filesystem".into(),
            ));
        }
        if buf.is_empty() {
            return Ok(());
        }
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&e| e <= self.inner.size())
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "write of {} bytes at {offset} past the end of the device",
                    buf.len()
                ))
            })?;
        let first = offset / SECTOR as u64;
        let last = (end - 1) / SECTOR as u64;
        let start = first * SECTOR as u64;
        let mut sectors = vec![0u8; ((last - first + 1) as usize) * SECTOR];
        if offset != start || !end.is_multiple_of(SECTOR as u64) {
            // Partial sectors at either end: read what is there first.
            self.read_at(&mut sectors, start)?;
        }
        let at = (offset - start) as usize;
        sectors[at..at + buf.len()].copy_from_slice(buf);
        self.overlay
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .put(first, &sectors);
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn size(&self) -> u64 {
        self.inner.size()
    }

    fn read_only(&self) -> bool {
        !self.writable
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

    #[test]
    fn writable_view_writes_into_the_overlay() {
        let mem = Arc::new(MemDevice::new(vec![1u8; 4096]));
        let mut ov = Overlay::new();
        ov.put(3, &[7u8; 512]);
        let d = OverlayDevice::writable(mem.clone(), ov);
        assert!(!d.read_only());
        // Unaligned: sectors 1..=3 touched; their other bytes kept.
        d.write_at(&[5u8; 700], 1000).unwrap();
        d.write_at(&[6u8; 512], 3584).unwrap();
        assert!(d.write_at(&[0u8; 2], 4095).is_err());
        let mut b = vec![0u8; 4096];
        d.read_at(&mut b, 0).unwrap();
        assert_eq!(b[999], 1);
        assert!(b[1000..1700].iter().all(|&x| x == 5));
        // Sector 3 was in the overlay: its bytes past the write are kept.
        assert_eq!(b[1700], 7);
        assert_eq!(b[2047], 7);
        assert_eq!(b[2048], 1);
        assert!(b[3584..].iter().all(|&x| x == 6));
        // The device below is untouched.
        let mut m = vec![0u8; 4096];
        mem.read_at(&mut m, 0).unwrap();
        assert!(m.iter().all(|&x| x == 1));
        let ov = d.into_overlay();
        assert_eq!(ov.sectors(), 4);
    }
}
