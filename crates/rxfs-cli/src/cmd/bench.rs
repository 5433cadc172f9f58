//! `rxfs bench`: library-level benchmarks (no FUSE) of the two seed
//! workloads of issue 13, on a copy of an image with device latency
//! injected (`inject_latency_us`, see `rxfs::bdev::LatencyDevice`), and
//! the create workloads of issue 16 (`fsmark`, `dirscale`: the library
//! side of `scripts/bench`).
//!
//! Not a test: it prints measurements and ratios, and asserts nothing
//! about times. With `--json` every point is also written as JSON (one
//! document: the workload, its options and one object per point).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rxfs::fs::ops_ns::CreateArgs;
use rxfs::fs::rw::FsStats;
use rxfs::types::Ino;
use rxfs::{Filesystem, MountOptions};

use crate::{CliError, CliResult};

/// Library benchmarks of parallel overwrites and of the log's batching of
/// synchronous commits, with device latency injected.
///
/// Each point opens IMAGE read-write afresh (the image is changed: use a
/// scratch copy made by `mkfs.xfs`), runs, unmounts and prints one row.
/// `overwrite`: one preallocated, written file; each thread overwrites
/// random 4 KiB blocks for SECS seconds (pwrite only, no fsync); prints
/// writes/s and the ratio to 1 thread. `fsync`: each thread creates files
/// in its own directory, writes 4 KiB and fsyncs each; prints fsyncs/s,
/// log writes, fsyncs per log write, checkpoints, transactions per file,
/// log flushes and log KiB per fsync. `fsmark`: each thread creates FILES
/// empty files in its own directory (fs_mark's shape, no fsync);
/// prints creates/s. `dirscale`: one thread creates FILES empty files in
/// one directory; prints creates/s per window of directory sizes
/// (`--windows`). Times of fsmark and dirscale exclude the open and the
/// unmount (the JSON has the unmount's seconds).
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// `overwrite`, `fsync`, `fsmark`, `dirscale` or `rtalloc`.
    pub workload: String,
    /// A scratch XFS image (made by mkfs.xfs).
    pub image: PathBuf,
    /// Thread counts, comma-separated.
    #[arg(long, default_value = "1,2,4,8")]
    pub threads: String,
    /// Microseconds added to every device write and flush.
    #[arg(long, default_value_t = 100)]
    pub latency_us: u64,
    /// Seconds per point (overwrite).
    #[arg(long, default_value_t = 3)]
    pub secs: u64,
    /// File size in MiB (overwrite).
    #[arg(long, default_value_t = 64)]
    pub file_mib: u64,
    /// Files per thread (fsync, fsmark); files in the directory (dirscale).
    #[arg(long, default_value_t = 200)]
    pub files: u64,
    /// Directory sizes at which dirscale reports the create rate of the
    /// window that ends there, comma-separated (FILES is always one).
    #[arg(long, default_value = "1000,2000,5000,10000,20000,50000,100000")]
    pub windows: String,
    /// Appended to the names of the directories fsync, fsmark and dirscale
    /// make (`bench-fsmark{TAG}-0-0`...), so that several runs can share one
    /// image.
    #[arg(long, default_value = "")]
    pub tag: String,
    /// Also write every point as JSON to FILE (`-`, or `--json` alone:
    /// stdout, and the table goes to stderr).
    #[arg(long, num_args = 0..=1, default_missing_value = "-", value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Size of each in-core log buffer in bytes (the mount option
    /// `logbsize`; default: a mount's, 256 KiB where the log holds 64 of
    /// them, else the kernel's 32 KiB or the log stripe unit).
    #[arg(long)]
    pub logbsize: Option<u32>,
    /// The realtime device of IMAGE (rtalloc; the other workloads open it
    /// too when given).
    #[arg(long)]
    pub rtdev: Option<PathBuf>,
    /// Seed of the random sizes (rtalloc).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Summary modes to measure, comma-separated (rtalloc; for profiling
    /// one alone).
    #[arg(long, default_value = "none,minlevel,memory")]
    pub rt_modes: String,
    /// Passes over the summary modes (rtalloc): each pass measures every
    /// mode once, in an order rotated from pass to pass; the table gives
    /// the median time per allocation and the range.
    #[arg(long, default_value_t = 3)]
    pub rt_repeat: u32,
    /// One bitmap block in this many gets free space when the device is
    /// fragmented (rtalloc): the others stay full, as on a nearly full
    /// device, where the realtime summary reads pile up.
    #[arg(long, default_value_t = 8)]
    pub rt_hot: u64,
}

fn open(a: &Args) -> CliResult<Arc<Filesystem>> {
    let mo = MountOptions {
        // 0: no latency device at all.
        inject_latency: (a.latency_us > 0).then(|| Duration::from_micros(a.latency_us)),
        logbsize: a.logbsize,
        ..MountOptions::default()
    };
    Filesystem::open_path(&a.image, a.rtdev.as_deref(), mo)
        .map_err(|e| CliError::fs(a.image.display(), &e))
}

fn fs_err(e: rxfs::Error) -> CliError {
    CliError::new(format!("bench: {e}"))
}

fn args_file() -> CreateArgs {
    CreateArgs {
        mode: 0o100644,
        uid: 0,
        gid: 0,
        rdev: 0,
        umask: 0,
    }
}

/// Where the table and the JSON points go.
pub(super) struct Out {
    /// The JSON goes to stdout, so the table goes to stderr.
    json_stdout: bool,
    pub(super) points: Vec<serde_json::Value>,
}

impl Out {
    pub(super) fn line(&self, s: &str) {
        if self.json_stdout {
            eprintln!("{s}");
        } else {
            println!("{s}");
        }
    }
}

/// `println!` into an [`Out`].
macro_rules! say {
    ($out:expr, $($fmt:tt)*) => {
        $out.line(&format!($($fmt)*))
    };
}

pub fn run(a: Args) -> CliResult<()> {
    crate::alloc_tuning::keep_freed_memory();
    let threads: Vec<usize> = a
        .threads
        .split(',')
        .map(|t| t.trim().parse::<usize>().ok().filter(|&n| n > 0))
        .collect::<Option<_>>()
        .ok_or_else(|| CliError::usage(format!("bad --threads '{}'", a.threads)))?;
    let mut out = Out {
        json_stdout: a.json.as_deref() == Some(Path::new("-")),
        points: Vec::new(),
    };
    match a.workload.as_str() {
        "overwrite" => overwrite(&a, &threads, &mut out),
        "fsync" => fsync(&a, &threads, &mut out),
        "fsmark" => fsmark(&a, &threads, &mut out),
        "dirscale" => dirscale(&a, &mut out),
        "rtalloc" => super::bench_rt::rtalloc(&a, &mut out),
        w => Err(CliError::usage(format!(
            "unknown workload '{w}' (overwrite, fsync, fsmark, dirscale, rtalloc)"
        ))),
    }?;
    let Some(path) = &a.json else {
        return Ok(());
    };
    let doc = serde_json::json!({
        "workload": a.workload,
        "image": a.image,
        "latency_us": a.latency_us,
        "files": a.files,
        "logbsize": a.logbsize,
        "points": out.points,
    });
    let text = format!("{doc}\n");
    if out.json_stdout {
        print!("{text}");
        Ok(())
    } else {
        std::fs::write(path, text)
            .map_err(|e| CliError::new(format!("bench: writing {}: {e}", path.display())))
    }
}

/// A small deterministic generator (xorshift64*).
pub(super) fn next(s: &mut u64) -> u64 {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    s.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

fn overwrite(a: &Args, threads: &[usize], out: &mut Out) -> CliResult<()> {
    let fs = open(a)?;
    let name = b"bench-overwrite";
    let root = fs.root_ino();
    let ino = match fs.iget(root).and_then(|r| fs.lookup(&r, name)) {
        Ok(i) => i,
        Err(_) => fs.create(root, name, &args_file()).map_err(fs_err)?.ino,
    };
    let size = a.file_mib << 20;
    let chunk = vec![0x5au8; 1 << 20];
    let mut off = 0;
    while off < size {
        let n = fs.write_exact(ino, off, &chunk).map_err(fs_err)?;
        off += n as u64;
    }
    fs.fsync(ino, false).map_err(fs_err)?;
    fs.unmount().map_err(fs_err)?;
    drop(fs);
    say!(
        out,
        "| threads | overwrites/s | x 1 thread | iolock shared | iolock excl | transactions |"
    );
    say!(out, "|---|---|---|---|---|---|");
    let mut base = None;
    for &t in threads {
        let fs = open(a)?;
        let blocks = size / 4096;
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicU64::new(0));
        let before = fs.stats();
        let hs: Vec<_> = (0..t)
            .map(|i| {
                let (fs, stop, done) = (fs.clone(), stop.clone(), done.clone());
                std::thread::spawn(move || -> rxfs::Result<()> {
                    let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ (i as u64 + 1);
                    let buf = vec![i as u8; 4096];
                    while !stop.load(Relaxed) {
                        let b = next(&mut seed) % blocks;
                        fs.write(ino, b * 4096, &buf)?;
                        done.fetch_add(1, Relaxed);
                    }
                    Ok(())
                })
            })
            .collect();
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_secs(a.secs));
        stop.store(true, Relaxed);
        for h in hs {
            h.join()
                .map_err(|_| CliError::new("bench thread panicked"))?
                .map_err(fs_err)?;
        }
        let rate = done.load(Relaxed) as f64 / t0.elapsed().as_secs_f64();
        let s = fs.stats();
        fs.unmount().map_err(fs_err)?;
        let b = *base.get_or_insert(rate);
        out.points.push(serde_json::json!({
            "threads": t,
            "ops": done.load(Relaxed),
            "ops_per_s": rate,
            "trans_commits": s.trans_commits - before.trans_commits,
        }));
        say!(
            out,
            "| {t} | {rate:.0} | {:.2} | {} | {} | {} |",
            rate / b,
            s.locks.iolock_shared - before.locks.iolock_shared,
            s.locks.iolock_excl - before.locks.iolock_excl,
            s.trans_commits - before.trans_commits,
        );
    }
    Ok(())
}

fn fsync(a: &Args, threads: &[usize], out: &mut Out) -> CliResult<()> {
    say!(
            out,
        "| threads | fsyncs/s | log writes | fsyncs per log write | checkpoints | transactions per file | log flushes | log KiB per fsync |"
    );
    say!(out, "|---|---|---|---|---|---|---|---|");
    for (round, &t) in threads.iter().enumerate() {
        let fs = open(a)?;
        let root = fs.root_ino();
        let dirs: Vec<Ino> = (0..t)
            .map(|i| {
                let name = format!("bench-fsync{}-{round}-{i}", a.tag);
                fs.mkdir(
                    root,
                    name.as_bytes(),
                    &CreateArgs {
                        mode: 0o40755,
                        ..args_file()
                    },
                )
                .map(|ip| ip.ino)
                .map_err(fs_err)
            })
            .collect::<CliResult<_>>()?;
        fs.sync().map_err(fs_err)?;
        let before = fs.stats();
        let t0 = Instant::now();
        let hs: Vec<_> = dirs
            .iter()
            .map(|&d| {
                let fs = fs.clone();
                let files = a.files;
                std::thread::spawn(move || -> rxfs::Result<()> {
                    let buf = vec![7u8; 4096];
                    for f in 0..files {
                        let ip = fs.create(d, format!("f{f}").as_bytes(), &args_file())?;
                        fs.inode_ref(ip.ino);
                        fs.write(ip.ino, 0, &buf)?;
                        fs.fsync(ip.ino, false)?;
                        fs.trim_eof(ip.ino)?;
                        fs.inode_unref(ip.ino, 1)?;
                    }
                    Ok(())
                })
            })
            .collect();
        for h in hs {
            h.join()
                .map_err(|_| CliError::new("bench thread panicked"))?
                .map_err(fs_err)?;
        }
        let secs = t0.elapsed().as_secs_f64();
        let s = fs.stats();
        fs.unmount().map_err(fs_err)?;
        let d = |f: fn(&FsStats) -> u64| f(&s) - f(&before);
        let n = t as u64 * a.files;
        let writes = d(|x| x.log.writes).max(1);
        out.points.push(serde_json::json!({
            "threads": t,
            "ops": n,
            "seconds": secs,
            "ops_per_s": n as f64 / secs,
            "log_writes": d(|x| x.log.writes),
            "trans_commits": d(|x| x.trans_commits),
        }));
        say!(
            out,
            "| {t} | {:.0} | {writes} | {:.1} | {} | {:.2} | {} | {:.1} |",
            n as f64 / secs,
            n as f64 / writes as f64,
            d(|x| x.checkpoints),
            d(|x| x.trans_commits) as f64 / n as f64,
            d(|x| x.log.flushes),
            d(|x| x.log.bytes) as f64 / 1024.0 / n as f64,
        );
    }
    Ok(())
}

fn args_dir() -> CreateArgs {
    CreateArgs {
        mode: 0o40755,
        ..args_file()
    }
}

/// Create `files` empty files `f0`.. in directory `d` as an open and a
/// close through FUSE would: the create, an open reference taken and
/// dropped (the inode is not kept in the caller's hands).
fn create_files(
    fs: &Filesystem,
    d: Ino,
    files: u64,
    mut mark: impl FnMut(u64),
) -> rxfs::Result<()> {
    for f in 0..files {
        let ip = fs.create(d, format!("f{f}").as_bytes(), &args_file())?;
        fs.inode_ref(ip.ino);
        fs.inode_unref(ip.ino, 1)?;
        drop(ip);
        mark(f + 1);
    }
    Ok(())
}

/// Seed 003's fs_mark shape through the library: each thread creates
/// `--files` empty files in its own directory (made before the clock
/// starts), no fsync.
fn fsmark(a: &Args, threads: &[usize], out: &mut Out) -> CliResult<()> {
    say!(
        out,
        "| threads | files | creates/s | transactions per file | unmount s |"
    );
    say!(out, "|---|---|---|---|---|");
    for (round, &t) in threads.iter().enumerate() {
        let fs = open(a)?;
        let root = fs.root_ino();
        let dirs: Vec<Ino> = (0..t)
            .map(|i| {
                let name = format!("bench-fsmark{}-{round}-{i}", a.tag);
                fs.mkdir(root, name.as_bytes(), &args_dir())
                    .map(|ip| ip.ino)
                    .map_err(fs_err)
            })
            .collect::<CliResult<_>>()?;
        let before = fs.stats();
        // Each thread notes its start and finish: the time runs from the
        // first start to the last finish.
        let start = Arc::new(std::sync::Barrier::new(t));
        let hs: Vec<_> = dirs
            .iter()
            .map(|&d| {
                let (fs, start, files) = (fs.clone(), start.clone(), a.files);
                std::thread::spawn(move || -> rxfs::Result<(Instant, Instant)> {
                    start.wait();
                    let t0 = Instant::now();
                    create_files(&fs, d, files, |_| {})?;
                    Ok((t0, Instant::now()))
                })
            })
            .collect();
        let mut spans = Vec::new();
        for h in hs {
            spans.push(
                h.join()
                    .map_err(|_| CliError::new("bench thread panicked"))?
                    .map_err(fs_err)?,
            );
        }
        let first = spans.iter().map(|s| s.0).min().expect("threads > 0");
        let last = spans.iter().map(|s| s.1).max().expect("threads > 0");
        let secs = last.duration_since(first).as_secs_f64();
        let s = fs.stats();
        let u0 = Instant::now();
        fs.unmount().map_err(fs_err)?;
        let umount_s = u0.elapsed().as_secs_f64();
        let n = t as u64 * a.files;
        let trans = s.trans_commits - before.trans_commits;
        out.points.push(serde_json::json!({
            "threads": t,
            "files_per_thread": a.files,
            "ops": n,
            "seconds": secs,
            "ops_per_s": n as f64 / secs,
            "trans_commits": trans,
            "unmount_seconds": umount_s,
        }));
        say!(
            out,
            "| {t} | {n} | {:.0} | {:.2} | {umount_s:.2} |",
            n as f64 / secs,
            trans as f64 / n as f64,
        );
    }
    Ok(())
}

/// One thread creates `--files` empty files in one directory; the create
/// rate of each window of directory sizes.
fn dirscale(a: &Args, out: &mut Out) -> CliResult<()> {
    let mut edges: Vec<u64> = a
        .windows
        .split(',')
        .map(|w| w.trim().parse::<u64>().ok().filter(|&n| n > 0))
        .collect::<Option<_>>()
        .ok_or_else(|| CliError::usage(format!("bad --windows '{}'", a.windows)))?;
    edges.retain(|&w| w < a.files);
    edges.push(a.files);
    edges.sort_unstable();
    edges.dedup();
    let fs = open(a)?;
    let d = fs
        .mkdir(
            fs.root_ino(),
            format!("bench-dirscale{}", a.tag).as_bytes(),
            &args_dir(),
        )
        .map_err(fs_err)?
        .ino;
    let mut marks: Vec<(u64, f64)> = Vec::new();
    let t0 = Instant::now();
    create_files(&fs, d, a.files, |n| {
        if edges.get(marks.len()) == Some(&n) {
            marks.push((n, t0.elapsed().as_secs_f64()));
        }
    })
    .map_err(fs_err)?;
    let secs = t0.elapsed().as_secs_f64();
    let u0 = Instant::now();
    fs.unmount().map_err(fs_err)?;
    let umount_s = u0.elapsed().as_secs_f64();
    say!(out, "| entries | creates/s in the window ending there |");
    say!(out, "|---|---|");
    let mut prev = (0u64, 0f64);
    let mut windows = Vec::new();
    for &(n, t) in &marks {
        let rate = (n - prev.0) as f64 / (t - prev.1);
        say!(out, "| {n} | {rate:.0} |");
        windows.push(serde_json::json!({"entries": n, "seconds": t - prev.1, "ops_per_s": rate}));
        prev = (n, t);
    }
    say!(
        out,
        "{} creates in {secs:.2} s ({:.0}/s); unmount {umount_s:.2} s",
        a.files,
        a.files as f64 / secs
    );
    out.points.push(serde_json::json!({
        "threads": 1,
        "ops": a.files,
        "seconds": secs,
        "ops_per_s": a.files as f64 / secs,
        "unmount_seconds": umount_s,
        "windows": windows,
    }));
    Ok(())
}
