"""Shared pieces of the oracle tests: locating things, prerequisites, mounting, diffs.

Prerequisites that are missing make a test FAIL with a message saying what to install
or run; nothing here skips.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
sys.path.insert(0, str(TESTS / "fixtures"))
sys.path.insert(0, str(TESTS))

import build  # noqa: E402

FIXTURE_NAMES = [f.name for f in build.FIXTURES]
MOUNT_WAIT_S = 30
DAEMON_GRACE_S = 5  # a daemonizing `rxfs mount` exited 0: how long its mount may still take
RXFS_TIMEOUT_S = 600


def fixtures_dir() -> Path:
    return build.out_dir()


def require_root() -> None:
    if os.geteuid() != 0:
        pytest.fail("these tests need root (loop mounts, FUSE mounts of images)", pytrace=False)


def require_tools(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.fail(f"missing tools {missing}: apt-get install xfsprogs fuse3", pytrace=False)


def require_fuse() -> None:
    require_root()
    try:
        fd = os.open("/dev/fuse", os.O_RDWR)
        os.close(fd)
    except OSError as e:
        pytest.fail(f"/dev/fuse is not usable ({e}): FUSE tests cannot run", pytrace=False)
    require_tools("fusermount3")


def rxfs_bin() -> str:
    path = os.environ.get("RXFS_BIN") or str(REPO / "target" / "release" / "rxfs")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        pytest.fail(f"rxfs binary not found at {path}: run `cargo build --release` or set RXFS_BIN",
                    pytrace=False)
    return path


def fixture_meta(name: str) -> dict:
    d = fixtures_dir()
    stamp = d / f"{name}.json"
    if not stamp.exists():
        pytest.fail(f"fixture {name} is not built ({stamp} missing): run tests/fixtures/build.py",
                    pytrace=False)
    meta = json.loads(stamp.read_text())
    meta["image_path"] = str(d / meta["image"])
    meta["manifest_path"] = str(d / meta["manifest"])
    meta["rtdev_path"] = str(d / meta["rtdev"]) if meta.get("rtdev") else None
    return meta


def rxfs_opts(meta: dict, opts: str | None = None) -> str:
    """The -o string for rxfs: the fixture's, with rtdev= made an absolute path."""
    opts = meta["rxfs_opts"] if opts is None else opts
    out = []
    for o in opts.split(","):
        if o.startswith("rtdev=") and meta.get("rtdev_path"):
            o = "rtdev=" + meta["rtdev_path"]
        out.append(o)
    return ",".join(out)


def compare_lines(expected: list[str], actual: list[str], what: str, context: int = 2,
                  max_lines: int = 60) -> None:
    """Fail with a unified diff of the first differences when the lists differ."""
    if expected == actual:
        return
    import difflib

    i = 0
    while i < min(len(expected), len(actual)) and expected[i] == actual[i]:
        i += 1
    lo = max(0, i - context)
    a = expected[lo:i + 200]
    b = actual[lo:i + 200]
    diff = list(difflib.unified_diff(a, b, "kernel", "rxfs", n=context, lineterm=""))
    shown = [d.rstrip("\n")[:400] for d in diff[:max_lines]]
    pytest.fail(
        f"{what}: differs from the kernel's manifest ({len(expected)} kernel lines, {len(actual)} "
        f"rxfs lines; first difference at line {i + 1}):\n" + "\n".join(shown), pytrace=False)


def is_mounted(mnt: str) -> bool:
    try:
        return os.path.ismount(mnt)
    except OSError:  # a dead FUSE server gives ENOTCONN: still mounted
        return True


@contextlib.contextmanager
def scratch_dir(prefix: str):
    d = tempfile.mkdtemp(prefix=prefix)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@contextlib.contextmanager
def kernel_mount(image: str, opts: str):
    require_root()
    with scratch_dir("rxfs-test-k-") as s:
        with build.mounted(image, opts, s) as mnt:
            yield mnt


def _force_unmount(mnt: str) -> None:
    for argv in (["fusermount3", "-u", mnt], ["umount", mnt], ["umount", "-l", mnt]):
        if not is_mounted(mnt):
            return
        subprocess.run(argv, capture_output=True)


@contextlib.contextmanager
def rxfs_mount(image: str, opts: str, argv_prefix: list[str] | None = None):
    """`rxfs mount IMAGE MNT -o OPTS`, whether rxfs daemonizes or stays in the
    foreground; yields the mount point; always unmounts (`rxfs umount`, then the
    generic tools as a fallback, which then fails the test) and reaps the process."""
    require_fuse()
    binary = rxfs_bin()
    with scratch_dir("rxfs-test-f-") as s:
        mnt = os.path.join(s, "mnt")
        os.mkdir(mnt)
        out = open(os.path.join(s, "out"), "w+")
        argv = (argv_prefix or [binary, "mount"]) + [image, mnt, "-o", opts]
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        umount_error = None
        try:
            deadline = time.monotonic() + MOUNT_WAIT_S
            while not is_mounted(mnt):
                rc = proc.poll()
                if rc is not None and rc != 0:
                    out.seek(0)
                    pytest.fail(f"{' '.join(argv)} exited {rc} without mounting:\n{out.read()[-3000:]}",
                                pytrace=False)
                if rc == 0:  # daemonized: its child should have mounted by now, or very soon
                    deadline = min(deadline, time.monotonic() + DAEMON_GRACE_S)
                if time.monotonic() > deadline:
                    out.seek(0)
                    pytest.fail(f"{' '.join(argv)}: not mounted after {MOUNT_WAIT_S} s:\n{out.read()[-3000:]}",
                                pytrace=False)
                time.sleep(0.05)
            yield mnt
        finally:
            if is_mounted(mnt):
                p = subprocess.run([binary, "umount", mnt], capture_output=True, text=True, timeout=60)
                if p.returncode != 0 or is_mounted(mnt):
                    umount_error = f"rxfs umount {mnt} failed ({p.returncode}): {p.stdout}{p.stderr}"
                    _force_unmount(mnt)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()  # the process this context started, by its handle
                proc.wait()
                umount_error = umount_error or f"{' '.join(argv)} still running 20 s after unmount"
            out.close()
        if umount_error:
            pytest.fail(umount_error, pytrace=False)


def kernel_manifest_lines(meta: dict) -> list[str]:
    with open(meta["manifest_path"], encoding="ascii") as f:
        return f.readlines()


def run_rxfs(*args: str, timeout: int = RXFS_TIMEOUT_S) -> subprocess.CompletedProcess:
    return subprocess.run([rxfs_bin(), *args], capture_output=True, timeout=timeout)
