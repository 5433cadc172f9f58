"""Fixtures of the rxfs Python tests: images made by mkfs.xfs and filled
by the kernel's XFS through a loop mount (the oracle), and helpers that
read what the kernel shows."""

import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from contextlib import contextmanager

import pytest


def need_root():
    if os.geteuid() != 0 or shutil.which("mkfs.xfs") is None:
        pytest.skip("needs root and xfsprogs (kernel loop mounts are the oracle)")


def run(*cmd, check=True):
    return subprocess.run(cmd, check=check, capture_output=True)


@contextmanager
def kernel_mount(img, opts="ro"):
    """Mount `img` with the kernel's XFS; yields the mount point."""
    mnt = tempfile.mkdtemp(prefix="rxfs-py-mnt-")
    run("mount", "-o", f"loop,{opts}", img, mnt)
    try:
        yield mnt
    finally:
        run("umount", mnt)
        os.rmdir(mnt)


def sha(data):
    return hashlib.sha256(data).hexdigest()


def fill_tree(root):
    """A tree with every kind of entry and metadata, made by the kernel."""
    d = os.path.join(root, "dir")
    os.makedirs(os.path.join(d, "sub"))
    with open(os.path.join(d, "file"), "wb") as f:
        f.write(b"hello\n")
    with open(os.path.join(root, "big"), "wb") as f:
        f.write(os.urandom(3 << 20))
    with open(os.path.join(root, "sparse"), "wb") as f:
        f.write(b"a" * 8192)
        f.seek(10 << 20)
        f.write(b"b" * 4096)
        f.truncate(20 << 20)
    open(os.path.join(root, "empty"), "wb").close()
    many = os.path.join(root, "many")
    os.mkdir(many)
    for i in range(1200):
        with open(os.path.join(many, f"entry-{i:04d}"), "wb") as f:
            f.write(str(i).encode() * (i % 7))
    os.symlink("dir/file", os.path.join(root, "sym"))
    os.symlink("x" * 900, os.path.join(root, "longsym"))
    with open(os.path.join(root, "hard1"), "wb") as f:
        f.write(b"linked")
    os.link(os.path.join(root, "hard1"), os.path.join(d, "hard2"))
    os.mknod(os.path.join(root, "chr"), stat.S_IFCHR | 0o640, os.makedev(4, 5))
    os.mknod(os.path.join(root, "blk"), stat.S_IFBLK | 0o600, os.makedev(259, 70000))
    os.mkfifo(os.path.join(root, "fifo"))
    owned = os.path.join(root, "owned")
    with open(owned, "wb") as f:
        f.write(b"owned")
    os.chown(owned, 1234, 5678)
    os.chmod(owned, 0o4755)
    xf = os.path.join(root, "xattrs")
    with open(xf, "wb") as f:
        f.write(b"x")
    os.setxattr(xf, "user.small", b"value")
    os.setxattr(xf, "user.binary", bytes([0, 1, 2, 255]))
    os.setxattr(xf, "user.big", os.urandom(3000))
    os.setxattr(xf, "trusted.t", b"trusted")
    os.setxattr(xf, "security.label", b"sec")
    if shutil.which("setfacl"):
        run("setfacl", "-m", "u:1000:rwx", xf)
        run("setfacl", "-d", "-m", "g:4242:r-x", d)
    with open(os.fsencode(os.path.join(root, "")) + b"bad\xffname", "wb") as f:
        f.write(b"latin")
    with open(os.path.join(root, "ünïcode"), "wb") as f:
        f.write(b"utf8")
    old = os.path.join(root, "old")
    with open(old, "wb") as f:
        f.write(b"old")
    os.utime(old, ns=(-100_000_000_123, -1_500_000_000_999_999_999))


@pytest.fixture(scope="session")
def kernel_image(tmp_path_factory):
    """A 512 MiB image made by mkfs.xfs and filled by the kernel."""
    need_root()
    img = str(tmp_path_factory.mktemp("kimg") / "kernel.img")
    with open(img, "wb") as f:
        f.truncate(512 << 20)
    run("mkfs.xfs", "-q", "-f", img)
    with kernel_mount(img, "rw") as mnt:
        fill_tree(mnt)
    return img


def kernel_view(mnt):
    """{path from the root: (lstat, xattrs, link target, sha256)} as the
    kernel shows it (paths as bytes)."""
    out = {}
    base = os.fsencode(mnt)

    def add(p):
        rel = b"/" + os.path.relpath(p, base) if p != base else b"/"
        st = os.lstat(p)
        xa = {n: os.getxattr(p, n, follow_symlinks=False) for n in os.listxattr(p, follow_symlinks=False)}
        link = os.readlink(p) if stat.S_ISLNK(st.st_mode) else None
        data = None
        if stat.S_ISREG(st.st_mode):
            with open(p, "rb") as f:
                data = sha(f.read())
        out[rel] = (st, xa, link, data)

    add(base)
    for top, dirs, files in os.walk(base):
        for name in dirs + files:
            add(os.path.join(top, name))
    return out
