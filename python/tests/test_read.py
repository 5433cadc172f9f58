"""Reading kernel-made images through the Python package: every entry's
stat, xattrs, link target and contents as the kernel's XFS shows them;
threads reading at once; `scandir`/`walk`/file objects behave as `os`'s."""

import io
import os
import stat
import threading

import pytest
import rxfs

from conftest import kernel_mount, kernel_view, sha

STAT_FIELDS = ("st_mode", "st_ino", "st_nlink", "st_uid", "st_gid", "st_size", "st_blocks",
               "st_blksize", "st_rdev", "st_atime_ns", "st_mtime_ns", "st_ctime_ns")


def rxfs_view(fs):
    out = {}
    for top, dirs, files in fs.walk(b"/"):
        names = dirs + files + ([None] if top == b"/" else [])
        for name in names:
            p = top if name is None else (top.rstrip(b"/") + b"/" + name)
            st = fs.lstat(p)
            xa = {n: fs.getxattr(p, n, follow_symlinks=False)
                  for n in fs.listxattr(p, follow_symlinks=False)}
            link = fs.readlink(p) if stat.S_ISLNK(st.st_mode) else None
            data = sha(fs.read_bytes(p)) if stat.S_ISREG(st.st_mode) else None
            out[p] = (st, xa, link, data)
    return out


def test_every_entry_matches_the_kernel(kernel_image):
    with kernel_mount(kernel_image) as mnt:
        want = kernel_view(mnt)
    with rxfs.open(kernel_image) as fs:
        got = rxfs_view(fs)
    assert sorted(got) == sorted(want)
    assert len(want) > 1200
    for p, (kst, kxa, klink, kdata) in want.items():
        st, xa, link, data = got[p]
        for f in STAT_FIELDS:
            assert getattr(st, f) == getattr(kst, f), (p, f)
        # The sequence view is os.stat_result's.
        assert tuple(st)[:7] == (kst.st_mode, kst.st_ino, st.st_dev, kst.st_nlink, kst.st_uid,
                                 kst.st_gid, kst.st_size), p
        assert st[stat.ST_MTIME] == int(kst.st_mtime // 1) or kst.st_mtime < 0, p
        # XFS's own ACL names are what root lists on the kernel side too.
        kxa = {os.fsencode(k) if isinstance(k, str) else k: v for k, v in kxa.items()}
        assert {k.encode(): v for k, v in xa.items()} == kxa, p
        assert (None if link is None else os.fsencode(link)) == klink, p
        assert data == kdata, p


def test_stat_follows_and_scandir_types(kernel_image):
    with rxfs.open(kernel_image) as fs:
        assert stat.S_ISREG(fs.stat("/sym").st_mode)
        assert stat.S_ISLNK(fs.lstat("/sym").st_mode)
        assert fs.stat("/sym").st_ino == fs.stat("/dir/file").st_ino
        assert fs.exists("/dir/sub") and not fs.exists("/nope") and fs.lexists("/sym")
        assert fs.isdir("/dir") and fs.isfile("/big") and fs.islink("/longsym")
        entries = {e.name: e for e in fs.scandir("/")}
        assert entries["dir"].is_dir() and not entries["dir"].is_symlink()
        assert entries["sym"].is_symlink() and entries["sym"].is_file()
        assert not entries["sym"].is_file(follow_symlinks=False)
        assert entries["fifo"].stat().st_mode & stat.S_IFMT(0o170000) == stat.S_IFIFO
        assert entries["big"].inode() == fs.stat("/big").st_ino
        assert os.fspath(entries["big"]) == "/big"
        assert sorted(fs.listdir("/dir")) == ["file", "hard2", "sub"]
        assert b"bad\xffname" in fs.listdir(b"/")
        assert fs.stat("/").st_birthtime_ns > 0 and fs.stat("/").st_birthtime > 0


def test_file_objects_read_seek_tell(kernel_image):
    with kernel_mount(kernel_image) as mnt:
        with open(os.path.join(mnt, "big"), "rb") as f:
            want = f.read()
        with open(os.path.join(mnt, "sparse"), "rb") as f:
            sparse = f.read()
    with rxfs.open(kernel_image) as fs:
        with fs.open("/big") as f:
            assert isinstance(f, io.BufferedReader)
            assert f.read(10) == want[:10]
            assert f.tell() == 10
            f.seek(1 << 20)
            buf = bytearray(5000)
            assert f.readinto(buf) == 5000 and bytes(buf) == want[1 << 20:(1 << 20) + 5000]
            f.seek(-3, io.SEEK_END)
            assert f.read() == want[-3:]
            assert f.read() == b""
        with fs.open("/sparse", "rb", buffering=0) as raw:
            assert isinstance(raw, rxfs.RawFile)
            assert raw.readall() == sparse
        with fs.open("/dir/file", "r") as t:
            assert t.read() == "hello\n"
        walked = list(fs.walk("/dir"))
        assert walked[0][0] == "/dir" and sorted(walked[0][1]) == ["sub"]
        bottom_up = list(fs.walk("/dir", topdown=False))
        assert bottom_up[-1][0] == "/dir"


def test_threads_read_in_parallel(kernel_image):
    with kernel_mount(kernel_image) as mnt:
        want = {name: sha(open(os.path.join(mnt, "many", name), "rb").read())
                for name in os.listdir(os.path.join(mnt, "many"))}
        want["../big"] = sha(open(os.path.join(mnt, "big"), "rb").read())
    errors = []
    with rxfs.open(kernel_image) as fs:
        names = sorted(want)

        def reader(k):
            try:
                for name in names[k::8]:
                    assert sha(fs.read_bytes("/many/" + name)) == want[name], name
            except BaseException as e:  # noqa: B902 - reported below
                errors.append(e)

        threads = [threading.Thread(target=reader, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []


def test_errors_are_oserrors_with_the_kernels_errno(kernel_image):
    with rxfs.open(kernel_image) as fs:
        with pytest.raises(FileNotFoundError) as e:
            fs.stat("/nope")
        assert e.value.errno == 2 and e.value.filename == "/nope"
        with pytest.raises(NotADirectoryError):
            fs.listdir("/big")
        with pytest.raises(NotADirectoryError):
            fs.stat("/big/x")
        with pytest.raises(OSError) as e:
            fs.readlink("/big")
        assert e.value.errno == 22
        with pytest.raises(OSError) as e:
            fs.getxattr("/big", "user.none")
        assert e.value.errno == 61  # ENODATA
        with pytest.raises(OSError) as e:
            fs.mkdir("/new")
        assert e.value.errno == 30  # EROFS: opened read-only
        with pytest.raises(OSError) as e:
            fs.open("/big", "wb")
        assert e.value.errno == 30
    with pytest.raises(ValueError):
        fs.stat("/")
    with pytest.raises(FileNotFoundError):
        rxfs.open("/nonexistent/image")
