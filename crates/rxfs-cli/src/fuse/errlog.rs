//! Where the mount daemon reports the errors the kernel's XFS would log
//! (corruption, I/O errors): standard error while it has one (a `-f`
//! foreground mount), and once it has detached, the system log (syslog's
//! `/dev/log` when there is one, else the kernel log `/dev/kmsg`, where
//! XFS's own messages are, when it may write there). Each failure (the
//! error's own text, which names the damaged object) is reported once per
//! mount, so that `ls -l` of a directory with a corrupt entry gives one
//! line, not one per lookup.

use std::collections::HashSet;
use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};

use parking_lot::Mutex;

const STDERR: u8 = 0;
const SYSLOG: u8 = 1;
const KMSG: u8 = 2;
const NOWHERE: u8 = 3;

static SINK: AtomicU8 = AtomicU8::new(STDERR);

/// At most this many failures are remembered as reported; past it, every
/// failure is reported again (memory stays bounded on a wrecked image).
const REMEMBERED: usize = 4096;

/// The daemon lost its standard error: report to the system log from now on.
pub fn detached() {
    let sink = if std::path::Path::new("/dev/log").exists() {
        // SAFETY: a static NUL-terminated identity; LOG_PID adds the pid.
        unsafe { libc::openlog(c"rxfs".as_ptr(), libc::LOG_PID, libc::LOG_DAEMON) };
        SYSLOG
    } else if std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/kmsg")
        .is_ok()
    {
        KMSG
    } else {
        NOWHERE
    };
    SINK.store(sink, Ordering::Relaxed);
}

fn emit(line: &str) {
    match SINK.load(Ordering::Relaxed) {
        STDERR => errln!("rxfs: {line}"),
        SYSLOG => {
            if let Ok(c) = std::ffi::CString::new(line.replace('\0', "")) {
                // SAFETY: a "%s" format with one valid C string.
                unsafe { libc::syslog(libc::LOG_ERR, c"%s".as_ptr(), c.as_ptr()) };
            }
        }
        KMSG => {
            if let Ok(mut f) = std::fs::OpenOptions::new().write(true).open("/dev/kmsg") {
                // "<3>": KERN_ERR, as XFS's corruption reports; one
                // write(2) per record.
                let rec = format!("<3>rxfs[{}]: {line}\n", std::process::id());
                let _ = f.write_all(rec.as_bytes());
            }
        }
        _ => {}
    }
}

/// The failures already reported, for [`Reported::report`].
#[derive(Default)]
pub struct Reported(Mutex<HashSet<String>>);

impl Reported {
    /// Report `line` about failure `error` unless it was reported before.
    pub fn report(&self, error: &str, line: &str) {
        {
            let mut seen = self.0.lock();
            if seen.contains(error) {
                return;
            }
            if seen.len() < REMEMBERED {
                seen.insert(error.to_string());
            }
        }
        emit(line);
    }
}
