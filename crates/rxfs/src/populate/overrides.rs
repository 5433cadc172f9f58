//! Per-path overrides of a populate from a directory: owner, mode and
//! extended attributes that the files on disk do not carry (an
//! unprivileged build of a tree meant to be root's, a set-uid binary, a
//! file capability, an SELinux label).
//!
//! The override file is text, one rule per line; `#` starts a comment
//! line. A rule is a path pattern, then settings separated by blanks:
//!
//! ```text
//! # pattern          settings
//! /                  mode=0755 owner=0:0
//! /etc/shadow        mode=0640 gid=42
//! /usr/bin/ping      xattr:security.capability=0sAQAAAgAgAAAAAAAAAAAAAAAAAAA=
//! /home/alice/**     owner=1000:1000
//! "/srv/my file"     xattr:user.comment="hello world" -xattr:user.tmp
//! ```
//!
//! - A pattern is a path of the source tree, from its root `/`, or such a
//!   path followed by `/**` (that path and everything below it). A path
//!   with blanks is written in double quotes (`\"` and `\\` inside).
//! - `mode=OCTAL` sets the permission bits (set-id and sticky included,
//!   at most 07777; the file type stays); `uid=N`, `gid=N`,
//!   `owner=UID:GID` the owner.
//! - `xattr:NAME=VALUE` sets an extended attribute (any namespace:
//!   `user.`, `trusted.`, `security.`, and `system.posix_acl_*` in the
//!   kernel's binary form); VALUE is text, `"quoted text"` (with `\"`,
//!   `\\`, `\n`, `\t` and `\NNN` octal escapes), `0x` followed by hex
//!   digits, or `0s` followed by base64: `getfattr -e hex|base64` output
//!   can be pasted. `-xattr:NAME` leaves the source's attribute of that
//!   name out.
//!
//! Invariants:
//! - rules apply in file order; for a path, a later rule's setting wins
//!   over an earlier one's, and xattr settings of all matching rules apply
//!   in order (a set after a removal of the same name sets it);
//! - overrides win over the populate's `owner` option and over the source;
//! - the path of every rule exists in the source ([`Overrides::check`]
//!   says which does not), so a typo is an error, not a silent no-op; a
//!   `mode=` on a rule naming exactly a symbolic link is refused (links
//!   have no mode); under `/**` links keep theirs.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use base64::Engine as _;

/// What the rules that match one path set; `None` leaves the source's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// Permission bits, 0..=0o7777.
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// In order: `(name, Some(value))` sets, `(name, None)` removes.
    pub xattrs: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl Settings {
    fn merge(&mut self, later: &Settings) {
        self.mode = later.mode.or(self.mode);
        self.uid = later.uid.or(self.uid);
        self.gid = later.gid.or(self.gid);
        self.xattrs.extend(later.xattrs.iter().cloned());
    }

    /// `list` (the source's attributes) with the removals and settings
    /// applied, in order.
    pub fn apply_xattrs(&self, list: &mut Vec<(Vec<u8>, Vec<u8>)>) {
        for (name, value) in &self.xattrs {
            list.retain(|(n, _)| n != name);
            if let Some(v) = value {
                list.push((name.clone(), v.clone()));
            }
        }
    }
}

/// One rule: a pattern and its settings.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    /// Line number in the file, for messages.
    line: usize,
    /// Normalized: `/`, or `/a/b` without a trailing slash.
    path: String,
    /// The pattern ended with `/**`.
    subtree: bool,
    set: Settings,
}

/// A parsed override file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    rules: Vec<Rule>,
    /// Rules naming exactly one path, by that path (indices into `rules`).
    exact: HashMap<String, Vec<usize>>,
    /// Rules with `/**`, indices into `rules`.
    subtrees: Vec<usize>,
}

/// A syntax error, or a rule whose path the source lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverrideError {
    pub line: usize,
    pub msg: String,
}

impl fmt::Display for OverrideError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.msg)
    }
}

impl std::error::Error for OverrideError {}

impl Overrides {
    /// Parse the text of an override file (see the module doc).
    pub fn parse(text: &str) -> Result<Overrides, OverrideError> {
        let mut o = Overrides::default();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let err = |msg: String| OverrideError { line, msg };
            let s = raw.trim();
            if s.is_empty() || s.starts_with('#') {
                continue;
            }
            let mut cur = Cursor { s, pos: 0 };
            let pat = cur
                .word()
                .map_err(err)?
                .ok_or_else(|| err("no path".into()))?;
            let (path, subtree) = normalize(&pat).map_err(err)?;
            let mut set = Settings::default();
            let mut any = false;
            while let Some(item) = cur.setting().map_err(err)? {
                any = true;
                apply_setting(&mut set, item).map_err(err)?;
            }
            if !any {
                return Err(err(format!("{pat}: no settings")));
            }
            let idx = o.rules.len();
            if subtree {
                o.subtrees.push(idx);
            } else {
                o.exact.entry(path.clone()).or_default().push(idx);
            }
            o.rules.push(Rule {
                line,
                path,
                subtree,
                set,
            });
        }
        Ok(o)
    }

    /// Whether there is no rule at all.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Check the rules against the source tree at `root`: every rule's
    /// path exists there (without following a symbolic link at its end),
    /// and no `mode=` names exactly a symbolic link.
    pub fn check(&self, root: &Path) -> Result<(), OverrideError> {
        for r in &self.rules {
            let host = root.join(r.path.trim_start_matches('/'));
            let meta = match std::fs::symlink_metadata(&host) {
                Ok(m) => m,
                Err(e) => {
                    return Err(OverrideError {
                        line: r.line,
                        msg: format!("{}: not in the source ({})", r.path, plain(&e)),
                    })
                }
            };
            if !r.subtree && r.set.mode.is_some() && meta.file_type().is_symlink() {
                return Err(OverrideError {
                    line: r.line,
                    msg: format!("{}: mode= on a symbolic link (links have no mode)", r.path),
                });
            }
        }
        Ok(())
    }

    /// The merged settings of every rule matching `rel` (a path of the
    /// source tree from its root, `/` for the root), with whether `rel`
    /// is a symbolic link (then a `mode=` from `/**` is dropped). `None`
    /// when no rule matches.
    pub fn lookup(&self, rel: &str, is_symlink: bool) -> Option<Settings> {
        let mut hits: Vec<usize> = self.exact.get(rel).cloned().unwrap_or_default();
        for &i in &self.subtrees {
            if under(rel, &self.rules[i].path) {
                hits.push(i);
            }
        }
        if hits.is_empty() {
            return None;
        }
        hits.sort_unstable();
        let mut s = Settings::default();
        for i in hits {
            let mut set = self.rules[i].set.clone();
            if is_symlink && self.rules[i].subtree {
                set.mode = None;
            }
            s.merge(&set);
        }
        Some(s)
    }
}

/// `rel` is `base` or below it.
fn under(rel: &str, base: &str) -> bool {
    base == "/"
        || rel == base
        || (rel.starts_with(base) && rel.as_bytes().get(base.len()) == Some(&b'/'))
}

fn plain(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// A pattern as written -> (normalized path, is a `/**` pattern).
fn normalize(pat: &str) -> Result<(String, bool), String> {
    let (base, subtree) = match pat.strip_suffix("/**") {
        Some(b) => (if b.is_empty() { "/" } else { b }, true),
        None => (pat, false),
    };
    if !base.starts_with('/') {
        return Err(format!(
            "{pat}: a path from the source's root, starting with /"
        ));
    }
    let mut parts = Vec::new();
    for c in base.split('/').filter(|c| !c.is_empty()) {
        if c == "." || c == ".." || c.contains('*') {
            return Err(format!(
                "{pat}: '.', '..' and '*' are not allowed (only a final /**)"
            ));
        }
        parts.push(c);
    }
    Ok((format!("/{}", parts.join("/")), subtree))
}

/// One `key=value` (or `-xattr:NAME`) item of a rule.
struct Item {
    key: String,
    /// The value's bytes, and whether it was quoted.
    value: Option<(Vec<u8>, bool)>,
}

fn apply_setting(set: &mut Settings, item: Item) -> Result<(), String> {
    let text = |v: &Option<(Vec<u8>, bool)>| -> Result<String, String> {
        match v {
            Some((b, _)) => String::from_utf8(b.clone()).map_err(|_| "not UTF-8".to_string()),
            None => Err(format!("{}: needs =VALUE", item.key)),
        }
    };
    let id = |s: &str, key: &str| -> Result<u32, String> {
        s.parse::<u32>().map_err(|_| {
            format!("{key}={s}: a number (no names: the build host's are not the image's)")
        })
    };
    let key = item.key.as_str();
    if let Some(name) = key.strip_prefix("-xattr:") {
        if item.value.is_some() {
            return Err(format!("{key}: a removal takes no value"));
        }
        set.xattrs.push((xattr_name(name)?, None));
        return Ok(());
    }
    if let Some(name) = key.strip_prefix("xattr:") {
        let (raw, quoted) = item.value.ok_or_else(|| format!("{key}: needs =VALUE"))?;
        let v = if quoted { raw } else { decode_value(&raw)? };
        set.xattrs.push((xattr_name(name)?, Some(v)));
        return Ok(());
    }
    let v = text(&item.value)?;
    match key {
        "mode" => {
            let m = u32::from_str_radix(&v, 8)
                .ok()
                .filter(|m| *m <= 0o7777)
                .ok_or_else(|| format!("mode={v}: octal permission bits, at most 07777"))?;
            set.mode = Some(m);
        }
        "uid" => set.uid = Some(id(&v, key)?),
        "gid" => set.gid = Some(id(&v, key)?),
        "owner" => {
            let (u, g) = v
                .split_once(':')
                .ok_or_else(|| format!("owner={v}: UID:GID"))?;
            set.uid = Some(id(u, "owner")?);
            set.gid = Some(id(g, "owner")?);
        }
        _ => {
            return Err(format!(
                "{key}: unknown setting (mode=, uid=, gid=, owner=, xattr:NAME=, -xattr:NAME)"
            ))
        }
    }
    Ok(())
}

fn xattr_name(name: &str) -> Result<Vec<u8>, String> {
    let known = ["user.", "trusted.", "security.", "system.posix_acl_"];
    if !known
        .iter()
        .any(|p| name.starts_with(p) && name.len() > p.len())
    {
        return Err(format!(
            "xattr name {name:?}: needs a namespace (user., trusted., security., system.posix_acl_*)"
        ));
    }
    if name.len() > 255 {
        return Err(format!("xattr name {name:?}: longer than 255 bytes"));
    }
    Ok(name.as_bytes().to_vec())
}

/// An unquoted xattr value: `0x` hex, `0s` base64, or the text itself.
fn decode_value(raw: &[u8]) -> Result<Vec<u8>, String> {
    let s = std::str::from_utf8(raw).map_err(|_| "value: not UTF-8".to_string())?;
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        if h.len() % 2 != 0 {
            return Err(format!("{s}: an odd number of hex digits"));
        }
        return (0..h.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&h[i..i + 2], 16))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(|_| format!("{s}: not hex"));
    }
    if let Some(b) = s.strip_prefix("0s").or_else(|| s.strip_prefix("0S")) {
        return base64::engine::general_purpose::STANDARD
            .decode(b)
            .map_err(|e| format!("{s}: not base64 ({e})"));
    }
    Ok(raw.to_vec())
}

/// A scanner over one line.
struct Cursor<'a> {
    s: &'a str,
    pos: usize,
}

impl Cursor<'_> {
    fn skip_blanks(&mut self) {
        let rest = &self.s[self.pos..];
        self.pos += rest.len() - rest.trim_start().len();
    }

    /// A word: bare (up to a blank) or double-quoted (escapes decoded).
    /// `None` at the end of the line.
    fn word(&mut self) -> Result<Option<String>, String> {
        self.skip_blanks();
        if self.pos >= self.s.len() {
            return Ok(None);
        }
        if self.s[self.pos..].starts_with('"') {
            let b = self.quoted()?;
            return String::from_utf8(b)
                .map(Some)
                .map_err(|_| "a path that is not UTF-8".into());
        }
        let rest = &self.s[self.pos..];
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        self.pos += end;
        Ok(Some(rest[..end].to_string()))
    }

    /// A `"..."` string at the cursor, its escapes decoded.
    fn quoted(&mut self) -> Result<Vec<u8>, String> {
        let b = self.s.as_bytes();
        let mut i = self.pos + 1;
        let mut out = Vec::new();
        while i < b.len() {
            match b[i] {
                b'"' => {
                    self.pos = i + 1;
                    if self.pos < b.len() && !b[self.pos].is_ascii_whitespace() {
                        return Err("a blank must follow a closing quote".into());
                    }
                    return Ok(out);
                }
                b'\\' => {
                    let c = *b.get(i + 1).ok_or("a \\ at the end of the line")?;
                    match c {
                        b'n' => out.push(b'\n'),
                        b't' => out.push(b'\t'),
                        b'0'..=b'7' => {
                            let digits: Vec<u8> = b[i + 1..]
                                .iter()
                                .take(3)
                                .take_while(|d| (b'0'..=b'7').contains(d))
                                .copied()
                                .collect();
                            let v = digits.iter().fold(0u32, |a, d| a * 8 + u32::from(d - b'0'));
                            out.push(u8::try_from(v).map_err(|_| "an octal escape above \\377")?);
                            i += digits.len() + 1;
                            continue;
                        }
                        _ => out.push(c),
                    }
                    i += 2;
                }
                c => {
                    out.push(c);
                    i += 1;
                }
            }
        }
        Err("an unterminated quote".into())
    }

    /// The next setting: `key=value`, `key="value"`, or `-xattr:NAME`.
    fn setting(&mut self) -> Result<Option<Item>, String> {
        self.skip_blanks();
        if self.pos >= self.s.len() {
            return Ok(None);
        }
        let rest = &self.s[self.pos..];
        let key_end = rest
            .find(|c: char| c == '=' || c.is_whitespace())
            .unwrap_or(rest.len());
        let key = rest[..key_end].to_string();
        self.pos += key_end;
        if !self.s[self.pos..].starts_with('=') {
            return Ok(Some(Item { key, value: None }));
        }
        self.pos += 1;
        if self.s[self.pos..].starts_with('"') {
            let v = self.quoted()?;
            return Ok(Some(Item {
                key,
                value: Some((v, true)),
            }));
        }
        let rest = &self.s[self.pos..];
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        self.pos += end;
        Ok(Some(Item {
            key,
            value: Some((rest.as_bytes()[..end].to_vec(), false)),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_merge_in_file_order() {
        let o = Overrides::parse(
            "# comment\n\
             /** owner=0:0\n\
             /etc/shadow mode=0640 gid=42\n\
             /etc/** uid=7 xattr:user.a=0x6869 -xattr:user.b\n\
             /etc/shadow xattr:user.a=\"x y\\n\\101\"\n",
        )
        .unwrap();
        let s = o.lookup("/etc/shadow", false).unwrap();
        assert_eq!(s.mode, Some(0o640));
        assert_eq!((s.uid, s.gid), (Some(7), Some(42)));
        let mut list = vec![
            (b"user.a".to_vec(), b"old".to_vec()),
            (b"user.b".to_vec(), b"gone".to_vec()),
            (b"user.c".to_vec(), b"kept".to_vec()),
        ];
        s.apply_xattrs(&mut list);
        assert_eq!(
            list,
            vec![
                (b"user.c".to_vec(), b"kept".to_vec()),
                (b"user.a".to_vec(), b"x y\nA".to_vec()),
            ]
        );
        // /etcetera is not under /etc.
        let s = o.lookup("/etcetera", false).unwrap();
        assert_eq!((s.uid, s.gid, s.mode), (Some(0), Some(0), None));
        assert_eq!(o.lookup("/etc", false).unwrap().uid, Some(7));
    }

    #[test]
    fn values_decode_like_getfattr() {
        let o = Overrides::parse(
            "\"/a b\" xattr:security.capability=0sAQAAAgAgAAA= xattr:user.t=plain xattr:user.q=\"0x41\"\n",
        )
        .unwrap();
        let s = o.lookup("/a b", false).unwrap();
        assert_eq!(
            s.xattrs[0].1.as_deref(),
            Some(&[1u8, 0, 0, 2, 0, 32, 0, 0][..])
        );
        assert_eq!(s.xattrs[1].1.as_deref(), Some(&b"plain"[..]));
        assert_eq!(s.xattrs[2].1.as_deref(), Some(&b"0x41"[..]));
    }

    #[test]
    fn subtree_mode_skips_symlinks() {
        let o = Overrides::parse("/bin/** mode=0755\n").unwrap();
        assert_eq!(o.lookup("/bin/sh", true).unwrap().mode, None);
        assert_eq!(o.lookup("/bin/ls", false).unwrap().mode, Some(0o755));
        assert!(o.lookup("/sbin", false).is_none());
    }

    #[test]
    fn bad_lines_name_their_line() {
        for (text, want) in [
            ("etc/x mode=644\n", "starting with /"),
            ("/x\n", "no settings"),
            ("/x mode=8\n", "octal"),
            ("/x mode=10000\n", "07777"),
            ("/x uid=root\n", "a number"),
            ("/x colour=red\n", "unknown setting"),
            ("/x xattr:foo=1\n", "namespace"),
            ("/x xattr:user.a=0x123\n", "odd"),
            ("/x xattr:user.a=0s!!\n", "base64"),
            ("/x xattr:user.a=\"open\n", "unterminated"),
            ("/a/../b uid=1\n", "not allowed"),
            ("/a/*.c uid=1\n", "not allowed"),
            ("/x -xattr:user.a=1\n", "no value"),
        ] {
            let e = Overrides::parse(&format!("# first\n{text}")).unwrap_err();
            assert_eq!(e.line, 2, "{text}");
            assert!(e.msg.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn check_names_missing_paths_and_symlink_modes() {
        let d = std::env::temp_dir().join(format!("rxfs-ovr-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("etc")).unwrap();
        std::os::unix::fs::symlink("etc", d.join("link")).unwrap();
        let ok = Overrides::parse("/etc/** uid=1\n/ mode=0755\n/link uid=3\n").unwrap();
        assert!(ok.check(&d).is_ok());
        let e = Overrides::parse("/etc uid=1\n/etx uid=1\n")
            .unwrap()
            .check(&d)
            .unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.msg.contains("/etx: not in the source"), "{e}");
        let e = Overrides::parse("/link mode=0700\n")
            .unwrap()
            .check(&d)
            .unwrap_err();
        assert!(e.msg.contains("symbolic link"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
