//! The first pass of a populate: walk the host tree once, `lstat` every
//! path, and lay the result out as a flat list in pre-order.
//!
//! Invariants of a [`Tree`]:
//! - `nodes[0]` is the source root; every other node's `parent` is the
//!   index of a directory node that comes before it;
//! - a directory's subtree is the contiguous range `i + 1 .. end` (so the
//!   copy pass can finish a directory, its times and ACLs, once it has
//!   passed `end`);
//! - entries of one directory are sorted by their raw name bytes (so
//!   entries are created, and inodes allocated, in the same order on every
//!   run; data block placement still depends on the copy threads' timing);
//! - `bytes_total` counts each regular inode once (hard links once).

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs::Metadata;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::{Cause, PopulateError};

/// One host path to copy.
#[derive(Debug)]
pub struct Node {
    pub path: PathBuf,
    /// The name under its parent in the image (the source root's own name
    /// is its last path component, or empty).
    pub name: Vec<u8>,
    /// Index of the parent node; `usize::MAX` for the root.
    pub parent: usize,
    /// For directories: one past the last node of the subtree.
    pub end: usize,
    pub meta: Metadata,
}

/// The whole source tree, in pre-order.
#[derive(Debug, Default)]
pub struct Tree {
    pub nodes: Vec<Node>,
    /// Regular-file bytes (by `st_size`), each inode once.
    pub bytes_total: u64,
}

fn source_err(path: &Path, op: &'static str, e: std::io::Error) -> PopulateError {
    PopulateError {
        path: path.to_path_buf(),
        op,
        cause: Cause::Source(e),
    }
}

/// Walk `root` without following symbolic links; the root itself is
/// followed if `follow_root` (a symlink to the directory to copy from).
/// Entries whose (st_dev, st_ino) is in `exclude` are left out.
pub fn scan(root: &Path, follow_root: bool, exclude: &[(u64, u64)]) -> Result<Tree, PopulateError> {
    let meta = if follow_root {
        std::fs::metadata(root)
    } else {
        std::fs::symlink_metadata(root)
    };
    let meta = meta.map_err(|e| source_err(root, "stat", e))?;
    // A followed root is read through its target (xattrs are read
    // without following links).
    let root_path = if follow_root && root.is_symlink() {
        root.canonicalize()
            .map_err(|e| source_err(root, "resolve", e))?
    } else {
        root.to_path_buf()
    };
    let root = root_path.as_path();
    let name = root
        .file_name()
        .map(|n| n.as_bytes().to_vec())
        .unwrap_or_default();
    let mut tree = Tree::default();
    let mut seen: HashSet<(u64, u64)> = HashSet::new();
    let root_is_dir = meta.is_dir();
    push(
        &mut tree,
        &mut seen,
        root.to_path_buf(),
        name,
        usize::MAX,
        meta,
    );
    if !root_is_dir {
        return Ok(tree);
    }
    // Depth first through an explicit stack of frames: (directory index,
    // its children still to add, in reverse order). A child directory is
    // entered before its next sibling is added, which keeps subtrees
    // contiguous.
    let mut frames: Vec<(usize, Vec<(OsString, Metadata)>)> = vec![(0, list(root, exclude)?)];
    while let Some((dir, rest)) = frames.last_mut() {
        let dir = *dir;
        let Some((child, meta)) = rest.pop() else {
            frames.pop();
            tree.nodes[dir].end = tree.nodes.len();
            continue;
        };
        let path = tree.nodes[dir].path.join(&child);
        let is_dir = meta.is_dir();
        let name = child.as_bytes().to_vec();
        let idx = push(&mut tree, &mut seen, path, name, dir, meta);
        if is_dir {
            let kids = list(&tree.nodes[idx].path, exclude)?;
            frames.push((idx, kids));
        }
    }
    Ok(tree)
}

/// The entries of directory `dir` with their `lstat` (through the
/// directory's descriptor), sorted by name bytes, in reverse (popped from
/// the end in order).
fn list(dir: &Path, exclude: &[(u64, u64)]) -> Result<Vec<(OsString, Metadata)>, PopulateError> {
    let mut ents: Vec<(OsString, Metadata)> = Vec::new();
    let rd = std::fs::read_dir(dir).map_err(|e| source_err(dir, "read directory", e))?;
    for ent in rd {
        let ent = ent.map_err(|e| source_err(dir, "read directory", e))?;
        // DirEntry::metadata does not follow symbolic links.
        let meta = ent
            .metadata()
            .map_err(|e| source_err(&ent.path(), "stat", e))?;
        if !exclude.contains(&(meta.dev(), meta.ino())) {
            ents.push((ent.file_name(), meta));
        }
    }
    ents.sort_unstable_by(|a, b| b.0.as_bytes().cmp(a.0.as_bytes()));
    Ok(ents)
}

fn push(
    tree: &mut Tree,
    seen: &mut HashSet<(u64, u64)>,
    path: PathBuf,
    name: Vec<u8>,
    parent: usize,
    meta: Metadata,
) -> usize {
    if meta.is_file() && (meta.nlink() < 2 || seen.insert((meta.dev(), meta.ino()))) {
        tree.bytes_total += meta.size();
    }
    let idx = tree.nodes.len();
    tree.nodes.push(Node {
        path,
        name,
        parent,
        end: idx + 1,
        meta,
    });
    idx
}
