//! Shortform directories: entries packed inside the inode's data fork
//! (format `local`), no blocks at all.
//!
//! ```text
//! header:  0 count u8   1 i8count u8   2 parent (4 bytes, or 8 if i8count > 0)
//! entry:   0 namelen u8   1 offset be16   3 name[namelen]
//!          [ftype u8, when the filesystem has ftype]   inumber (4 or 8 bytes)
//! ```
//! Entries are byte-packed (no alignment). All inode numbers, the parent's
//! included, are 8 bytes wide if any of them needs more than 32 bits;
//! `i8count` counts how many do (parent included). `offset` is the byte
//! offset the entry would take in a block-form data block: strictly
//! increasing, starting at or after the slot after "." and "..". The fork
//! holds exactly the header and the entries (its length is the inode size).

use super::dir::{check_ftype, check_name, DirGeo, DATA_FIRST_OFFSET, LEAF_OFFSET_BYTES};
use crate::error::{Error, Location, Result};
use crate::types::Ino;

const WHAT: &str = "shortform directory";
/// Largest inode number that fits the 4-byte form.
pub const MAX_SHORT_INUM: u64 = 0xffff_ffff;

/// One shortform entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SfEntry {
    pub name: Vec<u8>,
    /// Byte offset in the equivalent data block (readdir cookie << 3).
    pub offset: u16,
    /// Raw file type byte (0 when the filesystem has no ftype).
    pub ftype: u8,
    pub ino: Ino,
}

/// A decoded shortform directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SfDir {
    pub parent: Ino,
    /// Whether inode numbers are stored in 8 bytes.
    pub wide: bool,
    pub entries: Vec<SfEntry>,
}

/// Decode the shortform directory in `fork` (the data fork bytes, exactly
/// the inode's size) of inode `ino`.
pub fn decode_sf(fork: &[u8], geo: &DirGeo, ino: Ino) -> Result<SfDir> {
    let at = Location::Ino(ino.0);
    let bad = |d: String| Error::corrupt(WHAT, at, d);
    if fork.len() < 2 {
        return Err(bad(format!("fork of {} bytes", fork.len())));
    }
    let count = fork[0] as usize;
    let i8count = fork[1] as usize;
    let wide = i8count > 0;
    let isz = if wide { 8 } else { 4 };
    let hdr = 2 + isz;
    if fork.len() < hdr {
        return Err(bad(format!("fork of {} bytes", fork.len())));
    }
    let read_ino = |o: usize| -> u64 {
        if wide {
            super::be64(fork, o)
        } else {
            super::be32(fork, o) as u64
        }
    };
    let parent = read_ino(2);
    let mut wide_seen = (parent > MAX_SHORT_INUM) as usize;
    let mut entries = Vec::with_capacity(count);
    let mut p = hdr;
    let mut min_off = DATA_FIRST_OFFSET;
    for i in 0..count {
        // namelen + offset, then the name, ftype and inumber.
        if p + 3 > fork.len() {
            return Err(bad(format!("entry {i} runs past the fork")));
        }
        let namelen = fork[p] as usize;
        let offset = super::be16(fork, p + 1);
        let name_at = p + 3;
        let ft_len = geo.ftype as usize;
        let end = name_at + namelen + ft_len + isz;
        if end > fork.len() {
            return Err(bad(format!("entry {i} runs past the fork")));
        }
        let name = &fork[name_at..name_at + namelen];
        check_name(WHAT, at, name)?;
        let ftype = if geo.ftype {
            fork[name_at + namelen]
        } else {
            0
        };
        check_ftype(WHAT, at, ftype)?;
        if (offset as usize) < min_off {
            return Err(bad(format!(
                "entry {i} offset {offset:#x} below {min_off:#x}"
            )));
        }
        // The entry must also fit where its offset puts it in a data block.
        let entsize = geo.data_entsize(namelen);
        min_off = offset as usize + entsize;
        if min_off as u64 > (geo.blksize as u64).min(LEAF_OFFSET_BYTES) {
            return Err(bad(format!("entry {i} offset {offset:#x} past a block")));
        }
        let e_ino = read_ino(name_at + namelen + ft_len);
        wide_seen += (e_ino > MAX_SHORT_INUM) as usize;
        entries.push(SfEntry {
            name: name.to_vec(),
            offset,
            ftype,
            ino: Ino(e_ino),
        });
        p = end;
    }
    if p != fork.len() {
        return Err(bad(format!(
            "entries end at byte {p}, the fork holds {}",
            fork.len()
        )));
    }
    if wide_seen != i8count {
        return Err(bad(format!(
            "i8count {i8count} but {wide_seen} inode numbers need 8 bytes"
        )));
    }
    Ok(SfDir {
        parent: Ino(parent),
        wide,
        entries,
    })
}

/// Encode a shortform directory (the inverse of [`decode_sf`]). Entries
/// must already carry valid, increasing offsets.
pub fn encode_sf(dir: &SfDir, geo: &DirGeo) -> Vec<u8> {
    let i8count = std::iter::once(dir.parent)
        .chain(dir.entries.iter().map(|e| e.ino))
        .filter(|i| i.0 > MAX_SHORT_INUM)
        .count();
    debug_assert!(dir.wide == (i8count > 0));
    let put_ino = |out: &mut Vec<u8>, ino: Ino| {
        if dir.wide {
            out.extend_from_slice(&ino.0.to_be_bytes());
        } else {
            out.extend_from_slice(&(ino.0 as u32).to_be_bytes());
        }
    };
    let mut out = vec![dir.entries.len() as u8, i8count as u8];
    put_ino(&mut out, dir.parent);
    for e in &dir.entries {
        out.push(e.name.len() as u8);
        out.extend_from_slice(&e.offset.to_be_bytes());
        out.extend_from_slice(&e.name);
        if geo.ftype {
            out.push(e.ftype);
        }
        put_ino(&mut out, e.ino);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo() -> DirGeo {
        DirGeo::new(12, 0, true)
    }

    fn sample(wide: bool) -> SfDir {
        let big = if wide { 1u64 << 33 } else { 200 };
        SfDir {
            parent: Ino(128),
            wide,
            entries: vec![
                SfEntry {
                    name: b"f0001".to_vec(),
                    offset: 0x60,
                    ftype: 1,
                    ino: Ino(132),
                },
                SfEntry {
                    name: vec![b'z'; 255],
                    offset: 0x78,
                    ftype: 2,
                    ino: Ino(big),
                },
            ],
        }
    }

    #[test]
    fn roundtrip_narrow_and_wide() {
        for wide in [false, true] {
            let d = sample(wide);
            let b = encode_sf(&d, &geo());
            assert_eq!(decode_sf(&b, &geo(), Ino(1)).unwrap(), d);
        }
    }

    #[test]
    fn kernel_made_fork() {
        // /sf of a kernel-made image: 5 entries f0001..f0005, parent 128.
        let b = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/dir/sf5.fork"
        ))
        .unwrap();
        let d = decode_sf(&b, &geo(), Ino(131)).unwrap();
        assert_eq!(d.parent, Ino(128));
        assert!(!d.wide);
        let names: Vec<_> = d.entries.iter().map(|e| e.name.clone()).collect();
        assert_eq!(names[0], b"f0001");
        assert_eq!(names[4], b"f0005");
        assert_eq!(d.entries[0].offset, 0x60);
        assert_eq!(d.entries[1].offset, 0x78);
        assert_eq!(d.entries[1].ino, Ino(133));
        assert!(d.entries.iter().all(|e| e.ftype == 1));
    }

    #[test]
    fn rejects_bad_forks() {
        let g = geo();
        let good = encode_sf(&sample(false), &g);
        // Truncations at every length.
        for n in 0..good.len() {
            assert!(decode_sf(&good[..n], &g, Ino(1)).unwrap_err().is_corrupt());
        }
        // Trailing garbage.
        let mut b = good.clone();
        b.push(0);
        assert!(decode_sf(&b, &g, Ino(1)).is_err());
        // '/' in a name.
        let mut b = good.clone();
        b[2 + 4 + 3] = b'/';
        assert!(decode_sf(&b, &g, Ino(1)).is_err());
        // Zero-length name.
        let mut d = sample(false);
        d.entries[0].name.clear();
        assert!(decode_sf(&encode_sf(&d, &g), &g, Ino(1)).is_err());
        // Offsets not increasing.
        let mut d = sample(false);
        d.entries[1].offset = 0x60;
        assert!(decode_sf(&encode_sf(&d, &g), &g, Ino(1)).is_err());
        // Wrong i8count.
        let mut b = encode_sf(&sample(true), &g);
        b[1] = 2;
        assert!(decode_sf(&b, &g, Ino(1)).is_err());
        // Bad ftype.
        let mut b = good.clone();
        b[2 + 4 + 3 + 5] = 9;
        assert!(decode_sf(&b, &g, Ino(1)).is_err());
    }

    #[test]
    fn never_panics_on_mutations() {
        let g = geo();
        let good = encode_sf(&sample(true), &g);
        let mut x = 0x1234_5678u32;
        for _ in 0..20000 {
            let mut b = good.clone();
            for _ in 0..3 {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                let i = x as usize % b.len();
                b[i] = (x >> 8) as u8;
            }
            let _ = decode_sf(&b, &g, Ino(1));
        }
    }
}
