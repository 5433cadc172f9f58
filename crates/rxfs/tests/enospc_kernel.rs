//! ENOSPC (issue 4): a small filesystem filled through the read-write
//! library with directories, files of mixed sizes (some written in small
//! scattered pieces: many extents, btree forks), symlinks and hard links
//! and extended attributes (inline, leaf and node attr forks, remote
//! values) until allocations fail with ENOSPC; every failure must be clean (the
//! operation changed nothing, or a write stopped short and said so). Then
//! unmount, `xfs_repair -n` exit 0, the kernel sees exactly what rxfs says
//! exists, and statfs agrees between rxfs and the kernel. Then everything
//! is deleted, and a second fill must store as much data as the first
//! (space fully reusable).

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use common::*;
use rxfs::fs::ops_ns::CreateArgs;
use rxfs::types::Ino;
use rxfs::{Error, Filesystem, MountOptions};

fn repair_ok(img: &Path) {
    let out = std::process::Command::new("xfs_repair")
        .arg("-n")
        .arg(img)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "xfs_repair -n:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What the fill made: path -> file bytes (None: a directory or symlink).
type Made = BTreeMap<String, Option<Vec<u8>>>;
/// path -> its extended attributes.
type Xattrs = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;

/// Give `ino` up to `n` attributes, some with remote values; stops at the
/// first ENOSPC (which must have changed nothing).
fn add_xattrs(fs: &Filesystem, ino: Ino, n: u64, seed: u64, out: &mut BTreeMap<Vec<u8>, Vec<u8>>) {
    for i in 0..n {
        let name = format!("user.enospc-attribute-{i:03}").into_bytes();
        let len = match (seed + i) % 5 {
            0 => 3000,
            1 => 200,
            _ => 40,
        };
        let val = pattern(seed.wrapping_mul(31) ^ i, len);
        match fs.setxattr(ino, &name, &val, rxfs::fs::ops_attr::XattrSet::Any) {
            Ok(()) => {
                out.insert(name, val);
            }
            Err(Error::NoSpace) => return,
            Err(e) => panic!("setxattr: {e}"),
        }
    }
}

/// Fill until ENOSPC; returns what exists, its xattrs and the file bytes
/// stored.
fn fill(fs: &Arc<Filesystem>, round: u32, seed: u64) -> (Made, Xattrs, u64) {
    let root = fs.root_ino();
    let mut made = Made::new();
    let mut xattrs = Xattrs::new();
    let mut bytes = 0u64;
    let mut x = seed;
    let mut rnd = move |n: u64| {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) % n
    };
    let mut full = 0;
    'outer: for d in 0..10_000u32 {
        let dname = format!("r{round}d{d}");
        let dino = match fs.mkdir(root, dname.as_bytes(), &CreateArgs::root(0o40755)) {
            Ok(ip) => ip.ino,
            Err(Error::NoSpace) => break,
            Err(e) => panic!("mkdir {dname}: {e}"),
        };
        made.insert(format!("/{dname}"), None);
        if d % 3 == 0 {
            let x = xattrs.entry(format!("/{dname}")).or_default();
            add_xattrs(fs, dino, 60, seed + d as u64, x);
        }
        for f in 0..40u32 {
            let name = format!("f{f}");
            let path = format!("/{dname}/{name}");
            let ino = match fs.create(dino, name.as_bytes(), &CreateArgs::root(0o100644)) {
                Ok(ip) => ip.ino,
                Err(Error::NoSpace) => {
                    full += 1;
                    if full > 3 {
                        break 'outer;
                    }
                    continue;
                }
                Err(e) => panic!("create {path}: {e}"),
            };
            let mut content = Vec::new();
            let scattered = rnd(4) == 0;
            let pieces = if scattered { 40 } else { 1 };
            for p in 0..pieces {
                let len = if scattered {
                    700
                } else {
                    1 + rnd(200_000) as usize
                };
                let off = if scattered { p * 8192 } else { 0 };
                let data = pattern(seed ^ (d as u64) << 8 ^ f as u64 ^ p, len);
                match fs.write(ino, off, &data) {
                    Ok(n) => {
                        let end = off as usize + n;
                        if content.len() < end {
                            content.resize(end, 0);
                        }
                        content[off as usize..end].copy_from_slice(&data[..n]);
                        bytes += n as u64;
                        if n < data.len() {
                            break;
                        }
                    }
                    Err(Error::NoSpace) => break,
                    Err(e) => panic!("write {path}: {e}"),
                }
            }
            // What a short or failed write left is what the file holds.
            let ip = fs.iget(ino).unwrap();
            content.resize(ip.core.size as usize, 0);
            made.insert(path.clone(), Some(content));
            let nx = [0, 0, 3, 12, 40][rnd(5) as usize];
            if nx > 0 {
                let x = xattrs.entry(path.clone()).or_default();
                add_xattrs(fs, ino, nx, seed ^ ((d as u64) << 16) ^ f as u64, x);
            }
            if rnd(5) == 0 {
                let l = format!("/{dname}/s{f}");
                match fs.symlink(
                    dino,
                    format!("s{f}").as_bytes(),
                    &[b'x'; 600],
                    &CreateArgs::root(0),
                ) {
                    Ok(_) => {
                        made.insert(l, None);
                    }
                    Err(Error::NoSpace) => {}
                    Err(e) => panic!("symlink {l}: {e}"),
                }
            }
        }
    }
    (made, xattrs, bytes)
}

/// The user attributes of `p` through the kernel.
fn kernel_xattrs(p: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    let c = cpath(p);
    let mut names = vec![0u8; 1 << 16];
    let n = unsafe { libc::llistxattr(c.as_ptr(), names.as_mut_ptr() as *mut _, names.len()) };
    assert!(n >= 0, "llistxattr {p:?}");
    let mut out = BTreeMap::new();
    for name in names[..n as usize]
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
    {
        let cn = std::ffi::CString::new(name).unwrap();
        let mut val = vec![0u8; 1 << 16];
        let l = unsafe {
            libc::lgetxattr(
                c.as_ptr(),
                cn.as_ptr(),
                val.as_mut_ptr() as *mut _,
                val.len(),
            )
        };
        assert!(
            l >= 0,
            "lgetxattr {p:?} {:?}",
            std::ffi::OsStr::from_bytes(name)
        );
        val.truncate(l as usize);
        out.insert(name.to_vec(), val);
    }
    out
}

fn check_kernel(s: &Scratch, img: &Path, made: &Made, xattrs: &Xattrs) {
    repair_ok(img);
    let mnt = s.path("k");
    let k = KernelMount::new(img, &mnt, "");
    for (p, c) in made {
        let md =
            std::fs::symlink_metadata(mnt.join(&p[1..])).unwrap_or_else(|e| panic!("{p}: {e}"));
        if let Some(c) = c {
            let got = std::fs::read(mnt.join(&p[1..])).unwrap();
            assert!(
                got == *c,
                "{p}: contents differ ({} vs {} bytes)",
                got.len(),
                c.len()
            );
        } else {
            assert!(md.is_dir() || md.file_type().is_symlink(), "{p}");
        }
        if !md.file_type().is_symlink() {
            let want = xattrs.get(p).cloned().unwrap_or_default();
            assert!(
                kernel_xattrs(&mnt.join(&p[1..])) == want,
                "{p}: xattrs differ"
            );
        }
    }
    k.umount();
    repair_ok(img);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn enospc_fill_delete_refill() {
    require_root();
    let s = Scratch::new("enospc");
    let img = s.path("img");
    mkfs_with(&img, 48 << 20, &[], FSTESTS_ENV);
    let open = || Filesystem::open_path(&img, None, MountOptions::default()).unwrap();
    let fs = open();
    let empty = fs.statfs().unwrap();
    let (made, xattrs, bytes1) = fill(&fs, 1, 1);
    let nx: usize = xattrs.values().map(|x| x.len()).sum();
    assert!(nx > 100, "only {nx} xattrs were set");
    let full = fs.statfs().unwrap();
    assert!(
        full.bfree * 50 < empty.bfree,
        "the fill stopped early: {} of {} blocks free",
        full.bfree,
        empty.bfree
    );
    assert_eq!(
        fs.stats().ag_lock_order_violations,
        0,
        "AG header lock order"
    );
    fs.unmount().unwrap();
    drop(fs);
    check_kernel(&s, &img, &made, &xattrs);
    // statfs through the kernel equals rxfs's after a fresh mount.
    let fs = open();
    let ours = fs.statfs().unwrap();
    assert_eq!(
        fs.stats().ag_lock_order_violations,
        0,
        "AG header lock order"
    );
    fs.unmount().unwrap();
    drop(fs);
    // Read-only: a read-write kernel mount holds back its reserve pool.
    let mnt = s.path("k2");
    let k = KernelMount::new(&img, &mnt, "ro");
    let theirs = statvfs(&mnt);
    k.umount();
    assert_eq!(
        (ours.blocks, ours.bfree, ours.files - ours.ffree),
        (
            theirs.f_blocks,
            theirs.f_bfree,
            theirs.f_files - theirs.f_ffree
        ),
        "statfs: rxfs vs kernel"
    );
    // Delete everything, then fill again: the space is all reusable.
    let fs = open();
    let root = fs.root_ino();
    let mut dirs: Vec<&String> = made
        .keys()
        .filter(|p| p.matches('/').count() == 1)
        .collect();
    dirs.sort();
    for (p, _) in made.iter().filter(|(p, _)| p.matches('/').count() == 2) {
        let (d, n) = p[1..].split_once('/').unwrap();
        let dino: Ino = fs.lookup(&fs.iget(root).unwrap(), d.as_bytes()).unwrap();
        fs.unlink(dino, n.as_bytes()).unwrap();
    }
    for d in dirs {
        fs.rmdir(root, &d.as_bytes()[1..]).unwrap();
    }
    let freed = fs.statfs().unwrap();
    assert_eq!(
        (freed.bfree, freed.files - freed.ffree),
        (empty.bfree, empty.files - empty.ffree),
        "after deleting everything: free blocks and used inodes as when empty"
    );
    // The same random choices as the first fill (names differ by round).
    let (made2, xattrs2, bytes2) = fill(&fs, 2, 1);
    let full2 = fs.statfs().unwrap();
    assert!(
        full2.bfree * 50 < empty.bfree,
        "the second fill stopped early: {} of {} blocks free",
        full2.bfree,
        empty.bfree
    );
    assert_eq!(
        fs.stats().ag_lock_order_violations,
        0,
        "AG header lock order"
    );
    fs.unmount().unwrap();
    drop(fs);
    check_kernel(&s, &img, &made2, &xattrs2);
    // Both fills stored as much (file bytes plus attr values).
    let xbytes = |x: &Xattrs| -> u64 {
        x.values()
            .flat_map(|m| m.values())
            .map(|v| v.len() as u64)
            .sum()
    };
    let (t1, t2) = (bytes1 + xbytes(&xattrs), bytes2 + xbytes(&xattrs2));
    assert!(
        t2 * 100 >= t1 * 97,
        "second fill stored {t2} bytes, the first {t1} (free after delete {} vs empty {})",
        freed.bfree,
        empty.bfree
    );
    eprintln!(
        "enospc: fill 1 stored {bytes1} bytes in {} entries with {nx} xattrs; after deleting, \
         {} of {} blocks free; fill 2 stored {bytes2} bytes",
        made.len(),
        freed.bfree,
        empty.bfree
    );
}
