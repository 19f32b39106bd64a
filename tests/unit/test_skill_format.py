"""SKILL.md as the Agent Skills format has it: YAML front matter with `name` (lowercase
words joined by hyphens, at most 64, its folder's name) and `description` (at most
1024), then the instructions. What does not follow it is refused with a reason that
names the field."""

from __future__ import annotations

import pytest

from pfar.tools.skills import SkillFile, Unusable, parse
from pfar.tools.skills.format import MAX_SKILL_BYTES


def _md(front: str, body: str = "Do the thing.\n") -> bytes:
    return f"---\n{front}---\n{body}".encode()


def test_a_skill_with_its_optional_fields_is_read() -> None:
    data = _md(
        "name: pdf-tools\n"
        "description: >\n  Fill PDF forms.\n  Use when a PDF is named.\n"
        "license: Apache-2.0\n"
        "compatibility: needs python3\n"
        "metadata:\n  author: me\n  version: '1.0'\n"
        "allowed-tools: Bash(python3:*) Read\n",
        "# PDF\n\nRun scripts/fill.py.\n",
    )
    assert parse(data, "pdf-tools") == SkillFile(
        "pdf-tools", "Fill PDF forms. Use when a PDF is named.", "# PDF\n\nRun scripts/fill.py."
    )


def test_windows_line_ends_and_a_byte_order_mark_are_read() -> None:
    data = b"\xef\xbb\xbf---\r\nname: a1\r\ndescription: d\r\n---\r\nbody\r\n"
    assert parse(data, "a1") == SkillFile("a1", "d", "body")


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"name: a\n", "does not start with a YAML front matter"),
        (b"", "does not start with a YAML front matter"),
        (b"---\nname: a\ndescription: d\n", "no closing '---'"),
        (_md("name: a\ndescription: d: e\n"), "not valid YAML at line 3: mapping values"),
        (_md("- a\n- b\n"), "not a mapping"),
        (_md("description: d\n"), "`name` is missing"),
        (_md("name: a\n"), "`description` is missing"),
        (_md("name: a\ndescription: '  '\n"), "`description` is not a non-empty text"),
        (_md("name: a\ndescription: 3\n"), "`description` is not a non-empty text"),
        (_md("name: 12\ndescription: d\n"), "`name` is not text (int)"),
        (_md("name: Pdf\ndescription: d\n"), "`name` 'Pdf' is not lowercase"),
        (_md("name: -pdf\ndescription: d\n"), "is not lowercase"),
        (_md("name: pdf-\ndescription: d\n"), "is not lowercase"),
        (_md("name: pdf--x\ndescription: d\n"), "is not lowercase"),
        (_md("name: pdf_x\ndescription: d\n"), "is not lowercase"),
        (_md("name: b\ndescription: d\n"), "`name` 'b' is not its folder's name 'a'"),
        (_md(f"name: {'a' * 65}\ndescription: d\n"), "`name` is 65 characters, over 64"),
        (_md(f"name: a\ndescription: {'d' * 1025}\n"), "is 1025 characters, over 1024"),
        (_md("name: a\ndescription: d\nmetadata: x\n"), "`metadata` is not a mapping"),
        (_md(f"name: a\ndescription: d\ncompatibility: {'c' * 501}\n"), "`compatibility`"),
        (_md("name: a\ndescription: d\nruns: rm\n"), "unknown field 'runs'"),
        (b"---\nname: a\ndescription: \xff\n---\n", "not UTF-8 text (at byte offset 25)"),
        (b"x" * (MAX_SKILL_BYTES + 1), "over 131,072"),
    ],
)
def test_what_does_not_follow_the_format_is_refused_saying_why(data: bytes, why: str) -> None:
    found = parse(data, "a")
    assert isinstance(found, Unusable)
    assert why in found.why, found.why


def test_a_yaml_tag_builds_no_object() -> None:
    """The safe loader: a tag that would run code in a full loader is an error."""
    data = _md("name: a\ndescription: !!python/object/apply:os.system ['touch /tmp/x']\n")
    found = parse(data, "a")
    assert isinstance(found, Unusable)
    assert "not valid YAML" in found.why


def test_the_longest_name_and_description_are_read() -> None:
    name = "a" * 64
    found = parse(_md(f"name: {name}\ndescription: {'d' * 1024}\n"), name)
    assert isinstance(found, SkillFile)
    assert found.name == name and len(found.description) == 1024
