//! Block devices: all I/O of the library goes through [`BlockDevice`].
//!
//! Backends: [`FileDevice`] (an image file or a block device, optionally with
//! O_DIRECT) and [`MemDevice`] (a byte vector, for tests). The crash/fault
//! simulator of the journal work wraps any backend through the same trait.
//!
//! Invariants: offsets and lengths are in bytes; a read past the end of the
//! device is an error (never a short read silently padded); implementations
//! are `Send + Sync` and may be called from many threads at once.

mod cow;
mod crash;
mod fault;
mod file;
mod latency;
mod mem;
pub mod overlay;
mod range;
mod record;
pub(crate) mod simrng;

mod claim;
pub use cow::{CowDevice, SECTOR_SIZE};
pub use crash::{
    case_seed, for_each_crash_image, sample_points, CrashDevice, CrashImage, CrashMode, Event,
    Piece,
};
pub use fault::{Fault, FaultDevice, FaultStats, Ops};
pub use file::{block_device_sectsize, block_device_size, wait_for_writer, FileDevice, OWNER_WAIT};
pub use latency::LatencyDevice;
pub use mem::MemDevice;
pub use overlay::{Overlay, OverlayDevice};
pub use range::{partition, RangeDevice};
pub use record::{ReadRecord, RecordingDevice};

use crate::error::Result;

/// Write `bufs` one after another from byte `offset`, one
/// [`BlockDevice::write_at`] each: the default vectored write, and the
/// one devices fall back to when they cannot do better.
pub fn write_each<D: BlockDevice + ?Sized>(dev: &D, bufs: &[&[u8]], offset: u64) -> Result<()> {
    let mut at = offset;
    for b in bufs.iter().filter(|b| !b.is_empty()) {
        dev.write_at(b, at)?;
        at += b.len() as u64;
    }
    Ok(())
}

/// Where every byte rxfs reads or writes goes: an image file, a block
/// device, memory, or one of the simulators wrapping them.
pub trait BlockDevice: Send + Sync {
    /// Read exactly `buf.len()` bytes at byte `offset`.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()>;
    /// Write all of `buf` at byte `offset`.
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()>;
    /// Write `bufs` one after another from byte `offset` (one request
    /// where the device can: the AIL's runs of adjacent blocks). The
    /// default writes them one by one; nothing is ordered or durable
    /// before [`Self::flush`] either way.
    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64) -> Result<()> {
        write_each(self, bufs, offset)
    }
    /// Make every completed write durable.
    fn flush(&self) -> Result<()>;
    /// Size of the device in bytes.
    fn size(&self) -> u64;
    /// Whether writes are refused.
    fn read_only(&self) -> bool;
    /// Make `len` bytes at `offset` read as zeros (mkfs zeroing the log).
    /// The default writes zeros; devices that can do better (a sparse
    /// image file punches a hole) override it.
    fn zero_range(&self, offset: u64, len: u64) -> Result<()> {
        const CHUNK: u64 = 1 << 20;
        let zeros = vec![0u8; CHUNK.min(len) as usize];
        let mut at = 0;
        while at < len {
            let n = CHUNK.min(len - at) as usize;
            self.write_at(&zeros[..n], offset + at)?;
            at += n as u64;
        }
        Ok(())
    }
}
