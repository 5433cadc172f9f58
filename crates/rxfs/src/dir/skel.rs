//! The index of a node directory as it is on disk ([`DirSkel`]), kept in
//! core between transactions as the directory inode's fork cache.
//!
//! A [`super::big::BigDir`] starts from one: built by reading the fork, the
//! DA nodes and the free index blocks ([`super::index::load_big`]), or
//! taken from the cache, which skips those reads and decodes entirely (a
//! node directory of 50,000 entries has a fork of hundreds of extents, a
//! btree to walk, and nodes to decode: work that grew every operation
//! with the directory's size). Commit compares the new index with the
//! skeleton and rewrites only the node and free index blocks that differ,
//! then installs the new skeleton. When the leaf blocks are the kept ones
//! under node entries of the same hashes, and the free index blocks the
//! same (most creates and removes), the DA nodes cannot have changed:
//! commit skips building them and the new skeleton shares the node, parent
//! and index maps (behind `Arc`s) with the old one, so an operation costs
//! memory work in the number of leaf blocks only for the leaf list.
//!
//! Invariants:
//! - a skeleton describes the directory exactly as the transaction that
//!   set it left it: the extent map, every leaf block (fork block, the hash
//!   of its node entry, its sibling pointers), every DA node (level,
//!   entries, sibling pointers), the bests of every data block, and the
//!   fork block and kind of every index block;
//! - it is installed only by the commit of a transaction that set it, and
//!   dropped by the commit of any transaction that changed the directory
//!   inode without setting it ([`crate::xact::MetaTx::set_fork_cache`]).
//!   Every change of a leaf or node directory goes through
//!   `super::big::BigDir::commit_data_and_fork`, which sets it (or
//!   drops it: leaf form, conversions); every change of a directory
//!   changes its inode (timestamps, size), so a change made any other way
//!   drops the skeleton;
//! - it carries a fingerprint of the dinode fields that every change of
//!   the fork touches or that identify the inode (number, generation,
//!   format, extent count, size, block count, fork offset): a skeleton
//!   whose fingerprint differs from the joined dinode is not used (defence
//!   in depth: a path that broke the rule above, or an inode reused).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::big::LeafBlk;
use crate::bmap::map::ExtentMap;
use crate::format::bufkind::BufKind;
use crate::format::dinode_edit as di;

/// A DA node block as on disk: level, entries (hash, child), sibling
/// pointers (forw, back).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeImg {
    pub level: u16,
    pub ents: Vec<(u32, u64)>,
    pub forw: u64,
    pub back: u64,
}

/// A node directory's index as on disk (see the module doc).
#[derive(Debug, Clone)]
pub struct DirSkel {
    pub fp: [u64; 7],
    pub map: ExtentMap,
    /// Leaf blocks in hash order, none read (`ents` is `None`), sibling
    /// pointers known.
    pub leaves: Vec<LeafBlk>,
    /// Longest unused slot of each data block (`NULL_DATAOFF`: a hole),
    /// without trailing holes.
    pub bests: Vec<u16>,
    /// The DA node each index block under a node hangs under.
    pub parent: Arc<BTreeMap<u64, u64>>,
    /// Every DA node block, the root included.
    pub nodes: Arc<BTreeMap<u64, NodeImg>>,
    /// Every index block (leaf, DA node, free index) and its kind.
    pub index: Arc<BTreeMap<u64, BufKind>>,
}

/// The dinode fields a skeleton is checked against.
pub fn fingerprint(d: &[u8]) -> [u64; 7] {
    [
        di::ino(d),
        di::gen(d) as u64,
        di::format(d) as u64,
        di::nextents(d),
        di::size(d),
        di::nblocks(d),
        di::forkoff(d) as u64,
    ]
}

impl DirSkel {
    /// The skeleton in `cache` if it is one and describes the dinode
    /// `d` (its fingerprint matches).
    pub fn kept(cache: Option<crate::xact::ForkCache>, d: &[u8]) -> Option<Arc<DirSkel>> {
        let sk = cache?.downcast::<DirSkel>().ok()?;
        (sk.fp == fingerprint(d)).then_some(sk)
    }

    /// An empty skeleton of a fork mapped by `map` (filled by loading).
    pub fn empty(map: ExtentMap) -> DirSkel {
        DirSkel {
            fp: [0; 7],
            map,
            leaves: Vec::new(),
            bests: Vec::new(),
            parent: Arc::default(),
            nodes: Arc::default(),
            index: Arc::default(),
        }
    }
}
