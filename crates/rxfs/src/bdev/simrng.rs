//! A small deterministic random number generator for the simulators.
//!
//! SplitMix64: 64 bits of state, one multiply-xorshift output function. It is
//! not cryptographic and does not need to be; what matters is that one seed
//! always gives one sequence on every platform, so a failing crash or fault
//! case is reproduced from the seed printed with it. No dependency, so the
//! simulators can live in the library and not only in dev-dependencies.

/// SplitMix64 stream.
#[derive(Debug, Clone)]
pub(crate) struct SimRng(u64);

const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

impl SimRng {
    pub(crate) fn new(seed: u64) -> Self {
        SimRng(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN);
        finalize(self.0)
    }

    /// Uniform in `0..n`; `n` must be non-zero.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        // Multiply-shift: the bias is at most n / 2^64, irrelevant here.
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// True with probability `num / den`.
    pub(crate) fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }

    /// Fisher-Yates shuffle.
    pub(crate) fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }
}

/// The SplitMix64 output function (a good 64-bit mixer).
fn finalize(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Derive a seed for a sub-case from a parent seed and a case number, so
/// that every case can be replayed on its own.
pub(crate) fn derive(seed: u64, case: u64) -> u64 {
    finalize(seed ^ finalize(case.wrapping_add(GOLDEN)))
}

/// FNV-1a of a name (to give each named fail point its own stream).
pub(crate) fn hash_name(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_in_range() {
        let mut a = SimRng::new(42);
        let mut b = SimRng::new(42);
        for _ in 0..1000 {
            let x = a.below(7);
            assert_eq!(x, b.below(7));
            assert!(x < 7);
        }
        assert_ne!(SimRng::new(1).next_u64(), SimRng::new(2).next_u64());
        assert_ne!(derive(5, 1), derive(5, 2));
    }

    #[test]
    fn shuffle_is_a_permutation() {
        let mut v: Vec<u32> = (0..50).collect();
        SimRng::new(9).shuffle(&mut v);
        let mut s = v.clone();
        s.sort();
        assert_eq!(s, (0..50).collect::<Vec<_>>());
        assert_ne!(v, s, "a 50-element shuffle left everything in place");
    }
}
