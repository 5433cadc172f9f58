//! Shared parts of `reader_stress_kernel`: the inodes the threads work on,
//! the names and values the writers use (so readers can check what they
//! read), and the tally of reader operations and failures.

#![allow(dead_code)]

pub mod readers;
pub mod writers;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use rxfs::types::Ino;

/// Names in the directory that are never removed: every lookup and every
/// full readdir must find them.
pub const KEEP: usize = 40;
/// The xattr that never changes.
pub const FIXED_NAME: &[u8] = b"user.fixed";
pub const FIXED_VALUE: &[u8] = b"fixed value";
/// The xattr replaced all the time, alternating between these sizes.
pub const FLIP_NAME: &[u8] = b"user.flip";
pub const FLIP_SIZES: [usize; 2] = [10, 3000];
/// Most churning xattrs (user.a0...) alive at once.
pub const ATTRS_MAX: usize = 60;

/// The inodes under test.
pub struct Shapes {
    /// The file: data fork and xattrs.
    pub file: Ino,
    /// The directory that grows and shrinks; holds "ln".
    pub dir: Ino,
    /// Where names are renamed out to.
    pub dir2: Ino,
}

pub fn keep_name(k: usize) -> Vec<u8> {
    format!("keep{k:03}").into_bytes()
}

pub fn attr_name(k: usize) -> Vec<u8> {
    format!("user.a{k}").into_bytes()
}

/// Value `len` bytes long for attribute `tag`: readers recompute it from
/// the length they got.
pub fn value(tag: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (tag as usize * 31 + i * 7 + len) as u8)
        .collect()
}

/// Target of the symlink made in round `r`: inline in the inode or in a
/// remote block, alternately; `target_ok` recognises every one.
pub fn link_target(r: usize) -> Vec<u8> {
    let len = if r.is_multiple_of(2) { 20 } else { 700 };
    let mut t = format!("target-{r}-").into_bytes();
    t.resize(len, b'x');
    t
}

pub fn target_ok(t: &[u8]) -> bool {
    let Some(r) = std::str::from_utf8(t)
        .ok()
        .and_then(|s| s.strip_prefix("target-"))
        .and_then(|s| s.split('-').next())
        .and_then(|s| s.parse().ok())
    else {
        return false;
    };
    t == link_target(r)
}

/// A message with every number ("664", "0x1dc", "c6_2479") as '#'.
fn kind_of(msg: &str) -> String {
    let mut out = String::new();
    let mut word = String::new();
    for ch in msg.chars().chain([' ']) {
        if ch.is_ascii_alphanumeric() || ch == '_' {
            word.push(ch);
            continue;
        }
        let numeric = word.chars().any(|c| c.is_ascii_digit());
        out += if numeric { "#" } else { &word };
        word.clear();
        out.push(ch);
    }
    out
}

/// Reader operations, each counted on its own.
#[derive(Clone, Copy, Debug)]
pub enum Op {
    Iget,
    ReadFile,
    Getxattr,
    Listxattr,
    Readdir,
    Lookup,
    Readlink,
    /// A writer's operation or its own read of the inode (the write path
    /// reads through the same code).
    Writer,
}

const OPS: usize = 8;
const OP_NAMES: [&str; OPS] = [
    "iget",
    "read_file",
    "getxattr",
    "listxattr",
    "readdir",
    "lookup",
    "readlink",
    "writer",
];

/// What the readers did and what went wrong.
#[derive(Default)]
pub struct Tally {
    ops: [AtomicU64; OPS],
    bad: [AtomicU64; OPS],
    corrupt: AtomicU64,
    /// readlink errors on an inode freed meanwhile (the reader's copy was
    /// stale: not this test's subject, reported only).
    stale: AtomicU64,
    /// Failures by kind (the message without its numbers): count and
    /// the first message.
    kinds: Mutex<BTreeMap<String, (u64, String)>>,
}

/// Kinds of failure listed per operation.
const KINDS: usize = 6;

impl Tally {
    pub fn op(&self, op: Op) {
        self.ops[op as usize].fetch_add(1, Relaxed);
    }

    /// A failure of `op`; `corrupt` when it was `Error::Corrupt`.
    pub fn fail(&self, op: Op, corrupt: bool, msg: String) {
        self.bad[op as usize].fetch_add(1, Relaxed);
        if corrupt {
            self.corrupt.fetch_add(1, Relaxed);
        }
        let msg = format!("{}: {msg}", OP_NAMES[op as usize]);
        let msg = msg.split_whitespace().collect::<Vec<_>>().join(" ");
        let kind = kind_of(&msg);
        let mut k = self.kinds.lock().unwrap();
        let op_name = OP_NAMES[op as usize];
        let of_op = k
            .keys()
            .filter(|m| m.split(':').next() == Some(op_name))
            .count();
        if of_op < KINDS || k.contains_key(&kind) {
            k.entry(kind).or_insert((0, msg)).0 += 1;
        }
    }

    /// Fail `op` with the error `e`.
    pub fn error(&self, op: Op, what: &str, e: &rxfs::Error) {
        self.fail(op, e.is_corrupt(), format!("{what}: {e}"));
    }

    pub fn stale(&self) {
        self.stale.fetch_add(1, Relaxed);
    }

    fn failures(&self) -> u64 {
        self.bad.iter().map(|b| b.load(Relaxed)).sum()
    }

    pub fn summary(&self) -> String {
        let mut s = String::from("ops (failed):");
        for (i, n) in OP_NAMES.iter().enumerate() {
            let (o, b) = (self.ops[i].load(Relaxed), self.bad[i].load(Relaxed));
            s += &format!(" {n} {o} ({b})");
        }
        s += &format!(
            "; {} failures, {} of them Corrupt; {} stale readlinks",
            self.failures(),
            self.corrupt.load(Relaxed),
            self.stale.load(Relaxed)
        );
        for (n, m) in self.kinds.lock().unwrap().values() {
            s += &format!("\n  {n:6} x {m}");
        }
        s
    }

    pub fn assert_clean(&self) {
        let total: u64 = self.ops.iter().map(|o| o.load(Relaxed)).sum();
        assert!(total > 1000, "the readers hardly ran: {total} operations");
        assert_eq!(
            self.failures(),
            0,
            "readers saw half-made changes:\n{}",
            self.summary()
        );
    }
}
