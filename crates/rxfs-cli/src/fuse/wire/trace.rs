//! A trace of every request and reply, for debugging the transport and
//! the kernel's caches: with `RXFS_FUSE_TRACE=PREFIX` in its environment,
//! a daemon appends to `PREFIX.PID` one line per request (`>`: time in
//! µs since the first, thread, unique id, opcode, node id, the names it
//! carries, quoted) and one per reply (`<`: unique id, error, and the node
//! id of an entry reply). Off (one atomic load per request) without it.
//! The file is made with the daemon's umask and holds file names: point
//! it somewhere private.

use std::io::Write;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use super::request::{Op, Request};

struct Trace {
    out: Mutex<std::io::BufWriter<std::fs::File>>,
    t0: Instant,
}

static TRACE: OnceLock<Option<Trace>> = OnceLock::new();

fn get() -> Option<&'static Trace> {
    TRACE
        .get_or_init(|| {
            let prefix = std::env::var_os("RXFS_FUSE_TRACE")?;
            let mut path = std::path::PathBuf::from(prefix);
            path.as_mut_os_string()
                .push(format!(".{}", std::process::id()));
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .ok()?;
            Some(Trace {
                out: Mutex::new(std::io::BufWriter::with_capacity(1 << 16, f)),
                t0: Instant::now(),
            })
        })
        .as_ref()
}

fn line(t: &Trace, s: std::fmt::Arguments<'_>) {
    let us = t.t0.elapsed().as_micros();
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    let mut o = t.out.lock().unwrap_or_else(|e| e.into_inner());
    let _ = writeln!(o, "{us} {tid} {s}");
    // Flushed at once: a daemon killed with SIGKILL loses nothing.
    let _ = o.flush();
}

/// A name as a quoted, escaped string (a name holding a newline cannot
/// forge a trace line).
fn name(b: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(b))
}

/// Trace request `req` (decoded as `op`).
pub fn request(req: &Request, op: &Op<'_>) {
    let Some(t) = get() else {
        return;
    };
    let what = match op {
        Op::Lookup { name: n }
        | Op::Unlink { name: n }
        | Op::Rmdir { name: n }
        | Op::Mkdir { name: n, .. }
        | Op::Mknod { name: n, .. }
        | Op::Create { name: n, .. }
        | Op::Symlink { name: n, .. } => name(n),
        Op::Rename {
            name: n,
            newdir,
            newname,
            flags,
        } => format!("{} -> {newdir}/{} flags {flags}", name(n), name(newname)),
        Op::Link { oldnodeid, newname } => format!("{oldnodeid} as {}", name(newname)),
        Op::Forget { nlookup } => format!("nlookup {nlookup}"),
        Op::Getxattr { name: n, size } => format!("{} size {size}", name(n)),
        Op::Open(a) | Op::Opendir(a) => format!("flags {:#x}", a.flags),
        Op::Write { arg, data } => format!("off {} len {}", arg.offset, data.len()),
        Op::Read(a) | Op::Readdir(a) | Op::Readdirplus(a) => {
            format!("off {} size {}", a.offset, a.size)
        }
        _ => String::new(),
    };
    let kind = op.kind();
    line(
        t,
        format_args!("> {} {kind} node {} {what}", req.unique, req.nodeid),
    );
}

/// Trace the reply to request `unique`.
pub fn reply(unique: u64, error: i32, parts: &[&[u8]]) {
    let Some(t) = get() else {
        return;
    };
    let first = parts
        .first()
        .and_then(|p| p.get(..8))
        .map(|b| u64::from_ne_bytes(b.try_into().expect("8 bytes")));
    line(t, format_args!("< {unique} error {error} first {first:?}"));
}
