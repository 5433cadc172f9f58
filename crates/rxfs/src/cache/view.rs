//! [`CacheDevice`]: the device as the read path of a read-write mount sees
//! it: the device's bytes with every committed-but-unwritten buffer and
//! inode laid over them. Writes (file data) go straight to the device.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::RwLock;

use crate::bdev::BlockDevice;
use crate::error::Result;

/// The largest overlay entry (a 64 KiB directory block).
const MAX_ENTRY: u64 = 65536;

#[derive(Default)]
struct Layers {
    /// Buffers, by byte offset.
    bufs: BTreeMap<u64, Arc<Vec<u8>>>,
    /// Inodes, by byte offset (applied after buffers: they are newer).
    inodes: BTreeMap<u64, Arc<Vec<u8>>>,
}

pub struct CacheDevice {
    inner: Arc<dyn BlockDevice>,
    layers: RwLock<Layers>,
}

fn apply(map: &BTreeMap<u64, Arc<Vec<u8>>>, buf: &mut [u8], off: u64) {
    let end = off + buf.len() as u64;
    for (&at, data) in map.range(off.saturating_sub(MAX_ENTRY)..end) {
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
        if let Some(cur) = l.bufs.get(&off) {
            if data.is_none_or(|d| Arc::ptr_eq(d, cur)) {
                l.bufs.remove(&off);
            }
        }
    }

    pub fn set_inode(&self, off: u64, data: Arc<Vec<u8>>) {
        self.layers.write().inodes.insert(off, data);
    }

    pub fn clear_inode(&self, off: u64, data: &Arc<Vec<u8>>) {
        let mut l = self.layers.write();
        if let Some(cur) = l.inodes.get(&off) {
            if Arc::ptr_eq(data, cur) {
                l.inodes.remove(&off);
            }
        }
    }

    /// Stop showing every inode in `[off, off + len)`: their cluster was
    /// cancelled (a freed inode chunk), so nothing of theirs is shown over
    /// blocks that may be reused.
    pub fn clear_inodes_in(&self, off: u64, len: u64) {
        let mut l = self.layers.write();
        let gone: Vec<u64> = l.inodes.range(off..off + len).map(|(&k, _)| k).collect();
        for k in gone {
            l.inodes.remove(&k);
        }
    }

    /// Entries shown (buffers, inodes).
    pub fn counts(&self) -> (usize, usize) {
        let l = self.layers.read();
        (l.bufs.len(), l.inodes.len())
    }
}

impl BlockDevice for CacheDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        // Hold the layers across the device read: write-back writes the
        // device first and clears its layer after, so a reader sees either
        // the layer or the new device bytes, never old bytes alone.
        let l = self.layers.read();
        self.inner.read_at(buf, offset)?;
        apply(&l.bufs, buf, offset);
        apply(&l.inodes, buf, offset);
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
