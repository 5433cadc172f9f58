//! A load generator for `scripts/bench`: metadata workloads through system
//! calls, on any mounted filesystem, with std threads (Python threads are
//! too slow to be the generator). A measuring tool, not a product.
//!
//! Usage:
//!   loadgen fsmark DIR --threads T --files N
//!       seed 003's fs_mark shape (`fs_mark -S0 -s 0`): each of T threads
//!       makes its own directory DIR/tI (before the clock starts), then
//!       creates N empty files in it, each `open(O_CREAT|O_EXCL|O_WRONLY)`
//!       then `close`; no fsync.
//!   loadgen dirscale DIR --files N [--windows 1000,2000,...]
//!       one thread creates N empty files (as fsmark does) in ONE directory
//!       DIR/d; the create rate is reported per window: between the
//!       previous window's entry count and this one's.
//!   loadgen fsync DIR --threads T --files N
//!       each of T threads, in its own directory DIR/tI, creates a file,
//!       writes 4 KiB, fsyncs and closes it, N times (seed 002's shape).
//!
//! Prints one JSON line on stdout: the workload, its parameters, `ops`
//! (files made), `seconds` (from the first thread's start, after all are
//! released together, to the last one's finish), `ops_per_s`, and for dirscale
//! `windows` (`entries`, `seconds`, `ops_per_s` each). Exits 1 with the
//! failing call and its error on stderr if any system call fails.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::Instant;

fn usage() -> ! {
    eprintln!(
        "usage: loadgen fsmark DIR --threads T --files N\n\
         \x20      loadgen dirscale DIR --files N [--windows 1000,2000,...]\n\
         \x20      loadgen fsync DIR --threads T --files N"
    );
    std::process::exit(2)
}

struct Opts {
    workload: String,
    dir: PathBuf,
    threads: usize,
    files: u64,
    windows: Vec<u64>,
}

fn parse_num(s: Option<String>) -> u64 {
    s.and_then(|s| s.replace('_', "").parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| usage())
}

fn parse() -> Opts {
    let mut args = std::env::args().skip(1);
    let workload = args.next().unwrap_or_else(|| usage());
    let dir = PathBuf::from(args.next().unwrap_or_else(|| usage()));
    let mut o = Opts {
        workload,
        dir,
        threads: 1,
        files: 1000,
        windows: Vec::new(),
    };
    while let Some(a) = args.next() {
        match a.as_str() {
            "--threads" => o.threads = parse_num(args.next()) as usize,
            "--files" => o.files = parse_num(args.next()),
            "--windows" => {
                o.windows = args
                    .next()
                    .unwrap_or_else(|| usage())
                    .split(',')
                    .map(|w| parse_num(Some(w.trim().to_string())))
                    .collect()
            }
            _ => usage(),
        }
    }
    o
}

fn cpath(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).expect("no NUL in paths we build")
}

fn fail(what: &str, p: &Path, e: io::Error) -> ! {
    eprintln!("loadgen: {what} {}: {e}", p.display());
    std::process::exit(1)
}

/// `open(O_CREAT|O_EXCL|O_WRONLY, 0644)`: the new file's descriptor.
fn create(p: &Path) -> libc::c_int {
    let c = cpath(p);
    // SAFETY: `c` is a valid NUL-terminated path.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC,
            0o644 as libc::c_uint,
        )
    };
    if fd < 0 {
        fail("open", p, io::Error::last_os_error());
    }
    fd
}

fn close(fd: libc::c_int, p: &Path) {
    // SAFETY: `fd` is a descriptor we opened and close once.
    if unsafe { libc::close(fd) } != 0 {
        fail("close", p, io::Error::last_os_error());
    }
}

fn mkdir(p: &Path) {
    if let Err(e) = std::fs::create_dir(p) {
        fail("mkdir", p, e);
    }
}

/// What one thread does to its directory `d`: `files` files.
fn per_thread(workload: &str, d: &Path, files: u64) {
    let buf = [0x5au8; 4096];
    for f in 0..files {
        let p = d.join(format!("f{f}"));
        let fd = create(&p);
        if workload == "fsync" {
            // SAFETY: `buf` is valid for its length; `fd` is open.
            let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
            if n != buf.len() as isize {
                fail("write", &p, io::Error::last_os_error());
            }
            // SAFETY: `fd` is open.
            if unsafe { libc::fsync(fd) } != 0 {
                fail("fsync", &p, io::Error::last_os_error());
            }
        }
        close(fd, &p);
    }
}

/// T threads, each its own directory, released together by a barrier.
fn threaded(o: &Opts) -> f64 {
    let dirs: Vec<PathBuf> = (0..o.threads)
        .map(|i| o.dir.join(format!("t{i}")))
        .collect();
    for d in &dirs {
        mkdir(d);
    }
    // Each thread notes when it started and finished: the time is from the
    // first start to the last finish (the main thread may be scheduled
    // after a short run has finished, so it cannot hold the clock).
    let start = Arc::new(Barrier::new(o.threads));
    let hs: Vec<_> = dirs
        .into_iter()
        .map(|d| {
            let (start, w, files) = (start.clone(), o.workload.clone(), o.files);
            std::thread::spawn(move || {
                start.wait();
                let t0 = Instant::now();
                per_thread(&w, &d, files);
                (t0, Instant::now())
            })
        })
        .collect();
    let mut spans = Vec::new();
    for h in hs {
        match h.join() {
            Ok(s) => spans.push(s),
            Err(_) => {
                eprintln!("loadgen: a thread panicked");
                std::process::exit(1);
            }
        }
    }
    let first = spans
        .iter()
        .map(|s| s.0)
        .min()
        .expect("at least one thread");
    let last = spans
        .iter()
        .map(|s| s.1)
        .max()
        .expect("at least one thread");
    last.duration_since(first).as_secs_f64()
}

/// One thread, one directory; (entries, seconds since the start) at
/// every window edge.
fn dirscale(o: &Opts) -> (f64, Vec<(u64, f64)>) {
    let d = o.dir.join("d");
    mkdir(&d);
    let mut edges: Vec<u64> = o.windows.iter().copied().filter(|&w| w < o.files).collect();
    edges.push(o.files);
    edges.sort_unstable();
    edges.dedup();
    let mut marks = Vec::new();
    let mut next = 0;
    let t0 = Instant::now();
    for f in 0..o.files {
        let p = d.join(format!("f{f}"));
        close(create(&p), &p);
        if f + 1 == edges[next] {
            marks.push((f + 1, t0.elapsed().as_secs_f64()));
            next += 1;
        }
    }
    (t0.elapsed().as_secs_f64(), marks)
}

fn rate(n: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}

fn main() {
    let o = parse();
    if !o.dir.is_dir() {
        fail(
            "not a directory:",
            &o.dir,
            io::Error::from(io::ErrorKind::NotFound),
        );
    }
    let out = match o.workload.as_str() {
        "fsmark" | "fsync" => {
            let secs = threaded(&o);
            let ops = o.threads as u64 * o.files;
            serde_json::json!({
                "workload": o.workload,
                "threads": o.threads,
                "files_per_thread": o.files,
                "ops": ops,
                "seconds": secs,
                "ops_per_s": rate(ops, secs),
            })
        }
        "dirscale" => {
            let (secs, marks) = dirscale(&o);
            let mut prev = (0u64, 0f64);
            let windows: Vec<_> = marks
                .iter()
                .map(|&(n, t)| {
                    let w = serde_json::json!({
                        "entries": n,
                        "seconds": t - prev.1,
                        "ops_per_s": rate(n - prev.0, t - prev.1),
                    });
                    prev = (n, t);
                    w
                })
                .collect();
            serde_json::json!({
                "workload": "dirscale",
                "threads": 1,
                "ops": o.files,
                "seconds": secs,
                "ops_per_s": rate(o.files, secs),
                "windows": windows,
            })
        }
        _ => usage(),
    };
    println!("{out}");
}
