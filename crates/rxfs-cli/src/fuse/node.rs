//! The FUSE node table: inodes the kernel holds references to.
//!
//! Node ids are XFS inode numbers, except the root, which FUSE calls 1.
//! Every reply that hands the kernel a new reference (lookup,
//! readdirplus entries other than "." and "..") adds one to the node's
//! lookup count; FORGET subtracts, and the entry goes when it reaches 0.
//! The table holds `Arc<Inode>` so a busy node's inode stays decoded even
//! if the library's own cache evicts it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rxfs::fs::Inode;

struct Node {
    ip: Arc<Inode>,
    nlookup: u64,
}

#[derive(Default)]
pub struct NodeTable {
    map: Mutex<HashMap<u64, Node>>,
}

impl NodeTable {
    pub fn get(&self, ino: u64) -> Option<Arc<Inode>> {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&ino).map(|n| n.ip.clone())
    }

    /// One more kernel reference to `ip`.
    pub fn remember(&self, ip: &Arc<Inode>) {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(ip.ino.0)
            .and_modify(|n| n.nlookup += 1)
            .or_insert_with(|| Node {
                ip: ip.clone(),
                nlookup: 1,
            });
    }

    /// The kernel dropped `n` references.
    pub fn forget(&self, ino: u64, n: u64) {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(node) = map.get_mut(&ino) {
            node.nlookup = node.nlookup.saturating_sub(n);
            if node.nlookup == 0 {
                map.remove(&ino);
            }
        }
    }
}
