//! File data read by rxfs must equal what the kernel reads: extents,
//! btree-format data forks, holes, unwritten extents, > 4 GiB offsets,
//! on several block sizes.

mod common;

use std::collections::BTreeMap;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use common::*;
use rxfs::inode::Inode;
use rxfs::types::Ino;
use rxfs::{Filesystem, MountOptions};
use sha2::{Digest, Sha256};

/// The byte ranges compared: whole files up to 64 MiB; for larger (sparse)
/// files, windows around every place data was written plus hole samples.
fn windows(len: u64) -> Vec<(u64, u64)> {
    if len <= 64 << 20 {
        return vec![(0, len)];
    }
    let mut w = vec![
        (0, 1 << 20),
        (1 << 30, 1 << 20),
        ((4 << 30) - 4096, 1 << 20),
    ];
    w.push((len - (1 << 20), 1 << 20));
    w
}

fn populate(root: &std::path::Path) {
    std::fs::write(root.join("empty"), b"").unwrap();
    std::fs::write(root.join("small"), b"hello").unwrap();
    std::fs::write(root.join("onemeg"), pattern(1, 1 << 20)).unwrap();
    // Many separate extents: btree-format data fork.
    let mut f = std::fs::File::create(root.join("fragmented")).unwrap();
    for i in 0..150u64 {
        f.seek(SeekFrom::Start(i * 8192)).unwrap();
        f.write_all(&pattern(i + 7, 4096)).unwrap();
        f.sync_data().unwrap();
    }
    drop(f);
    // Sparse file past 4 GiB.
    let mut f = std::fs::File::create(root.join("big_sparse")).unwrap();
    f.write_all(b"start").unwrap();
    f.seek(SeekFrom::Start((4 << 30) + 123)).unwrap();
    f.write_all(&pattern(3, 10000)).unwrap();
    f.seek(SeekFrom::Start((5 << 30) - 7)).unwrap();
    f.write_all(b"the end").unwrap();
    drop(f);
    // Preallocated (unwritten) space, partly written.
    let f = std::fs::File::create(root.join("prealloc")).unwrap();
    let rc = unsafe { libc::fallocate(std::os::fd::AsRawFd::as_raw_fd(&f), 0, 0, 1 << 20) };
    assert_eq!(rc, 0);
    let mut f = f;
    f.seek(SeekFrom::Start(300_000)).unwrap();
    f.write_all(&pattern(9, 5000)).unwrap();
    drop(f);
}

fn check_variant(name: &str, opts: &[&str]) {
    if kernel_tests_disabled() {
        return;
    }
    let s = Scratch::new(&format!("read-{name}"));
    let img = s.path("img");
    mkfs(&img, 512 << 20, opts);
    let m = KernelMount::new(&img, &s.path("mnt"), "");
    populate(&m.dir);
    let mut expect: Expect = BTreeMap::new();
    for e in std::fs::read_dir(&m.dir).unwrap() {
        let e = e.unwrap();
        let md = e.metadata().unwrap();
        let mut f = std::fs::File::open(e.path()).unwrap();
        let mut h = Sha256::new();
        for (off, len) in windows(md.len()) {
            let mut b = vec![0u8; len as usize];
            f.seek(SeekFrom::Start(off)).unwrap();
            std::io::Read::read_exact(&mut f, &mut b).unwrap();
            h.update(&b);
        }
        let mut f = std::fs::File::open(e.path()).unwrap();
        let mut first = vec![0u8; (md.len() as usize).min(20_000)];
        std::io::Read::read_exact(&mut f, &mut first).unwrap();
        expect.insert(
            e.file_name().to_string_lossy().into_owned(),
            (md.ino(), md.len(), h.finalize().to_vec(), first),
        );
    }
    m.umount();
    // Every variant is read twice: through the page cache and with O_DIRECT
    // (unaligned requests go through the aligned bounce buffer).
    for direct_io in [false, true] {
        let opts = MountOptions {
            read_only: true,
            direct_io,
            ..Default::default()
        };
        let fs = Filesystem::open_path(&img, None, opts).unwrap();
        check_contents(&fs, &expect);
    }
}

type Expect = BTreeMap<String, (u64, u64, Vec<u8>, Vec<u8>)>;

fn check_contents(fs: &Filesystem, expect: &Expect) {
    // The last inode of the root chunk is free (few files were made): the
    // inode btree says so, whatever the inode core holds.
    let last_in_chunk = fs.root_ino().0 + 63;
    assert!(expect.values().all(|v| v.0 != last_in_chunk));
    assert!(matches!(
        fs.iget(Ino(last_in_chunk)),
        Err(rxfs::Error::NotFound)
    ));
    assert!(matches!(
        fs.iget(Ino(u64::MAX >> 1)),
        Err(rxfs::Error::Invalid(_))
    ));
    for (name, (ino, len, sha, first)) in expect {
        let ip: Arc<Inode> = fs.iget(Ino(*ino)).unwrap();
        assert_eq!(ip.core.size, *len, "{name}: size");
        let mut h = Sha256::new();
        for (off, wlen) in windows(*len) {
            let mut b = vec![0u8; wlen as usize];
            let n = fs.read_file(&ip, off, &mut b).unwrap();
            assert_eq!(n as u64, wlen, "{name}: length read at {off}");
            h.update(&b[..n]);
        }
        assert!(h.finalize().to_vec() == *sha, "{name}: contents differ");
        // Reads at and across EOF are short.
        let mut tail = vec![0u8; 100];
        let n = fs
            .read_file(&ip, len.saturating_sub(10), &mut tail)
            .unwrap();
        assert_eq!(n as u64, (*len).min(10), "{name}: read across EOF");
        assert_eq!(
            fs.read_file(&ip, *len, &mut tail).unwrap(),
            0,
            "{name}: read at EOF"
        );
        // Unaligned reads in the middle.
        if first.len() > 10_000 {
            let mut part = vec![0u8; 7777];
            let n = fs.read_file(&ip, 1234, &mut part).unwrap();
            assert_eq!(&part[..n], &first[1234..1234 + n], "{name}: unaligned read");
        }
        if name == "fragmented" {
            assert!(
                matches!(ip.data, rxfs::inode::Fork::Extents { btree: true, .. }),
                "fragmented file should have a btree data fork"
            );
        }
    }
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn read_default() {
    check_variant("default", &[]);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn read_1k_blocks() {
    check_variant("b1k", &["-b", "size=1024"]);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn read_rmap_nrext64() {
    check_variant("rmap", &["-m", "rmapbt=1", "-i", "nrext64=1"]);
}
