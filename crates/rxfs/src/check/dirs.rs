//! Directories, link counts, reachability and attribute forks.
//!
//! Invariants checked: every directory reads in its form (shortform,
//! block, leaf, node) through the read path's verifiers; `.` names the
//! directory itself; every entry names an in-use inode whose type matches
//! the entry's ftype; every name is found again by a lookup through the
//! hash index (leaf/node forms), and the index holds no more live entries
//! than there are names ([`super::dirindex`]); `.` and `..` exist; `..` names the one directory holding an
//! entry for it (the root's names the root); a directory is named by at
//! most one entry; nlink equals the entries naming the inode, plus for a
//! directory its `.` and its subdirectories' `..` (and the root's own
//! `..`); every in-use inode is reachable, is a superblock metadata inode
//! or sits on an AGI unlinked list (these two only when every AG's inodes
//! and every directory could be read). Attribute forks: every attribute of
//! every inode is listed, then found again by name (through the hashes)
//! and its value read (remote values included).

use std::collections::HashMap;

use super::{Checker, Progress};
use crate::inode::{Fork, Inode};
use crate::types::{FileType, Ino};

/// Entries of one directory looked up again through the index, at most.
const LOOKUP_PROBLEMS_MAX: usize = 8;

pub(crate) fn check_dirs(c: &mut Checker, progress: Progress) {
    let fs = c.fs;
    let root = fs.sb().rootino;
    let ag_of = |ino: u64| fs.geo().ino_agno(Ino(ino)).0;
    match c.inodes.get(&root) {
        Some(i) if i.ftype == Some(FileType::Directory) => {}
        _ if c.inode_ags_bad.contains(&ag_of(root)) => {}
        _ => c.add_ino(
            "sb-rootino",
            root,
            "the root inode is not an in-use directory",
        ),
    }
    let mut refs: HashMap<u64, u32> = HashMap::new();
    let mut subdirs: HashMap<u64, u32> = HashMap::new();
    let mut parent_of: HashMap<u64, u64> = HashMap::new();
    let mut dotdot: HashMap<u64, u64> = HashMap::new();
    let dirs = std::mem::take(&mut c.dirs);
    let mut dirs_bad = 0;
    let total = dirs.len() as u64;
    for (n, &d) in dirs.iter().enumerate() {
        if n % 256 == 0 {
            progress("directories", n as u64, total);
        }
        c.report.stats.directories += 1;
        let ip = match fs.read_inode(Ino(d)) {
            Ok(ip) => ip,
            Err(_) => continue, // reported by the inode phase
        };
        let mut entries = Vec::new();
        if let Err(e) = fs.readdir(&ip, 0, &mut |e| {
            entries.push(e.clone());
            true
        }) {
            c.add_ino("dir-bad", d, e.to_string());
            dirs_bad += 1;
        } else {
            match super::dirindex::live_index_entries(fs, &ip) {
                Ok(Some(n)) if n != entries.len() as u64 => {
                    let msg = format!(
                        "the hash index holds {n} live entries, the data blocks {}",
                        entries.len()
                    );
                    c.add_ino("dir-index-count", d, msg);
                }
                Ok(_) => {}
                Err(e) => c.add_ino("dir-index-bad", d, e.to_string()),
            }
            for (name, code) in [(&b"."[..], "dir-dot"), (&b".."[..], "dir-dotdot")] {
                if !entries.iter().any(|e| e.name == name) {
                    let n = String::from_utf8_lossy(name);
                    c.add_ino(code, d, format!("no '{n}' entry"));
                }
            }
        }
        let mut lookup_problems = 0;
        for e in &entries {
            if e.name == b"." {
                if e.ino.0 != d {
                    c.add_ino("dir-dot", d, format!("'.' names inode {}", e.ino.0));
                }
                continue;
            }
            if e.name == b".." {
                dotdot.insert(d, e.ino.0);
                continue;
            }
            c.report.stats.dir_entries += 1;
            let name = String::from_utf8_lossy(&e.name).into_owned();
            let Some(info) = c.inodes.get(&e.ino.0).copied() else {
                if c.inode_ags_bad.contains(&ag_of(e.ino.0)) {
                    continue;
                }
                let msg = format!("entry {name:?} names inode {}, which is free", e.ino.0);
                c.add_ino("dir-entry-free-inode", d, msg);
                continue;
            };
            *refs.entry(e.ino.0).or_default() += 1;
            if let (Some(ft), Some(it)) = (e.ftype, info.ftype) {
                if ft != it {
                    let msg = format!(
                        "entry {name:?} has ftype {ft:?}, inode {} is {it:?}",
                        e.ino.0
                    );
                    c.add_ino("dir-ftype", d, msg);
                }
            }
            if info.ftype == Some(FileType::Directory) {
                *subdirs.entry(d).or_default() += 1;
                if let Some(p) = parent_of.insert(e.ino.0, d) {
                    let msg = format!("directory {} is named in {p} and in {d}", e.ino.0);
                    c.add_ino("dir-multiple-parents", e.ino.0, msg);
                }
            }
            if matches!(ip.data, Fork::Extents { .. }) && lookup_problems < LOOKUP_PROBLEMS_MAX {
                match fs.lookup(&ip, &e.name) {
                    Ok(i) if i == e.ino => {}
                    r => {
                        lookup_problems += 1;
                        let got = match r {
                            Ok(i) => format!("inode {}", i.0),
                            Err(e) => e.to_string(),
                        };
                        let msg = format!(
                            "lookup of {name:?} (inode {}) through the hash index gave {got}",
                            e.ino.0
                        );
                        c.add_ino("dir-index-bad", d, msg);
                    }
                }
            }
        }
    }
    for &d in &dirs {
        let Some(&dd) = dotdot.get(&d) else { continue };
        let want = if d == root {
            Some(root)
        } else {
            parent_of.get(&d).copied()
        };
        if let Some(p) = want {
            if dd != p {
                c.add_ino(
                    "dir-dotdot",
                    d,
                    format!("'..' names {dd}, the parent is {p}"),
                );
            }
        }
    }
    // With an AG's inodes or a directory's entries unknown, link counts
    // and reachability would only echo that finding.
    if c.inode_ags_bad.is_empty() && dirs_bad == 0 {
        check_links(c, root, &refs, &subdirs);
    }
    c.dirs = dirs;
}

/// Link counts and reachability.
fn check_links(c: &mut Checker, root: u64, refs: &HashMap<u64, u32>, subdirs: &HashMap<u64, u32>) {
    let sb = c.fs.sb();
    let meta: Vec<u64> = [sb.rbmino, sb.rsumino, sb.uquotino, sb.gquotino, sb.pquotino]
        .into_iter()
        .filter(|&i| i != 0 && i != u64::MAX)
        .collect();
    let mut inos: Vec<(u64, super::InodeInfo)> = c.inodes.iter().map(|(k, v)| (*k, *v)).collect();
    inos.sort_by_key(|x| x.0);
    for (ino, info) in inos {
        let Some(ft) = info.ftype else { continue };
        if meta.contains(&ino) {
            continue;
        }
        let r = refs.get(&ino).copied().unwrap_or(0);
        if r == 0 && ino != root {
            if !c.unlinked.contains(&ino) {
                let msg = format!("in use (nlink {}) but no directory names it", info.nlink);
                c.add_ino("inode-unreachable", ino, msg);
            }
            continue;
        }
        let mut want = r as u64;
        if ft == FileType::Directory {
            want += 1 + subdirs.get(&ino).copied().unwrap_or(0) as u64;
            if ino == root {
                want += 1;
            }
        }
        if info.nlink as u64 != want {
            let msg = format!("nlink {}, counted {want} links", info.nlink);
            c.add_ino("inode-nlink", ino, msg);
        }
    }
}

/// Read every attribute of `ip` (names and values).
pub(crate) fn check_attrs(c: &mut Checker, ip: &Inode) {
    let code = match &ip.attr {
        None => return,
        Some(Fork::Local(_)) => "attr-sf-bad",
        Some(_) => "attr-leaf-bad",
    };
    let names = match c.fs.listxattr(ip) {
        Ok(n) => n,
        Err(e) => {
            c.add_ino(code, ip.ino.0, e.to_string());
            return;
        }
    };
    for name in names {
        c.report.stats.xattrs += 1;
        // Linux hides user attributes of special files: not an error.
        let hidden = name.starts_with(b"user.")
            && !matches!(
                ip.file_type(),
                Some(FileType::Regular | FileType::Directory)
            );
        let n = String::from_utf8_lossy(&name).into_owned();
        match c.fs.getxattr(ip, &name) {
            Err(e) if e.is_corrupt() || matches!(e, crate::Error::Io { .. }) => {
                c.add_ino(code, ip.ino.0, format!("attribute {n:?}: {e}"));
            }
            // Listed, but a lookup through the hashes does not find it.
            Err(crate::Error::NoAttr) if !hidden => {
                let msg = format!("attribute {n:?} is listed but its lookup by name fails");
                c.add_ino(code, ip.ino.0, msg);
            }
            _ => {}
        }
    }
}
