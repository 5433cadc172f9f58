//! The workload's renames and links: a file to a new name (same
//! directory or another, sometimes with RENAME_NOREPLACE), a file over
//! another file (two names of one inode included: nothing happens), a
//! directory to a new name or over an empty directory, RENAME_EXCHANGE
//! of two files, link, the atomic save, and requests that must fail.
//!
//! Model effects (see [`super::model`]): a rename moves the source's
//! inode, or a directory's whole subtree, to the new path and logs the
//! moved inode (ctime), both parents (entries, mtime) and a replaced
//! target (link count), which ends with its last name; a link gives the
//! inode one more name and logs it (link count) and its new parent.
//! Around renames and links the workload often fsyncs the destination
//! directory or the moved file, as careful applications do.

use std::collections::BTreeMap;

use super::model::InodeId;
use super::target::{parent_of, RenameHow, TErr};
use super::workload::{depth, is_under, join, Mix, Stop, Workload, MAX_DEPTH, MAX_ENTRIES};

impl Workload {
    /// How far below `dir` its subtree reaches (0: no subdirectories'
    /// entries, 1: entries, ...).
    fn height(&self, dir: &str) -> usize {
        let d = depth(dir);
        self.ns
            .keys()
            .filter(|p| is_under(p, dir))
            .map(|p| depth(p) - d)
            .max()
            .unwrap_or(0)
    }

    /// Whether `dir` can take one more entry.
    fn has_room(&self, dir: &str) -> bool {
        self.children(dir) < MAX_ENTRIES && depth(dir) < MAX_DEPTH
    }

    fn fresh(&mut self, prefix: &str) -> String {
        self.names += 1;
        format!("{prefix}{}", self.names)
    }

    /// The model's side of a rename that the target did: `from` (and
    /// what lies below it) now at `to`; an existing `to` replaced, or,
    /// with `exchange`, moved to `from`.
    fn apply_rename(&mut self, from: &str, to: &str, exchange: bool) {
        let s = self.ns[from];
        let t = self.ns.get(to).copied();
        if t == Some(s) {
            // Two names of one inode: nothing happens (POSIX).
            return;
        }
        if !exchange && t.is_some() {
            self.drop_name(to);
        }
        let take = |ns: &mut BTreeMap<String, InodeId>, top: &str| {
            let keys: Vec<String> = ns.keys().filter(|p| is_under(p, top)).cloned().collect();
            keys.into_iter()
                .map(|k| {
                    let i = ns.remove(&k).unwrap();
                    (k[top.len()..].to_string(), i)
                })
                .collect::<Vec<_>>()
        };
        let moved = take(&mut self.ns, from);
        if exchange {
            for (rest, i) in take(&mut self.ns, to) {
                self.ns.insert(format!("{from}{rest}"), i);
            }
        }
        for (rest, i) in moved {
            self.ns.insert(format!("{to}{rest}"), i);
        }
        self.touch(s);
        if let (true, Some(t)) = (exchange, t) {
            self.touch(t);
        }
        self.touch_parent(parent_of(from));
        self.touch_parent(parent_of(to));
        self.record_ns();
    }

    /// Rename `from` to `to` on the target and in the model, then maybe
    /// fsync around it.
    fn do_rename(&mut self, from: String, to: String, how: RenameHow) -> Result<(), Stop> {
        let dir = if self.is_dir(&from) { "dir " } else { "" };
        let over = if self.ns.contains_key(&to) {
            "existing "
        } else {
            ""
        };
        let desc = format!("rename {how:?} {dir}{from} -> {over}{to}");
        let (_, stop) = self.exec(desc, |t| t.rename(&from, &to, how))?;
        self.apply_rename(&from, &to, how == RenameHow::Exchange);
        Self::done(stop)?;
        self.fsync_around(&to)
    }

    /// After a rename or link that made `path`: fsync its directory (a
    /// third of the time) or itself (a sixth), unless the mix has no
    /// fsyncs.
    fn fsync_around(&mut self, path: &str) -> Result<(), Stop> {
        if self.params.mix == Mix::NamespaceOnly || !self.ns.contains_key(path) {
            return Ok(());
        }
        match self.rng.below(6) {
            0 | 1 => self.fsync_path(parent_of(path).to_string(), false),
            2 => self.fsync_path(path.to_string(), false),
            _ => Ok(()),
        }
    }

    /// A file to a new name, in its directory or another.
    pub(super) fn rename_file(&mut self) -> Result<(), Stop> {
        let Some((from, _, _)) = self.pick_file() else {
            return Ok(());
        };
        let same = self.rng.below(2) == 0;
        let dir = if same {
            parent_of(&from).to_string()
        } else {
            self.pick_dir()
        };
        if dir != parent_of(&from) && !self.has_room(&dir) {
            return Ok(());
        }
        // Across directories, sometimes keep the name (mv a/x b/).
        let keep = !same && self.rng.below(3) == 0;
        let mut to = join(&dir, from[parent_of(&from).len()..].trim_start_matches('/'));
        if !keep || self.ns.contains_key(&to) {
            to = join(&dir, &self.fresh("r"));
        }
        let how = if self.rng.below(3) == 0 {
            RenameHow::NoReplace
        } else {
            RenameHow::Plain
        };
        self.do_rename(from, to, how)
    }

    /// A file over another file (replace), or over another name of itself.
    pub(super) fn rename_over(&mut self) -> Result<(), Stop> {
        let files = self.paths(false);
        if files.len() < 2 {
            return Ok(());
        }
        let from = self.rng.pick(&files).unwrap().clone();
        let to = self.rng.pick(&files).unwrap().clone();
        if from == to {
            return Ok(());
        }
        self.do_rename(from, to, RenameHow::Plain)
    }

    /// A directory to a new name (maybe under another parent) or over an
    /// empty directory; never into itself, and no path deeper than
    /// [`MAX_DEPTH`].
    pub(super) fn rename_dir(&mut self) -> Result<(), Stop> {
        let dirs: Vec<String> = self.paths(true).into_iter().filter(|d| d != "/").collect();
        let Some(from) = self.rng.pick(&dirs).cloned() else {
            return Ok(());
        };
        let h = self.height(&from);
        let fp = parent_of(&from).to_string();
        if self.rng.below(3) == 0 {
            let over: Vec<String> = dirs
                .iter()
                .filter(|t| {
                    !is_under(t, &from) && self.children(t) == 0 && depth(t) + h <= MAX_DEPTH
                })
                .cloned()
                .collect();
            if let Some(to) = self.rng.pick(&over).cloned() {
                return self.do_rename(from, to, RenameHow::Plain);
            }
        }
        let parents: Vec<String> = self
            .paths(true)
            .into_iter()
            .filter(|p| {
                !is_under(p, &from)
                    && depth(p) + 1 + h <= MAX_DEPTH
                    && (*p == fp || self.children(p) < MAX_ENTRIES)
            })
            .collect();
        let Some(dir) = self.rng.pick(&parents).cloned() else {
            return Ok(());
        };
        let to = join(&dir, &self.fresh("d"));
        self.do_rename(from, to, RenameHow::Plain)
    }

    /// RENAME_EXCHANGE of two files (distinct inodes).
    pub(super) fn exchange(&mut self) -> Result<(), Stop> {
        let files = self.paths(false);
        if files.len() < 2 {
            return Ok(());
        }
        let a = self.rng.pick(&files).unwrap().clone();
        let b = self.rng.pick(&files).unwrap().clone();
        if self.ns[&a] == self.ns[&b] {
            return Ok(());
        }
        self.do_rename(a, b, RenameHow::Exchange)
    }

    /// link(existing file, new name).
    pub(super) fn link(&mut self) -> Result<(), Stop> {
        let Some((from, ino, _)) = self.pick_file() else {
            return Ok(());
        };
        let dir = self.pick_dir();
        if !self.has_room(&dir) {
            return Ok(());
        }
        let to = join(&dir, &self.fresh("l"));
        let desc = format!("link {from} -> {to}");
        let (_, stop) = self.exec(desc, |t| t.link(&from, &to))?;
        self.ns.insert(to.clone(), ino);
        self.touch(ino);
        self.touch_parent(&dir);
        self.record_ns();
        Self::done(stop)?;
        self.fsync_around(&to)
    }

    /// The atomic save of file X: create X.tmp, write it, fsync it
    /// (usually; sometimes fdatasync, sometimes nothing), rename it over
    /// X, fsync the directory (usually). Separate ops, one sequence.
    pub(super) fn atomic_save(&mut self) -> Result<(), Stop> {
        let Some((x, _, _)) = self.pick_file() else {
            return Ok(());
        };
        let dir = parent_of(&x).to_string();
        let tmp = format!("{x}.tmp");
        if self.ns.contains_key(&tmp) || self.children(&dir) >= MAX_ENTRIES {
            return Ok(());
        }
        self.create_path(tmp.clone(), false)?;
        for _ in 0..1 + self.rng.below(2) {
            self.write_path(&tmp)?;
        }
        match self.rng.below(8) {
            0 => {}
            1 => self.fsync_path(tmp.clone(), true)?,
            _ => self.fsync_path(tmp.clone(), false)?,
        }
        let desc = format!("rename {tmp} -> {x} (atomic save)");
        let (_, stop) = self.exec(desc, |t| t.rename(&tmp, &x, RenameHow::Plain))?;
        self.apply_rename(&tmp, &x, false);
        Self::done(stop)?;
        if self.rng.below(4) != 0 {
            self.fsync_path(dir, false)?;
        }
        Ok(())
    }

    /// rename, link and xattr requests that must fail with a known error.
    pub(super) fn bogus_ns(&mut self) -> Result<(), Stop> {
        let all: Vec<String> = self.ns.keys().filter(|p| *p != "/").cloned().collect();
        let dirs: Vec<String> = self.paths(true).into_iter().filter(|d| d != "/").collect();
        match self.rng.below(6) {
            0 => {
                // RENAME_NOREPLACE onto an existing name.
                let (Some(a), Some(b)) =
                    (self.rng.pick(&all).cloned(), self.rng.pick(&all).cloned())
                else {
                    return Ok(());
                };
                if a == b || is_under(&b, &a) || is_under(&a, &b) {
                    return Ok(());
                }
                self.expect_err(
                    format!("rename NoReplace {a} -> {b} (EEXIST)"),
                    &[TErr::Exists],
                    |t| t.rename(&a, &b, RenameHow::NoReplace),
                )
            }
            1 => {
                // A directory over a non-empty one (XFS: EEXIST).
                let (Some(a), Some(b)) =
                    (self.rng.pick(&dirs).cloned(), self.rng.pick(&dirs).cloned())
                else {
                    return Ok(());
                };
                if is_under(&b, &a) || is_under(&a, &b) || self.children(&b) == 0 {
                    return Ok(());
                }
                self.expect_err(
                    format!("rename {a} -> {b} (non-empty: EEXIST)"),
                    &[TErr::Exists, TErr::NotEmpty],
                    |t| t.rename(&a, &b, RenameHow::Plain),
                )
            }
            2 => {
                // A directory into itself or its subtree.
                let Some(a) = self.rng.pick(&dirs).cloned() else {
                    return Ok(());
                };
                let inside: Vec<String> = self
                    .paths(true)
                    .into_iter()
                    .filter(|d| is_under(d, &a))
                    .collect();
                let d = self.rng.pick(&inside).unwrap().clone();
                let to = join(&d, &self.fresh("d"));
                self.expect_err(
                    format!("rename {a} -> {to} (into itself: EINVAL)"),
                    &[TErr::Invalid],
                    |t| t.rename(&a, &to, RenameHow::Plain),
                )
            }
            3 => {
                // link onto an existing name.
                let Some((a, _, _)) = self.pick_file() else {
                    return Ok(());
                };
                let Some(b) = self.rng.pick(&all).cloned() else {
                    return Ok(());
                };
                self.expect_err(format!("link {a} -> {b} (EEXIST)"), &[TErr::Exists], |t| {
                    t.link(&a, &b)
                })
            }
            4 => {
                // rename of a missing name.
                let from = join(&self.pick_dir(), "missing");
                let to = join(&self.pick_dir(), &self.fresh("r"));
                self.expect_err(
                    format!("rename {from} -> {to} (ENOENT)"),
                    &[TErr::NotFound],
                    |t| t.rename(&from, &to, RenameHow::Plain),
                )
            }
            _ => self.bogus_xattr(),
        }
    }
}
