"""Durability under kill -9 (issue 12): `scripts/kill9-rounds` against `rxfs mount`.

A writer on the mount does create-by-rename, rename (within and across two
directories, over other files), hard link, unlink, in-place overwrite, append and
truncate, fsyncing the file and its directory after each one, and records every
completed change in a manifest outside the filesystem; a noise process loads
another directory; the daemon gets SIGKILL at a random moment; the next mount
recovers the log and every recorded name must be there with its fsync'd contents
(hard links sharing an inode, link counts right), no name the manifest says is
gone, and `xfs_repair -n` clean. Requests go through `/dev/fuse`, and in a
second test through FUSE over io_uring. RXFS_KILL9_ROUNDS sets the number of
rounds (default 100; RXFS_KILL9_URING_ROUNDS for io_uring, default 40); 1,000
rounds as documented in README.md:
`scripts/kill9-rounds --rounds 1000 --min 1 --max 6`.
"""

from __future__ import annotations

import os
import subprocess
import sys

from harness import REPO, require_fuse, require_tools, rxfs_bin


def run_rounds(rounds: int, seed: int, opts: str) -> None:
    argv = [sys.executable, str(REPO / "scripts" / "kill9-rounds"), "--rounds", str(rounds),
            "--seed", str(seed), "--min", "0.3", "--max", "2.0", "--log-size", "8m",
            "--rxfs", rxfs_bin(), "--opts", opts]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    out = p.stdout + p.stderr
    print(out[-20000:])
    last = [line for line in out.splitlines() if line.startswith("kill9 rounds:")]
    assert last, f"kill9-rounds printed no summary (exit {p.returncode}):\n{out[-5000:]}"
    assert p.returncode == 0 and last[-1].endswith(", 0 failed"), (
        f"kill9-rounds failed (exit {p.returncode}): {last[-1]}\n"
        + "\n".join(line for line in out.splitlines() if "FAILED" in line or line.startswith("  "))[:8000])
    passed = int(last[-1].split(":")[1].split("passed")[0])
    assert passed == rounds, last[-1]


def test_kill9_rounds_keep_every_fsync():
    require_fuse()
    require_tools("mkfs.xfs", "xfs_repair")
    rounds = int(os.environ.get("RXFS_KILL9_ROUNDS", "100"))
    seed = int(os.environ.get("RXFS_KILL9_SEED", "12"))
    run_rounds(rounds, seed, "rw,fuse_uring=off")


URING_PARAM = "/sys/module/fuse/parameters/enable_uring"


def test_kill9_rounds_over_io_uring():
    """The same rounds with requests over FUSE io_uring (the kernel's
    enable_uring switch on for the test, restored after)."""
    require_fuse()
    require_tools("mkfs.xfs", "xfs_repair")
    assert os.path.exists(URING_PARAM), f"{URING_PARAM} missing: this kernel has no FUSE over io_uring"
    old = open(URING_PARAM).read().strip()
    with open(URING_PARAM, "w") as f:
        f.write("Y")
    try:
        rounds = int(os.environ.get("RXFS_KILL9_URING_ROUNDS", "40"))
        run_rounds(rounds, 13, "rw,fuse_uring=on")
    finally:
        with open(URING_PARAM, "w") as f:
            f.write(old)
