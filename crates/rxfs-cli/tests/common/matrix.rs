//! The mount options that change the data path, as one matrix (issue 38):
//! the write-back cache on and off, requests over `/dev/fuse` or FUSE over
//! io_uring, one event loop or the default number. Every durability test
//! of the mount runs on every cell; [`Cell::DEFAULTS`] is what a user gets
//! with no options and runs longest.
//!
//! FUSE over io_uring needs the fuse module's `enable_uring` parameter:
//! [`UringParam`] turns it on for a test and restores it. The defaults
//! cell leaves `fuse_uring` to the mount (auto), so it too holds the
//! parameter's lock, at the machine's own setting.

#![allow(dead_code)]

use std::sync::{Mutex, MutexGuard};

pub const URING_PARAM: &str = "/sys/module/fuse/parameters/enable_uring";

/// The tests of one binary change one kernel parameter: one at a time.
static PARAM_LOCK: Mutex<()> = Mutex::new(());

/// `enable_uring` held at a setting until dropped, then restored.
pub struct UringParam {
    old: Option<String>,
    _lock: MutexGuard<'static, ()>,
}

impl UringParam {
    /// Set it on or off.
    pub fn set(on: bool) -> UringParam {
        let lock = PARAM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let old = std::fs::read_to_string(URING_PARAM).unwrap_or_else(|e| {
            panic!("{URING_PARAM}: {e} (this kernel has no FUSE over io_uring)")
        });
        std::fs::write(URING_PARAM, if on { "Y" } else { "N" }).unwrap();
        UringParam {
            old: Some(old.trim().to_string()),
            _lock: lock,
        }
    }

    /// Keep it as the machine has it (for a mount that leaves the
    /// transport to the kernel's offer).
    pub fn hold() -> UringParam {
        let lock = PARAM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        UringParam {
            old: None,
            _lock: lock,
        }
    }
}

impl Drop for UringParam {
    fn drop(&mut self) {
        if let Some(old) = &self.old {
            let _ = std::fs::write(URING_PARAM, old);
        }
    }
}

/// One combination of the options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell {
    /// `writeback_cache=on`.
    pub cache: bool,
    /// Some(true): `fuse_uring=on`; Some(false): `fuse_uring=off`; None:
    /// the mount's default (auto).
    pub uring: Option<bool>,
    /// `threads=1`.
    pub one_thread: bool,
}

impl Cell {
    /// No options at all.
    pub const DEFAULTS: Cell = Cell {
        cache: false,
        uring: None,
        one_thread: false,
    };

    /// The `-o` options of the cell (after `rw`).
    pub fn opts(&self) -> String {
        let mut o = String::from("rw");
        if self.cache {
            o += ",writeback_cache=on";
        }
        match self.uring {
            Some(true) => o += ",fuse_uring=on",
            Some(false) => o += ",fuse_uring=off",
            None => {}
        }
        if self.one_thread {
            o += ",threads=1";
        }
        o
    }

    /// The kernel parameter this cell needs, held while it runs.
    pub fn param(&self) -> UringParam {
        match self.uring {
            Some(true) => UringParam::set(true),
            _ => UringParam::hold(),
        }
    }
}
