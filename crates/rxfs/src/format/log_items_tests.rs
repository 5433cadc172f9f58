//! Tests of the log item decoders and encoders.

use super::*;

const O: HostOrder = HostOrder::Little;
const AT: Location = Location::Unknown;

#[test]
fn buf_format() {
    let mut b = vec![0u8; 24];
    O.put_u16(&mut b, 0, LI_BUF);
    O.put_u16(&mut b, 2, 2);
    O.put_u16(&mut b, 4, (7 << 11) | BLF_INODE_BUF);
    O.put_u16(&mut b, 6, 8);
    O.put_u64(&mut b, 8, 0x1234);
    O.put_u32(&mut b, 16, 1);
    O.put_u32(&mut b, 20, 0b1011);
    let f = ItemFormat::decode(&[b.clone()], O, AT).unwrap();
    let ItemFormat::Buf(bf) = &f else {
        panic!("{f:?}")
    };
    assert_eq!(bf.blkno, 0x1234);
    assert_eq!(bf.len, 8);
    assert_eq!(bf.buf_type(), 7);
    assert!(bf.is_inode_buf() && !bf.is_cancel());
    assert_eq!(bf.dirty_chunks(), 3);
    assert_eq!(f.name(), "BUF");
    // Bitmap larger than the region.
    O.put_u32(&mut b, 16, 2);
    assert!(ItemFormat::decode(&[b.clone()], O, AT).is_err());
    O.put_u32(&mut b, 16, 1000);
    assert!(ItemFormat::decode(&[b], O, AT).is_err());
}

#[test]
fn inode_formats_64_and_32() {
    let mut b = vec![0u8; 56];
    O.put_u16(&mut b, 0, LI_INODE);
    O.put_u16(&mut b, 2, 3);
    O.put_u32(&mut b, 4, 0x5);
    O.put_u16(&mut b, 10, 16);
    O.put_u64(&mut b, 16, 0x83);
    O.put_u64(&mut b, 40, 0x60);
    O.put_u32(&mut b, 48, 32);
    O.put_u32(&mut b, 52, 1536);
    let ItemFormat::Inode(i) = ItemFormat::decode(&[b.clone()], O, AT).unwrap() else {
        panic!()
    };
    assert_eq!(
        (i.ino, i.fields, i.dsize, i.blkno, i.len, i.boffset),
        (0x83, 5, 16, 0x60, 32, 1536)
    );
    let mut s = b[..12].to_vec();
    s.extend_from_slice(&b[16..]);
    let ItemFormat::Inode(j) = ItemFormat::decode(&[s], O, AT).unwrap() else {
        panic!()
    };
    assert_eq!(i, j);
    assert!(ItemFormat::decode(&[b[..40].to_vec()], O, AT).is_err());
}

#[test]
fn intents_and_dones() {
    let mut b = vec![0u8; 16 + 2 * 16];
    O.put_u16(&mut b, 0, LI_EFI);
    O.put_u16(&mut b, 2, 1);
    O.put_u32(&mut b, 4, 2);
    O.put_u64(&mut b, 8, 0xabc);
    O.put_u64(&mut b, 32, 77);
    O.put_u32(&mut b, 40, 5);
    let f = ItemFormat::decode(&[b.clone()], O, AT).unwrap();
    assert_eq!(
        f,
        ItemFormat::Efi {
            rt: false,
            id: 0xabc,
            extents: vec![
                FreeExtent { start: 0, len: 0 },
                FreeExtent { start: 77, len: 5 }
            ]
        }
    );
    O.put_u32(&mut b, 4, 3);
    assert!(ItemFormat::decode(&[b.clone()], O, AT).is_err());
    // 32-bit packed extents (12 bytes).
    let mut p = vec![0u8; 16 + 3 * 12];
    O.put_u16(&mut p, 0, LI_EFD);
    O.put_u32(&mut p, 4, 3);
    O.put_u64(&mut p, 16 + 12, 9);
    let ItemFormat::Efd { extents, .. } = ItemFormat::decode(&[p], O, AT).unwrap() else {
        panic!()
    };
    assert_eq!(extents[1], FreeExtent { start: 9, len: 0 });

    let mut r = vec![0u8; 16 + 32];
    O.put_u16(&mut r, 0, LI_RUI);
    O.put_u32(&mut r, 4, 1);
    O.put_u64(&mut r, 16, 131);
    O.put_u32(&mut r, 40, 8);
    let ItemFormat::Rui { extents, .. } = ItemFormat::decode(&[r], O, AT).unwrap() else {
        panic!()
    };
    assert_eq!((extents[0].owner, extents[0].len), (131, 8));

    let mut d = vec![0u8; 16];
    O.put_u16(&mut d, 0, LI_CUD);
    O.put_u64(&mut d, 8, 42);
    assert_eq!(
        ItemFormat::decode(&[d.clone()], O, AT).unwrap(),
        ItemFormat::Cud {
            rt: false,
            cui_id: 42
        }
    );
    assert!(ItemFormat::decode(&[d[..12].to_vec()], O, AT).is_err());
}

#[test]
fn icreate_and_unknown() {
    let mut b = vec![0u8; 28];
    O.put_u16(&mut b, 0, LI_ICREATE);
    O.put_u16(&mut b, 2, 1);
    b[8..12].copy_from_slice(&0x18u32.to_be_bytes());
    b[12..16].copy_from_slice(&64u32.to_be_bytes());
    let ItemFormat::Icreate(c) = ItemFormat::decode(&[b], O, AT).unwrap() else {
        panic!()
    };
    assert_eq!((c.agbno, c.count), (0x18, 64));
    let mut u = vec![0u8; 8];
    O.put_u16(&mut u, 0, 0x7777);
    O.put_u16(&mut u, 2, 4);
    assert_eq!(
        ItemFormat::decode(&[u], O, AT).unwrap(),
        ItemFormat::Unknown {
            item_type: 0x7777,
            regions: 4
        }
    );
    assert!(ItemFormat::decode(&[vec![1, 2]], O, AT).is_err());
    assert!(ItemFormat::decode(&[], O, AT).is_err());
}

#[test]
fn log_dinode() {
    let mut b = vec![0u8; 176];
    O.put_u16(&mut b, 0, 0x494e);
    O.put_u16(&mut b, 2, 0o100644);
    b[4] = 3;
    b[5] = 2;
    O.put_u64(&mut b, 56, 4096);
    O.put_u64(&mut b, 152, 0x83);
    let d = decode_log_dinode(&b, O, AT).unwrap();
    assert_eq!((d.mode, d.size, d.ino, d.format), (0o100644, 4096, 0x83, 2));
    assert!(decode_log_dinode(&b[..100], O, AT).is_err());
    b[0] = 0;
    assert!(decode_log_dinode(&b, O, AT).is_err());
}

#[test]
fn efi_efd_encode_round_trip() {
    let ext = [
        FreeExtent { start: 77, len: 5 },
        FreeExtent {
            start: 1 << 40,
            len: 9,
        },
    ];
    for order in [HostOrder::Little, HostOrder::Big] {
        for (done, rt) in [(false, false), (true, false), (false, true), (true, true)] {
            let b = encode_free_extents(order, done, rt, 0xfeed, &ext);
            assert_eq!(b.len(), 16 + 32);
            let f = ItemFormat::decode(&[b], order, AT).unwrap();
            let want = if done {
                ItemFormat::Efd {
                    rt,
                    efi_id: 0xfeed,
                    extents: ext.to_vec(),
                }
            } else {
                ItemFormat::Efi {
                    rt,
                    id: 0xfeed,
                    extents: ext.to_vec(),
                }
            };
            assert_eq!(f, want);
        }
    }
    // An EFD of no extents is a 16-byte header.
    let e = encode_free_extents(O, true, false, 1, &[]);
    assert_eq!(e.len(), 16);
}
