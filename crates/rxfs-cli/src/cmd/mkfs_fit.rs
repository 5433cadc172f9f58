//! `rxfs mkfs -d size=fit`: the smallest image that holds the source tree
//! with a chosen free margin (`--free-space PCT%|SIZE`, default 10%).
//!
//! XFS cannot shrink, so the size must be right the first time. The
//! source is measured (allocated bytes of regular files, inodes,
//! directory entries, long symbolic link targets; a tar archive from its
//! headers, a prototype file from the files it names), a deliberately
//! tight size is computed from that, with the geometry mkfs.xfs would
//! choose for it (AG count, log size: [`rxfs::mkfs::plan::Plan`]), and the
//! image is built. If the copy runs out of space, or the free space left
//! is below the margin, the image is rebuilt 5% (or the missing space)
//! larger; when it fits with more than 2.5% to spare, one build that much
//! smaller is tried (kept if it fits). So the result is within a few
//! percent of the smallest that works, in two or three builds.
//! Never below XFS's 300 MiB minimum. The file is sparse (`set_len`).

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use super::mkfs::Args;
use crate::{CliError, CliResult};

/// XFS's smallest filesystem (mkfs.xfs refuses less).
const MIN_BYTES: u64 = 300 << 20;
/// Rebuilds at most this many times.
const TRIES: u32 = 12;

/// What the source needs, in bytes of each kind, with the geometry's
/// units.
#[derive(Debug, Default)]
struct Need {
    /// Filesystem block, inode and directory block sizes.
    block: u64,
    inode: u64,
    dirblock: u64,
    data: u64,
    inodes: u64,
    names: u64,
    dirs: u64,
    long_links: u64,
}

/// Whether `-d size=fit` was given; the `-d` lists without it.
pub fn wanted(data: &[String]) -> Option<Vec<String>> {
    let mut fit = false;
    let kept: Vec<String> = data
        .iter()
        .map(|l| {
            l.split(',')
                .filter(|kv| {
                    let f = *kv == "size=fit";
                    fit |= f;
                    !f
                })
                .collect::<Vec<_>>()
                .join(",")
        })
        .filter(|l| !l.is_empty())
        .collect();
    fit.then_some(kept)
}

/// `--free-space`: a percentage of the filesystem (`10%`) or a size.
pub fn parse_margin(v: &str) -> Result<Margin, String> {
    if let Some(p) = v.strip_suffix('%') {
        let p: f64 = p.parse().map_err(|_| format!("bad percentage '{v}'"))?;
        if !(0.0..90.0).contains(&p) {
            return Err(format!("'{v}': 0% to 90%"));
        }
        return Ok(Margin::Percent(p));
    }
    super::mkfs_opts::parse_num("--free-space", v, 4096)
        .map(Margin::Bytes)
        .map_err(|e| e.msg)
}

#[derive(Debug, Clone, Copy)]
pub enum Margin {
    Percent(f64),
    Bytes(u64),
}

impl Margin {
    fn bytes_of(self, fs_bytes: u64) -> u64 {
        match self {
            Margin::Percent(p) => (fs_bytes as f64 * p / 100.0) as u64,
            Margin::Bytes(b) => b,
        }
    }
}

fn measure_dir(dir: &Path, n: &mut Need) -> CliResult<()> {
    let rd = std::fs::read_dir(dir).map_err(|e| CliError::io(dir.display(), &e))?;
    n.dirs += 1;
    n.inodes += 1;
    for e in rd {
        let e = e.map_err(|e| CliError::io(dir.display(), &e))?;
        let p = e.path();
        let m = std::fs::symlink_metadata(&p).map_err(|err| CliError::io(p.display(), &err))?;
        n.names += e.file_name().len() as u64 + 12;
        if m.is_dir() {
            measure_dir(&p, n)?;
            continue;
        }
        n.inodes += 1;
        if m.is_file() {
            n.data += (m.blocks() * 512).div_ceil(n.block) * n.block;
        } else if m.file_type().is_symlink() && m.len() > 300 {
            n.long_links += 1;
        }
    }
    Ok(())
}

fn measure_tar(path: &Path, n: &mut Need) -> CliResult<()> {
    let r = super::populate_tar::open_archive(path)?;
    let mut ar = tar::Archive::new(r);
    let entries = ar.entries().map_err(|e| CliError::io(path.display(), &e))?;
    for e in entries {
        let e = e.map_err(|err| CliError::io(path.display(), &err))?;
        let h = e.header();
        n.inodes += 1;
        n.names += e.path_bytes().len() as u64 + 12;
        match h.entry_type() {
            tar::EntryType::Directory => n.dirs += 1,
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                n.data += h.size().unwrap_or(0).div_ceil(n.block) * n.block
            }
            _ => {}
        }
    }
    Ok(())
}

/// The bytes the source needs (data, inodes, directories, headroom for
/// btrees and the per-AG reserve), in the block, inode and directory
/// block sizes of `o` (mkfs.xfs's defaults where it sets none).
fn measure(a: &Args, o: &rxfs::mkfs::MkfsOptions) -> CliResult<u64> {
    let block = u64::from(o.blocksize.unwrap_or(4096));
    let mut n = Need {
        block,
        inode: u64::from(o.inodesize.unwrap_or(512)),
        dirblock: u64::from(o.dirblocksize.unwrap_or(4096)).max(block),
        ..Default::default()
    };
    if let Some(d) = &a.populate {
        measure_dir(d, &mut n)?;
    } else if let Some(t) = &a.populate_tar {
        if t.as_os_str() == "-" {
            return Err(CliError::usage(
                "-d size=fit needs the archive as a file, not standard input (it is read twice)",
            ));
        }
        measure_tar(t, &mut n)?;
    } else if let Some(p) = &a.proto {
        let file = p
            .split(',')
            .find_map(|kv| {
                kv.strip_prefix("file=")
                    .or((!kv.contains('=')).then_some(kv))
            })
            .unwrap_or("");
        let path = Path::new(file);
        if path.is_dir() {
            measure_dir(path, &mut n)?;
        } else {
            // A prototype file: the files it names, and a generous count of
            // its entries from its size.
            let text = std::fs::read_to_string(path).map_err(|e| CliError::io(file, &e))?;
            for tok in text.split_whitespace() {
                if let Ok(m) = std::fs::metadata(tok) {
                    if m.is_file() {
                        n.data += m.len().div_ceil(n.block) * n.block;
                    }
                }
            }
            n.inodes += text.lines().count() as u64;
            n.names += text.len() as u64;
            n.dirs += 1;
        }
    } else {
        return Err(CliError::usage(
            "-d size=fit needs a source: --populate DIR, -p ..., or --populate-tar FILE",
        ));
    }
    // Inodes come in chunks of 64.
    let inode_bytes = n.inodes.div_ceil(64) * 64 * n.inode;
    let dir_bytes = n.dirs * n.dirblock + n.names.div_ceil(n.dirblock) * n.dirblock * 2;
    let links = n.long_links * n.block;
    let raw = n.data + inode_bytes + dir_bytes + links;
    // Extent and btree blocks, directory leaf blocks, partial blocks.
    Ok(raw + raw / 50 + (4 << 20))
}

/// The image size whose free space, empty, is `need` plus the margin,
/// with the options `base` (all but the size) as the user gave them.
fn size_for(need: u64, margin: Margin, base: &rxfs::mkfs::MkfsOptions) -> u64 {
    // The log and the AG headers come off the top: the plan says how much.
    let mut size = (need + margin.bytes_of(need)).max(MIN_BYTES);
    for _ in 0..8 {
        let o = rxfs::mkfs::MkfsOptions {
            dsize: Some(size),
            ..base.clone()
        };
        let Ok(plan) = rxfs::mkfs::Plan::new(&o, size, 512, None) else {
            break;
        };
        let bs = plan.blocksize as u64;
        let overhead = plan.logblocks as u64 * bs
            + plan.agcount as u64 * (plan.prealloc_blocks as u64 + plan.agfl_fill as u64 + 16) * bs
            // XFS keeps back min(5%, 8192 blocks) for itself.
            + (plan.dblocks * bs / 20).min(8192 * bs);
        let want = need + margin.bytes_of(size) + overhead;
        if want <= size {
            break;
        }
        size = want;
    }
    size.max(MIN_BYTES).div_ceil(1 << 20) << 20
}

/// Run `mkfs` at the fitted size, rebuilding larger until the tree fits
/// with the margin.
pub fn run(mut a: Args, data_without_fit: Vec<String>) -> CliResult<()> {
    if a.offset.is_some() || a.partition.is_some() {
        return Err(CliError::usage(
            "-d size=fit makes a whole image file: not with --offset or --partition",
        ));
    }
    if std::fs::metadata(&a.image).is_ok_and(|m| m.file_type().is_block_device()) {
        return Err(CliError::usage(
            "-d size=fit makes an image file: a block device has its own size",
        ));
    }
    let margin = a.free_space.unwrap_or(Margin::Percent(10.0));
    a.data = data_without_fit;
    let (base, _) = super::mkfs::options_of(&a)?;
    let need = measure(&a, &base)?;
    let mut size = size_for(need, margin, &base);
    let quiet = a.quiet;
    // The last size that worked, once one did; then one try smaller.
    let mut good: Option<u64> = None;
    let mut shrunk = false;
    for attempt in 0..TRIES {
        let built = build(&a, size, attempt > 0)?;
        let want = margin.bytes_of(size);
        match built {
            Some(free) if free >= want => {
                let slack = free - want;
                if !shrunk && slack > size / 40 && size > MIN_BYTES {
                    // The estimate left room: one build that much smaller.
                    good = Some(size);
                    shrunk = true;
                    let smaller = size - slack + size / 100;
                    size = (smaller.max(MIN_BYTES)).div_ceil(1 << 20) << 20;
                    continue;
                }
                if !quiet {
                    outln!(
                        "{}: {} MiB (fitted: {} MiB free, margin {} MiB; {} builds)",
                        a.image.display(),
                        size >> 20,
                        free >> 20,
                        want >> 20,
                        attempt + 1
                    );
                }
                return Ok(());
            }
            Some(free) if good.is_none() => {
                size = (size + (want - free).max(size / 20)).div_ceil(1 << 20) << 20;
            }
            None if good.is_none() => {
                size = (size + size / 20).div_ceil(1 << 20) << 20;
            }
            // The smaller try failed: back to the size that worked.
            _ => {
                size = good.take().expect("checked");
            }
        }
    }
    Err(CliError::new(format!(
        "{}: -d size=fit did not converge in {TRIES} builds",
        a.image.display()
    )))
}

/// Build at `size`; the free bytes, or None when the tree did not fit.
fn build(a: &Args, size: u64, ours: bool) -> CliResult<Option<u64>> {
    let mut try_args = a.clone();
    try_args.data.push(format!("size={size}"));
    // Ours after the first build (the first one was probed).
    try_args.force = a.force || ours;
    try_args.quiet = true;
    if let Ok(f) = std::fs::OpenOptions::new().write(true).open(&a.image) {
        // A fresh sparse file of exactly this size.
        let _ = f.set_len(0);
    }
    match super::mkfs::run_once(try_args) {
        Ok(()) => free_bytes(&a.image).map(Some),
        // (The populate's error names ENOSPC in its words.)
        Err(e) if e.msg.to_lowercase().contains("no space left on device") => Ok(None),
        Err(e) => Err(e),
    }
}

fn free_bytes(image: &Path) -> CliResult<u64> {
    let o = crate::opts::Opts {
        read_only: true,
        ..Default::default()
    };
    let fs = crate::opts::open_image(image, &o)?;
    let st = fs.statfs().map_err(|e| CliError::fs(image.display(), &e))?;
    Ok(st.bfree * st.bsize as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_is_taken_out_of_the_data_lists() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(wanted(&v(&["size=fit,agcount=4"])), Some(v(&["agcount=4"])));
        assert_eq!(wanted(&v(&["size=fit"])), Some(v(&[])));
        assert_eq!(wanted(&v(&["size=1g"])), None);
    }

    #[test]
    fn margins() {
        assert!(matches!(parse_margin("10%"), Ok(Margin::Percent(p)) if p == 10.0));
        assert!(matches!(parse_margin("64m"), Ok(Margin::Bytes(b)) if b == 64 << 20));
        assert!(parse_margin("95%").is_err());
        assert!(parse_margin("lots").is_err());
    }

    #[test]
    fn small_trees_get_the_minimum_and_big_ones_room() {
        let base = rxfs::mkfs::MkfsOptions::default();
        assert_eq!(size_for(1 << 20, Margin::Percent(10.0), &base), MIN_BYTES);
        let s = size_for(10 << 30, Margin::Percent(10.0), &base);
        assert!(s > 11 << 30 && s < 13 << 30, "{s}");
    }
}
