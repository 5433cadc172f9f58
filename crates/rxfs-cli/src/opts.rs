//! `-o` option lists and opening images with them.
//!
//! Every subcommand that reads an image takes `-o OPTS` (repeatable,
//! comma-separated, spelled like mount options) and `--rtdev FILE`.
//! Image options: `ro` (the default and only mode), `norecovery` (read a
//! dirty log's pre-replay state), `rtdev=FILE`, `odirect` (open devices with
//! O_DIRECT). `rxfs mount` additionally takes FUSE and generic mount(8)
//! options, see [`FuseOpts`].

use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rxfs::fs::Inode;
use rxfs::{Filesystem, MountOptions};

use crate::{CliError, CliResult};

/// Options common to every image-reading subcommand.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ImageArgs {
    /// Comma-separated options: ro, norecovery, rtdev=FILE, odirect
    /// (mount also takes FUSE options, see `rxfs mount --help`).
    #[arg(short = 'o', value_name = "OPTS", action = clap::ArgAction::Append)]
    pub options: Vec<String>,
    /// The realtime device or image of a filesystem with a realtime section.
    #[arg(long, value_name = "FILE")]
    pub rtdev: Option<PathBuf>,
}

/// FUSE-side options of `rxfs mount`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FuseOpts {
    pub allow_other: bool,
    pub auto_unmount: bool,
    /// Kernel mount flags: dev, suid, exec, noexec, atime, noatime, sync...
    pub flags: Vec<String>,
    pub fsname: Option<String>,
    /// Worker threads serving requests.
    pub threads: Option<usize>,
    /// `rw` was asked for (refused: rxfs mounts read-only).
    pub rw: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Opts {
    pub norecovery: bool,
    pub direct_io: bool,
    pub rtdev: Option<PathBuf>,
    pub fuse: FuseOpts,
}

/// mount(8) options that mean nothing to a FUSE image mount; accepted and
/// ignored so `mount -t fuse.rxfs` with an fstab line works.
const IGNORED: &[&str] = &[
    "defaults",
    "auto",
    "noauto",
    "user",
    "nouser",
    "users",
    "owner",
    "group",
    "_netdev",
    "nofail",
    "loop",
    "silent",
    "loud",
    "relatime",
    "norelatime",
    "strictatime",
    "nostrictatime",
    "lazytime",
    "nolazytime",
    "diratime",
    "nodiratime",
    "async",
    "nosymfollow",
    "symfollow",
    "default_permissions",
];

/// Kernel flags passed through to the FUSE mount.
const FLAGS: &[&str] = &[
    "dev", "nodev", "suid", "nosuid", "exec", "noexec", "atime", "noatime", "sync", "dirsync",
];

/// Parse `-o` lists. `mount` says whether FUSE and mount(8) options are
/// allowed; image-only subcommands refuse them.
pub fn parse(lists: &[String], mount: bool) -> CliResult<Opts> {
    let mut o = Opts::default();
    for opt in lists.iter().flat_map(|l| l.split(',')) {
        let (key, val) = match opt.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (opt, None),
        };
        match (key, val) {
            ("", None) => {}
            ("ro", None) => {}
            ("rw", None) => o.fuse.rw = true,
            ("norecovery", None) => o.norecovery = true,
            ("odirect", None) => o.direct_io = true,
            ("rtdev", Some(v)) if !v.is_empty() => o.rtdev = Some(PathBuf::from(v)),
            _ if !mount => {
                return Err(CliError::usage(format!(
                    "unknown option '{opt}' (known: ro, norecovery, rtdev=FILE, odirect)"
                )))
            }
            ("allow_other", None) => o.fuse.allow_other = true,
            ("auto_unmount", None) => o.fuse.auto_unmount = true,
            ("fsname", Some(v)) => o.fuse.fsname = Some(v.to_string()),
            ("subtype", Some(_)) => {}
            ("threads", Some(v)) => {
                let n: usize = v
                    .parse()
                    .ok()
                    .filter(|n| (1..=256).contains(n))
                    .ok_or_else(|| CliError::usage(format!("bad thread count '{v}' (1-256)")))?;
                o.fuse.threads = Some(n);
            }
            (k, None) if FLAGS.contains(&k) => o.fuse.flags.push(k.to_string()),
            (k, None) if IGNORED.contains(&k) => {}
            (k, _) if k.starts_with("x-") || k == "comment" => {}
            ("allow_root", None) => {
                return Err(CliError::usage(
                    "allow_root is not supported: use allow_other",
                ))
            }
            _ => return Err(CliError::usage(format!("unknown mount option '{opt}'"))),
        }
    }
    if o.fuse.rw {
        return Err(CliError::usage(
            "rxfs opens images read-only: use -o ro (read-write is not supported yet)",
        ));
    }
    Ok(o)
}

impl ImageArgs {
    pub fn parse(&self, mount: bool) -> CliResult<Opts> {
        let mut o = parse(&self.options, mount)?;
        if let Some(r) = &self.rtdev {
            o.rtdev = Some(r.clone());
        }
        Ok(o)
    }

    /// Open `image` with these options (image options only: not for mount).
    pub fn open(&self, image: &Path) -> CliResult<Arc<Filesystem>> {
        open_image(image, &self.parse(false)?)
    }

    /// Open `image` and load the inode at `path` inside it (see [`resolve`]).
    pub fn open_path(&self, image: &Path, path: &Path) -> CliResult<(Arc<Filesystem>, Arc<Inode>)> {
        let fs = self.open(image)?;
        let ip = resolve(&fs, path)?;
        Ok((fs, ip))
    }
}

/// Resolve a path inside the image (lstat semantics) and load its inode.
pub fn resolve(fs: &Filesystem, path: &Path) -> CliResult<Arc<Inode>> {
    let shown = path.display();
    let ino = fs
        .resolve(path.as_os_str().as_bytes())
        .map_err(|e| CliError::fs(&shown, &e))?;
    fs.iget(ino).map_err(|e| CliError::fs(&shown, &e))
}

/// Open an image read-only with `opts`, with messages that name the file:
/// a missing file, a file that is not XFS at all, and a damaged or
/// unsupported XFS are told apart.
pub fn open_image(image: &Path, opts: &Opts) -> CliResult<Arc<Filesystem>> {
    let shown = image.display();
    let mut f = std::fs::File::open(image).map_err(|e| CliError::io(&shown, &e))?;
    let mut magic = [0u8; 4];
    match f.read_exact(&mut magic) {
        Ok(()) if &magic == b"XFSB" => {}
        Ok(()) | Err(_) => {
            return Err(CliError::new(format!(
                "{shown}: not an XFS filesystem (no XFSB superblock magic)"
            )))
        }
    }
    drop(f);
    if let Some(rt) = &opts.rtdev {
        std::fs::metadata(rt).map_err(|e| CliError::io(rt.display(), &e))?;
    }
    let mo = MountOptions {
        read_only: true,
        norecovery: opts.norecovery,
        direct_io: opts.direct_io,
        ..Default::default()
    };
    Filesystem::open_path(image, opts.rtdev.as_deref(), mo).map_err(|e| CliError::fs(&shown, &e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &[&str], mount: bool) -> CliResult<Opts> {
        parse(&s.iter().map(|s| s.to_string()).collect::<Vec<_>>(), mount)
    }

    #[test]
    fn image_options() {
        let o = p(&["ro,norecovery", "rtdev=/tmp/rt"], false).unwrap();
        assert!(o.norecovery);
        assert_eq!(o.rtdev, Some(PathBuf::from("/tmp/rt")));
        assert!(p(&["allow_other"], false).is_err());
        assert!(p(&["bogus"], false).is_err());
        assert!(p(&["rw"], false).is_err());
        assert_eq!(p(&[""], false).unwrap(), Opts::default());
    }

    #[test]
    fn mount_options() {
        let o = p(
            &["ro,allow_other,noexec,defaults,x-systemd.automount,threads=3"],
            true,
        )
        .unwrap();
        assert!(o.fuse.allow_other);
        assert_eq!(o.fuse.flags, vec!["noexec".to_string()]);
        assert_eq!(o.fuse.threads, Some(3));
        assert!(p(&["threads=0"], true).is_err());
        assert!(p(&["allow_root"], true).is_err());
        assert!(p(&["rw"], true).is_err());
        assert!(p(&["nonsense=1"], true).is_err());
    }
}
