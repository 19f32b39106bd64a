"""The coding tools on a real directory: Read, Write, Edit, Glob and Grep (both its
backends), and the working directory's edge. Bash and WebFetch, which start processes
and talk to servers, are in tests/integration/test_coding_tools_io.py."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from pfar.errors import ToolFailed
from pfar.journal.records import Idempotency, Semantics
from pfar.tools.coding import Edit, Glob, Grep, Read, Write
from pfar.tools.coding.read import MAX_LINE
from pfar.tools.coding.text import MAX_CHARS
from pfar.tools.registry import ToolRegistry

from ..coding_support import call, check, context


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    return root


def test_the_loop_offers_them_as_builtins_with_closed_schemas() -> None:
    tools = ToolRegistry.builtin()
    for name in ("Read", "Write", "Edit", "Bash", "Glob", "Grep", "WebFetch"):
        tool = tools.get(name)
        assert tool.args_schema["additionalProperties"] is False
        assert len(tool.description) > 200, name  # enough for a model to use it well
    reads = [tools.get(n) for n in ("Read", "Glob", "Grep", "WebFetch")]
    assert all(t.semantics({}) is Semantics.Read for t in reads)
    assert tools.get("Write").idempotency({}) is Idempotency.check
    assert tools.get("Bash").semantics({"command": "ls"}) is Semantics.Write
    assert tools.get("Bash").idempotency({"command": "ls"}) is Idempotency.none


# -- Read -----------------------------------------------------------------------


def test_read_numbers_lines_like_cat_n(work: Path) -> None:
    (work / "a.py").write_text("first\n\tindented\nlast")
    out = call(Read(), {"file_path": "a.py"}, context(work))
    assert out["text"] == "     1\tfirst\n     2\t\tindented\n     3\tlast\n"
    assert out["total_lines"] == 3
    assert out["sha256"] == hashlib.sha256(b"first\n\tindented\nlast").hexdigest()


def test_read_shows_a_window_and_says_where_to_read_on(work: Path) -> None:
    (work / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 101)))
    out = call(Read(), {"file_path": "n.txt", "offset": 10, "limit": 5}, context(work))
    lines = out["text"].splitlines()
    assert lines[:5] == [f"{i:>6}\tline {i}" for i in range(10, 15)]
    assert "Showed lines 10-14 of 100" in out["text"]
    assert "offset=15" in out["text"]
    end = call(Read(), {"file_path": "n.txt", "offset": 99}, context(work))
    assert end["text"] == "    99\tline 99\n   100\tline 100\n"
    with pytest.raises(ToolFailed, match="has 100 lines; offset 101 is past its end"):
        call(Read(), {"file_path": "n.txt", "offset": 101}, context(work))


def test_read_caps_its_text_and_long_lines(work: Path) -> None:
    (work / "big.txt").write_text("".join(f"{i:05d} " + "x" * 40 + "\n" for i in range(1, 2001)))
    out = call(Read(), {"file_path": "big.txt"}, context(work))
    assert len(out["text"]) <= MAX_CHARS + 200
    last = out["last_line"]
    assert 500 < last < 2000
    assert f"Read on with offset={last + 1}" in out["text"]
    assert "capped at 30,000 characters" in out["text"]
    (work / "wide.txt").write_text("y" * (MAX_LINE + 500) + "\nshort\n")
    wide = call(Read(), {"file_path": "wide.txt"}, context(work))["text"]
    assert f"[... line cut at {MAX_LINE} characters]" in wide
    assert wide.endswith("     2\tshort\n")


def test_read_refuses_binary_missing_and_directories(work: Path) -> None:
    (work / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")
    with pytest.raises(ToolFailed, match=r"img\.png is a binary file"):
        call(Read(), {"file_path": "img.png"}, context(work))
    with pytest.raises(ToolFailed, match=r"nope\.txt does not exist"):
        call(Read(), {"file_path": "nope.txt"}, context(work))
    (work / "sub").mkdir()
    with pytest.raises(ToolFailed, match="sub is a directory"):
        call(Read(), {"file_path": "sub"}, context(work))
    (work / "empty").write_text("")
    assert call(Read(), {"file_path": "empty"}, context(work))["text"] == "(empty is empty)"


@pytest.mark.parametrize("tool", [Read(), Write(), Edit()])
def test_paths_outside_the_working_directory_are_refused_by_name(work: Path, tool: Any) -> None:
    outside = work.parent / "secret.txt"
    outside.write_text("s3cret")
    (work / "link").symlink_to(outside)
    args = {"content": "x", "old_string": "s3cret", "new_string": "gone"}
    for path in ("../secret.txt", str(outside), "link", "sub/../../secret.txt"):
        with pytest.raises(ToolFailed, match=f"path {path!r} is outside the task workspace"):
            call(tool, {"file_path": path, **_only(tool, args)}, context(work))
    assert outside.read_text() == "s3cret"


def _only(tool: Any, args: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in args.items() if k in tool.args_schema["properties"]}


def test_an_absolute_path_inside_the_working_directory_is_fine(work: Path) -> None:
    call(Write(), {"file_path": str(work / "abs.txt"), "content": "ok\n"}, context(work))
    out = call(Read(), {"file_path": str(work / "abs.txt")}, context(work))
    assert out["text"] == "     1\tok\n"
    assert out["file_path"] == "abs.txt"


# -- Write ----------------------------------------------------------------------


def test_write_creates_parents_and_replaces_by_rename(work: Path) -> None:
    out = call(Write(), {"file_path": "deep/er/f.txt", "content": "one\ntwo\n"}, context(work))
    target = work / "deep" / "er" / "f.txt"
    assert target.read_text() == "one\ntwo\n"
    assert out["sha256"] == hashlib.sha256(b"one\ntwo\n").hexdigest()
    assert out["text"] == "Created deep/er/f.txt (8 bytes, 2 lines)."
    target.chmod(0o640)
    with target.open() as held:  # a reader of the old file keeps the old content
        before = os.stat(target).st_ino
        again = call(Write(), {"file_path": "deep/er/f.txt", "content": "new"}, context(work))
        assert held.read() == "one\ntwo\n"
    assert again["text"].startswith("Updated deep/er/f.txt")
    assert target.read_text() == "new"
    assert os.stat(target).st_ino != before  # renamed into place, not written over
    assert target.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in target.parent.iterdir()) == ["f.txt"]  # no temp left


def test_write_check_finds_its_effect_only_when_the_content_matches(work: Path) -> None:
    args = {"file_path": "c.txt", "content": "exactly this"}
    ctx = context(work)
    assert check(Write(), args, ctx) is None  # missing
    (work / "c.txt").write_text("something else")
    assert check(Write(), args, ctx) is None
    (work / "c.txt").write_text("exactly thiS")  # same size, other content
    assert check(Write(), args, ctx) is None
    done = call(Write(), args, ctx)
    found = check(Write(), args, ctx)
    assert found is not None
    assert found["sha256"] == done["sha256"]


# -- Edit -----------------------------------------------------------------------

SOURCE = "def a():\n    return 1\n\n\ndef b():\n    return 1\n"


def test_edit_replaces_a_unique_string_and_shows_the_lines(work: Path) -> None:
    (work / "m.py").write_text(SOURCE)
    args = {
        "file_path": "m.py",
        "old_string": "def b():\n    return 1",
        "new_string": "def b():\n    return 2",
    }
    out = call(Edit(), args, context(work))
    assert (work / "m.py").read_text() == SOURCE.replace("return 1\n", "return 2\n").replace(
        "return 2\n\n\n", "return 1\n\n\n"
    )
    assert out["replacements"] == 1
    assert out["text"].startswith("Edited m.py: replaced 1 occurrence.\n")
    assert "     5\tdef b():\n     6\t    return 2\n" in out["text"]


def test_edit_refuses_not_found_and_ambiguous_and_changes_nothing(work: Path) -> None:
    (work / "m.py").write_text(SOURCE)
    with pytest.raises(ToolFailed, match=r"old_string was not found in m\.py"):
        call(
            Edit(),
            {"file_path": "m.py", "old_string": "return 3", "new_string": "x"},
            context(work),
        )
    with pytest.raises(ToolFailed, match=r"found 2 times in m\.py.*replace_all"):
        call(
            Edit(),
            {"file_path": "m.py", "old_string": "return 1", "new_string": "x"},
            context(work),
        )
    with pytest.raises(ToolFailed, match="the same"):
        call(Edit(), {"file_path": "m.py", "old_string": "a", "new_string": "a"}, context(work))
    assert (work / "m.py").read_text() == SOURCE


def test_edit_replace_all(work: Path) -> None:
    (work / "m.py").write_text(SOURCE)
    args = {
        "file_path": "m.py",
        "old_string": "return 1",
        "new_string": "return 0",
        "replace_all": True,
    }
    out = call(Edit(), args, context(work))
    assert out["replacements"] == 2
    assert (work / "m.py").read_text() == SOURCE.replace("return 1", "return 0")


def test_edit_check_tells_whether_the_edit_took_effect(work: Path) -> None:
    (work / "m.py").write_text(SOURCE)
    args = {"file_path": "m.py", "old_string": "def a():", "new_string": "def alpha():"}
    assert Edit().idempotency(args) is Idempotency.check
    assert check(Edit(), args, context(work)) is None  # not yet: safe to run
    call(Edit(), args, context(work))
    found = check(Edit(), args, context(work))
    assert found is not None and "in place" in found["text"]
    # a new text that holds the old one leaves the file unable to tell: the owner decides
    growing = {"file_path": "m.py", "old_string": "b()", "new_string": "b() -> int"}
    assert Edit().idempotency(growing) is Idempotency.none


def test_edit_refuses_binary_and_non_utf8_files(work: Path) -> None:
    (work / "l1.txt").write_bytes("café".encode("latin-1"))
    with pytest.raises(ToolFailed, match="not UTF-8 text"):
        call(Edit(), {"file_path": "l1.txt", "old_string": "caf", "new_string": "x"}, context(work))


# -- Glob -----------------------------------------------------------------------


def _touch(path: Path, mtime: int, text: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (mtime, mtime))


def test_glob_lists_matches_newest_first_and_skips_git(work: Path) -> None:
    _touch(work / "old.py", 1_000)
    _touch(work / "src" / "new.py", 3_000)
    _touch(work / "src" / "pkg" / "mid.py", 2_000)
    _touch(work / "src" / "notes.md", 4_000)
    _touch(work / ".git" / "hooks" / "x.py", 5_000)
    out = call(Glob(), {"pattern": "**/*.py"}, context(work))
    assert out["text"].splitlines() == ["src/new.py", "src/pkg/mid.py", "old.py"]
    top = call(Glob(), {"pattern": "*.py"}, context(work))
    assert top["text"] == "old.py"
    sub = call(Glob(), {"pattern": "**/*.{py,md}", "path": "src"}, context(work))
    assert sub["text"].splitlines() == ["src/notes.md", "src/new.py", "src/pkg/mid.py"]
    none = call(Glob(), {"pattern": "*.rs"}, context(work))
    assert none["text"] == "No files match '*.rs'." and none["count"] == 0
    with pytest.raises(ToolFailed, match="must be relative"):
        call(Glob(), {"pattern": "../*"}, context(work))
    with pytest.raises(ToolFailed, match="outside the task workspace"):
        call(Glob(), {"pattern": "*", "path": ".."}, context(work))


def test_glob_caps_its_list(work: Path) -> None:
    for i in range(1005):
        _touch(work / f"f{i:04d}.txt", 10_000 + i)
    out = call(Glob(), {"pattern": "*.txt"}, context(work))
    lines = out["text"].splitlines()
    assert lines[0] == "f1004.txt" and lines[999] == "f0005.txt"
    assert (
        lines[1000]
        == "[1,005 files match; showing the 1000 newest. Narrow the pattern or give a `path`.]"
    )


# -- Grep: both backends give the same output -------------------------------------


@pytest.fixture(params=["python", "rg"])
def grep(request: pytest.FixtureRequest) -> Grep:
    if request.param == "python":
        return Grep(rg=None)
    tool = Grep()
    if tool.backend() is None:
        if os.environ.get("CI") == "true":  # scripts/check.py installs it where it can
            pytest.fail("ripgrep (rg) is not installed, and CI=true needs every backend tested")
        pytest.skip("ripgrep (rg) is not installed: only the Python search is tested")
    return tool


@pytest.fixture
def tree(work: Path) -> Path:
    (work / "b.txt").write_text("one\ntwo foo\nthree\nfour\nfive\nsix foo\nseven\n")
    (work / "a").mkdir()
    (work / "a" / "x.txt").write_text("foo\nbar\n")
    (work / "a.txt").write_text("FOO\n")
    (work / "a" / "y.md").write_text("foo in markdown\n")
    (work / ".hidden").write_text("foo hidden\n")
    (work / ".git").mkdir()
    (work / ".git" / "config").write_text("foo in git\n")
    (work / "bin.dat").write_bytes(b"foo\0\1\2")
    return work


def test_grep_lists_files_with_matches_by_default(grep: Grep, tree: Path) -> None:
    out = call(grep, {"pattern": "foo"}, context(tree))
    assert out["text"].splitlines() == [".hidden", "a/x.txt", "a/y.md", "b.txt"]
    assert call(grep, {"pattern": "foo", "-i": True}, context(tree))["lines"] == 5


def test_grep_follows_no_symlink_out_of_the_directory(grep: Grep, tree: Path) -> None:
    outside = tree.parent / "outside.txt"
    outside.write_text("foo outside\n")
    (tree / "zlink.txt").symlink_to(outside)
    out = call(grep, {"pattern": "outside"}, context(tree))
    assert out["text"] == "No matches for 'outside' in .."
    with pytest.raises(ToolFailed, match="outside the task workspace"):
        call(grep, {"pattern": "foo", "path": "zlink.txt"}, context(tree))


def test_grep_counts(grep: Grep, tree: Path) -> None:
    out = call(grep, {"pattern": "foo", "output_mode": "count", "path": "b.txt"}, context(tree))
    assert out["text"] == "b.txt:2"
    glob = {"pattern": "foo", "output_mode": "count", "glob": "*.txt"}
    assert call(grep, glob, context(tree))["text"].splitlines() == ["a/x.txt:1", "b.txt:2"]


def test_grep_content_with_context_lines(grep: Grep, tree: Path) -> None:
    args = {"pattern": "foo", "output_mode": "content", "-C": 1, "glob": "*.txt"}
    out = call(grep, args, context(tree))
    assert out["text"] == (
        "a/x.txt:1:foo\n"
        "a/x.txt-2-bar\n"
        "--\n"
        "b.txt-1-one\n"
        "b.txt:2:two foo\n"
        "b.txt-3-three\n"
        "--\n"
        "b.txt-5-five\n"
        "b.txt:6:six foo\n"
        "b.txt-7-seven"
    )
    after = {"pattern": "six", "output_mode": "content", "-A": 1, "-n": False, "path": "b.txt"}
    assert call(grep, after, context(tree))["text"] == "b.txt:six foo\nb.txt-seven"
    before = {"pattern": "^t", "output_mode": "content", "-B": 1, "path": str(tree / "b.txt")}
    assert call(grep, before, context(tree))["text"] == (
        "b.txt-1-one\nb.txt:2:two foo\nb.txt:3:three"
    )


def test_grep_head_limit_no_match_and_bad_regex(grep: Grep, tree: Path) -> None:
    args = {"pattern": "o", "output_mode": "content", "head_limit": 2}
    out = call(grep, args, context(tree))
    assert out["text"].splitlines()[:2] == [".hidden:1:foo hidden", "a/x.txt:1:foo"]
    assert "showing the first 2 (head_limit)" in out["text"]
    miss = call(grep, {"pattern": "zebra"}, context(tree))
    assert miss["text"] == "No matches for 'zebra' in .." and miss["lines"] == 0
    with pytest.raises(ToolFailed, match="Grep: "):
        call(grep, {"pattern": "foo("}, context(tree))
    with pytest.raises(ToolFailed, match="outside the task workspace"):
        call(grep, {"pattern": "foo", "path": "/etc"}, context(tree))


def test_grep_caps_its_output(grep: Grep, work: Path) -> None:
    (work / "many.txt").write_text("match this line please\n" * 5000)
    out = call(grep, {"pattern": "match", "output_mode": "content"}, context(work))
    assert len(out["text"]) < MAX_CHARS + 300
    assert "more characters not shown; narrow the search" in out["text"]
    assert out["lines"] == 5000


def test_the_rg_backend_is_found_on_path() -> None:
    assert (Grep().backend() is None) is (shutil.which("rg") is None)
    assert Grep(rg=None).backend() is None
