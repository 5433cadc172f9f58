//! A block device wrapper that records every read.
//!
//! [`RecordingDevice`] forwards all calls to an inner device and appends the
//! `(offset, len)` of each successful or failed read to a log. Tests use it to
//! learn which bytes a code path touches: opening an image and walking its
//! metadata (without reading file data) through a recording device yields the
//! list of every metadata block the read path depends on, which the
//! corruption tests then damage one at a time.
//!
//! Invariants: the log keeps reads in the order they were issued (across
//! threads, in the order they took the lock); it is bounded by
//! `max_records` (older reads are kept, later ones counted as dropped) so a
//! runaway caller cannot make the recorder itself grow without bound.

use std::sync::{Arc, Mutex};

use super::BlockDevice;
use crate::error::Result;

/// One recorded read: byte offset and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReadRecord {
    pub offset: u64,
    pub len: usize,
}

#[derive(Default)]
struct Log {
    reads: Vec<ReadRecord>,
    dropped: u64,
}

/// Wraps a device and records the position of every read.
pub struct RecordingDevice {
    inner: Arc<dyn BlockDevice>,
    log: Mutex<Log>,
    max_records: usize,
}

/// Default bound on the number of records kept.
pub const DEFAULT_MAX_RECORDS: usize = 1 << 22;

impl RecordingDevice {
    pub fn new(inner: Arc<dyn BlockDevice>) -> Self {
        Self::with_capacity(inner, DEFAULT_MAX_RECORDS)
    }

    /// A recorder that keeps at most `max_records` reads.
    pub fn with_capacity(inner: Arc<dyn BlockDevice>, max_records: usize) -> Self {
        RecordingDevice {
            inner,
            log: Mutex::new(Log::default()),
            max_records,
        }
    }

    /// The reads recorded so far, in issue order.
    pub fn reads(&self) -> Vec<ReadRecord> {
        self.lock().reads.clone()
    }

    /// Reads not kept because the log was full.
    pub fn dropped(&self) -> u64 {
        self.lock().dropped
    }

    /// Take the recorded reads and start a new log.
    pub fn take(&self) -> Vec<ReadRecord> {
        let mut log = self.lock();
        log.dropped = 0;
        std::mem::take(&mut log.reads)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl BlockDevice for RecordingDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        {
            let mut log = self.lock();
            if log.reads.len() < self.max_records {
                log.reads.push(ReadRecord {
                    offset,
                    len: buf.len(),
                });
            } else {
                log.dropped += 1;
            }
        }
        self.inner.read_at(buf, offset)
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
    use crate::bdev::MemDevice;

    #[test]
    fn records_reads_in_order_and_bounds_the_log() {
        let mem = Arc::new(MemDevice::new((0..=255u8).cycle().take(4096).collect()));
        let rec = RecordingDevice::with_capacity(mem, 2);
        let mut b = [0u8; 4];
        rec.read_at(&mut b, 100).unwrap();
        assert_eq!(b, [100, 101, 102, 103]);
        rec.read_at(&mut [0u8; 16], 8).unwrap();
        // Failed reads are recorded too (they were issued).
        assert!(rec.read_at(&mut [0u8; 16], 4090).is_err());
        assert_eq!(
            rec.reads(),
            vec![
                ReadRecord {
                    offset: 100,
                    len: 4
                },
                ReadRecord { offset: 8, len: 16 }
            ]
        );
        assert_eq!(rec.dropped(), 1);
        assert_eq!(rec.take().len(), 2);
        assert!(rec.reads().is_empty());
        // Writes pass through unrecorded.
        rec.write_at(&[9], 0).unwrap();
        rec.read_at(&mut b[..1], 0).unwrap();
        assert_eq!(b[0], 9);
        assert_eq!(rec.reads().len(), 1);
        assert_eq!(rec.size(), 4096);
    }
}
