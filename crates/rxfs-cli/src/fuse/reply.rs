//! Answering fuser's reply objects with a plain errno.
//!
//! The handlers compute errnos as `i32` (the library's `Error::errno()`,
//! `libc` constants); fuser wants its `Errno` newtype, which cannot hold
//! 0. [`Fail::fail`] converts, and answers EIO for a value that is not an
//! errno, so a bug can never turn into a success.

use fuser::{
    Errno, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty,
    ReplyEntry, ReplyIoctl, ReplyLseek, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr,
};

/// The errno as fuser's newtype: EIO for anything not a positive errno.
pub fn errno(e: i32) -> Errno {
    if e > 0 {
        Errno::from_i32(e)
    } else {
        Errno::EIO
    }
}

/// A reply answered with an errno.
pub trait Fail {
    fn fail(self, e: i32);
}

macro_rules! fail_impl {
    ($($t:ty),*) => {$(
        impl Fail for $t {
            fn fail(self, e: i32) {
                self.error(errno(e))
            }
        }
    )*};
}

fail_impl!(
    ReplyAttr,
    ReplyCreate,
    ReplyData,
    ReplyDirectory,
    ReplyDirectoryPlus,
    ReplyEmpty,
    ReplyEntry,
    ReplyIoctl,
    ReplyLseek,
    ReplyOpen,
    ReplyStatfs,
    ReplyWrite,
    ReplyXattr
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_errnos_become_eio() {
        assert_eq!(errno(libc::ENOENT), Errno::ENOENT);
        assert_eq!(errno(0), Errno::EIO);
        assert_eq!(errno(-5), Errno::EIO);
    }
}
