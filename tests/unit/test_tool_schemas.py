"""Every built-in tool declares a JSON Schema for its arguments, and its own `validate()`
agrees with that schema: what one accepts the other accepts, what one refuses the other
refuses. The planner is shown the schema, so a model can know `file.write` needs
`content`."""

from __future__ import annotations

from typing import Any

import pytest

from pfar.errors import ToolFailed
from pfar.json_schema import validate_schema
from pfar.runners.thinking import step_check, tool_listing, tool_schemas
from pfar.tools.registry import ToolRegistry

TOOLS = ToolRegistry.builtin()

# (tool, args, accepted?)
EXAMPLES: list[tuple[str, dict[str, Any], bool]] = [
    ("file.read", {"path": "note.md"}, True),
    ("file.read", {}, False),
    ("file.read", {"path": 3}, False),
    ("file.read", {"path": "note.md", "encoding": "utf-8"}, False),
    ("file.write", {"path": "note.md", "content": "milk"}, True),
    ("file.write", {"path": "note.md", "content": ""}, True),
    ("file.write", {"path": "note.md"}, False),
    ("file.write", {"path": "note.md", "text": "milk"}, False),
    ("file.write", {"path": "", "content": "milk"}, False),
    ("http.request", {"url": "https://example.org"}, True),
    (
        "http.request",
        {
            "url": "https://example.org/x",
            "method": "POST",
            "headers": {"Content-Type": "text/plain"},
            "body": "hi",
            "timeout_seconds": 5,
        },
        True,
    ),
    ("http.request", {"url": "https://example.org", "method": "PUT", "json": {"a": [1]}}, True),
    ("http.request", {"method": "GET"}, False),
    ("http.request", {"url": "https://example.org", "method": "FETCH"}, False),
    ("http.request", {"url": "https://example.org", "headers": {"X-N": 1}}, False),
    ("http.request", {"url": "https://example.org", "headers": "X-N: 1"}, False),
    ("http.request", {"url": "https://example.org", "body": "a", "json": {}}, False),
    ("http.request", {"url": "https://example.org", "timeout_seconds": 0}, False),
    ("http.request", {"url": "https://example.org", "data": "x"}, False),
    ("shell.run", {"argv": ["echo", "hi"]}, True),
    ("shell.run", {"argv": ["cat"], "env": {"A": "1"}, "stdin": "text"}, True),
    ("shell.run", {"argv": []}, False),
    ("shell.run", {"argv": "echo hi"}, False),
    ("shell.run", {"argv": ["echo", 1]}, False),
    ("shell.run", {"argv": ["env"], "env": {"A": 1}}, False),
    ("shell.run", {"argv": ["cat"], "stdin": 5}, False),
    ("shell.run", {"command": "echo hi"}, False),
    ("admin.prompt_credential", {"service": "notion"}, True),
    (
        "admin.prompt_credential",
        {
            "service": "notion",
            "credential_type": "integration_token",
            "instructions": "Settings > Integrations",
            "vault_ref": "vault:notion_token",
        },
        True,
    ),
    ("admin.prompt_credential", {}, False),
    ("admin.prompt_credential", {"service": "notion", "credential_type": "password"}, False),
    ("admin.prompt_credential", {"service": "notion", "token": "x"}, False),
    ("Read", {"file_path": "a.py"}, True),
    ("Read", {"file_path": "a.py", "offset": 10, "limit": 20}, True),
    ("Read", {"file_path": "a.py", "offset": 0}, False),
    ("Read", {"path": "a.py"}, False),
    ("Write", {"file_path": "a.py", "content": ""}, True),
    ("Write", {"file_path": "a.py"}, False),
    ("Edit", {"file_path": "a.py", "old_string": "x", "new_string": "y"}, True),
    (
        "Edit",
        {"file_path": "a.py", "old_string": "x", "new_string": "y", "replace_all": True},
        True,
    ),
    ("Edit", {"file_path": "a.py", "old_string": "", "new_string": "y"}, False),
    ("Edit", {"file_path": "a.py", "old_string": "x", "new_string": "y", "all": True}, False),
    ("Bash", {"command": "make test", "timeout": 60, "description": "run the tests"}, True),
    ("Bash", {"command": "make", "timeout": 601}, False),
    ("Bash", {"argv": ["make"]}, False),
    ("Glob", {"pattern": "**/*.py", "path": "src"}, True),
    ("Glob", {"path": "src"}, False),
    ("Grep", {"pattern": "def ", "output_mode": "content", "-C": 2, "-i": True}, True),
    ("Grep", {"pattern": "x", "glob": "*.py", "head_limit": 5, "-n": False}, True),
    ("Grep", {"pattern": "x", "output_mode": "lines"}, False),
    ("Grep", {"pattern": "x", "-A": -1}, False),
    ("WebFetch", {"url": "https://example.org", "prompt": "what is it?"}, True),
    ("WebFetch", {"url": "https://example.org", "method": "POST"}, False),
    ("Skill", {"name": "pdf-tools"}, True),
    ("Skill", {"name": "pdf-tools", "file": "scripts/fill.py"}, True),
    ("Skill", {}, False),
    ("Skill", {"name": ""}, False),
    ("Skill", {"name": "pdf-tools", "file": ""}, False),
    ("Skill", {"name": "pdf-tools", "run": "x"}, False),
]


def test_every_builtin_tool_declares_a_closed_object_schema() -> None:
    for tool in TOOLS:
        schema = tool.args_schema
        assert schema["type"] == "object", tool.name
        assert schema["additionalProperties"] is False, tool.name
        assert set(schema.get("required", [])) <= set(schema["properties"]), tool.name
    assert {name for name, _, _ in EXAMPLES} == {tool.name for tool in TOOLS}


@pytest.mark.parametrize(("name", "args", "accepted"), EXAMPLES)
def test_validate_and_the_schema_agree(name: str, args: dict[str, Any], accepted: bool) -> None:
    tool = TOOLS.get(name)
    schema_ok = validate_schema(args, tool.args_schema) == []
    try:
        tool.validate(args)
    except ToolFailed as exc:
        validate_ok = False
        assert str(exc).startswith(f"{name}: args")  # names the tool and the argument
    else:
        validate_ok = True
    assert schema_ok is validate_ok is accepted


def test_a_refusal_names_the_argument() -> None:
    check = step_check(TOOLS)
    complaint = check("file.write", {"path": "n.md", "text": "milk"})
    assert complaint is not None
    assert "missing the required property 'content'" in complaint
    assert "unexpected property 'text'" in complaint
    assert check("file.write", {"path": "n.md", "content": "milk"}) is None
    assert check("no.such", {}) == "unknown tool 'no.such'"


def test_the_plan_prompt_shows_each_allowed_tools_arguments() -> None:
    listing = tool_listing(["file.write", "shell.run"], tool_schemas(TOOLS))
    write, shell = listing.split("\n- ")
    assert write.startswith("- file.write: Write a text file")
    assert '"content":{' in write and '"required":["path","content"]' in write
    assert shell.startswith("shell.run: ") and '"minItems":1' in shell
    assert "http.request" not in listing  # only the template's allowed tools
