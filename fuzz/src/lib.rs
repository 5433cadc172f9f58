//! Shared pieces of the rxfs fuzz targets.
//!
//! Random bytes almost never carry a valid CRC32c, magic number or
//! self-describing header (block number, owner, UUID), so a decoder fed raw
//! fuzz input would only ever exercise its first check. The targets
//! therefore "fix up" the input the way a real block would look (CRC
//! recomputed, self-describing fields set to what the reader expects)
//! unless a control bit asks for the raw bytes, and let the fuzzer own every
//! structural field behind those checks.
//!
//! [`SynthFs`] is a tiny synthetic filesystem (1 AG of 64 blocks of 1 KiB,
//! 512-byte inodes) whose inode 8 and data blocks 8..48 come from the fuzz
//! input: it drives the whole read path (inode and fork decoding, bmbt,
//! directories, attributes, symlinks, file reads) over arbitrary metadata.

use std::sync::Arc;

use rxfs::bdev::MemDevice;
use rxfs::format::{be16, be32, crc, put_be16, put_be32, put_be64};
use rxfs::dir::read::DirEntry;
use rxfs::types::{FileType, Ino};
use rxfs::{Filesystem, MountOptions};

/// The UUID of every synthetic filesystem.
pub const UUID: [u8; 16] = *b"rxfs-fuzz-uuid!!";

/// Set the self-describing fields of a metadata block (recognised by its
/// magic number) to what a reader at `daddr` for inode `owner` expects, and
/// recompute its CRC. Unknown blocks are left alone.
pub fn fixup_block(b: &mut [u8], daddr: u64, owner: u64) {
    if b.len() < 64 {
        return;
    }
    let magic = be32(b, 0);
    let (blkno, uuid, own, crc_off) = match &magic.to_be_bytes() {
        b"BMA3" if b.len() >= 72 => (24, 40, Some((56, 8)), 64),
        b"XDB3" | b"XDD3" | b"XDF3" => (8, 24, Some((40, 8)), 4),
        // Remote value and symlink blocks share one header layout.
        b"XARM" | b"XSLM" => (40, 16, Some((32, 8)), 12),
        b"AB3B" | b"AB3C" | b"IAB3" | b"FIB3" | b"RMB3" | b"R3FC" => (16, 32, None, 52),
        _ => match be16(b, 8) {
            0x3ebe | 0x3df1 | 0x3dff | 0x3bee => (16, 32, Some((48, 8)), 12),
            _ => return,
        },
    };
    put_be64(b, blkno, daddr);
    b[uuid..uuid + 16].copy_from_slice(&UUID);
    if let Some((o, _)) = own {
        put_be64(b, o, owner);
    }
    crc::update(b, crc_off);
}

/// Make `b` (one inode of `b.len()` bytes) a v3 inode numbered `ino`
/// belonging to a filesystem with [`UUID`], with a valid CRC.
pub fn fixup_inode(b: &mut [u8], ino: u64) {
    if b.len() < 512 {
        return;
    }
    b[0] = b'I';
    b[1] = b'N';
    b[4] = 3;
    put_be64(b, 152, ino);
    b[160..176].copy_from_slice(&UUID);
    crc::update(b, 100);
}

/// Geometry of the synthetic filesystem.
pub const BLOCKSIZE: usize = 1024;
pub const DBLOCKS: usize = 64;
/// The fuzzed inode: block 4, slot 0 (2 inodes per block).
pub const INO: u64 = 8;
pub const INODE_BLOCK: usize = 4;
/// Blocks taken from the input.
pub const FIRST_DATA_BLOCK: usize = 8;
pub const LAST_DATA_BLOCK: usize = 48;
const LOG_START: u64 = 48;
const LOG_BLOCKS: u32 = 8;

/// A superblock sector for the synthetic filesystem.
fn superblock() -> Vec<u8> {
    let mut s = vec![0u8; 512];
    s[0..4].copy_from_slice(b"XFSB");
    put_be32(&mut s, 4, BLOCKSIZE as u32);
    put_be64(&mut s, 8, DBLOCKS as u64);
    s[32..48].copy_from_slice(&UUID);
    put_be64(&mut s, 48, LOG_START);
    put_be64(&mut s, 56, INO);
    put_be64(&mut s, 64, u64::MAX); // rbmino: none
    put_be64(&mut s, 72, u64::MAX);
    put_be32(&mut s, 80, 4); // rextsize: 4 KiB, the smallest XFS allows
    put_be32(&mut s, 84, DBLOCKS as u32); // agblocks
    put_be32(&mut s, 88, 1); // agcount
    put_be32(&mut s, 96, LOG_BLOCKS);
    put_be16(&mut s, 100, 0xb4a5);
    put_be16(&mut s, 102, 512);
    put_be16(&mut s, 104, 512);
    put_be16(&mut s, 106, 2);
    s[120] = 10; // blocklog
    s[121] = 9; // sectlog
    s[122] = 9; // inodelog
    s[123] = 1; // inopblog
    s[124] = 6; // agblklog
    s[127] = 25; // imax_pct
    put_be64(&mut s, 160, u64::MAX);
    put_be64(&mut s, 168, u64::MAX);
    put_be32(&mut s, 180, 8); // inoalignmt
    s[193] = 9; // logsectlog (unused: sector logs)
    put_be16(&mut s, 194, 512);
    put_be32(&mut s, 200, 0x18a); // features2: lazysb, attr2, projid32, crc
    put_be32(&mut s, 216, 0x9); // incompat: ftype, bigtime
    put_be64(&mut s, 232, u64::MAX);
    crc::update(&mut s, 224);
    s
}

/// Build a device image: the superblock, inode 8 from `data[..512]`, and
/// blocks 8..48 from the rest. Control bits in `ctl`: 1 = leave CRCs and
/// self-describing fields as the input has them.
pub fn synth_image(ctl: u8, data: &[u8]) -> Vec<u8> {
    let mut img = vec![0u8; DBLOCKS * BLOCKSIZE];
    img[..512].copy_from_slice(&superblock());
    let ioff = INODE_BLOCK * BLOCKSIZE;
    let n = data.len().min(512);
    img[ioff..ioff + n].copy_from_slice(&data[..n]);
    let rest = &data[n..];
    let doff = FIRST_DATA_BLOCK * BLOCKSIZE;
    let max = (LAST_DATA_BLOCK - FIRST_DATA_BLOCK) * BLOCKSIZE;
    let m = rest.len().min(max);
    img[doff..doff + m].copy_from_slice(&rest[..m]);
    if ctl & 1 == 0 {
        fixup_inode(&mut img[ioff..ioff + 512], INO);
        for blk in FIRST_DATA_BLOCK..LAST_DATA_BLOCK {
            let o = blk * BLOCKSIZE;
            let daddr = (o / 512) as u64;
            fixup_block(&mut img[o..o + BLOCKSIZE], daddr, INO);
        }
    }
    img
}

/// A mounted synthetic filesystem.
pub struct SynthFs {
    pub fs: Arc<Filesystem>,
}

impl SynthFs {
    pub fn open(ctl: u8, data: &[u8]) -> Option<Self> {
        let dev = Arc::new(MemDevice::new_read_only(synth_image(ctl, data)));
        let opts = MountOptions {
            read_only: true,
            norecovery: true,
            ..Default::default()
        };
        match Filesystem::open(dev, None, opts) {
            Ok(fs) => Some(SynthFs { fs }),
            // The superblock is fixed: opening must succeed.
            Err(e) => panic!("synthetic filesystem does not open: {e}"),
        }
    }

    /// Every read API on inode `ino` and (one level of) what it links to.
    /// Results are ignored: only panics, hangs and huge allocations count.
    pub fn walk(&self, ino: Ino, depth: u32) {
        let fs = &*self.fs;
        let Ok(ip) = fs.iget(ino) else { return };
        if let Ok(names) = fs.listxattr(&ip) {
            for n in names.iter().take(256) {
                let _ = fs.getxattr(&ip, n);
            }
        }
        let _ = fs.getxattr(&ip, b"user.absent");
        let _ = fs.getxattr(&ip, b"trusted.x");
        match ip.file_type() {
            Some(FileType::Directory) => {
                let mut ents: Vec<DirEntry> = Vec::new();
                let mut cookie = 0;
                for _ in 0..64 {
                    let mut page = Vec::new();
                    let r = fs.readdir(&ip, cookie, &mut |e| {
                        page.push(e.clone());
                        page.len() < 16
                    });
                    let full = page.len() >= 16;
                    match page.last() {
                        Some(l) if l.next_cookie > cookie => cookie = l.next_cookie,
                        _ => break,
                    }
                    ents.extend(page);
                    if r.is_err() || !full {
                        break;
                    }
                }
                for e in ents.iter().take(256) {
                    let _ = fs.lookup(&ip, &e.name);
                }
                let _ = fs.lookup(&ip, b"absent");
                let _ = fs.lookup(&ip, b"..");
                if depth > 0 {
                    for e in ents.iter().take(8) {
                        if e.ino != ino {
                            self.walk(e.ino, depth - 1);
                        }
                    }
                }
            }
            Some(FileType::Symlink) => {
                let _ = fs.readlink(&ip);
            }
            Some(FileType::Regular) => {
                let mut buf = vec![0u8; 8192];
                let _ = fs.read_file(&ip, 0, &mut buf);
                let _ = fs.read_file(&ip, ip.core.size.saturating_sub(100), &mut buf);
                let _ = fs.read_file(&ip, u64::MAX - 10, &mut buf);
            }
            _ => {}
        }
    }
}
