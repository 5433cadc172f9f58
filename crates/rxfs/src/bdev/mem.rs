//! In-memory block device for tests.

use std::sync::RwLock;

use super::BlockDevice;
use crate::error::{Error, Result};

pub struct MemDevice {
    data: RwLock<Vec<u8>>,
    read_only: bool,
}

impl MemDevice {
    pub fn new(data: Vec<u8>) -> Self {
        MemDevice {
            data: RwLock::new(data),
            read_only: false,
        }
    }

    pub fn new_read_only(data: Vec<u8>) -> Self {
        MemDevice {
            data: RwLock::new(data),
            read_only: true,
        }
    }

    /// A copy of the current contents.
    pub fn snapshot(&self) -> Vec<u8> {
        self.data.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

fn out_of_range(op: &'static str, offset: u64, len: usize) -> Error {
    Error::io(
        op,
        offset,
        len,
        std::io::Error::from_raw_os_error(libc::EIO),
    )
}

impl BlockDevice for MemDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let data = self.data.read().unwrap_or_else(|e| e.into_inner());
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&e| e <= data.len() as u64)
            .ok_or_else(|| out_of_range("read", offset, buf.len()))?;
        buf.copy_from_slice(&data[offset as usize..end as usize]);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly("memory device opened read-only".into()));
        }
        let mut data = self.data.write().unwrap_or_else(|e| e.into_inner());
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&e| e <= data.len() as u64)
            .ok_or_else(|| out_of_range("write", offset, buf.len()))?;
        data[offset as usize..end as usize].copy_from_slice(buf);
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn size(&self) -> u64 {
        self.data.read().unwrap_or_else(|e| e.into_inner()).len() as u64
    }

    fn read_only(&self) -> bool {
        self.read_only
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_write_bounds() {
        let d = MemDevice::new(vec![0u8; 1024]);
        d.write_at(&[1, 2, 3], 1021).unwrap();
        let mut b = [0u8; 3];
        d.read_at(&mut b, 1021).unwrap();
        assert_eq!(b, [1, 2, 3]);
        assert!(d.read_at(&mut b, 1022).is_err());
        assert!(d.write_at(&b, u64::MAX).is_err());
    }
}
