//! CRC32c as XFS uses it: the standard Castagnoli CRC (seed and final xor
//! `!0`) over the whole structure with its own 4-byte CRC field taken as zero,
//! stored little-endian.

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
}
