//! `rxfs put`: copy a host file, a host tree, or standard input into an
//! image, like `cp -a` onto a kernel mount.
//!
//! DEST names an existing directory (the copy goes inside it, under the
//! source's name) or a new path whose parent exists. An existing
//! non-directory is replaced only with `--force` (unlinked, then the copy
//! is made); existing directories are never merged into or replaced.

use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use rxfs::fs::ops_ns::CreateArgs;
use rxfs::populate::Dest;
use rxfs::types::Ino;
use rxfs::Filesystem;

use super::populate::{
    copy_tree, excluding_devices, finish, join, lookup, open_rw, parent_dir, split_parent,
};
use crate::opts::{Opts, WriteArgs};
use crate::{CliError, CliResult};

/// Bytes read from standard input per write.
const STDIN_CHUNK_BYTES: usize = 4 << 20;

/// Copy a host file or directory tree (or standard input) into IMAGE.
///
/// Keeps modes, owners, times, xattrs and ACLs, hard links, symlinks,
/// devices, FIFOs, sockets and holes. If DEST is an existing directory the
/// copy goes inside it under SRC's name; otherwise DEST is created. An
/// existing file is replaced only with --force.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The image file or block device (opened read-write).
    pub image: PathBuf,
    /// Host file or directory, or `-` for standard input.
    pub src: PathBuf,
    /// Path in the image.
    pub dest: String,
    /// Replace an existing non-directory DEST.
    #[arg(short = 'f', long)]
    pub force: bool,
    #[command(flatten)]
    pub img: WriteArgs,
}

pub fn run(a: Args) -> CliResult<()> {
    let stdin = a.src.as_os_str() == "-";
    if !stdin {
        // A missing source is told before the image is touched.
        std::fs::symlink_metadata(&a.src).map_err(|e| CliError::io(a.src.display(), &e))?;
    }
    let img = a.img.parse()?;
    let fs = open_rw(&a.image, &img)?;
    let r = put(&fs, &a, &img, stdin);
    finish(&fs, &a.image, r)
}

/// Where the copy goes: (parent inode, name, path shown in messages).
fn target(fs: &Filesystem, a: &Args, stdin: bool) -> CliResult<(Ino, Vec<u8>, String)> {
    let existing = match fs.resolve(a.dest.as_bytes()) {
        Ok(i) => Some(i),
        Err(rxfs::Error::NotFound) => None,
        Err(e) => return Err(CliError::fs(&a.dest, &e)),
    };
    if let Some(ino) = existing {
        let ip = fs.iget(ino).map_err(|e| CliError::fs(&a.dest, &e))?;
        if ip.is_dir() {
            if stdin {
                return Err(CliError::new(format!(
                    "{}: is a directory (give a file name to write standard input to)",
                    a.dest
                )));
            }
            let name = src_name(&a.src)?;
            let shown = join(&a.dest, &name);
            return Ok((ino, name, shown));
        }
    }
    let (parent, name) = split_parent(&a.dest)?;
    let pino = parent_dir(fs, &parent)?;
    Ok((pino, name, a.dest.clone()))
}

/// The name a source gets inside a directory: its last component (that of
/// its canonical path for `.`, `..` or a trailing `/.`).
fn src_name(src: &std::path::Path) -> CliResult<Vec<u8>> {
    let last = src.components().next_back();
    if let Some(std::path::Component::Normal(n)) = last {
        return Ok(n.as_bytes().to_vec());
    }
    let canon = src
        .canonicalize()
        .map_err(|e| CliError::io(src.display(), &e))?;
    canon
        .file_name()
        .map(|n| n.as_bytes().to_vec())
        .ok_or_else(|| CliError::usage(format!("{}: source has no file name", src.display())))
}

fn put(fs: &Filesystem, a: &Args, img: &Opts, stdin: bool) -> CliResult<()> {
    let (parent, name, shown) = target(fs, a, stdin)?;
    if let Some(old) = lookup(fs, parent, &name, &shown)? {
        let ip = fs.iget(old).map_err(|e| CliError::fs(&shown, &e))?;
        if ip.is_dir() {
            return Err(CliError::new(format!(
                "{shown}: File exists (a directory: remove it first with rxfs rm -r)"
            )));
        }
        if !a.force {
            return Err(CliError::new(format!(
                "{shown}: File exists (use --force to replace it)"
            )));
        }
        let src_is_dir = !stdin && std::fs::symlink_metadata(&a.src).is_ok_and(|m| m.is_dir());
        if src_is_dir {
            return Err(CliError::new(format!(
                "{shown}: cannot replace a non-directory with a directory"
            )));
        }
        fs.unlink(parent, &name)
            .map_err(|e| CliError::fs(&shown, &e))?;
    }
    if stdin {
        return put_stdin(fs, parent, &name, &shown);
    }
    let opts = excluding_devices(&a.image, img, &rxfs::populate::Options::default());
    copy_tree(fs, &a.src, Dest::New { parent, name }, true, &opts)?;
    Ok(())
}

/// Standard input into a new regular file (mode 0644 less the umask,
/// owned by the caller).
fn put_stdin(fs: &Filesystem, parent: Ino, name: &[u8], shown: &str) -> CliResult<()> {
    // SAFETY: umask(2) cannot fail; it is set back at once.
    let umask = unsafe {
        let m = libc::umask(0o022);
        libc::umask(m);
        m
    };
    let args = CreateArgs {
        mode: libc::S_IFREG | 0o644,
        // SAFETY: geteuid/getegid cannot fail.
        uid: unsafe { libc::geteuid() },
        gid: unsafe { libc::getegid() },
        rdev: 0,
        umask: umask as u32,
    };
    let ip = fs
        .create(parent, name, &args)
        .map_err(|e| CliError::fs(shown, &e))?;
    let mut buf = vec![0u8; STDIN_CHUNK_BYTES];
    let mut off = 0u64;
    let mut input = std::io::stdin().lock();
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(CliError::io("standard input", &e)),
        };
        let mut done = 0;
        while done < n {
            let w = fs
                .write(ip.ino, off, &buf[done..n])
                .map_err(|e| CliError::fs(shown, &e))?;
            if w == 0 {
                return Err(CliError::fs(shown, &rxfs::Error::NoSpace));
            }
            done += w;
            off += w as u64;
        }
    }
    fs.trim_eof(ip.ino).map_err(|e| CliError::fs(shown, &e))?;
    Ok(())
}
