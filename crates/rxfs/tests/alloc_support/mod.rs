//! Helpers of `alloc_kernel.rs`: reading an image back through the read
//! path, checking it, and the model of what a test holds.

#![allow(dead_code)]
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::common::*;
use rxfs::alloc::AllocReq;
use rxfs::bdev::{BlockDevice, FileDevice};
use rxfs::btree::walk::BtreeRoot;
use rxfs::format::btree::{AllocRec, BtreeKind, SBLOCK_HDR_SIZE};
use rxfs::format::{be16, be32};
use rxfs::recover::memtx::MemTx;
use rxfs::types::{AgBlock, AgNumber};
use rxfs::{Filesystem, MountOptions};

pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

pub fn seed(default: u64) -> u64 {
    let s = std::env::var("RXFS_ALLOC_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    eprintln!("seed {s} (RXFS_ALLOC_SEED={s} replays it)");
    s
}

pub fn setup() {
    if kernel_tests_disabled() {
        return;
    }
    require_root();
    require_tools(&["mkfs.xfs", "xfs_db", "xfs_repair"]);
}

pub fn dev(img: &Path) -> Arc<dyn BlockDevice> {
    Arc::new(FileDevice::open(img, false, false).unwrap())
}

/// One AG as the read path sees it.
#[derive(Debug, Clone)]
pub struct AgState {
    pub ag_len: u32,
    pub freeblks: u32,
    pub flcount: u32,

    pub levels: (u32, u32),
    pub free: Vec<AllocRec>,
    pub agfl: Vec<u32>,
    /// Blocks of the bnobt and cntbt.
    pub tree_blocks: Vec<u32>,
}

impl AgState {
    /// Blocks used by something other than free space and its trees.
    pub fn used(&self) -> u64 {
        self.ag_len as u64
            - self.freeblks as u64
            - self.flcount as u64
            - self.tree_blocks.len() as u64
    }
}

/// Check the shape of one tree below `agbno` (at `level`); collects its
/// blocks; returns the first key bytes of the block.
pub fn shape(
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
pub fn snapshot(img: &Path) -> (Vec<AgState>, u64) {
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
    // The kernel's lazy-counter sum (xfs_initialize_perag_data): free
    // extents, AGFL and free-space btree blocks all count as free.
    let sum: u64 = out
        .iter()
        .map(|a| a.freeblks as u64 + a.flcount as u64 + a.tree_blocks.len() as u64 - 2)
        .sum();
    assert_eq!(fs.sb().fdblocks, sum, "sb_fdblocks vs the AGFs");
    (out, fs.sb().fdblocks)
}

pub fn in_free(free: &[AllocRec], b: u32, len: u32) -> bool {
    free.iter()
        .any(|r| r.start < b + len && b < r.start + r.len)
}

/// Compare the image with the model of allocated extents.
pub fn check_model(img: &Path, init: &(Vec<AgState>, u64), model: &Model) -> Vec<AgState> {
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
    // With -n, repair skips rebuilding the free space (phase 5), so the
    // blocks we hold without an owner are not reported; everything else is.
    repair_clean(img);
    ags
}

pub fn freesp_total(img: &Path) -> u64 {
    let out = run_output("xfs_db", &["-r", "-c", "freesp -s", img.to_str().unwrap()]);
    let s = String::from_utf8_lossy(&out.stdout);
    let line = s
        .lines()
        .find(|l| l.starts_with("total free blocks"))
        .unwrap_or_else(|| panic!("no total in freesp output: {s}"));
    line.rsplit(' ').next().unwrap().trim().parse().unwrap()
}

pub fn repair_clean(img: &Path) {
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
pub struct Model(pub BTreeMap<(u32, u32), u32>);

impl Model {
    pub fn add(&mut self, a: u32, b: u32, l: u32) {
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
pub fn batch(img: &Path, f: impl FnOnce(&mut MemTx)) {
    let mut tx = MemTx::new(dev(img)).unwrap();
    f(&mut tx);
    tx.commit().unwrap();
}

pub fn req(agno: u32, minlen: u32, maxlen: u32) -> AllocReq {
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
