//! mkfs.xfs's prototype file, `rxfs mkfs -p PROTOFILE`: the format its
//! manual defines, parsed into a tree and then made through the
//! read-write library.
//!
//! The format is a stream of tokens separated by blanks and newlines; `:`
//! starts a comment that runs to the end of its line. First a dummy token
//! (once the boot file) and two numbers (once block and inode counts),
//! all ignored; then the root directory's specification, then, for each
//! directory, its entries (`NAME SPEC`) up to a `$` token. A
//! specification is a 6-character mode (type `-bcdpl`, `u` or `-` for
//! set-user-ID, `g` or `-` for set-group-ID, three octal permission
//! digits; like mkfs.xfs, characters after the sixth are ignored), the owner's uid and gid, and by type: a regular file the host
//! path its contents come from, a device its major and minor numbers, a
//! symbolic link its target, a directory its entries. With
//! `slashes_are_spaces=1` a `/` in an entry name stands for a space.
//!
//! Times are those of the build ("now", or `SOURCE_DATE_EPOCH`), as
//! mkfs.xfs gives them.

use std::path::{Path, PathBuf};

use rxfs::bmap::data::SetAttr;
use rxfs::fs::ops_ns::CreateArgs;
use rxfs::types::Ino;
use rxfs::Filesystem;

use crate::{CliError, CliResult};

/// What a specification makes.
#[derive(Debug, PartialEq, Eq)]
pub enum Kind {
    Regular(PathBuf),
    Dir(Vec<Entry>),
    Block(u32, u32),
    Char(u32, u32),
    Fifo,
    Symlink(Vec<u8>),
}

/// One file's specification.
#[derive(Debug, PartialEq, Eq)]
pub struct Spec {
    /// Permission bits with set-user-ID and set-group-ID.
    pub perm: u32,
    pub uid: u32,
    pub gid: u32,
    pub kind: Kind,
}

/// A named entry of a directory.
#[derive(Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: Vec<u8>,
    pub spec: Spec,
}

/// Tokens with their line numbers, comments dropped.
struct Tokens<'a> {
    toks: Vec<(usize, &'a str)>,
    at: usize,
}

impl<'a> Tokens<'a> {
    fn new(text: &'a str) -> Self {
        let mut toks = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = match line.find(':') {
                Some(i) => &line[..i],
                None => line,
            };
            toks.extend(line.split_whitespace().map(|t| (n + 1, t)));
        }
        Tokens { toks, at: 0 }
    }

    fn next(&mut self, what: &str) -> Result<(usize, &'a str), String> {
        let t = self
            .toks
            .get(self.at)
            .copied()
            .ok_or_else(|| format!("ends where {what} was expected"))?;
        self.at += 1;
        Ok(t)
    }

    fn number(&mut self, what: &str) -> Result<u32, String> {
        let (line, t) = self.next(what)?;
        t.parse()
            .map_err(|_| format!("line {line}: {what} must be a number, not '{t}'"))
    }
}

/// Parse a prototype file; the root directory's specification.
pub fn parse(text: &str, slashes_are_spaces: bool) -> Result<Spec, String> {
    let mut t = Tokens::new(text);
    t.next("the boot file name")?;
    t.number("the block count")?;
    t.number("the inode count")?;
    let root = spec(&mut t, slashes_are_spaces)?;
    if !matches!(root.kind, Kind::Dir(_)) {
        return Err("the root must be a directory (mode d...)".into());
    }
    if let Some((line, tok)) = t.toks.get(t.at) {
        return Err(format!(
            "line {line}: '{tok}' after the root directory's final $"
        ));
    }
    Ok(root)
}

fn spec(t: &mut Tokens<'_>, slashes: bool) -> Result<Spec, String> {
    let (line, mode) = t.next("a mode")?;
    let m = mode.as_bytes();
    let bad = || {
        format!("line {line}: bad mode '{mode}' (type -bcdpl, u or -, g or -, three octal digits)")
    };
    // mkfs.xfs reads the first six characters (what follows the three
    // digits is ignored there, and here too).
    if m.len() < 6 || !m[3..6].iter().all(|c| (b'0'..=b'7').contains(c)) {
        return Err(bad());
    }
    let mut perm = u32::from_str_radix(&mode[3..6], 8).map_err(|_| bad())?;
    perm |= match m[1] {
        b'u' => 0o4000,
        b'-' => 0,
        _ => return Err(bad()),
    };
    perm |= match m[2] {
        b'g' => 0o2000,
        b'-' => 0,
        _ => return Err(bad()),
    };
    let uid = t.number("a uid")?;
    let gid = t.number("a gid")?;
    let kind = match m[0] {
        b'-' => Kind::Regular(PathBuf::from(t.next("a source file")?.1)),
        b'b' => Kind::Block(t.number("a major number")?, t.number("a minor number")?),
        b'c' => Kind::Char(t.number("a major number")?, t.number("a minor number")?),
        b'p' => Kind::Fifo,
        b'l' => Kind::Symlink(t.next("a link target")?.1.as_bytes().to_vec()),
        b'd' => {
            let mut entries = Vec::new();
            loop {
                let (line, name) = t.next("an entry name or $")?;
                if name == "$" {
                    break;
                }
                let name = if slashes {
                    name.replace('/', " ")
                } else if name.contains('/') {
                    return Err(format!("line {line}: '{name}': a name cannot contain /"));
                } else {
                    name.to_string()
                };
                if entries.iter().any(|e: &Entry| e.name == name.as_bytes()) {
                    return Err(format!("line {line}: '{name}' appears twice"));
                }
                let spec = spec(t, slashes)?;
                entries.push(Entry {
                    name: name.into_bytes(),
                    spec,
                });
            }
            Kind::Dir(entries)
        }
        _ => return Err(bad()),
    };
    Ok(Spec {
        perm,
        uid,
        gid,
        kind,
    })
}

/// Make the tree of `root` in `fs` (whose root directory exists): the
/// root takes its mode and owner, the entries are created.
pub fn apply(fs: &Filesystem, root: &Spec) -> CliResult<()> {
    let rino = fs.root_ino();
    let set = SetAttr {
        mode: Some(root.perm),
        uid: Some(root.uid),
        gid: Some(root.gid),
        ..Default::default()
    };
    fs.setattr(rino, &set)
        .map_err(|e| CliError::fs("prototype root", &e))?;
    if let Kind::Dir(entries) = &root.kind {
        make_entries(fs, rino, Path::new("/"), entries)?;
    }
    Ok(())
}

fn make_entries(fs: &Filesystem, dir: Ino, at: &Path, entries: &[Entry]) -> CliResult<()> {
    use std::os::unix::ffi::OsStrExt;
    for e in entries {
        let path = at.join(std::ffi::OsStr::from_bytes(&e.name));
        let shown = path.display().to_string();
        let s = &e.spec;
        let args = |fmt: u32, rdev: u32| CreateArgs {
            mode: fmt | s.perm,
            uid: s.uid,
            gid: s.gid,
            rdev,
            umask: 0,
        };
        let made = match &s.kind {
            Kind::Dir(sub) => {
                let ip = fs
                    .mkdir(dir, &e.name, &args(libc::S_IFDIR, 0))
                    .map_err(|err| CliError::fs(&shown, &err))?;
                make_entries(fs, ip.ino, &path, sub)?;
                continue;
            }
            Kind::Regular(src) => {
                let ip = fs.create(dir, &e.name, &args(libc::S_IFREG, 0));
                let ip = ip.map_err(|err| CliError::fs(&shown, &err))?;
                copy_contents(fs, ip.ino, src, &shown)?;
                Ok(ip)
            }
            Kind::Block(ma, mi) => fs.create(
                dir,
                &e.name,
                &args(libc::S_IFBLK, rxfs::populate::stream::dev_number(*ma, *mi)),
            ),
            Kind::Char(ma, mi) => fs.create(
                dir,
                &e.name,
                &args(libc::S_IFCHR, rxfs::populate::stream::dev_number(*ma, *mi)),
            ),
            Kind::Fifo => fs.create(dir, &e.name, &args(libc::S_IFIFO, 0)),
            Kind::Symlink(target) => {
                // mkfs.xfs keeps a link's given mode (symlink(2) would make
                // it 0777).
                fs.symlink(dir, &e.name, target, &args(libc::S_IFLNK, 0))
                    .and_then(|ip| {
                        let set = SetAttr {
                            mode: Some(s.perm),
                            ..Default::default()
                        };
                        fs.setattr(ip.ino, &set)
                    })
            }
        };
        made.map_err(|err| CliError::fs(&shown, &err))?;
    }
    Ok(())
}

/// Copy host file `src` into `ino`.
fn copy_contents(fs: &Filesystem, ino: Ino, src: &Path, shown: &str) -> CliResult<()> {
    let source = format!("{shown}: source {}", src.display());
    let mut f = std::fs::File::open(src).map_err(|e| CliError::io(&source, &e))?;
    let size = f.metadata().map_err(|e| CliError::io(&source, &e))?.len();
    let mut buf = vec![0u8; 1 << 20];
    let r = rxfs::populate::stream::copy_stream(fs, ino, &mut f, size, &mut buf);
    super::populate_tar::stream_result(r, &source, shown).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANUAL: &str = "/stand/diskboot
4872 110
d--777 3 1
usr     d--777 3 1
sh      ---755 3 1 /bin/sh
ken     d--755 6 1
        $
b0      b--644 3 1 0 0
c0      c--644 3 1 0 0
fifo    p--644 3 1
slink   l--644 3 1 /a/symbolic/link
:  This is a comment line
$
$
";

    #[test]
    fn the_manuals_example() {
        let root = parse(MANUAL, false).unwrap();
        assert_eq!((root.perm, root.uid, root.gid), (0o777, 3, 1));
        let Kind::Dir(top) = &root.kind else { panic!() };
        assert_eq!(top.len(), 1);
        assert_eq!(top[0].name, b"usr");
        let Kind::Dir(usr) = &top[0].spec.kind else {
            panic!()
        };
        let names: Vec<&[u8]> = usr.iter().map(|e| &e.name[..]).collect();
        assert_eq!(names, [&b"sh"[..], b"ken", b"b0", b"c0", b"fifo", b"slink"]);
        assert_eq!(usr[0].spec.kind, Kind::Regular("/bin/sh".into()));
        assert_eq!(usr[1].spec.kind, Kind::Dir(vec![]));
        assert_eq!(usr[1].spec.uid, 6);
        assert_eq!(usr[2].spec.kind, Kind::Block(0, 0));
        assert_eq!(
            usr[5].spec.kind,
            Kind::Symlink(b"/a/symbolic/link".to_vec())
        );
    }

    #[test]
    fn set_id_bits_and_spaces() {
        let root = parse("x 0 0 d--755 0 0 a/b -ug755 1 2 /etc/hostname $", true).unwrap();
        let Kind::Dir(top) = &root.kind else { panic!() };
        assert_eq!(top[0].name, b"a b");
        assert_eq!(top[0].spec.perm, 0o6755);
    }

    #[test]
    fn errors_name_the_line() {
        for (text, says) in [
            (
                "x 0 0 d--755 0 0 f -x-644 0 0 /a $",
                "line 1: bad mode '-x-644'",
            ),
            (
                "x 0 0 d--755 0 0 f ---64 0 0 /a $",
                "line 1: bad mode '---64'",
            ),
            (
                "x\n0 0\nd--755 0 0\nf ---644 zero 0 /a\n$",
                "line 4: a uid must be a number",
            ),
            (
                "x 0 0 d--755 0 0 f ---644 0 0",
                "ends where a source file was expected",
            ),
            ("x 0 0 ---755 0 0 /a", "the root must be a directory"),
            (
                "x 0 0 d--755 0 0 a/b ---644 0 0 /a $",
                "a name cannot contain /",
            ),
            (
                "x 0 0 d--755 0 0 a p--644 0 0 a p--644 0 0 $",
                "'a' appears twice",
            ),
            ("x 0 0 d--755 0 0 $ extra", "'extra' after the root"),
        ] {
            let e = parse(text, false).unwrap_err();
            assert!(e.contains(says), "{text:?}: {e}");
        }
    }
}
