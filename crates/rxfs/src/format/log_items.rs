//! Log item formats: the first region of every logged item.
//!
//! All item format headers are in the writer's host byte order
//! ([`HostOrder`]) and begin with `type (u16), size (u16)` where `size` is
//! the item's region count. Layouts (byte offsets):
//! ```text
//! BUF 0x123c      0 type 2 size 4 flags 6 len(BBs) 8 blkno(i64) 16 map_size
//!                 20 data_map[map_size] (u32 bitmap of dirty 128-byte chunks)
//!                 flags: INODE_BUF 0x1, CANCEL 0x2, dquot 0x4/0x8/0x10,
//!                 buffer type in bits 11..15.  Regions 1..: dirty chunk runs.
//! INODE 0x123b    0 type 2 size 4 fields 8 asize 10 dsize 12 pad 16 ino
//!                 24 rdev/pad[16] 40 blkno 48 len 52 boffset   (56 bytes;
//!                 52-byte i386 form has no pad: ino at 12)
//!                 Region 1: log dinode (host order, 176 bytes on v5);
//!                 then data fork, attr fork regions as `fields` says.
//! ICREATE 0x123f  0 type 2 size 4 ag 8 agbno 12 count 16 isize 20 length
//!                 24 gen   (these six are big-endian)
//! EFI/EFD         0 type 2 size 4 nextents 8 id; extents of 16 bytes
//!  0x1236/7       (start u64, len u32, pad) or 12 bytes (i386, no pad)
//!  RT: 0x124a/b
//! RUI 0x1240, BUI 0x1244 (RT RUI 0x124c): 16-byte header as EFI, then map
//!                 extents of 32 bytes: owner, startblock, startoff (u64),
//!                 len, flags (u32)
//! CUI 0x1242 (RT 0x124e): header as EFI, then extents of 16 bytes:
//!                 startblock (u64), len, flags (u32)
//! RUD/CUD/BUD/ATTRD/XMD (0x1241/0x1243/0x1245/0x1247/0x1249, RT RUD 0x124d,
//!                 RT CUD 0x124f): 0 type 2 size 4 pad 8 intent id (16 bytes)
//! ATTRI 0x1246    0 type 2 size 4 igen 8 id 16 ino 24 op_flags 28 name_len
//!                 32 value_len 36 attr_filter (40 bytes); then name/value
//! XMI 0x1248      0 type 2 size 4 pad 8 id 16 inode1 24 inode2 32 igen1
//!                 36 igen2 40 startoff1 48 startoff2 56 blockcount 64 flags
//!                 72 isize1 80 isize2 (88 bytes)
//! DQUOT 0x123d    0 type 2 size 4 id 8 blkno 16 len 20 boffset (24 bytes)
//! QUOTAOFF 0x123e 0 type 2 size 4 flags 8 pad[12] (20 bytes)
//! ```
//! Decoders check every length against the region they read; a region of a
//! size no writer produces is corrupt. Encoders exist for the items rxfs
//! logs itself outside the transaction core: EFI/EFD
//! ([`encode_free_extents`], the 64-bit 16-byte extent layout), used by
//! recovery to close the intents it finishes.

use super::log::{corrupt, HostOrder};
use crate::error::{Location, Result};

pub const LI_EFI: u16 = 0x1236;
pub const LI_EFD: u16 = 0x1237;
pub const LI_IUNLINK: u16 = 0x1238;
pub const LI_INODE: u16 = 0x123b;
pub const LI_BUF: u16 = 0x123c;
pub const LI_DQUOT: u16 = 0x123d;
pub const LI_QUOTAOFF: u16 = 0x123e;
pub const LI_ICREATE: u16 = 0x123f;
pub const LI_RUI: u16 = 0x1240;
pub const LI_RUD: u16 = 0x1241;
pub const LI_CUI: u16 = 0x1242;
pub const LI_CUD: u16 = 0x1243;
pub const LI_BUI: u16 = 0x1244;
pub const LI_BUD: u16 = 0x1245;
pub const LI_ATTRI: u16 = 0x1246;
pub const LI_ATTRD: u16 = 0x1247;
pub const LI_XMI: u16 = 0x1248;
pub const LI_XMD: u16 = 0x1249;
pub const LI_EFI_RT: u16 = 0x124a;
pub const LI_EFD_RT: u16 = 0x124b;
pub const LI_RUI_RT: u16 = 0x124c;
pub const LI_RUD_RT: u16 = 0x124d;
pub const LI_CUI_RT: u16 = 0x124e;
pub const LI_CUD_RT: u16 = 0x124f;

/// Buffer log format flags.
pub const BLF_INODE_BUF: u16 = 0x1;
pub const BLF_CANCEL: u16 = 0x2;
pub const BLF_UDQUOT_BUF: u16 = 0x4;
pub const BLF_PDQUOT_BUF: u16 = 0x8;
pub const BLF_GDQUOT_BUF: u16 = 0x10;
/// Buffer type (`XFS_BLFT_*`) lives in bits 11..15 of the flags.
pub const BLFT_SHIFT: u32 = 11;
pub const BLFT_MASK: u16 = 0x1f << BLFT_SHIFT;
/// Bytes covered by one bit of the dirty bitmap.
pub const BLF_CHUNK: usize = 128;
/// Most bitmap words: 64 KiB blocks / 128-byte chunks / 32 bits, plus one.
pub const BLF_DATAMAP_WORDS: usize = 65536 / BLF_CHUNK / 32 + 1;
const BLF_MAP_OFF: usize = 20;

/// Short name of an item type, as `xfs_logprint` prints it.
pub fn item_type_name(ty: u16) -> &'static str {
    match ty {
        LI_EFI => "EFI",
        LI_EFD => "EFD",
        LI_IUNLINK => "IUNLINK",
        LI_INODE => "INO",
        LI_BUF => "BUF",
        LI_DQUOT => "DQUOT",
        LI_QUOTAOFF => "QOFF",
        LI_ICREATE => "ICR",
        LI_RUI => "RUI",
        LI_RUD => "RUD",
        LI_CUI => "CUI",
        LI_CUD => "CUD",
        LI_BUI => "BUI",
        LI_BUD => "BUD",
        LI_ATTRI => "ATTRI",
        LI_ATTRD => "ATTRD",
        LI_XMI => "XMI",
        LI_XMD => "XMD",
        LI_EFI_RT => "EFI_RT",
        LI_EFD_RT => "EFD_RT",
        LI_RUI_RT => "RUI_RT",
        LI_RUD_RT => "RUD_RT",
        LI_CUI_RT => "CUI_RT",
        LI_CUD_RT => "CUD_RT",
        _ => "UNKNOWN",
    }
}

/// A buffer item: which disk blocks, which 128-byte chunks are logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufFormat {
    pub regions: u16,
    pub flags: u16,
    /// Buffer length in basic blocks.
    pub len: u16,
    /// Disk address (512-byte units) of the buffer.
    pub blkno: u64,
    pub data_map: Vec<u32>,
}

impl BufFormat {
    /// `XFS_BLFT_*` buffer type (for the verifier recovery must run).
    pub fn buf_type(&self) -> u8 {
        ((self.flags & BLFT_MASK) >> BLFT_SHIFT) as u8
    }
    pub fn is_cancel(&self) -> bool {
        self.flags & BLF_CANCEL != 0
    }
    pub fn is_inode_buf(&self) -> bool {
        self.flags & BLF_INODE_BUF != 0
    }
    /// Number of dirty 128-byte chunks in the bitmap.
    pub fn dirty_chunks(&self) -> u32 {
        self.data_map.iter().map(|w| w.count_ones()).sum()
    }
}

/// An inode item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InodeFormat {
    pub regions: u16,
    /// `XFS_ILOG_*` bits.
    pub fields: u32,
    pub asize: u16,
    pub dsize: u16,
    pub ino: u64,
    /// Device number of device inodes (first word of the 16-byte union).
    pub rdev: u32,
    pub blkno: u64,
    pub len: i32,
    pub boffset: i32,
}

/// An inode chunk creation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IcreateFormat {
    pub ag: u32,
    pub agbno: u32,
    pub count: u32,
    pub isize: u32,
    pub length: u32,
    pub gen: u32,
}

/// An extent of an EFI/EFD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FreeExtent {
    pub start: u64,
    pub len: u32,
}

/// An extent of an RUI/BUI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapExtent {
    pub owner: u64,
    pub startblock: u64,
    pub startoff: u64,
    pub len: u32,
    pub flags: u32,
}

/// An extent of a CUI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhysExtent {
    pub startblock: u64,
    pub len: u32,
    pub flags: u32,
}

/// An extended attribute intent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttriFormat {
    pub regions: u16,
    pub igen: u32,
    pub id: u64,
    pub ino: u64,
    pub op_flags: u32,
    pub name_len: u32,
    pub value_len: u32,
    pub attr_filter: u32,
}

/// A file mapping exchange intent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XmiFormat {
    pub id: u64,
    pub inode1: u64,
    pub inode2: u64,
    pub igen1: u32,
    pub igen2: u32,
    pub startoff1: u64,
    pub startoff2: u64,
    pub blockcount: u64,
    pub flags: u64,
    pub isize1: u64,
    pub isize2: u64,
}

/// A decoded item format header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ItemFormat {
    Buf(BufFormat),
    Inode(InodeFormat),
    Icreate(IcreateFormat),
    /// Extent free intent (`rt`: on the realtime device).
    Efi {
        rt: bool,
        id: u64,
        extents: Vec<FreeExtent>,
    },
    Efd {
        rt: bool,
        efi_id: u64,
        extents: Vec<FreeExtent>,
    },
    Rui {
        rt: bool,
        id: u64,
        extents: Vec<MapExtent>,
    },
    Rud {
        rt: bool,
        rui_id: u64,
    },
    Cui {
        rt: bool,
        id: u64,
        extents: Vec<PhysExtent>,
    },
    Cud {
        rt: bool,
        cui_id: u64,
    },
    Bui {
        id: u64,
        extents: Vec<MapExtent>,
    },
    Bud {
        bui_id: u64,
    },
    Attri(AttriFormat),
    Attrd {
        attri_id: u64,
    },
    Xmi(XmiFormat),
    Xmd {
        xmi_id: u64,
    },
    Dquot {
        id: u32,
        blkno: u64,
        len: i32,
        boffset: u32,
    },
    QuotaOff {
        flags: u32,
    },
    /// A type rxfs does not know: only its type and region count.
    Unknown {
        item_type: u16,
        regions: u16,
    },
}

impl ItemFormat {
    /// Decode the format header (first region) of an item.
    pub fn decode(regions: &[Vec<u8>], order: HostOrder, at: Location) -> Result<Self> {
        let Some(b) = regions.first() else {
            return Err(corrupt("log item", at, "item without regions"));
        };
        if b.len() < 4 {
            return Err(corrupt(
                "log item",
                at,
                format!("format of {} bytes", b.len()),
            ));
        }
        let ty = order.u16(b, 0);
        let d = Dec { b, order, at, ty };
        let rt = matches!(
            ty,
            LI_EFI_RT | LI_EFD_RT | LI_RUI_RT | LI_RUD_RT | LI_CUI_RT | LI_CUD_RT
        );
        Ok(match ty {
            LI_BUF => ItemFormat::Buf(d.buf()?),
            LI_INODE => ItemFormat::Inode(d.inode()?),
            LI_ICREATE => {
                d.need_exact(&[28])?;
                ItemFormat::Icreate(IcreateFormat {
                    ag: d.be32(4),
                    agbno: d.be32(8),
                    count: d.be32(12),
                    isize: d.be32(16),
                    length: d.be32(20),
                    gen: d.be32(24),
                })
            }
            LI_EFI | LI_EFI_RT => {
                let (id, extents) = d.free_extents()?;
                ItemFormat::Efi { rt, id, extents }
            }
            LI_EFD | LI_EFD_RT => {
                let (efi_id, extents) = d.free_extents()?;
                ItemFormat::Efd {
                    rt,
                    efi_id,
                    extents,
                }
            }
            LI_RUI | LI_RUI_RT => {
                let (id, extents) = d.map_extents()?;
                ItemFormat::Rui { rt, id, extents }
            }
            LI_BUI => {
                let (id, extents) = d.map_extents()?;
                ItemFormat::Bui { id, extents }
            }
            LI_CUI | LI_CUI_RT => {
                let (id, extents) = d.phys_extents()?;
                ItemFormat::Cui { rt, id, extents }
            }
            LI_RUD | LI_RUD_RT => ItemFormat::Rud {
                rt,
                rui_id: d.done_id()?,
            },
            LI_CUD | LI_CUD_RT => ItemFormat::Cud {
                rt,
                cui_id: d.done_id()?,
            },
            LI_BUD => ItemFormat::Bud {
                bui_id: d.done_id()?,
            },
            LI_ATTRD => ItemFormat::Attrd {
                attri_id: d.done_id()?,
            },
            LI_XMD => ItemFormat::Xmd {
                xmi_id: d.done_id()?,
            },
            LI_ATTRI => {
                d.need_exact(&[40])?;
                ItemFormat::Attri(AttriFormat {
                    regions: d.u16(2),
                    igen: d.u32(4),
                    id: d.u64(8),
                    ino: d.u64(16),
                    op_flags: d.u32(24),
                    name_len: d.u32(28),
                    value_len: d.u32(32),
                    attr_filter: d.u32(36),
                })
            }
            LI_XMI => {
                d.need_exact(&[88])?;
                ItemFormat::Xmi(XmiFormat {
                    id: d.u64(8),
                    inode1: d.u64(16),
                    inode2: d.u64(24),
                    igen1: d.u32(32),
                    igen2: d.u32(36),
                    startoff1: d.u64(40),
                    startoff2: d.u64(48),
                    blockcount: d.u64(56),
                    flags: d.u64(64),
                    isize1: d.u64(72),
                    isize2: d.u64(80),
                })
            }
            LI_DQUOT => {
                d.need_exact(&[24])?;
                ItemFormat::Dquot {
                    id: d.u32(4),
                    blkno: d.u64(8),
                    len: d.u32(16) as i32,
                    boffset: d.u32(20),
                }
            }
            LI_QUOTAOFF => {
                d.need_exact(&[20])?;
                ItemFormat::QuotaOff { flags: d.u32(4) }
            }
            _ => ItemFormat::Unknown {
                item_type: ty,
                regions: order.u16(b, 2),
            },
        })
    }

    /// The `XFS_LI_*` type.
    pub fn item_type(&self) -> u16 {
        match self {
            ItemFormat::Buf(_) => LI_BUF,
            ItemFormat::Inode(_) => LI_INODE,
            ItemFormat::Icreate(_) => LI_ICREATE,
            ItemFormat::Efi { rt, .. } => pick(*rt, LI_EFI_RT, LI_EFI),
            ItemFormat::Efd { rt, .. } => pick(*rt, LI_EFD_RT, LI_EFD),
            ItemFormat::Rui { rt, .. } => pick(*rt, LI_RUI_RT, LI_RUI),
            ItemFormat::Rud { rt, .. } => pick(*rt, LI_RUD_RT, LI_RUD),
            ItemFormat::Cui { rt, .. } => pick(*rt, LI_CUI_RT, LI_CUI),
            ItemFormat::Cud { rt, .. } => pick(*rt, LI_CUD_RT, LI_CUD),
            ItemFormat::Bui { .. } => LI_BUI,
            ItemFormat::Bud { .. } => LI_BUD,
            ItemFormat::Attri(_) => LI_ATTRI,
            ItemFormat::Attrd { .. } => LI_ATTRD,
            ItemFormat::Xmi(_) => LI_XMI,
            ItemFormat::Xmd { .. } => LI_XMD,
            ItemFormat::Dquot { .. } => LI_DQUOT,
            ItemFormat::QuotaOff { .. } => LI_QUOTAOFF,
            ItemFormat::Unknown { item_type, .. } => *item_type,
        }
    }

    pub fn name(&self) -> &'static str {
        item_type_name(self.item_type())
    }
}

fn pick(rt: bool, a: u16, b: u16) -> u16 {
    if rt {
        a
    } else {
        b
    }
}

/// Bounds-checked reads from one format region.
struct Dec<'a> {
    b: &'a [u8],
    order: HostOrder,
    at: Location,
    ty: u16,
}

impl Dec<'_> {
    fn u16(&self, off: usize) -> u16 {
        self.order.u16(self.b, off)
    }
    fn u32(&self, off: usize) -> u32 {
        self.order.u32(self.b, off)
    }
    fn u64(&self, off: usize) -> u64 {
        self.order.u64(self.b, off)
    }
    fn be32(&self, off: usize) -> u32 {
        super::be32(self.b, off)
    }

    fn bad(&self, d: String) -> crate::error::Error {
        corrupt(
            "log item",
            self.at,
            format!("{} item: {d}", item_type_name(self.ty)),
        )
    }

    fn need_exact(&self, lens: &[usize]) -> Result<()> {
        if lens.contains(&self.b.len()) {
            Ok(())
        } else {
            Err(self.bad(format!(
                "format of {} bytes, expected {lens:?}",
                self.b.len()
            )))
        }
    }

    fn buf(&self) -> Result<BufFormat> {
        if self.b.len() < BLF_MAP_OFF {
            return Err(self.bad(format!("format of {} bytes", self.b.len())));
        }
        let map_size = self.u32(16) as usize;
        if map_size > BLF_DATAMAP_WORDS || BLF_MAP_OFF + 4 * map_size > self.b.len() {
            return Err(self.bad(format!(
                "bitmap of {map_size} words in a {}-byte format",
                self.b.len()
            )));
        }
        Ok(BufFormat {
            regions: self.u16(2),
            flags: self.u16(4),
            len: self.u16(6),
            blkno: self.u64(8),
            data_map: (0..map_size)
                .map(|i| self.u32(BLF_MAP_OFF + 4 * i))
                .collect(),
        })
    }

    fn inode(&self) -> Result<InodeFormat> {
        // 56 bytes (64-bit layout) or 52 (i386: no pad before the inode number).
        self.need_exact(&[56, 52])?;
        let p = if self.b.len() == 56 { 4 } else { 0 };
        Ok(InodeFormat {
            regions: self.u16(2),
            fields: self.u32(4),
            asize: self.u16(8),
            dsize: self.u16(10),
            ino: self.u64(12 + p),
            rdev: self.u32(20 + p),
            blkno: self.u64(36 + p),
            len: self.u32(44 + p) as i32,
            boffset: self.u32(48 + p) as i32,
        })
    }

    /// Header of an intent: (id, extent count), after checking that the
    /// region holds exactly `count` extents of one of `sizes` bytes; returns
    /// the extent size found.
    fn intent(&self, sizes: &[usize]) -> Result<(u64, usize, usize)> {
        if self.b.len() < 16 {
            return Err(self.bad(format!("format of {} bytes", self.b.len())));
        }
        let n = self.u32(4) as usize;
        let body = self.b.len() - 16;
        for &s in sizes {
            if n.checked_mul(s) == Some(body) {
                return Ok((self.u64(8), n, s));
            }
        }
        Err(self.bad(format!(
            "{n} extents do not fill a {}-byte format",
            self.b.len()
        )))
    }

    fn free_extents(&self) -> Result<(u64, Vec<FreeExtent>)> {
        let (id, n, s) = self.intent(&[16, 12])?;
        let ext = (0..n)
            .map(|i| FreeExtent {
                start: self.u64(16 + i * s),
                len: self.u32(24 + i * s),
            })
            .collect();
        Ok((id, ext))
    }

    fn map_extents(&self) -> Result<(u64, Vec<MapExtent>)> {
        let (id, n, _) = self.intent(&[32])?;
        let ext = (0..n)
            .map(|i| {
                let o = 16 + i * 32;
                MapExtent {
                    owner: self.u64(o),
                    startblock: self.u64(o + 8),
                    startoff: self.u64(o + 16),
                    len: self.u32(o + 24),
                    flags: self.u32(o + 28),
                }
            })
            .collect();
        Ok((id, ext))
    }

    fn phys_extents(&self) -> Result<(u64, Vec<PhysExtent>)> {
        let (id, n, _) = self.intent(&[16])?;
        let ext = (0..n)
            .map(|i| {
                let o = 16 + i * 16;
                PhysExtent {
                    startblock: self.u64(o),
                    len: self.u32(o + 8),
                    flags: self.u32(o + 12),
                }
            })
            .collect();
        Ok((id, ext))
    }

    fn done_id(&self) -> Result<u64> {
        // RUD/CUD/BUD/ATTRD/XMD are 16 bytes; an EFD-like 16-byte header with
        // no extents has the same size.
        self.need_exact(&[16])?;
        Ok(self.u64(8))
    }
}

/// The inode core as logged (`xfs_log_dinode`, host order), the fields
/// recovery and tests look at. v3 inodes log 176 bytes, older ones 96.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogDinode {
    pub magic: u16,
    pub mode: u16,
    pub version: u8,
    pub format: u8,
    pub nlink: u32,
    pub size: u64,
    pub nblocks: u64,
    pub nextents: u32,
    pub flags: u16,
    pub gen: u32,
    /// v3 only (0 otherwise).
    pub flags2: u64,
    /// v3 only (0 otherwise).
    pub ino: u64,
}

/// Size of a logged v3 inode core.
pub const LOG_DINODE_SIZE: usize = 176;
/// Size of a logged v1/v2 inode core.
pub const LOG_DINODE_SIZE_V2: usize = 96;

/// Decode region 1 of an inode item.
pub fn decode_log_dinode(b: &[u8], order: HostOrder, at: Location) -> Result<LogDinode> {
    if b.len() < LOG_DINODE_SIZE_V2 {
        return Err(corrupt("log dinode", at, format!("{} bytes", b.len())));
    }
    let magic = order.u16(b, 0);
    if magic != 0x494e {
        return Err(corrupt("log dinode", at, format!("bad magic {magic:#x}")));
    }
    let version = b[4];
    let v3 = version >= 3;
    if v3 && b.len() < LOG_DINODE_SIZE {
        return Err(corrupt(
            "log dinode",
            at,
            format!("v3 core of {} bytes", b.len()),
        ));
    }
    Ok(LogDinode {
        magic,
        mode: order.u16(b, 2),
        version,
        format: b[5],
        nlink: order.u32(b, 16),
        size: order.u64(b, 56),
        nblocks: order.u64(b, 64),
        nextents: order.u32(b, 76),
        flags: order.u16(b, 90),
        gen: order.u32(b, 92),
        flags2: if v3 { order.u64(b, 120) } else { 0 },
        ino: if v3 { order.u64(b, 152) } else { 0 },
    })
}

/// Encode an EFI or EFD format region (the item's only region) in host
/// order `order`: 16-byte header, then `extents` as 16-byte
/// `(start u64, len u32, pad u32)` records (the 64-bit layout).
///
/// `done` selects the EFD (`LI_EFD`, `id` = the EFI's id) over the EFI;
/// `rt` selects the realtime variants.
pub fn encode_free_extents(
    order: HostOrder,
    done: bool,
    rt: bool,
    id: u64,
    extents: &[FreeExtent],
) -> Vec<u8> {
    let ty = match (done, rt) {
        (false, false) => LI_EFI,
        (true, false) => LI_EFD,
        (false, true) => LI_EFI_RT,
        (true, true) => LI_EFD_RT,
    };
    let mut b = vec![0u8; 16 + 16 * extents.len()];
    order.put_u16(&mut b, 0, ty);
    order.put_u16(&mut b, 2, 1);
    order.put_u32(&mut b, 4, extents.len() as u32);
    order.put_u64(&mut b, 8, id);
    for (i, e) in extents.iter().enumerate() {
        order.put_u64(&mut b, 16 + 16 * i, e.start);
        order.put_u32(&mut b, 24 + 16 * i, e.len);
    }
    b
}

#[cfg(test)]
#[path = "log_items_tests.rs"]
mod tests;
