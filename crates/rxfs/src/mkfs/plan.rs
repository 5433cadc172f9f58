//! The geometry of a new filesystem: mkfs.xfs's sizing rules applied to the
//! options and the device size. Pure: no I/O.
//!
//! Rules (each one is mkfs.xfs's, so that the same inputs give the same
//! superblock):
//! - block size 4 KiB, sector size from the device (512 for files), inode
//!   size 512, directory block size `max(4096, blocksize)`;
//! - AG count/size: 4 AGs from 128 MiB to 4 TiB (AG size rounded up so no
//!   block is lost, at most 1 TiB per AG), then maximum-size AGs; for
//!   filesystems under 128 MiB fewer, smaller AGs (the "multidisk" table);
//!   a last AG shorter than 16 MiB is dropped with its blocks;
//! - log: `fs size / 2048`, at least 64 MiB, at most what one AG can hold
//!   (`agblocks - AG metadata - AGFL reserve - 1`), at most 2 GiB - 10 MiB
//!   and 2^20 blocks; placed in AG `agcount / 2` right after the AG's
//!   static metadata;
//! - refusals: filesystems under 300 MiB, logs under 64 MiB and a single
//!   AG, as mkfs.xfs refuses them (its hidden `--unsupported` mode is not
//!   offered); v4 (crc=0), stripe geometry and external logs are "not
//!   supported" by name.
//!
//! Invariant of a [`Plan`]: `dblocks == agcount * agblocks` for all AGs but
//! the last, which holds `dblocks - (agcount - 1) * agblocks >= 16 MiB`;
//! the log lies inside AG `logagno` after its static metadata; the root
//! inode chunk (AG 0) lies after the AGFL blocks, aligned to `inoalignmt`,
//! inside AG 0, and does not overlap the log.

use crate::error::{Error, Result};
use crate::format::sb::*;
use crate::format::Uuid;

/// Feature switches (mkfs.xfs `-m`, `-i`, `-n` options). Defaults are
/// mkfs.xfs 6.1's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    pub crc: bool,
    pub finobt: bool,
    pub sparse: bool,
    pub reflink: bool,
    pub rmapbt: bool,
    pub bigtime: bool,
    pub inobtcount: bool,
    pub nrext64: bool,
}

impl Default for Features {
    fn default() -> Self {
        Features {
            crc: true,
            finobt: true,
            sparse: true,
            reflink: true,
            rmapbt: false,
            bigtime: true,
            inobtcount: true,
            nrext64: false,
        }
    }
}

/// What the user asked for. `None` means "mkfs.xfs's default".
/// Sizes are in bytes.
#[derive(Debug, Clone, Default)]
pub struct MkfsOptions {
    pub blocksize: Option<u32>,
    pub sectsize: Option<u32>,
    pub inodesize: Option<u32>,
    pub dirblocksize: Option<u32>,
    pub agcount: Option<u64>,
    pub agsize: Option<u64>,
    /// Data section size (default: the whole device).
    pub dsize: Option<u64>,
    pub logsize: Option<u64>,
    pub logagno: Option<u32>,
    pub imaxpct: Option<u8>,
    pub label: Option<String>,
    pub uuid: Option<Uuid>,
    pub features: Features,
    /// Features the user set explicitly (so that an impossible combination
    /// is an error rather than silently changed), by mkfs.xfs name.
    pub explicit: Vec<&'static str>,
    /// Realtime extent size in bytes (with a realtime device).
    pub rtextsize: Option<u64>,
    /// Realtime section size (default: the whole realtime device).
    pub rtsize: Option<u64>,
    /// `-d rtinherit=1`: the root directory gets the RTINHERIT flag (with
    /// or without a realtime section, as mkfs.xfs sets it), so regular
    /// files made under it are realtime and directories pass it on.
    pub rtinherit: bool,
}

/// The computed geometry.
#[derive(Debug, Clone)]
pub struct Plan {
    pub blocksize: u32,
    pub blocklog: u8,
    pub sectsize: u32,
    pub sectlog: u8,
    pub inodesize: u32,
    pub inodelog: u8,
    pub dirblocksize: u32,
    pub dblocks: u64,
    pub agcount: u32,
    pub agblocks: u32,
    pub logblocks: u32,
    pub logagno: u32,
    /// Log start, AG block in `logagno`.
    pub log_agbno: u32,
    pub imaxpct: u8,
    pub features: Features,
    pub label: [u8; 12],
    pub uuid: Uuid,
    pub inoalignmt: u32,
    pub spino_align: u32,
    /// Static metadata blocks at the start of every AG (headers and roots).
    pub prealloc_blocks: u32,
    /// Blocks put on each AGFL at format time.
    pub agfl_fill: u32,
    /// Root inode chunk: first AG block (AG 0) and length in blocks.
    pub chunk_agbno: u32,
    pub chunk_blocks: u32,
    /// Inodes allocated with the root chunk (64, or a block's worth).
    pub chunk_inodes: u32,
    pub rtextsize: u32,
    pub rblocks: u64,
    pub rextents: u64,
    pub rbmblocks: u32,
    pub rsumblocks: u32,
    pub rextslog: u8,
}

const MIB: u64 = 1 << 20;
const AG_MIN_BYTES: u64 = 16 * MIB;
const AG_MAX_BYTES: u64 = 1 << 40;
const MAX_LOG_BLOCKS: u64 = 1 << 20;
const MAX_LOG_BYTES: u64 = (2 << 30) - 10 * MIB;
const MIN_REALISTIC_LOG_BYTES: u64 = 64 * MIB;
const AGFL_RESERVE: u64 = 4;
const INODE_BIG_CLUSTER: u32 = 8192;

fn usage(msg: impl Into<String>) -> Error {
    Error::Invalid(msg.into())
}

fn pow2_in(what: &str, v: u32, lo: u32, hi: u32) -> Result<u8> {
    if !v.is_power_of_two() || v < lo || v > hi {
        return Err(usage(format!(
            "illegal {what} {v}: must be a power of two between {lo} and {hi}"
        )));
    }
    Ok(v.trailing_zeros() as u8)
}

/// mkfs.xfs's default AG geometry for `dblocks` blocks of `1 << blocklog`
/// bytes on a single (non-striped) device: returns (agsize, agcount).
pub fn default_ag_geometry(blocklog: u8, dblocks: u64) -> (u64, u64) {
    let tb = |n: u64| n << (40 - blocklog as u64);
    let gb = |n: u64| n << (30 - blocklog as u64);
    let mb = |n: u64| n << (20 - blocklog as u64);
    let max_blocks = (AG_MAX_BYTES - 1) >> blocklog;
    let blocks = if dblocks >= tb(4) {
        max_blocks
    } else {
        let shift: u32 = if dblocks >= mb(128) {
            2
        } else {
            let mut s = 5u32;
            for cut in [
                dblocks <= gb(512),
                dblocks <= gb(8),
                dblocks < mb(128),
                dblocks < mb(64),
                dblocks < mb(32),
            ] {
                if cut {
                    s -= 1;
                }
            }
            s
        };
        let mut b = dblocks >> shift;
        if dblocks & ((1u64 << shift) - 1) != 0 && b < max_blocks {
            b += 1;
        }
        b
    };
    (
        blocks,
        dblocks / blocks + u64::from(!dblocks.is_multiple_of(blocks)),
    )
}

impl Plan {
    /// Compute the geometry for a data device of `dev_bytes` bytes with
    /// `dev_sectsize` sectors, and a realtime device of `rt_bytes` (if any).
    pub fn new(
        o: &MkfsOptions,
        dev_bytes: u64,
        dev_sectsize: u32,
        rt_bytes: Option<u64>,
    ) -> Result<Plan> {
        let mut f = o.features;
        let set = |n: &str| o.explicit.contains(&n);
        if !f.crc {
            return Err(Error::NotSupported(
                "crc=0 (v4 filesystems): rxfs mkfs writes v5 filesystems only".into(),
            ));
        }
        if rt_bytes.is_some() {
            // mkfs.xfs 6.1: no reflink or rmapbt with a realtime device;
            // reflink (on by default) is turned off unless asked for.
            if f.reflink && set("reflink") {
                return Err(usage("reflink not supported with realtime devices"));
            }
            if f.rmapbt {
                return Err(usage("rmapbt not supported with realtime devices"));
            }
            f.reflink = false;
        }
        if f.inobtcount && !f.finobt {
            if set("inobtcount") {
                return Err(usage(
                    "inode btree counters not supported without finobt support",
                ));
            }
            f.inobtcount = false;
        }

        let blocksize = o.blocksize.unwrap_or(4096);
        let blocklog = pow2_in("block size", blocksize, 1024, 65536)?;
        let sectsize = o.sectsize.unwrap_or(dev_sectsize.clamp(512, 32768));
        let sectlog = pow2_in("sector size", sectsize, 512, 32768)?;
        if sectsize > blocksize {
            return Err(usage(format!(
                "block size {blocksize} cannot be smaller than sector size {sectsize}"
            )));
        }
        if sectsize < dev_sectsize {
            return Err(usage(format!(
                "sector size {sectsize} smaller than the device's sector size {dev_sectsize}"
            )));
        }
        let inodesize = o.inodesize.unwrap_or(512);
        let inodelog = pow2_in("inode size", inodesize, 512, 2048)?;
        if inodesize > blocksize / 2 {
            return Err(usage(format!(
                "illegal inode size {inodesize}: at most {} with {blocksize} byte blocks",
                (blocksize / 2).min(2048)
            )));
        }
        let dirblocksize = o.dirblocksize.unwrap_or(blocksize.max(4096));
        pow2_in("directory block size", dirblocksize, blocksize, 65536)?;

        let dev_blocks = dev_bytes >> blocklog;
        let mut dblocks = match o.dsize {
            Some(b) => {
                if b % blocksize as u64 != 0 && b >> blocklog == 0 {
                    return Err(usage(format!("data size {b} too small")));
                }
                let want = b >> blocklog;
                if want > dev_blocks {
                    return Err(usage(format!(
                        "size {b} specified for data subvolume is too large, maximum is {} blocks",
                        dev_blocks
                    )));
                }
                want
            }
            None => dev_blocks,
        };
        let ag_min = AG_MIN_BYTES >> blocklog;
        let ag_max = (AG_MAX_BYTES - 1) >> blocklog;
        if dblocks < ag_min {
            return Err(usage(format!(
                "size {} too small, minimum is {} blocks",
                dblocks, ag_min
            )));
        }

        // AG geometry.
        let (agsize, mut agcount) = if let Some(bytes) = o.agsize {
            if bytes % blocksize as u64 != 0 {
                return Err(usage(format!(
                    "agsize ({bytes}) not a multiple of fs blk size ({blocksize})"
                )));
            }
            let a = bytes >> blocklog;
            if a == 0 {
                return Err(usage("agsize too small"));
            }
            (a, dblocks / a + u64::from(!dblocks.is_multiple_of(a)))
        } else if let Some(n) = o.agcount {
            if n == 0 {
                return Err(usage("agcount must be at least 1"));
            }
            (dblocks / n + u64::from(!dblocks.is_multiple_of(n)), n)
        } else {
            default_ag_geometry(blocklog, dblocks)
        };
        if !dblocks.is_multiple_of(agsize) && dblocks % agsize < ag_min {
            if o.agcount.is_some() {
                return Err(usage(format!(
                    "last AG would be smaller than {} blocks; choose another agcount",
                    ag_min
                )));
            }
            dblocks = (agcount - 1) * agsize;
            agcount -= 1;
        }
        if agsize < ag_min {
            return Err(usage(format!(
                "agsize ({agsize} blocks) too small, need at least {ag_min} blocks"
            )));
        }
        if agsize > ag_max {
            return Err(usage(format!(
                "agsize ({agsize} blocks) too big, maximum is {ag_max} blocks"
            )));
        }
        if agsize > dblocks {
            return Err(usage(format!(
                "agsize ({agsize} blocks) too big, data area is {dblocks} blocks"
            )));
        }
        if agcount > u32::MAX as u64 - 1 {
            return Err(usage("too many allocation groups"));
        }
        let agcount = agcount as u32;
        let agblocks = agsize as u32;

        // Static metadata per AG.
        let hdr_blocks = (4 * sectsize).div_ceil(blocksize);
        let agfl_block = (3 * sectsize) / blocksize;
        let bno_block = agfl_block + 1;
        let ibt_block = bno_block + 2;
        let fibt_block = ibt_block + 1;
        let rmap_block = if f.finobt {
            fibt_block + 1
        } else {
            ibt_block + 1
        };
        let refc_block = if f.rmapbt { rmap_block + 1 } else { rmap_block };
        let prealloc_blocks = if f.reflink {
            refc_block + 1
        } else {
            refc_block
        };
        debug_assert!(hdr_blocks <= bno_block);
        let min_freelist = 4 + if f.rmapbt { 2 } else { 0 };

        // Log.
        let max_usable = agblocks as u64
            - (hdr_blocks as u64 + AGFL_RESERVE + 3)
            - u64::from(f.finobt)
            - u64::from(f.rmapbt)
            - u64::from(f.reflink);
        let max_logblocks = max_usable - 1;
        let realistic = MIN_REALISTIC_LOG_BYTES >> blocklog;
        let mut logblocks = match o.logsize {
            Some(b) => {
                if b % blocksize as u64 != 0 {
                    return Err(usage(format!(
                        "log size {b} is not a multiple of the block size"
                    )));
                }
                let l = b >> blocklog;
                if l > max_logblocks {
                    return Err(usage(format!(
                        "internal log size {l} too large, must be less than {max_logblocks}"
                    )));
                }
                l
            }
            None => {
                let l = ((dblocks << blocklog) / 2048) >> blocklog;
                l.max(realistic)
                    .min(max_logblocks)
                    .min(MAX_LOG_BLOCKS)
                    .min(MAX_LOG_BYTES >> blocklog)
            }
        };
        if logblocks > MAX_LOG_BLOCKS || logblocks << blocklog > MAX_LOG_BYTES {
            return Err(usage(format!("log size {logblocks} blocks too large")));
        }
        if logblocks > (agblocks - prealloc_blocks) as u64 {
            return Err(usage(format!(
                "internal log size {logblocks} too large, must fit in allocation group"
            )));
        }
        let logagno = match o.logagno {
            Some(a) if a >= agcount => {
                return Err(usage(format!(
                    "log ag number {a} too large, must be less than {agcount}"
                )))
            }
            Some(a) => a,
            None => agcount / 2,
        };
        if logagno == 0 {
            let chunk = ((64 * inodesize as u64) >> blocklog).max(1);
            let max0 = max_logblocks - chunk * 4;
            if o.logsize.is_some() && logblocks > max0 {
                return Err(usage(format!(
                    "internal log size {logblocks} too large, must be less than {max0}"
                )));
            }
            logblocks = logblocks.min(max0);
        }

        // mkfs.xfs's support rules (validate_supported).
        if dblocks < (300 * MIB) >> blocklog {
            return Err(usage("Filesystem must be larger than 300MB."));
        }
        if logblocks < realistic {
            return Err(usage("Log size must be at least 64MB."));
        }
        if agcount < 2 {
            return Err(usage(
                "Filesystem must have at least 2 superblocks for redundancy!",
            ));
        }

        let imaxpct = match o.imaxpct {
            Some(p) if p > 100 => return Err(usage(format!("illegal imaxpct {p}"))),
            Some(p) => p,
            None => {
                if dblocks < 1u64 << (40 - blocklog) {
                    25
                } else if dblocks < 50u64 << (40 - blocklog) {
                    5
                } else {
                    1
                }
            }
        };

        // Inode alignment.
        let cluster = INODE_BIG_CLUSTER * (inodesize / 256);
        let mut inoalignmt = cluster >> blocklog;
        let mut spino_align = 0;
        if f.sparse {
            spino_align = inoalignmt;
            inoalignmt = (64 * inodesize) >> blocklog;
        }
        let inopblock = blocksize / inodesize;
        let chunk_inodes = inopblock.max(64);
        let chunk_blocks = (chunk_inodes * inodesize) / blocksize;

        // Root chunk placement (libxfs's computation of the root inode).
        let mut first = hdr_blocks + 3 + min_freelist;
        first += u32::from(f.finobt) + u32::from(f.rmapbt) + u32::from(f.reflink);
        if logagno == 0 {
            first += logblocks as u32;
        }
        if inoalignmt > 1 {
            first = first.div_ceil(inoalignmt) * inoalignmt;
        }
        let chunk_agbno = first;
        if chunk_agbno + chunk_blocks > agblocks {
            return Err(usage("no room for the root inode chunk in AG 0"));
        }

        // Realtime.
        let (mut rtextsize, mut rblocks, mut rextents, mut rbmblocks, mut rsumblocks, mut rextslog) =
            ((4096u32 >> blocklog).max(1), 0u64, 0u64, 0u32, 0u32, 0u8);
        if let Some(rt_dev) = rt_bytes {
            rtextsize = match o.rtextsize {
                Some(b) => {
                    if b % blocksize as u64 != 0 {
                        return Err(usage(format!(
                            "illegal rt extent size {b}, not a multiple of {blocksize}"
                        )));
                    }
                    if !(4096..=(1 << 30)).contains(&b) {
                        return Err(usage(format!("illegal rt extent size {b}")));
                    }
                    (b >> blocklog) as u32
                }
                None => (4096u32 >> blocklog).max(1),
            };
            let dev_rblocks = rt_dev >> blocklog;
            let want = match o.rtsize {
                Some(b) => {
                    let w = b >> blocklog;
                    if w > dev_rblocks {
                        return Err(usage(format!(
                            "size {b} specified for rt subvolume is too large, maximum is {dev_rblocks} blocks"
                        )));
                    }
                    w
                }
                None => dev_rblocks,
            };
            let l = crate::format::rt::RtLayout::compute(blocksize, rtextsize, want);
            rextents = l.rextents;
            rblocks = rextents * rtextsize as u64;
            rbmblocks = l.rbmblocks;
            rextslog = l.rextslog;
            if rextents > 0 {
                let sum_bytes = 4 * (rextslog as u64 + 1) * rbmblocks as u64;
                rsumblocks = sum_bytes.div_ceil(blocksize as u64) as u32;
            }
        } else if o.rtextsize.is_some() || o.rtsize.is_some() {
            return Err(usage(
                "realtime options need a realtime device (-r rtdev=FILE)",
            ));
        }

        let mut label = [0u8; 12];
        if let Some(l) = &o.label {
            if l.len() > 12 {
                return Err(usage(format!("label {l:?} is longer than 12 characters")));
            }
            label[..l.len()].copy_from_slice(l.as_bytes());
        }
        let uuid = match o.uuid {
            Some(u) => u,
            None => random_uuid()?,
        };

        Ok(Plan {
            blocksize,
            blocklog,
            sectsize,
            sectlog,
            inodesize,
            inodelog,
            dirblocksize,
            dblocks,
            agcount,
            agblocks,
            logblocks: logblocks as u32,
            logagno,
            log_agbno: prealloc_blocks,
            imaxpct,
            features: f,
            label,
            uuid,
            inoalignmt,
            spino_align,
            prealloc_blocks,
            agfl_fill: min_freelist,
            chunk_agbno,
            chunk_blocks,
            chunk_inodes,
            rtextsize,
            rblocks,
            rextents,
            rbmblocks,
            rsumblocks,
            rextslog,
        })
    }

    /// Blocks in AG `agno`.
    pub fn ag_len(&self, agno: u32) -> u32 {
        if agno + 1 == self.agcount {
            (self.dblocks - (agno as u64) * self.agblocks as u64) as u32
        } else {
            self.agblocks
        }
    }

    pub fn agblklog(&self) -> u8 {
        // log2 rounded up.
        (64 - (self.agblocks as u64 - 1).leading_zeros()) as u8
    }

    /// Filesystem block number of AG block `agbno` in AG `agno`.
    pub fn fsb(&self, agno: u32, agbno: u32) -> u64 {
        ((agno as u64) << self.agblklog()) | agbno as u64
    }

    /// Byte offset of AG block `agbno` in AG `agno`.
    pub fn byte(&self, agno: u32, agbno: u32) -> u64 {
        (agno as u64 * self.agblocks as u64 + agbno as u64) << self.blocklog
    }

    /// Inode number of the `i`th inode of the root chunk.
    pub fn chunk_ino(&self, i: u32) -> u64 {
        let inopblog = self.blocklog - self.inodelog;
        ((self.chunk_agbno as u64) << inopblog) + i as u64
    }

    /// The superblock template: geometry and features, with the counters
    /// and inode numbers of a secondary superblock written before the root
    /// inode exists (rootino NULL, inprogress set, icount 0).
    pub fn superblock(&self) -> Superblock {
        let f = &self.features;
        let mut versionnum: u16 = VERSION_5 | 0x0020 /* NLINK */ | 0x1000 /* EXTFLG */ | 0x2000 /* DIRV2 */;
        versionnum |= 0x0080; // ALIGN (inode alignment)
        versionnum |= 0x0400; // LOGV2
        if self.sectsize > 512 {
            versionnum |= 0x0800; // SECTOR
        }
        let features2 = FEAT2_LAZYSBCOUNT | FEAT2_PROJID32 | FEAT2_CRC | FEAT2_ATTR2;
        versionnum |= VERSION_MOREBITS;
        let mut ro = 0;
        if f.finobt {
            ro |= RO_COMPAT_FINOBT;
        }
        if f.rmapbt {
            ro |= RO_COMPAT_RMAPBT;
        }
        if f.reflink {
            ro |= RO_COMPAT_REFLINK;
        }
        if f.inobtcount {
            ro |= RO_COMPAT_INOBTCNT;
        }
        let mut inc = INCOMPAT_FTYPE;
        if f.bigtime {
            inc |= INCOMPAT_BIGTIME;
        }
        if f.sparse {
            inc |= INCOMPAT_SPINODES;
        }
        if f.nrext64 {
            inc |= INCOMPAT_NREXT64;
        }
        let (logsectlog, logsectsize) = if self.sectsize > 512 {
            (self.sectlog, self.sectsize as u16)
        } else {
            (0, 0)
        };
        let fdblocks = self.dblocks
            - self.agcount as u64 * self.prealloc_blocks as u64
            - self.logblocks as u64;
        Superblock {
            blocksize: self.blocksize,
            dblocks: self.dblocks,
            rblocks: self.rblocks,
            rextents: self.rextents,
            uuid: self.uuid,
            logstart: self.fsb(self.logagno, self.log_agbno),
            rootino: u64::MAX,
            rbmino: u64::MAX,
            rsumino: u64::MAX,
            rextsize: self.rtextsize,
            agblocks: self.agblocks,
            agcount: self.agcount,
            rbmblocks: self.rbmblocks,
            logblocks: self.logblocks,
            versionnum,
            sectsize: self.sectsize as u16,
            inodesize: self.inodesize as u16,
            inopblock: (self.blocksize / self.inodesize) as u16,
            fname: self.label,
            blocklog: self.blocklog,
            sectlog: self.sectlog,
            inodelog: self.inodelog,
            inopblog: self.blocklog - self.inodelog,
            agblklog: self.agblklog(),
            rextslog: self.rextslog,
            inprogress: 1,
            imax_pct: self.imaxpct,
            icount: 0,
            ifree: 0,
            fdblocks,
            frextents: 0,
            uquotino: 0,
            gquotino: 0,
            qflags: 0,
            flags: 0,
            inoalignmt: self.inoalignmt,
            unit: 0,
            width: 0,
            dirblklog: (self.dirblocksize.trailing_zeros() - self.blocklog as u32) as u8,
            logsectlog,
            logsectsize,
            // A v2 log on sectors larger than 512 bytes gets the sector as its
            // stripe unit (bytes), as mkfs.xfs sets it.
            logsunit: if self.sectsize > 512 {
                self.sectsize
            } else {
                1
            },
            features2,
            bad_features2: features2,
            features_compat: 0,
            features_ro_compat: ro,
            features_incompat: inc,
            features_log_incompat: 0,
            spino_align: self.spino_align,
            pquotino: 0,
            lsn: 0,
            meta_uuid: [0; 16],
        }
    }
}

/// A random (version 4) UUID.
pub fn random_uuid() -> Result<Uuid> {
    let mut u = [0u8; 16];
    let mut got = 0;
    while got < u.len() {
        // SAFETY: the pointer and length describe the unfilled tail of `u`.
        let n = unsafe { libc::getrandom(u[got..].as_mut_ptr().cast(), u.len() - got, 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(Error::io("getrandom", 0, u.len(), e));
        }
        got += n as usize;
    }
    u[6] = (u[6] & 0x0f) | 0x40;
    u[8] = (u[8] & 0x3f) | 0x80;
    Ok(u)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_ag_counts() {
        // 4 AGs between 128 MiB and 4 TiB; maximum AGs above.
        assert_eq!(default_ag_geometry(12, 76800), (19200, 4));
        assert_eq!(default_ag_geometry(12, 76801).1, 4);
        let tb4 = 4u64 << 28;
        let (size, count) = default_ag_geometry(12, tb4);
        assert_eq!(size, ((1u64 << 40) - 1) >> 12);
        assert_eq!(count, tb4.div_ceil(size));
    }

    #[test]
    fn refusals() {
        let o = MkfsOptions::default();
        assert!(Plan::new(&o, 200 << 20, 512, None).is_err());
        let mut v4 = MkfsOptions::default();
        v4.features.crc = false;
        assert!(matches!(
            Plan::new(&v4, 1 << 30, 512, None),
            Err(Error::NotSupported(_))
        ));
        let p = Plan::new(&o, 300 << 20, 512, None).unwrap();
        assert_eq!((p.agcount, p.agblocks, p.logblocks), (4, 19200, 16384));
        assert_eq!(p.chunk_ino(0), 128);
    }
}
