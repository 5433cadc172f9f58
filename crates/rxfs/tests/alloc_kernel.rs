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

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use common::*;
use rxfs::alloc::{alloc_extent, free_extent, AllocReq};
use rxfs::bdev::{BlockDevice, FileDevice};
use rxfs::format::btree::{AllocRec, BtreeKind, SBLOCK_HDR_SIZE};
use rxfs::format::{be16, be32};
use rxfs::fs::btree::BtreeRoot;
use rxfs::types::{AgBlock, AgNumber};
use rxfs::xact::memtx::MemTx;
use rxfs::{Error, Filesystem, MountOptions};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn seed(default: u64) -> u64 {
    let s = std::env::var("RXFS_ALLOC_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    eprintln!("seed {s} (RXFS_ALLOC_SEED={s} replays it)");
    s
}

fn setup() {
    if kernel_tests_disabled() {
        return;
    }
    require_root();
    require_tools(&["mkfs.xfs", "xfs_db", "xfs_repair"]);
}

fn dev(img: &Path) -> Arc<dyn BlockDevice> {
    Arc::new(FileDevice::open(img, false, false).unwrap())
}

/// One AG as the read path sees it.
#[derive(Debug, Clone)]
struct AgState {
    ag_len: u32,
    freeblks: u32,
    flcount: u32,

    levels: (u32, u32),
    free: Vec<AllocRec>,
    agfl: Vec<u32>,
    /// Blocks of the bnobt and cntbt.
    tree_blocks: Vec<u32>,
}

impl AgState {
    /// Blocks used by something other than free space and its trees.
    fn used(&self) -> u64 {
        self.ag_len as u64
            - self.freeblks as u64
            - self.flcount as u64
            - self.tree_blocks.len() as u64
    }
}

/// Check the shape of one tree below `agbno` (at `level`); collects its
/// blocks; returns the first key bytes of the block.
fn shape(
    fs: &Filesystem,
    kind: BtreeKind,
    agno: AgNumber,
    agbno: u32,
    level: u32,
    root: bool,
    blocks: &mut Vec<u32>,
) -> Vec<u8> {
    let geo = fs.geo();
    let bs = geo.blocksize as usize;
    let b = fs
        .read_raw(geo.agb_to_daddr(agno, AgBlock(agbno)), bs)
        .unwrap();
    blocks.push(agbno);
    assert_eq!(be16(&b, 4) as u32, level, "{kind:?} block {agbno} level");
    let n = be16(&b, 6) as usize;
    let leaf = level == 0;
    let max = kind.max_recs(bs, leaf);
    assert!(
        root || n >= max / 2,
        "{kind:?} AG {agno} block {agbno} level {level}: {n} recs < min {}",
        max / 2
    );
    assert!(n >= 1 || (root && leaf), "{kind:?} empty block {agbno}");
    let ks = kind.key_size();
    if leaf {
        return b[SBLOCK_HDR_SIZE..SBLOCK_HDR_SIZE + ks].to_vec();
    }
    let mut first = Vec::new();
    for i in 0..n {
        let key = b[SBLOCK_HDR_SIZE + i * ks..SBLOCK_HDR_SIZE + (i + 1) * ks].to_vec();
        let ptr = be32(&b, SBLOCK_HDR_SIZE + max * ks + 4 * i);
        let child = shape(fs, kind, agno, ptr, level - 1, false, blocks);
        assert_eq!(key, child, "{kind:?} AG {agno} node {agbno} key {i}");
        if i == 0 {
            first = key;
        }
    }
    first
}

/// Read every AG through the read path and check its internal consistency.
fn snapshot(img: &Path) -> (Vec<AgState>, u64) {
    let opts = MountOptions {
        read_only: true,
        ..Default::default()
    };
    let fs = Filesystem::open(dev(img), None, opts).unwrap();
    let mut out = Vec::new();
    for a in 0..fs.geo().agcount {
        let agno = AgNumber(a);
        let agf = fs.read_agf(agno).unwrap();
        let agfl = fs.read_agfl(agno).unwrap();
        let c = fs.ag_check(agno).unwrap();
        let fl: Vec<u32> = agfl
            .active_blocks(&agf, &c)
            .unwrap()
            .iter()
            .map(|b| b.0)
            .collect();
        let mut recs = Vec::new();
        let mut blocks = Vec::new();
        for kind in [BtreeKind::Bno, BtreeKind::Cnt] {
            let root = BtreeRoot::from_agf(kind, agno, &agf);
            let r: Vec<AllocRec> = fs.btree_records(&root).unwrap();
            shape(
                &fs,
                kind,
                agno,
                root.root.0,
                root.levels - 1,
                true,
                &mut blocks,
            );
            recs.push(r);
        }
        let mut by_size = recs[1].clone();
        by_size.sort();
        let mut by_bno = recs[0].clone();
        by_bno.sort();
        assert_eq!(by_bno, by_size, "AG {a}: bnobt and cntbt differ");
        for w in recs[0].windows(2) {
            assert!(
                w[0].start + w[0].len < w[1].start,
                "AG {a}: free extents {w:?} touch or overlap"
            );
        }
        let sum: u64 = recs[0].iter().map(|r| r.len as u64).sum();
        assert_eq!(sum, agf.freeblks as u64, "AG {a} freeblks");
        let longest = recs[0].iter().map(|r| r.len).max().unwrap_or(0);
        assert_eq!(longest, agf.longest, "AG {a} longest");
        assert_eq!(blocks.len() as u32 - 2, agf.btreeblks, "AG {a} btreeblks");
        let st = AgState {
            ag_len: agf.length,
            freeblks: agf.freeblks,
            flcount: agf.flcount,

            levels: (agf.bno_level, agf.cnt_level),
            free: recs.swap_remove(0),
            agfl: fl,
            tree_blocks: blocks,
        };
        // AGFL and tree blocks are neither free nor each other.
        let mut meta: Vec<u32> = st.agfl.iter().chain(&st.tree_blocks).copied().collect();
        meta.sort();
        let n = meta.len();
        meta.dedup();
        assert_eq!(
            n,
            meta.len(),
            "AG {a}: a block is on the AGFL and in a tree"
        );
        for b in &meta {
            assert!(
                !in_free(&st.free, *b, 1),
                "AG {a}: block {b} is free and metadata"
            );
        }
        out.push(st);
    }
    (out, fs.sb().fdblocks)
}

fn in_free(free: &[AllocRec], b: u32, len: u32) -> bool {
    free.iter()
        .any(|r| r.start < b + len && b < r.start + r.len)
}

/// Compare the image with the model of allocated extents.
fn check_model(img: &Path, init: &(Vec<AgState>, u64), model: &Model) -> Vec<AgState> {
    let (ags, fdblocks) = snapshot(img);
    let total_alloc: u64 = model.0.values().map(|&l| l as u64).sum();
    assert_eq!(fdblocks, init.1 - total_alloc, "sb fdblocks");
    let mut db_free = 0u64;
    for (a, st) in ags.iter().enumerate() {
        let mine: Vec<(u32, u32)> = model
            .0
            .range((a as u32, 0)..(a as u32 + 1, 0))
            .map(|(&(_, b), &l)| (b, l))
            .collect();
        let alloc: u64 = mine.iter().map(|&(_, l)| l as u64).sum();
        assert_eq!(
            st.used() - alloc,
            init.0[a].used(),
            "AG {a}: blocks leaked or double counted"
        );
        for &(b, l) in &mine {
            assert!(
                !in_free(&st.free, b, l),
                "AG {a}: allocated {b}+{l} is free"
            );
            for m in st.agfl.iter().chain(&st.tree_blocks) {
                assert!(
                    !(b <= *m && *m < b + l),
                    "AG {a}: allocated {b}+{l} holds metadata {m}"
                );
            }
        }
        db_free += st.freeblks as u64 + st.flcount as u64;
    }
    assert_eq!(freesp_total(img), db_free, "xfs_db freesp -s total");
    ags
}

fn freesp_total(img: &Path) -> u64 {
    let out = run_output("xfs_db", &["-r", "-c", "freesp -s", img.to_str().unwrap()]);
    let s = String::from_utf8_lossy(&out.stdout);
    let line = s
        .lines()
        .find(|l| l.starts_with("total free blocks"))
        .unwrap_or_else(|| panic!("no total in freesp output: {s}"));
    line.rsplit(' ').next().unwrap().trim().parse().unwrap()
}

fn repair_clean(img: &Path) {
    let out = std::process::Command::new("xfs_repair")
        .args(["-n", img.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "xfs_repair -n failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What we hold: (agno, agbno) -> len.
struct Model(BTreeMap<(u32, u32), u32>);

impl Model {
    fn add(&mut self, a: u32, b: u32, l: u32) {
        let clash = self
            .0
            .range((a, 0)..(a, b + l))
            .next_back()
            .filter(|(&(_, s), &sl)| s + sl > b);
        assert!(clash.is_none(), "{a}/{b}+{l} handed out twice: {clash:?}");
        self.0.insert((a, b), l);
    }
}

/// Run a batch of operations in one MemTx and commit it.
fn batch(img: &Path, f: impl FnOnce(&mut MemTx)) {
    let mut tx = MemTx::new(dev(img)).unwrap();
    f(&mut tx);
    tx.commit().unwrap();
}

fn req(agno: u32, minlen: u32, maxlen: u32) -> AllocReq {
    AllocReq {
        agno: AgNumber(agno),
        near: None,
        minlen,
        maxlen,
        align: 1,
        any_ag: false,
        meta: false,
    }
}

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

/// Random allocations and frees.
fn random_ops(img: &Path, rng: &mut Rng, agcount: u32, ops: usize, model: &mut Model) {
    let mut done = 0;
    while done < ops {
        batch(img, |tx| {
            for _ in 0..200 {
                done += 1;
                if model.0.is_empty() || rng.below(10) < 6 {
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
                        }
                        Err(Error::NoSpace) => {}
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
                }
            }
        });
    }
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

fn run_random(name: &str, opts: &[&str], frag: u32, want_levels: u32, default_seed: u64) {
    setup();
    if kernel_tests_disabled() {
        return;
    }
    let s = Scratch::new(name);
    let img = s.path("a.img");
    mkfs_with(&img, 64 << 20, opts, FSTESTS_ENV);
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
        random_ops(&img, &mut rng, agcount, 1000, &mut model);
        check_model(&img, &init, &model);
    }

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
fn alloc_free_random_4k() {
    run_random(
        "alloc4k",
        &["-d", "size=64m,agcount=2"],
        2400,
        2,
        0x5eed_0001,
    );
}

#[test]
fn alloc_free_random_1k() {
    run_random(
        "alloc1k",
        &["-b", "size=1024", "-d", "size=64m,agcount=2"],
        16000,
        3,
        0x5eed_0002,
    );
}

#[test]
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
