"""Tests of the oracle itself: manifest format, determinism, and that the fixture images
really are what the rxfs tests assume (clean, every on-disk form present). None of these
need rxfs."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess

import pytest

import harness
import manifest
import xfsdb

KEYS = ["path", "type", "ino", "mode", "uid", "gid", "nlink", "size", "blocks", "atime", "mtime",
        "ctime", "rdev", "xattrs"]


def test_manifest_format(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "b").write_bytes(b"data")
    (root / "a").mkdir()
    os.symlink("b", root / "a" / "link")
    raw = os.fsencode(root) + b"/na\xffme\xc3\xa9\n"
    with open(raw, "wb") as f:
        f.write(b"")
    os.setxattr(root / "b", "user.z", b"\x00\xff")
    os.setxattr(root / "b", "user.a", b"")
    os.mkfifo(root / "fifo")
    lines = manifest.manifest_lines(str(root))
    assert all(line.endswith("\n") and line.isascii() for line in lines)
    objs = [json.loads(line) for line in lines]
    assert [o["path"] for o in objs] == ["/", "/a", "/a/link", "/b", "/fifo", "/na\\xffme\u00e9\n"]
    for o in objs:
        extra = {"lnk": ["target"], "reg": ["sha256"]}.get(o["type"], [])
        assert list(o) == KEYS + extra
    by = {o["path"]: o for o in objs}
    assert by["/b"]["xattrs"] == {"user.a": "", "user.z": "00ff"}
    assert list(by["/b"]["xattrs"]) == ["user.a", "user.z"]
    assert by["/b"]["sha256"] == hashlib.sha256(b"data").hexdigest()
    assert by["/a/link"]["target"] == "b"
    assert by["/fifo"]["rdev"] is None and by["/fifo"]["type"] == "fifo"
    assert by["/"]["mode"] == os.stat(root).st_mode & 0o7777
    # The exact serialization the Rust side must reproduce.
    assert lines[-1].startswith('{"path":"/na\\\\xffme\\u00e9\\n","type":"reg",')
    assert ',"rdev":null,"xattrs":{},"sha256":"e3b0c442' in lines[-1]


def test_hash_skips_holes_but_matches_plain_read(tmp_path):
    p = tmp_path / "sparse"
    with open(p, "wb") as f:
        f.write(b"head")
        f.seek(5 << 20)
        f.write(os.urandom(70000))
        f.truncate(9 << 20)
    plain = hashlib.sha256(p.read_bytes()).hexdigest()
    assert manifest._hash_file(os.fsencode(p)) == plain
    empty = tmp_path / "hole_only"
    with open(empty, "wb") as f:
        f.truncate(3 << 20)
    assert manifest._hash_file(os.fsencode(empty)) == hashlib.sha256(bytes(3 << 20)).hexdigest()


@pytest.mark.parametrize("name", harness.FIXTURE_NAMES)
def test_fixture_is_clean(name):
    """xfs_repair -n passes (with the rt device where there is one); on the dirty-log
    fixture it must refuse, because the log still holds transactions."""
    harness.require_tools("xfs_repair")
    meta = harness.fixture_meta(name)
    argv = ["xfs_repair", "-n"]
    if meta["rtdev_path"]:
        argv += ["-r", meta["rtdev_path"]]
    p = subprocess.run(argv + [meta["image_path"]], capture_output=True, text=True)
    if meta["kind"] == "dirty_log":
        assert p.returncode != 0 and "log" in (p.stdout + p.stderr).lower(), p.stdout + p.stderr
    else:
        assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.parametrize("name", [f.name for f in harness.build.FIXTURES if f.kind in ("kernel", "dirty_log")])
def test_fixture_has_every_form(name):
    harness.require_tools("xfs_db")
    meta = harness.fixture_meta(name)
    fx = next(f for f in harness.build.FIXTURES if f.name == name)
    assert xfsdb.check_forms(meta["image_path"], big=fx.big, reflink=fx.reflink) == []


def test_sparse_inode_records_exist():
    meta = harness.fixture_meta("sparse_inodes")
    recs = xfsdb.sparse_inode_records(meta["image_path"], xfsdb.geometry(meta["image_path"]).agcount)
    assert recs, "no inobt record with holemask != 0"


def test_realtime_files_are_realtime():
    meta = harness.fixture_meta("realtime")
    assert len(meta["rtfiles"]) >= 5, meta["rtfiles"]
    for name, rt in meta["rtfiles"].items():
        info = xfsdb.inode(meta["image_path"], name)
        assert info.core["core.realtime"] == "1", name
        assert info.core["core.size"] == str(rt["size"]), name
        assert len(info.data) == rt["nextents"], f"{name}: extents {info.data}"
    assert sum(rt["nextents"] > 0 for rt in meta["rtfiles"].values()) >= 5


@pytest.mark.parametrize("name", [f.name for f in harness.build.FIXTURES if f.kind != "realtime"])
def test_kernel_manifest_is_stable(name):
    """A second kernel mount lists exactly what the build recorded: the manifest is
    deterministic and mounting read-only changes nothing it shows."""
    harness.require_root()
    meta = harness.fixture_meta(name)
    with harness.kernel_mount(meta["image_path"], meta["kernel_opts"]) as mnt:
        again = manifest.manifest_lines(mnt)
    harness.compare_lines(harness.kernel_manifest_lines(meta), again, f"{name}: second kernel mount")


def test_dirty_log_recovery_changes_the_tree():
    meta = harness.fixture_meta("dirty_log")
    before = harness.kernel_manifest_lines(meta)
    with open(os.path.join(harness.fixtures_dir(), meta["recovered_manifest"])) as f:
        after = f.readlines()
    assert before != after
    assert not any(line.startswith('{"path":"/after"') for line in before)
    assert any(line.startswith('{"path":"/after"') for line in after)
