//! The CLI's error: a message for stderr and an exit code.
//!
//! Exit codes: 1 for every failure (bad image, missing path, corruption,
//! I/O); 2 for usage errors (clap's convention, also used for bad `-o`
//! options); 32 for mount failures (mount(8)'s "mount failure" code, so the
//! mount helper reports like other helpers).

use std::fmt::Display;

pub const EXIT_FAILURE: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
pub const EXIT_MOUNT_FAILURE: i32 = 32;

#[derive(Debug)]
pub struct CliError {
    pub code: i32,
    pub msg: String,
}

pub type CliResult<T> = Result<T, CliError>;

impl CliError {
    pub fn new(msg: impl Into<String>) -> Self {
        CliError {
            code: EXIT_FAILURE,
            msg: msg.into(),
        }
    }

    pub fn usage(msg: impl Into<String>) -> Self {
        CliError {
            code: EXIT_USAGE,
            msg: msg.into(),
        }
    }

    /// A library error about `what` (a path, an image name). The plain
    /// POSIX errors read as the C library words them (`No such file or
    /// directory`), as in the OS errors of [`CliError::io`], so that a
    /// missing path reads the same whether the host or the image lacks it;
    /// a device that cannot be opened says only why.
    pub fn fs(what: impl Display, e: &rxfs::Error) -> Self {
        use rxfs::Error as E;
        let plain = matches!(
            e,
            E::NotFound
                | E::NotDir
                | E::IsDir
                | E::NameTooLong
                | E::Access
                | E::NoSpace
                | E::Exists
                | E::NotEmpty
                | E::TooManyLinks
                | E::Perm
        );
        if plain {
            return CliError::io(what, &std::io::Error::from_raw_os_error(e.errno()));
        }
        if let E::Io {
            op: "open", source, ..
        } = e
        {
            return CliError::io(what, source);
        }
        CliError::new(format!("{what}: {e}"))
    }

    /// An OS error about `what`.
    pub fn io(what: impl Display, e: &std::io::Error) -> Self {
        CliError::new(format!("{what}: {}", io_message(e)))
    }

    pub fn with_code(mut self, code: i32) -> Self {
        self.code = code;
        self
    }
}

/// An io::Error's text without std's " (os error N)" suffix.
pub fn io_message(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.rfind(" (os error ") {
        Some(i) if s.ends_with(')') => s[..i].to_string(),
        _ => s,
    }
}
