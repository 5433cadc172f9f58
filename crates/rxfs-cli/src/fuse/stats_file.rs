//! The stats file of a mount: the library's counters where `rxfs stats`
//! can read them.
//!
//! One file per mount point beside its pidfile,
//! `<runtime dir>/<hash of the mount point>.stats`, plain text, one
//! `name value` pair a line:
//!
//! ```text
//! pid 4242          the daemon
//! seq 17            increases with every write of the file
//! state live        "live" while mounted, "final" once unmounted
//! time_ms 1700...   wall clock of the snapshot (ms since 1970)
//! trans_commits 12  then every counter of FsStats::lines(), in order,
//!                   then the FUSE transport's (`wire::counters`)
//! ...
//! error MESSAGE     only in a final file whose unmount failed
//! ```
//!
//! The daemon rewrites it (write to a temporary name, then rename, so a
//! reader never sees half a file) every second, at once on SIGUSR1, and a
//! last time with `state final` after the filesystem is unmounted (its
//! counters then include the unmount's log force and write-back). A new
//! mount on the same mount point overwrites it.
//!
//! `rxfs stats MNT` reads `seq`, sends SIGUSR1 to the pid in the pidfile,
//! and waits for a file with a larger `seq`: what it prints is never older
//! than the request. Two readers at once are fine: signals may merge, but
//! the write that follows them satisfies both.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rxfs::Filesystem;

use super::pidfile;

/// How often a live mount refreshes its stats file.
pub const PERIOD: Duration = Duration::from_secs(1);

pub fn path_for(mountpoint: &Path) -> PathBuf {
    pidfile::path_for(mountpoint).with_extension("stats")
}

/// One parsed stats file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Snapshot {
    pub pid: u32,
    pub seq: u64,
    /// False once the mount is gone (the last counters it had).
    pub live: bool,
    pub time_ms: u64,
    pub counters: Vec<(String, u64)>,
    /// Why the unmount failed (final files only).
    pub error: Option<String>,
}

impl Snapshot {
    pub fn render(&self) -> String {
        let mut s = format!(
            "pid {}\nseq {}\nstate {}\ntime_ms {}\n",
            self.pid,
            self.seq,
            if self.live { "live" } else { "final" },
            self.time_ms
        );
        for (k, v) in &self.counters {
            s.push_str(&format!("{k} {v}\n"));
        }
        if let Some(e) = &self.error {
            // One line, whatever the message holds.
            s.push_str(&format!("error {}\n", e.replace('\n', " ")));
        }
        s
    }

    /// Parse a stats file; None unless it has the header lines.
    pub fn parse(text: &str) -> Option<Snapshot> {
        let mut s = Snapshot::default();
        let (mut has_pid, mut has_seq, mut has_state) = (false, false, false);
        for line in text.lines() {
            let (k, v) = line.split_once(' ')?;
            match k {
                "pid" => {
                    s.pid = v.parse().ok()?;
                    has_pid = true;
                }
                "seq" => {
                    s.seq = v.parse().ok()?;
                    has_seq = true;
                }
                "state" => {
                    s.live = match v {
                        "live" => true,
                        "final" => false,
                        _ => return None,
                    };
                    has_state = true;
                }
                "time_ms" => s.time_ms = v.parse().ok()?,
                "error" => s.error = Some(v.to_string()),
                _ => s.counters.push((k.to_string(), v.parse().ok()?)),
            }
        }
        (has_pid && has_seq && has_state).then_some(s)
    }

    pub fn read(path: &Path) -> Option<Snapshot> {
        Snapshot::parse(&std::fs::read_to_string(path).ok()?)
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Write `text` to `path` atomically (temporary file, then rename).
pub fn write_atomic(path: &Path, text: &str) -> io::Result<()> {
    let tmp = path.with_extension(format!("stats.tmp{}", std::process::id()));
    let r = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        std::fs::rename(&tmp, path)
    })();
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

enum Msg {
    Now,
    Stop,
}

/// The daemon's side: a thread that keeps the stats file fresh.
pub struct StatsWriter {
    tx: Sender<Msg>,
    thread: Option<JoinHandle<()>>,
    path: PathBuf,
    seq: Arc<AtomicU64>,
}

fn snapshot(fs: &Filesystem, seq: &AtomicU64, live: bool, error: Option<String>) -> Snapshot {
    Snapshot {
        pid: std::process::id(),
        seq: seq.fetch_add(1, Ordering::SeqCst) + 1,
        live,
        time_ms: now_ms(),
        counters: fs
            .stats()
            .lines()
            .into_iter()
            .chain(super::wire::counters())
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        error,
    }
}

impl StatsWriter {
    /// Write the first snapshot and start refreshing the file.
    pub fn start(fs: Arc<Filesystem>, mountpoint: &Path) -> io::Result<StatsWriter> {
        let path = path_for(mountpoint);
        let seq = Arc::new(AtomicU64::new(0));
        write_atomic(&path, &snapshot(&fs, &seq, true, None).render())?;
        let (tx, rx) = channel();
        let (p, s) = (path.clone(), seq.clone());
        let thread = std::thread::Builder::new()
            .name("rxfs-stats".into())
            .spawn(move || loop {
                match rx.recv_timeout(PERIOD) {
                    Ok(Msg::Now) | Err(RecvTimeoutError::Timeout) => {
                        // Requests that piled up are answered by this write.
                        while let Ok(Msg::Now) = rx.try_recv() {}
                        let _ = write_atomic(&p, &snapshot(&fs, &s, true, None).render());
                    }
                    Ok(Msg::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                }
            })?;
        Ok(StatsWriter {
            tx,
            thread: Some(thread),
            path,
            seq,
        })
    }

    /// A handle that asks for a fresh file (for the signal thread).
    pub fn requester(&self) -> impl Fn() + Send + 'static {
        let tx = self.tx.clone();
        move || {
            let _ = tx.send(Msg::Now);
        }
    }

    /// Stop refreshing and write the final file (after the unmount).
    pub fn finish(mut self, fs: &Filesystem, error: Option<String>) {
        let _ = self.tx.send(Msg::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = write_atomic(&self.path, &snapshot(fs, &self.seq, false, error).render());
    }
}

impl Drop for StatsWriter {
    /// Dropped without `finish` (the mount failed): stop and remove the
    /// file, which describes no mount.
    fn drop(&mut self) {
        let _ = self.tx.send(Msg::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_parse_round_trip() {
        let s = Snapshot {
            pid: 42,
            seq: 7,
            live: true,
            time_ms: 1_700_000_000_123,
            counters: vec![("trans_commits".into(), 12), ("log_bytes".into(), 0)],
            error: None,
        };
        assert_eq!(Snapshot::parse(&s.render()), Some(s.clone()));
        let f = Snapshot {
            live: false,
            error: Some("log write failed:\nEIO".into()),
            ..s
        };
        let back = Snapshot::parse(&f.render()).unwrap();
        assert!(!back.live);
        assert_eq!(back.error.as_deref(), Some("log write failed: EIO"));
        assert_eq!(Snapshot::parse("seq 1\nstate live\n"), None);
        assert_eq!(Snapshot::parse("pid 1\nseq x\nstate live\n"), None);
        assert_eq!(Snapshot::parse("pid 1\nseq 1\nstate maybe\n"), None);
        assert_eq!(Snapshot::parse("pid 1\nseq 1\nstate live\nnovalue\n"), None);
    }

    #[test]
    fn atomic_write() {
        let dir = std::env::temp_dir().join(format!("rxfs-stats-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("x.stats");
        write_atomic(&p, "pid 1\nseq 1\nstate live\n").unwrap();
        write_atomic(&p, "pid 1\nseq 2\nstate final\n").unwrap();
        assert_eq!(Snapshot::read(&p).unwrap().seq, 2);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
