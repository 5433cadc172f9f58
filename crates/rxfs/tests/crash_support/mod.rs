//! Crash-consistency harness for the write path: a seeded workload over
//! the library API (data, attribute, xattr and namespace ops, fsyncs of
//! files and directories) runs on a [`CrashDevice`] while a model records
//! what every fsync/sync made durable ([`model`]); then, for sampled crash
//! points in every crash mode, the crash image is opened read-write by
//! rxfs (log recovery), walked (names, inode numbers and link counts,
//! contents, user xattrs), unmounted, and must satisfy the model,
//! reopen clean, and pass `xfs_repair -n`; a sample of the images is also
//! recovered by the kernel (loop mount), which must show the same tree
//! and leave a clean filesystem.

#![allow(dead_code)]

pub mod check;
pub mod model;
pub mod posix;
pub mod rwapi;
pub mod target;
pub mod walk;
pub mod workload;
pub mod workload_data;
pub mod workload_mix;
pub mod workload_ns;

use std::path::Path;
use std::sync::Arc;

use rxfs::bdev::{
    for_each_crash_image, sample_points, BlockDevice, CrashDevice, CrashImage, CrashMode, Event,
};
use rxfs::{Filesystem, MountOptions};

use crate::common::{mkfs_with, Scratch, FSTESTS_ENV};
use check::{check_live, check_tree, Checked};
use model::History;
use rwapi::ro;
use walk::{kernel_tree, repair_n, rxfs_tree, tree_diff, Mounted};
use workload::{Params, Stop, Workload};

pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// A fresh filesystem image: 64 MiB, 2 AGs (mkfs picks the minimum log,
/// 1368 blocks), or `opts` added.
pub fn fresh_image(scr: &Scratch, opts: &[&str]) -> Vec<u8> {
    let img = scr.path("base.img");
    let mut o = vec!["-d", "agcount=2"];
    o.extend_from_slice(opts);
    mkfs_with(&img, 64 << 20, &o, FSTESTS_ENV);
    let b = std::fs::read(&img).unwrap();
    std::fs::remove_file(&img).unwrap();
    b
}

/// Totals over a run.
#[derive(Debug, Default)]
pub struct Totals {
    pub seeds: usize,
    pub ops: usize,
    pub events: usize,
    pub points: usize,
    pub images: usize,
    pub kernel_images: usize,
    pub exact: usize,
    pub windowed: usize,
    pub failures: Vec<String>,
    pub stops: Vec<String>,
    /// Log counters of the workloads (summed): bytes, checkpoints, commits.
    pub log_bytes: u64,
    /// Writes that reached the log end, with crash points around them.
    pub log_end_writes: usize,
    /// Log bytes written before the recorded workloads (prefill).
    pub prefill_bytes: u64,
    pub checkpoints: u64,
    pub commits: u64,
    /// The largest log size among the images, in bytes.
    pub log_size: u64,
    /// Ops run, by kind ([`op_kind`]).
    pub kinds: std::collections::BTreeMap<String, usize>,
}

/// The kind of an op, from its description: its first word, with
/// directory fsyncs, atomic-save renames, exchanges, fallocate modes and
/// requests that must fail told apart.
pub fn op_kind(desc: &str) -> String {
    let w: Vec<&str> = desc.split_whitespace().collect();
    let first = w.first().copied().unwrap_or("");
    // Requests that must fail end in "(..., ERRNO)".
    let errno = desc
        .rsplit_once('(')
        .and_then(|(_, r)| r.strip_suffix(')'))
        .and_then(|r| r.split([' ', ':']).next_back())
        .is_some_and(|e| {
            e.len() > 2 && e.starts_with('E') && e.chars().all(|c| c.is_ascii_uppercase())
        });
    if errno {
        return "must fail".into();
    }
    match first {
        "fsync" | "fdatasync" if w.get(1) == Some(&"dir") => format!("{first} dir"),
        "rename" if desc.ends_with("(atomic save)") => "rename (atomic save)".into(),
        "rename" => {
            let dir = if w.get(2) == Some(&"dir") { " dir" } else { "" };
            let over = if desc.contains("-> existing ") {
                " over"
            } else {
                ""
            };
            format!("rename {}{dir}{over}", w.get(1).unwrap_or(&""))
        }
        "setxattr" => format!("{first} {}", w.get(1).unwrap_or(&"")),
        "fallocate" if w.get(2) == Some(&"keep-size") => format!("{first} {} keep-size", w[1]),
        "fallocate" => format!("{first} {}", w.get(1).unwrap_or(&"")),
        "setattr" => format!(
            "setattr {}",
            w.get(2).unwrap_or(&"").split('(').next().unwrap_or("")
        ),
        _ => first.into(),
    }
}

impl Totals {
    /// The op counts by kind, one line.
    pub fn kinds_report(&self) -> String {
        let v: Vec<String> = self.kinds.iter().map(|(k, n)| format!("{k} {n}")).collect();
        v.join(", ")
    }

    pub fn report(&self, name: &str) -> String {
        format!(
            "{name}: {} seeds, {} ops, {} events; {} crash points x {} modes \
             + {} more torn images at the log end = {} images \
             ({} also recovered by the kernel); files checked exactly {} / sector-wise {}; \
             failures {}; workloads stopped early {}; log: {} commits, {} checkpoints, {} bytes \
             (+{} prefill; log size {}; {} writes at the log end)",
            self.seeds,
            self.ops,
            self.events,
            self.points,
            CrashMode::EVERY.len(),
            self.images - self.points * CrashMode::EVERY.len(),
            self.images,
            self.kernel_images,
            self.exact,
            self.windowed,
            self.failures.len(),
            self.stops.len(),
            self.commits,
            self.checkpoints,
            self.log_bytes,
            self.prefill_bytes,
            self.log_size,
            self.log_end_writes
        )
    }
}

/// How one seed is run.
#[derive(Debug, Clone)]
pub struct SeedRun {
    pub params: Params,
    pub opts: MountOptions,
    /// Crash points per seed (half at the end of durability ops).
    pub points: usize,
    /// Every n-th image is also recovered by the kernel (0: never).
    pub kernel_every: usize,
    /// Before the recorded workload, push this fraction of the log's size
    /// through the log (creates and unlinks that leave nothing behind), so
    /// the workload's records wrap the log end.
    pub prefill_log: Option<f64>,
    /// Harness self-test: the filesystem's flushes never reach the crash
    /// device (a cache that lies), so durability promises must break.
    pub lying_flush: bool,
}

/// A device whose flush does nothing (see [`SeedRun::lying_flush`]).
struct LyingFlush(Arc<CrashDevice>);

impl BlockDevice for LyingFlush {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> rxfs::Result<()> {
        self.0.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> rxfs::Result<()> {
        self.0.write_at(buf, offset)
    }
    fn flush(&self) -> rxfs::Result<()> {
        Ok(())
    }
    fn size(&self) -> u64 {
        self.0.size()
    }
    fn read_only(&self) -> bool {
        false
    }
}

/// Push `fraction` of the log size through the log with namespace churn
/// that leaves the tree as it was: a fresh directory per round (100
/// creates, sync, 100 unlinks, rmdir, sync).
fn prefill(fs: &Filesystem, fraction: f64) -> rxfs::Result<()> {
    use rxfs::fs::ops_ns::CreateArgs;
    let size = fs.sb().logblocks as u64 * fs.geo().blocksize as u64;
    let want = (size as f64 * fraction) as u64;
    let args = |mode| CreateArgs {
        mode,
        uid: 0,
        gid: 0,
        rdev: 0,
        umask: 0,
    };
    let root = fs.root_ino();
    let mut round = 0;
    while fs.stats().log.bytes < want {
        let name = format!("prefill{round}");
        let d = fs.mkdir(root, name.as_bytes(), &args(0o040755))?.ino;
        for i in 0..100 {
            fs.create(d, format!("f{i}").as_bytes(), &args(0o100644))?;
        }
        fs.sync()?;
        for i in 0..100 {
            fs.unlink(d, format!("f{i}").as_bytes())?;
        }
        fs.rmdir(root, name.as_bytes())?;
        fs.sync()?;
        round += 1;
        if round > 10_000 {
            return Err(rxfs::Error::Invalid(
                "prefill: the log does not fill".into(),
            ));
        }
    }
    Ok(())
}

/// The crash points to try: shortly after a sample of durability ops
/// returned (their promise is newest there; the point falls somewhere in
/// the unflushed window that follows, so the torn modes have writes to
/// tear), points anywhere, and the very end.
fn choose_points(
    dev: &CrashDevice,
    h: &History,
    n: usize,
    seed: u64,
    log_end: Option<u64>,
) -> (Vec<usize>, Vec<usize>) {
    let all = dev.crash_points();
    let events = dev.events();
    let flushes: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e, Event::Flush))
        .map(|(i, _)| i)
        .collect();
    let mut rng = workload::Rng::new(seed ^ 0xd0_7a61);
    let dpts: Vec<usize> = h
        .durable
        .iter()
        .map(|d| {
            // Up to the next flush (a crash at a flush's index precedes it).
            let next = flushes
                .iter()
                .copied()
                .find(|&f| f >= d.ev_end)
                .unwrap_or(events.len());
            d.ev_end + rng.below((next - d.ev_end) as u64 + 1) as usize
        })
        .collect();
    let mut pts = sample_points(&dpts, n / 2, seed);
    pts.extend(sample_points(&all, n - pts.len(), seed ^ 0x5eed));
    pts.push(dev.event_count());
    // Around the log end: the write that reaches it, and the one after
    // it (a record or checkpoint continuing at the log's start).
    let mut wraps = Vec::new();
    if let Some(end) = log_end {
        for (i, e) in events.iter().enumerate() {
            if let Event::Write { offset, data } = e {
                if offset + data.len() as u64 == end && wraps.len() < 9 {
                    wraps.extend([i, i + 1, (i + 2).min(events.len())]);
                }
            }
        }
    }
    pts.extend(&wraps);
    pts.sort_unstable();
    pts.dedup();
    wraps.sort_unstable();
    wraps.dedup();
    (pts, wraps)
}

/// Run the workload of `seed` on `base` and check crash images.
pub fn run_seed(scr: &Scratch, base: &[u8], seed: u64, run: &SeedRun, tot: &mut Totals) {
    tot.seeds += 1;
    let dev = Arc::new(CrashDevice::new(base.to_vec(), 1 << 30));
    let fs_dev: Arc<dyn BlockDevice> = if run.lying_flush {
        Arc::new(LyingFlush(dev.clone()))
    } else {
        dev.clone()
    };
    let fs = match Filesystem::open(fs_dev, None, run.opts.clone()) {
        Ok(fs) => fs,
        Err(e) => {
            tot.stops.push(format!("seed {seed}: rw open: {e}"));
            return;
        }
    };
    if let Some(f) = run.prefill_log {
        if let Err(e) = prefill(&fs, f) {
            tot.stops.push(format!("seed {seed}: prefill: {e}"));
            fs.abandon();
            return;
        }
        // The prefill is durable: crash points start after it.
        dev.rebase();
    }
    let log_before = fs.stats().log.bytes;
    let log_end = fs
        .log_state()
        .map(|l| (l.start.0 + l.size_bbs as u64) * 512);
    let target = target::LibTarget::new(fs.clone(), dev.clone());
    let mut w = Workload::new(Box::new(target), seed, run.params);
    let mut stop = w.run().err();
    if !matches!(stop, Some(Stop::Unexpected(_))) {
        let (ns, states) = w.current();
        let live = rxfs_tree(&fs).and_then(|t| check_live(&ns, &states, &t));
        if let Err(e) = live {
            tot.failures.push(format!(
                "seed {seed}: live tree differs from the model:\n{e}"
            ));
        }
    }
    let st = fs.stats();
    tot.log_bytes += st.log.bytes - log_before;
    tot.prefill_bytes += log_before;
    tot.checkpoints += st.checkpoints;
    tot.commits += st.trans_commits;
    tot.log_size = tot
        .log_size
        .max(fs.sb().logblocks as u64 * fs.geo().blocksize as u64);
    if stop.is_none() {
        stop = w.unmount().err();
    }
    if let Some(s) = &stop {
        tot.stops.push(format!(
            "seed {seed} after {} ops: {s:?}",
            w.h.ops.len() - 1
        ));
    }
    for u in &w.unsupported {
        tot.stops
            .push(format!("seed {seed}: the library refused {u}"));
    }
    let h = std::mem::take(&mut w.h);
    drop(w);
    if stop.is_some() {
        fs.abandon();
    }
    drop(fs);
    tot.ops += h.ops.len() - 1;
    for o in &h.ops[1..] {
        *tot.kinds.entry(op_kind(&o.desc)).or_default() += 1;
    }
    tot.events += dev.event_count();
    let (pts, wraps) = choose_points(&dev, &h, run.points, seed, log_end);
    tot.log_end_writes += wraps.len() / 3;
    tot.points += pts.len();
    let mut n = 0usize;
    let mut visit = |img: &CrashImage| {
        n += 1;
        let kernel = run.kernel_every > 0 && n % run.kernel_every == 1 % run.kernel_every;
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            check_image(scr, img, &h, kernel)
        }));
        tot.images += 1;
        tot.kernel_images += kernel as usize;
        let r = r.unwrap_or_else(|p| {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(format!("panic: {msg}"))
        });
        match r {
            Ok(c) => {
                tot.exact += c.exact;
                tot.windowed += c.windowed;
            }
            Err(e) => {
                let b = h.bounds(img.point);
                let last = &h.ops[b.upper];
                let msg = format!(
                    "seed {seed} {img}: ops possibly seen up to #{} ({}), durable up to ns #{} / all #{}:\n{e}",
                    b.upper, last.desc, b.ns_lo, b.all_lo
                );
                eprintln!("FAIL {msg}");
                keep_failed(scr, &dev, img, tot.failures.len());
                tot.failures.push(msg);
            }
        }
    };
    // Every mode at every point; then, around the log end, more ways of
    // tearing the window (other seeds).
    let mut passes = vec![(pts, CrashMode::EVERY.to_vec(), seed)];
    for k in 1..=3u64 {
        let modes = vec![CrashMode::Subset, CrashMode::Torn];
        passes.push((
            wraps.clone(),
            modes,
            seed ^ k.wrapping_mul(0x9e37_79b9_7f4a_7c15),
        ));
    }
    let mut errs = Vec::new();
    for (pts, modes, s) in passes {
        if let Err(e) = for_each_crash_image(&dev, &pts, &modes, s, &mut visit) {
            errs.push(format!("seed {seed}: crash images: {e}"));
        }
    }
    tot.failures.extend(errs);
}

/// With RXFS_KEEP_SCRATCH set, keep the first failing crash images
/// (before recovery) for a post-mortem.
fn keep_failed(scr: &Scratch, dev: &CrashDevice, img: &CrashImage, nth: usize) {
    if std::env::var_os("RXFS_KEEP_SCRATCH").is_none() || nth >= 3 {
        return;
    }
    if let Ok(b) = dev.crash_image(img.point, img.mode, img.seed) {
        let dir = Path::new("/tmp/rxfs-crash-failed");
        let _ = std::fs::create_dir_all(dir);
        let f = dir.join(format!(
            "{}-p{}-{:?}-{:x}.img",
            scr.0.file_name().unwrap().to_string_lossy(),
            img.point,
            img.mode,
            img.seed
        ));
        if std::fs::write(&f, b).is_ok() {
            eprintln!("kept {}", f.display());
        }
    }
}

/// Recover one crash image with rxfs (and maybe the kernel) and check it.
fn check_image(
    scr: &Scratch,
    img: &CrashImage,
    h: &History,
    kernel: bool,
) -> Result<Checked, String> {
    let mut errs = Vec::new();
    // The kernel first: rxfs's recovery writes into the image's device.
    let mut ktree = None;
    if kernel {
        let f = scr.path("kernel.img");
        img.device().write_image(&f).map_err(|e| e.to_string())?;
        match Mounted::new(&f, &scr.path("kmnt"), "") {
            Err(e) => errs.push(e),
            Ok(m) => {
                let t = kernel_tree(&m.dir);
                if let Err(e) = m.umount() {
                    errs.push(e);
                }
                match t {
                    Err(e) => errs.push(format!("kernel walk: {e}")),
                    Ok(t) => {
                        if let Err(e) = check_tree(h, img.point, &t) {
                            errs.push(format!("kernel recovery:\n{e}"));
                        }
                        if let Err(e) = repair_n(&f) {
                            errs.push(format!("after kernel recovery: {e}"));
                        }
                        ktree = Some(t);
                    }
                }
            }
        }
        let _ = std::fs::remove_file(&f);
    }
    let dev = img.device();
    let fs = Filesystem::open(dev.clone(), None, rwapi::rw())
        .map_err(|e| format!("rxfs rw open (recovery): {e}"))?;
    let t = rxfs_tree(&fs);
    let u = fs.unmount();
    drop(fs);
    let t = t.map_err(|e| format!("rxfs walk after recovery: {e}"))?;
    u.map_err(|e| format!("rxfs unmount after recovery: {e}"))?;
    let checked = check_tree(h, img.point, &t);
    if let Err(e) = &checked {
        errs.push(format!("rxfs recovery:\n{e}"));
    }
    if let Some(k) = &ktree {
        if let Some(d) = tree_diff(k, &t) {
            errs.push(format!(
                "kernel (first) and rxfs (second) recoveries differ:\n{d}"
            ));
        }
    }
    match Filesystem::open(dev.clone(), None, ro()) {
        Err(e) => errs.push(format!("read-only reopen after rxfs unmount: {e}")),
        Ok(fs) => {
            if let Some(s) = fs.recovery_stats() {
                errs.push(format!("log dirty after rxfs recovery and unmount: {s}"));
            }
            match rxfs_tree(&fs) {
                Err(e) => errs.push(format!("walk after reopen: {e}")),
                Ok(t2) => {
                    if let Some(d) = tree_diff(&t, &t2) {
                        errs.push(format!("tree changed across unmount/reopen:\n{d}"));
                    }
                }
            }
        }
    }
    let f = scr.path("rxfs.img");
    dev.write_image(&f).map_err(|e| e.to_string())?;
    if let Err(e) = repair_n(&f) {
        errs.push(format!("after rxfs recovery: {e}"));
    }
    let _ = std::fs::remove_file(&f);
    if errs.is_empty() {
        Ok(checked.unwrap_or_default())
    } else {
        Err(errs.join("\n"))
    }
}
