//! Byte parity with the kernel's directory code: the kernel adds or
//! removes one entry (touch / rm on a loop mount), and we make the same
//! change with `rxfs::dir` on a mirror image that went through the same
//! directory operations;
//! the directory must then be byte for byte what the kernel made: the
//! shortform fork (entry offsets, inode-number width) or the block (entry
//! placement, unused slots, bestfree, leaf order, stale entries, tail),
//! and the same di_size, format and form changes (sf -> block -> sf).
//! Only the block's address, CRC and LSN may differ.

mod common;
mod dirop_support;

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use common::*;
use dirop_support::*;
use rxfs::dir;
use rxfs::format::bmbt::Extent;
use rxfs::format::bufkind::BufKind;
use rxfs::format::dinode_edit as de;
use rxfs::inode::Fork;
use rxfs::types::{FsBlock, Ino};
use rxfs::xact::MetaTx;

/// A directory's bytes: (format, size, shortform fork or block).
type DirBytes = (u8, u64, Vec<u8>);

/// The kernel's version, through our read path.
fn kernel_bytes(img: &Path, dir: u64) -> DirBytes {
    let fs = open_ro(img);
    let ip = fs.iget(Ino(dir)).unwrap();
    match &ip.data {
        Fork::Local(b) => (1, ip.core.size, b.clone()),
        Fork::Extents { list, .. } => {
            let geo = fs.geo();
            let daddr = geo.fsb_to_daddr(FsBlock(list[0].start));
            let b = fs.read_raw(daddr, geo.dirblksize as usize).unwrap();
            (2, ip.core.size, b)
        }
        Fork::Dev(_) => panic!("device fork"),
    }
}

/// Ours, from the transaction.
fn tx_bytes(tx: &mut dyn MetaTx, dp: rxfs::xact::InodeId) -> DirBytes {
    let d = tx.inode(dp).to_vec();
    let size = de::size(&d);
    match de::format(&d) {
        1 => (1, size, de::data_fork(&d)[..size as usize].to_vec()),
        2 => {
            let e = Extent::decode(&de::data_fork(&d)[..16]);
            let daddr = tx.geo().fsb_to_daddr(FsBlock(e.start));
            let len = tx.geo().dirblksize as usize;
            let b = tx.read_buf(daddr, len, BufKind::DirBlock).unwrap();
            (2, size, tx.buf(b).to_vec())
        }
        f => panic!("format {f}"),
    }
}

/// Compare, ignoring the block's address, CRC and LSN (bytes 4..24).
fn same(a: &DirBytes, b: &DirBytes) -> Result<(), String> {
    if (a.0, a.1) != (b.0, b.1) || a.2.len() != b.2.len() {
        return Err(format!(
            "format/size/len {:?} vs {:?}",
            (a.0, a.1, a.2.len()),
            (b.0, b.1, b.2.len())
        ));
    }
    let skip = |i: usize| a.0 == 2 && (4..24).contains(&i);
    let diff: Vec<usize> = (0..a.2.len())
        .filter(|&i| !skip(i) && a.2[i] != b.2[i])
        .collect();
    if diff.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} bytes differ, first at {:#x}: kernel {:02x?} ours {:02x?}",
            diff.len(),
            diff[0],
            &a.2[diff[0]..(diff[0] + 16).min(a.2.len())],
            &b.2[diff[0]..(diff[0] + 16).min(b.2.len())]
        ))
    }
}

fn parity(tag: &str, mkfs_opts: &[&str]) {
    if !kernel_ok() {
        return;
    }
    let s = Scratch::new(&format!("dirop-parity-{tag}"));
    let img = s.path("img");
    let mirror = s.path("mirror");
    let mnt = s.path("mnt");
    mkfs_with(&img, 64 << 20, mkfs_opts, FSTESTS_ENV);
    let m = KernelMount::new(&img, &mnt, "");
    std::fs::create_dir(mnt.join("d")).unwrap();
    let dir = std::fs::metadata(mnt.join("d")).unwrap().ino();
    m.umount();
    // The kernel works on `img`, we on `mirror` (a copy taken now): only
    // the directory is compared, so the inodes our entries name need not
    // exist there.
    std::fs::copy(&img, &mirror).unwrap();
    let mut rng = Rng::new(5);
    let mut names: Vec<Vec<u8>> = Vec::new();
    let (mut steps, mut forms) = (0, std::collections::BTreeSet::new());
    let (mut stale_max, mut last_stale, mut compactions) = (0, 0, 0);
    // Grow, shrink, grow again into the holes, shrink to nothing.
    // Grow into block form; shrink back to shortform; grow again into the
    // holes; fill the block up to where the kernel would need the leaf
    // form; random additions and removals in the full block (stale leaf
    // entries reused, squeezed out); shrink to nothing.
    let plan = [
        Phase::Add(45),
        Phase::Remove(38),
        Phase::Add(20),
        Phase::Fill(400),
        Phase::RemoveShort(20),
        Phase::AddLong(4),
        Phase::Mix(150),
        Phase::Remove(usize::MAX),
    ];
    let (mut full, mut refused_in_row, mut collisions) = (0, 0, 0);
    for phase in plan {
        let n = match phase {
            Phase::Add(n)
            | Phase::Remove(n)
            | Phase::Fill(n)
            | Phase::Mix(n)
            | Phase::RemoveShort(n)
            | Phase::AddLong(n) => n,
        };
        for _ in 0..n {
            let add = match phase {
                Phase::Add(_) | Phase::Fill(_) | Phase::AddLong(_) => true,
                Phase::Remove(_) | Phase::RemoveShort(_) => false,
                Phase::Mix(_) => names.is_empty() || rng.below(2) == 0,
            };
            if !add && names.is_empty() {
                break;
            }
            let name = if add {
                let len = if matches!(phase, Phase::AddLong(_)) {
                    40 + rng.below(20) as usize
                } else if rng.below(12) == 0 {
                    255
                } else {
                    1 + rng.below(40) as usize
                };
                let mut name = rng.name(len, len);
                if matches!(phase, Phase::Mix(_)) && !names.is_empty() && rng.below(4) == 0 {
                    // Same hash as an entry there.
                    let k = &names[rng.below(names.len() as u64) as usize];
                    if let Some(c) = collide(k) {
                        name = c;
                        collisions += 1;
                    }
                }
                if names.contains(&name) {
                    continue;
                }
                // Would it need the leaf form? Then neither side adds it.
                let mut tx = memtx(&mirror);
                let dp = tx.ijoin(Ino(dir)).unwrap();
                match dir::dir_add_needs_leaf(&mut tx, dp, &name, Ino(dir)) {
                    Ok(false) => {}
                    Ok(true) => {
                        full += 1;
                        refused_in_row += 1;
                        if matches!(phase, Phase::Fill(_)) && refused_in_row > 30 {
                            break;
                        }
                        continue;
                    }
                    Err(e) => panic!("{e}"),
                }
                refused_in_row = 0;
                name
            } else if matches!(phase, Phase::RemoveShort(_)) {
                let i = (0..names.len())
                    .min_by_key(|&i| (names[i].len(), rng.below(1000)))
                    .unwrap();
                names.remove(i)
            } else {
                names.remove(rng.below(names.len() as u64) as usize)
            };
            let m = KernelMount::new(&img, &mnt, "");
            let p = mnt.join("d").join(os(&name));
            let ino = if add {
                std::fs::write(&p, b"").unwrap();
                std::fs::metadata(&p).unwrap().ino()
            } else {
                std::fs::remove_file(&p).unwrap();
                0
            };
            m.umount();
            let want = kernel_bytes(&img, dir);
            let mut tx = memtx(&mirror);
            let dp = tx.ijoin(Ino(dir)).unwrap();
            if add {
                dir::dir_add(&mut tx, dp, &name, Ino(ino), 1).unwrap();
                names.push(name.clone());
            } else {
                dir::dir_remove(&mut tx, dp, &name).unwrap();
            }
            let got = tx_bytes(&mut tx, dp);
            if got.0 == 2 {
                let b = &got.2;
                let stale = u32::from_be_bytes(b[b.len() - 4..].try_into().unwrap());
                stale_max = stale_max.max(stale);
                // An addition that dropped more than one stale entry
                // squeezed them out of the leaf.
                if add && stale + 1 < last_stale {
                    compactions += 1;
                }
                last_stale = stale;
            } else {
                last_stale = 0;
            }
            tx.commit().unwrap();
            if let Err(e) = same(&want, &got) {
                panic!(
                    "step {steps} ({phase:?} {} {:?}, {} entries): {e}",
                    if add { "add" } else { "remove" },
                    String::from_utf8_lossy(&name),
                    names.len()
                );
            }
            forms.insert(want.0);
            steps += 1;
        }
    }
    eprintln!(
        "parity {tag}: {steps} steps byte-identical, formats {forms:?}, \
         block full {full} times, up to {stale_max} stale leaf entries, \
         {compactions} compactions, {collisions} hash collisions"
    );
    assert_eq!(forms.len(), 2, "never changed form");
    assert!(full > 0, "the block never filled up");
    assert!(stale_max > 1, "never more than one stale leaf entry");
    assert!(compactions > 0, "stale leaf entries never squeezed out");
}

#[derive(Debug, Clone, Copy)]
enum Phase {
    Add(usize),
    Remove(usize),
    /// Add until the block is full (30 names in a row refused).
    Fill(usize),
    /// Add or remove at random.
    Mix(usize),
    /// Remove the shortest names (small holes, many stale leaf entries).
    RemoveShort(usize),
    /// Add names longer than those holes.
    AddLong(usize),
}

fn os(b: &[u8]) -> &std::ffi::OsStr {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::OsStr::from_bytes(b)
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn dirop_byte_parity_kernel() {
    parity("4k", &[]);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn dirop_byte_parity_1k_blocks_kernel() {
    parity("1k", &["-b", "size=1024"]);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn dirop_byte_parity_8k_dirblocks_kernel() {
    parity("8k", &["-n", "size=8192"]);
}
