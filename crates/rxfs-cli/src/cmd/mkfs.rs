//! `rxfs mkfs`: make an XFS v5 filesystem like mkfs.xfs does.

use std::os::unix::fs::FileTypeExt;
use std::path::PathBuf;

use rxfs::bdev::{BlockDevice, FileDevice};
use rxfs::mkfs::MkfsOptions;

use super::mkfs_opts::{apply, RtArgs};
use crate::{CliError, CliResult};

/// Make an XFS v5 filesystem on IMAGE (an image file or a block device).
///
/// The options are mkfs.xfs's, with its defaults and sizing rules, so that
/// the same options on the same size give the same geometry. IMAGE is
/// created (sparse) when it does not exist and `-d size=` is given. An
/// existing XFS filesystem is only overwritten with `-f`. Numbers take
/// mkfs.xfs's suffixes: s (512-byte sectors), b (blocks), k, m, g, t, p.
///
/// Supported: -b size; -d agcount, agsize, size, sectsize, rtinherit (the
/// root directory passes the realtime flag on: with -r rtdev= and
/// --populate, the tree's regular files get their data on the realtime
/// device); -i size, maxpct, sparse, nrext64; -l size, agnum (internal
/// logs only); -n size; -m crc (1 only), finobt, rmapbt, reflink, bigtime,
/// inobtcount, uuid; -r rtdev, extsize, size; -s size; -L; -f; -q; -N.
/// Everything else is refused by name.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Block size (`-b size=4096`).
    #[arg(short = 'b', value_name = "SUBOPTS")]
    pub block: Vec<String>,
    /// Data section (`-d agcount=N,agsize=N,size=N,sectsize=N,rtinherit=1`).
    #[arg(short = 'd', value_name = "SUBOPTS")]
    pub data: Vec<String>,
    /// Inodes (`-i size=512,maxpct=25,sparse=1,nrext64=0`).
    #[arg(short = 'i', value_name = "SUBOPTS")]
    pub inode: Vec<String>,
    /// Internal log (`-l size=64m,agnum=N`).
    #[arg(short = 'l', value_name = "SUBOPTS")]
    pub log: Vec<String>,
    /// Directories (`-n size=4096`).
    #[arg(short = 'n', value_name = "SUBOPTS")]
    pub naming: Vec<String>,
    /// Metadata features (`-m finobt=1,rmapbt=0,reflink=1,bigtime=1,inobtcount=1,uuid=U`).
    #[arg(short = 'm', value_name = "SUBOPTS")]
    pub meta: Vec<String>,
    /// Realtime section (`-r rtdev=FILE,extsize=4k,size=N`).
    #[arg(short = 'r', value_name = "SUBOPTS")]
    pub rt: Vec<String>,
    /// Sector size (`-s size=512`).
    #[arg(short = 's', value_name = "SUBOPTS")]
    pub sector: Vec<String>,
    /// A mkfs.xfs configuration file (`-c options=FILE`, e.g.
    /// /usr/share/xfsprogs/mkfs/lts_5.15.conf); an option set both there and
    /// on the command line is an error, as with mkfs.xfs.
    #[arg(short = 'c', value_name = "options=FILE")]
    pub config: Option<String>,
    /// Filesystem label (at most 12 bytes).
    #[arg(short = 'L', value_name = "LABEL")]
    pub label: Option<String>,
    /// Overwrite an existing filesystem.
    #[arg(short = 'f')]
    pub force: bool,
    /// Print nothing.
    #[arg(short = 'q')]
    pub quiet: bool,
    /// Print the geometry and stop (nothing is written).
    #[arg(short = 'N')]
    pub dry_run: bool,
    /// Copy this directory tree into the new filesystem's root (owners,
    /// modes, times including access times, xattrs, ACLs, hard links).
    #[arg(long, value_name = "DIR")]
    pub populate: Option<PathBuf>,
    /// mkfs.xfs's `-p`: `-p PROTOFILE` or `-p file=PATH[,slashes_are_spaces=1][,atime=1]`.
    /// PATH is a prototype file in mkfs.xfs's format, or a directory to copy
    /// (as --populate, but access times become the build's unless atime=1).
    #[arg(short = 'p', value_name = "PROTO", conflicts_with = "populate")]
    pub proto: Option<String>,
    /// Copy a tar archive (plain, gzip, zstd or xz; `-` for standard
    /// input) into the new filesystem: owners, modes, set-id bits, times,
    /// hard links, devices, xattrs (SELinux labels too) and POSIX ACLs as
    /// the archive records them, so no root is needed to build.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["populate", "proto"])]
    pub populate_tar: Option<PathBuf>,
    /// With a directory source (--populate DIR, -p file=DIR): every file's
    /// owner, instead of the owners on disk (an unprivileged build of a
    /// tree meant to be root's: --owner 0:0).
    #[arg(long, value_name = "UID:GID", value_parser = parse_owner, conflicts_with = "populate_tar")]
    pub owner: Option<(u32, u32)>,
    /// With a directory source: a file of per-path owners, modes and xattrs,
    /// one rule a line (`/etc/shadow mode=0640 gid=42`,
    /// `/usr/bin/ping xattr:security.capability=0sAQAAAg...`,
    /// `/home/alice/** owner=1000:1000`); they win over --owner.
    #[arg(long, value_name = "FILE", conflicts_with = "populate_tar")]
    pub overrides: Option<PathBuf>,
    /// Make the filesystem at this byte offset of IMAGE (to its end, or
    /// -d size=).
    #[arg(long, value_name = "BYTES", value_parser = parse_offset, conflicts_with = "partition")]
    pub offset: Option<u64>,
    /// Make the filesystem in partition N (from 1) of IMAGE's GPT or DOS
    /// partition table (a whole-disk image used in place).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub partition: Option<u32>,
    /// With `-d size=fit`: the free space the image keeps, a percentage of
    /// its size (`10%`, the default) or a size (`64m`).
    #[arg(long, value_name = "PCT%|SIZE", value_parser = super::mkfs_fit::parse_margin)]
    pub free_space: Option<super::mkfs_fit::Margin>,
    /// The image file or block device.
    pub image: PathBuf,
}

pub fn run(a: Args) -> CliResult<()> {
    if let Some(data) = super::mkfs_fit::wanted(&a.data) {
        if !a.force && !a.dry_run {
            // Probed once, before the fitting builds overwrite their own.
            for dev in std::iter::once(&a.image) {
                refuse_existing(dev)?;
            }
        }
        return super::mkfs_fit::run(a, data);
    }
    if a.free_space.is_some() {
        return Err(CliError::usage("--free-space goes with -d size=fit"));
    }
    run_once(a)
}

/// The mkfs options the command line (and `-c options=FILE`) give.
pub fn options_of(a: &Args) -> CliResult<(MkfsOptions, RtArgs)> {
    let mut o = MkfsOptions::default();
    let mut rt = RtArgs::default();
    let config = match &a.config {
        Some(c) => read_config(c, a)?,
        None => Vec::new(),
    };
    // -b first: `b` suffixes elsewhere use the block size.
    for (_, kv) in config.iter().filter(|(f, _)| *f == 'b') {
        apply(&mut o, &mut rt, 'b', kv)?;
    }
    for s in &a.block {
        apply(&mut o, &mut rt, 'b', s)?;
    }
    for (flag, kv) in config.iter().filter(|(f, _)| *f != 'b') {
        apply(&mut o, &mut rt, *flag, kv)?;
    }
    for (flag, list) in [
        ('s', &a.sector),
        ('d', &a.data),
        ('i', &a.inode),
        ('l', &a.log),
        ('n', &a.naming),
        ('m', &a.meta),
        ('r', &a.rt),
    ] {
        for s in list {
            apply(&mut o, &mut rt, flag, s)?;
        }
    }
    o.label = a.label.clone();
    Ok((o, rt))
}

/// A file removed when this is dropped (forgotten to keep it).
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// One mkfs (and populate) at the size the options give.
pub fn run_once(a: Args) -> CliResult<()> {
    let (o, rt) = options_of(&a)?;
    let mut proto = a.proto.as_deref().map(parse_proto).transpose()?;
    if let Some(p) = &mut proto {
        // Checked (and a prototype file parsed) before anything is written.
        p.check()?;
    }
    if let Some(t) = a.populate_tar.as_ref().filter(|t| t.as_os_str() != "-") {
        std::fs::metadata(t).map_err(|e| CliError::io(t.display(), &e))?;
    }
    if let Some(src) = &a.populate {
        // Checked before anything is created or written.
        let m = std::fs::metadata(src).map_err(|e| CliError::io(src.display(), &e))?;
        if !m.is_dir() {
            return Err(CliError::new(format!(
                "--populate {}: not a directory",
                src.display()
            )));
        }
    }
    let overrides = match (&a.overrides, &a.populate, &proto) {
        (None, _, _) => None,
        (Some(f), Some(src), _)
        | (
            Some(f),
            None,
            Some(Proto {
                source: ProtoSource::Dir(src),
                ..
            }),
        ) => Some(super::populate::load_overrides(f, src)?),
        (Some(_), _, _) => {
            return Err(CliError::usage(
                "--overrides needs a directory source (--populate DIR or -p file=DIR)",
            ))
        }
    };
    let name = a.image.display().to_string();
    let within = a
        .offset
        .map(rxfs::fs::Within::Offset)
        .or(a.partition.map(rxfs::fs::Within::Partition));
    if within.is_some() && std::fs::metadata(&a.image).is_err() {
        return Err(CliError::usage(format!(
            "{name}: --offset/--partition need an existing image"
        )));
    }
    if !a.force && !a.dry_run {
        // Before anything is created, grown, opened for writing or printed.
        refuse_existing_in(&a.image, within)?;
        if let Some(r) = &rt.rtdev {
            refuse_existing(r)?;
        }
    }

    // Create or grow an image file to -d size=.
    let meta = std::fs::metadata(&a.image);
    let is_bdev = meta
        .as_ref()
        .map(|m| m.file_type().is_block_device())
        .unwrap_or(false);
    // An image file this run creates is removed again if the run fails
    // before the filesystem is written (no empty file left behind).
    let mut created = None;
    match (&meta, o.dsize) {
        (Err(e), Some(size)) if e.kind() == std::io::ErrorKind::NotFound && !a.dry_run => {
            let f = std::fs::File::create(&a.image).map_err(|e| CliError::io(&name, &e))?;
            created = Some(RemoveOnDrop(a.image.clone()));
            f.set_len(size).map_err(|e| CliError::io(&name, &e))?;
        }
        (Err(e), _) => {
            return Err(CliError::io(&name, e).with_code(
                if e.kind() == std::io::ErrorKind::NotFound {
                    crate::cli_error::EXIT_USAGE
                } else {
                    1
                },
            ))
        }
        (Ok(m), Some(size)) if m.is_file() && m.len() < size && !a.dry_run && within.is_none() => {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&a.image)
                .map_err(|e| CliError::io(&name, &e))?;
            f.set_len(size).map_err(|e| CliError::io(&name, &e))?;
        }
        _ => {}
    }
    let sectsize = if is_bdev {
        std::fs::File::open(&a.image)
            .map(|f| rxfs::bdev::block_device_sectsize(&f))
            .unwrap_or(512)
    } else {
        512
    };

    let dev: std::sync::Arc<dyn BlockDevice> = std::sync::Arc::new(
        FileDevice::open(&a.image, a.dry_run, false).map_err(|e| CliError::fs(&name, &e))?,
    );
    let dev = match within {
        Some(w) => w.apply(dev).map_err(|e| CliError::fs(&name, &e))?,
        None => dev,
    };
    let rtdev = match &rt.rtdev {
        Some(p) => {
            Some(FileDevice::open(p, a.dry_run, false).map_err(|e| CliError::fs(p.display(), &e))?)
        }
        None => None,
    };
    let plan = rxfs::mkfs::Plan::new(&o, dev.size(), sectsize, rtdev.as_ref().map(|d| d.size()))
        .map_err(|e| CliError::usage(format!("{name}: {e}")))?;
    if !a.quiet || a.dry_run {
        {
            use std::io::Write as _;
            let _ = write!(std::io::stdout(), "{}", describe(&name, &plan));
        }
    }
    if a.dry_run {
        return Ok(());
    }
    let now = rxfs::mkfs::image::build_time();
    if let Some(c) = created.take() {
        std::mem::forget(c);
    }
    rxfs::mkfs::mkfs(
        dev.as_ref(),
        rtdev.as_ref().map(|d| d as &dyn BlockDevice),
        &o,
        sectsize,
        now,
    )
    .map_err(|e| CliError::fs(&name, &e))?;
    // The populate opens both devices again, read-write (each open takes
    // the device's exclusive owner lock).
    drop(dev);
    drop(rtdev);
    let img = crate::opts::Opts {
        read_only: false,
        rtdev: rt.rtdev.clone(),
        within,
        ..Default::default()
    };
    let dir_source = match (&a.populate, &proto) {
        (Some(src), _) => Some((src.clone(), true)),
        (
            None,
            Some(Proto {
                source: ProtoSource::Dir(dir),
                atime,
                ..
            }),
        ) => Some((dir.clone(), *atime)),
        _ => None,
    };
    if let Some((src, keep_atime)) = dir_source {
        let opts = rxfs::populate::Options {
            keep_atime,
            owner: a.owner,
            overrides: overrides.clone(),
            ..Default::default()
        };
        let opts = super::populate::excluding_devices(&a.image, &img, &opts);
        with_new_image(&a.image, &img, |fs| {
            let root = rxfs::populate::Dest::Into(fs.root_ino());
            super::populate::copy_tree(fs, &src, root, !a.quiet, &opts).map(|_| ())
        })?;
    }
    if let Some(t) = &a.populate_tar {
        let sum = with_new_image(&a.image, &img, |fs| {
            super::populate_tar::open_archive(t)
                .and_then(|ar| super::populate_tar::populate_tar(fs, ar))
        })?;
        if !a.quiet {
            errln!(
                "rxfs: {} entries, {} bytes of file data from {}",
                sum.entries,
                sum.bytes,
                t.display()
            );
        }
    }
    if let Some(Proto {
        source: ProtoSource::File(_, Some(root)),
        ..
    }) = &proto
    {
        with_new_image(&a.image, &img, |fs| super::protofile::apply(fs, root))?;
    }
    Ok(())
}

/// `-c options=FILE`: the file's (flag, "key=value") pairs, refused when
/// the command line sets one of them too.
fn read_config(c: &str, a: &Args) -> CliResult<Vec<(char, String)>> {
    let file = c
        .strip_prefix("options=")
        .filter(|f| !f.is_empty())
        .ok_or_else(|| CliError::usage(format!("-c {c}: use -c options=FILE")))?;
    let text = std::fs::read_to_string(file).map_err(|e| CliError::io(file, &e))?;
    let pairs = super::mkfs_opts::parse_config(&text)
        .map_err(|e| CliError::usage(format!("{file}: {e}")))?;
    let cli: [(char, &Vec<String>); 8] = [
        ('b', &a.block),
        ('d', &a.data),
        ('i', &a.inode),
        ('l', &a.log),
        ('n', &a.naming),
        ('m', &a.meta),
        ('r', &a.rt),
        ('s', &a.sector),
    ];
    for (flag, kv) in &pairs {
        let key = kv.split_once('=').map_or(kv.as_str(), |(k, _)| k);
        let twice = cli.iter().any(|(f, list)| {
            f == flag
                && list
                    .iter()
                    .any(|s| super::mkfs_opts::keys_of(s).any(|k| k == key))
        });
        if twice {
            return Err(CliError::usage(format!(
                "-{flag} {key}: set both in {file} and on the command line"
            )));
        }
    }
    Ok(pairs)
}

/// `--offset BYTES`: a multiple of 512 (suffixes as -d size=).
fn parse_offset(v: &str) -> Result<u64, String> {
    let o = super::mkfs_opts::parse_num("--offset", v, 4096).map_err(|e| e.msg)?;
    if o % 512 != 0 {
        return Err("a multiple of 512 bytes".into());
    }
    Ok(o)
}

/// [`refuse_existing`] for the range `within` of `path` (a partition: its
/// bytes are probed, not the disk's partition table).
fn refuse_existing_in(path: &std::path::Path, within: Option<rxfs::fs::Within>) -> CliResult<()> {
    let Some(w) = within else {
        return refuse_existing(path);
    };
    let name = path.display();
    let dev = FileDevice::open(path, true, false).map_err(|e| CliError::fs(&name, &e))?;
    let dev = w
        .apply(std::sync::Arc::new(dev))
        .map_err(|e| CliError::fs(&name, &e))?;
    let mut read = |off: u64, buf: &mut [u8]| {
        dev.read_at(buf, off)
            .map_err(|e| std::io::Error::other(e.to_string()))
    };
    match rxfs::mkfs::probe::probe(dev.size(), &mut read) {
        Ok(None) => Ok(()),
        Ok(Some(found)) => Err(CliError::new(format!(
            "{name} ({}) appears to contain {found}; use -f to overwrite it",
            crate::opts::describe_within(w)
        ))),
        Err(e) => Err(CliError::io(format!("{name}: probing for signatures"), &e)),
    }
}

/// `--owner UID:GID`.
pub fn parse_owner(v: &str) -> Result<(u32, u32), String> {
    let (u, g) = v.split_once(':').ok_or("UID:GID, numeric")?;
    match (u.parse(), g.parse()) {
        (Ok(u), Ok(g)) => Ok((u, g)),
        _ => Err("UID:GID, numeric".into()),
    }
}

/// What `-p` names.
enum ProtoSource {
    Dir(PathBuf),
    /// A prototype file and, once [`Proto::check`] parsed it, its tree.
    File(PathBuf, Option<super::protofile::Spec>),
}

/// mkfs.xfs's `-p` option.
struct Proto {
    source: ProtoSource,
    slashes_are_spaces: bool,
    atime: bool,
}

/// `-p PROTOFILE` or `-p file=PATH,slashes_are_spaces=0|1,atime=0|1`.
fn parse_proto(v: &str) -> CliResult<Proto> {
    let mut file = None;
    let (mut slashes, mut atime) = (false, false);
    for (i, part) in v.split(',').enumerate() {
        let flag = |val: &str| match val {
            "0" => Ok(false),
            "1" | "" => Ok(true),
            _ => Err(CliError::usage(format!("-p {part}: 0 or 1"))),
        };
        match part.split_once('=') {
            Some(("file", f)) if !f.is_empty() => file = Some(PathBuf::from(f)),
            Some(("slashes_are_spaces", b)) => slashes = flag(b)?,
            Some(("atime", b)) => atime = flag(b)?,
            None if i == 0 && !part.is_empty() => file = Some(PathBuf::from(part)),
            _ => {
                return Err(CliError::usage(format!(
                    "-p: unknown suboption '{part}' (file=PATH, slashes_are_spaces=0|1, atime=0|1)"
                )))
            }
        }
    }
    let file = file.ok_or_else(|| CliError::usage("-p needs a file: -p file=PATH"))?;
    let m = std::fs::metadata(&file).map_err(|e| CliError::io(file.display(), &e))?;
    let source = if m.is_dir() {
        ProtoSource::Dir(file)
    } else {
        ProtoSource::File(file, None)
    };
    Ok(Proto {
        source,
        slashes_are_spaces: slashes,
        atime,
    })
}

impl Proto {
    /// Parse a prototype file (its errors name the file and line).
    fn check(&mut self) -> CliResult<()> {
        if let ProtoSource::File(path, tree) = &mut self.source {
            let text =
                std::fs::read_to_string(&*path).map_err(|e| CliError::io(path.display(), &e))?;
            let root = super::protofile::parse(&text, self.slashes_are_spaces)
                .map_err(|e| CliError::new(format!("{}: {e}", path.display())))?;
            *tree = Some(root);
        }
        Ok(())
    }
}

/// Refuse a device that holds a filesystem, partition table or RAID
/// member (see [`rxfs::mkfs::probe`]), as mkfs.xfs does without `-f`. A
/// path that does not exist yet holds nothing.
fn refuse_existing(path: &std::path::Path) -> CliResult<()> {
    match rxfs::mkfs::image::refuse_existing(path) {
        Ok(()) => Ok(()),
        Err(rxfs::Error::HasFilesystem(m)) => {
            Err(CliError::new(format!("{m}; use -f to overwrite it")))
        }
        Err(e) => Err(CliError::fs(
            format!("{}: probing for signatures", path.display()),
            &e,
        )),
    }
}

/// Open the new filesystem read-write with `img`, run `f` on it, and
/// unmount it cleanly whatever `f` returned (see
/// [`super::populate::finish`]). With a realtime section the image is
/// opened with its realtime device, so regular files under a directory
/// with the rtinherit flag get their data there.
fn with_new_image<T>(
    image: &std::path::Path,
    img: &crate::opts::Opts,
    f: impl FnOnce(&rxfs::Filesystem) -> CliResult<T>,
) -> CliResult<T> {
    let fs = crate::opts::open_image(image, img)?;
    let r = f(&fs);
    super::populate::finish(&fs, image, r)
}

/// mkfs.xfs's geometry report, in its layout.
fn describe(name: &str, p: &rxfs::mkfs::Plan) -> String {
    let f = &p.features;
    let b = |x: bool| u8::from(x);
    let mut s = String::new();
    s += &format!(
        "meta-data={:<22} isize={:<6} agcount={}, agsize={} blks\n",
        name, p.inodesize, p.agcount, p.agblocks
    );
    s += &format!(
        "         ={:<22} sectsz={:<5} attr=2, projid32bit=1\n",
        "", p.sectsize
    );
    s += &format!(
        "         ={:<22} crc={:<8} finobt={}, sparse={}, rmapbt={}\n",
        "",
        b(f.crc),
        b(f.finobt),
        b(f.sparse),
        b(f.rmapbt)
    );
    s += &format!(
        "         ={:<22} reflink={:<4} bigtime={} inobtcount={} nrext64={}\n",
        "",
        b(f.reflink),
        b(f.bigtime),
        b(f.inobtcount),
        b(f.nrext64)
    );
    s += &format!(
        "data     ={:<22} bsize={:<6} blocks={}, imaxpct={}\n",
        "", p.blocksize, p.dblocks, p.imaxpct
    );
    s += &format!("         ={:<22} sunit=0      swidth=0 blks\n", "");
    s += &format!(
        "naming   =version 2              bsize={:<6} ascii-ci=0, ftype=1\n",
        p.dirblocksize
    );
    s += &format!(
        "log      =internal log           bsize={:<6} blocks={}, version=2\n",
        p.blocksize, p.logblocks
    );
    s += &format!(
        "         ={:<22} sectsz={:<5} sunit=0 blks, lazy-count=1\n",
        "", p.sectsize
    );
    s += &format!(
        "realtime ={:<22} extsz={:<6} blocks={}, rtextents={}\n",
        if p.rblocks > 0 { "external" } else { "none" },
        p.rtextsize as u64 * p.blocksize as u64,
        p.rblocks,
        p.rextents
    );
    s
}
