//! The free-space allocator (`rxfs::alloc`) against the kernel's tools.
//!
//! mkfs.xfs makes small images; seeded random alloc/free sequences run
//! through `MemTx` (committed in batches, so busy extents clear between
//! transactions); after each phase the image is checked:
//! - by our read path, which verifies every btree block (CRC, order, key
//!   ranges, sibling chains), plus a shape check here (non-root blocks hold
//!   >= maxrecs/2 entries, node keys equal their child's first key);
//! - against a model of what we allocated: the two free-space trees hold the
//!   same extents, `freeblks`/`longest`/`flcount`/`btreeblks` match them,
//!   nothing we allocated is free / on the AGFL / a btree block, and every
//!   AG block is accounted for (`ag_len - free - agfl - btree blocks -
//!   allocated` stays what mkfs left in use); `sb_fdblocks` moves by
//!   exactly what we allocated;
//! - by `xfs_db freesp -s` (total free blocks, AGFL included) and, once
//!   everything is freed again, by `xfs_repair -n`.
//!
//! A failing seed is printed; `RXFS_ALLOC_SEED=n` replays one.

mod alloc_support;
mod common;

use std::collections::BTreeMap;
use std::path::Path;

use alloc_support::*;
use common::*;
use rxfs::alloc::{alloc_extent, free_extent};
use rxfs::btree::walk::BtreeRoot;
use rxfs::format::btree::BtreeKind;
use rxfs::recover::memtx::MemTx;
use rxfs::types::{AgBlock, AgNumber};
use rxfs::xact::MetaTx;
use rxfs::{Error, Filesystem, MountOptions};

/// Allocate single blocks until `count` per AG, then free every other one.
fn fragment(img: &Path, agcount: u32, count: u32, model: &mut Model) {
    for a in 0..agcount {
        let mut got = Vec::new();
        while got.len() < count as usize {
            batch(img, |tx| {
                for _ in 0..2000 {
                    if got.len() >= count as usize {
                        break;
                    }
                    let e = alloc_extent(tx, &req(a, 1, 1)).unwrap();
                    assert_eq!((e.agno.0, e.len), (a, 1));
                    model.add(a, e.agbno.0, 1);
                    got.push(e.agbno.0);
                }
            });
        }
        got.sort();
        for chunk in got.chunks(4000) {
            batch(img, |tx| {
                for &b in chunk.iter().step_by(2) {
                    free_extent(tx, AgNumber(a), AgBlock(b), 1).unwrap();
                    model.0.remove(&(a, b));
                }
            });
        }
    }
}

/// Random allocations and frees; allocation stops while we hold more than
/// `cap` blocks (room for the kernel's turn).
fn random_ops(
    img: &Path,
    rng: &mut Rng,
    agcount: u32,
    ops: usize,
    cap: u64,
    model: &mut Model,
) -> [u32; 3] {
    let mut done = 0;
    let mut stats = [0u32; 3]; // allocated, NoSpace, freed
    while done < ops {
        batch(img, |tx| {
            for _ in 0..200 {
                done += 1;
                let held: u64 = model.0.values().map(|&l| l as u64).sum();
                if model.0.is_empty() || (held < cap && rng.below(10) < 6) {
                    let a = rng.below(agcount as u64) as u32;
                    let minlen = 1 + rng.below(4) as u32;
                    let mut r = req(a, minlen, minlen + rng.below(17) as u32);
                    r.align = [1, 1, 1, 4, 8][rng.below(5) as usize];
                    r.any_ag = rng.below(2) == 0;
                    if rng.below(2) == 0 {
                        r.near = Some(AgBlock(rng.below(8192) as u32));
                    }
                    match alloc_extent(tx, &r) {
                        Ok(e) => {
                            assert!(e.len >= r.minlen && e.len <= r.maxlen, "{r:?} -> {e:?}");
                            assert_eq!(e.agbno.0 % r.align, 0, "{r:?} -> {e:?}");
                            assert!(e.agno.0 == a || (r.any_ag && e.agno.0 > a));
                            model.add(e.agno.0, e.agbno.0, e.len);
                            stats[0] += 1;
                        }
                        Err(Error::NoSpace) => stats[1] += 1,
                        Err(e) => panic!("{r:?}: {e}"),
                    }
                } else {
                    let i = rng.below(model.0.len() as u64) as usize;
                    let (&(a, b), &l) = model.0.iter().nth(i).unwrap();
                    model.0.remove(&(a, b));
                    // Free all, or a middle part and keep the rest.
                    let (fb, fl) = if l > 2 && rng.below(3) == 0 {
                        let off = 1 + rng.below(l as u64 - 2) as u32;
                        let fl = 1 + rng.below((l - off) as u64 - 1) as u32;
                        model.add(a, b, off);
                        if off + fl < l {
                            model.add(a, b + off + fl, l - off - fl);
                        }
                        (b + off, fl)
                    } else {
                        (b, l)
                    };
                    free_extent(tx, AgNumber(a), AgBlock(fb), fl).unwrap();
                    stats[2] += 1;
                }
            }
        });
    }
    stats
}

fn free_all(img: &Path, rng: &mut Rng, model: &mut Model) {
    let mut all: Vec<((u32, u32), u32)> = model.0.iter().map(|(k, v)| (*k, *v)).collect();
    for i in (1..all.len()).rev() {
        all.swap(i, rng.below(i as u64 + 1) as usize);
    }
    for chunk in all.chunks(3000) {
        batch(img, |tx| {
            for &((a, b), l) in chunk {
                free_extent(tx, AgNumber(a), AgBlock(b), l).unwrap();
            }
        });
    }
    model.0.clear();
}

/// The kernel allocates and frees on a copy of our fragmented trees: it
/// must accept them (its verifiers run on every block it touches) and
/// leave an image `xfs_repair -n` accepts.
fn kernel_uses(s: &Scratch, img: &Path) {
    let copy = s.path("kernel.img");
    std::fs::copy(img, &copy).unwrap();
    let m = KernelMount::new(&copy, &s.path("mnt"), "");
    for i in 0..300u64 {
        let data = vec![i as u8; 4096 * (1 + (i as usize * 7) % 23)];
        std::fs::write(m.dir.join(format!("f{i}")), data).unwrap();
    }
    run("sync", &[]);
    for i in (0..300u64).step_by(2) {
        std::fs::remove_file(m.dir.join(format!("f{i}"))).unwrap();
    }
    m.umount();
    repair_clean(&copy);
}

fn run_random(
    name: &str,
    size: u64,
    opts: &[&str],
    frag: u32,
    want_levels: u32,
    default_seed: u64,
) {
    setup();
    if kernel_tests_disabled() {
        return;
    }
    let s = Scratch::new(name);
    let img = s.path("a.img");
    mkfs_with(&img, size, opts, FSTESTS_ENV);
    repair_clean(&img);
    let init = snapshot(&img);
    let agcount = init.0.len() as u32;
    let mut rng = Rng(seed(default_seed) | 1);
    let mut model = Model(BTreeMap::new());

    fragment(&img, agcount, frag, &mut model);
    let ags = check_model(&img, &init, &model);
    let top = ags
        .iter()
        .map(|a| a.levels.0.max(a.levels.1))
        .max()
        .unwrap();
    eprintln!(
        "after fragmenting: levels {:?}, free extents {:?}",
        ags.iter().map(|a| a.levels).collect::<Vec<_>>(),
        ags.iter().map(|a| a.free.len()).collect::<Vec<_>>()
    );
    assert!(top >= want_levels, "trees reached only {top} levels");

    for _ in 0..3 {
        let st = random_ops(&img, &mut rng, agcount, 1000, init.1 / 2, &mut model);
        let ags = check_model(&img, &init, &model);
        eprintln!(
            "random: {} allocs, {} NoSpace, {} frees; levels {:?}, free extents {:?}",
            st[0],
            st[1],
            st[2],
            ags.iter().map(|a| a.levels).collect::<Vec<_>>(),
            ags.iter().map(|a| a.free.len()).collect::<Vec<_>>()
        );
    }
    kernel_uses(&s, &img);

    free_all(&img, &mut rng, &mut model);
    let ags = check_model(&img, &init, &model);
    eprintln!(
        "after freeing all: levels {:?}, free extents {:?}",
        ags.iter().map(|a| a.levels).collect::<Vec<_>>(),
        ags.iter().map(|a| a.free.len()).collect::<Vec<_>>()
    );
    for (a, st) in ags.iter().enumerate() {
        assert_eq!(st.levels, (1, 1), "AG {a}: trees did not shrink back");
        assert!(st.free.len() <= 16, "AG {a}: free space did not merge back");
    }
    repair_clean(&img);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn alloc_free_random_4k() {
    run_random(
        "alloc4k",
        64 << 20,
        &["-d", "size=64m,agcount=2"],
        2400,
        2,
        0x5eed_0001,
    );
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn alloc_free_random_1k() {
    run_random(
        "alloc1k",
        64 << 20,
        &["-b", "size=1024", "-d", "size=64m,agcount=2"],
        16000,
        3,
        0x5eed_0002,
    );
}

/// 4 KiB sectors (a larger AGFL) and a short last AG.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn alloc_free_random_4k_sectors_short_ag() {
    run_random(
        "alloc4ks",
        67 << 20,
        &["-s", "size=4096", "-d", "size=67m,agcount=3"],
        1800,
        2,
        0x5eed_0004,
    );
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn enospc_and_back() {
    setup();
    if kernel_tests_disabled() {
        return;
    }
    let s = Scratch::new("allocnospc");
    let img = s.path("a.img");
    mkfs_with(&img, 64 << 20, &["-d", "size=64m,agcount=2"], FSTESTS_ENV);
    let init = snapshot(&img);
    let mut rng = Rng(seed(0x5eed_0003) | 1);
    let mut model = Model(BTreeMap::new());
    let mut full = false;
    while !full {
        batch(&img, |tx| {
            for _ in 0..500 {
                let minlen = 1 + rng.below(64) as u32;
                let mut r = req(0, 1, minlen);
                r.any_ag = true;
                match alloc_extent(tx, &r) {
                    Ok(e) => model.add(e.agno.0, e.agbno.0, e.len),
                    Err(Error::NoSpace) => {
                        full = true;
                        break;
                    }
                    Err(e) => panic!("{e}"),
                }
            }
        });
    }
    let ags = check_model(&img, &init, &model);
    for (a, st) in ags.iter().enumerate() {
        // Only what the AGFL minimum holds back may be left.
        assert!(
            st.freeblks <= 8,
            "AG {a}: NoSpace with {} free blocks",
            st.freeblks
        );
    }
    // Nothing fits, also not in a fresh transaction.
    batch(&img, |tx| {
        assert!(matches!(
            alloc_extent(tx, &req(0, 1, 1)),
            Err(Error::NoSpace)
        ));
    });
    free_all(&img, &mut rng, &mut model);
    let ags = check_model(&img, &init, &model);
    let free: u64 = ags
        .iter()
        .map(|a| a.freeblks as u64 + a.flcount as u64)
        .sum();
    let free0: u64 = init
        .0
        .iter()
        .map(|a| a.freeblks as u64 + a.flcount as u64)
        .sum();
    assert_eq!(free, free0, "free space back to what mkfs left");
    repair_clean(&img);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn busy_extents_are_not_reused() {
    setup();
    if kernel_tests_disabled() {
        return;
    }
    let s = Scratch::new("allocbusy");
    let img = s.path("a.img");
    mkfs_with(&img, 64 << 20, &["-d", "size=64m,agcount=2"], FSTESTS_ENV);
    let init = snapshot(&img);
    let mut model = Model(BTreeMap::new());
    let mut exts = Vec::new();
    batch(&img, |tx| {
        for _ in 0..100 {
            let e = alloc_extent(tx, &req(0, 8, 8)).unwrap();
            model.add(0, e.agbno.0, e.len);
            exts.push(e);
        }
    });
    // Freed in this transaction: not handed out again in it, even when
    // asked for right there (the AG has plenty of other space).
    let x = exts[50];
    batch(&img, |tx| {
        free_extent(tx, AgNumber(0), x.agbno, x.len).unwrap();
        model.0.remove(&(0, x.agbno.0));
        for _ in 0..20 {
            let mut r = req(0, 1, 8);
            r.near = Some(x.agbno);
            let e = alloc_extent(tx, &r).unwrap();
            assert!(
                e.agbno.0 + e.len <= x.agbno.0 || x.agbno.0 + x.len <= e.agbno.0,
                "busy {x:?} reused as {e:?}"
            );
            model.add(0, e.agbno.0, e.len);
        }
    });
    // A new transaction may reuse it (MemTx busy lists are per transaction).
    batch(&img, |tx| {
        let mut r = req(0, 8, 8);
        r.near = Some(x.agbno);
        let e = alloc_extent(tx, &r).unwrap();
        assert_eq!(e.agbno, x.agbno, "nearest free extent not used");
        model.add(0, e.agbno.0, e.len);
    });
    // Fill AG 0; free one extent; allocating in the same transaction must
    // force the busy extent out (log force) and then get it.
    batch(&img, |tx| loop {
        match alloc_extent(tx, &req(0, 1, 64)) {
            Ok(e) => model.add(0, e.agbno.0, e.len),
            Err(Error::NoSpace) => break,
            Err(e) => panic!("{e}"),
        }
    });
    let y = exts[10];
    batch(&img, |tx| {
        free_extent(tx, AgNumber(0), y.agbno, y.len).unwrap();
        model.0.remove(&(0, y.agbno.0));
        let e = alloc_extent(tx, &req(0, 4, 8)).expect("busy space forced out");
        model.add(0, e.agbno.0, e.len);
    });
    check_model(&img, &init, &model);
    let mut rng = Rng(7);
    free_all(&img, &mut rng, &mut model);
    check_model(&img, &init, &model);
}

/// inobt/finobt editing through the generic btree editor: fake chunk records inserted
/// until both trees have two levels, then deleted again.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn inobt_finobt_edit() {
    use rxfs::btree::{self as bt, Lookup, Tree};
    use rxfs::format::btree::{BtreeKey, InobtRec};
    setup();
    if kernel_tests_disabled() {
        return;
    }
    let s = Scratch::new("allocino");
    let img = s.path("a.img");
    mkfs_with(&img, 64 << 20, &["-d", "size=64m,agcount=2"], FSTESTS_ENV);
    let init = snapshot(&img);
    let opts = MountOptions {
        read_only: true,
        ..Default::default()
    };
    let (geo, sparse) = {
        let fs = Filesystem::open(dev(&img), None, opts.clone()).unwrap();
        (fs.geo().clone(), fs.sb().has_sparse_inodes())
    };
    let chunk_blocks = 64 / geo.inopblock;
    let agno = AgNumber(1);
    let mut rng = Rng(0x1b7 | 1);
    // Chunks from block 64 on, in random order.
    let mut starts: Vec<u32> = (0..700u32)
        .map(|i| (64 + i * chunk_blocks) << geo.inopblog)
        .collect();
    for i in (1..starts.len()).rev() {
        starts.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let mut added = Vec::new();
    batch(&img, |tx| {
        for &st in &starts {
            let r = InobtRec {
                startino: st,
                holemask: 0,
                count: 64,
                freecount: 64,
                free: u64::MAX,
            };
            let mut b = [0u8; 16];
            r.encode(&mut b, sparse);
            match bt::insert(tx, Tree::Ino, agno, &b) {
                Ok(()) => {}
                Err(Error::Exists) => continue,
                Err(e) => panic!("{e}"),
            }
            bt::insert(tx, Tree::Fino, agno, &b).unwrap();
            added.push(st);
        }
        // Lookups see what was inserted.
        let k = BtreeKey(added[3] as u64, 0, 0);
        let f = bt::lookup(tx, Tree::Fino, agno, k, Lookup::Eq)
            .unwrap()
            .unwrap();
        assert_eq!(InobtRec::decode(&f.rec, sparse).startino, added[3]);
        let g = bt::lookup(
            tx,
            Tree::Ino,
            agno,
            BtreeKey(added[3] as u64 + 1, 0, 0),
            Lookup::Le,
        );
        assert_eq!(g.unwrap().unwrap().key, k);
    });
    let tree_blocks = |img: &Path| {
        let fs = Filesystem::open(dev(img), None, opts.clone()).unwrap();
        let agi = fs.read_agi(agno).unwrap();
        let mut counts = Vec::new();
        for kind in [BtreeKind::Ino, BtreeKind::Fino] {
            let root = BtreeRoot::from_agi(kind, agno, &agi);
            let n = fs.btree_records::<InobtRec>(&root).unwrap().len();
            let mut blocks = Vec::new();
            shape(
                &fs,
                kind,
                agno,
                root.root.0,
                root.levels - 1,
                true,
                &mut blocks,
            );
            counts.push((n, blocks.len() as u32, root.levels));
        }
        assert_eq!(
            (agi.iblocks, agi.fblocks),
            (counts[0].1, counts[1].1),
            "inobtcount"
        );
        (counts, fs.sb().fdblocks)
    };
    let (counts, fd) = tree_blocks(&img);
    eprintln!("inobt/finobt (records, blocks, levels): {counts:?}");
    assert!(counts[0].2 >= 2 && counts[1].2 >= 2, "trees did not grow");
    let grown = (counts[0].1 + counts[1].1 - 2) as u64; // both were one block
    assert_eq!(fd, init.1 - grown, "fdblocks counts the new btree blocks");
    snapshot(&img);
    for i in (1..added.len()).rev() {
        added.swap(i, rng.below(i as u64 + 1) as usize);
    }
    batch(&img, |tx| {
        for &st in &added {
            let k = BtreeKey(st as u64, 0, 0);
            bt::delete(tx, Tree::Ino, agno, k).unwrap();
            bt::delete(tx, Tree::Fino, agno, k).unwrap();
        }
        assert!(matches!(
            bt::delete(tx, Tree::Ino, agno, BtreeKey(added[0] as u64, 0, 0)),
            Err(Error::NotFound)
        ));
    });
    let (counts, fd) = tree_blocks(&img);
    assert_eq!(counts[0].2, 1, "inobt shrank back to its root");
    assert_eq!(counts[1].2, 1, "finobt shrank back to its root");
    assert_eq!(fd, init.1, "fdblocks back");
    repair_clean(&img);
    check_model(&img, &init, &Model(BTreeMap::new()));
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn bad_requests_and_double_frees() {
    setup();
    if kernel_tests_disabled() {
        return;
    }
    let s = Scratch::new("allocbad");
    let img = s.path("a.img");
    mkfs_with(&img, 64 << 20, &["-d", "size=64m,agcount=2"], FSTESTS_ENV);
    let init = snapshot(&img);
    let mut e0 = None;
    batch(&img, |tx| {
        for r in [req(0, 0, 1), req(0, 5, 4), req(2, 1, 1)] {
            assert!(
                matches!(alloc_extent(tx, &r), Err(Error::Invalid(_))),
                "{r:?}"
            );
        }
        let mut r = req(0, 1, 1);
        r.align = 0;
        assert!(matches!(alloc_extent(tx, &r), Err(Error::Invalid(_))));
        // maxlen past the AG: as much as possible.
        let big = alloc_extent(tx, &req(1, 1, u32::MAX)).unwrap();
        assert!(big.len > 6000, "{big:?}");
        free_extent(tx, big.agno, big.agbno, big.len).unwrap();
        tx.force_busy().unwrap();
        // Larger than anything free: NoSpace, nothing changed.
        assert!(matches!(
            alloc_extent(tx, &req(1, 8000, 8000)),
            Err(Error::NoSpace)
        ));
        let e = alloc_extent(tx, &req(1, 16, 16)).unwrap();
        free_extent(tx, e.agno, e.agbno, e.len).unwrap();
        e0 = Some(e);
    });
    let e = e0.unwrap();
    // Freeing free space (all of it, or a part overlapping it) is corruption.
    for (b, l) in [(e.agbno.0, e.len), (e.agbno.0 + 3, 2), (e.agbno.0 - 1, 2)] {
        let mut tx = MemTx::new(dev(&img)).unwrap();
        let r = free_extent(&mut tx, e.agno, AgBlock(b), l);
        assert!(matches!(r, Err(Error::Corrupt { .. })), "{b}+{l}: {r:?}");
    }
    // Outside the AG or on its headers.
    let mut tx = MemTx::new(dev(&img)).unwrap();
    for (b, l) in [(0, 1), (8190, 10)] {
        let r = free_extent(&mut tx, AgNumber(0), AgBlock(b), l);
        assert!(matches!(r, Err(Error::Invalid(_))), "{b}+{l}: {r:?}");
    }
    drop(tx);
    check_model(&img, &init, &Model(BTreeMap::new()));
}

/// With an rmapbt, allocation and free work (the AGFL refill and trim
/// keep their OWN_AG records; the extent itself is the caller's to
/// record) and leave a filesystem xfs_repair finds clean.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn rmapbt_alloc_and_free() {
    setup();
    if kernel_tests_disabled() {
        return;
    }
    let s = Scratch::new("allocrmap");
    let img = s.path("a.img");
    mkfs_with(
        &img,
        64 << 20,
        &[
            "-m",
            "rmapbt=1",
            "-d",
            "size=64m,agcount=2",
            "-l",
            "size=16m",
        ],
        FSTESTS_ENV,
    );
    let mut tx = MemTx::new(dev(&img)).unwrap();
    let x = alloc_extent(&mut tx, &req(0, 1, 100)).unwrap();
    free_extent(&mut tx, x.agno, x.agbno, x.len).unwrap();
    tx.commit().unwrap();
    repair_clean(&img);
}

/// Lookups in every direction on both free-space trees (two levels)
/// agree with the records the read path lists.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn lookups_match_read_path() {
    use rxfs::btree::{self as bt, Lookup, Tree};
    use rxfs::format::btree::{AllocRec, BtreeKey};
    setup();
    if kernel_tests_disabled() {
        return;
    }
    let s = Scratch::new("alloclookup");
    let img = s.path("a.img");
    mkfs_with(&img, 64 << 20, &["-d", "size=64m,agcount=2"], FSTESTS_ENV);
    let mut model = Model(BTreeMap::new());
    fragment(&img, 1, 2400, &mut model);
    let (ags, _) = snapshot(&img);
    assert!(ags[0].levels.0 >= 2);
    let by_bno: Vec<(BtreeKey, AllocRec)> = ags[0]
        .free
        .iter()
        .map(|r| (BtreeKey(r.start as u64, 0, 0), *r))
        .collect();
    let mut by_cnt: Vec<(BtreeKey, AllocRec)> = ags[0]
        .free
        .iter()
        .map(|r| (BtreeKey(r.len as u64, r.start as u64, 0), *r))
        .collect();
    by_cnt.sort();
    let expect = |v: &[(BtreeKey, AllocRec)], k: BtreeKey, d: Lookup| -> Option<AllocRec> {
        let r = match d {
            Lookup::Eq => v.iter().find(|e| e.0 == k),
            Lookup::Ge => v.iter().find(|e| e.0 >= k),
            Lookup::Gt => v.iter().find(|e| e.0 > k),
            Lookup::Le => v.iter().rev().find(|e| e.0 <= k),
            Lookup::Lt => v.iter().rev().find(|e| e.0 < k),
        };
        r.map(|e| e.1)
    };
    let mut rng = Rng(99);
    let mut tx = MemTx::new(dev(&img)).unwrap();
    let dirs = [Lookup::Eq, Lookup::Ge, Lookup::Gt, Lookup::Le, Lookup::Lt];
    for i in 0..3000 {
        let (tree, v) = if i % 2 == 0 {
            (Tree::Bno, &by_bno)
        } else {
            (Tree::Cnt, &by_cnt)
        };
        // Half the keys exactly on a record, half anywhere.
        let k = if rng.below(2) == 0 {
            v[rng.below(v.len() as u64) as usize].0
        } else if tree == Tree::Bno {
            BtreeKey(rng.below(8300), 0, 0)
        } else {
            BtreeKey(rng.below(4), rng.below(8300), 0)
        };
        let d = dirs[rng.below(5) as usize];
        let got = bt::lookup(&mut tx, tree, AgNumber(0), k, d)
            .unwrap()
            .map(|f| AllocRec::decode(&f.rec));
        assert_eq!(got, expect(v, k, d), "{tree:?} {d:?} {k:?}");
    }
    // An update may not move a record past its neighbours.
    let (a, b) = (by_bno[10].1, by_bno[11].1);
    let mut moved = [0u8; 8];
    AllocRec {
        start: b.start + 1,
        len: 1,
    }
    .encode(&mut moved);
    let r = bt::update(&mut tx, Tree::Bno, AgNumber(0), by_bno[10].0, &moved);
    assert!(
        matches!(r, Err(Error::Invalid(_))),
        "{a:?} -> past {b:?}: {r:?}"
    );
    let r = bt::insert(&mut tx, Tree::Bno, AgNumber(0), &moved[..4]);
    assert!(matches!(r, Err(Error::Invalid(_))));
}

/// Bad bytes on disk (with good CRCs) give errors, never panics.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn corrupt_trees_give_errors() {
    use rxfs::bdev::MemDevice;
    use rxfs::format::btree::SBLOCK_CRC_OFF;
    use rxfs::format::{be32, crc, put_be16, put_be32};
    setup();
    if kernel_tests_disabled() {
        return;
    }
    let s = Scratch::new("alloccorrupt");
    let img = s.path("a.img");
    mkfs_with(&img, 64 << 20, &["-d", "size=64m,agcount=2"], FSTESTS_ENV);
    let mut model = Model(BTreeMap::new());
    fragment(&img, 1, 2400, &mut model);
    let pristine = std::fs::read(&img).unwrap();
    let (bs, ss) = (4096usize, 512usize);
    let agf_off = ss;
    let bno_root = be32(&pristine, agf_off + 16) as usize;
    assert_eq!(
        be32(&pristine, agf_off + 28),
        2,
        "bnobt should have 2 levels"
    );
    let root_off = bno_root * bs;
    let max_node = BtreeKind::Bno.max_recs(bs, false);
    let leaf0 = be32(&pristine, root_off + 56 + max_node * 8) as usize * bs;
    type Edit = Box<dyn Fn(&mut Vec<u8>)>;
    let agf_edit = |off: usize, v: u32| -> Edit {
        Box::new(move |d: &mut Vec<u8>| {
            put_be32(d, agf_off + off, v);
            crc::update(&mut d[agf_off..agf_off + ss], 216);
        })
    };
    let blk_edit = |blk: usize, f: fn(&mut [u8])| -> Edit {
        Box::new(move |d: &mut Vec<u8>| {
            f(&mut d[blk..blk + bs]);
            crc::update(&mut d[blk..blk + bs], SBLOCK_CRC_OFF);
        })
    };
    let cases: Vec<(&str, Edit)> = vec![
        ("bnobt level 9", agf_edit(28, 9)),
        ("cntbt root outside the AG", agf_edit(20, 0x00ff_ffff)),
        ("flcount 5000", agf_edit(48, 5000)),
        ("freeblks 0", agf_edit(52, 0)),
        (
            "root numrecs 60000",
            blk_edit(root_off, |b| put_be16(b, 6, 60000)),
        ),
        (
            "root ptr outside",
            blk_edit(root_off, |b| put_be32(b, 56 + 336 * 8, 0xffff_fff0)),
        ),
        ("root level 7", blk_edit(root_off, |b| put_be16(b, 4, 7))),
        (
            "leaf record overflows",
            blk_edit(leaf0, |b| put_be32(b, 60, u32::MAX)),
        ),
        ("leaf numrecs 0", blk_edit(leaf0, |b| put_be16(b, 6, 0))),
    ];
    for (name, edit) in cases {
        let mut data = pristine.clone();
        edit(&mut data);
        let dev: std::sync::Arc<dyn rxfs::bdev::BlockDevice> =
            std::sync::Arc::new(MemDevice::new(data));
        let mut tx = MemTx::new(dev).unwrap();
        let mut rng = Rng(5);
        let mut errors = 0;
        for _ in 0..100 {
            let mut r = req(0, 1, 1 + rng.below(8) as u32);
            r.near = Some(AgBlock(rng.below(8192) as u32));
            let res = if rng.below(3) == 0 {
                free_extent(
                    &mut tx,
                    AgNumber(0),
                    AgBlock(64 + 2 * rng.below(2000) as u32),
                    1,
                )
            } else {
                alloc_extent(&mut tx, &r).map(|_| ())
            };
            if res.is_err() {
                errors += 1;
                // A half-changed transaction is cancelled: start afresh.
                break;
            }
        }
        eprintln!("{name}: {errors} error(s)");
        assert!(errors > 0, "{name}: no operation noticed");
    }
}
