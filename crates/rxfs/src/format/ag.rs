//! Allocation group headers: AGF (`XAGF`, free space), AGI (`XAGI`, inodes)
//! and AGFL (`XAFL`, the free list). They live in sectors 1, 2 and 3 of
//! every AG (sector 0 is the superblock copy); each is one sector long and
//! its CRC covers the whole sector.
//!
//! AGF (224 bytes used, big-endian):
//! ```text
//!   0 magic "XAGF"   4 versionnum (1)   8 seqno (= agno)   12 length
//!  16 roots[3]: bnobt, cntbt, rmapbt     28 levels[3] (same order)
//!  40 flfirst   44 fllast   48 flcount   52 freeblks   56 longest
//!  60 btreeblks (non-root blocks of bnobt + cntbt + rmapbt)
//!  64 uuid[16]  80 rmap_blocks   84 refcount_blocks   88 refcount_root
//!  92 refcount_level   96 spare64[14]   208 lsn   216 crc (LE)   220 spare2
//! ```
//! AGI (344 bytes used):
//! ```text
//!   0 magic "XAGI"   4 versionnum (1)   8 seqno   12 length   16 count
//!  20 root   24 level   28 freecount   32 newino   36 dirino
//!  40 unlinked[64] (AG inode numbers, NULLAGINO = empty bucket)
//! 296 uuid[16]  312 crc (LE)  316 pad  320 lsn  328 free_root  332 free_level
//! 336 iblocks   340 fblocks   (inobt / finobt block counts, inobtcount)
//! ```
//! AGFL: `0 magic "XAFL"  4 seqno  8 uuid[16]  24 lsn  32 crc (LE)`, then
//! `(sectsize - 36) / 4` slots of AG block numbers from byte 36. The live
//! part of the list is circular: `flcount` slots starting at `flfirst`,
//! ending at `fllast` (wrapping at the slot count).
//!
//! Invariants the verifiers enforce (a header that breaks one is
//! [`Error::Corrupt`]): magic, version, CRC, UUID, `seqno == agno`,
//! `length` equals the AG's size in the geometry, btree roots point past
//! the AG headers and inside the AG, levels are in `1..=maxlevels` for every
//! tree the features enable, counters are not larger than the AG, the free
//! list indexes are inside the slot array, unlinked buckets hold
//! NULLAGINO or an inode number of this AG.
//!
//! One state is *not* a verifier failure: an AGF whose `flcount` disagrees
//! with the `flfirst..=fllast` range. Old kernels laid out the AGFL with a
//! different slot count; the kernel accepts such an AGF, flags it "needs
//! reset" and rebuilds the list before its next allocation. [`Agf::agfl_needs_reset`]
//! reports it, and [`Agf::agfl_active`] refuses to interpret such a list.

use zerocopy::big_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::{crc, Uuid};
use crate::error::{Error, Location, Result};
use crate::types::{AgBlock, AgNumber, Daddr};

pub const AGF_MAGIC: u32 = 0x5841_4746; // "XAGF"
pub const AGI_MAGIC: u32 = 0x5841_4749; // "XAGI"
pub const AGFL_MAGIC: u32 = 0x5841_464c; // "XAFL"
pub const AG_VERSION: u32 = 1;

pub const AGF_CRC_OFF: usize = 216;
pub const AGI_CRC_OFF: usize = 312;
pub const AGFL_CRC_OFF: usize = 32;
pub const AGF_SIZE: usize = 224;
pub const AGI_SIZE: usize = 344;
/// Size of the AGFL header; the slots follow it.
pub const AGFL_HDR_SIZE: usize = 36;

/// Number of unlinked-inode hash buckets in the AGI.
pub const AGI_UNLINKED_BUCKETS: usize = 64;

/// "No block" in AG-relative block pointers (sibling pointers, AGFL slots).
pub const NULL_AGBLOCK: u32 = u32::MAX;
/// "No inode" in AG-relative inode numbers (unlinked buckets, newino).
pub const NULL_AGINO: u32 = u32::MAX;

/// Sector index of each header inside the AG.
pub const AGF_SECTOR: u32 = 1;
pub const AGI_SECTOR: u32 = 2;
pub const AGFL_SECTOR: u32 = 3;

/// On-disk AGF.
#[derive(Debug, Clone, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct DAgf {
    pub magicnum: U32,
    pub versionnum: U32,
    pub seqno: U32,
    pub length: U32,
    pub roots: [U32; 3],
    pub levels: [U32; 3],
    pub flfirst: U32,
    pub fllast: U32,
    pub flcount: U32,
    pub freeblks: U32,
    pub longest: U32,
    pub btreeblks: U32,
    pub uuid: Uuid,
    pub rmap_blocks: U32,
    pub refcount_blocks: U32,
    pub refcount_root: U32,
    pub refcount_level: U32,
    pub spare64: [U64; 14],
    pub lsn: U64,
    pub crc: [u8; 4],
    pub spare2: U32,
}
const _: () = assert!(std::mem::size_of::<DAgf>() == AGF_SIZE);
const _: () = assert!(std::mem::offset_of!(DAgf, crc) == AGF_CRC_OFF);
const _: () = assert!(std::mem::offset_of!(DAgf, lsn) == 208);
const _: () = assert!(std::mem::offset_of!(DAgf, rmap_blocks) == 80);

/// On-disk AGI.
#[derive(Debug, Clone, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct DAgi {
    pub magicnum: U32,
    pub versionnum: U32,
    pub seqno: U32,
    pub length: U32,
    pub count: U32,
    pub root: U32,
    pub level: U32,
    pub freecount: U32,
    pub newino: U32,
    pub dirino: U32,
    pub unlinked: [U32; AGI_UNLINKED_BUCKETS],
    pub uuid: Uuid,
    pub crc: [u8; 4],
    pub pad32: U32,
    pub lsn: U64,
    pub free_root: U32,
    pub free_level: U32,
    pub iblocks: U32,
    pub fblocks: U32,
}
const _: () = assert!(std::mem::size_of::<DAgi>() == AGI_SIZE);
const _: () = assert!(std::mem::offset_of!(DAgi, crc) == AGI_CRC_OFF);
const _: () = assert!(std::mem::offset_of!(DAgi, lsn) == 320);
const _: () = assert!(std::mem::offset_of!(DAgi, uuid) == 296);

/// On-disk AGFL header (the slots follow at [`AGFL_HDR_SIZE`]).
#[derive(Debug, Clone, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct DAgflHdr {
    pub magicnum: U32,
    pub seqno: U32,
    pub uuid: Uuid,
    pub lsn: U64,
    pub crc: [u8; 4],
}
const _: () = assert!(std::mem::size_of::<DAgflHdr>() == AGFL_HDR_SIZE);
const _: () = assert!(std::mem::offset_of!(DAgflHdr, crc) == AGFL_CRC_OFF);

/// What a header is checked against: the geometry and features of the
/// filesystem it belongs to, and the AG it was read for.
#[derive(Debug, Clone)]
pub struct AgCheck {
    pub agno: AgNumber,
    /// Blocks in this AG (the last AG may be short).
    pub ag_len: u32,
    /// `sb_agblocks` (AGFL slots are bounded by it, as the kernel does).
    pub agblocks: u32,
    pub sectsize: u32,
    pub blocklog: u8,
    pub inopblog: u8,
    pub uuid: Uuid,
    pub has_rmapbt: bool,
    pub has_reflink: bool,
    pub has_finobt: bool,
    pub has_inobtcount: bool,
    /// Maximum levels of each tree for this geometry.
    pub maxlevels_alloc: u32,
    pub maxlevels_inobt: u32,
    pub maxlevels_rmap: u32,
    pub maxlevels_refc: u32,
}

impl AgCheck {
    /// Slots in the AGFL.
    pub fn agfl_size(&self) -> u32 {
        agfl_size(self.sectsize)
    }

    /// The first AG block that is not an AG header: btree roots and AGFL
    /// blocks start here.
    pub fn first_usable_agbno(&self) -> u32 {
        first_usable_agbno(self.sectsize, self.blocklog)
    }

    /// Whether `agbno` may hold a btree or free-list block.
    pub fn agbno_ok(&self, agbno: u32) -> bool {
        agbno >= self.first_usable_agbno() && agbno < self.ag_len
    }

    /// Whether `agino` addresses an inode slot this AG could hold.
    pub fn agino_ok(&self, agino: u32) -> bool {
        self.agbno_ok(agino >> self.inopblog)
    }

    fn at(&self, sector: u32) -> Location {
        Location::Daddr(self.header_daddr(sector).0)
    }

    /// Disk address of header sector `sector` of this AG.
    pub fn header_daddr(&self, sector: u32) -> Daddr {
        let ag_start_bb = (self.agno.0 as u64 * self.agblocks as u64) << (self.blocklog - 9);
        Daddr(ag_start_bb + ((sector as u64 * self.sectsize as u64) >> 9))
    }
}

/// Slots in an AGFL sector of `sectsize` bytes.
pub fn agfl_size(sectsize: u32) -> u32 {
    (sectsize - AGFL_HDR_SIZE as u32) / 4
}

/// First AG block after the four header sectors.
pub fn first_usable_agbno(sectsize: u32, blocklog: u8) -> u32 {
    ((AGFL_SECTOR as u64 * sectsize as u64) >> blocklog) as u32 + 1
}

fn check_level(what: &'static str, at: Location, name: &str, level: u32, max: u32) -> Result<()> {
    if level == 0 || level > max {
        return Err(Error::corrupt(
            what,
            at,
            format!("{name} level {level} outside 1..={max}"),
        ));
    }
    Ok(())
}

fn check_root(what: &'static str, at: Location, c: &AgCheck, name: &str, root: u32) -> Result<()> {
    if !c.agbno_ok(root) {
        return Err(Error::corrupt(
            what,
            at,
            format!(
                "{name} root {root} outside {}..{}",
                c.first_usable_agbno(),
                c.ag_len
            ),
        ));
    }
    Ok(())
}

fn check_common(
    what: &'static str,
    buf: &[u8],
    c: &AgCheck,
    sector: u32,
    magic: u32,
    crc_off: usize,
) -> Result<()> {
    let at = c.at(sector);
    let ss = c.sectsize as usize;
    if buf.len() < ss {
        return Err(Error::corrupt(
            what,
            at,
            format!("buffer of {} bytes < sector {ss}", buf.len()),
        ));
    }
    let m = super::be32(buf, 0);
    if m != magic {
        return Err(Error::corrupt(
            what,
            at,
            format!("bad magic {m:#x}, expected {magic:#x}"),
        ));
    }
    if !crc::verify(&buf[..ss], crc_off) {
        return Err(Error::corrupt(what, at, "CRC mismatch"));
    }
    Ok(())
}

/// Decoded AGF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agf {
    pub seqno: u32,
    pub length: u32,
    pub bno_root: u32,
    pub cnt_root: u32,
    pub rmap_root: u32,
    pub bno_level: u32,
    pub cnt_level: u32,
    pub rmap_level: u32,
    pub flfirst: u32,
    pub fllast: u32,
    pub flcount: u32,
    pub freeblks: u32,
    pub longest: u32,
    pub btreeblks: u32,
    pub uuid: Uuid,
    pub rmap_blocks: u32,
    pub refcount_blocks: u32,
    pub refcount_root: u32,
    pub refcount_level: u32,
    pub lsn: u64,
    /// Slots in the AGFL this AGF indexes (from the sector size).
    pub agfl_size: u32,
}

impl Agf {
    /// Decode and verify an AGF sector read for AG `c.agno`.
    pub fn decode(buf: &[u8], c: &AgCheck) -> Result<Self> {
        const WHAT: &str = "AGF";
        check_common(WHAT, buf, c, AGF_SECTOR, AGF_MAGIC, AGF_CRC_OFF)?;
        let at = c.at(AGF_SECTOR);
        let bad = |d: String| Err(Error::corrupt(WHAT, at, d));
        let (d, _) = DAgf::ref_from_prefix(buf).expect("length checked");
        let agf = Agf {
            seqno: d.seqno.get(),
            length: d.length.get(),
            bno_root: d.roots[0].get(),
            cnt_root: d.roots[1].get(),
            rmap_root: d.roots[2].get(),
            bno_level: d.levels[0].get(),
            cnt_level: d.levels[1].get(),
            rmap_level: d.levels[2].get(),
            flfirst: d.flfirst.get(),
            fllast: d.fllast.get(),
            flcount: d.flcount.get(),
            freeblks: d.freeblks.get(),
            longest: d.longest.get(),
            btreeblks: d.btreeblks.get(),
            uuid: d.uuid,
            rmap_blocks: d.rmap_blocks.get(),
            refcount_blocks: d.refcount_blocks.get(),
            refcount_root: d.refcount_root.get(),
            refcount_level: d.refcount_level.get(),
            lsn: d.lsn.get(),
            agfl_size: c.agfl_size(),
        };
        if d.versionnum.get() != AG_VERSION {
            return bad(format!("version {}", d.versionnum.get()));
        }
        if agf.uuid != c.uuid {
            return bad("UUID does not match the filesystem".into());
        }
        if agf.seqno != c.agno.0 {
            return bad(format!("seqno {} in AG {}", agf.seqno, c.agno));
        }
        if agf.length != c.ag_len {
            return bad(format!(
                "length {} but the AG has {} blocks",
                agf.length, c.ag_len
            ));
        }
        check_level(WHAT, at, "bnobt", agf.bno_level, c.maxlevels_alloc)?;
        check_level(WHAT, at, "cntbt", agf.cnt_level, c.maxlevels_alloc)?;
        check_root(WHAT, at, c, "bnobt", agf.bno_root)?;
        check_root(WHAT, at, c, "cntbt", agf.cnt_root)?;
        if c.has_rmapbt {
            check_level(WHAT, at, "rmapbt", agf.rmap_level, c.maxlevels_rmap)?;
            check_root(WHAT, at, c, "rmapbt", agf.rmap_root)?;
            if agf.rmap_blocks == 0 || agf.rmap_blocks > agf.length {
                return bad(format!("rmap_blocks {}", agf.rmap_blocks));
            }
        }
        if c.has_reflink {
            check_level(WHAT, at, "refcountbt", agf.refcount_level, c.maxlevels_refc)?;
            check_root(WHAT, at, c, "refcountbt", agf.refcount_root)?;
            if agf.refcount_blocks == 0 || agf.refcount_blocks > agf.length {
                return bad(format!("refcount_blocks {}", agf.refcount_blocks));
            }
        }
        let n = agf.agfl_size;
        if agf.flfirst >= n || agf.fllast >= n || agf.flcount > n {
            return bad(format!(
                "free list first {} last {} count {} with {n} AGFL slots",
                agf.flfirst, agf.fllast, agf.flcount
            ));
        }
        if agf.freeblks > agf.length || agf.longest > agf.freeblks {
            return bad(format!(
                "freeblks {} longest {} in an AG of {}",
                agf.freeblks, agf.longest, agf.length
            ));
        }
        if agf.btreeblks > agf.length {
            return bad(format!("btreeblks {}", agf.btreeblks));
        }
        Ok(agf)
    }

    /// Whether `flcount` disagrees with the `flfirst..=fllast` circular
    /// range (the kernel then rebuilds the free list before using it).
    pub fn agfl_needs_reset(&self) -> bool {
        let (f, l, c, n) = (self.flfirst, self.fllast, self.flcount, self.agfl_size);
        let active = if c == 0 {
            0
        } else if l >= f {
            l - f + 1
        } else {
            n - f + l + 1
        };
        active != c
    }

    /// Indexes of the live AGFL slots, in list order (first is the next
    /// block handed out).
    pub fn agfl_active(&self) -> Result<Vec<u32>> {
        if self.agfl_needs_reset() {
            return Err(Error::corrupt(
                "AGF",
                Location::Unknown,
                format!(
                    "free list first {} last {} count {} inconsistent with {} slots",
                    self.flfirst, self.fllast, self.flcount, self.agfl_size
                ),
            ));
        }
        Ok((0..self.flcount)
            .map(|i| (self.flfirst + i) % self.agfl_size)
            .collect())
    }

    /// Encode into a sector buffer (at least `sectsize` bytes, zeroed by the
    /// caller beyond the structure) and stamp the CRC.
    pub fn encode(&self, buf: &mut [u8], sectsize: usize) {
        let d = DAgf {
            magicnum: AGF_MAGIC.into(),
            versionnum: AG_VERSION.into(),
            seqno: self.seqno.into(),
            length: self.length.into(),
            roots: [
                self.bno_root.into(),
                self.cnt_root.into(),
                self.rmap_root.into(),
            ],
            levels: [
                self.bno_level.into(),
                self.cnt_level.into(),
                self.rmap_level.into(),
            ],
            flfirst: self.flfirst.into(),
            fllast: self.fllast.into(),
            flcount: self.flcount.into(),
            freeblks: self.freeblks.into(),
            longest: self.longest.into(),
            btreeblks: self.btreeblks.into(),
            uuid: self.uuid,
            rmap_blocks: self.rmap_blocks.into(),
            refcount_blocks: self.refcount_blocks.into(),
            refcount_root: self.refcount_root.into(),
            refcount_level: self.refcount_level.into(),
            spare64: [0u64.into(); 14],
            lsn: self.lsn.into(),
            crc: [0; 4],
            spare2: 0.into(),
        };
        buf[..AGF_SIZE].copy_from_slice(d.as_bytes());
        crc::update(&mut buf[..sectsize], AGF_CRC_OFF);
    }
}

/// Decoded AGI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agi {
    pub seqno: u32,
    pub length: u32,
    /// Allocated inodes (all slots of all inode chunks, free or in use).
    pub count: u32,
    pub root: u32,
    pub level: u32,
    pub freecount: u32,
    pub newino: u32,
    pub dirino: u32,
    pub unlinked: [u32; AGI_UNLINKED_BUCKETS],
    pub uuid: Uuid,
    pub lsn: u64,
    pub free_root: u32,
    pub free_level: u32,
    /// inobt / finobt block counts (meaningful with inobtcount).
    pub iblocks: u32,
    pub fblocks: u32,
}

impl Agi {
    /// Decode and verify an AGI sector read for AG `c.agno`.
    pub fn decode(buf: &[u8], c: &AgCheck) -> Result<Self> {
        const WHAT: &str = "AGI";
        check_common(WHAT, buf, c, AGI_SECTOR, AGI_MAGIC, AGI_CRC_OFF)?;
        let at = c.at(AGI_SECTOR);
        let bad = |d: String| Err(Error::corrupt(WHAT, at, d));
        let (d, _) = DAgi::ref_from_prefix(buf).expect("length checked");
        let mut unlinked = [0u32; AGI_UNLINKED_BUCKETS];
        for (u, v) in unlinked.iter_mut().zip(d.unlinked.iter()) {
            *u = v.get();
        }
        let agi = Agi {
            seqno: d.seqno.get(),
            length: d.length.get(),
            count: d.count.get(),
            root: d.root.get(),
            level: d.level.get(),
            freecount: d.freecount.get(),
            newino: d.newino.get(),
            dirino: d.dirino.get(),
            unlinked,
            uuid: d.uuid,
            lsn: d.lsn.get(),
            free_root: d.free_root.get(),
            free_level: d.free_level.get(),
            iblocks: d.iblocks.get(),
            fblocks: d.fblocks.get(),
        };
        if d.versionnum.get() != AG_VERSION {
            return bad(format!("version {}", d.versionnum.get()));
        }
        if agi.uuid != c.uuid {
            return bad("UUID does not match the filesystem".into());
        }
        if agi.seqno != c.agno.0 {
            return bad(format!("seqno {} in AG {}", agi.seqno, c.agno));
        }
        if agi.length != c.ag_len {
            return bad(format!(
                "length {} but the AG has {} blocks",
                agi.length, c.ag_len
            ));
        }
        check_level(WHAT, at, "inobt", agi.level, c.maxlevels_inobt)?;
        check_root(WHAT, at, c, "inobt", agi.root)?;
        if c.has_finobt {
            check_level(WHAT, at, "finobt", agi.free_level, c.maxlevels_inobt)?;
            check_root(WHAT, at, c, "finobt", agi.free_root)?;
        }
        let max_inodes = (agi.length as u64) << c.inopblog;
        if agi.count as u64 > max_inodes || agi.freecount > agi.count {
            return bad(format!(
                "count {} freecount {} (AG holds at most {max_inodes} inodes)",
                agi.count, agi.freecount
            ));
        }
        if c.has_inobtcount {
            if agi.iblocks == 0 || agi.iblocks > agi.length {
                return bad(format!("iblocks {}", agi.iblocks));
            }
            if c.has_finobt && (agi.fblocks == 0 || agi.fblocks > agi.length) {
                return bad(format!("fblocks {}", agi.fblocks));
            }
        }
        for (i, &u) in agi.unlinked.iter().enumerate() {
            if u != NULL_AGINO && !c.agino_ok(u) {
                return bad(format!("unlinked bucket {i} holds bad inode {u:#x}"));
            }
        }
        Ok(agi)
    }

    /// Encode into a sector buffer and stamp the CRC.
    pub fn encode(&self, buf: &mut [u8], sectsize: usize) {
        let mut unlinked = [U32::new(0); AGI_UNLINKED_BUCKETS];
        for (d, &u) in unlinked.iter_mut().zip(self.unlinked.iter()) {
            *d = u.into();
        }
        let d = DAgi {
            magicnum: AGI_MAGIC.into(),
            versionnum: AG_VERSION.into(),
            seqno: self.seqno.into(),
            length: self.length.into(),
            count: self.count.into(),
            root: self.root.into(),
            level: self.level.into(),
            freecount: self.freecount.into(),
            newino: self.newino.into(),
            dirino: self.dirino.into(),
            unlinked,
            uuid: self.uuid,
            crc: [0; 4],
            pad32: 0.into(),
            lsn: self.lsn.into(),
            free_root: self.free_root.into(),
            free_level: self.free_level.into(),
            iblocks: self.iblocks.into(),
            fblocks: self.fblocks.into(),
        };
        buf[..AGI_SIZE].copy_from_slice(d.as_bytes());
        crc::update(&mut buf[..sectsize], AGI_CRC_OFF);
    }
}

/// Decoded AGFL: the header fields and every slot (live or not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agfl {
    pub seqno: u32,
    pub uuid: Uuid,
    pub lsn: u64,
    pub slots: Vec<u32>,
}

impl Agfl {
    /// Decode and verify an AGFL sector read for AG `c.agno`. Every slot
    /// must be NULLAGBLOCK or a block below `sb_agblocks` (stale slots
    /// outside the live range may hold anything of that form).
    pub fn decode(buf: &[u8], c: &AgCheck) -> Result<Self> {
        const WHAT: &str = "AGFL";
        check_common(WHAT, buf, c, AGFL_SECTOR, AGFL_MAGIC, AGFL_CRC_OFF)?;
        let at = c.at(AGFL_SECTOR);
        let (d, _) = DAgflHdr::ref_from_prefix(buf).expect("length checked");
        if d.uuid != c.uuid {
            return Err(Error::corrupt(
                WHAT,
                at,
                "UUID does not match the filesystem",
            ));
        }
        if d.seqno.get() != c.agno.0 {
            return Err(Error::corrupt(
                WHAT,
                at,
                format!("seqno {} in AG {}", d.seqno.get(), c.agno),
            ));
        }
        let n = c.agfl_size() as usize;
        let mut slots = Vec::with_capacity(n);
        for i in 0..n {
            let b = super::be32(buf, AGFL_HDR_SIZE + 4 * i);
            if b != NULL_AGBLOCK && b >= c.agblocks {
                return Err(Error::corrupt(
                    WHAT,
                    at,
                    format!("slot {i} holds block {b}"),
                ));
            }
            slots.push(b);
        }
        Ok(Agfl {
            seqno: d.seqno.get(),
            uuid: d.uuid,
            lsn: d.lsn.get(),
            slots,
        })
    }

    /// The blocks on the free list, in list order, as the AGF describes it.
    /// Each must be a usable block of this AG, and none may repeat.
    pub fn active_blocks(&self, agf: &Agf, c: &AgCheck) -> Result<Vec<AgBlock>> {
        let at = c.at(AGFL_SECTOR);
        if agf.agfl_size as usize != self.slots.len() {
            return Err(Error::corrupt(
                "AGFL",
                at,
                format!("{} slots, AGF expects {}", self.slots.len(), agf.agfl_size),
            ));
        }
        let idx = agf.agfl_active().map_err(|e| match e {
            Error::Corrupt { what, detail, .. } => Error::corrupt(what, c.at(AGF_SECTOR), detail),
            e => e,
        })?;
        let mut out: Vec<AgBlock> = Vec::with_capacity(idx.len());
        for i in idx {
            let b = self.slots[i as usize];
            if !c.agbno_ok(b) {
                return Err(Error::corrupt(
                    "AGFL",
                    at,
                    format!("live slot {i} holds block {b:#x} outside the AG"),
                ));
            }
            if out.iter().any(|o| o.0 == b) {
                return Err(Error::corrupt(
                    "AGFL",
                    at,
                    format!("block {b} appears twice on the free list"),
                ));
            }
            out.push(AgBlock(b));
        }
        Ok(out)
    }

    /// Encode into a sector buffer and stamp the CRC.
    pub fn encode(&self, buf: &mut [u8], sectsize: usize) {
        let d = DAgflHdr {
            magicnum: AGFL_MAGIC.into(),
            seqno: self.seqno.into(),
            uuid: self.uuid,
            lsn: self.lsn.into(),
            crc: [0; 4],
        };
        buf[..AGFL_HDR_SIZE].copy_from_slice(d.as_bytes());
        for (i, &s) in self.slots.iter().enumerate() {
            super::put_be32(buf, AGFL_HDR_SIZE + 4 * i, s);
        }
        crc::update(&mut buf[..sectsize], AGFL_CRC_OFF);
    }
}

#[cfg(test)]
#[path = "ag_tests.rs"]
mod tests;
