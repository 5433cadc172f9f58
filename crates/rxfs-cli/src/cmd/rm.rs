//! `rxfs rm`: remove a path from an image, like rm(1).
//!
//! Without `-r` a directory is removed only when empty; `-r` removes a
//! tree depth first (entries, then their directory), one transaction per
//! entry. The walk keeps an explicit stack and enters each directory inode
//! once, so a corrupt image cannot make it recurse without bound or loop.

use std::collections::HashSet;
use std::path::PathBuf;

use rxfs::types::Ino;
use rxfs::Filesystem;

use super::populate::{finish, join, lookup, open_rw, parent_dir, split_parent};
use crate::opts::WriteArgs;
use crate::{CliError, CliResult};

/// Remove a file, or a directory tree with -r, from IMAGE.
///
/// Without -r a directory is removed only if it is empty.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The image file or block device (opened read-write).
    pub image: PathBuf,
    /// Path in the image.
    pub path: String,
    /// Remove directories and their contents.
    #[arg(short = 'r', short_alias = 'R', long)]
    pub recursive: bool,
    #[command(flatten)]
    pub img: WriteArgs,
}

pub fn run(a: Args) -> CliResult<()> {
    let fs = open_rw(&a.image, &a.img.parse()?)?;
    let r = rm(&fs, &a);
    finish(&fs, &a.image, r)
}

fn rm(fs: &Filesystem, a: &Args) -> CliResult<()> {
    let (parent, name) = split_parent(&a.path)?;
    let pino = parent_dir(fs, &parent)?;
    let Some(ino) = lookup(fs, pino, &name, &a.path)? else {
        return Err(CliError::fs(&a.path, &rxfs::Error::NotFound));
    };
    let ip = fs.iget(ino).map_err(|e| CliError::fs(&a.path, &e))?;
    if !ip.is_dir() {
        return fs
            .unlink(pino, &name)
            .map_err(|e| CliError::fs(&a.path, &e));
    }
    if !a.recursive {
        return fs.rmdir(pino, &name).map_err(|e| match e {
            rxfs::Error::NotEmpty => CliError::new(format!(
                "{}: Directory not empty (use -r to remove it and its contents)",
                a.path
            )),
            e => CliError::fs(&a.path, &e),
        });
    }
    remove_tree(fs, pino, name, ino, &a.path)
}

/// One directory being emptied: where it sits, and whether its entries
/// were pushed already.
struct Frame {
    parent: Ino,
    name: Vec<u8>,
    ino: Ino,
    path: String,
    expanded: bool,
}

fn remove_tree(fs: &Filesystem, parent: Ino, name: Vec<u8>, ino: Ino, path: &str) -> CliResult<()> {
    let mut seen: HashSet<u64> = HashSet::new();
    let mut stack = vec![Frame {
        parent,
        name,
        ino,
        path: path.to_string(),
        expanded: false,
    }];
    while let Some(top) = stack.last_mut() {
        if top.expanded {
            let f = stack.pop().expect("stack is not empty");
            fs.rmdir(f.parent, &f.name)
                .map_err(|e| CliError::fs(&f.path, &e))?;
            continue;
        }
        top.expanded = true;
        let (dir, dpath) = (top.ino, top.path.clone());
        if !seen.insert(dir.0) {
            return Err(CliError::new(format!(
                "{dpath}: directory reached twice (corrupt image?)"
            )));
        }
        let dp = fs.iget(dir).map_err(|e| CliError::fs(&dpath, &e))?;
        let mut entries: Vec<(Vec<u8>, Ino)> = Vec::new();
        fs.readdir(&dp, 0, &mut |e| {
            if e.name != b"." && e.name != b".." {
                entries.push((e.name.clone(), e.ino));
            }
            true
        })
        .map_err(|e| CliError::fs(&dpath, &e))?;
        for (ename, eino) in entries {
            let epath = join(&dpath, &ename);
            let eip = fs.iget(eino).map_err(|e| CliError::fs(&epath, &e))?;
            if eip.is_dir() {
                stack.push(Frame {
                    parent: dir,
                    name: ename,
                    ino: eino,
                    path: epath,
                    expanded: false,
                });
            } else {
                fs.unlink(dir, &ename)
                    .map_err(|e| CliError::fs(&epath, &e))?;
            }
        }
    }
    Ok(())
}
