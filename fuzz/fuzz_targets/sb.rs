//! Superblock decode and the geometry built from it, on arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rxfs::format::sb::Superblock;
use rxfs::geometry::Geometry;
use rxfs::types::{AgNumber, FsBlock, Ino, RtBlock};

fuzz_target!(|data: &[u8]| {
    if data.len() < 25 {
        return;
    }
    // The first 24 bytes pick addresses to convert; the rest is the sector.
    let ctl = data[0];
    let a = u64::from_le_bytes(data[1..9].try_into().unwrap());
    let b = u64::from_le_bytes(data[9..17].try_into().unwrap());
    let c = u64::from_le_bytes(data[17..25].try_into().unwrap());
    let mut buf = data[25..].to_vec();
    let _ = Superblock::decode_unverified(&buf);
    if ctl & 1 == 0 && buf.len() >= 512 {
        buf[0..4].copy_from_slice(b"XFSB");
        let ss = rxfs::format::be16(&buf, 102) as usize;
        let n = if (512..=buf.len()).contains(&ss) {
            ss
        } else {
            512
        };
        rxfs::format::crc::update(&mut buf[..n], 224);
    }
    let Ok(sb) = Superblock::decode(&buf, 0) else {
        return;
    };
    let _ = (sb.metadata_uuid(), sb.label(), sb.unknown_incompat());
    let geo = Geometry::new(&sb);
    // Conversions are applied to disk-derived values only after the
    // *_valid checks: those checks must hold on any input.
    let ino = Ino(a);
    if geo.ino_valid(ino) {
        let (d, off) = geo.ino_location(ino);
        assert!(d.bytes() + off as u64 + geo.inodesize as u64 <= geo.dblocks << geo.blocklog);
    }
    if geo.fsb_extent_valid(FsBlock(b), c & 0x1f_ffff) {
        let d = geo.fsb_to_daddr(FsBlock(b));
        assert!(d.bytes() < geo.dblocks << geo.blocklog);
    }
    let _ = geo.rt_extent_valid(RtBlock(b), c);
    if (c as u32) < geo.agcount {
        let _ = geo.ag_size(AgNumber(c as u32));
        let _ = geo.ag_header_daddr(AgNumber(c as u32), 3);
    }
    let _ = (geo.log_daddr(), geo.log_bbs(), geo.dir_fsbs());
    let mut out = vec![0u8; 512];
    sb.encode(&mut out);
});
