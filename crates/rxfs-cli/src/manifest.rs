//! The tree manifest: one JSON line per path, the format the fixture suite
//! compares against a Python walker over kernel and FUSE mounts.
//!
//! The spec is the docstring of `tests/manifest.py` (the Python walker the
//! fixture suite runs over kernel and FUSE mounts); lines must match it
//! byte for byte. Line format (compact JSON, keys in exactly this order):
//! `{"path","type","ino","mode","uid","gid","nlink","size","blocks",
//! "atime","mtime","ctime","rdev","xattrs"[,"target"][,"sha256"]}`
//! - every path reachable from the root ("/"), hard links once per path,
//!   sorted by the path's raw bytes;
//! - names decoded as UTF-8 with invalid bytes as `\xNN`
//!   ([`crate::text::decode_name`]);
//! - `mode` is `st_mode & 0o7777`; `blocks` is st_blocks (512-byte units,
//!   `di_nblocks << (blocklog - 9)`); times are integer ns since the epoch;
//! - `rdev` is `[major, minor]` for chr/blk, else null;
//! - `xattrs` maps each name to the lowercase hex of its value, names in
//!   byte order; `target` only for symlinks, `sha256` only for regular
//!   files.
//!
//! - serialization is Python's `json.dumps(obj, separators=(',', ':'))`,
//!   which escapes every character outside printable ASCII: serde_json's
//!   compact output plus [`AsciiFormatter`] (non-ASCII and DEL as `\uXXXX`,
//!   lowercase hex, UTF-16 surrogate pairs above U+FFFF).
//!
//! The walk keeps an explicit stack and enters each directory inode once,
//! so a corrupt image cannot recurse without bound or loop.

use std::collections::HashSet;
use std::io::Write;

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use sha2::{Digest, Sha256};

use rxfs::inode::Inode;
use rxfs::types::{FileType, Ino};
use rxfs::{Error, Filesystem, Result};

use crate::text::{decode_name, type_name};

const CHUNK_BYTES: usize = 1 << 20;

/// serde_json's compact formatter, but ASCII-only output like Python's
/// `ensure_ascii=True`. serde_json already escapes `"`, `\\` and control
/// characters as Python does (short forms for \b \f \n \r \t, `\u00xx`
/// otherwise); the unescaped fragments it hands here get DEL and every
/// non-ASCII character escaped.
pub struct AsciiFormatter;

impl serde_json::ser::Formatter for AsciiFormatter {
    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            if (' '..='~').contains(&c) {
                continue;
            }
            w.write_all(&fragment.as_bytes()[start..i])?;
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                write!(w, "\\u{u:04x}")?;
            }
            start = i + c.len_utf8();
        }
        w.write_all(&fragment.as_bytes()[start..])
    }
}

/// One manifest line (without the newline), exactly as tests/manifest.py
/// prints it.
pub fn to_line<T: Serialize>(v: &T) -> String {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, AsciiFormatter);
    // Serializing plain structs into a Vec cannot fail.
    let _ = v.serialize(&mut ser);
    // Only ASCII was written.
    String::from_utf8(out).unwrap_or_default()
}

/// Name -> hex value, serialized as a JSON object in the given order.
pub struct Xattrs(pub Vec<(String, String)>);

impl Serialize for Xattrs {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// One manifest line. Field order is the JSON key order.
#[derive(Serialize)]
pub struct Record {
    pub path: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub ino: u64,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u32,
    pub size: u64,
    pub blocks: u64,
    pub atime: i128,
    pub mtime: i128,
    pub ctime: i128,
    pub rdev: Option<[u32; 2]>,
    pub xattrs: Xattrs,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        s.push_str(&format!("{x:02x}"));
    }
    s
}

/// Hash a regular file's whole contents.
pub fn sha256_file(fs: &Filesystem, ip: &Inode) -> Result<String> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; CHUNK_BYTES];
    let mut off = 0u64;
    while off < ip.core.size {
        let n = fs.read_file(ip, off, &mut buf)?;
        if n == 0 {
            return Err(Error::corrupt(
                "file data",
                rxfs::error::Location::Ino(ip.ino.0),
                format!("short read at {off} of {}", ip.core.size),
            ));
        }
        h.update(&buf[..n]);
        off += n as u64;
    }
    Ok(hex(&h.finalize()))
}

/// Build the record of one path.
pub fn record(fs: &Filesystem, path: &[u8], ip: &Inode) -> Result<Record> {
    let c = &ip.core;
    let ft = ip.file_type();
    let mut names = fs.listxattr(ip)?;
    names.sort();
    names.dedup();
    let mut xattrs = Vec::with_capacity(names.len());
    for n in names {
        let v = fs.getxattr(ip, &n)?;
        xattrs.push((decode_name(&n), hex(&v)));
    }
    let target = match ft {
        Some(FileType::Symlink) => Some(decode_name(&fs.readlink(ip)?)),
        _ => None,
    };
    let sha256 = match ft {
        Some(FileType::Regular) => Some(sha256_file(fs, ip)?),
        _ => None,
    };
    Ok(Record {
        path: decode_name(path),
        kind: type_name(ft),
        ino: ip.ino.0,
        mode: (c.mode & 0o7777) as u32,
        uid: c.uid,
        gid: c.gid,
        nlink: c.nlink,
        size: c.size,
        blocks: crate::stat_view::st_blocks(fs, &ip.core),
        atime: c.atime.as_nanos(),
        mtime: c.mtime.as_nanos(),
        ctime: c.ctime.as_nanos(),
        rdev: crate::stat_view::rdev(ip).map(|(a, b)| [a, b]),
        xattrs: Xattrs(xattrs),
        target,
        sha256,
    })
}

/// Every path reachable from the root with its inode number, sorted by raw
/// bytes. Directories are entered once; a second path to a directory
/// already entered is an error (XFS has no directory hard links).
pub fn walk(fs: &Filesystem) -> Result<Vec<(Vec<u8>, Ino)>> {
    let root = fs.root_ino();
    let mut out = vec![(b"/".to_vec(), root)];
    let mut seen = HashSet::from([root.0]);
    let mut stack = vec![(b"/".to_vec(), root)];
    while let Some((path, ino)) = stack.pop() {
        let dir = fs.iget(ino)?;
        let mut children = Vec::new();
        fs.readdir(&dir, 0, &mut |e| {
            if e.name != b"." && e.name != b".." {
                children.push((e.name.clone(), e.ino, e.ftype));
            }
            true
        })?;
        for (name, cino, ftype) in children {
            let mut p = path.clone();
            if p != b"/" {
                p.push(b'/');
            }
            p.extend_from_slice(&name);
            let is_dir = match ftype {
                Some(t) => t == FileType::Directory,
                None => fs.iget(cino)?.is_dir(),
            };
            if is_dir {
                if !seen.insert(cino.0) {
                    return Err(Error::corrupt(
                        "directory tree",
                        rxfs::error::Location::Ino(cino.0),
                        format!("directory reached twice (at {})", decode_name(&p)),
                    ));
                }
                stack.push((p.clone(), cino));
            }
            out.push((p, cino));
        }
    }
    out.sort();
    Ok(out)
}

/// Write the manifest of the whole tree to `out`.
pub fn write_manifest(fs: &Filesystem, out: &mut dyn Write) -> std::result::Result<(), String> {
    let paths = walk(fs).map_err(|e| e.to_string())?;
    for (path, ino) in paths {
        let shown = decode_name(&path);
        let ip = fs.iget(ino).map_err(|e| format!("{shown}: {e}"))?;
        let rec = record(fs, &path, &ip).map_err(|e| format!("{shown}: {e}"))?;
        let line = to_line(&rec);
        out.write_all(line.as_bytes())
            .and_then(|_| out.write_all(b"\n"))
            .map_err(|e| format!("stdout: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_json_layout() {
        let r = Record {
            path: "/a\\xff".into(),
            kind: "reg",
            ino: 131,
            mode: 0o644,
            uid: 1,
            gid: 2,
            nlink: 1,
            size: 5,
            blocks: 8,
            atime: -1_500_000_000,
            mtime: 10_000_000_000_000_000_000,
            ctime: 3,
            rdev: None,
            xattrs: Xattrs(vec![
                ("user.b".into(), "00ff".into()),
                ("security.a".into(), "".into()),
            ]),
            target: None,
            sha256: Some("ab".into()),
        };
        assert_eq!(
            to_line(&r),
            concat!(
                r#"{"path":"/a\\xff","type":"reg","ino":131,"mode":420,"uid":1,"gid":2,"#,
                r#""nlink":1,"size":5,"blocks":8,"atime":-1500000000,"#,
                r#""mtime":10000000000000000000,"ctime":3,"rdev":null,"#,
                r#""xattrs":{"user.b":"00ff","security.a":""},"sha256":"ab"}"#
            )
        );
        let d = Record {
            kind: "chr",
            rdev: Some([4, 5]),
            xattrs: Xattrs(vec![]),
            sha256: None,
            target: Some("x".into()),
            ..r
        };
        let s = to_line(&d);
        assert!(
            s.ends_with(r#""rdev":[4,5],"xattrs":{},"target":"x"}"#),
            "{s}"
        );
    }

    #[test]
    fn ascii_like_python() {
        // json.dumps("é\u{7f}\u{1f600}a\"\\\n\u{1}/", separators=(",", ":"))
        let v = "é\u{7f}\u{1f600}a\"\\\n\u{1}/";
        assert_eq!(to_line(&v), r#""\u00e9\u007f\ud83d\ude00a\"\\\n\u0001/""#);
        assert_eq!(to_line(&"plain ~"), r#""plain ~""#);
    }
}
