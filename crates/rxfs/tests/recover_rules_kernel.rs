//! Recovery rules checked on kernel logs: the v5 LSN skip rule, unlinked
//! inodes with btree forks (freed like the kernel does), and the refusal
//! of what rxfs cannot finish (an unlinked reflink file).
//!
//! Needs root; fails (never skips) unless RXFS_SKIP_KERNEL_TESTS=1.

mod common;
mod recover_support;

use std::collections::BTreeMap;
use std::process::Command;

use common::*;
use recover_support::*;
use rxfs::Filesystem;
/// The v5 LSN rule on a kernel log: stamp the head LSN into one block and
/// one inode that the log changes (as if they had been written back after
/// the last checkpoint); recovery must skip every item for them and leave
/// their on-disk bytes alone, while replaying the rest.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn lsn_rule_skips_newer_metadata() {
    use rxfs::format::log_items::ItemFormat;
    use rxfs::format::meta_header::meta_header;
    if kernel_tests_disabled() {
        return;
    }
    let scr = Scratch::new("recover-lsn");
    let img = scr.path("img");
    mkfs(&img, 512 << 20, &[]);
    let mnt = scr.path("mnt");
    let m = KernelMount::new(&img, &mnt, "");
    let held = workload(&mnt, 77, 400, 1000, false);
    run(
        "xfs_io",
        &["-x", "-c", "shutdown -f", mnt.to_str().unwrap()],
    );
    drop(held);
    m.umount();
    let norec = Filesystem::open_path(
        &img,
        None,
        rxfs::MountOptions {
            read_only: true,
            norecovery: true,
            ..Default::default()
        },
    )
    .unwrap();
    let st = norec.log_state().unwrap().clone();
    let c = norec.log().unwrap().contents(&st).unwrap();
    let order = c.order.unwrap();
    let head = st.head;
    // Items per target.
    let mut bufs: BTreeMap<(u64, u16), u64> = BTreeMap::new();
    let mut inodes: BTreeMap<(u64, i32, i32, u64), u64> = BTreeMap::new();
    // Chunks (re)initialised by ICREATE items: their inodes lose the LSN.
    let mut fresh: Vec<(u64, u64)> = Vec::new();
    for t in &c.transactions {
        for it in &t.items {
            match it.format(order, rxfs::error::Location::Unknown).unwrap() {
                ItemFormat::Buf(b) if !b.is_cancel() && !b.is_inode_buf() => {
                    *bufs.entry((b.blkno, b.len)).or_default() += 1
                }
                ItemFormat::Icreate(ic) => {
                    let g = norec.geo();
                    let d = g
                        .agb_to_daddr(rxfs::types::AgNumber(ic.ag), rxfs::types::AgBlock(ic.agbno))
                        .0;
                    fresh.push((d, d + ((ic.length as u64) << (g.blocklog - 9))));
                }
                ItemFormat::Inode(i) => {
                    *inodes
                        .entry((i.blkno, i.len, i.boffset, i.ino))
                        .or_default() += 1
                }
                _ => {}
            }
        }
    }
    let baseline = open_ro(&img).recovery_stats().cloned().unwrap();
    // A logged metadata block that already exists on disk with our header.
    let (&(daddr, len), &nbuf) = bufs
        .iter()
        .find(|((d, l), _)| {
            let b = norec
                .read_raw(rxfs::types::Daddr(*d), *l as usize * 512)
                .unwrap();
            meta_header(&b).is_some() && *d != 0
        })
        .expect("a logged metadata block");
    let h = meta_header(
        &norec
            .read_raw(rxfs::types::Daddr(daddr), len as usize * 512)
            .unwrap(),
    )
    .unwrap();
    patch(&img, daddr, len as usize * 512, h.crc_off, |b| {
        b[h.lsn_off..h.lsn_off + 8].copy_from_slice(&(head.0 as u64).to_be_bytes())
    });
    // A logged inode that is initialised on disk.
    let (&(iblk, _, boff, ino), &nino) = inodes
        .iter()
        .find(|((b, l, o, _), _)| {
            if fresh.iter().any(|&(s, e)| *b >= s && *b < e) {
                return false;
            }
            let c = norec
                .read_raw(rxfs::types::Daddr(*b), *l as usize * 512)
                .unwrap();
            c[*o as usize..*o as usize + 2] == *b"IN" && c[*o as usize + 4] == 3
        })
        .expect("a logged inode");
    let isize = norec.geo().inodesize as usize;
    drop(norec);
    let idaddr = iblk + (boff as u64 >> 9);
    let ioff = boff as usize & 511;
    patch(
        &img,
        idaddr,
        512.max(ioff + isize).next_multiple_of(512),
        ioff + 100,
        |b| b[ioff + 112..ioff + 120].copy_from_slice(&(head.0 as u64).to_be_bytes()),
    );
    let want_blk = std::fs::read(&img).unwrap();
    let fs = open_ro(&img);
    let s = fs.recovery_stats().cloned().unwrap();
    eprintln!("baseline: {baseline}\npatched:  {s}");
    assert_eq!(s.buf_skipped_lsn, baseline.buf_skipped_lsn + nbuf, "{s}");
    assert_eq!(
        s.inode_skipped_lsn,
        baseline.inode_skipped_lsn + nino,
        "{s}"
    );
    let got = fs
        .read_raw(rxfs::types::Daddr(daddr), len as usize * 512)
        .unwrap();
    let at = daddr as usize * 512;
    assert_eq!(
        &got[..],
        &want_blk[at..at + got.len()],
        "skipped block changed"
    );
    let got = fs.read_raw(rxfs::types::Daddr(idaddr), 512).unwrap();
    let at = idaddr as usize * 512;
    assert_eq!(&got[ioff..ioff + 2], b"IN");
    assert_eq!(
        &got[..],
        &want_blk[at..at + 512],
        "skipped inode {ino} changed"
    );
}

/// A crash in the middle of freeing a file of 12,800 extents leaves the
/// inode on the AGI unlinked list with a btree-format data fork (and
/// often an EFI without its EFD). rxfs finishes the EFIs and frees the
/// whole btree fork: the three recoveries must agree (tree, space
/// accounting, `xfs_repair -n`).
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn unlinked_btree_inode_like_the_kernel() {
    let scr = Scratch::new("recover-btree-unlinked");
    let img = scr.path("img");
    let mnt = scr.path("mnt");
    let mut cmds = String::from("falloc 0 100m\n");
    for i in 0..12800u64 {
        cmds += &format!("fpunch {} 4096\n", i * 8192);
    }
    let mut hit = None;
    for attempt in 0..10 {
        mkfs(&img, 512 << 20, &[]);
        let m = KernelMount::new(&img, &mnt, "");
        let big = mnt.join("big");
        let mut io = Command::new("xfs_io")
            .arg("-f")
            .arg(&big)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        use std::io::Write;
        io.stdin.take().unwrap().write_all(cmds.as_bytes()).unwrap();
        assert!(io.wait().unwrap().success());
        unsafe { libc::sync() };
        let mut rm = Command::new("rm").arg(&big).spawn().unwrap();
        run(
            "xfs_io",
            &["-x", "-c", "shutdown -f", mnt.to_str().unwrap()],
        );
        let _ = rm.wait();
        m.umount();
        match recover_three_ways(&scr, &img, attempt) {
            Recovery::Compared(st, _) if st.unlinked_blocks_freed > 1000 => {
                hit = Some((attempt, st));
                break;
            }
            Recovery::Compared(..) => {}
            Recovery::Refused(msg) => panic!("attempt {attempt}: refused: {msg}"),
        }
    }
    let (attempt, st) = hit.expect("no attempt left the big file on an unlinked list");
    eprintln!("attempt {attempt}: {st}");
}

/// A file sharing its blocks with another (reflink copy), removed while
/// held open: on the unlinked list with the reflink flag. Freeing shared
/// extents needs the refcount btree, which rxfs does not change: the
/// read-only open recovers and leaves the inode in place (unreachable; the
/// stats say so), `recover_to_device` refuses naming the reflink file and
/// writes nothing, `-o ro,norecovery` opens it, and the kernel recovers it.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn unlinked_reflink_inode_is_refused() {
    let scr = Scratch::new("recover-reflink-unlinked");
    let img = scr.path("img");
    let mnt = scr.path("mnt");
    mkfs(&img, 512 << 20, &[]);
    let m = KernelMount::new(&img, &mnt, "");
    let (a, b) = (mnt.join("a"), mnt.join("b"));
    std::fs::write(&a, vec![7u8; 1 << 20]).unwrap();
    run(
        "cp",
        &["--reflink=always", a.to_str().unwrap(), b.to_str().unwrap()],
    );
    unsafe { libc::sync() };
    let held = std::fs::File::open(&b).unwrap();
    std::fs::remove_file(&b).unwrap();
    run(
        "xfs_io",
        &["-x", "-c", "shutdown -f", mnt.to_str().unwrap()],
    );
    drop(held);
    m.umount();
    let fs = open_ro(&img);
    let st = fs.recovery_stats().cloned().unwrap();
    assert!(st.unlinked_kept && st.unlinked_buckets == 1, "{st}");
    drop(fs);
    let norec = Filesystem::open_path(
        &img,
        None,
        rxfs::MountOptions {
            read_only: true,
            norecovery: true,
            ..Default::default()
        },
    );
    assert!(norec.is_ok(), "norecovery open of a dirty log");
    drop(norec);
    let copy = scr.path("copy");
    run(
        "cp",
        &[
            "--sparse=always",
            img.to_str().unwrap(),
            copy.to_str().unwrap(),
        ],
    );
    let dev = rxfs::bdev::FileDevice::open(&copy, false, false).unwrap();
    let e = rxfs::fs::recover_to_device(std::sync::Arc::new(dev)).unwrap_err();
    assert!(
        matches!(e, rxfs::Error::NotSupported(_)) && e.to_string().contains("reflink file"),
        "{e}"
    );
    let same = Command::new("cmp").args([&img, &copy]).status().unwrap();
    assert!(same.success(), "a refused recovery wrote the device");
    KernelMount::new(&img, &mnt, "").umount();
    run("xfs_repair", &["-n", img.to_str().unwrap()]);
    let fs = open_ro(&img);
    assert!(fs.recovery_stats().is_none());
}
