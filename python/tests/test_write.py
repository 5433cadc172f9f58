"""Writing through the Python package: a tree made with every kind of
change, then `xfs_repair -n` finds the image clean and the kernel's XFS
reads back exactly what was written. mkfs, populate and check; corrupt
images give exceptions, never a crash of the interpreter."""

import os
import shutil
import stat
import subprocess

import pytest
import rxfs

from conftest import fill_tree, kernel_mount, kernel_view, need_root, run


def repair_clean(img):
    r = subprocess.run(["xfs_repair", "-n", img], capture_output=True)
    assert r.returncode == 0, r.stdout.decode() + r.stderr.decode()


def test_changes_are_what_the_kernel_reads(tmp_path):
    need_root()
    img = str(tmp_path / "w.img")
    geo = rxfs.mkfs(img, size="512m", label="pytest", uuid="0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f0")
    assert geo["block_size"] == 4096 and geo["agcount"] >= 1
    big = os.urandom(5 << 20)
    with rxfs.open(img, rw=True, owner=(1000, 100)) as fs:
        fs.makedirs("/a/b/c", mode=0o755)
        fs.makedirs("/a/b", exist_ok=True)
        with pytest.raises(FileExistsError):
            fs.makedirs("/a/b")
        with fs.open("/a/big", "wb") as f:
            for i in range(0, len(big), 1 << 20):
                f.write(big[i:i + (1 << 20)])
        with fs.open("/a/log", "ab") as f:
            f.write(b"one\n")
        with fs.open("/a/log", "ab") as f:
            f.write(b"two\n")
        with fs.open("/a/log", "r+b") as f:
            f.seek(1)
            f.write(b"N")
            f.seek(0)
            assert f.read() == b"oNe\ntwo\n"
        with pytest.raises(FileExistsError):
            fs.open("/a/log", "xb")
        with fs.open("/a/text", "w") as f:
            f.write("héllo\n")
        with fs.open("/a/holey", "wb") as f:
            f.seek(1 << 20)
            f.write(b"end")
        fs.truncate("/a/holey", 3 << 20)
        fs.symlink("b/c", "/a/link")
        fs.link("/a/log", "/a/b/log-again")
        fs.chmod("/a/log", 0o2750)
        fs.chown("/a/b", 0, 0)
        fs.chown("/a/link", 7, -1, follow_symlinks=False)
        fs.utime("/a/text", ns=(1_000_000_001, 2_000_000_002))
        fs.setxattr("/a/text", "user.colour", b"blue")
        fs.setxattr("/a/text", "trusted.t", b"\x00\x01")
        fs.setxattr("/a/text", "user.gone", b"x")
        fs.removexattr("/a/text", "user.gone")
        with pytest.raises(FileExistsError):
            fs.setxattr("/a/text", "user.colour", b"red", os.XATTR_CREATE)
        fs.mknod("/a/fifo", stat.S_IFIFO | 0o644)
        fs.mknod("/a/dev", stat.S_IFCHR | 0o600, os.makedev(1, 3))
        with fs.open("/a/tmp", "wb") as f:
            f.write(b"temporary")
        fs.rename("/a/tmp", "/a/b/c/kept")
        with fs.open("/a/doomed", "wb") as f:
            f.write(b"x" * 100000)
        # Removed while open: readable until closed, then freed.
        f = fs.open("/a/doomed", "rb")
        fs.remove("/a/doomed")
        assert f.read(3) == b"xxx"
        f.close()
        fs.mkdir("/a/empty")
        fs.rmdir("/a/empty")
        with pytest.raises(OSError) as e:
            fs.rmdir("/a/b")
        assert e.value.errno == 39  # ENOTEMPTY
        with pytest.raises(PermissionError):
            fs.link("/a/b", "/a/dirlink")  # EPERM: no hard links to directories
        with pytest.raises(IsADirectoryError):
            fs.open("/a/b", "wb")
        fs.symlink("loop2", "/loop1")
        fs.symlink("loop1", "/loop2")
        with pytest.raises(OSError) as e:
            fs.stat("/loop1")
        assert e.value.errno == 40  # ELOOP
        fs.fsync()
        mine = {p: fs.lstat(p) for p in ["/a/big", "/a/log", "/a/link", "/a/text", "/a/holey"]}
    repair_clean(img)
    assert rxfs.check(img) == []
    with kernel_mount(img) as mnt:
        k = lambda p: os.path.join(mnt, p.lstrip("/"))  # noqa: E731
        assert open(k("/a/big"), "rb").read() == big
        assert open(k("/a/log"), "rb").read() == b"oNe\ntwo\n"
        assert open(k("/a/b/log-again"), "rb").read() == b"oNe\ntwo\n"
        assert open(k("/a/text"), encoding="utf-8").read() == "héllo\n"
        assert open(k("/a/b/c/kept"), "rb").read() == b"temporary"
        h = open(k("/a/holey"), "rb").read()
        assert len(h) == 3 << 20 and h[1 << 20:(1 << 20) + 3] == b"end" and h[:10] == bytes(10)
        assert os.readlink(k("/a/link")) == "b/c"
        assert not os.path.exists(k("/a/doomed")) and not os.path.exists(k("/a/tmp"))
        st = os.lstat(k("/a/log"))
        assert stat.S_IMODE(st.st_mode) == 0o2750 and st.st_nlink == 2
        assert (st.st_uid, st.st_gid) == (1000, 100)
        assert (os.lstat(k("/a/b")).st_uid, os.lstat(k("/a/link")).st_uid) == (0, 7)
        t = os.stat(k("/a/text"))
        assert (t.st_atime_ns, t.st_mtime_ns) == (1_000_000_001, 2_000_000_002)
        assert os.getxattr(k("/a/text"), "user.colour") == b"blue"
        assert os.getxattr(k("/a/text"), "trusted.t") == b"\x00\x01"
        assert "user.gone" not in os.listxattr(k("/a/text"))
        assert stat.S_ISFIFO(os.lstat(k("/a/fifo")).st_mode)
        assert os.lstat(k("/a/dev")).st_rdev == os.makedev(1, 3)
        for p, s in mine.items():
            ks = os.lstat(k(p))
            assert (s.st_ino, s.st_size, s.st_blocks, s.st_mtime_ns) == \
                (ks.st_ino, ks.st_size, ks.st_blocks, ks.st_mtime_ns), p
        umask_mode = stat.S_IMODE(os.lstat(k("/a/b/c")).st_mode)
        assert umask_mode == 0o755 & ~current_umask()


def current_umask():
    m = os.umask(0)
    os.umask(m)
    return m


def test_mkfs_refuses_other_filesystems_and_populate_checks_clean(tmp_path):
    need_root()
    img = str(tmp_path / "e4.img")
    with open(img, "wb") as f:
        f.truncate(400 << 20)
    run("mkfs.ext4", "-q", "-F", img)
    with pytest.raises(FileExistsError) as e:
        rxfs.mkfs(img)
    assert "ext4" in str(e.value)
    rxfs.mkfs(img, force=True, reflink=False, rmapbt=True)
    with pytest.raises(TypeError):
        rxfs.mkfs(img, force=True, colour=True)
    src = tmp_path / "src"
    src.mkdir()
    fill_tree(str(src))
    rules = tmp_path / "rules"
    rules.write_text("/owned mode=0700 owner=1:2\n")
    paths, nbytes = rxfs.populate(img, str(src), owner=None, overrides=str(rules))
    assert paths > 1200 and nbytes > 3 << 20
    repair_clean(img)
    assert rxfs.check(img) == []
    with kernel_mount(img) as mnt:
        got = kernel_view(mnt)
    owned = got[b"/owned"][0]
    assert (stat.S_IMODE(owned.st_mode), owned.st_uid, owned.st_gid) == (0o700, 1, 2)
    assert got[b"/dir/file"][3] is not None and got[b"/sym"][2] == b"dir/file"


def corrupt_inode(img, path):
    """Zero the magic of the inode at `path` with xfs_db (expert mode)."""
    with rxfs.open(img) as fs:
        ino = fs.lstat(path).st_ino
    run("xfs_db", "-x", "-c", f"inode {ino}", "-c", "write -d core.magic 0", img)
    return ino


def test_corrupt_images_raise_never_crash(tmp_path, kernel_image):
    img = str(tmp_path / "c.img")
    shutil.copyfile(kernel_image, img)
    corrupt_inode(img, "/dir")
    with rxfs.open(img) as fs:
        with pytest.raises(rxfs.CorruptFilesystemError) as e:
            fs.stat("/dir")
        assert e.value.errno == 117 and isinstance(e.value, OSError)
        with pytest.raises(rxfs.CorruptFilesystemError):
            fs.listdir("/dir")
        # The rest stays readable.
        assert fs.read_bytes("/hard1") == b"linked"
        walked = list(fs.walk("/", onerror=lambda e: None))
        assert any(top == "/many" for top, _, _ in walked)
    findings = rxfs.check(img)
    assert findings and all(isinstance(f, rxfs.Finding) for f in findings)
    # Random bytes and a wrecked superblock: an exception at open.
    junk = str(tmp_path / "junk.img")
    with open(junk, "wb") as f:
        f.write(os.urandom(1 << 20))
    with pytest.raises(OSError):
        rxfs.open(junk)
    with open(img, "r+b") as f:
        f.write(b"\0" * 512)
    with pytest.raises(OSError):
        rxfs.open(img)
