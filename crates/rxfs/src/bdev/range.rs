//! [`RangeDevice`]: a byte range of another device (a partition inside a
//! whole-disk image, or a filesystem at an offset), so that images with
//! partition tables are used in place; and [`partition`], which finds
//! partition N of a GPT or DOS (MBR) table.
//!
//! Invariant: every request is checked against the range's length and
//! moved by its start; nothing outside the range is ever read or written.

use std::sync::Arc;

use super::BlockDevice;
use crate::error::{Error, Result};

pub struct RangeDevice {
    inner: Arc<dyn BlockDevice>,
    start: u64,
    len: u64,
}

impl RangeDevice {
    /// Bytes `start .. start + len` of `inner` (`len` None: to its end).
    pub fn new(inner: Arc<dyn BlockDevice>, start: u64, len: Option<u64>) -> Result<Self> {
        let size = inner.size();
        let len = len.unwrap_or(size.saturating_sub(start));
        if start.checked_add(len).is_none_or(|e| e > size) || len == 0 {
            return Err(Error::Invalid(format!(
                "bytes {start}..{} are not inside the device ({size} bytes)",
                start.saturating_add(len)
            )));
        }
        Ok(RangeDevice { inner, start, len })
    }

    fn map(&self, op: &'static str, offset: u64, n: u64) -> Result<u64> {
        match offset.checked_add(n) {
            Some(end) if end <= self.len => Ok(self.start + offset),
            _ => Err(Error::io(
                op,
                offset,
                n as usize,
                std::io::Error::from_raw_os_error(libc::EIO),
            )),
        }
    }
}

impl BlockDevice for RangeDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let at = self.map("read", offset, buf.len() as u64)?;
        self.inner.read_at(buf, at)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let at = self.map("write", offset, buf.len() as u64)?;
        self.inner.write_at(buf, at)
    }

    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64) -> Result<()> {
        let total: u64 = bufs.iter().map(|b| b.len() as u64).sum();
        let at = self.map("write", offset, total)?;
        self.inner.write_vectored_at(bufs, at)
    }

    fn flush(&self) -> Result<()> {
        self.inner.flush()
    }

    fn size(&self) -> u64 {
        self.len
    }

    fn read_only(&self) -> bool {
        self.inner.read_only()
    }

    fn zero_range(&self, offset: u64, len: u64) -> Result<()> {
        let at = self.map("zero", offset, len)?;
        self.inner.zero_range(at, len)
    }
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Partition `n` (1-based) of the GPT or DOS table on `dev`: its start
/// and length in bytes. GPT entries count in table order, unused slots
/// included (as the kernel numbers them: `sda3` is the third slot); DOS
/// tables take the four primary slots (logical partitions are not
/// supported).
pub fn partition(dev: &dyn BlockDevice, n: u32) -> Result<(u64, u64)> {
    let bad = |why: String| Error::Invalid(why);
    if n == 0 {
        return Err(bad("partitions count from 1".into()));
    }
    let mut mbr = [0u8; 512];
    dev.read_at(&mut mbr, 0)?;
    // GPT: the header in the second logical sector (512 or 4096 bytes).
    for sector in [512u64, 4096] {
        let mut h = vec![0u8; 512];
        if dev.size() < sector + 512 {
            continue;
        }
        dev.read_at(&mut h, sector)?;
        if &h[..8] != b"EFI PART" {
            continue;
        }
        let entries_lba = le64(&h, 72);
        let count = le32(&h, 80);
        let esize = le32(&h, 84) as u64;
        if n > count || !(128..=4096).contains(&esize) {
            return Err(bad(format!("partition {n}: the GPT has {count} slots")));
        }
        let mut e = vec![0u8; esize as usize];
        dev.read_at(&mut e, entries_lba * sector + (n as u64 - 1) * esize)?;
        if e[..16].iter().all(|&b| b == 0) {
            return Err(bad(format!("partition {n}: an unused GPT slot")));
        }
        let (first, last) = (le64(&e, 32), le64(&e, 40));
        if last < first {
            return Err(bad(format!(
                "partition {n}: its GPT entry ends before it starts"
            )));
        }
        return Ok((first * sector, (last - first + 1) * sector));
    }
    if mbr[510] != 0x55 || mbr[511] != 0xAA {
        return Err(bad("no GPT or DOS partition table".into()));
    }
    if n > 4 {
        return Err(Error::NotSupported(format!(
            "partition {n}: logical partitions of a DOS table (only 1 to 4)"
        )));
    }
    let e = &mbr[446 + (n as usize - 1) * 16..][..16];
    let (ptype, start, count) = (e[4], le32(e, 8) as u64, le32(e, 12) as u64);
    if ptype == 0 || count == 0 {
        return Err(bad(format!("partition {n}: an unused DOS table slot")));
    }
    if matches!(ptype, 0x05 | 0x0f | 0x85) {
        return Err(bad(format!(
            "partition {n}: an extended DOS partition (a container of logical ones)"
        )));
    }
    Ok((start * 512, count * 512))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bdev::MemDevice;

    #[test]
    fn a_range_maps_and_bounds_every_request() {
        let mem: Arc<dyn BlockDevice> = Arc::new(MemDevice::new(vec![0u8; 8192]));
        let r = RangeDevice::new(mem.clone(), 4096, Some(2048)).unwrap();
        assert_eq!(r.size(), 2048);
        r.write_at(b"abc", 10).unwrap();
        let mut b = [0u8; 3];
        mem.read_at(&mut b, 4106).unwrap();
        assert_eq!(&b, b"abc");
        assert!(r.write_at(b"x", 2048).is_err());
        assert!(r.read_at(&mut b, 2046).is_err());
        assert!(RangeDevice::new(mem.clone(), 8000, Some(500)).is_err());
        assert_eq!(RangeDevice::new(mem, 4096, None).unwrap().size(), 4096);
    }

    #[test]
    fn dos_slots() {
        let mut img = vec![0u8; 1 << 20];
        img[510] = 0x55;
        img[511] = 0xAA;
        let e = 446 + 16; // slot 2
        img[e + 4] = 0x83;
        img[e + 8..e + 12].copy_from_slice(&2048u32.to_le_bytes());
        img[e + 12..e + 16].copy_from_slice(&100u32.to_le_bytes());
        let dev = MemDevice::new(img);
        assert_eq!(partition(&dev, 2).unwrap(), (2048 * 512, 100 * 512));
        assert!(partition(&dev, 1).is_err());
        assert!(matches!(partition(&dev, 5), Err(Error::NotSupported(_))));
        assert!(partition(&dev, 0).is_err());
    }
}
