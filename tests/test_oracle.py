"""rxfs against the kernel: every fixture must look exactly as the kernel shows it.

(a) `rxfs debug manifest IMAGE -o OPTS` prints the kernel's manifest byte for byte;
(b) the same through `rxfs mount IMAGE MNT -o OPTS` (FUSE) and tests/manifest.py;
(c) a dirty log is refused without norecovery, and shown as the kernel's
    `mount -o ro,norecovery` shows it with norecovery;
(d) `mount -t fuse.rxfs IMAGE MNT -o ro` works (mount.fuse3 runs `rxfs IMAGE MNT -o ...`
    with rxfs found on the default PATH);
(e) a large tree compared byte for byte (file data, xattrs, targets, stat) against a
    live kernel mount, with plain reads (no SEEK_DATA shortcuts).
"""

from __future__ import annotations

import os
import re
import stat
import subprocess

import pytest

import harness
import manifest


@pytest.mark.parametrize("name", harness.FIXTURE_NAMES)
def test_debug_manifest_matches_kernel(name):
    meta = harness.fixture_meta(name)
    opts = harness.rxfs_opts(meta)
    p = harness.run_rxfs("debug", "manifest", meta["image_path"], "-o", opts)
    if p.returncode != 0:
        pytest.fail(f"rxfs debug manifest {name} -o {opts} exited {p.returncode}:\n"
                    f"{p.stderr.decode(errors='replace')[-3000:]}", pytrace=False)
    actual = p.stdout.decode("ascii", errors="backslashreplace").splitlines(keepends=True)
    harness.compare_lines(harness.kernel_manifest_lines(meta), actual, f"{name}: rxfs debug manifest")


@pytest.mark.parametrize("name", harness.FIXTURE_NAMES)
def test_fuse_mount_matches_kernel(name):
    meta = harness.fixture_meta(name)
    with harness.rxfs_mount(meta["image_path"], harness.rxfs_opts(meta)) as mnt:
        actual = manifest.manifest_lines(mnt)
    harness.compare_lines(harness.kernel_manifest_lines(meta), actual, f"{name}: rxfs mount")


DIRTY_MESSAGE = re.compile(r"dirty.{0,40}log|log.{0,40}(dirty|recover)", re.I | re.S)


def test_dirty_log_refused_without_norecovery():
    harness.require_fuse()
    meta = harness.fixture_meta("dirty_log")
    binary = harness.rxfs_bin()
    with harness.scratch_dir("rxfs-test-d-") as s:
        mnt = os.path.join(s, "mnt")
        os.mkdir(mnt)
        try:
            p = subprocess.run([binary, "mount", meta["image_path"], mnt, "-o", "ro"],
                               capture_output=True, text=True, errors="replace", timeout=60,
                               stdin=subprocess.DEVNULL)
        finally:
            was_mounted = harness.is_mounted(mnt)
            if was_mounted:
                subprocess.run([binary, "umount", mnt], capture_output=True, timeout=60)
                harness._force_unmount(mnt)
        assert not was_mounted, "rxfs mounted an image with a dirty log without norecovery"
        assert p.returncode != 0, "rxfs mount of a dirty log without norecovery succeeded"
        msg = p.stdout + p.stderr
        assert DIRTY_MESSAGE.search(msg), f"the error does not mention the dirty log:\n{msg[-2000:]}"


def test_dirty_log_norecovery_matches_kernel_norecovery():
    """The stored dirty_log manifest is the kernel's `mount -o ro,norecovery` view."""
    meta = harness.fixture_meta("dirty_log")
    assert meta["kernel_opts"] == "ro,norecovery"
    with harness.rxfs_mount(meta["image_path"], "ro,norecovery") as mnt:
        actual = manifest.manifest_lines(mnt)
    harness.compare_lines(harness.kernel_manifest_lines(meta), actual, "dirty_log: rxfs -o ro,norecovery")


# mount(8) runs its helpers with no PATH at all, so mount.fuse3's `sh -c 'rxfs ...'`
# searches the shell's default path: rxfs has to be installed there.
INSTALL_LINK = "/usr/local/sbin/rxfs"


def test_mount_t_fuse_rxfs():
    """`mount -t fuse.rxfs IMAGE MNT -o ro` goes through mount.fuse3, which runs
    `rxfs IMAGE MNT -o ro,dev,suid` from the default PATH and waits for it to return
    once the filesystem is mounted. The test installs rxfs as a symlink at
    /usr/local/sbin/rxfs for its duration (and removes it again)."""
    harness.require_fuse()
    harness.require_tools("mount.fuse3")
    meta = harness.fixture_meta("default")
    binary = os.path.realpath(harness.rxfs_bin())
    created = False
    if os.path.lexists(INSTALL_LINK):
        if os.path.realpath(INSTALL_LINK) != binary:
            pytest.fail(f"{INSTALL_LINK} exists and is not {binary}: remove it to run this test", pytrace=False)
    else:
        os.symlink(binary, INSTALL_LINK)
        created = True
    try:
        with harness.scratch_dir("rxfs-test-m-") as s:
            mnt = os.path.join(s, "mnt")
            os.mkdir(mnt)
            try:
                p = subprocess.run(["mount", "-t", "fuse.rxfs", meta["image_path"], mnt, "-o", "ro"],
                                   capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
                assert p.returncode == 0, f"mount -t fuse.rxfs exited {p.returncode}:\n{p.stdout}{p.stderr}"
                assert harness.is_mounted(mnt), "mount -t fuse.rxfs returned 0 but nothing is mounted"
                with open("/proc/self/mountinfo") as f:
                    line = next((ln for ln in f if f" {mnt} " in ln), "")
                assert " - fuse.rxfs " in line, f"mount type is not fuse.rxfs: {line.strip()}"
                actual = manifest.manifest_lines(mnt)
                harness.compare_lines(harness.kernel_manifest_lines(meta), actual, "mount -t fuse.rxfs")
            finally:
                if harness.is_mounted(mnt):
                    subprocess.run(["umount", mnt], capture_output=True, timeout=60)
                    harness._force_unmount(mnt)
            assert not harness.is_mounted(mnt), "umount of the fuse.rxfs mount failed"
    finally:
        if created:
            os.unlink(INSTALL_LINK)


def _stat_tuple(st: os.stat_result) -> tuple:
    return (stat.S_IFMT(st.st_mode), st.st_mode & 0o7777, st.st_ino, st.st_uid, st.st_gid, st.st_nlink,
            st.st_size, st.st_blocks, st.st_atime_ns, st.st_mtime_ns, st.st_ctime_ns,
            st.st_rdev if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else 0)


def _xattrs(path: bytes) -> dict:
    return {n: os.getxattr(path, n, follow_symlinks=False) for n in os.listxattr(path, follow_symlinks=False)}


def _same_contents(a: bytes, b: bytes, size: int) -> bool:
    fa, fb = os.open(a, os.O_RDONLY), os.open(b, os.O_RDONLY)
    try:
        pos = 0
        while True:
            x = os.read(fa, 1 << 20)
            y = os.read(fb, 1 << 20)
            while len(y) < len(x):  # FUSE may return short reads
                more = os.read(fb, len(x) - len(y))
                if not more:
                    break
                y += more
            if x != y:
                return False
            if not x:
                return pos == size
            pos += len(x)
    finally:
        os.close(fa)
        os.close(fb)


def compare_trees(kroot: str, rroot: str) -> tuple[dict, list[str]]:
    kp, rp = os.fsencode(kroot), os.fsencode(rroot)
    kpaths, rpaths = set(manifest.walk(kp)), set(manifest.walk(rp))
    problems = [f"only in the kernel's tree: {p!r}" for p in sorted(kpaths - rpaths)[:10]]
    problems += [f"only in rxfs's tree: {p!r}" for p in sorted(rpaths - kpaths)[:10]]
    counts = dict(paths=0, files=0, dirs=0, symlinks=0, other=0, bytes=0, xattrs=0, xattr_bytes=0)
    for rel in sorted(kpaths & rpaths):
        k = kp + rel if rel != b"/" else kp
        r = rp + rel if rel != b"/" else rp
        ks, rs = os.lstat(k), os.lstat(r)
        counts["paths"] += 1
        if _stat_tuple(ks) != _stat_tuple(rs):
            problems.append(f"{rel!r}: stat kernel {_stat_tuple(ks)} rxfs {_stat_tuple(rs)}")
        kx, rx = _xattrs(k), _xattrs(r)
        if kx != rx:
            problems.append(f"{rel!r}: xattrs differ: kernel {sorted(kx)} rxfs {sorted(rx)}")
        counts["xattrs"] += len(kx)
        counts["xattr_bytes"] += sum(len(v) for v in kx.values())
        if stat.S_ISREG(ks.st_mode):
            counts["files"] += 1
            if not _same_contents(k, r, ks.st_size):
                problems.append(f"{rel!r}: file contents differ")
            counts["bytes"] += ks.st_size
        elif stat.S_ISLNK(ks.st_mode):
            counts["symlinks"] += 1
            if os.readlink(k) != os.readlink(r):
                problems.append(f"{rel!r}: symlink targets differ")
        elif stat.S_ISDIR(ks.st_mode):
            counts["dirs"] += 1
            if sorted(os.listdir(k)) != sorted(os.listdir(r)):
                problems.append(f"{rel!r}: directory entries differ")
        else:
            counts["other"] += 1
        if len(problems) > 50:
            break
    return counts, problems


def test_large_tree_byte_for_byte(capsys):
    meta = harness.fixture_meta("default")
    with harness.kernel_mount(meta["image_path"], "ro") as kmnt:
        with harness.rxfs_mount(meta["image_path"], "ro") as rmnt:
            counts, problems = compare_trees(kmnt, rmnt)
    with capsys.disabled():
        print(f"\nlarge tree compared: {counts['paths']} paths ({counts['files']} files, {counts['dirs']} dirs, "
              f"{counts['symlinks']} symlinks, {counts['other']} special), {counts['bytes']} file bytes, "
              f"{counts['xattrs']} xattrs ({counts['xattr_bytes']} bytes)")
    assert counts["files"] >= 5000, counts
    if problems:
        pytest.fail(f"{len(problems)} differences (first shown):\n" + "\n".join(problems[:50]), pytrace=False)
