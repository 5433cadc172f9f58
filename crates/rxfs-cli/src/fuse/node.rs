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

use rxfs::inode::Inode;

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

    /// The kernel dropped `n` references. Returns whether that was its
    /// last (the kernel no longer knows the node).
    pub fn forget(&self, ino: u64, n: u64) -> bool {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(node) = map.get_mut(&ino) {
            node.nlookup = node.nlookup.saturating_sub(n);
            if node.nlookup == 0 {
                map.remove(&ino);
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use rxfs::format::inode::{InodeCore, Timestamp};
    use rxfs::inode::Fork;
    use rxfs::types::Ino;

    pub fn fake_inode(ino: u64, mode: u16) -> Arc<Inode> {
        let t = Timestamp::default();
        Arc::new(Inode {
            ino: Ino(ino),
            core: InodeCore {
                mode,
                version: 3,
                format: 2,
                uid: 0,
                gid: 0,
                nlink: 1,
                projid: 0,
                atime: t,
                mtime: t,
                ctime: t,
                crtime: t,
                size: 0,
                nblocks: 0,
                extsize: 0,
                nextents: 0,
                anextents: 0,
                forkoff: 0,
                aformat: 0,
                flags: 0,
                flags2: 0,
                gen: 0,
                next_unlinked: u32::MAX,
                changecount: 0,
                lsn: 0,
                cowextsize: 0,
                ino,
                uuid: [0; 16],
            },
            data: Fork::Extents {
                list: vec![],
                btree: false,
            },
            attr: None,
        })
    }

    #[test]
    fn lookup_counts() {
        let t = NodeTable::default();
        let a = fake_inode(131, 0o100644);
        t.remember(&a);
        t.remember(&a);
        t.remember(&fake_inode(132, 0o100644));
        t.forget(131, 1);
        assert!(t.get(131).is_some());
        t.forget(131, 1);
        assert!(t.get(131).is_none());
        // Forgetting more than known, or unknown nodes, is harmless.
        t.forget(132, 5);
        t.forget(999, 1);
        assert!(t.get(132).is_none());
    }
}
