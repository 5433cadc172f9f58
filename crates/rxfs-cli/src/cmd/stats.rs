//! `rxfs stats`: the counters of a live mount (see `fuse::stats_file` for
//! the protocol: SIGUSR1 to the daemon, then a fresh stats file).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::fuse::pidfile::{daemon_alive, normalize_mountpoint, open_existing, read_pid};
use crate::fuse::stats_file::{self, Snapshot};
use crate::sys;
use crate::{CliError, CliResult};

/// Show the write path's counters of an rxfs mount.
///
/// Transactions, checkpoints and their sizes, log writes and bytes, log
/// forces, AIL pushes, grant waits: one `name value` line each (all zero
/// on a read-only mount). Asks the daemon for a fresh snapshot first, so
/// the numbers are never older than the command. After the mount has
/// ended, shows the last counters it wrote (including its unmount) and
/// says so on stderr.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The mount point.
    pub mountpoint: PathBuf,
    /// Print one JSON object: mountpoint, pid, live, time_ms, counters.
    #[arg(long)]
    pub json: bool,
    /// Seconds to wait for the daemon's answer.
    #[arg(long, default_value_t = 5)]
    pub timeout: u64,
}

pub fn run(a: Args) -> CliResult<()> {
    let mnt = normalize_mountpoint(&a.mountpoint)
        .map_err(|e| CliError::io(a.mountpoint.display(), &e))?;
    let path = stats_file::path_for(&mnt);
    let live = match open_existing(&mnt) {
        Some(f) => {
            let alive = daemon_alive(&f).map_err(|e| CliError::io("pidfile", &e))?;
            alive.then(|| read_pid(&f)).flatten()
        }
        None => None,
    };
    let snap = match live {
        Some(pid) => fresh(&path, pid, Duration::from_secs(a.timeout))
            .map_err(|m| CliError::new(format!("{}: {m}", mnt.display())))?,
        None => match Snapshot::read(&path) {
            Some(s) if !s.live => {
                eprintln!(
                    "rxfs: {} is not mounted; the final counters of its last mount (pid {}):",
                    mnt.display(),
                    s.pid
                );
                s
            }
            _ => {
                return Err(CliError::new(format!(
                    "{}: not an rxfs mount (no daemon serves it)",
                    mnt.display()
                )))
            }
        },
    };
    let out = if a.json {
        render_json(&mnt, &snap)
    } else {
        render_text(&snap)
    };
    super::write_stdout(&mut std::io::stdout().lock(), out.as_bytes())
}

/// Ask daemon `pid` for a new snapshot and wait for it.
fn fresh(path: &std::path::Path, pid: u32, timeout: Duration) -> Result<Snapshot, String> {
    let before = Snapshot::read(path).filter(|s| s.pid == pid).map(|s| s.seq);
    sys::kill(pid, libc::SIGUSR1).map_err(|e| format!("signalling daemon {pid}: {e}"))?;
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(s) = Snapshot::read(path) {
            if s.pid == pid && Some(s.seq) > before {
                return Ok(s);
            }
        }
        if Instant::now() > deadline {
            return Err(format!(
                "daemon {pid} did not write its stats file {} within {} s",
                path.display(),
                timeout.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub fn render_text(s: &Snapshot) -> String {
    let mut o = String::new();
    for (k, v) in &s.counters {
        o.push_str(&format!("{k} {v}\n"));
    }
    o
}

pub fn render_json(mnt: &std::path::Path, s: &Snapshot) -> String {
    let mut counters = serde_json::Map::new();
    for (k, v) in &s.counters {
        counters.insert(k.clone(), serde_json::Value::from(*v));
    }
    let mut o = serde_json::Map::new();
    o.insert(
        "mountpoint".into(),
        serde_json::Value::from(mnt.display().to_string()),
    );
    o.insert("pid".into(), serde_json::Value::from(s.pid));
    o.insert("live".into(), serde_json::Value::from(s.live));
    o.insert("time_ms".into(), serde_json::Value::from(s.time_ms));
    if let Some(e) = &s.error {
        o.insert("unmount_error".into(), serde_json::Value::from(e.clone()));
    }
    o.insert("counters".into(), serde_json::Value::Object(counters));
    let mut text = serde_json::Value::Object(o).to_string();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders() {
        let s = Snapshot {
            pid: 9,
            seq: 3,
            live: true,
            time_ms: 5,
            counters: vec![("trans_commits".into(), 4), ("checkpoints".into(), 1)],
            error: None,
        };
        assert_eq!(render_text(&s), "trans_commits 4\ncheckpoints 1\n");
        let v: serde_json::Value =
            serde_json::from_str(&render_json(std::path::Path::new("/m"), &s)).unwrap();
        assert_eq!(v["counters"]["trans_commits"], 4);
        assert_eq!(v["live"], true);
        assert_eq!(v["mountpoint"], "/m");
    }
}
