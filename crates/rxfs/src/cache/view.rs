//! [`CacheDevice`]: the device as the read path of a read-write mount sees
//! it: the device's bytes with every committed-but-unwritten buffer and
//! inode laid over them. Writes (file data) go straight to the device.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::RwLock;

use crate::bdev::BlockDevice;
use crate::error::Result;

/// One layer: entries by byte offset, and the longest entry it ever held
/// (so a search for the entries overlapping a range starts no further
/// back than that: inodes are 256-2048 bytes, buffers up to a 64 KiB
/// directory block).
#[derive(Default)]
struct Layer {
    map: BTreeMap<u64, Arc<Vec<u8>>>,
    longest: u64,
}

impl Layer {
    fn insert(&mut self, off: u64, data: Arc<Vec<u8>>) {
        self.longest = self.longest.max(data.len() as u64);
        self.map.insert(off, data);
    }

    /// Lay every entry overlapping `[off, off + buf.len())` over `buf`.
    fn apply(&self, buf: &mut [u8], off: u64) {
        let end = off + buf.len() as u64;
        for (&at, data) in self.map.range(off.saturating_sub(self.longest)..end) {
            let dend = at + data.len() as u64;
            if dend <= off {
                continue;
            }
            let s = at.max(off);
            let e = dend.min(end);
            buf[(s - off) as usize..(e - off) as usize]
                .copy_from_slice(&data[(s - at) as usize..(e - at) as usize]);
        }
    }

    /// Whether one entry holds all of `[off, off + len)`.
    fn covers(&self, len: usize, off: u64) -> bool {
        self.map
            .range(off.saturating_sub(self.longest)..=off)
            .any(|(&at, data)| at + data.len() as u64 >= off + len as u64)
    }
}

#[derive(Default)]
struct Layers {
    /// Buffers.
    bufs: Layer,
    /// Inodes (applied after buffers: they are newer).
    inodes: Layer,
}

pub struct CacheDevice {
    inner: Arc<dyn BlockDevice>,
    layers: RwLock<Layers>,
}

impl CacheDevice {
    pub fn new(inner: Arc<dyn BlockDevice>) -> Self {
        CacheDevice {
            inner,
            layers: RwLock::new(Layers::default()),
        }
    }

    pub fn inner(&self) -> &Arc<dyn BlockDevice> {
        &self.inner
    }

    /// Show `data` at byte `off` (a committed buffer not yet written).
    pub fn set_buf(&self, off: u64, data: Arc<Vec<u8>>) {
        self.layers.write().bufs.insert(off, data);
    }

    /// Stop showing the buffer at `off` if it is still `data` (written
    /// back), or unconditionally (`data == None`: freed).
    pub fn clear_buf(&self, off: u64, data: Option<&Arc<Vec<u8>>>) {
        let mut l = self.layers.write();
        if let Some(cur) = l.bufs.map.get(&off) {
            if data.is_none_or(|d| Arc::ptr_eq(d, cur)) {
                l.bufs.map.remove(&off);
            }
        }
    }

    pub fn set_inode(&self, off: u64, data: Arc<Vec<u8>>) {
        self.layers.write().inodes.insert(off, data);
    }

    pub fn clear_inode(&self, off: u64, data: &Arc<Vec<u8>>) {
        let mut l = self.layers.write();
        if let Some(cur) = l.inodes.map.get(&off) {
            if Arc::ptr_eq(data, cur) {
                l.inodes.map.remove(&off);
            }
        }
    }

    /// Stop showing every inode in `[off, off + len)`: their cluster was
    /// cancelled (a freed inode chunk), so nothing of theirs is shown over
    /// blocks that may be reused.
    pub fn clear_inodes_in(&self, off: u64, len: u64) {
        let mut l = self.layers.write();
        let gone: Vec<u64> = l
            .inodes
            .map
            .range(off..off + len)
            .map(|(&k, _)| k)
            .collect();
        for k in gone {
            l.inodes.map.remove(&k);
        }
    }

    /// Entries shown (buffers, inodes).
    pub fn counts(&self) -> (usize, usize) {
        let l = self.layers.read();
        (l.bufs.map.len(), l.inodes.map.len())
    }
}

impl BlockDevice for CacheDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        // Hold the layers across the device read: write-back writes the
        // device first and clears its layer after, so a reader sees either
        // the layer or the new device bytes, never old bytes alone.
        let l = self.layers.read();
        // A range one entry covers whole (a new inode cluster's slot, a
        // directory block) needs nothing of the device's.
        if !l.bufs.covers(buf.len(), offset) && !l.inodes.covers(buf.len(), offset) {
            self.inner.read_at(buf, offset)?;
        }
        l.bufs.apply(buf, offset);
        l.inodes.apply(buf, offset);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.inner.write_at(buf, offset)
    }

    fn flush(&self) -> Result<()> {
        self.inner.flush()
    }

    fn size(&self) -> u64 {
        self.inner.size()
    }

    fn read_only(&self) -> bool {
        self.inner.read_only()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bdev::{MemDevice, RecordingDevice};

    fn view() -> (Arc<RecordingDevice>, CacheDevice) {
        let rec = Arc::new(RecordingDevice::new(Arc::new(MemDevice::new(vec![
            1u8;
            1 << 20
        ]))));
        let v = CacheDevice::new(rec.clone());
        (rec, v)
    }

    #[test]
    fn a_range_one_layer_covers_is_not_read_from_the_device() {
        let (rec, v) = view();
        v.set_buf(8192, Arc::new(vec![2u8; 8192]));
        v.set_inode(8192 + 512, Arc::new(vec![3u8; 512]));
        let mut b = vec![0u8; 512];
        v.read_at(&mut b, 8192 + 1024).unwrap();
        assert_eq!(b, vec![2u8; 512]);
        v.read_at(&mut b, 8192 + 512).unwrap();
        assert_eq!(b, vec![3u8; 512]);
        assert!(rec.reads().is_empty(), "{:?}", rec.reads());
    }

    #[test]
    fn a_range_partly_covered_reads_the_device_under_the_layers() {
        let (rec, v) = view();
        v.set_buf(8192, Arc::new(vec![2u8; 4096]));
        v.set_inode(12288 + 512, Arc::new(vec![3u8; 512]));
        let mut b = vec![0u8; 8192];
        v.read_at(&mut b, 8192).unwrap();
        assert_eq!(&b[..4096], &[2u8; 4096][..]);
        assert_eq!(&b[4096..4608], &[1u8; 512][..]);
        assert_eq!(&b[4608..5120], &[3u8; 512][..]);
        assert_eq!(&b[5120..], &[1u8; 3072][..]);
        assert_eq!(rec.reads().len(), 1);
    }
}
