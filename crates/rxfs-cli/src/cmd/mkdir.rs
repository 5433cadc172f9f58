//! `rxfs mkdir`: make a directory in an image, like mkdir(1).
//!
//! With `-p`, missing parents are made too (mode 0755 and the same owner)
//! and an existing directory is no error.

use std::path::PathBuf;

use rxfs::fs::ops_ns::CreateArgs;
use rxfs::types::Ino;
use rxfs::Filesystem;

use super::populate::{finish, lookup, open_rw, parent_dir, split_parent};
use crate::opts::WriteArgs;
use crate::{CliError, CliResult};

/// Make a directory in IMAGE.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The image file or block device (opened read-write).
    pub image: PathBuf,
    /// Path in the image.
    pub path: String,
    /// Make missing parents; no error if the directory exists.
    #[arg(short = 'p', long)]
    pub parents: bool,
    /// Permission bits, in octal (setgid and sticky bits allowed).
    #[arg(short = 'm', long, default_value = "0755", value_parser = parse_mode)]
    pub mode: u32,
    /// Owner as UID:GID (default: the caller's).
    #[arg(long, value_parser = parse_owner)]
    pub owner: Option<(u32, u32)>,
    #[command(flatten)]
    pub img: WriteArgs,
}

fn parse_mode(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s, 8)
        .ok()
        .filter(|m| *m <= 0o7777)
        .ok_or_else(|| format!("bad mode '{s}': octal, at most 7777"))
}

fn parse_owner(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("bad owner '{s}': use UID:GID (numbers)");
    let (u, g) = s.split_once(':').ok_or_else(bad)?;
    Ok((u.parse().map_err(|_| bad())?, g.parse().map_err(|_| bad())?))
}

pub fn run(a: Args) -> CliResult<()> {
    let fs = open_rw(&a.image, &a.img.parse()?)?;
    let r = mkdir(&fs, &a);
    finish(&fs, &a.image, r)
}

fn mkdir(fs: &Filesystem, a: &Args) -> CliResult<()> {
    // SAFETY: geteuid/getegid cannot fail.
    let (uid, gid) = a
        .owner
        .unwrap_or_else(|| unsafe { (libc::geteuid(), libc::getegid()) });
    let args = |mode: u32| CreateArgs {
        mode: libc::S_IFDIR | mode,
        uid,
        gid,
        rdev: 0,
        umask: 0,
    };
    let (parent, name) = split_parent(&a.path)?;
    let pino = if a.parents {
        make_parents(fs, &parent, &args(0o755))?
    } else {
        parent_dir(fs, &parent)?
    };
    if let Some(ino) = lookup(fs, pino, &name, &a.path)? {
        let is_dir = fs
            .iget(ino)
            .map_err(|e| CliError::fs(&a.path, &e))?
            .is_dir();
        if a.parents && is_dir {
            return Ok(());
        }
        return Err(CliError::fs(&a.path, &rxfs::Error::Exists));
    }
    let ip = fs
        .mkdir(pino, &name, &args(a.mode))
        .map_err(|e| CliError::fs(&a.path, &e))?;
    // Exactly the mode asked for (a default ACL or a setgid parent may
    // have changed it at creation).
    let set = rxfs::bmap::data::SetAttr {
        mode: Some(a.mode),
        ..Default::default()
    };
    fs.setattr(ip.ino, &set)
        .map_err(|e| CliError::fs(&a.path, &e))?;
    Ok(())
}

/// Walk `path` from the root, making each missing directory.
fn make_parents(fs: &Filesystem, path: &str, args: &CreateArgs) -> CliResult<Ino> {
    let mut cur = fs.root_ino();
    let mut shown = String::new();
    for comp in path.split('/').filter(|c| !c.is_empty() && *c != ".") {
        shown.push('/');
        shown.push_str(comp);
        cur = match lookup(fs, cur, comp.as_bytes(), &shown)? {
            Some(ino) => {
                let ip = fs.iget(ino).map_err(|e| CliError::fs(&shown, &e))?;
                if !ip.is_dir() {
                    return Err(CliError::fs(&shown, &rxfs::Error::NotDir));
                }
                ino
            }
            None => {
                fs.mkdir(cur, comp.as_bytes(), args)
                    .map_err(|e| CliError::fs(&shown, &e))?
                    .ino
            }
        };
    }
    Ok(cur)
}
