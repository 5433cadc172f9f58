//! [`LatencyDevice`]: a device that answers every write and flush (and,
//! optionally, read) after an added delay, for benchmarks of what the
//! library does when the device is the bottleneck (seeds 002 and 004:
//! log batching "when there is any noticeable journal IO delay",
//! overwrites in parallel). Calls sleep independently, so concurrent I/O
//! overlaps as on a device with a queue.
//!
//! The delay is a lower bound: a thread's sleep ends after at least the
//! time asked (the kernel's timer slack adds tens of microseconds).

use std::sync::Arc;
use std::time::Duration;

use super::BlockDevice;
use crate::error::Result;

pub struct LatencyDevice {
    inner: Arc<dyn BlockDevice>,
    delay: Duration,
    reads: bool,
}

impl LatencyDevice {
    /// Delay writes and flushes by `delay`; reads too if `reads`.
    pub fn new(inner: Arc<dyn BlockDevice>, delay: Duration, reads: bool) -> Self {
        LatencyDevice {
            inner,
            delay,
            reads,
        }
    }

    fn wait(&self) {
        if !self.delay.is_zero() {
            std::thread::sleep(self.delay);
        }
    }
}

impl BlockDevice for LatencyDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        if self.reads {
            self.wait();
        }
        self.inner.read_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.wait();
        self.inner.write_at(buf, offset)
    }

    fn flush(&self) -> Result<()> {
        self.wait();
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
    use std::time::Instant;

    #[test]
    fn writes_wait_at_least_the_delay() {
        let mem: Arc<dyn BlockDevice> = Arc::new(MemDevice::new(vec![0u8; 1 << 16]));
        let d = LatencyDevice::new(mem, Duration::from_millis(20), false);
        let t = Instant::now();
        d.write_at(&[1u8; 512], 512).unwrap();
        assert!(t.elapsed() >= Duration::from_millis(20));
        let t = Instant::now();
        d.flush().unwrap();
        assert!(t.elapsed() >= Duration::from_millis(20));
        let mut b = [0u8; 512];
        d.read_at(&mut b, 512).unwrap();
        assert_eq!(b, [1u8; 512]);
    }
}
