#!/usr/bin/env python3
"""Tree manifest of a mounted filesystem: the oracle format rxfs is compared against.

Usage: manifest.py MOUNTPOINT [-o OUTPUT]      (or import and call `manifest_lines`)

One JSON object per line for every path reachable from the root, without following
symbolic links or crossing into other mounts. Each hard-link path is listed on its own
line (with the same "ino"). Lines are sorted by the raw bytes of the path.

Keys, always in this order:

  path    "/" for the root, "/a/b" below it; the raw bytes decoded as UTF-8 with
          errors='backslashreplace' (a byte 0xff that is not valid UTF-8 becomes the
          four characters \\xff)
  type    "reg" | "dir" | "lnk" | "chr" | "blk" | "fifo" | "sock"
  ino     st_ino
  mode    st_mode & 0o7777 (permission, setuid/setgid/sticky bits; no type bits)
  uid, gid, nlink, size
  blocks  st_blocks (512-byte units)
  atime, mtime, ctime   st_*time_ns (integers, may be negative)
  rdev    [major, minor] for "chr"/"blk", else null
  xattrs  object: full name (e.g. "user.foo", "system.posix_acl_access") -> value as
          lowercase hex; names sorted by their raw bytes; read with follow_symlinks=False
          (llistxattr/lgetxattr); names decoded like paths
  target  "lnk" only: the link target, decoded like paths
  sha256  "reg" only: lowercase hex SHA-256 of the whole contents

Serialization is exactly Python's `json.dumps(obj, separators=(',', ':'))`, i.e.
ensure_ascii=True: output is pure ASCII; '"' and '\\' are escaped as \\" and \\\\;
\\n \\r \\t \\b \\f use their short escapes; other characters below 0x20 and all
non-ASCII characters become \\u followed by 4 lowercase hex digits (characters above
U+FFFF as a UTF-16 surrogate pair). Keys appear in the order above, and a key that does
not apply ("target", "sha256") is absent rather than null. Lines end with "\\n".
"""

from __future__ import annotations

import argparse
import errno
import hashlib
import json
import os
import stat
import sys
from typing import Iterator

_TYPES = {
    stat.S_IFREG: "reg",
    stat.S_IFDIR: "dir",
    stat.S_IFLNK: "lnk",
    stat.S_IFCHR: "chr",
    stat.S_IFBLK: "blk",
    stat.S_IFIFO: "fifo",
    stat.S_IFSOCK: "sock",
}

_CHUNK = 1 << 20
_ZEROS = bytes(_CHUNK)


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="backslashreplace")


# O_NOATIME needs ownership or CAP_FOWNER; root has that (and on ro mounts it is moot).
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | (getattr(os, "O_NOATIME", 0) if os.geteuid() == 0 else 0)


def _hash_file(path: bytes) -> str:
    """SHA-256 of a regular file. Holes found with SEEK_DATA/SEEK_HOLE are hashed as
    zeros without being read (same digest, much faster on multi-GiB sparse files);
    where those seeks are unsupported the whole file is read."""
    h = hashlib.sha256()
    fd = os.open(path, _OPEN_FLAGS)
    try:
        size = os.fstat(fd).st_size
        pos = 0
        seek_ok = True
        while pos < size:
            data = pos
            if seek_ok:
                try:
                    data = min(os.lseek(fd, pos, os.SEEK_DATA), size)
                except OSError as e:
                    if e.errno == errno.ENXIO:
                        data = size  # nothing but a hole up to EOF
                    else:
                        seek_ok = False
            _feed_zeros(h, data - pos)
            pos = data
            if pos >= size:
                break
            end = size
            if seek_ok:
                try:
                    end = min(os.lseek(fd, pos, os.SEEK_HOLE), size)
                except OSError:
                    seek_ok = False
                if end <= pos:
                    end = size
            while pos < end:
                buf = os.pread(fd, min(_CHUNK, end - pos), pos)
                if not buf:
                    raise OSError(errno.EIO, f"short read at {pos} of {size}", _decode(path))
                h.update(buf)
                pos += len(buf)
        return h.hexdigest()
    finally:
        os.close(fd)


def _feed_zeros(h, n: int) -> None:
    while n > 0:
        k = min(n, _CHUNK)
        h.update(_ZEROS if k == _CHUNK else _ZEROS[:k])
        n -= k


def _xattrs(path: bytes) -> dict[str, str]:
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError as e:
        if e.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            return {}
        raise
    raw_names = sorted(os.fsencode(n) for n in names)
    out: dict[str, str] = {}
    for raw in raw_names:
        value = os.getxattr(path, raw, follow_symlinks=False)
        out[_decode(raw)] = value.hex()
    return out


def _full(prefix: bytes, rel: bytes) -> bytes:
    """Absolute path of `rel` (b"/" or b"/a/b") under a mount point given as `prefix`
    (its path without trailing slashes; b"" for the system root)."""
    return (prefix or b"/") if rel == b"/" else prefix + rel


def entry(prefix: bytes, rel: bytes) -> dict:
    """The manifest object of one path. `rel` is b"/" or b"/a/b"."""
    full = _full(prefix, rel)
    st = os.lstat(full)
    kind = _TYPES.get(stat.S_IFMT(st.st_mode))
    if kind is None:
        raise ValueError(f"unknown file type {st.st_mode:o} at {_decode(rel)}")
    obj: dict = {
        "path": _decode(rel),
        "type": kind,
        "ino": st.st_ino,
        "mode": st.st_mode & 0o7777,
        "uid": st.st_uid,
        "gid": st.st_gid,
        "nlink": st.st_nlink,
        "size": st.st_size,
        "blocks": st.st_blocks,
        "atime": st.st_atime_ns,
        "mtime": st.st_mtime_ns,
        "ctime": st.st_ctime_ns,
        "rdev": [os.major(st.st_rdev), os.minor(st.st_rdev)] if kind in ("chr", "blk") else None,
        "xattrs": _xattrs(full),
    }
    if kind == "lnk":
        obj["target"] = _decode(os.readlink(full))
    elif kind == "reg":
        obj["sha256"] = _hash_file(full)
    return obj


def walk(prefix: bytes) -> Iterator[bytes]:
    """Every path (b"/" and b"/a/b" forms, unsorted) below the mount point `prefix`.
    Follows no symlinks and does not descend into other mounted filesystems."""
    root_dev = os.lstat(_full(prefix, b"/")).st_dev
    yield b"/"
    stack = [b""]
    while stack:
        rel = stack.pop()
        with os.scandir(_full(prefix, rel or b"/")) as it:
            for de in it:
                child = rel + b"/" + de.name
                yield child
                if de.is_dir(follow_symlinks=False) and de.stat(follow_symlinks=False).st_dev == root_dev:
                    stack.append(child)


def manifest_objects(mountpoint: str | bytes) -> list[dict]:
    prefix = os.fsencode(mountpoint).rstrip(b"/")
    return [entry(prefix, rel) for rel in sorted(walk(prefix))]


def dumps(obj: dict) -> str:
    return json.dumps(obj, separators=(",", ":"))


def manifest_lines(mountpoint: str | bytes) -> list[str]:
    """The manifest as a list of lines, each ending with a newline."""
    return [dumps(o) + "\n" for o in manifest_objects(mountpoint)]


def write_manifest(mountpoint: str | bytes, out_path: str) -> int:
    lines = manifest_lines(mountpoint)
    tmp = out_path + ".tmp"
    with open(tmp, "w", encoding="ascii") as f:
        f.writelines(lines)
    os.replace(tmp, out_path)
    return len(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mountpoint")
    ap.add_argument("-o", "--output", help="write here instead of stdout")
    args = ap.parse_args(argv)
    if args.output:
        write_manifest(args.mountpoint, args.output)
    else:
        out = sys.stdout
        for line in manifest_lines(args.mountpoint):
            out.write(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
