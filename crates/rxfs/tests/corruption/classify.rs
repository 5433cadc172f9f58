//! Metadata discovery: turn the reads recorded during a metadata-only walk
//! into a list of metadata blocks, each classified by its magic number with
//! its CRC offset and the self-describing context (its own block number in
//! the address space its parents use) that structural mutations need.

use std::collections::BTreeSet;

use rxfs::bdev::ReadRecord;
use rxfs::format::{be16, be32, be64};
use rxfs::types::{FsBlock, Ino};
use rxfs::Filesystem;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Sb,
    Agf,
    Agi,
    Agfl,
    /// Short-format AG btree block (AB3B, AB3C, IAB3, FIB3, RMB3, R3FC).
    ShortBt(u32),
    Bmbt,
    Inode,
    /// Directory data block: XDB3 (block form) or XDD3.
    DirData(u32),
    DirFree,
    DaNode,
    DirLeaf1,
    DirLeafN,
    AttrLeaf,
    AttrRemote,
    Symlink,
    Log,
}

impl Kind {
    pub fn name(self) -> String {
        match self {
            Kind::ShortBt(m) | Kind::DirData(m) => String::from_utf8_lossy(&m.to_be_bytes()).into(),
            k => format!("{k:?}"),
        }
    }

    /// Offset of the CRC in the block, if it has one.
    pub fn crc_off(self) -> Option<usize> {
        Some(match self {
            Kind::Sb => 224,
            Kind::Agf => 216,
            Kind::Agi => 312,
            Kind::Agfl => 32,
            Kind::ShortBt(_) => 52,
            Kind::Bmbt => 64,
            Kind::Inode => 100,
            Kind::DirData(_) | Kind::DirFree => 4,
            Kind::DaNode | Kind::DirLeaf1 | Kind::DirLeafN | Kind::AttrLeaf => 12,
            Kind::AttrRemote | Kind::Symlink => 12,
            Kind::Log => return None,
        })
    }

    /// Offset and width of the magic number.
    pub fn magic_field(self) -> Option<(usize, usize)> {
        match self {
            Kind::DaNode | Kind::DirLeaf1 | Kind::DirLeafN | Kind::AttrLeaf => Some((8, 2)),
            Kind::Inode => Some((0, 2)),
            Kind::Log => None,
            _ => Some((0, 4)),
        }
    }

    /// Whether a stale CRC / bad magic / zeroed block must be reported as
    /// corruption when the walk reads it. The log is read for its state
    /// (cycle numbers, record headers) and not every byte read is covered
    /// by a checksum the state detection must verify.
    pub fn must_detect(self) -> bool {
        self != Kind::Log
    }
}

/// One metadata block the walk depends on.
#[derive(Debug, Clone)]
pub struct Target {
    pub offset: u64,
    /// Bytes of the whole logical block (all pieces).
    pub len: usize,
    /// Where the block lies on disk, in order: one piece, or several for a
    /// directory block spanning discontiguous extents.
    pub pieces: Vec<(u64, usize)>,
    /// A directory block (directory-block sized, possibly several pieces).
    pub dir_block: bool,
    pub kind: Kind,
    /// Own address in the space pointers to it use: agbno for short btree
    /// blocks, fsblock for bmbt blocks, dablk for DA-family and directory
    /// blocks (if the owner's fork maps it), inode number for inodes.
    pub self_addr: Option<u64>,
    /// Root of its tree in the same address space (DA trees), for
    /// pointers back at an ancestor.
    pub root_addr: Option<u64>,
}

const SHORT_MAGICS: [&[u8; 4]; 6] = [b"AB3B", b"AB3C", b"IAB3", b"FIB3", b"RMB3", b"R3FC"];

fn kind_of(fs: &Filesystem, b: &[u8], offset: u64) -> Option<Kind> {
    let geo = fs.geo();
    let log_start = geo.log_daddr().bytes();
    let log_end = log_start + ((geo.logblocks as u64) << geo.blocklog);
    if (log_start..log_end).contains(&offset) {
        return Some(Kind::Log);
    }
    if b.len() == geo.inodesize as usize && &b[0..2] == b"IN" {
        return Some(Kind::Inode);
    }
    if b.len() < 16 {
        return None;
    }
    let m = be32(b, 0);
    let mb = m.to_be_bytes();
    let k = match &mb {
        b"XFSB" => Kind::Sb,
        b"XAGF" => Kind::Agf,
        b"XAGI" => Kind::Agi,
        b"XAFL" => Kind::Agfl,
        b"BMA3" => Kind::Bmbt,
        b"XDB3" | b"XDD3" => Kind::DirData(m),
        b"XDF3" => Kind::DirFree,
        b"XARM" => Kind::AttrRemote,
        b"XSLM" => Kind::Symlink,
        x if SHORT_MAGICS.contains(&x) => Kind::ShortBt(m),
        _ => match be16(b, 8) {
            0x3ebe => Kind::DaNode,
            0x3df1 => Kind::DirLeaf1,
            0x3dff => Kind::DirLeafN,
            0x3bee => Kind::AttrLeaf,
            _ => return None,
        },
    };
    Some(k)
}

impl Target {
    /// The block's bytes in `image` (pieces concatenated).
    pub fn bytes(&self, image: &[u8]) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len);
        for &(o, l) in &self.pieces {
            v.extend_from_slice(&image[o as usize..o as usize + l]);
        }
        v
    }
}

fn is_dir_kind(k: Kind) -> bool {
    matches!(
        k,
        Kind::DirData(_) | Kind::DirFree | Kind::DirLeaf1 | Kind::DirLeafN | Kind::DaNode
    )
}

/// Classify recorded reads against the pristine image. Returns the targets
/// and the reads nothing recognised (which the caller reports).
///
/// Reads come in issue order: a directory block larger than a filesystem
/// block that spans discontiguous extents is read piece by piece, so a
/// directory-kind read shorter than the directory block collects the reads
/// right after it until the block is whole.
pub fn classify(
    fs: &Filesystem,
    image: &[u8],
    reads: &[ReadRecord],
) -> (Vec<Target>, Vec<ReadRecord>) {
    let geo = fs.geo();
    let bs = geo.blocksize as usize;
    let dirblk = geo.dirblksize as usize;
    let mut out: Vec<Target> = Vec::new();
    let mut unknown = Vec::new();
    let mut seen = BTreeSet::new();
    // A directory block still missing pieces: its index in `out` (None
    // when it was seen before and its pieces are only skipped) and the
    // bytes still to come.
    let mut open: Option<(Option<usize>, usize)> = None;
    for r in reads {
        let end = r.offset as usize + r.len;
        if end > image.len() {
            continue;
        }
        if let Some((idx, left)) = open {
            if r.len <= left {
                if let Some(i) = idx {
                    out[i].pieces.push((r.offset, r.len));
                    out[i].len += r.len;
                }
                open = (left > r.len).then_some((idx, left - r.len));
                continue;
            }
            open = None;
        }
        let b = &image[r.offset as usize..end];
        // Remote attribute values and symlink targets: one header per block.
        let pieces: Vec<ReadRecord> =
            if r.len > bs && r.len % bs == 0 && matches!(&b[0..4], b"XARM" | b"XSLM") {
                (0..r.len / bs)
                    .map(|i| ReadRecord {
                        offset: r.offset + (i * bs) as u64,
                        len: bs,
                    })
                    .collect()
            } else {
                vec![*r]
            };
        for p in pieces {
            let b = &image[p.offset as usize..p.offset as usize + p.len];
            let Some(kind) = kind_of(fs, b, p.offset) else {
                unknown.push(p);
                continue;
            };
            // DA nodes serve directories and attribute forks alike; only a
            // block the data fork maps is a directory block.
            let (self_addr, root_addr) = context(fs, kind, b, p.offset);
            let dir_block = is_dir_kind(kind)
                && (kind != Kind::DaNode || in_data_fork(fs, be64(b, 48), p.offset));
            let partial = dir_block && p.len < dirblk;
            if !seen.insert((p.offset, p.len)) {
                if partial {
                    open = Some((None, dirblk - p.len));
                }
                continue;
            }
            out.push(Target {
                offset: p.offset,
                len: p.len,
                pieces: vec![(p.offset, p.len)],
                dir_block,
                kind,
                self_addr,
                root_addr,
            });
            if partial {
                open = Some((Some(out.len() - 1), dirblk - p.len));
            }
        }
    }
    // A partial block whose other pieces were read before (cached elsewhere)
    // cannot be rebuilt: drop it.
    out.retain(|t| !t.dir_block || t.len == dirblk);
    (out, unknown)
}

fn fsb_of(fs: &Filesystem, offset: u64) -> u64 {
    let geo = fs.geo();
    let lin = offset >> geo.blocklog;
    ((lin / geo.agblocks as u64) << geo.agblklog) | (lin % geo.agblocks as u64)
}

/// Whether inode `owner`'s data fork maps the block at byte `offset`.
fn in_data_fork(fs: &Filesystem, owner: u64, offset: u64) -> bool {
    dablk(fs, owner, fsb_of(fs, offset), false).0.is_some()
}

fn context(fs: &Filesystem, kind: Kind, b: &[u8], offset: u64) -> (Option<u64>, Option<u64>) {
    let geo = fs.geo();
    let lin = offset >> geo.blocklog;
    let agno = lin / geo.agblocks as u64;
    let agbno = lin % geo.agblocks as u64;
    let fsb = (agno << geo.agblklog) | agbno;
    match kind {
        Kind::ShortBt(_) => (Some(agbno), None),
        Kind::Bmbt => (Some(fsb), None),
        Kind::Inode => (Some(be64(b, 152)), None),
        Kind::DirData(_) | Kind::DirFree => dablk(fs, be64(b, 40), fsb, false),
        Kind::DirLeaf1 | Kind::DirLeafN => dablk(fs, be64(b, 48), fsb, false),
        Kind::AttrLeaf => dablk(fs, be64(b, 48), fsb, true),
        Kind::DaNode => {
            let owner = be64(b, 48);
            let d = dablk(fs, owner, fsb, false);
            if d.0.is_some() {
                d
            } else {
                dablk(fs, owner, fsb, true)
            }
        }
        _ => (None, None),
    }
}

/// The fork block (and the DA root's fork block) at which inode `owner`
/// maps filesystem block `fsb`.
fn dablk(fs: &Filesystem, owner: u64, fsb: u64, attr: bool) -> (Option<u64>, Option<u64>) {
    let Ok(ip) = fs.iget(Ino(owner)) else {
        return (None, None);
    };
    let fork = if attr {
        ip.attr.as_ref()
    } else {
        Some(&ip.data)
    };
    let Some(fork) = fork else {
        return (None, None);
    };
    let geo = fs.geo();
    // Directory leaf/node trees are rooted at the 32 GiB leaf offset.
    let root = if attr {
        0
    } else {
        (32u64 << 30) >> geo.blocklog
    };
    for e in fork.extents() {
        let (start_agno, start_agbno) = (
            geo.fsb_agno(FsBlock(e.start)).0 as u64,
            geo.fsb_agbno(FsBlock(e.start)).0 as u64,
        );
        let (agno, agbno) = (fsb >> geo.agblklog, fsb & ((1 << geo.agblklog) - 1));
        if agno == start_agno && agbno >= start_agbno && agbno < start_agbno + e.len {
            return (Some(e.off.0 + agbno - start_agbno), Some(root));
        }
    }
    (None, None)
}
