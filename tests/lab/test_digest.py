"""digest_tree covers what a write can change and ignores what a read changes."""
from __future__ import annotations

import os

import pytest

from gpuconf_lab.digest import digest_tree


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/file").write_text("one\n")
    os.symlink("file", tmp_path / "etc/link")
    return tmp_path


def test_the_same_tree_gives_the_same_digest_even_after_reads(tree):
    first = digest_tree(tree)
    (tree / "etc/file").read_text()
    os.utime(tree / "etc/file", (0, 0))
    assert digest_tree(tree) == first


@pytest.mark.parametrize("change", ["content", "mode", "symlink", "new", "owner", "whiteout", "xattr"])
def test_each_kind_of_write_changes_the_digest(tree, change):
    before = digest_tree(tree)
    path = tree / "etc/file"
    if change in ("owner", "whiteout", "xattr") and os.geteuid() != 0:
        pytest.skip("needs root")
    if change == "content":
        path.write_text("two\n")
    elif change == "mode":
        path.chmod(0o600)
    elif change == "symlink":
        (tree / "etc/link").unlink()
        os.symlink("elsewhere", tree / "etc/link")
    elif change == "new":
        (tree / "etc/empty").mkdir()
    elif change == "owner":
        os.chown(path, 1, 1)
    elif change == "whiteout":
        os.mknod(tree / "etc/deleted", 0o020000, os.makedev(0, 0))
    elif change == "xattr":
        os.setxattr(tree / "etc", "trusted.overlay.opaque", b"y")
    assert digest_tree(tree) != before


def test_an_unchanged_copy_up_is_not_a_write_but_any_change_to_it_is(tmp_path):
    lower, upper = tmp_path / "lower", tmp_path / "upper"
    for root in (lower, upper):
        (root / "var/lib/rpm").mkdir(parents=True)
        (root / "var/lib/rpm/rpmdb.sqlite").write_bytes(b"data")
    empty = tmp_path / "empty"
    (empty / "var/lib").mkdir(parents=True)
    baseline = digest_tree(empty, [lower])
    assert digest_tree(upper, [lower]) == baseline            # opened read-write, never written
    assert digest_tree(upper) != digest_tree(empty)             # without the lower layers it counts
    (upper / "var/lib/rpm/rpmdb.sqlite").write_bytes(b"data2")
    assert digest_tree(upper, [lower]) != baseline


def test_sqlites_wal_index_is_not_content_but_its_database_is(tree):
    (tree / "etc/rpmdb.sqlite").write_bytes(b"data")
    (tree / "etc/rpmdb.sqlite-shm").write_bytes(b"index")
    before = digest_tree(tree)
    (tree / "etc/rpmdb.sqlite-shm").write_bytes(b"rebuilt by a reader")
    assert digest_tree(tree) == before
    (tree / "etc/rpmdb.sqlite").write_bytes(b"new data")
    assert digest_tree(tree) != before
