"""Read and write XFS filesystem images from Python, without the kernel's driver.

>>> import rxfs
>>> rxfs.mkfs("disk.img", size="1g", label="data")            # doctest: +SKIP
>>> with rxfs.open("disk.img", rw=True) as fs:                   # doctest: +SKIP
...     fs.makedirs("/srv/www")
...     with fs.open("/srv/www/index.html", "wb") as f:
...         f.write(b"<h1>hello</h1>\\n")
>>> with rxfs.open("disk.img") as fs:                            # doctest: +SKIP
...     for top, dirs, files in fs.walk("/"):
...         print(top, dirs, files)

Every change is a logged transaction, as the kernel's XFS makes it; closing
a read-write filesystem commits and unmounts it cleanly, so `xfs_repair -n`
finds the image clean and the kernel mounts it. Paths are str (encoded with
the filesystem encoding, as `os` does), bytes, or path-like, always from the
image's root. Errors are `OSError` subclasses with the errno the kernel
would give (`FileNotFoundError`, `IsADirectoryError`...); corrupt metadata
raises `CorruptFilesystemError` (errno EUCLEAN). Calls release the GIL while
they read or write, so threads read in parallel.
"""

from __future__ import annotations

import io
import os
import stat as _stat
from typing import IO, Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Tuple, Union

from . import _rxfs
from ._rxfs import CorruptFilesystemError, StatResult

__all__ = [
    "open",
    "mkfs",
    "check",
    "populate",
    "FileSystem",
    "DirEntry",
    "RawFile",
    "StatResult",
    "StatVfsResult",
    "Finding",
    "CorruptFilesystemError",
]

PathType = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

_SIZE_SUFFIXES = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}


def _size(v: Union[int, str, None]) -> Optional[int]:
    """An int, or a string with a k/m/g/t/p suffix (as mkfs.xfs takes)."""
    if v is None or isinstance(v, int):
        return v
    s = str(v).strip().lower()
    if s and s[-1] in _SIZE_SUFFIXES:
        return int(s[:-1]) * _SIZE_SUFFIXES[s[-1]]
    return int(s)


def _p(path: PathType) -> bytes:
    """An image path as bytes, from the root."""
    b = os.fsencode(path)
    if not b:
        raise FileNotFoundError(2, "No such file or directory", "")
    return b


def _join(top: bytes, name: bytes) -> bytes:
    return top + name if top.endswith(b"/") else top + b"/" + name


class StatVfsResult(NamedTuple):
    """`os.statvfs_result`'s fields for the image."""

    f_bsize: int
    f_frsize: int
    f_blocks: int
    f_bfree: int
    f_bavail: int
    f_files: int
    f_ffree: int
    f_namemax: int


class Finding(NamedTuple):
    """One inconsistency `check` found."""

    code: str
    ag: Optional[int]
    block: Optional[int]
    ino: Optional[int]
    message: str


class DirEntry:
    """One entry of `FileSystem.scandir`, like `os.DirEntry`: its type comes
    from the directory itself (no extra inode read); `stat()` reads the
    inode once and keeps it."""

    __slots__ = ("name", "path", "inode_number", "_dtype", "_fs", "_stat", "_lstat", "_bytes")

    def __init__(self, fs: "FileSystem", top: bytes, name: bytes, ino: int, dtype: int, as_bytes: bool):
        self._fs = fs
        self._bytes = as_bytes
        full = _join(top, name)
        self.name = name if as_bytes else os.fsdecode(name)
        self.path = full if as_bytes else os.fsdecode(full)
        self.inode_number = ino
        self._dtype = dtype
        self._stat: Optional[StatResult] = None
        self._lstat: Optional[StatResult] = None

    def inode(self) -> int:
        return self.inode_number

    def _type_bits(self, follow_symlinks: bool) -> int:
        if self._dtype == 0 or (follow_symlinks and self._dtype == 10):  # DT_UNKNOWN, DT_LNK
            try:
                return _stat.S_IFMT(self.stat(follow_symlinks=follow_symlinks).st_mode)
            except FileNotFoundError:
                return 0
        return {1: _stat.S_IFIFO, 2: _stat.S_IFCHR, 4: _stat.S_IFDIR, 6: _stat.S_IFBLK,
                8: _stat.S_IFREG, 10: _stat.S_IFLNK, 12: _stat.S_IFSOCK}.get(self._dtype, 0)

    def is_dir(self, *, follow_symlinks: bool = True) -> bool:
        return self._type_bits(follow_symlinks) == _stat.S_IFDIR

    def is_file(self, *, follow_symlinks: bool = True) -> bool:
        return self._type_bits(follow_symlinks) == _stat.S_IFREG

    def is_symlink(self) -> bool:
        return self._type_bits(False) == _stat.S_IFLNK

    def stat(self, *, follow_symlinks: bool = True) -> StatResult:
        if follow_symlinks and self._dtype == 10:
            if self._stat is None:
                self._stat = self._fs.stat(self.path)
            return self._stat
        if self._lstat is None:
            self._lstat = self._fs._vol.stat_ino(self.inode_number)
        return self._lstat

    def __fspath__(self) -> Union[str, bytes]:
        return self.path

    def __repr__(self) -> str:
        return f"<rxfs.DirEntry {self.name!r}>"


class RawFile(io.RawIOBase):
    """An open file of an image: `io.RawIOBase` with `read`, `readinto`,
    `write`, `seek`, `tell`, `truncate`, `fileno`-less. `FileSystem.open`
    wraps it in a buffered reader or writer unless `buffering=0`."""

    def __init__(self, f: _rxfs.File, name: str, mode: str, readable: bool, writable: bool, append: bool):
        super().__init__()
        self._f = f
        self.name = name
        self.mode = mode
        self._readable = readable
        self._writable = writable
        self._append = append
        self._pos = 0

    def readable(self) -> bool:
        return self._readable

    def writable(self) -> bool:
        return self._writable

    def seekable(self) -> bool:
        return True

    def _check(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed file")

    def readinto(self, b: Any) -> int:
        self._check()
        if not self._readable:
            raise io.UnsupportedOperation("not readable")
        m = memoryview(b).cast("B")
        n = self._f.readinto_at(self._pos, m)
        self._pos += n
        return n

    def read(self, size: int = -1) -> bytes:
        self._check()
        if not self._readable:
            raise io.UnsupportedOperation("not readable")
        if size is None or size < 0:
            return self.readall()
        data = self._f.read_at(self._pos, size)
        self._pos += len(data)
        return data

    def readall(self) -> bytes:
        self._check()
        end = self._f.fstat().st_size
        data = self._f.read_at(self._pos, max(end - self._pos, 0))
        self._pos += len(data)
        # The file may have grown since the stat.
        while True:
            more = self._f.read_at(self._pos, 1 << 20)
            if not more:
                return data
            data += more
            self._pos += len(more)

    def write(self, b: Any) -> int:
        self._check()
        if not self._writable:
            raise io.UnsupportedOperation("not writable")
        if self._append:
            self._pos = self._f.fstat().st_size
        data = bytes(b)
        n = self._f.write_at(self._pos, data)
        self._pos += n
        return n

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._check()
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self._f.fstat().st_size + offset
        else:
            raise ValueError(f"invalid whence ({whence})")
        if pos < 0:
            raise OSError(22, "Invalid argument")
        self._pos = pos
        return pos

    def tell(self) -> int:
        self._check()
        return self._pos

    def truncate(self, size: Optional[int] = None) -> int:
        self._check()
        if not self._writable:
            raise io.UnsupportedOperation("not writable")
        size = self._pos if size is None else size
        self._f.truncate(size)
        return size

    def fsync(self) -> None:
        """Make this file's data and metadata durable (fsync(2))."""
        self._check()
        self._f.fsync()

    def stat(self) -> StatResult:
        self._check()
        return self._f.fstat()

    def close(self) -> None:
        if not self.closed:
            try:
                self._f.close()
            finally:
                super().close()


class FileSystem:
    """An open XFS image (see `rxfs.open`); a context manager."""

    def __init__(self, path: PathType, *, rw: bool = False, rtdev: Optional[PathType] = None,
                 offset: int = 0, partition: Optional[int] = None,
                 owner: Optional[Tuple[int, int]] = None):
        self.path = os.fspath(path)
        self._vol = _rxfs.Volume(os.fsdecode(path), rw, None if rtdev is None else os.fsdecode(rtdev),
                                 offset, partition, owner)
        self._closed = False

    # -- lifetime --

    @property
    def writable(self) -> bool:
        return self._vol.writable

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Commit every change and unmount cleanly (read-write), or just
        close. Idempotent."""
        if not self._closed:
            self._closed = True
            self._vol.close()

    def __enter__(self) -> "FileSystem":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("rw" if self.writable else "ro")
        return f"<rxfs.FileSystem {self.path!r} {state}>"

    def _v(self) -> _rxfs.Volume:
        if self._closed:
            raise ValueError("I/O operation on closed filesystem")
        return self._vol

    # -- reading --

    def stat(self, path: PathType, *, follow_symlinks: bool = True) -> StatResult:
        return self._v().stat(_p(path), follow_symlinks)

    def lstat(self, path: PathType) -> StatResult:
        return self._v().stat(_p(path), False)

    def exists(self, path: PathType) -> bool:
        try:
            self.stat(path)
            return True
        except (FileNotFoundError, NotADirectoryError):
            return False

    def lexists(self, path: PathType) -> bool:
        try:
            self.lstat(path)
            return True
        except (FileNotFoundError, NotADirectoryError):
            return False

    def isdir(self, path: PathType) -> bool:
        try:
            return _stat.S_ISDIR(self.stat(path).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            return False

    def isfile(self, path: PathType) -> bool:
        try:
            return _stat.S_ISREG(self.stat(path).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            return False

    def islink(self, path: PathType) -> bool:
        try:
            return _stat.S_ISLNK(self.lstat(path).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            return False

    def listdir(self, path: PathType = "/") -> List[Any]:
        """Names in the directory, in directory order (str, or bytes for a
        bytes path)."""
        as_bytes = isinstance(path, bytes)
        names = [e[0] for e in self._v().read_dir(_p(path))]
        return names if as_bytes else [os.fsdecode(n) for n in names]

    def scandir(self, path: PathType = "/") -> Iterator[DirEntry]:
        """`DirEntry` objects of the directory, like `os.scandir`."""
        as_bytes = isinstance(path, bytes)
        top = _p(path)
        for name, ino, dtype in self._v().read_dir(top):
            yield DirEntry(self, top, name, ino, dtype, as_bytes)

    def walk(self, top: PathType = "/", topdown: bool = True,
             onerror: Optional[Callable[[OSError], object]] = None,
             followlinks: bool = False) -> Iterator[Tuple[Any, List[Any], List[Any]]]:
        """`os.walk` over the image."""
        as_bytes = isinstance(top, bytes)
        stack: List[Any] = [_p(top)]
        while stack:
            cur = stack.pop()
            if isinstance(cur, tuple):  # bottom-up: emit after the children
                yield cur[1]
                continue
            try:
                entries = self._v().read_dir(cur)
            except OSError as e:
                if onerror is not None:
                    onerror(e)
                continue
            dirs, files, links = [], [], []
            for name, ino, dtype in entries:
                if dtype == 4:
                    dirs.append(name)
                elif dtype == 10 and followlinks:
                    full = _join(cur, name)
                    if self.isdir(full):
                        dirs.append(name)
                        links.append(name)
                    else:
                        files.append(name)
                elif dtype == 0:
                    (dirs if _stat.S_ISDIR(self._v().stat_ino(ino).st_mode) else files).append(name)
                else:
                    files.append(name)
            shown = cur if as_bytes else os.fsdecode(cur)
            out_d = dirs if as_bytes else [os.fsdecode(d) for d in dirs]
            out_f = files if as_bytes else [os.fsdecode(f) for f in files]
            item = (shown, out_d, out_f)
            if topdown:
                yield item
                # The caller may have pruned dirs in place.
                names = [os.fsencode(d) for d in out_d]
            else:
                stack.append(("post", item))
                names = dirs
            for d in reversed(names):
                stack.append(_join(cur, d))

    def readlink(self, path: PathType) -> Union[str, bytes]:
        t = self._v().readlink(_p(path))
        return t if isinstance(path, bytes) else os.fsdecode(t)

    def read_bytes(self, path: PathType) -> bytes:
        """The whole contents of a file."""
        return self._v().read_file(_p(path))

    def read_text(self, path: PathType, encoding: Optional[str] = None, errors: Optional[str] = None) -> str:
        return self.read_bytes(path).decode(encoding or "utf-8", errors or "strict")

    def listxattr(self, path: PathType, *, follow_symlinks: bool = True) -> List[str]:
        return [os.fsdecode(n) for n in self._v().listxattr(_p(path), follow_symlinks)]

    def getxattr(self, path: PathType, attribute: Union[str, bytes], *, follow_symlinks: bool = True) -> bytes:
        return self._v().getxattr(_p(path), os.fsencode(attribute), follow_symlinks)

    def statvfs(self, path: PathType = "/") -> StatVfsResult:
        self.stat(path)
        return StatVfsResult(*self._v().statvfs())

    # -- files --

    def open(self, path: PathType, mode: str = "rb", buffering: int = -1, encoding: Optional[str] = None,
             errors: Optional[str] = None, newline: Optional[str] = None) -> Any:
        """Open a file of the image, as the built-in `open`: "rb", "wb",
        "ab", "xb", "r+b", "w+b", "a+b" (text modes too, through
        `io.TextIOWrapper`). New files get mode 0o666 minus the umask."""
        chars = set(mode)
        if not chars <= set("rwaxbt+") or len(chars & set("rwax")) != 1 or {"b", "t"} <= chars:
            raise ValueError(f"invalid mode: {mode!r}")
        plus = "+" in chars
        readable = "r" in chars or plus
        writable = bool(chars & set("wax")) or plus
        flags = 0
        if readable:
            flags |= _rxfs.OPEN_READ
        if writable:
            flags |= _rxfs.OPEN_WRITE
        if "w" in chars:
            flags |= _rxfs.OPEN_CREATE | _rxfs.OPEN_TRUNCATE
        if "a" in chars:
            flags |= _rxfs.OPEN_CREATE
        if "x" in chars:
            flags |= _rxfs.OPEN_CREATE | _rxfs.OPEN_EXCL
        f = self._v().open_file(_p(path), flags, 0o666)
        raw = RawFile(f, os.fsdecode(path), mode, readable, writable, "a" in chars)
        if "a" in chars:
            raw.seek(0, io.SEEK_END)
        binary = "b" in chars
        if buffering == 0:
            if not binary:
                raw.close()
                raise ValueError("can't have unbuffered text I/O")
            return raw
        size = io.DEFAULT_BUFFER_SIZE if buffering in (-1, 1) else buffering
        buf: Union[io.BufferedRandom, io.BufferedWriter, io.BufferedReader]
        if readable and writable:
            buf = io.BufferedRandom(raw, size)
        elif writable:
            buf = io.BufferedWriter(raw, size)
        else:
            buf = io.BufferedReader(raw, size)
        if binary:
            return buf
        return io.TextIOWrapper(buf, encoding or "utf-8", errors, newline, line_buffering=buffering == 1)

    # -- changes --

    def mkdir(self, path: PathType, mode: int = 0o777) -> None:
        self._v().mkdir(_p(path), mode)

    def makedirs(self, path: PathType, mode: int = 0o777, exist_ok: bool = False) -> None:
        """`os.makedirs` in the image."""
        b = _p(path).rstrip(b"/") or b"/"
        if b == b"/":
            if not exist_ok:
                raise FileExistsError(17, "File exists", os.fsdecode(path))
            return
        parent = b.rsplit(b"/", 1)[0] or b"/"
        if parent != b"/" and not self.exists(parent):
            self.makedirs(parent, mode, exist_ok=True)
        try:
            self.mkdir(b, mode)
        except FileExistsError:
            if not exist_ok or not self.isdir(b):
                raise

    def mknod(self, path: PathType, mode: int = 0o600 | _stat.S_IFREG, device: int = 0) -> None:
        self._v().mknod(_p(path), mode, os.major(device), os.minor(device))

    def remove(self, path: PathType) -> None:
        self._v().unlink(_p(path))

    unlink = remove

    def rmdir(self, path: PathType) -> None:
        self._v().rmdir(_p(path))

    def rename(self, src: PathType, dst: PathType) -> None:
        self._v().rename(_p(src), _p(dst))

    replace = rename

    def link(self, src: PathType, dst: PathType) -> None:
        self._v().link(_p(src), _p(dst))

    def symlink(self, target: PathType, path: PathType) -> None:
        """A symbolic link `path` pointing at `target` (as `os.symlink`)."""
        self._v().symlink(os.fsencode(target), _p(path))

    def chmod(self, path: PathType, mode: int, *, follow_symlinks: bool = True) -> None:
        self._v().chmod(_p(path), mode, follow_symlinks)

    def chown(self, path: PathType, uid: int, gid: int, *, follow_symlinks: bool = True) -> None:
        """-1 leaves that id, as `os.chown`."""
        self._v().chown(_p(path), None if uid == -1 else uid, None if gid == -1 else gid, follow_symlinks)

    def utime(self, path: PathType, times: Optional[Tuple[float, float]] = None, *,
              ns: Optional[Tuple[int, int]] = None, follow_symlinks: bool = True) -> None:
        """As `os.utime`: `times` in seconds, or `ns` in nanoseconds; neither
        sets both to now."""
        if times is not None and ns is not None:
            raise ValueError("utime: you may specify either 'times' or 'ns' but not both")
        if ns is None:
            if times is None:
                import time
                now = time.time_ns()
                ns = (now, now)
            else:
                ns = (int(times[0] * 1e9), int(times[1] * 1e9))
        self._v().utime(_p(path), ns[0], ns[1], follow_symlinks)

    def truncate(self, path: PathType, length: int) -> None:
        self._v().truncate(_p(path), length)

    def setxattr(self, path: PathType, attribute: Union[str, bytes], value: bytes, flags: int = 0, *,
                 follow_symlinks: bool = True) -> None:
        """flags: 0, os.XATTR_CREATE or os.XATTR_REPLACE."""
        how = {0: 0, getattr(os, "XATTR_CREATE", 1): 1, getattr(os, "XATTR_REPLACE", 2): 2}.get(flags)
        if how is None:
            raise ValueError(f"invalid xattr flags {flags}")
        self._v().setxattr(_p(path), os.fsencode(attribute), bytes(value), how, follow_symlinks)

    def removexattr(self, path: PathType, attribute: Union[str, bytes], *, follow_symlinks: bool = True) -> None:
        self._v().removexattr(_p(path), os.fsencode(attribute), follow_symlinks)

    def fsync(self) -> None:
        """Make every change so far durable (one log force)."""
        self._v().sync()

    sync = fsync


def open(path: PathType, *, rw: bool = False, rtdev: Optional[PathType] = None, offset: int = 0,
         partition: Optional[int] = None, owner: Optional[Tuple[int, int]] = None) -> FileSystem:
    """Open the XFS image (file or block device) at `path`.

    rw: open read-write (a dirty log is replayed first); read-only opens
    replay a dirty log in memory and write nothing. rtdev: the realtime
    device. offset / partition: the filesystem starts that many bytes in, or
    is partition N of the image's GPT or DOS table. owner: (uid, gid) of what
    this handle creates (default: the process's)."""
    return FileSystem(path, rw=rw, rtdev=rtdev, offset=offset, partition=partition, owner=owner)


_FEATURES = ("crc", "finobt", "sparse", "reflink", "rmapbt", "bigtime", "inobtcount", "nrext64")


def mkfs(path: PathType, size: Union[int, str, None] = None, *, force: bool = False,
         label: Optional[str] = None, uuid: Optional[str] = None, block_size: Union[int, str, None] = None,
         sector_size: Union[int, str, None] = None, inode_size: Union[int, str, None] = None,
         dir_block_size: Union[int, str, None] = None, agcount: Optional[int] = None,
         agsize: Union[int, str, None] = None, log_size: Union[int, str, None] = None,
         imaxpct: Optional[int] = None, **features: bool) -> Dict[str, int]:
    """Make an XFS v5 filesystem, as `mkfs.xfs` (and `rxfs mkfs`) would.

    `path` is an image file (created sparse, or grown, to `size`) or a block
    device. Sizes take k/m/g/t suffixes. Feature flags as keywords:
    crc, finobt, sparse, reflink, rmapbt, bigtime, inobtcount, nrext64
    (True/False; mkfs.xfs's defaults otherwise). A device that holds a
    filesystem is refused (FileExistsError) unless `force=True`.
    With SOURCE_DATE_EPOCH set the result is reproducible. Returns the
    geometry chosen."""
    unknown = set(features) - set(_FEATURES)
    if unknown:
        raise TypeError(f"mkfs() got unexpected keyword arguments {sorted(unknown)}")
    u = None
    if uuid is not None:
        import uuid as _uuid
        u = list(_uuid.UUID(str(uuid)).bytes)
    geo = _rxfs.mkfs(os.fsdecode(path), _size(size), force, label, u, _size(block_size), _size(sector_size),
                     _size(inode_size), _size(dir_block_size), agcount, _size(agsize), _size(log_size),
                     imaxpct, [(k, bool(v)) for k, v in features.items()])
    return dict(geo)


def check(path: PathType, *, rtdev: Optional[PathType] = None) -> List[Finding]:
    """Check an image as it is on disk (read-only, the log not replayed):
    the inconsistencies found, an empty list when it is clean."""
    return [Finding(*f) for f in _rxfs.check(os.fsdecode(path), None if rtdev is None else os.fsdecode(rtdev))]


def populate(image: PathType, source: PathType, dest: PathType = "/", *, owner: Optional[Tuple[int, int]] = None,
             overrides: Optional[PathType] = None, threads: Optional[int] = None,
             rtdev: Optional[PathType] = None) -> Tuple[int, int]:
    """Copy the host directory tree `source` into the directory `dest` of
    `image` (as `rxfs populate`): modes, owners, times, xattrs, ACLs, hard
    links, devices, holes. owner: every file's (uid, gid); overrides: an
    override file (per-path owner, mode, xattrs). Returns (paths, bytes)."""
    return _rxfs.populate(os.fsdecode(image), os.fsdecode(source), _p(dest), owner,
                          None if overrides is None else os.fsdecode(overrides), threads,
                          None if rtdev is None else os.fsdecode(rtdev))
