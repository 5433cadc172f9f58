//! Text shown to people and to the fixture suite: names decoded like
//! Python's `backslashreplace`, `ls`-style mode strings, UTC timestamps.

use rxfs::format::inode::Timestamp;
use rxfs::types::FileType;

/// Decode bytes as UTF-8; every byte of an invalid sequence becomes `\xNN`
/// (lowercase hex), exactly as Python's `bytes.decode('utf-8',
/// 'backslashreplace')` does. Both split invalid input into the same
/// maximal invalid subparts, and since each byte is replaced on its own the
/// grouping does not change the result.
pub fn decode_name(mut b: &[u8]) -> String {
    let mut out = String::with_capacity(b.len());
    loop {
        match std::str::from_utf8(b) {
            Ok(s) => {
                out.push_str(s);
                return out;
            }
            Err(e) => {
                let good = e.valid_up_to();
                // SAFETY-free: from_utf8 said the prefix is valid.
                out.push_str(std::str::from_utf8(&b[..good]).unwrap_or_default());
                let bad = e.error_len().unwrap_or(b.len() - good);
                for byte in &b[good..good + bad] {
                    out.push_str(&format!("\\x{byte:02x}"));
                }
                b = &b[good + bad..];
            }
        }
    }
}

/// The manifest's type names.
pub fn type_name(t: Option<FileType>) -> &'static str {
    match t {
        Some(FileType::Regular) => "reg",
        Some(FileType::Directory) => "dir",
        Some(FileType::Symlink) => "lnk",
        Some(FileType::CharDev) => "chr",
        Some(FileType::BlockDev) => "blk",
        Some(FileType::Fifo) => "fifo",
        Some(FileType::Socket) => "sock",
        None => "unknown",
    }
}

/// stat(1)'s long type names.
pub fn type_long_name(t: Option<FileType>, size: u64) -> &'static str {
    match t {
        Some(FileType::Regular) if size == 0 => "regular empty file",
        Some(FileType::Regular) => "regular file",
        Some(FileType::Directory) => "directory",
        Some(FileType::Symlink) => "symbolic link",
        Some(FileType::CharDev) => "character special file",
        Some(FileType::BlockDev) => "block special file",
        Some(FileType::Fifo) => "fifo",
        Some(FileType::Socket) => "socket",
        None => "unknown file type",
    }
}

/// `-rwxr-xr-x` style mode string, with setuid/setgid/sticky letters.
pub fn mode_string(mode: u16) -> String {
    let t = match FileType::from_mode(mode) {
        Some(FileType::Regular) => '-',
        Some(FileType::Directory) => 'd',
        Some(FileType::Symlink) => 'l',
        Some(FileType::CharDev) => 'c',
        Some(FileType::BlockDev) => 'b',
        Some(FileType::Fifo) => 'p',
        Some(FileType::Socket) => 's',
        None => '?',
    };
    let mut s = String::with_capacity(10);
    s.push(t);
    let special = [(0o4000, 's', 'S'), (0o2000, 's', 'S'), (0o1000, 't', 'T')];
    for (i, (bit, lower, upper)) in special.iter().enumerate() {
        let shift = 6 - 3 * i;
        let rwx = (mode >> shift) & 7;
        s.push(if rwx & 4 != 0 { 'r' } else { '-' });
        s.push(if rwx & 2 != 0 { 'w' } else { '-' });
        let x = rwx & 1 != 0;
        s.push(match (mode & bit != 0, x) {
            (true, true) => *lower,
            (true, false) => *upper,
            (false, true) => 'x',
            (false, false) => '-',
        });
    }
    s
}

/// Civil date from days since 1970-01-01 (proleptic Gregorian).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    (y, m, d)
}

/// `2024-01-31 23:59:59.123456789 +0000` (UTC, like `TZ=UTC stat`).
pub fn format_time(t: Timestamp) -> String {
    let days = t.sec.div_euclid(86_400);
    let secs = t.sec.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{:09} +0000",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        t.nsec
    )
}

/// `2024-01-31 23:59` for `ls -l`.
pub fn format_time_short(t: Timestamp) -> String {
    format_time(t)[..16].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backslashreplace_matches_python() {
        assert_eq!(decode_name(b"plain"), "plain");
        assert_eq!(decode_name("é".as_bytes()), "é");
        assert_eq!(decode_name(b"a\xffb"), "a\\xffb");
        // Truncated 3-byte sequence, then a valid char.
        assert_eq!(decode_name(b"\xe2\x82z"), "\\xe2\\x82z");
        // Surrogate encodings are invalid in both Rust and Python.
        assert_eq!(decode_name(b"\xed\xa0\x80"), "\\xed\\xa0\\x80");
        assert_eq!(decode_name(b"x\x80"), "x\\x80");
    }

    #[test]
    fn modes() {
        assert_eq!(mode_string(0o100644), "-rw-r--r--");
        assert_eq!(mode_string(0o40755), "drwxr-xr-x");
        assert_eq!(mode_string(0o104755), "-rwsr-xr-x");
        assert_eq!(mode_string(0o41777), "drwxrwxrwt");
        assert_eq!(mode_string(0o102644), "-rw-r-Sr--");
        assert_eq!(mode_string(0o120777), "lrwxrwxrwx");
    }

    #[test]
    fn times() {
        let t = |sec, nsec| Timestamp { sec, nsec };
        assert_eq!(format_time(t(0, 0)), "1970-01-01 00:00:00.000000000 +0000");
        assert_eq!(
            format_time(t(1_700_000_000, 5)),
            "2023-11-14 22:13:20.000000005 +0000"
        );
        assert_eq!(
            format_time(t(-1, 999_999_999)),
            "1969-12-31 23:59:59.999999999 +0000"
        );
        assert_eq!(
            format_time(t(951_782_400, 0)),
            "2000-02-29 00:00:00.000000000 +0000"
        );
        assert_eq!(format_time_short(t(0, 0)), "1970-01-01 00:00");
    }
}
