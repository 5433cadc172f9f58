"""Durability and read-back through `rxfs mount` on every mount option that
changes the data path (issue 38): the write-back cache on and off, requests
over `/dev/fuse` or FUSE over io_uring, one event loop or the default number.
The defaults cell is `-o rw` and nothing else (the transport the kernel offers)
and runs longest. On every cell:

- kill -9 rounds (`scripts/kill9-rounds`): a writer fsyncs files and
  directories through replace-by-rename, renames, links, unlinks, overwrites
  and truncates; noise runs beside it and in a third of the rounds a filler
  drives the filesystem to ENOSPC; the daemon is killed; every change an
  fsync returned for must be there after recovery, `xfs_repair -n` clean.
- read-back (`scripts/mount-readback`): fsstress-like noise and an fsx-like
  tester through the mount; the tree the mount showed must be the tree the
  kernel's XFS reads from the image after the unmount.
- ENOSPC (`scripts/mount-readback --fill`): written until ENOSPC (which must
  come: a fill that never ends fails), half deleted, read back by the kernel.
- realtime (`scripts/rt-copy`): `cp -a /usr/share/doc` with noise into a
  realtime filesystem; the copy through the mount and after a read-only
  remount equals the source.

The crash simulator's fsync checks run on the same cells in the Rust test
`kill9_kernel` (crates/rxfs-cli/tests). Environment: RXFS_KILL9_ROUNDS (the
defaults cell, default 100), RXFS_KILL9_CELL_ROUNDS (every other cell, 15);
FSSTRESS / FSX (fstests' binaries, for long offline runs of the read-back).
The uring cells turn /sys/module/fuse/parameters/enable_uring on and restore it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager

import pytest

from harness import REPO, require_fuse, require_tools, rxfs_bin

URING_PARAM = "/sys/module/fuse/parameters/enable_uring"


def cells() -> list[tuple[str, str]]:
    """(id, -o options): the defaults first, then every combination, as the
    `cells!` of the Rust test `kill9_kernel`."""
    out = [("defaults", "rw")]
    for cache in (False, True):
        for uring in (False, True):
            for one in (False, True):
                o = "rw" + (",writeback_cache=on" if cache else "")
                o += ",fuse_uring=on" if uring else ",fuse_uring=off"
                o += ",threads=1" if one else ""
                name = f"{'cache' if cache else 'nocache'}-{'uring' if uring else 'dev'}-" \
                       f"{'1loop' if one else 'loops'}"
                out.append((name, o))
    return out


CELLS = cells()


@contextmanager
def uring_param(opts: str):
    """enable_uring on while a `fuse_uring=on` cell runs, then restored."""
    if "fuse_uring=on" not in opts:
        yield
        return
    assert os.path.exists(URING_PARAM), f"{URING_PARAM} missing: this kernel has no FUSE over io_uring"
    old = open(URING_PARAM).read().strip()
    with open(URING_PARAM, "w") as f:
        f.write("Y")
    try:
        yield
    finally:
        with open(URING_PARAM, "w") as f:
            f.write(old)


def script(name: str, *args: str, timeout: int = 3600) -> str:
    argv = [sys.executable, str(REPO / "scripts" / name), *args, "--rxfs", rxfs_bin()]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    out = p.stdout + p.stderr
    print(out[-20000:])
    assert p.returncode == 0, f"{name} {' '.join(args)}: exit {p.returncode}\n{out[-8000:]}"
    return out


@pytest.fixture(autouse=True)
def _needs():
    require_fuse()
    require_tools("mkfs.xfs", "xfs_repair")


@pytest.mark.parametrize("opts", [o for _, o in CELLS], ids=[n for n, _ in CELLS])
def test_kill9_rounds_keep_every_fsync(opts: str):
    default = opts == "rw"
    rounds = int(os.environ.get("RXFS_KILL9_ROUNDS" if default else "RXFS_KILL9_CELL_ROUNDS",
                                "100" if default else "15"))
    seed = 12 + sum(map(ord, opts))
    with uring_param(opts):
        out = script("kill9-rounds", "--rounds", str(rounds), "--seed", str(seed), "--min", "0.3",
                     "--max", "2.0", "--log-size", "8m", "--opts", opts)
    last = [line for line in out.splitlines() if line.startswith("kill9 rounds:")]
    assert last and last[-1] == f"kill9 rounds: {rounds} passed, 0 failed", last


@pytest.mark.parametrize("opts", [o for _, o in CELLS], ids=[n for n, _ in CELLS])
def test_readback_after_fsstress_and_fsx(opts: str):
    default = opts == "rw"
    ops, fsx_ops = ("3000", "10000") if default else ("1000", "3000")
    with uring_param(opts):
        out = script("mount-readback", "--opts", opts, "--ops", ops, "--fsx-ops", fsx_ops,
                     "--seed", str(31 + len(opts)))
    assert "readback: identical" in out


@pytest.mark.parametrize("opts", [o for _, o in CELLS], ids=[n for n, _ in CELLS])
def test_enospc_fill_and_delete(opts: str):
    with uring_param(opts):
        out = script("mount-readback", "--opts", opts, "--size", "400m", "--ops", "200",
                     "--fsx-ops", "500", "--fill", timeout=900)
    assert "fill: ENOSPC after" in out and "readback: identical" in out


@pytest.mark.parametrize("opts", [o for _, o in CELLS], ids=[n for n, _ in CELLS])
def test_realtime_copy_reads_back(opts: str):
    assert os.path.isdir("/usr/share/doc")
    with uring_param(opts):
        out = script("rt-copy", "--opts", opts, "--noise-ops", "1000" if opts == "rw" else "300")
    assert "rt-copy: identical" in out
