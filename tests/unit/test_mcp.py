"""MCP's pure parts: `[[mcp.servers]]` refused naming the bad key, the pfar name of a
server's tool, and what a tool is to the journal from its annotations and the owner's
word over them."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.types import ToolAnnotations

from pfar.config import Config
from pfar.config.mcp import McpToolConfig
from pfar.errors import ConfigError
from pfar.journal.records import Idempotency, Semantics
from pfar.tools.mcp import tool_name
from pfar.tools.mcp.semantics import rules_of
from pfar.tools.mcp.server import schema_problem


def _config(tmp_path: Path, text: str) -> Config:
    path = tmp_path / "config.toml"
    path.write_text(text)
    path.chmod(0o600)
    return Config.load(path)


def test_a_server_of_each_transport_is_read(tmp_path: Path) -> None:
    config = _config(
        tmp_path,
        '[[mcp.servers]]\nname = "time"\ncommand = ["mcp-server-time"]\n'
        'env = { TOKEN = "{{secret:time_token}}" }\n'
        "[mcp.servers.tools.get_current_time]\n"
        'semantics = "read"\nask = false\n'
        '[[mcp.servers]]\nname = "far-one"\nurl = "https://mcp.example.com/mcp"\n'
        'headers = { Authorization = "Bearer {{secret:far}}" }\nenabled = false\n',
    )
    time, far = config.mcp.servers
    assert time.command == ["mcp-server-time"] and time.env["TOKEN"] == "{{secret:time_token}}"
    assert time.tools["get_current_time"] == McpToolConfig(semantics="read", ask=False)
    assert far.url == "https://mcp.example.com/mcp" and not far.enabled


@pytest.mark.parametrize(
    ("entry", "key", "complaint"),
    [
        ('name = "a"', "mcp.servers.0", "exactly one of command or url"),
        ('name = "a"\ncommand = ["x"]\nurl = "http://h/"', "mcp.servers.0", "exactly one"),
        ('name = "a__b"\ncommand = ["x"]', "mcp.servers.0.name", "should match"),
        ('name = "a.b"\ncommand = ["x"]', "mcp.servers.0.name", "should match"),
        ('name = "a"\ncommand = []', "mcp.servers.0.command", "at least 1"),
        ('name = "a"\nurl = "ftp://h/"', "mcp.servers.0", "http:// or https://"),
        ('name = "a"\nurl = "http://h/"\nenv = { A = "b" }', "mcp.servers.0", "for a command"),
        ('name = "a"\ncommand = ["x"]\nheaders = { A = "b" }', "mcp.servers.0", "for a url"),
        ('name = "a"\ncommand = ["x"]\nenv = { "A B" = "c" }', "mcp.servers.0", "variable name"),
        ('name = "a"\ncommand = ["x"]\nstart_timeout_seconds = 0', "mcp.servers.0.start_", ""),
        ('name = "a"\ncommand = ["x"]\nargs = ["y"]', "mcp.servers.0.args", "unknown key"),
        (
            'name = "a"\ncommand = ["x"]\n[mcp.servers.tools.t]\nsemantics = "maybe"',
            "mcp.servers.0.tools.t.semantics",
            "",
        ),
    ],
)
def test_a_bad_server_is_refused_naming_its_key(
    tmp_path: Path, entry: str, key: str, complaint: str
) -> None:
    with pytest.raises(ConfigError) as err:
        _config(tmp_path, f"[[mcp.servers]]\n{entry}\n")
    assert err.value.key.startswith(key), err.value
    assert complaint in err.value.problem


def test_two_servers_of_one_name_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        _config(
            tmp_path,
            '[[mcp.servers]]\nname = "a"\ncommand = ["x"]\n'
            '[[mcp.servers]]\nname = "A"\ncommand = ["y"]\n',
        )
    assert "two servers are named 'A'" in err.value.problem


def test_a_tool_is_named_so_that_no_built_in_is_shadowed_and_every_api_takes_it() -> None:
    assert tool_name("git", "git_status") == "mcp__git__git_status"
    dotted = tool_name("fs", "read.file")
    assert dotted.startswith("mcp__fs__read_file_") and dotted != tool_name("fs", "read_file")
    long = tool_name("a-very-long-server-name", "x" * 100)
    assert len(long) == 64 and long.startswith("mcp__a-very-long-server-name__xxx")
    assert tool_name("s", "x" * 100) != tool_name("s", "x" * 99)
    assert all(c.isalnum() or c in "_-" for c in tool_name("s", "héllo wörld/€"))


@pytest.mark.parametrize(
    ("hints", "kind", "semantics", "idempotency", "asks"),
    [
        (ToolAnnotations(read_only_hint=True), "read", Semantics.Read, Idempotency.none, None),
        (
            ToolAnnotations(idempotent_hint=True, destructive_hint=False),
            "idempotent",
            Semantics.Write,
            Idempotency.key,
            None,
        ),
        (
            ToolAnnotations(idempotent_hint=True),
            "idempotent",
            Semantics.Write,
            Idempotency.key,
            True,
        ),
        (ToolAnnotations(destructive_hint=False), "write", Semantics.Write, Idempotency.none, None),
        (None, "write", Semantics.Write, Idempotency.none, True),  # the protocol's defaults
    ],
)
def test_a_tools_annotations_give_its_durable_rules(
    hints: ToolAnnotations | None,
    kind: str,
    semantics: Semantics,
    idempotency: Idempotency,
    asks: bool | None,
) -> None:
    rules = rules_of(hints, None)
    assert (rules.kind, rules.semantics, rules.idempotency, rules.asks) == (
        kind,
        semantics,
        idempotency,
        asks,
    )


def test_the_owners_word_overrides_the_annotations() -> None:
    read_only = ToolAnnotations(read_only_hint=True)
    assert rules_of(read_only, McpToolConfig(semantics="write")).kind == "write"
    assert rules_of(read_only, McpToolConfig(ask=True)).asks is True
    plain = rules_of(None, McpToolConfig(semantics="read"))
    assert (plain.semantics, plain.asks) == (Semantics.Read, None)
    assert rules_of(None, McpToolConfig(ask=False)).asks is False
    assert rules_of(None, McpToolConfig(semantics="idempotent")).idempotency is Idempotency.key


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"type": "object", "properties": {"a": {"type": "string"}}}, None),
        ({"type": "array"}, "not an object schema"),
        ("object", "not an object schema"),
        ({"type": "object", "properties": {"a": 3}}, "properties are not schemas"),
        ({"type": "object", "required": "a"}, "required is not a list"),
    ],
)
def test_a_listed_schema_a_model_cannot_be_given_is_named(
    schema: object, problem: str | None
) -> None:
    found = schema_problem(schema)
    assert found == problem if problem is None else problem in (found or "")


def test_an_mcp_tool_let_run_unasked_that_may_write_is_a_guard_off(tmp_path: Path) -> None:
    from pfar.kernel.guards import guards_off

    config = _config(
        tmp_path,
        '[[mcp.servers]]\nname = "t"\ncommand = ["x"]\n'
        "[mcp.servers.tools.append]\nask = false\n"
        '[mcp.servers.tools.peek]\nask = false\nsemantics = "read"\n',
    )
    (off,) = [g for g in guards_off(config) if g.guard.startswith("mcp.")]
    assert off.guard == "mcp.servers.0.tools.append.ask"
    assert "mcp__t__append runs without asking the owner" in off.detail


def test_a_results_blocks_become_text_for_the_model() -> None:
    from mcp import types

    from pfar.tools.mcp.tool import content_text

    result = types.CallToolResult(
        content=[
            types.TextContent(text="first"),
            types.ImageContent(data="aGVsbG8=", mime_type="image/png"),
            types.EmbeddedResource(
                resource=types.TextResourceContents(uri="file:///a.txt", text="inside")
            ),
            types.ResourceLink(name="b", uri="file:///b.txt"),
        ]
    )
    assert content_text(result) == (
        "first\n[image image/png, 8 base64 characters]\ninside\n[resource link file:///b.txt]"
    )
    structured = types.CallToolResult(content=[], structured_content={"n": 5})
    assert content_text(structured) == '{"n": 5}'
