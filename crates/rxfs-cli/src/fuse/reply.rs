//! Answering a reply with a plain errno.
//!
//! The handlers compute errnos as `i32` (the library's `Error::errno()`,
//! `libc` constants). [`Fail::fail`] answers EIO for a value that is not
//! a positive errno, so a bug can never turn into a success.

use super::wire::{
    ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry,
    ReplyIoctl, ReplyLseek, ReplyOpen, ReplyStatfs, ReplyStatx, ReplyWrite, ReplyXattr,
};

/// The errno to send: EIO for anything not a positive errno.
pub fn errno(e: i32) -> i32 {
    if e > 0 {
        e
    } else {
        libc::EIO
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
    ReplyStatx,
    ReplyWrite,
    ReplyXattr
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_errnos_become_eio() {
        assert_eq!(errno(libc::ENOENT), libc::ENOENT);
        assert_eq!(errno(0), libc::EIO);
        assert_eq!(errno(-5), libc::EIO);
    }
}
