//! Log vectors: an item's formatted regions in ONE allocation.
//!
//! ```text
//!   buf: [ n: u32 ][ len_0: u32 ] ... [ len_{n-1}: u32 ][ region 0 ][ region 1 ] ...
//! ```
//!
//! Seed 000's insertion path: the committer asks the item for its size
//! (bytes and vector count), allocates one buffer (or reuses the item's
//! previous vector when its capacity is enough), formats into it outside
//! the CIL lock, and only swaps it in under the lock.

/// An item's formatted regions (see the module doc).
#[derive(Debug, Default, Clone)]
pub struct LogVec {
    buf: Vec<u8>,
}

impl LogVec {
    /// Bytes needed for `nvecs` regions of `bytes` in total.
    pub fn capacity_for(bytes: usize, nvecs: usize) -> usize {
        4 + 4 * nvecs + bytes
    }

    /// Start a vector of `nvecs` regions, reusing `old`'s allocation when it
    /// is big enough. Returns the vector and whether it was reused.
    pub fn start(old: Option<LogVec>, bytes: usize, nvecs: usize) -> (LogVec, bool) {
        let need = Self::capacity_for(bytes, nvecs);
        let (mut buf, reused) = match old {
            Some(o) if o.buf.capacity() >= need => (o.buf, true),
            _ => (Vec::with_capacity(need), false),
        };
        buf.clear();
        buf.extend_from_slice(&0u32.to_ne_bytes());
        buf.resize(4 + 4 * nvecs, 0);
        (LogVec { buf }, reused)
    }

    fn n(&self) -> usize {
        if self.buf.len() < 4 {
            return 0;
        }
        u32::from_ne_bytes(self.buf[0..4].try_into().unwrap()) as usize
    }

    /// Append a region (at most the `nvecs` given to [`LogVec::start`]).
    pub fn push(&mut self, region: &[u8]) {
        let n = self.n();
        self.buf[4 + 4 * n..8 + 4 * n].copy_from_slice(&(region.len() as u32).to_ne_bytes());
        self.buf[0..4].copy_from_slice(&((n + 1) as u32).to_ne_bytes());
        self.buf.extend_from_slice(region);
    }

    /// Append a region built in place by `f` (`len` bytes, zeroed first).
    pub fn push_with(&mut self, len: usize, f: impl FnOnce(&mut [u8])) {
        let n = self.n();
        self.buf[4 + 4 * n..8 + 4 * n].copy_from_slice(&(len as u32).to_ne_bytes());
        self.buf[0..4].copy_from_slice(&((n + 1) as u32).to_ne_bytes());
        let s = self.buf.len();
        self.buf.resize(s + len, 0);
        f(&mut self.buf[s..]);
    }

    /// The regions, in order.
    pub fn regions(&self) -> Vec<&[u8]> {
        let n = self.n();
        let mut at = 4 + 4 * n;
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let l = u32::from_ne_bytes(self.buf[4 + 4 * i..8 + 4 * i].try_into().unwrap()) as usize;
            out.push(&self.buf[at..at + l]);
            at += l;
        }
        out
    }

    pub fn nvecs(&self) -> usize {
        self.n()
    }

    /// Payload bytes (regions only).
    pub fn bytes(&self) -> usize {
        self.buf.len().saturating_sub(4 + 4 * self.n())
    }

    pub fn allocation(&self) -> usize {
        self.buf.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_round_trip_and_reuse() {
        let (mut v, reused) = LogVec::start(None, 7, 2);
        assert!(!reused);
        v.push(b"abc");
        v.push_with(4, |b| b.copy_from_slice(b"wxyz"));
        assert_eq!(v.regions(), vec![&b"abc"[..], &b"wxyz"[..]]);
        assert_eq!((v.nvecs(), v.bytes()), (2, 7));
        let cap = v.allocation();
        let (mut w, reused) = LogVec::start(Some(v), 3, 1);
        assert!(reused);
        w.push(b"123");
        assert_eq!(w.regions(), vec![&b"123"[..]]);
        assert_eq!(w.allocation(), cap);
        let (_, reused) = LogVec::start(Some(w), 1000, 1);
        assert!(!reused);
    }
}
