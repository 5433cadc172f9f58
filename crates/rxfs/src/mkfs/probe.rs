//! What is already on a device: filesystem, partition-table and RAID
//! signatures, so that mkfs refuses to overwrite them without `-f` (as
//! mkfs.xfs refuses what libblkid finds).
//!
//! Each signature is a magic at a fixed offset, checked the way the
//! tools that write it define it; where a magic alone is short or common
//! (the `55 AA` boot-sector mark), more of the structure is checked so
//! that zeroed or random data is not taken for a filesystem. The names are
//! libblkid's `TYPE`/`PTTYPE` names, so the message reads like
//! mkfs.xfs's.
//!
//! Probing reads at most a few small ranges near the start and the end
//! of the device through the caller's `read`; a range past the end (a
//! small device) is skipped.

use std::io;

/// What kind of signature was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A filesystem (or swap, or a volume manager's member).
    Filesystem,
    /// A partition table.
    PartitionTable,
}

/// A signature found on a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// libblkid's name for it (`ext4`, `btrfs`, `vfat`, `swap`, `gpt`...).
    pub name: &'static str,
    pub kind: Kind,
    /// Byte offset of the magic.
    pub offset: u64,
}

impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            Kind::Filesystem => write!(f, "an existing filesystem ({})", self.name),
            Kind::PartitionTable => write!(f, "a partition table ({})", self.name),
        }
    }
}

/// The reads of a probe: fill `buf` from byte `offset` of the device.
pub type ReadAt<'a> = dyn FnMut(u64, &mut [u8]) -> io::Result<()> + 'a;

struct Dev<'a, 'b> {
    size: u64,
    read: &'a mut ReadAt<'b>,
}

impl Dev<'_, '_> {
    /// `len` bytes at `offset`, or None when the range is past the end.
    fn get(&mut self, offset: u64, len: usize) -> io::Result<Option<Vec<u8>>> {
        if offset.checked_add(len as u64).is_none_or(|e| e > self.size) {
            return Ok(None);
        }
        let mut b = vec![0u8; len];
        (self.read)(offset, &mut b)?;
        Ok(Some(b))
    }

    fn has(&mut self, offset: u64, magic: &[u8]) -> io::Result<bool> {
        Ok(self.get(offset, magic.len())?.is_some_and(|b| b == magic))
    }
}

fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The first signature found on a device of `size` bytes, filesystems and
/// RAID members before partition tables (a FAT boot sector also carries
/// the `55 AA` mark of a DOS partition table).
pub fn probe(size: u64, read: &mut ReadAt<'_>) -> io::Result<Option<Found>> {
    let mut d = Dev { size, read };
    let fs = |name, offset| {
        Ok(Some(Found {
            name,
            kind: Kind::Filesystem,
            offset,
        }))
    };
    if d.has(0, b"XFSB")? {
        return fs("xfs", 0);
    }
    if let Some(sb) = d.get(1024, 1024)? {
        if le16(&sb, 56) == 0xEF53 {
            return fs(ext_name(&sb), 1024 + 56);
        }
        if le32(&sb, 0) == 0xF2F5_2010 {
            return fs("f2fs", 1024);
        }
        if le32(&sb, 0) == 0xE0F5_E1E2 {
            return fs("erofs", 1024);
        }
    }
    if d.has(65536 + 64, b"_BHRfS_M")? {
        return fs("btrfs", 65536 + 64);
    }
    if d.has(0, b"LUKS\xba\xbe")? {
        return fs("crypto_LUKS", 0);
    }
    if d.has(0, b"hsqs")? {
        return fs("squashfs", 0);
    }
    if d.has(32769, b"CD001")? {
        return fs("iso9660", 32769);
    }
    if d.has(32768, b"JFS1")? {
        return fs("jfs", 32768);
    }
    for sector in 0..4u64 {
        let at = sector * 512;
        if d.has(at, b"LABELONE")? && d.has(at + 24, b"LVM2 001")? {
            return fs("LVM2_member", at);
        }
    }
    if let Some(at) = md_superblock(&mut d)? {
        return fs("linux_raid_member", at);
    }
    for page in [4096u64, 8192, 16384, 65536] {
        for magic in [&b"SWAPSPACE2"[..], b"SWAP-SPACE"] {
            if d.has(page - 10, magic)? {
                return fs("swap", page - 10);
            }
        }
    }
    if let Some(boot) = d.get(0, 512)? {
        if &boot[3..11] == b"NTFS    " {
            return fs("ntfs", 3);
        }
        if &boot[3..11] == b"EXFAT   " {
            return fs("exfat", 3);
        }
        if is_fat(&boot) {
            return fs("vfat", 0);
        }
    }
    // GPT's header is in the second logical sector: 512 or 4096 bytes in.
    for at in [512u64, 4096] {
        if d.has(at, b"EFI PART")? {
            return Ok(Some(Found {
                name: "gpt",
                kind: Kind::PartitionTable,
                offset: at,
            }));
        }
    }
    if let Some(boot) = d.get(0, 512)? {
        if is_dos_table(&boot) {
            return Ok(Some(Found {
                name: "dos",
                kind: Kind::PartitionTable,
                offset: 510,
            }));
        }
    }
    Ok(None)
}

/// ext4 when it has extents, flex_bg or 64bit (what mkfs.ext4 sets), ext3
/// when it has a journal, ext2 otherwise: libblkid's rule in short.
fn ext_name(sb: &[u8]) -> &'static str {
    const COMPAT_HAS_JOURNAL: u32 = 0x4;
    const INCOMPAT_EXT4: u32 = 0x40 | 0x80 | 0x200; // extents, 64bit, flex_bg
    let compat = le32(sb, 92);
    let incompat = le32(sb, 96);
    if incompat & INCOMPAT_EXT4 != 0 {
        "ext4"
    } else if compat & COMPAT_HAS_JOURNAL != 0 {
        "ext3"
    } else {
        "ext2"
    }
}

/// Linux MD superblocks: version 0.90 and 1.0 near the end, 1.1 at the
/// start, 1.2 at 4 KiB. Magic 0xa92b4efc, little-endian in 1.x (0.90 is
/// in the host's order; both orders are taken).
fn md_superblock(d: &mut Dev<'_, '_>) -> io::Result<Option<u64>> {
    const MAGIC: u32 = 0xa92b_4efc;
    let mut spots = vec![0u64, 4096];
    if d.size >= 65536 * 2 {
        spots.push((d.size & !65535) - 65536); // 0.90
    }
    if d.size >= 8192 * 2 {
        spots.push((d.size - 8192) & !4095); // 1.0
    }
    for at in spots {
        if let Some(b) = d.get(at, 4)? {
            let v = le32(&b, 0);
            if v == MAGIC || v.swap_bytes() == MAGIC {
                return Ok(Some(at));
            }
        }
    }
    Ok(None)
}

/// A FAT boot sector: the boot mark, a jump instruction, a power-of-two
/// sector size of 512-4096, a power-of-two cluster size, at least one
/// reserved sector and one or two FATs, and the FAT type string where
/// mkfs.vfat writes it.
fn is_fat(b: &[u8]) -> bool {
    if b[510] != 0x55 || b[511] != 0xAA {
        return false;
    }
    if !(b[0] == 0xEB || b[0] == 0xE9) {
        return false;
    }
    let sector = le16(b, 11);
    let per_cluster = b[13];
    let reserved = le16(b, 14);
    let fats = b[16];
    let geometry_ok = sector.is_power_of_two()
        && (512..=4096).contains(&sector)
        && per_cluster.is_power_of_two()
        && reserved >= 1
        && (1..=2).contains(&fats);
    geometry_ok && (b[54..59] == *b"FAT12" || b[54..59] == *b"FAT16" || b[82..87] == *b"FAT32")
}

/// A DOS (MBR) partition table: the boot mark, every entry's boot flag
/// 0x00 or 0x80, and at least one entry in use (a type and a length).
fn is_dos_table(b: &[u8]) -> bool {
    if b[510] != 0x55 || b[511] != 0xAA {
        return false;
    }
    let mut used = 0;
    for i in 0..4 {
        let e = &b[446 + i * 16..446 + (i + 1) * 16];
        if e[0] != 0 && e[0] != 0x80 {
            return false;
        }
        if e[4] != 0 && le32(e, 12) != 0 {
            used += 1;
        }
    }
    used > 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe_bytes(img: &[u8]) -> Option<Found> {
        let mut read = |off: u64, buf: &mut [u8]| {
            let o = off as usize;
            buf.copy_from_slice(&img[o..o + buf.len()]);
            Ok(())
        };
        probe(img.len() as u64, &mut read).unwrap()
    }

    #[test]
    fn zeros_and_small_devices_have_nothing() {
        assert_eq!(probe_bytes(&vec![0u8; 1 << 20]), None);
        assert_eq!(probe_bytes(&[0u8; 100]), None);
        assert_eq!(probe_bytes(&[]), None);
    }

    #[test]
    fn a_lone_boot_mark_is_not_a_table() {
        let mut img = vec![0u8; 1 << 20];
        img[510] = 0x55;
        img[511] = 0xAA;
        assert_eq!(probe_bytes(&img), None);
        img[446 + 4] = 0x83;
        img[446 + 12] = 8;
        assert_eq!(probe_bytes(&img).unwrap().name, "dos");
        img[446] = 0x12; // not a boot flag
        assert_eq!(probe_bytes(&img), None);
    }

    #[test]
    fn md_at_each_of_its_places() {
        let size = 1usize << 20;
        for at in [0usize, 4096, size - 65536, size - 8192] {
            let mut img = vec![0u8; size];
            img[at..at + 4].copy_from_slice(&0xa92b_4efcu32.to_le_bytes());
            let f = probe_bytes(&img).unwrap();
            assert_eq!((f.name, f.offset), ("linux_raid_member", at as u64));
        }
    }

    #[test]
    fn lvm_and_luks() {
        let mut img = vec![0u8; 1 << 20];
        img[512..520].copy_from_slice(b"LABELONE");
        img[536..544].copy_from_slice(b"LVM2 001");
        assert_eq!(probe_bytes(&img).unwrap().name, "LVM2_member");
        let mut img = vec![0u8; 1 << 20];
        img[..6].copy_from_slice(b"LUKS\xba\xbe");
        assert_eq!(
            probe_bytes(&img).unwrap().to_string(),
            "an existing filesystem (crypto_LUKS)"
        );
    }
}
