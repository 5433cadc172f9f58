//! Populate from a tar archive (`rxfs mkfs --populate-tar FILE|-`): the
//! image gets exactly the metadata the archive records, so an
//! unprivileged build gets root-owned files, set-id bits, device nodes
//! and SELinux labels without staging them on disk.
//!
//! Read with the `tar` crate; gzip, zstd and xz archives are recognised
//! by their magic numbers. Per entry: type (regular, directory, symbolic
//! and hard link, character and block device, FIFO), mode with set-id and
//! sticky bits, owner (PAX `uid`/`gid` over the header's), modification
//! and access times (PAX fractions of a second too), extended attributes
//! (PAX `SCHILY.xattr.NAME`, as GNU tar `--xattrs` writes them, or
//! libarchive's base64 `LIBARCHIVE.xattr.NAME`), and POSIX ACLs (PAX
//! `SCHILY.acl.access`/`SCHILY.acl.default`, the text form with numeric
//! ids) stored as XFS stores them.
//!
//! Invariants: paths are taken relative to the image root (a leading `/`
//! or `./` is dropped; a `..` component is refused); a parent the archive
//! does not list is made root-owned 0755; an entry whose path already
//! exists replaces it, as tar's extraction does (a directory is updated in
//! place); a directory's times are set after everything was created in it
//! (at the end, deepest first); change and birth times are the build's
//! ("now", or `SOURCE_DATE_EPOCH`).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Component, Path};

use rxfs::attr::XattrSet;
use rxfs::bmap::data::SetAttr;
use rxfs::format::inode::Timestamp;
use rxfs::fs::ops_ns::CreateArgs;
use rxfs::types::Ino;
use rxfs::Filesystem;

use crate::{CliError, CliResult};

/// What a populate from an archive made.
#[derive(Debug, Default)]
pub struct TarSummary {
    pub entries: u64,
    pub bytes: u64,
}

/// The archive at `src` (`-`: standard input), decompressed if needed.
pub fn open_archive(src: &Path) -> CliResult<Box<dyn Read>> {
    let raw: Box<dyn Read> = if src == Path::new("-") {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::fs::File::open(src).map_err(|e| CliError::io(src.display(), &e))?)
    };
    let mut r = BufReader::with_capacity(1 << 20, raw);
    let head = r.fill_buf().map_err(|e| CliError::io(src.display(), &e))?;
    let out: Box<dyn Read> = if head.starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::bufread::MultiGzDecoder::new(r))
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Box::new(
            zstd::stream::read::Decoder::with_buffer(r)
                .map_err(|e| CliError::io(src.display(), &e))?,
        )
    } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        Box::new(liblzma::bufread::XzDecoder::new(r))
    } else {
        Box::new(r)
    };
    Ok(out)
}

/// An entry's metadata after the PAX records were applied.
struct Meta {
    perm: u32,
    uid: u32,
    gid: u32,
    mtime: Timestamp,
    atime: Option<Timestamp>,
    xattrs: Vec<(Vec<u8>, Vec<u8>)>,
}

/// `t`, or `limit` when `t` is later.
fn not_after(t: Timestamp, limit: Timestamp) -> Timestamp {
    if (t.sec, t.nsec) > (limit.sec, limit.nsec) {
        limit
    } else {
        t
    }
}

/// PAX time: seconds with an optional fraction.
fn pax_time(v: &str) -> Option<Timestamp> {
    let (s, frac) = v.split_once('.').unwrap_or((v, ""));
    let sec: i64 = s.parse().ok()?;
    let digits: String = frac.chars().take(9).collect();
    let mut nsec: u32 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    for _ in digits.len()..9 {
        nsec *= 10;
    }
    // -1.5 means 1.5 s before the epoch.
    if (sec < 0 || s.starts_with('-')) && nsec > 0 {
        return Some(Timestamp {
            sec: sec - 1,
            nsec: 1_000_000_000 - nsec,
        });
    }
    Some(Timestamp { sec, nsec })
}

/// A POSIX ACL in the text form tar writes (`user::rw-,user:1000:r--,...`,
/// star's optional trailing numeric id) as the `system.posix_acl_*` xattr
/// value (version 2, little-endian tag, permissions, id).
fn acl_xattr(text: &str) -> Result<Vec<u8>, String> {
    let mut ents: Vec<(u16, u16, u32)> = Vec::new();
    for e in text
        .split([',', '\n'])
        .map(str::trim)
        .filter(|e| !e.is_empty())
    {
        let f: Vec<&str> = e.split(':').collect();
        if f.len() < 3 {
            return Err(format!("ACL entry '{e}'"));
        }
        let perm_s = f[2];
        let mut perm = 0u16;
        for (i, c) in perm_s.chars().enumerate() {
            perm |= match (i, c) {
                (0, 'r') => 4,
                (1, 'w') => 2,
                (2, 'x') => 1,
                (_, '-') => 0,
                _ => return Err(format!("ACL permissions '{perm_s}'")),
            };
        }
        let named = !f[1].is_empty();
        let is_user = matches!(f[0], "user" | "u");
        // The id: star's fourth field, else the qualifier when numeric,
        // else the name looked up on this host (as tar's extraction does).
        let id = if named {
            match f.get(3).copied().unwrap_or(f[1]).parse::<u32>() {
                Ok(id) => id,
                Err(_) => host_id(f[1], is_user)
                    .ok_or_else(|| format!("ACL entry '{e}': no such {} here", f[0]))?,
            }
        } else {
            u32::MAX
        };
        let tag = match (f[0], named) {
            ("user" | "u", false) => 0x01,
            ("user" | "u", true) => 0x02,
            ("group" | "g", false) => 0x04,
            ("group" | "g", true) => 0x08,
            ("mask" | "m", _) => 0x10,
            ("other" | "o", _) => 0x20,
            _ => return Err(format!("ACL tag '{}'", f[0])),
        };
        ents.push((tag, perm, id));
    }
    ents.sort_by_key(|&(t, _, id)| (t, id));
    let mut v = 2u32.to_le_bytes().to_vec();
    for (t, p, id) in ents {
        v.extend_from_slice(&t.to_le_bytes());
        v.extend_from_slice(&p.to_le_bytes());
        v.extend_from_slice(&id.to_le_bytes());
    }
    Ok(v)
}

/// The id of user or group `name` in this host's /etc/passwd or
/// /etc/group.
fn host_id(name: &str, user: bool) -> Option<u32> {
    let file = if user { "/etc/passwd" } else { "/etc/group" };
    let text = std::fs::read_to_string(file).ok()?;
    text.lines().find_map(|l| {
        let mut f = l.split(':');
        let n = f.next()?;
        let id = f.nth(1)?;
        (n == name).then(|| id.parse().ok()).flatten()
    })
}

/// libarchive's `LIBARCHIVE.xattr.` names are URL-encoded.
fn url_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

/// PAX records (`LEN KEY=VALUE\n`, LEN counting the whole record; values
/// may hold newlines and any bytes, which the `tar` crate's own PAX
/// iterator does not take, so the headers are read raw and parsed here).
fn pax_records(data: &[u8], shown: &str) -> CliResult<Vec<(String, Vec<u8>)>> {
    let bad = || CliError::new(format!("{shown}: malformed PAX header"));
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        if rest.iter().all(|&b| b == 0) {
            break;
        }
        let sp = rest.iter().position(|&b| b == b' ').ok_or_else(bad)?;
        let len: usize = std::str::from_utf8(&rest[..sp])
            .ok()
            .and_then(|l| l.parse().ok())
            .ok_or_else(bad)?;
        if len <= sp + 1 || len > rest.len() || rest[len - 1] != b'\n' {
            return Err(bad());
        }
        let rec = &rest[sp + 1..len - 1];
        let eq = rec.iter().position(|&b| b == b'=').ok_or_else(bad)?;
        let key = std::str::from_utf8(&rec[..eq]).map_err(|_| bad())?;
        out.push((key.to_string(), rec[eq + 1..].to_vec()));
        rest = &rest[len..];
    }
    Ok(out)
}

fn meta_of(h: &tar::Header, pax: &[(String, Vec<u8>)], shown: &str) -> CliResult<Meta> {
    use base64::Engine;
    let bad = |what: &str| CliError::new(format!("{shown}: bad {what} in the archive"));
    let mut m = Meta {
        perm: h.mode().map_err(|_| bad("mode"))? & 0o7777,
        uid: h.uid().map_err(|_| bad("uid"))? as u32,
        gid: h.gid().map_err(|_| bad("gid"))? as u32,
        mtime: Timestamp {
            sec: h.mtime().map_err(|_| bad("mtime"))? as i64,
            nsec: 0,
        },
        atime: None,
        xattrs: Vec::new(),
    };
    let mut libarchive = Vec::new();
    let mut acl_text: Vec<(&[u8], Vec<u8>)> = Vec::new();
    for (key, val) in pax {
        let key = key.as_str();
        let text = || std::str::from_utf8(val).map_err(|_| bad(key));
        match key {
            "uid" => m.uid = text()?.parse().map_err(|_| bad("PAX uid"))?,
            "gid" => m.gid = text()?.parse().map_err(|_| bad("PAX gid"))?,
            "mtime" => m.mtime = pax_time(text()?).ok_or_else(|| bad("PAX mtime"))?,
            "atime" => m.atime = Some(pax_time(text()?).ok_or_else(|| bad("PAX atime"))?),
            "SCHILY.acl.access" | "SCHILY.acl.default" => {
                let name: &[u8] = if key.ends_with("access") {
                    b"system.posix_acl_access"
                } else {
                    b"system.posix_acl_default"
                };
                let v = acl_xattr(text()?)
                    .map_err(|why| CliError::new(format!("{shown}: {key}: {why}")))?;
                acl_text.push((name, v));
            }
            _ => {
                if let Some(name) = key.strip_prefix("SCHILY.xattr.") {
                    m.xattrs.push((name.as_bytes().to_vec(), val.clone()));
                } else if let Some(name) = key.strip_prefix("LIBARCHIVE.xattr.") {
                    let v = base64::engine::general_purpose::STANDARD_NO_PAD
                        .decode(strip_pad(val.trim_ascii_end()))
                        .map_err(|_| bad("LIBARCHIVE.xattr value"))?;
                    libarchive.push((url_decode(name), v));
                }
            }
        }
    }
    // GNU tar records an ACL twice (as text and as the raw xattr); bsdtar
    // writes both xattr forms: the first recorded wins, SCHILY's first.
    for (n, v) in acl_text
        .into_iter()
        .map(|(n, v)| (n.to_vec(), v))
        .chain(libarchive)
    {
        if !m.xattrs.iter().any(|(x, _)| *x == n) {
            m.xattrs.push((n, v));
        }
    }
    // SOURCE_DATE_EPOCH: no time after it, as for a directory source.
    if let Some(f) = rxfs::clock::fixed() {
        m.mtime = not_after(m.mtime, f);
        m.atime = m.atime.map(|t| not_after(t, f));
    }
    Ok(m)
}

/// Base64 padding: libarchive writes none, others may.
fn strip_pad(mut s: &[u8]) -> &[u8] {
    while let [rest @ .., b'='] = s {
        s = rest;
    }
    s
}

/// The components of an archive path, relative to the root; `..` refused.
fn components(p: &Path, shown: &str) -> CliResult<Vec<Vec<u8>>> {
    use std::os::unix::ffi::OsStrExt;
    let mut out = Vec::new();
    for c in p.components() {
        match c {
            Component::Normal(n) => out.push(n.as_bytes().to_vec()),
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir => {
                return Err(CliError::new(format!(
                    "{shown}: a '..' component in an archive path is refused"
                )))
            }
            Component::Prefix(_) => {}
        }
    }
    Ok(out)
}

struct Builder<'a> {
    fs: &'a Filesystem,
    /// Directories made or seen, by path, for parents and hard links.
    dirs: HashMap<Vec<Vec<u8>>, Ino>,
    /// Every entry's inode by path (hard link targets).
    inos: HashMap<Vec<Vec<u8>>, Ino>,
    /// Directories whose xattrs (default ACLs would be inherited by what
    /// is created inside) and attributes are set at the end.
    dir_attrs: Vec<(Vec<Vec<u8>>, Ino, SetAttr, Meta)>,
}

impl Builder<'_> {
    /// The directory at `path`, made root-owned 0755 where missing.
    fn dir(&mut self, path: &[Vec<u8>], shown: &str) -> CliResult<Ino> {
        if let Some(&ino) = self.dirs.get(path) {
            return Ok(ino);
        }
        let (name, parent) = path.split_last().expect("the root is always known");
        let pino = self.dir(parent, shown)?;
        let pip = self.fs.iget(pino).map_err(|e| CliError::fs(shown, &e))?;
        let ino = match self.fs.lookup(&pip, name) {
            Ok(ino) => ino,
            Err(rxfs::Error::NotFound) => {
                let args = CreateArgs::root(libc::S_IFDIR | 0o755);
                self.fs
                    .mkdir(pino, name, &args)
                    .map_err(|e| CliError::fs(shown, &e))?
                    .ino
            }
            Err(e) => return Err(CliError::fs(shown, &e)),
        };
        self.dirs.insert(path.to_vec(), ino);
        Ok(ino)
    }

    /// Remove what is at `name` in `parent` unless it is a directory and
    /// `keep_dir`; whether a directory is there (kept).
    fn clear(
        &self,
        parent: Ino,
        name: &[u8],
        keep_dir: bool,
        shown: &str,
    ) -> CliResult<Option<Ino>> {
        let pip = self.fs.iget(parent).map_err(|e| CliError::fs(shown, &e))?;
        let ino = match self.fs.lookup(&pip, name) {
            Ok(ino) => ino,
            Err(rxfs::Error::NotFound) => return Ok(None),
            Err(e) => return Err(CliError::fs(shown, &e)),
        };
        let ip = self.fs.iget(ino).map_err(|e| CliError::fs(shown, &e))?;
        if ip.is_dir() {
            if keep_dir {
                return Ok(Some(ino));
            }
            return Err(CliError::new(format!(
                "{shown}: a directory of that name is already in the archive"
            )));
        }
        self.fs
            .unlink(parent, name)
            .map_err(|e| CliError::fs(shown, &e))?;
        Ok(None)
    }
}

/// Copy every entry of the archive `r` into `fs` below its root; the
/// archive's `.` (or `/`) entry gives the root its attributes.
pub fn populate_tar(fs: &Filesystem, r: Box<dyn Read>) -> CliResult<TarSummary> {
    let mut ar = tar::Archive::new(r);
    let root = fs.root_ino();
    let mut b = Builder {
        fs,
        dirs: HashMap::from([(Vec::new(), root)]),
        inos: HashMap::new(),
        dir_attrs: Vec::new(),
    };
    let mut sum = TarSummary::default();
    let entries = ar
        .entries()
        .map_err(|e| CliError::io("reading the archive", &e))?
        .raw(true);
    // What PAX and GNU headers say of the next entry; global PAX records.
    let mut pax: Vec<(String, Vec<u8>)> = Vec::new();
    let mut global: Vec<(String, Vec<u8>)> = Vec::new();
    let (mut long_name, mut long_link): (Option<Vec<u8>>, Option<Vec<u8>>) = (None, None);
    for entry in entries {
        let mut e = entry.map_err(|e| CliError::io("reading the archive", &e))?;
        let kind = e.header().entry_type();
        if matches!(
            kind,
            tar::EntryType::XHeader
                | tar::EntryType::XGlobalHeader
                | tar::EntryType::GNULongName
                | tar::EntryType::GNULongLink
        ) {
            let mut data = Vec::new();
            e.read_to_end(&mut data)
                .map_err(|err| CliError::io("reading the archive", &err))?;
            match kind {
                tar::EntryType::XHeader => pax = pax_records(&data, "a PAX header")?,
                tar::EntryType::XGlobalHeader => global = pax_records(&data, "a PAX header")?,
                _ => {
                    while data.last() == Some(&0) {
                        data.pop();
                    }
                    if kind == tar::EntryType::GNULongName {
                        long_name = Some(data);
                    } else {
                        long_link = Some(data);
                    }
                }
            }
            continue;
        }
        let recs: Vec<(String, Vec<u8>)> = global.iter().cloned().chain(pax.drain(..)).collect();
        let rec = |k: &str| {
            recs.iter()
                .rev()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.clone())
        };
        let path_bytes = rec("path")
            .or_else(|| long_name.take())
            .unwrap_or_else(|| e.header().path_bytes().into_owned());
        let link_bytes = rec("linkpath")
            .or_else(|| long_link.take())
            .or_else(|| e.header().link_name_bytes().map(|l| l.into_owned()));
        long_name = None;
        long_link = None;
        let path = path_of(path_bytes);
        let shown = format!("{}", path.display());
        let comps = components(&path, &shown)?;
        let meta = meta_of(e.header(), &recs, &shown)?;
        let kind = e.header().entry_type();
        let set = SetAttr {
            mode: Some(meta.perm),
            uid: Some(meta.uid),
            gid: Some(meta.gid),
            mtime: Some(meta.mtime),
            atime: Some(meta.atime.unwrap_or(meta.mtime)),
            ..Default::default()
        };
        sum.entries += 1;
        if comps.is_empty() {
            // The root itself.
            if !kind.is_dir() {
                return Err(CliError::new(format!(
                    "{shown}: the archive's root is not a directory"
                )));
            }
            b.dir_attrs.push((Vec::new(), root, set, meta));
            continue;
        }
        let (name, parent_path) = comps.split_last().expect("not empty");
        let parent = b.dir(parent_path, &shown)?;
        let args = |fmt: u32, rdev: u32| CreateArgs {
            mode: fmt | meta.perm,
            uid: meta.uid,
            gid: meta.gid,
            rdev,
            umask: 0,
        };
        let mk = |r: rxfs::Result<std::sync::Arc<rxfs::inode::Inode>>| {
            r.map(|ip| ip.ino).map_err(|err| CliError::fs(&shown, &err))
        };
        let ino = match kind {
            tar::EntryType::Directory => {
                let ino = match b.clear(parent, name, true, &shown)? {
                    Some(ino) => ino,
                    None => mk(fs.mkdir(parent, name, &args(libc::S_IFDIR, 0)))?,
                };
                b.dirs.insert(comps.clone(), ino);
                b.dir_attrs.push((comps.clone(), ino, set, meta));
                b.inos.insert(comps, ino);
                continue;
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                b.clear(parent, name, false, &shown)?;
                let ino = mk(fs.create(parent, name, &args(libc::S_IFREG, 0)))?;
                let size = e.header().size().unwrap_or(0);
                sum.bytes += copy_data(fs, ino, &mut e, size, &shown)?;
                ino
            }
            tar::EntryType::Symlink => {
                let target = link_bytes.clone().ok_or_else(|| {
                    CliError::new(format!("{shown}: a symbolic link without a target"))
                })?;
                b.clear(parent, name, false, &shown)?;
                mk(fs.symlink(parent, name, &target, &args(libc::S_IFLNK, 0)))?
            }
            tar::EntryType::Link => {
                let target = path_of(link_bytes.clone().ok_or_else(|| {
                    CliError::new(format!("{shown}: a hard link without a target"))
                })?);
                let tcomps = components(&target, &shown)?;
                let &tino = b.inos.get(&tcomps).ok_or_else(|| {
                    CliError::new(format!(
                        "{shown}: hard link to {}, which the archive has not had before",
                        target.display()
                    ))
                })?;
                b.clear(parent, name, false, &shown)?;
                fs.link(tino, parent, name)
                    .map_err(|err| CliError::fs(&shown, &err))?;
                b.inos.insert(comps, tino);
                // A hard link's header carries the file's attributes again.
                continue;
            }
            tar::EntryType::Char | tar::EntryType::Block => {
                let h = e.header();
                let major = h.device_major().ok().flatten().unwrap_or(0);
                let minor = h.device_minor().ok().flatten().unwrap_or(0);
                let rdev = rxfs::populate::stream::dev_number(major, minor);
                let fmt = if kind == tar::EntryType::Char {
                    libc::S_IFCHR
                } else {
                    libc::S_IFBLK
                };
                b.clear(parent, name, false, &shown)?;
                mk(fs.create(parent, name, &args(fmt, rdev)))?
            }
            tar::EntryType::Fifo => {
                b.clear(parent, name, false, &shown)?;
                mk(fs.create(parent, name, &args(libc::S_IFIFO, 0)))?
            }
            other => {
                return Err(CliError::new(format!(
                    "{shown}: archive entries of type {other:?} are not supported"
                )))
            }
        };
        set_xattrs(fs, ino, &meta, &shown)?;
        let mut set = set;
        if kind == tar::EntryType::Symlink {
            // A link's mode is 0777 as symlink(2) makes it; tar records
            // whatever the host had.
            set.mode = None;
        }
        fs.setattr(ino, &set)
            .map_err(|err| CliError::fs(&shown, &err))?;
        b.inos.insert(comps, ino);
    }
    // Directories last, deepest first: creating entries changed their times.
    b.dir_attrs
        .sort_by_key(|(p, _, _, _)| std::cmp::Reverse(p.len()));
    for (p, ino, set, meta) in &b.dir_attrs {
        let shown = format!("/{}", String::from_utf8_lossy(&p.join(&b'/')));
        set_xattrs(fs, *ino, meta, &shown)?;
        fs.setattr(*ino, set)
            .map_err(|err| CliError::fs(&shown, &err))?;
    }
    Ok(sum)
}

fn path_of(bytes: Vec<u8>) -> std::path::PathBuf {
    <std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(bytes).into()
}

fn set_xattrs(fs: &Filesystem, ino: Ino, meta: &Meta, shown: &str) -> CliResult<()> {
    for (name, value) in &meta.xattrs {
        fs.setxattr(ino, name, value, XattrSet::Any).map_err(|e| {
            CliError::fs(
                format!("{shown}: xattr {}", String::from_utf8_lossy(name)),
                &e,
            )
        })?;
    }
    Ok(())
}

/// Copy an entry's data into `ino` ([`rxfs::populate::stream`]).
fn copy_data(
    fs: &Filesystem,
    ino: Ino,
    r: &mut dyn Read,
    size: u64,
    shown: &str,
) -> CliResult<u64> {
    let mut buf = vec![0u8; 1 << 20];
    stream_result(
        rxfs::populate::stream::copy_stream(fs, ino, r, size, &mut buf),
        shown,
        shown,
    )
}

/// A stream copy's result, its error naming the source as `source` or
/// the image path as `shown`.
pub fn stream_result(
    r: Result<u64, rxfs::populate::stream::StreamError>,
    source: &str,
    shown: &str,
) -> CliResult<u64> {
    use rxfs::populate::stream::StreamError;
    r.map_err(|e| match e {
        StreamError::Source(e) => CliError::io(source, &e),
        StreamError::Image(e) => CliError::fs(shown, &e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pax_times() {
        let t = pax_time("1700000000.5").unwrap();
        assert_eq!((t.sec, t.nsec), (1_700_000_000, 500_000_000));
        let t = pax_time("12").unwrap();
        assert_eq!((t.sec, t.nsec), (12, 0));
        let t = pax_time("-1.25").unwrap();
        assert_eq!((t.sec, t.nsec), (-2, 750_000_000));
        assert!(pax_time("soon").is_none());
    }

    #[test]
    fn acl_text_to_xattr() {
        let v = acl_xattr("user::rw-,user:1000:r--,group::r-x,mask::r-x,other::---").unwrap();
        assert_eq!(&v[..4], &2u32.to_le_bytes());
        let ents: Vec<(u16, u16, u32)> = v[4..]
            .chunks(8)
            .map(|c| {
                (
                    u16::from_le_bytes([c[0], c[1]]),
                    u16::from_le_bytes([c[2], c[3]]),
                    u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
                )
            })
            .collect();
        assert_eq!(
            ents,
            vec![
                (1, 6, u32::MAX),
                (2, 4, 1000),
                (4, 5, u32::MAX),
                (0x10, 5, u32::MAX),
                (0x20, 0, u32::MAX)
            ]
        );
        // star's form: a name with the numeric id after it.
        assert!(acl_xattr("user:bob:rwx:1001").is_ok());
        assert!(acl_xattr("user:no-such-user-here:rwx").is_err());
        assert!(acl_xattr("user:root:rwx").is_ok());
    }

    #[test]
    fn dotdot_is_refused() {
        assert!(components(Path::new("a/../b"), "x").is_err());
        assert_eq!(components(Path::new("./a/b"), "x").unwrap().len(), 2);
        assert_eq!(components(Path::new("/"), "x").unwrap().len(), 0);
    }
}
