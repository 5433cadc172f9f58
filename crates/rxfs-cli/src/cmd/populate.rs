//! `rxfs populate`: copy a host directory tree into an existing image (the
//! engine of `rxfs mkfs --populate`, [`rxfs::populate`]), and the helpers
//! the image-changing subcommands (`put`, `rm`, `mkdir`) share: opening an
//! image read-write with their `-o` options (a dirty log is recovered, as
//! `rxfs mount` does; a filesystem with a realtime section needs
//! `-o rtdev=FILE`, and files under a directory with the rtinherit flag
//! get their data there), splitting image paths, and unmounting cleanly
//! whatever happened.
//!
//! Invariant: every subcommand that opened an image read-write unmounts
//! it (log forced, metadata written back, unmount record) before it
//! returns, on success and on failure alike, so `xfs_repair -n` finds the
//! image clean afterwards.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rxfs::populate::{self, Dest, Options, Progress, Summary};
use rxfs::types::Ino;
use rxfs::Filesystem;

use crate::opts::{open_image, Opts, WriteArgs};
use crate::{CliError, CliResult};

/// Copy the contents of a host directory into a directory of IMAGE (for
/// testing and image builders; `rxfs mkfs --populate DIR` does the same).
///
/// Modes, owners, times, xattrs and ACLs, hard links, symlinks, devices,
/// FIFOs, sockets and holes are kept; DEST takes DIR's own mode, owner,
/// times and xattrs. A progress bar is shown on stderr when it is a
/// terminal.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The image file or block device (opened read-write).
    pub image: PathBuf,
    /// The host directory to copy.
    pub dir: PathBuf,
    /// The directory of the image to copy into.
    #[arg(long, default_value = "/")]
    pub dest: String,
    /// Threads copying file data (default: one less than the CPUs, 1 to 4).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub threads: Option<u16>,
    /// Every file's owner, instead of the owners on disk.
    #[arg(long, value_name = "UID:GID", value_parser = super::mkfs::parse_owner)]
    pub owner: Option<(u32, u32)>,
    /// A file of per-path owners, modes and xattrs (as `rxfs mkfs
    /// --overrides`); they win over --owner.
    #[arg(long, value_name = "FILE")]
    pub overrides: Option<PathBuf>,
    #[command(flatten)]
    pub img: WriteArgs,
}

pub fn run(a: Args) -> CliResult<()> {
    let img = a.img.parse()?;
    let mut opts = Options::default();
    if let Some(t) = a.threads {
        opts.threads = t as usize;
    }
    opts.owner = a.owner;
    if let Some(f) = &a.overrides {
        opts.overrides = Some(load_overrides(f, &a.dir)?);
    }
    let s = populate_image_with(&a.image, &img, &a.dir, &a.dest, true, &opts)?;
    outln!(
        "{}: copied {} paths, {} bytes from {} into {}",
        a.image.display(),
        s.files,
        s.bytes,
        a.dir.display(),
        a.dest
    );
    Ok(())
}

/// Read and parse the override file `file` and check it against the
/// source tree `src` (every rule's path exists), before anything is
/// written.
pub fn load_overrides(
    file: &Path,
    src: &Path,
) -> CliResult<Arc<rxfs::populate::overrides::Overrides>> {
    let text = std::fs::read_to_string(file).map_err(|e| CliError::io(file.display(), &e))?;
    let o = rxfs::populate::overrides::Overrides::parse(&text)
        .and_then(|o| o.check(src).map(|()| o))
        .map_err(|e| CliError::usage(format!("{}: {e}", file.display())))?;
    Ok(Arc::new(o))
}

/// `opts` with the image file and its realtime device excluded from the
/// copy (an image made inside the tree it is filled from).
pub fn excluding_devices(image: &Path, img: &Opts, opts: &Options) -> Options {
    use std::os::unix::fs::MetadataExt;
    let mut o = opts.clone();
    for dev in std::iter::once(image).chain(img.rtdev.as_deref()) {
        if let Ok(m) = std::fs::metadata(dev) {
            o.exclude.push((m.dev(), m.ino()));
        }
    }
    o
}

/// Open `image` read-write with the image options `img` (recovering a
/// dirty log), copy the contents of the host directory `src` into the
/// image directory `dest` with the engine options `opts`, unmount. With
/// `progress`, a progress bar is drawn on stderr if it is a terminal.
pub fn populate_image_with(
    image: &Path,
    img: &Opts,
    src: &Path,
    dest: &str,
    progress: bool,
    opts: &Options,
) -> CliResult<Summary> {
    let fs = open_rw(image, img)?;
    let r = (|| {
        let ino = resolve(&fs, dest)?;
        let ip = fs.iget(ino).map_err(|e| CliError::fs(dest, &e))?;
        if !ip.is_dir() {
            return Err(CliError::fs(dest, &rxfs::Error::NotDir));
        }
        copy_tree(
            &fs,
            src,
            Dest::Into(ino),
            progress,
            &excluding_devices(image, img, opts),
        )
    })();
    finish(&fs, image, r)
}

/// Run the populate engine with an optional progress bar.
pub fn copy_tree(
    fs: &Filesystem,
    src: &Path,
    dest: Dest,
    progress: bool,
    opts: &Options,
) -> CliResult<Summary> {
    let bar = (progress && std::io::stderr().is_terminal()).then(new_bar);
    if let Some(b) = &bar {
        b.set_message("listing the source");
        b.tick();
    }
    let report = |p: &Progress| {
        if let Some(b) = &bar {
            b.set_length(p.bytes_total);
            b.set_position(p.bytes_done);
            b.set_message(format!("{}/{} files", p.files_done, p.files_total));
        }
    };
    let r = populate::populate(fs, src, dest, opts, &report);
    if let Some(b) = &bar {
        match &r {
            Ok(_) => b.finish(),
            Err(_) => b.abandon(),
        }
    }
    r.map_err(|e| CliError::new(e.to_string()))
}

fn new_bar() -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(0);
    let style = indicatif::ProgressStyle::with_template(
        "{elapsed_precise} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {msg}",
    )
    .map(|s| s.progress_chars("=> "))
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
    bar.set_style(style);
    bar
}

/// Open an image read-write with the image options `img` (see
/// [`WriteArgs`]); a dirty log is replayed first.
pub fn open_rw(image: &Path, img: &Opts) -> CliResult<Arc<Filesystem>> {
    debug_assert!(!img.read_only && !img.norecovery);
    open_image(image, img)
}

/// Unmount `fs` cleanly and pass `r` on; an unmount failure is reported
/// too (it is the error when `r` succeeded).
pub fn finish<T>(fs: &Filesystem, image: &Path, r: CliResult<T>) -> CliResult<T> {
    let u = fs.unmount();
    match (r, u) {
        (Ok(v), Ok(())) => Ok(v),
        (Ok(_), Err(e)) => Err(CliError::new(format!("{}: unmount: {e}", image.display()))),
        (Err(e), Ok(())) => Err(e),
        (Err(e), Err(u)) => Err(CliError::new(format!(
            "{} (and unmount of {} failed: {u})",
            e.msg,
            image.display()
        ))),
    }
}

/// An image path's inode (lstat semantics).
pub fn resolve(fs: &Filesystem, path: &str) -> CliResult<Ino> {
    fs.resolve(path.as_bytes())
        .map_err(|e| CliError::fs(path, &e))
}

/// Split an image path into its parent path and last name; refuses the
/// root, `.` and `..` as last names.
pub fn split_parent(path: &str) -> CliResult<(String, Vec<u8>)> {
    let trimmed = path.trim_end_matches('/');
    let (parent, name) = match trimmed.rfind('/') {
        Some(i) => (&trimmed[..i], &trimmed[i + 1..]),
        None => ("", trimmed),
    };
    if name.is_empty() || name == "." || name == ".." {
        return Err(CliError::usage(format!(
            "{path}: needs a last component other than '/', '.' or '..'"
        )));
    }
    let parent = if parent.is_empty() { "/" } else { parent };
    Ok((parent.to_string(), name.as_bytes().to_vec()))
}

/// The inode of the directory `parent` (an error naming it if it is
/// missing or not a directory).
pub fn parent_dir(fs: &Filesystem, parent: &str) -> CliResult<Ino> {
    let ino = resolve(fs, parent)?;
    let ip = fs.iget(ino).map_err(|e| CliError::fs(parent, &e))?;
    if !ip.is_dir() {
        return Err(CliError::fs(parent, &rxfs::Error::NotDir));
    }
    Ok(ino)
}

/// Look `name` up in directory `dir`: `None` if absent.
pub fn lookup(fs: &Filesystem, dir: Ino, name: &[u8], shown: &str) -> CliResult<Option<Ino>> {
    let dp = fs.iget(dir).map_err(|e| CliError::fs(shown, &e))?;
    match fs.lookup(&dp, name) {
        Ok(i) => Ok(Some(i)),
        Err(rxfs::Error::NotFound) => Ok(None),
        Err(e) => Err(CliError::fs(shown, &e)),
    }
}

/// Join an image directory path and a name for messages.
pub fn join(dir: &str, name: &[u8]) -> String {
    let n = String::from_utf8_lossy(name);
    if dir.ends_with('/') {
        format!("{dir}{n}")
    } else {
        format!("{dir}/{n}")
    }
}
