"""What the mount scripts share (`kill9-rounds`, `mount-readback`, `rt-copy`):
an `rxfs mount` daemon in the foreground, the fsstress-like noise, the
filler that drives a filesystem to ENOSPC, and small file helpers."""

from __future__ import annotations

import errno
import os
import random
import shutil
import signal
import subprocess
import time


def fsync_path(path: str, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file(path: str, data: bytes, off: int = 0, create: bool = False) -> None:
    flags = os.O_WRONLY | (os.O_CREAT | os.O_TRUNC if create else 0)
    fd = os.open(path, flags, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.pwrite(fd, view, off)
            off += n
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)


def fill(root: str, seed: int) -> None:
    """Fill the filesystem: after a short delay, preallocate all but a few
    MiB of the free space, then write 4 MiB files into `root`/fill (each
    fsync'd, so with the write-back cache the ENOSPC comes back too) until
    ENOSPC, hold it full a moment, delete a third of them, and again, until
    killed. The writer meets ENOSPC at some point of such a round."""
    rng = random.Random(seed)
    d = os.path.join(root, "fill")
    os.makedirs(d, exist_ok=True)
    time.sleep(rng.uniform(0.1, 1.0))
    # Most of the free space goes at once to one preallocated file, so the
    # writes below reach ENOSPC within the round.
    try:
        st = os.statvfs(d)
        pad = st.f_bavail * st.f_frsize - rng.randrange(4, 48) * (1 << 20)
        if pad > 0:
            fd = os.open(os.path.join(d, "pad"), os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.posix_fallocate(fd, 0, pad)
            finally:
                os.close(fd)
    except OSError:
        pass
    chunk = rng.randbytes(1 << 20)
    n = 0
    while True:
        try:
            path = os.path.join(d, f"z{n}")
            n += 1
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                for _ in range(4):
                    os.write(fd, chunk)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                time.sleep(rng.uniform(0.05, 0.5))
                try:
                    names = sorted(x for x in os.listdir(d) if x != "pad")
                    for x in names[: len(names) // 3 + 1]:
                        os.unlink(os.path.join(d, x))
                except OSError:
                    return
            else:
                return


def noise(root: str, seed: int, ops: int | None = None) -> None:
    """fsstress-like load in `root` until killed (or for `ops` operations);
    every error is ignored."""
    rng = random.Random(seed)
    os.makedirs(root, exist_ok=True)
    dev = os.stat(root).st_dev
    done = 0
    while ops is None or done < ops:
        done += 1
        try:
            if os.stat(root).st_dev != dev:
                return
        except OSError:
            return  # the mount is gone
        try:
            ents = []
            for dp, dn, fn in os.walk(root):
                ents += [os.path.join(dp, f) for f in fn]
                ents += [os.path.join(dp, x) for x in dn]
            files = [e for e in ents if os.path.isfile(e)]
            dirs = [root] + [e for e in ents if os.path.isdir(e) and e.count("/") - root.count("/") < 3]
            op = rng.randrange(100)
            name = os.path.join(rng.choice(dirs), f"n{rng.randrange(200)}")
            if op < 20 or not files:
                write_file(name, rng.randbytes(rng.randrange(100_000)), create=True)
            elif op < 25:
                os.mkdir(name)
            elif op < 40:
                f = rng.choice(files)
                write_file(f, rng.randbytes(rng.randrange(1, 50_000)),
                           off=rng.randrange(os.path.getsize(f) + 1))
            elif op < 50:
                os.rename(rng.choice(files), name)
            elif op < 55:
                os.link(rng.choice(files), name)
            elif op < 60 + (20 if len(files) > 150 else 0):
                os.unlink(rng.choice(files))
            elif op < 80:
                os.truncate(rng.choice(files), rng.randrange(200_000))
            elif op < 88:
                os.setxattr(rng.choice(files), f"user.n{rng.randrange(8)}",
                            rng.randbytes(rng.randrange(1, 400)))
            elif op < 92:
                d = rng.choice(dirs[1:] or [root])
                if d != root:
                    os.rmdir(d)
            else:
                fsync_path(rng.choice(files))
        except OSError as e:
            if e.errno in (errno.ENOTCONN, errno.ECONNABORTED, errno.ECANCELED):
                return
        except Exception:  # noqa: BLE001 - noise never stops the test
            pass


def is_mounted(mnt: str) -> bool:
    """Whether anything is mounted at `mnt` (a dead FUSE mount included,
    which os.path.ismount reports as not mounted: its stat fails)."""
    want = os.path.realpath(mnt)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].replace("\\040", " ")
            if point == want:
                return True
    return False


def other_mount_namespaces() -> list[str]:
    """Processes in a mount namespace other than ours."""
    mine = os.readlink("/proc/self/ns/mnt")
    out = []
    for f in os.listdir("/proc"):
        try:
            if f.isdigit() and os.readlink(f"/proc/{f}/ns/mnt") != mine:
                out.append(f)
        except OSError:
            pass
    return out


def run(argv: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, **kw)


class Daemon:
    """`rxfs mount -f IMG MNT -o OPTS` in the foreground, its output appended
    to `log`; returns once mounted."""

    def __init__(self, rxfs: str, img: str, mnt: str, log: str, opts: str):
        self.mnt = mnt
        self.out = open(log, "a")
        self.proc = subprocess.Popen([rxfs, "mount", "-f", img, mnt, "-o", opts],
                                     stdout=self.out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not is_mounted(mnt):
            if self.proc.poll() is not None:
                raise RuntimeError(f"rxfs mount exited {self.proc.returncode} (see {log})")
            if time.monotonic() > deadline:
                raise RuntimeError(f"rxfs mount: not mounted after 60 s (see {log})")
            time.sleep(0.02)

    def kill(self, also: list[subprocess.Popen] = ()) -> None:
        """SIGKILL the daemon (and `also`, the noise processes, before the
        dead mount is detached: they must not go on in the directory below)."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        for p in also:
            # Each runs in a session of its own (fsstress's children too).
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                p.kill()
            p.wait()
        # The dead connection's mount goes (lazily if busy).
        deadline = time.monotonic() + 60
        while is_mounted(self.mnt):
            for argv in (["fusermount3", "-u", "-z", self.mnt], ["umount", "-l", self.mnt]):
                run(argv)
                if not is_mounted(self.mnt):
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.mnt}: still mounted 60 s after the daemon was killed")
            time.sleep(0.1)
        self.out.close()

    def umount(self, rxfs: str) -> None:
        p = run([rxfs, "umount", self.mnt], timeout=300)
        try:
            rc = self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            stacks = "(no gdb)"
            if shutil.which("gdb"):
                stacks = run(["gdb", "-p", str(self.proc.pid), "-batch", "-ex",
                              "thread apply all bt 12"], timeout=120).stdout[-12000:]
            self.proc.kill()
            self.proc.wait()
            others = other_mount_namespaces()
            raise RuntimeError(
                f"the daemon did not exit 120 s after its unmount (rxfs umount: exit "
                f"{p.returncode}, {p.stderr.strip()!r}; {len(others)} processes in other mount "
                f"namespaces, where a copy of the mount made before the unmount keeps the "
                f"filesystem alive: run fstests and the like elsewhere, or this script in "
                f"`unshare -m`); its threads:\n{stacks}")
        self.out.close()
        if p.returncode != 0 or rc != 0:
            raise RuntimeError(f"rxfs umount: {p.returncode} {p.stderr.strip()}; daemon exit {rc}")
