//! Inode allocation near ENOSPC against the kernel's tools: full AGs,
//! the kernel's sparse inode chunks, and sparse chunks we make and merge.

mod common;
mod ialloc_common;

use std::collections::BTreeSet;
use std::path::Path;

use common::*;
use ialloc_common::*;
use rxfs::btree::walk::BtreeRoot;
use rxfs::format::btree::{BtreeKind, InobtRec};
use rxfs::format::dinode_edit as de;
use rxfs::ialloc::{ialloc, NewInode};
use rxfs::types::{AgNumber, Ino};
use rxfs::xact::MetaTx;
use rxfs::Filesystem;

/// Inodes free in the kernel's sparse chunks (holes must never be handed
/// out), on a full filesystem: allocate every free inode, free them again.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn ialloc_from_kernel_sparse_chunks() {
    if !kernel_ok() {
        return;
    }
    let s = Scratch::new("ialloc-sparse");
    let img = s.path("img");
    mkfs(&img, 320 << 20, &[]);
    let m = KernelMount::new(&img, &s.path("mnt"), "");
    populate_sparse(&m.dir, 60);
    // Free every other inode of every punched directory.
    for e in std::fs::read_dir(&m.dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            for f in std::fs::read_dir(&p).unwrap() {
                let f = f.unwrap().path();
                let i: u64 = f.file_name().unwrap().to_str().unwrap().parse().unwrap();
                if i.is_multiple_of(2) {
                    std::fs::remove_file(&f).unwrap();
                }
            }
        }
    }
    m.umount();

    // Every free, present inode slot of every record, and the sparse ones.
    let fs = open_ro(&img);
    let before = inode_state(&fs);
    let mut free_slots = BTreeSet::new();
    let mut sparse_slots = BTreeSet::new();
    for agno in 0..fs.geo().agcount {
        let agno = AgNumber(agno);
        let agi = fs.read_agi(agno).unwrap();
        let root = BtreeRoot::from_agi(BtreeKind::Ino, agno, &agi);
        let recs: Vec<InobtRec> = fs.btree_records(&root).unwrap();
        for r in recs {
            for idx in 0..64 {
                if r.is_free(idx) && !r.is_hole(idx) {
                    let ino = fs
                        .geo()
                        .agino_to_ino(agno, rxfs::types::AgIno(r.startino + idx));
                    free_slots.insert(ino.0);
                    if r.holemask != 0 {
                        sparse_slots.insert(ino.0);
                    }
                }
            }
        }
    }
    drop(fs);
    let nfree: u64 = before.iter().map(|a| a.freecount).sum();
    assert_eq!(free_slots.len() as u64, nfree);
    assert!(!sparse_slots.is_empty(), "no free inode in a sparse chunk");

    let (inos, chunks) = alloc_all(&img, nfree as usize, 97);
    let new_ok = |ino: u64| chunks > 0 && !free_slots.contains(&ino);
    let mut from_sparse = 0;
    for (ino, _) in &inos {
        assert!(
            free_slots.contains(&ino.0) || new_ok(ino.0),
            "inode {} was not free",
            ino.0
        );
        from_sparse += sparse_slots.contains(&ino.0) as usize;
    }
    eprintln!(
        "sparse: {nfree} free inodes ({} in sparse chunks), {chunks} new chunks, {from_sparse} taken from sparse chunks",
        sparse_slots.len()
    );
    if chunks == 0 {
        assert_eq!(from_sparse, sparse_slots.len());
    } else {
        assert!(from_sparse > 0);
    }
    let fs = open_ro(&img);
    inode_state(&fs);
    for (ino, _) in &inos {
        assert!(rxfs::ialloc::read::inode_allocated(&*fs, *ino).unwrap());
    }
    drop(fs);
    free_all(&img, &inos, 200);
    assert_repair_clean(&img, "sparse: alloc + free");
    let after = inode_state(&open_ro(&img));
    if chunks == 0 {
        assert_eq!(after, before);
    }
}

/// A full AG sends new chunks to the next AG; a full filesystem gives
/// NoSpace once the last free inode is gone; giving everything back
/// leaves a clean filesystem.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn ialloc_full_ags() {
    if !kernel_ok() {
        return;
    }
    let s = Scratch::new("ialloc-full");
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let before = inode_state(&open_ro(&img));
    assert_eq!(before.len(), 4);
    let free0 = before[0].freecount as usize;

    let mut extents = fill_ag(&img, 0);
    let (inos, chunks) = alloc_all(&img, free0 + 10, 50);
    let geo = open_ro(&img).geo().clone();
    let files: Vec<u32> = inos
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 16 != 0)
        .map(|(_, (ino, _))| geo.ino_agno(*ino).0)
        .collect();
    assert!(chunks >= 1);
    let in_ag0 = files.iter().filter(|&&a| a == 0).count();
    let dirs_in_ag0 = inos
        .iter()
        .enumerate()
        .filter(|(i, (ino, _))| i % 16 == 0 && geo.ino_agno(*ino).0 == 0)
        .count();
    assert_eq!(
        in_ag0 + dirs_in_ag0,
        free0,
        "AG 0 gave exactly its free inodes"
    );
    assert!(files.contains(&1), "files moved on to AG 1");

    // Fill the rest; then allocate until NoSpace.
    for agno in 1..4 {
        extents.extend(fill_ag(&img, agno));
    }
    let mut tx = memtx(&img);
    let root = Ino(tx.sb().rootino);
    let mut more = Vec::new();
    let err = loop {
        match ialloc(&mut tx, root, &new_inode(1)) {
            Ok((ino, _)) => more.push((ino, 0)),
            Err(e) => break e,
        }
        assert!(more.len() < 100_000);
    };
    assert!(matches!(err, rxfs::Error::NoSpace), "{err}");
    assert!(
        tx.icreates.is_empty(),
        "no room for a chunk, yet one was made"
    );
    tx.commit().unwrap();
    let full = inode_state(&open_ro(&img));
    assert_eq!(full.iter().map(|a| a.freecount).sum::<u64>(), 0);
    assert_eq!(
        more.len() as u64,
        inode_state(&open_ro(&img))
            .iter()
            .map(|a| a.count)
            .sum::<u64>()
            - before.iter().map(|a| a.count - a.freecount).sum::<u64>()
            - inos.len() as u64
    );

    // Give it all back.
    let mut tx = memtx(&img);
    for e in &extents {
        rxfs::alloc::free_extent(&mut tx, e.agno, e.agbno, e.len).unwrap();
    }
    tx.commit().unwrap();
    free_all(&img, &inos, 100);
    free_all(&img, &more, 100);
    assert_repair_clean(&img, "full AGs");
    let after = inode_state(&open_ro(&img));
    assert_eq!(after.iter().map(|a| a.count - a.freecount).sum::<u64>(), 3);
}

/// AG 0 with free space only in 4-block pieces at 4 mod 8: no whole
/// chunk fits, so sparse chunks (upper halves, holemask 0x00ff) are made;
/// then the lower halves are freed and the next chunks fill the holes of
/// those records (merge to holemask 0). Everything is given back at the
/// end and xfs_repair must be happy.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn ialloc_makes_sparse_chunks() {
    if !kernel_ok() {
        return;
    }
    let s = Scratch::new("ialloc-mksparse");
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let geo = open_ro(&img).geo().clone();
    assert_eq!(
        (geo.inoalignmt, geo.spino_align),
        (8, 4),
        "mkfs defaults changed"
    );
    let before = inode_state(&open_ro(&img));
    let agblocks = geo.ag_size(AgNumber(0)) as usize;
    // Blocks of AG 0 we hold (allocated by fill_ag, not yet given back).
    let mut owned = vec![false; agblocks];
    for e in fill_ag(&img, 0) {
        owned[e.agbno.0 as usize..(e.agbno.0 + e.len) as usize].fill(true);
    }
    let free_range = |img: &Path, owned: &mut Vec<bool>, ranges: &[(u32, u32)]| {
        let mut tx = memtx(img);
        for &(b, l) in ranges {
            assert!(owned[b as usize..(b + l) as usize].iter().all(|&o| o));
            owned[b as usize..(b + l) as usize].fill(false);
            rxfs::alloc::free_extent(&mut tx, AgNumber(0), rxfs::types::AgBlock(b), l).unwrap();
        }
        tx.commit().unwrap();
    };
    // 24 upper halves of 8-aligned chunks we own entirely.
    let bases: Vec<u32> = (1..agblocks / 8 - 1)
        .map(|k| (k * 8) as u32)
        .filter(|&b| owned[b as usize..b as usize + 8].iter().all(|&o| o))
        .step_by(3)
        .take(24)
        .collect();
    assert_eq!(bases.len(), 24);
    let uppers: Vec<(u32, u32)> = bases.iter().map(|&b| (b + 4, 4)).collect();
    free_range(&img, &mut owned, &uppers);

    // The root chunk's free inodes first, then sparse chunks in AG 0.
    let free0 = before[0].freecount as usize;
    let mut tx = memtx(&img);
    let root = Ino(tx.sb().rootino);
    let mut inos = Vec::new();
    for i in 0..free0 + 200 {
        let init = NewInode {
            mode: de::S_IFREG | 0o600,
            ..new_inode(i)
        };
        let (ino, _) = ialloc(&mut tx, root, &init).unwrap();
        inos.push((ino, 0));
    }
    let sparse_made: Vec<_> = tx.icreates.clone();
    tx.commit().unwrap();
    assert!(sparse_made.len() >= 200 / 32, "{sparse_made:?}");
    for &(agno, agbno, count, len, _) in &sparse_made {
        assert_eq!((agno, count, len), (AgNumber(0), 32, 4), "{sparse_made:?}");
        assert!(bases.contains(&(agbno.0 - 4)), "sparse chunk at {agbno:?}");
    }
    let fs = open_ro(&img);
    let st = inode_state(&fs);
    assert!(inos.iter().all(|(i, _)| fs.geo().ino_agno(*i).0 == 0));
    let holey = |fs: &Filesystem| -> Vec<InobtRec> {
        let agi = fs.read_agi(AgNumber(0)).unwrap();
        let root = BtreeRoot::from_agi(BtreeKind::Ino, AgNumber(0), &agi);
        let recs: Vec<InobtRec> = fs.btree_records(&root).unwrap();
        recs.into_iter().filter(|r| r.holemask != 0).collect()
    };
    let h = holey(&fs);
    assert_eq!(h.len(), sparse_made.len());
    assert!(h.iter().all(|r| r.holemask == 0x00ff && r.count == 32));
    assert_eq!(st[0].count, before[0].count + 32 * sparse_made.len() as u64);
    drop(fs);

    // Free the lower halves under the sparse chunks: the next chunks
    // complete those records.
    let lowers: Vec<(u32, u32)> = sparse_made.iter().map(|&(_, b, ..)| (b.0 - 4, 4)).collect();
    free_range(&img, &mut owned, &lowers);
    let free_now = inode_state(&open_ro(&img))[0].freecount as usize;
    let mut tx = memtx(&img);
    for i in 0..free_now + 64 {
        let init = NewInode {
            mode: de::S_IFREG | 0o600,
            ..new_inode(i)
        };
        let (ino, _) = ialloc(&mut tx, root, &init).unwrap();
        inos.push((ino, 0));
    }
    let merged: Vec<_> = tx.icreates.clone();
    tx.commit().unwrap();
    eprintln!(
        "sparse chunks made: {}, merged: {}",
        sparse_made.len(),
        merged.len()
    );
    assert!(merged.len() >= 2, "{merged:?}");
    for &(_, agbno, count, len, _) in &merged {
        assert_eq!((count, len), (32, 4));
        assert!(lowers.iter().any(|&(b, _)| b == agbno.0), "{agbno:?}");
    }
    let fs = open_ro(&img);
    inode_state(&fs);
    assert_eq!(holey(&fs).len(), sparse_made.len() - merged.len());
    for (ino, _) in &inos {
        assert!(rxfs::ialloc::read::inode_allocated(&*fs, *ino).unwrap());
    }
    drop(fs);

    // Give everything back.
    free_all(&img, &inos, 150);
    let mut runs = Vec::new();
    let mut b = 0;
    while b < agblocks {
        if owned[b] {
            let s0 = b;
            while b < agblocks && owned[b] {
                b += 1;
            }
            runs.push((s0 as u32, (b - s0) as u32));
        } else {
            b += 1;
        }
    }
    free_range(&img, &mut owned, &runs);
    assert_repair_clean(&img, "sparse chunks made and merged");
    let after = inode_state(&open_ro(&img));
    assert_eq!(
        after.iter().map(|a| a.count - a.freecount).sum::<u64>(),
        before.iter().map(|a| a.count - a.freecount).sum::<u64>()
    );
}
