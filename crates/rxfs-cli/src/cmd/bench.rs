//! `rxfs bench`: library-level benchmarks (no FUSE) of the two seed
//! workloads of issue 13, on a copy of an image with device latency
//! injected (`inject_latency_us`, see `rxfs::bdev::LatencyDevice`).
//!
//! Not a test: it prints measurements and ratios, and asserts nothing
//! about times.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rxfs::fs::ops_ns::CreateArgs;
use rxfs::fs::rw::FsStats;
use rxfs::types::Ino;
use rxfs::{Filesystem, MountOptions};

use crate::{CliError, CliResult};

/// Library benchmarks of seed 004 (parallel overwrites) and seed 002 (log
/// batching of synchronous commits), with device latency injected.
///
/// Each point opens IMAGE read-write afresh (the image is changed: use a
/// scratch copy made by `mkfs.xfs`), runs, unmounts and prints one row.
/// `overwrite`: one preallocated, written file; each thread overwrites
/// random 4 KiB blocks for SECS seconds (pwrite only, no fsync); prints
/// writes/s and the ratio to 1 thread. `fsync`: each thread creates files
/// in its own directory, writes 4 KiB and fsyncs each; prints fsyncs/s,
/// log writes, fsyncs per log write, checkpoints, transactions per file,
/// log flushes and log KiB per fsync.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// `overwrite` or `fsync`.
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
    /// Files per thread (fsync).
    #[arg(long, default_value_t = 200)]
    pub files: u64,
    /// Size of each in-core log buffer in bytes (the mount option
    /// `logbsize`; default: a mount's, 256 KiB where the log holds 64 of
    /// them, else the kernel's 32 KiB or the log stripe unit).
    #[arg(long)]
    pub logbsize: Option<u32>,
}

fn open(a: &Args) -> CliResult<Arc<Filesystem>> {
    let mo = MountOptions {
        inject_latency: Some(Duration::from_micros(a.latency_us)),
        logbsize: a.logbsize,
        ..MountOptions::default()
    };
    Filesystem::open_path(&a.image, None, mo).map_err(|e| CliError::fs(a.image.display(), &e))
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

pub fn run(a: Args) -> CliResult<()> {
    let threads: Vec<usize> = a
        .threads
        .split(',')
        .map(|t| t.trim().parse::<usize>().ok().filter(|&n| n > 0))
        .collect::<Option<_>>()
        .ok_or_else(|| CliError::usage(format!("bad --threads '{}'", a.threads)))?;
    match a.workload.as_str() {
        "overwrite" => overwrite(&a, &threads),
        "fsync" => fsync(&a, &threads),
        w => Err(CliError::usage(format!(
            "unknown workload '{w}' (overwrite, fsync)"
        ))),
    }
}

/// A small deterministic generator (xorshift64*).
fn next(s: &mut u64) -> u64 {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    s.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

fn overwrite(a: &Args, threads: &[usize]) -> CliResult<()> {
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
    println!(
        "| threads | overwrites/s | x 1 thread | iolock shared | iolock excl | transactions |"
    );
    println!("|---|---|---|---|---|---|");
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
        println!(
            "| {t} | {rate:.0} | {:.2} | {} | {} | {} |",
            rate / b,
            s.locks.iolock_shared - before.locks.iolock_shared,
            s.locks.iolock_excl - before.locks.iolock_excl,
            s.trans_commits - before.trans_commits,
        );
    }
    Ok(())
}

fn fsync(a: &Args, threads: &[usize]) -> CliResult<()> {
    println!(
        "| threads | fsyncs/s | log writes | fsyncs per log write | checkpoints | transactions per file | log flushes | log KiB per fsync |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (round, &t) in threads.iter().enumerate() {
        let fs = open(a)?;
        let root = fs.root_ino();
        let dirs: Vec<Ino> = (0..t)
            .map(|i| {
                let name = format!("bench-fsync-{round}-{i}");
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
        println!(
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
