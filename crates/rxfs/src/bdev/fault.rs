//! Fault injection: a block device wrapper with named fail points.
//!
//! [`FaultDevice`] passes I/O to any inner [`BlockDevice`] until one of its
//! armed rules matches, then fails that request with `Error::Io` carrying the
//! rule's errno (`EIO` unless set otherwise), without touching the inner
//! device: a failed write writes nothing, a failed flush flushes nothing.
//!
//! A rule ([`Fault`]) is: which operations it watches (reads, writes,
//! flushes), optionally a byte range of the device (a request matches when it
//! overlaps the range; flushes have no range and never match a ranged rule),
//! and a trigger over the matching operations counted since the rule was
//! armed:
//!
//! ```text
//!   nth(n)          fail the n-th match (1-based), once
//!   after(n)        let n matches pass, fail every later one
//!   always()        fail every match
//!   one_in(k)       fail each match with probability 1/k (seeded)
//!   gone_after_writes(n)   the device went away: after n writes have
//!                   succeeded, every read, write and flush fails
//! ```
//!
//! Determinism: the random trigger draws from a stream seeded by the device
//! seed and the rule's name, so one seed gives one run, and arming another
//! rule does not change this rule's choices. Counters: the device counts
//! every request and every failure by kind ([`FaultStats`]); each rule
//! counts how often it fired ([`FaultDevice::fired`]).
//!
//! Rules are checked in the order they were armed; the first that fires
//! decides the errno. Rules are kept under a mutex that is never held across
//! I/O of the inner device.

use std::sync::{Arc, Mutex};

use super::simrng::{self, SimRng};
use super::BlockDevice;
use crate::error::{Error, Result};
use crate::types::Daddr;

/// Kinds of operation a rule watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ops {
    pub read: bool,
    pub write: bool,
    pub flush: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trigger {
    Nth(u64),
    After(u64),
    Always,
    OneIn(u64),
    AfterWrites(u64),
}

/// A fail point, built with the constructors and modifiers below.
#[derive(Debug, Clone)]
pub struct Fault {
    ops: Ops,
    /// Byte range `[start, end)` a request must overlap.
    range: Option<(u64, u64)>,
    trigger: Trigger,
    errno: i32,
}

impl Fault {
    fn new(read: bool, write: bool, flush: bool) -> Self {
        Fault {
            ops: Ops { read, write, flush },
            range: None,
            trigger: Trigger::Always,
            errno: libc::EIO,
        }
    }

    /// A rule on reads.
    pub fn reads() -> Self {
        Self::new(true, false, false)
    }
    /// A rule on writes.
    pub fn writes() -> Self {
        Self::new(false, true, false)
    }
    /// A rule on flushes.
    pub fn flushes() -> Self {
        Self::new(false, false, true)
    }
    /// A rule on reads and writes.
    pub fn io() -> Self {
        Self::new(true, true, false)
    }
    /// A rule on every operation.
    pub fn any() -> Self {
        Self::new(true, true, true)
    }
    /// The device disappears after `n` more successful writes: every later
    /// read, write and flush fails.
    pub fn gone_after_writes(n: u64) -> Self {
        Fault {
            trigger: Trigger::AfterWrites(n),
            ..Self::any()
        }
    }

    /// Only requests overlapping `len` basic blocks at `daddr`.
    pub fn daddr_range(self, daddr: Daddr, len_bbs: u64) -> Self {
        let start = daddr.bytes();
        self.byte_range(start, start.saturating_add(len_bbs << 9))
    }
    /// Only requests overlapping the bytes `[start, end)`.
    pub fn byte_range(mut self, start: u64, end: u64) -> Self {
        self.range = Some((start, end));
        self
    }
    /// Fail the `n`-th matching request (1-based), once.
    pub fn nth(mut self, n: u64) -> Self {
        self.trigger = Trigger::Nth(n);
        self
    }
    /// Let `n` matching requests pass, fail all later ones.
    pub fn after(mut self, n: u64) -> Self {
        self.trigger = Trigger::After(n);
        self
    }
    /// Fail every matching request (the default).
    pub fn always(mut self) -> Self {
        self.trigger = Trigger::Always;
        self
    }
    /// Fail each matching request with probability `1/k` (seeded).
    pub fn one_in(mut self, k: u64) -> Self {
        self.trigger = Trigger::OneIn(k.max(1));
        self
    }
    /// The errno of the failure (`EIO` by default).
    pub fn errno(mut self, errno: i32) -> Self {
        self.errno = errno;
        self
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    Write,
    Flush,
}

struct Rule {
    name: String,
    fault: Fault,
    rng: SimRng,
    /// Matching requests seen since armed.
    seen: u64,
    /// Successful writes seen since armed (for `gone_after_writes`).
    writes_ok: u64,
    fired: u64,
}

impl Rule {
    /// Whether this request matches and the trigger fires; updates counts.
    fn check(&mut self, kind: Kind, offset: u64, len: usize) -> bool {
        let f = &self.fault;
        let op_ok = match kind {
            Kind::Read => f.ops.read,
            Kind::Write => f.ops.write,
            Kind::Flush => f.ops.flush,
        };
        let range_ok = match (f.range, kind) {
            (None, _) => true,
            (Some(_), Kind::Flush) => false,
            (Some((s, e)), _) => offset < e && offset.saturating_add(len as u64) > s,
        };
        if !op_ok || !range_ok {
            return false;
        }
        self.seen += 1;
        let fire = match f.trigger {
            Trigger::Nth(n) => self.seen == n,
            Trigger::After(n) => self.seen > n,
            Trigger::Always => true,
            Trigger::OneIn(k) => self.rng.below(k) == 0,
            Trigger::AfterWrites(n) => self.writes_ok >= n,
        };
        if fire {
            self.fired += 1;
        }
        fire
    }
}

/// Request and failure counts of a [`FaultDevice`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultStats {
    pub reads: u64,
    pub writes: u64,
    pub flushes: u64,
    pub read_errors: u64,
    pub write_errors: u64,
    pub flush_errors: u64,
}

struct State {
    rules: Vec<Rule>,
    stats: FaultStats,
}

pub struct FaultDevice {
    inner: Arc<dyn BlockDevice>,
    seed: u64,
    state: Mutex<State>,
}

impl FaultDevice {
    /// Wrap `inner`; random triggers draw from streams derived from `seed`.
    pub fn new(inner: Arc<dyn BlockDevice>, seed: u64) -> Self {
        FaultDevice {
            inner,
            seed,
            state: Mutex::new(State {
                rules: Vec::new(),
                stats: FaultStats::default(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The wrapped device.
    pub fn inner(&self) -> &Arc<dyn BlockDevice> {
        &self.inner
    }

    /// Arm a rule under `name` (replacing a rule of the same name; its
    /// counts start from zero).
    pub fn arm(&self, name: &str, fault: Fault) {
        let mut st = self.lock();
        st.rules.retain(|r| r.name != name);
        st.rules.push(Rule {
            name: name.to_string(),
            rng: SimRng::new(simrng::derive(self.seed, simrng::hash_name(name))),
            fault,
            seen: 0,
            writes_ok: 0,
            fired: 0,
        });
    }

    /// Disarm the rule `name`; returns how often it fired.
    pub fn disarm(&self, name: &str) -> Option<u64> {
        let mut st = self.lock();
        let i = st.rules.iter().position(|r| r.name == name)?;
        Some(st.rules.remove(i).fired)
    }

    /// Disarm every rule.
    pub fn disarm_all(&self) {
        self.lock().rules.clear();
    }

    /// How often the armed rule `name` fired (None if not armed).
    pub fn fired(&self, name: &str) -> Option<u64> {
        self.lock()
            .rules
            .iter()
            .find(|r| r.name == name)
            .map(|r| r.fired)
    }

    pub fn stats(&self) -> FaultStats {
        self.lock().stats
    }

    /// Count the request and decide whether it fails (the first firing
    /// rule's errno). Every rule sees the request, so counts stay exact.
    fn admit(&self, kind: Kind, offset: u64, len: usize) -> Option<i32> {
        let mut st = self.lock();
        let mut errno = None;
        for r in st.rules.iter_mut() {
            if r.check(kind, offset, len) && errno.is_none() {
                errno = Some(r.fault.errno);
            }
        }
        let s = &mut st.stats;
        let (count, errors) = match kind {
            Kind::Read => (&mut s.reads, &mut s.read_errors),
            Kind::Write => (&mut s.writes, &mut s.write_errors),
            Kind::Flush => (&mut s.flushes, &mut s.flush_errors),
        };
        *count += 1;
        if errno.is_some() {
            *errors += 1;
        }
        errno
    }

    /// A write succeeded: advance `gone_after_writes` rules.
    fn write_done(&self) {
        for r in self.lock().rules.iter_mut() {
            r.writes_ok += 1;
        }
    }
}

fn injected(op: &'static str, offset: u64, len: usize, errno: i32) -> Error {
    Error::io(op, offset, len, std::io::Error::from_raw_os_error(errno))
}

impl BlockDevice for FaultDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        if let Some(e) = self.admit(Kind::Read, offset, buf.len()) {
            return Err(injected("read", offset, buf.len(), e));
        }
        self.inner.read_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        if let Some(e) = self.admit(Kind::Write, offset, buf.len()) {
            return Err(injected("write", offset, buf.len(), e));
        }
        self.inner.write_at(buf, offset)?;
        self.write_done();
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        if let Some(e) = self.admit(Kind::Flush, 0, 0) {
            return Err(injected("flush", 0, 0, e));
        }
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

    fn dev(seed: u64) -> FaultDevice {
        FaultDevice::new(Arc::new(MemDevice::new(vec![0u8; 1 << 16])), seed)
    }

    fn read(d: &FaultDevice, off: u64) -> Result<()> {
        d.read_at(&mut [0u8; 512], off)
    }

    #[test]
    fn nth_read_fails_once_with_eio() {
        let d = dev(0);
        d.arm("third", Fault::reads().nth(3));
        assert!(read(&d, 0).is_ok());
        assert!(read(&d, 0).is_ok());
        let e = read(&d, 512).unwrap_err();
        assert!(matches!(
            e,
            Error::Io {
                op: "read",
                offset: 512,
                len: 512,
                ..
            }
        ));
        assert_eq!(e.errno(), libc::EIO);
        assert!(read(&d, 0).is_ok());
        assert_eq!(d.fired("third"), Some(1));
        let s = d.stats();
        assert_eq!((s.reads, s.read_errors, s.writes), (4, 1, 0));
    }

    #[test]
    fn range_rule_and_errno() {
        let d = dev(0);
        d.arm(
            "r",
            Fault::io().daddr_range(Daddr(8), 8).errno(libc::ENOSPC),
        );
        assert!(read(&d, 3584).is_ok()); // sector 7: just below
        assert!(read(&d, 8192).is_ok()); // sector 16: just past
        assert_eq!(read(&d, 3585).unwrap_err().errno(), libc::ENOSPC); // overlaps 8
        assert_eq!(d.write_at(&[1; 4], 8191).unwrap_err().errno(), libc::ENOSPC);
        assert!(d.flush().is_ok(), "a ranged rule failed a flush");
        // The failed write wrote nothing.
        let mut b = [9u8; 4];
        d.inner().read_at(&mut b, 8191).unwrap();
        assert_eq!(b, [0; 4]);
        assert_eq!(d.disarm("r"), Some(2));
        assert!(read(&d, 4096).is_ok());
    }

    #[test]
    fn device_gone_and_flush_failures() {
        let d = dev(0);
        d.arm("gone", Fault::gone_after_writes(2));
        assert!(read(&d, 0).is_ok());
        d.write_at(&[1], 0).unwrap();
        d.flush().unwrap();
        d.write_at(&[1], 1).unwrap();
        assert!(d.write_at(&[1], 2).is_err());
        assert!(read(&d, 0).is_err());
        assert!(d.flush().is_err());
        d.disarm_all();
        d.arm("flush", Fault::flushes().after(1));
        d.flush().unwrap();
        assert_eq!(d.flush().unwrap_err().errno(), libc::EIO);
        assert_eq!(d.flush().unwrap_err().errno(), libc::EIO);
        d.arm("writes", Fault::writes().after(0));
        assert!(d.write_at(&[1], 0).is_err());
        let s = d.stats();
        assert_eq!((s.flushes, s.flush_errors, s.write_errors), (5, 3, 2));
    }

    #[test]
    fn random_rule_is_seeded() {
        let run = |seed| {
            let d = dev(seed);
            d.arm("noise", Fault::reads().one_in(4));
            (0..200).map(|_| read(&d, 0).is_err()).collect::<Vec<_>>()
        };
        let a = run(7);
        assert_eq!(a, run(7));
        assert_ne!(a, run(8));
        let n = a.iter().filter(|&&x| x).count();
        assert!((20..90).contains(&n), "{n} of 200 failed at 1 in 4");
    }

    #[test]
    fn stacked_on_a_crash_device_failed_io_is_not_recorded() {
        use crate::bdev::{CrashDevice, CrashMode};
        let crash = Arc::new(CrashDevice::new(vec![0u8; 4096], 1 << 16));
        let d = FaultDevice::new(crash.clone(), 3);
        d.arm("w2", Fault::writes().nth(2));
        d.arm("f", Fault::flushes().nth(1));
        d.write_at(&[1; 512], 0).unwrap();
        assert!(d.write_at(&[2; 512], 512).is_err());
        assert!(d.flush().is_err());
        d.flush().unwrap();
        // One write and one flush reached the device.
        assert_eq!(crash.event_count(), 2);
        let img = crash.crash_image(2, CrashMode::Lost, 0).unwrap();
        assert_eq!(img[..512], [1; 512]);
        assert_eq!(img[512..1024], [0; 512]);
    }

    #[test]
    fn rearming_resets_counts() {
        let d = dev(0);
        d.arm("x", Fault::reads().nth(1));
        assert!(read(&d, 0).is_err());
        d.arm("x", Fault::reads().nth(1));
        assert_eq!(d.fired("x"), Some(0));
        assert!(read(&d, 0).is_err());
        assert_eq!(d.fired("nope"), None);
    }
}
