//! `rxfs bench rtalloc`: the realtime allocator with each summary mode of
//! seed 001 (`rtsumcache=none|minlevel|memory`), on a fragmented realtime
//! device.
//!
//! 1. Fragment (once per image; skipped when `bench-rt/` exists): files
//!    in an RTINHERIT directory get preallocations of random sizes
//!    (seeded) until the device is full; then, in every eighth region
//!    (bitmap block), half the files are removed and a
//!    random range is punched out of the others: thousands of free
//!    extents of mixed sizes, in islands between full bitmap blocks (a
//!    nearly full device, where seed 001 saw the summary reads pile up).
//!    Everything goes through ordinary file operations, so the image stays
//!    one `xfs_repair -n -r` accepts.
//! 2. For each mode, on the same fragmented state: OPS rounds of "create
//!    a file, preallocate a random 1-256 blocks, and past 64 live files
//!    remove a random one", then every file of the round removed, so that
//!    each mode starts from the same bitmap. The allocator is
//!    deterministic, so every mode makes the same allocations (checked: a
//!    digest of every mapping made must agree); only how it reads the
//!    summary differs. Reported per allocation: time inside the allocator
//!    (`rt_alloc_ns`), summary counters read from summary blocks, reads
//!    the min-level bound skipped, bitmap block accesses, bitmap blocks
//!    searched through the free-run index (not scanned), log forces made
//!    to wait out busy extents (their time is not allocator time: it is
//!    the device's, and it varies from run to run); and rounds/s. Every
//!    mode is measured `--rt-repeat` times, in rotated order; the median
//!    is reported.

use std::sync::Arc;
use std::time::Instant;

use rxfs::cache::rtsum::{RtAllocStats, RtSumMode};
use rxfs::cred::Cred;
use rxfs::format::xflags::XFLAG_RTINHERIT;
use rxfs::fs::ops_ns::CreateArgs;
use rxfs::types::Ino;
use rxfs::{Filesystem, MountOptions};

use super::bench::{next, Args, Out};
use crate::{CliError, CliResult};

/// `println!` into an [`Out`].
macro_rules! say {
    ($out:expr, $($fmt:tt)*) => {
        $out.line(&format!($($fmt)*))
    };
}

const DIR: &[u8] = b"bench-rt";
/// Live files in a measured round before one is removed.
const LIVE: usize = 64;

fn err(e: rxfs::Error) -> CliError {
    CliError::new(format!("bench rtalloc: {e}"))
}

fn open(a: &Args, mode: RtSumMode) -> CliResult<Arc<Filesystem>> {
    let rt = a
        .rtdev
        .as_deref()
        .ok_or_else(|| CliError::usage("bench rtalloc needs --rtdev FILE"))?;
    let mo = MountOptions {
        rtsumcache: mode,
        ..MountOptions::default()
    };
    Filesystem::open_path(&a.image, Some(rt), mo).map_err(|e| CliError::fs(a.image.display(), &e))
}

fn file_args() -> CreateArgs {
    CreateArgs::root(0o100644)
}

fn rt_dir(fs: &Filesystem, name: &[u8]) -> CliResult<Ino> {
    let root = fs.root_ino();
    let dir = fs
        .mkdir(root, name, &CreateArgs::root(0o40755))
        .map_err(err)?
        .ino;
    let mut x = fs.get_fsxattr(dir).map_err(err)?;
    x.xflags |= XFLAG_RTINHERIT;
    fs.set_fsxattr(dir, &x, true, &Cred::root()).map_err(err)?;
    Ok(dir)
}

/// Phase 1 (see the module doc).
fn fragment(a: &Args, out: &mut Out) -> CliResult<()> {
    let fs = open(a, RtSumMode::Memory)?;
    let root = fs.iget(fs.root_ino()).map_err(err)?;
    if fs.lookup(&root, DIR).is_ok() {
        say!(
            out,
            "bench rtalloc: {} already fragmented",
            a.image.display()
        );
        return fs.unmount().map_err(err);
    }
    let dir = rt_dir(&fs, DIR)?;
    let l = rxfs::rt::layout(&*fs);
    let bs = l.blocksize as u64;
    let mut seed = a.seed | 1;
    let t0 = Instant::now();
    // Fill the device.
    let mut files = Vec::new();
    loop {
        let free = fs.rw().map_or(0, |rw| rw.counters().frextents) as u64;
        if free < l.rextents / 1000 {
            break;
        }
        let name = format!("f{}", files.len());
        let ino = fs
            .create(dir, name.as_bytes(), &file_args())
            .map_err(err)?
            .ino;
        let len = (1 + next(&mut seed) % 512) * bs;
        match fs.fallocate(ino, 0, 0, len) {
            Ok(()) => files.push((name, ino, len)),
            Err(rxfs::Error::NoSpace) => break,
            Err(e) => return Err(err(e)),
        }
    }
    // Free space in one region (bitmap block) of `--rt-hot` (every
    // such one from the seed's): half its files removed, the rest
    // punched.
    let every = a.rt_hot.max(1);
    let hot = |rtb: u64| -> bool {
        let region = rtb / l.rextsize as u64 / l.bits_per_block();
        region % every == a.seed % every
    };
    let mut removed = 0;
    for (name, ino, len) in &files {
        let ip = fs.iget(*ino).map_err(err)?;
        let first = match &ip.data {
            rxfs::inode::Fork::Extents { list, .. } => list.first().map(|e| e.start),
            _ => None,
        };
        if !first.is_some_and(hot) {
            continue;
        }
        if next(&mut seed).is_multiple_of(2) {
            fs.unlink(dir, name.as_bytes()).map_err(err)?;
            removed += 1;
        } else if len / bs > 1 {
            let off = next(&mut seed) % (len / bs - 1) * bs;
            let n = (1 + next(&mut seed) % (len / bs - off / bs - 1)) * bs;
            fs.fallocate(*ino, 0x02 | 0x01, off, n).map_err(err)?;
        }
    }
    let c = rxfs::rt::check(&*fs).map_err(err)?;
    say!(
        out,
        "fragmented: {} files preallocated to fill the device, {removed} removed and others \
         punched in one region of {every}, in {:.1} s: {} free runs, {} of {} rt extents free, \
         {} bitmap blocks",
        files.len(),
        t0.elapsed().as_secs_f64(),
        c.free_runs,
        c.free_extents,
        l.rextents,
        l.rbmblocks
    );
    fs.unmount().map_err(err)
}

fn delta(a: RtAllocStats, b: RtAllocStats) -> RtAllocStats {
    RtAllocStats {
        allocs: b.allocs - a.allocs,
        frees: b.frees - a.frees,
        summary_reads: b.summary_reads - a.summary_reads,
        summary_skips: b.summary_skips - a.summary_skips,
        bitmap_reads: b.bitmap_reads - a.bitmap_reads,
        runs_indexed: b.runs_indexed - a.runs_indexed,
        memo_skips: b.memo_skips - a.memo_skips,
        invalidations: b.invalidations - a.invalidations,
        alloc_ns: b.alloc_ns - a.alloc_ns,
        busy_forces: b.busy_forces - a.busy_forces,
        force_ns: b.force_ns - a.force_ns,
    }
}

/// A sparse copy of `from` next to it, named with `tag`.
fn sparse_copy(from: &std::path::Path, tag: &str) -> CliResult<std::path::PathBuf> {
    let mut to = from.as_os_str().to_owned();
    to.push(format!(".{tag}"));
    let to = std::path::PathBuf::from(to);
    let ok = std::process::Command::new("cp")
        .arg("--sparse=always")
        .arg(from)
        .arg(&to)
        .status()
        .map_err(|e| CliError::new(format!("bench rtalloc: cp: {e}")))?
        .success();
    if !ok {
        return Err(CliError::new(format!(
            "bench rtalloc: copying {} failed",
            from.display()
        )));
    }
    Ok(to)
}

/// Phase 2 for one mode, on sparse copies of the fragmented image and
/// realtime device (each mode starts from the same bytes, the allocation
/// rotor included; the copies are removed after): (allocator work,
/// seconds, mapping digest).
fn measure(a: &Args, mode: RtSumMode) -> CliResult<(RtAllocStats, f64, u64)> {
    let tag = format!("{mode:?}").to_lowercase();
    let rt = a
        .rtdev
        .as_deref()
        .ok_or_else(|| CliError::usage("needs --rtdev"))?;
    let copy = Args {
        image: sparse_copy(&a.image, &tag)?,
        rtdev: Some(sparse_copy(rt, &tag)?),
        ..a.clone()
    };
    let r = measure_on(&copy, mode);
    let _ = std::fs::remove_file(&copy.image);
    let _ = std::fs::remove_file(copy.rtdev.as_deref().unwrap_or(rt));
    r
}

fn measure_on(a: &Args, mode: RtSumMode) -> CliResult<(RtAllocStats, f64, u64)> {
    let fs = open(a, mode)?;
    let name = format!("bench-rt-{mode:?}");
    let dir = rt_dir(&fs, name.as_bytes())?;
    let bs = fs.geo().blocksize as u64;
    let mut seed = (a.seed ^ 0x9e37_79b9_7f4a_7c15) | 1;
    let mut live: Vec<String> = Vec::new();
    let mut digest = 0xcbf2_9ce4_8422_2325u64;
    let before = fs.stats().rt;
    let t0 = Instant::now();
    for i in 0..a.files {
        let n = format!("r{i}");
        let ip = fs.create(dir, n.as_bytes(), &file_args()).map_err(err)?;
        let len = (1 + next(&mut seed) % 256) * bs;
        fs.fallocate(ip.ino, 0, 0, len).map_err(err)?;
        let got = fs.iget(ip.ino).map_err(err)?;
        if let rxfs::inode::Fork::Extents { list, .. } = &got.data {
            for e in list.iter() {
                digest = (digest ^ e.start ^ (e.len << 40)).wrapping_mul(0x100_0000_01b3);
            }
        }
        live.push(n);
        if live.len() > LIVE {
            let k = (next(&mut seed) % live.len() as u64) as usize;
            let gone = live.swap_remove(k);
            fs.unlink(dir, gone.as_bytes()).map_err(err)?;
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let work = delta(before, fs.stats().rt);
    for n in live {
        fs.unlink(dir, n.as_bytes()).map_err(err)?;
    }
    fs.rmdir(fs.root_ino(), name.as_bytes()).map_err(err)?;
    fs.unmount().map_err(err)?;
    Ok((work, secs, digest))
}

/// `rxfs bench rtalloc` (see the module doc).
pub fn rtalloc(a: &Args, out: &mut Out) -> CliResult<()> {
    fragment(a, out)?;
    let modes = a
        .rt_modes
        .split(',')
        .map(|m| match m.trim() {
            "none" => Ok(RtSumMode::None),
            "minlevel" => Ok(RtSumMode::MinLevel),
            "memory" => Ok(RtSumMode::Memory),
            other => Err(CliError::usage(format!(
                "--rt-modes: {other:?} is not none, minlevel or memory"
            ))),
        })
        .collect::<CliResult<Vec<_>>>()?;
    let passes = a.rt_repeat.max(1) as usize;
    // Per mode: (work of the first pass, µs per allocation of each pass).
    let mut got: Vec<Option<(RtAllocStats, Vec<f64>, f64)>> = vec![None; modes.len()];
    let mut digests = Vec::new();
    for pass in 0..passes {
        for k in 0..modes.len() {
            let m = (k + pass) % modes.len();
            let (w, secs, digest) = measure(a, modes[m])?;
            digests.push(digest);
            let us = w.alloc_ns as f64 / 1e3 / w.allocs.max(1) as f64;
            let e = got[m].get_or_insert_with(|| (w, Vec::new(), secs));
            e.1.push(us);
        }
    }
    say!(
        out,
        "| summary mode | allocations | µs / allocation (median of {passes}) | range | x none | \
         x none (best of each) | summary reads / alloc | reads skipped / alloc | bitmap reads / alloc | \
         blocks from run index / alloc | of those skipped / alloc | log forces | rounds/s |"
    );
    say!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut base = None;
    let mut base_best = None;
    for (mode, g) in modes.iter().zip(got) {
        let (w, mut us, secs) = g.expect("every mode measured");
        us.sort_by(f64::total_cmp);
        let med = us[us.len() / 2];
        let b = *base.get_or_insert(med);
        let bb = *base_best.get_or_insert(us[0]);
        let n = w.allocs.max(1) as f64;
        say!(
            out,
            "| {} | {} | {:.2} | {:.2}-{:.2} | {:.1}x | {:.1}x | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {:.0} |",
            format!("{mode:?}").to_lowercase(),
            w.allocs,
            med,
            us[0],
            us[us.len() - 1],
            b / med.max(1e-9),
            bb / us[0].max(1e-9),
            w.summary_reads as f64 / n,
            w.summary_skips as f64 / n,
            w.bitmap_reads as f64 / n,
            w.runs_indexed as f64 / n,
            w.memo_skips as f64 / n,
            w.busy_forces,
            a.files as f64 / secs
        );
        out.points.push(serde_json::json!({
            "mode": format!("{mode:?}").to_lowercase(),
            "allocs": w.allocs,
            "frees": w.frees,
            "us_per_alloc": med,
            "us_per_alloc_passes": us,
            "summary_reads": w.summary_reads,
            "summary_skips": w.summary_skips,
            "bitmap_reads": w.bitmap_reads,
            "runs_indexed": w.runs_indexed,
            "memo_skips": w.memo_skips,
            "busy_forces": w.busy_forces,
            "force_ns": w.force_ns,
            "rounds": a.files,
            "secs": secs,
        }));
    }
    if digests.windows(2).any(|d| d[0] != d[1]) {
        return Err(CliError::new(
            "bench rtalloc: the modes allocated differently (a bug: the search must not depend on \
             the summary mode)",
        ));
    }
    Ok(())
}
