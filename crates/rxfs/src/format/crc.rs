//! CRC32c as XFS uses it: the standard Castagnoli CRC (seed and final xor
//! `!0`) over the whole structure with its own 4-byte CRC field taken as zero,
//! stored little-endian.

use std::ops::Range;

/// Whether a decoder checks a block's CRC. Bytes read from disk are
/// checked (`Verify`). Bytes rxfs holds in core were checked when they were
/// read, and may have been edited since: their CRC is stamped when they are
/// written back, so a decoder of them skips it (`InCore`) and checks
/// everything else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sum {
    Verify,
    InCore,
}

/// Compute the CRC of `buf` as if the 4 bytes at `crc_off` were zero.
pub fn compute(buf: &[u8], crc_off: usize) -> u32 {
    debug_assert!(crc_off + 4 <= buf.len());
    let c = crc32c::crc32c(&buf[..crc_off]);
    let c = crc32c::crc32c_append(c, &[0u8; 4]);
    crc32c::crc32c_append(c, &buf[crc_off + 4..])
}

/// Whether the CRC stored at `crc_off` matches. False if `buf` is too short.
pub fn verify(buf: &[u8], crc_off: usize) -> bool {
    if crc_off + 4 > buf.len() {
        return false;
    }
    let stored = u32::from_le_bytes(buf[crc_off..crc_off + 4].try_into().unwrap());
    stored == compute(buf, crc_off)
}

/// Store the CRC of `buf` at `crc_off`.
pub fn update(buf: &mut [u8], crc_off: usize) {
    let c = compute(buf, crc_off);
    buf[crc_off..crc_off + 4].copy_from_slice(&c.to_le_bytes());
}

/// The CRC32c polynomial, bit-reflected (bit 31 is the coefficient of
/// x^0), as the CRC register holds it.
const POLY: u32 = 0x82F6_3B78;

/// `a * b mod P` for polynomials held as reflected registers (bit 31 is
/// x^0, bit 0 is x^31).
fn mul_mod(a: u32, b: u32) -> u32 {
    let mut acc = 0u32;
    // `t` runs through b, b*x, b*x^2, ... while `a` is read from its x^0
    // bit (bit 31) down.
    let mut t = b;
    for i in 0..32 {
        if a & (1 << (31 - i)) != 0 {
            acc ^= t;
        }
        t = if t & 1 != 0 { (t >> 1) ^ POLY } else { t >> 1 };
    }
    acc
}

/// x^(2^j) mod P for j = 0..32, reflected.
fn x_pow2_table() -> &'static [u32; 32] {
    static T: std::sync::OnceLock<[u32; 32]> = std::sync::OnceLock::new();
    T.get_or_init(|| {
        let mut t = [0u32; 32];
        t[0] = 1 << 30; // x^1
        for j in 1..32 {
            t[j] = mul_mod(t[j - 1], t[j - 1]);
        }
        t
    })
}

/// x^(8 * bytes) mod P: what appending `bytes` zero bytes multiplies a
/// CRC register by.
fn zeros_factor(bytes: usize) -> u32 {
    let t = x_pow2_table();
    let mut bits = (bytes as u64) * 8;
    let mut f = 1u32 << 31; // x^0
    let mut j = 0;
    while bits != 0 {
        if bits & 1 != 0 {
            f = mul_mod(f, t[j % 32]);
        }
        bits >>= 1;
        j += 1;
    }
    f
}

/// [`zeros_factor`] of every multiple of [`RESTAMP_CHUNK`] bytes up to
/// 64 KiB (the largest metadata block), computed once.
fn chunk_factors() -> &'static [u32] {
    static T: std::sync::OnceLock<Vec<u32>> = std::sync::OnceLock::new();
    T.get_or_init(|| {
        let step = zeros_factor(RESTAMP_CHUNK);
        let mut t = Vec::with_capacity(65536 / RESTAMP_CHUNK + 1);
        let mut f = 1u32 << 31;
        for _ in 0..=65536 / RESTAMP_CHUNK {
            t.push(f);
            f = mul_mod(f, step);
        }
        t
    })
}

/// [`zeros_factor`], from the table when `bytes` is a whole number of
/// chunks.
fn zeros_factor_fast(bytes: usize) -> u32 {
    if bytes.is_multiple_of(RESTAMP_CHUNK) {
        if let Some(&f) = chunk_factors().get(bytes / RESTAMP_CHUNK) {
            return f;
        }
    }
    zeros_factor(bytes)
}

/// Run the bare CRC register (no initial or final inversion) over `data`.
fn raw(reg: u32, data: &[u8]) -> u32 {
    !crc32c::crc32c_append(!reg, data)
}

/// Chunk size [`restamp`] compares in.
const RESTAMP_CHUNK: usize = 128;

/// Store the CRC of `new` at `crc_off`, given `old`, a block of the same
/// length whose stored CRC is valid, and `changed`: ranges outside which
/// `new` equals `old` (in order, not overlapping).
///
/// The CRC is linear: for equal lengths crc(new) = crc(old) xor
/// crc'(old xor new), where crc' has no inversions, and crc' of a message
/// that is zero outside a few ranges is the sum of each range's crc'
/// carried over the zeros after it (a multiplication by x^(8 * zeros)).
/// So only the changed ranges are run through the CRC. Falls back to
/// [`update`] when the lengths differ.
pub fn restamp(old: &[u8], new: &mut [u8], crc_off: usize, changed: &[Range<usize>]) {
    let n = new.len();
    if old.len() != n || crc_off + 4 > n {
        update(new, crc_off);
        return;
    }
    let mut acc = u32::from_le_bytes(old[crc_off..crc_off + 4].try_into().unwrap());
    let mut d = [0u8; RESTAMP_CHUNK];
    for r in changed {
        let end = r.end.min(n);
        let mut reg = 0u32;
        let mut at = r.start.min(end);
        while at < end {
            let to = (at + RESTAMP_CHUNK).min(end);
            let dl = &mut d[..to - at];
            for (k, x) in dl.iter_mut().enumerate() {
                *x = old[at + k] ^ new[at + k];
            }
            // The CRC field counts as zero in both.
            for p in crc_off.max(at)..(crc_off + 4).min(to) {
                dl[p - at] = 0;
            }
            reg = raw(reg, dl);
            at = to;
        }
        if reg != 0 {
            acc ^= mul_mod(zeros_factor_fast(n - end), reg);
        }
    }
    new[crc_off..crc_off + 4].copy_from_slice(&acc.to_le_bytes());
}

#[cfg(test)]
mod tests {
    #[test]
    fn roundtrip() {
        let mut b = vec![7u8; 512];
        super::update(&mut b, 100);
        assert!(super::verify(&b, 100));
        b[3] ^= 1;
        assert!(!super::verify(&b, 100));
        assert!(!super::verify(&b[..102], 100));
    }

    /// The restamped CRC is the CRC: random edits (single bytes, runs,
    /// the CRC field itself, the first and last chunks), block sizes with
    /// and without a partial last chunk.
    #[test]
    fn restamp_matches_a_full_crc() {
        let mut r = 0x1234_5678_9abc_def1u64;
        let mut next = move || {
            r ^= r << 13;
            r ^= r >> 7;
            r ^= r << 17;
            r
        };
        for round in 0..3000 {
            let n = [512, 4096, 1000, 65536, 128, 130][round % 6];
            let off = [4, 12, 0, 100][round % 4].min(n - 4);
            let mut old: Vec<u8> = (0..n).map(|_| next() as u8).collect();
            super::update(&mut old, off);
            let mut new = old.clone();
            // The edits as 128-byte chunks, the way a transaction's dirty
            // map records them (runs merged), or as the exact byte ranges.
            let mut chunks = vec![false; n.div_ceil(128)];
            let mut exact = Vec::new();
            for _ in 0..next() % 6 {
                let at = (next() as usize) % n;
                let len = 1 + (next() as usize) % [1, 8, 300, 4096][(next() % 4) as usize];
                let end = (at + len).min(n);
                for b in &mut new[at..end] {
                    *b = next() as u8;
                }
                exact.push(at..end);
                for c in &mut chunks[at / 128..end.div_ceil(128)] {
                    *c = true;
                }
            }
            let mut ranges: Vec<std::ops::Range<usize>> = Vec::new();
            for (c, _) in chunks.iter().enumerate().filter(|(_, &x)| x) {
                let (s, e) = (c * 128, ((c + 1) * 128).min(n));
                match ranges.last_mut() {
                    Some(r) if r.end == s => r.end = e,
                    _ => ranges.push(s..e),
                }
            }
            exact.sort_by_key(|r| r.start);
            let mut disjoint: Vec<std::ops::Range<usize>> = Vec::new();
            for r in exact {
                match disjoint.last_mut() {
                    Some(d) if r.start <= d.end => d.end = d.end.max(r.end),
                    _ => disjoint.push(r),
                }
            }
            let mut want = new.clone();
            super::update(&mut want, off);
            let mut by_exact = new.clone();
            super::restamp(&old, &mut new, off, &ranges);
            assert_eq!(new, want, "round {round}: n {n}, crc at {off}");
            super::restamp(&old, &mut by_exact, off, &disjoint);
            assert_eq!(by_exact, want, "round {round}: exact ranges");
            assert_eq!(new, want, "round {round}: n {n}, crc at {off}");
        }
    }
}
