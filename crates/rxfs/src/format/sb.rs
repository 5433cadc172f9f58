//! The superblock (`XFSB`), sector 0 of every AG.
//!
//! Layout (v5, big-endian; offsets in bytes):
//! ```text
//!   0 magic  4 blocksize  8 dblocks  16 rblocks  24 rextents  32 uuid[16]
//!  48 logstart  56 rootino  64 rbmino  72 rsumino  80 rextsize  84 agblocks
//!  88 agcount  92 rbmblocks  96 logblocks  100 versionnum  102 sectsize
//! 104 inodesize  106 inopblock  108 fname[12]  120 blocklog sectlog inodelog
//! inopblog agblklog rextslog inprogress imax_pct  128 icount  136 ifree
//! 144 fdblocks  152 frextents  160 uquotino  168 gquotino  176 qflags
//! 178 flags  179 shared_vn  180 inoalignmt  184 unit  188 width  192 dirblklog
//! 193 logsectlog  194 logsectsize  196 logsunit  200 features2
//! 204 bad_features2  208 compat  212 ro_compat  216 incompat  220 log_incompat
//! 224 crc (LE)  228 spino_align  232 pquotino  240 lsn  248 meta_uuid  264 end
//! ```
//! The CRC covers the whole sector. Unknown incompat bits refuse the mount by
//! name; unknown ro_compat bits allow only a read-only mount.

use zerocopy::big_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::crc;
use super::Uuid;
use crate::error::{Error, Location, Result};

pub const SB_MAGIC: u32 = 0x5846_5342; // "XFSB"
pub const SB_CRC_OFF: usize = 224;
pub const SB_SIZE: usize = 264;

pub const VERSION_5: u16 = 5;
pub const VERSION_NUMBITS: u16 = 0x000f;
pub const VERSION_MOREBITS: u16 = 0x8000;

pub const FEAT2_LAZYSBCOUNT: u32 = 0x0002;
pub const FEAT2_ATTR2: u32 = 0x0008;
pub const FEAT2_PROJID32: u32 = 0x0080;
pub const FEAT2_CRC: u32 = 0x0100;
pub const FEAT2_FTYPE: u32 = 0x0200;

pub const RO_COMPAT_FINOBT: u32 = 1 << 0;
pub const RO_COMPAT_RMAPBT: u32 = 1 << 1;
pub const RO_COMPAT_REFLINK: u32 = 1 << 2;
pub const RO_COMPAT_INOBTCNT: u32 = 1 << 3;
pub const RO_COMPAT_KNOWN: u32 =
    RO_COMPAT_FINOBT | RO_COMPAT_RMAPBT | RO_COMPAT_REFLINK | RO_COMPAT_INOBTCNT;

pub const INCOMPAT_FTYPE: u32 = 1 << 0;
pub const INCOMPAT_SPINODES: u32 = 1 << 1;
pub const INCOMPAT_META_UUID: u32 = 1 << 2;
pub const INCOMPAT_BIGTIME: u32 = 1 << 3;
pub const INCOMPAT_NEEDSREPAIR: u32 = 1 << 4;
pub const INCOMPAT_NREXT64: u32 = 1 << 5;
pub const INCOMPAT_EXCHRANGE: u32 = 1 << 6;
pub const INCOMPAT_PARENT: u32 = 1 << 7;
pub const INCOMPAT_METADIR: u32 = 1 << 8;
pub const INCOMPAT_ZONED: u32 = 1 << 9;
/// Incompat features rxfs reads.
pub const INCOMPAT_SUPPORTED: u32 = INCOMPAT_FTYPE
    | INCOMPAT_SPINODES
    | INCOMPAT_META_UUID
    | INCOMPAT_BIGTIME
    | INCOMPAT_NREXT64
    | INCOMPAT_EXCHRANGE;

pub const LOG_INCOMPAT_XATTRS: u32 = 1 << 0;

/// Names of the incompat bits, for error messages.
pub fn incompat_names(bits: u32) -> String {
    const NAMES: [&str; 10] = [
        "ftype",
        "sparse_inodes",
        "meta_uuid",
        "bigtime",
        "needsrepair",
        "nrext64",
        "exchange_range",
        "parent_pointers",
        "metadir",
        "zoned",
    ];
    let mut out = Vec::new();
    for (i, n) in NAMES.iter().enumerate() {
        if bits & (1 << i) != 0 {
            out.push(n.to_string());
        }
    }
    for i in NAMES.len()..32 {
        if bits & (1 << i) != 0 {
            out.push(format!("bit{i}"));
        }
    }
    out.join(",")
}

/// On-disk superblock, big-endian.
#[derive(Debug, Clone, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct DSb {
    pub magicnum: U32,
    pub blocksize: U32,
    pub dblocks: U64,
    pub rblocks: U64,
    pub rextents: U64,
    pub uuid: Uuid,
    pub logstart: U64,
    pub rootino: U64,
    pub rbmino: U64,
    pub rsumino: U64,
    pub rextsize: U32,
    pub agblocks: U32,
    pub agcount: U32,
    pub rbmblocks: U32,
    pub logblocks: U32,
    pub versionnum: U16,
    pub sectsize: U16,
    pub inodesize: U16,
    pub inopblock: U16,
    pub fname: [u8; 12],
    pub blocklog: u8,
    pub sectlog: u8,
    pub inodelog: u8,
    pub inopblog: u8,
    pub agblklog: u8,
    pub rextslog: u8,
    pub inprogress: u8,
    pub imax_pct: u8,
    pub icount: U64,
    pub ifree: U64,
    pub fdblocks: U64,
    pub frextents: U64,
    pub uquotino: U64,
    pub gquotino: U64,
    pub qflags: U16,
    pub flags: u8,
    pub shared_vn: u8,
    pub inoalignmt: U32,
    pub unit: U32,
    pub width: U32,
    pub dirblklog: u8,
    pub logsectlog: u8,
    pub logsectsize: U16,
    pub logsunit: U32,
    pub features2: U32,
    pub bad_features2: U32,
    pub features_compat: U32,
    pub features_ro_compat: U32,
    pub features_incompat: U32,
    pub features_log_incompat: U32,
    pub crc: [u8; 4],
    pub spino_align: U32,
    pub pquotino: U64,
    pub lsn: U64,
    pub meta_uuid: Uuid,
}

const _: () = assert!(std::mem::size_of::<DSb>() == SB_SIZE);

/// Decoded superblock (host types).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Superblock {
    pub blocksize: u32,
    pub dblocks: u64,
    pub rblocks: u64,
    pub rextents: u64,
    pub uuid: Uuid,
    pub logstart: u64,
    pub rootino: u64,
    pub rbmino: u64,
    pub rsumino: u64,
    pub rextsize: u32,
    pub agblocks: u32,
    pub agcount: u32,
    pub rbmblocks: u32,
    pub logblocks: u32,
    pub versionnum: u16,
    pub sectsize: u16,
    pub inodesize: u16,
    pub inopblock: u16,
    pub fname: [u8; 12],
    pub blocklog: u8,
    pub sectlog: u8,
    pub inodelog: u8,
    pub inopblog: u8,
    pub agblklog: u8,
    pub rextslog: u8,
    pub inprogress: u8,
    pub imax_pct: u8,
    pub icount: u64,
    pub ifree: u64,
    pub fdblocks: u64,
    pub frextents: u64,
    pub uquotino: u64,
    pub gquotino: u64,
    pub qflags: u16,
    pub flags: u8,
    pub inoalignmt: u32,
    pub unit: u32,
    pub width: u32,
    pub dirblklog: u8,
    pub logsectlog: u8,
    pub logsectsize: u16,
    pub logsunit: u32,
    pub features2: u32,
    pub bad_features2: u32,
    pub features_compat: u32,
    pub features_ro_compat: u32,
    pub features_incompat: u32,
    pub features_log_incompat: u32,
    pub spino_align: u32,
    pub pquotino: u64,
    pub lsn: u64,
    pub meta_uuid: Uuid,
}

impl Superblock {
    /// Decode without verifying (for tools that show a damaged superblock).
    pub fn decode_unverified(buf: &[u8]) -> Result<Self> {
        let (d, _) = DSb::ref_from_prefix(buf).map_err(|_| {
            Error::corrupt("superblock", Location::Daddr(0), "short superblock buffer")
        })?;
        Ok(Superblock {
            blocksize: d.blocksize.get(),
            dblocks: d.dblocks.get(),
            rblocks: d.rblocks.get(),
            rextents: d.rextents.get(),
            uuid: d.uuid,
            logstart: d.logstart.get(),
            rootino: d.rootino.get(),
            rbmino: d.rbmino.get(),
            rsumino: d.rsumino.get(),
            rextsize: d.rextsize.get(),
            agblocks: d.agblocks.get(),
            agcount: d.agcount.get(),
            rbmblocks: d.rbmblocks.get(),
            logblocks: d.logblocks.get(),
            versionnum: d.versionnum.get(),
            sectsize: d.sectsize.get(),
            inodesize: d.inodesize.get(),
            inopblock: d.inopblock.get(),
            fname: d.fname,
            blocklog: d.blocklog,
            sectlog: d.sectlog,
            inodelog: d.inodelog,
            inopblog: d.inopblog,
            agblklog: d.agblklog,
            rextslog: d.rextslog,
            inprogress: d.inprogress,
            imax_pct: d.imax_pct,
            icount: d.icount.get(),
            ifree: d.ifree.get(),
            fdblocks: d.fdblocks.get(),
            frextents: d.frextents.get(),
            uquotino: d.uquotino.get(),
            gquotino: d.gquotino.get(),
            qflags: d.qflags.get(),
            flags: d.flags,
            inoalignmt: d.inoalignmt.get(),
            unit: d.unit.get(),
            width: d.width.get(),
            dirblklog: d.dirblklog,
            logsectlog: d.logsectlog,
            logsectsize: d.logsectsize.get(),
            logsunit: d.logsunit.get(),
            features2: d.features2.get(),
            bad_features2: d.bad_features2.get(),
            features_compat: d.features_compat.get(),
            features_ro_compat: d.features_ro_compat.get(),
            features_incompat: d.features_incompat.get(),
            features_log_incompat: d.features_log_incompat.get(),
            spino_align: d.spino_align.get(),
            pquotino: d.pquotino.get(),
            lsn: d.lsn.get(),
            meta_uuid: d.meta_uuid,
        })
    }

    /// Decode and verify a superblock sector read from `daddr`.
    ///
    /// Checks magic, version 5, CRC over `sectsize` bytes and the geometry
    /// invariants every other decoder relies on (power-of-two sizes that
    /// agree with their logs, AG geometry that fits the device size).
    pub fn decode(buf: &[u8], daddr: u64) -> Result<Self> {
        let at = Location::Daddr(daddr);
        let bad = |d: String| Error::corrupt("superblock", at, d);
        let sb = Self::decode_unverified(buf)?;
        let magic = u32::from_be_bytes(buf[0..4].try_into().unwrap());
        if magic != SB_MAGIC {
            return Err(bad(format!("bad magic {magic:#x}")));
        }
        let version = sb.versionnum & VERSION_NUMBITS;
        // Versions 1-4 are older XFS formats (never with the CRC feature
        // bit); anything else is a damaged version number.
        let crc_bit = sb.versionnum & VERSION_MOREBITS != 0 && sb.features2 & FEAT2_CRC != 0;
        if version != VERSION_5 && (version == 0 || version > VERSION_5 || crc_bit) {
            return Err(bad(format!(
                "bad version number {:#x} (features2 {:#x})",
                sb.versionnum, sb.features2
            )));
        }
        if version != VERSION_5 {
            return Err(Error::NotSupported(format!(
                "superblock version {version}: rxfs reads only v5 (crc=1) filesystems"
            )));
        }
        let ss = sb.sectsize as usize;
        if !(512..=32768).contains(&ss) || !ss.is_power_of_two() || 1usize << sb.sectlog != ss {
            return Err(bad(format!("bad sector size {ss} / log {}", sb.sectlog)));
        }
        if buf.len() < ss {
            return Err(bad(format!(
                "buffer of {} bytes < sector size {ss}",
                buf.len()
            )));
        }
        if !crc::verify(&buf[..ss], SB_CRC_OFF) {
            return Err(bad("CRC mismatch".into()));
        }
        sb.check_geometry().map_err(bad)?;
        Ok(sb)
    }

    fn check_geometry(&self) -> std::result::Result<(), String> {
        let bs = self.blocksize;
        if !(512..=65536).contains(&bs) || !bs.is_power_of_two() || 1u32 << self.blocklog != bs {
            return Err(format!("bad block size {bs} / log {}", self.blocklog));
        }
        if (self.sectsize as u32) > bs {
            return Err("sector size larger than block size".into());
        }
        let is = self.inodesize as u32;
        if !(256..=2048).contains(&is) || !is.is_power_of_two() || 1u32 << self.inodelog != is {
            return Err(format!("bad inode size {is} / log {}", self.inodelog));
        }
        if is < 512 {
            // v5 inodes are at least 512 bytes.
            return Err(format!("inode size {is} < 512 on a v5 filesystem"));
        }
        if self.inopblock as u32 != bs / is || 1u32 << self.inopblog != self.inopblock as u32 {
            return Err(format!(
                "inopblock {} / log {} disagree with block/inode size",
                self.inopblock, self.inopblog
            ));
        }
        if self.agcount == 0 || self.agblocks < 64 {
            return Err(format!(
                "bad AG geometry: {} AGs of {} blocks",
                self.agcount, self.agblocks
            ));
        }
        if self.agblklog > 31
            || (1u64 << self.agblklog) < self.agblocks as u64
            || (self.agblocks as u64) <= (1u64 << self.agblklog) / 2
        {
            return Err(format!(
                "agblklog {} does not match agblocks {}",
                self.agblklog, self.agblocks
            ));
        }
        let max = self.agcount as u64 * self.agblocks as u64;
        let min = (self.agcount as u64 - 1) * self.agblocks as u64;
        if self.dblocks > max || self.dblocks <= min {
            return Err(format!(
                "dblocks {} inconsistent with {} AGs of {} blocks",
                self.dblocks, self.agcount, self.agblocks
            ));
        }
        if self.dirblklog as u32 + self.blocklog as u32 > 16 {
            return Err(format!("directory block log {} too large", self.dirblklog));
        }
        if self.logblocks == 0 {
            return Err("external logs are not supported (logblocks 0)".into());
        }
        if self.logstart != 0 && self.logstart + self.logblocks as u64 > self.dblocks.max(1) * 2 {
            // Checked more precisely by the geometry once AG layout is known.
        }
        if self.rextsize == 0 {
            return Err("rextsize 0".into());
        }
        Ok(())
    }

    pub fn version(&self) -> u16 {
        self.versionnum & VERSION_NUMBITS
    }
    pub fn has_ro_compat(&self, bit: u32) -> bool {
        self.features_ro_compat & bit != 0
    }
    pub fn has_incompat(&self, bit: u32) -> bool {
        self.features_incompat & bit != 0
    }
    pub fn has_ftype(&self) -> bool {
        self.has_incompat(INCOMPAT_FTYPE)
    }
    pub fn has_bigtime(&self) -> bool {
        self.has_incompat(INCOMPAT_BIGTIME)
    }
    pub fn has_nrext64(&self) -> bool {
        self.has_incompat(INCOMPAT_NREXT64)
    }
    pub fn has_sparse_inodes(&self) -> bool {
        self.has_incompat(INCOMPAT_SPINODES)
    }
    pub fn has_finobt(&self) -> bool {
        self.has_ro_compat(RO_COMPAT_FINOBT)
    }
    pub fn has_rmapbt(&self) -> bool {
        self.has_ro_compat(RO_COMPAT_RMAPBT)
    }
    pub fn has_reflink(&self) -> bool {
        self.has_ro_compat(RO_COMPAT_REFLINK)
    }
    pub fn has_inobtcount(&self) -> bool {
        self.has_ro_compat(RO_COMPAT_INOBTCNT)
    }
    pub fn has_meta_uuid(&self) -> bool {
        self.has_incompat(INCOMPAT_META_UUID)
    }
    pub fn has_lazysbcount(&self) -> bool {
        self.features2 & FEAT2_LAZYSBCOUNT != 0
    }
    pub fn has_projid32(&self) -> bool {
        self.features2 & FEAT2_PROJID32 != 0
    }
    /// The UUID stamped into metadata blocks (meta_uuid when set).
    pub fn metadata_uuid(&self) -> Uuid {
        if self.has_meta_uuid() {
            self.meta_uuid
        } else {
            self.uuid
        }
    }
    /// Incompat bits rxfs cannot handle at all.
    pub fn unknown_incompat(&self) -> u32 {
        self.features_incompat & !INCOMPAT_SUPPORTED
    }
    /// Ro-compat bits rxfs does not know: such a filesystem mounts read-only.
    pub fn unknown_ro_compat(&self) -> u32 {
        self.features_ro_compat & !RO_COMPAT_KNOWN
    }
    /// The label as a string (NUL-trimmed).
    pub fn label(&self) -> String {
        let end = self.fname.iter().position(|&c| c == 0).unwrap_or(12);
        String::from_utf8_lossy(&self.fname[..end]).into_owned()
    }

    /// Encode into `buf` (at least `sectsize` bytes) and stamp the CRC.
    pub fn encode(&self, buf: &mut [u8]) {
        let d = DSb {
            magicnum: SB_MAGIC.into(),
            blocksize: self.blocksize.into(),
            dblocks: self.dblocks.into(),
            rblocks: self.rblocks.into(),
            rextents: self.rextents.into(),
            uuid: self.uuid,
            logstart: self.logstart.into(),
            rootino: self.rootino.into(),
            rbmino: self.rbmino.into(),
            rsumino: self.rsumino.into(),
            rextsize: self.rextsize.into(),
            agblocks: self.agblocks.into(),
            agcount: self.agcount.into(),
            rbmblocks: self.rbmblocks.into(),
            logblocks: self.logblocks.into(),
            versionnum: self.versionnum.into(),
            sectsize: self.sectsize.into(),
            inodesize: self.inodesize.into(),
            inopblock: self.inopblock.into(),
            fname: self.fname,
            blocklog: self.blocklog,
            sectlog: self.sectlog,
            inodelog: self.inodelog,
            inopblog: self.inopblog,
            agblklog: self.agblklog,
            rextslog: self.rextslog,
            inprogress: self.inprogress,
            imax_pct: self.imax_pct,
            icount: self.icount.into(),
            ifree: self.ifree.into(),
            fdblocks: self.fdblocks.into(),
            frextents: self.frextents.into(),
            uquotino: self.uquotino.into(),
            gquotino: self.gquotino.into(),
            qflags: self.qflags.into(),
            flags: self.flags,
            shared_vn: 0,
            inoalignmt: self.inoalignmt.into(),
            unit: self.unit.into(),
            width: self.width.into(),
            dirblklog: self.dirblklog,
            logsectlog: self.logsectlog,
            logsectsize: self.logsectsize.into(),
            logsunit: self.logsunit.into(),
            features2: self.features2.into(),
            bad_features2: self.bad_features2.into(),
            features_compat: self.features_compat.into(),
            features_ro_compat: self.features_ro_compat.into(),
            features_incompat: self.features_incompat.into(),
            features_log_incompat: self.features_log_incompat.into(),
            crc: [0; 4],
            spino_align: self.spino_align.into(),
            pquotino: self.pquotino.into(),
            lsn: self.lsn.into(),
            meta_uuid: self.meta_uuid,
        };
        buf[..SB_SIZE].copy_from_slice(d.as_bytes());
        let ss = self.sectsize as usize;
        crc::update(&mut buf[..ss], SB_CRC_OFF);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{put_be16, put_be32, put_be64};

    /// A minimal valid v5 superblock sector: 1 AG of 64 1 KiB blocks.
    fn sector() -> Vec<u8> {
        let mut s = vec![0u8; 512];
        s[0..4].copy_from_slice(b"XFSB");
        put_be32(&mut s, 4, 1024);
        put_be64(&mut s, 8, 64);
        put_be64(&mut s, 48, 48);
        put_be32(&mut s, 80, 1);
        put_be32(&mut s, 84, 64);
        put_be32(&mut s, 88, 1);
        put_be32(&mut s, 96, 8);
        put_be16(&mut s, 100, 0xb4a5);
        put_be16(&mut s, 102, 512);
        put_be16(&mut s, 104, 512);
        put_be16(&mut s, 106, 2);
        s[120..125].copy_from_slice(&[10, 9, 9, 1, 6]);
        put_be32(&mut s, 200, 0x18a);
        crc::update(&mut s, SB_CRC_OFF);
        s
    }

    #[test]
    fn version_numbers() {
        assert!(Superblock::decode(&sector(), 0).is_ok());
        // A damaged version number is corruption, even with a stale CRC;
        // an older format (no CRC feature bit) is "not supported".
        for (vn, f2, corrupt) in [
            (0xb4a8u16, 0x18au32, true),
            (0xb4a0, 0x18a, true),
            (0xb4a4, 0x18a, true),
            (0xb4a1, 0x18a, true),
            (0xb4a4, 0x08a, false),
            (0x0004, 0x000, false),
        ] {
            let mut s = sector();
            put_be16(&mut s, 100, vn);
            put_be32(&mut s, 200, f2);
            let e = Superblock::decode(&s, 0).unwrap_err();
            assert_eq!(e.is_corrupt(), corrupt, "{vn:#x} {f2:#x}: {e}");
            if !corrupt {
                assert!(matches!(e, Error::NotSupported(_)), "{e}");
            }
        }
    }
}
