"""`pfar mcp add` and `remove` edit config.toml: the owner's comments and layout stay, the
whole new file is checked before it replaces the old one, and a refused change leaves
the file as it was, byte for byte."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pfar.config import Config
from pfar.config.mcp_edit import add_server, remove_server
from pfar.errors import ConfigError, UnsafePermissions

OWNERS = """\
# my kernel
[llm]
provider = "scripted"   # for now

[mcp]
# servers below
[[mcp.servers]]
name = "time"
command = ["mcp-server-time"]

[mcp.servers.tools.get_current_time]
ask = false   # harmless
"""


def _config(tmp_path: Path, text: str = OWNERS) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    path.chmod(0o600)
    return path


def test_an_added_server_follows_the_owners_entries_and_keeps_their_comments(
    tmp_path: Path,
) -> None:
    path = _config(tmp_path)
    added = add_server(
        path,
        {"name": "git", "command": ["mcp-server-git"], "env": {"T": "{{secret:gh}}"}},
    )
    assert (added.name, added.command, added.env) == (
        "git",
        ["mcp-server-git"],
        {"T": "{{secret:gh}}"},
    )
    text = path.read_text()
    assert text.startswith(OWNERS)  # nothing of the owner's moved or went
    assert text[len(OWNERS) :] == (
        '\n[[mcp.servers]]\nname = "git"\ncommand = ["mcp-server-git"]\n'
        'env = {T = "{{secret:gh}}"}\n'
    )
    servers = Config.load(path).mcp.servers
    assert [s.name for s in servers] == ["time", "git"]
    assert servers[0].tools["get_current_time"].ask is False  # still the time server's
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_a_removed_server_takes_its_tables_and_leaves_the_rest(tmp_path: Path) -> None:
    path = _config(tmp_path)
    add_server(path, {"name": "git", "command": ["mcp-server-git"]})
    assert remove_server(path, "TIME") == "time"  # names are compared as pfar does
    config = Config.load(path)
    assert [s.name for s in config.mcp.servers] == ["git"]
    assert path.read_text().startswith('# my kernel\n[llm]\nprovider = "scripted"   # for now\n')
    assert remove_server(path, "git") == "git"
    assert "[[mcp.servers]]" not in path.read_text()
    theirs = OWNERS.split("[[mcp.servers]]", maxsplit=1)[0]  # [mcp] and its comment
    assert path.read_text().startswith(theirs)
    assert Config.load(path).mcp.servers == []


def test_a_file_with_no_mcp_section_or_none_at_all_gets_one(tmp_path: Path) -> None:
    path = _config(tmp_path, '[llm]\nprovider = "scripted"\n')
    add_server(path, {"name": "a", "url": "https://mcp.example.com/mcp"})
    assert [s.url for s in Config.load(path).mcp.servers] == ["https://mcp.example.com/mcp"]
    missing = tmp_path / "new" / "config.toml"
    missing.parent.mkdir()
    add_server(missing, {"name": "b", "command": ["b"]})
    assert [s.name for s in Config.load(missing).mcp.servers] == ["b"]


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"name": "time", "command": ["x"]}, "a server named 'time' is there already"),
        ({"name": "TIME", "command": ["x"]}, "a server named 'TIME' is there already"),
        ({"name": "two words", "command": ["x"]}, "mcp.servers.1.name"),
        ({"name": "both", "command": ["x"], "url": "https://x.example"}, "exactly one of"),
        ({"name": "ftp", "url": "ftp://x.example"}, "url must be an http:// or https:// URL"),
        ({"name": "e", "command": ["x"], "env": {"1X": "y"}}, "is not a variable name"),
    ],
)
def test_a_refused_server_leaves_the_file_byte_for_byte(
    tmp_path: Path, entry: dict[str, object], says: str
) -> None:
    path = _config(tmp_path)
    before = path.read_bytes()
    with pytest.raises(ConfigError, match=says) as refused:
        add_server(path, entry)
    assert str(path) in str(refused.value)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["config.toml"]  # no staged file left


def test_what_cannot_be_edited_safely_is_refused_and_kept(tmp_path: Path) -> None:
    path = _config(tmp_path)
    with pytest.raises(ConfigError, match="no server is named 'nope'; nothing was changed"):
        remove_server(path, "nope")
    broken = _config(tmp_path, "[mcp\nname = 1\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        add_server(broken, {"name": "a", "command": ["a"]})
    assert broken.read_text() == "[mcp\nname = 1\n"
    odd = _config(tmp_path, 'mcp = "servers"\n')
    with pytest.raises(ConfigError, match="mcp: Input should be a valid dictionary"):
        add_server(odd, {"name": "a", "command": ["a"]})
    inline = _config(tmp_path, '[mcp]\nservers = [{ name = "a", command = ["a"] }]\n')
    with pytest.raises(ConfigError, match=r"cannot be added to this file .* edit it by hand"):
        add_server(inline, {"name": "b", "command": ["b"]})
    with pytest.raises(ConfigError, match=r"pfar can take out on its own: edit config\.toml"):
        remove_server(inline, "a")
    assert inline.read_text() == '[mcp]\nservers = [{ name = "a", command = ["a"] }]\n'
    with pytest.raises(ConfigError, match=r"there is no folder .*pfar init. makes a home"):
        add_server(tmp_path / "nohome" / "config.toml", {"name": "a", "command": ["a"]})
    writable = _config(tmp_path)
    writable.chmod(0o666)  # another user could have written it: not trusted, not edited
    with pytest.raises(UnsafePermissions):
        add_server(writable, {"name": "a", "command": ["a"]})
    assert writable.read_text() == OWNERS


AFTER_SERVERS = """\
[[mcp.servers]]
name = "a"
command = ["a"]

[mcp.servers.tools.t]
ask = false

# the loop's own settings
[loop]
tools = ["Read"]
"""


def test_a_comment_above_the_table_after_the_servers_stays_there(tmp_path: Path) -> None:
    # tomlkit reads that comment as the last entry's: it is cut out with neither edit
    path = _config(tmp_path, AFTER_SERVERS)
    add_server(path, {"name": "b", "command": ["b"]})
    assert path.read_text().startswith(AFTER_SERVERS)
    remove_server(path, "b")
    assert path.read_text() == AFTER_SERVERS
    remove_server(path, "a")
    assert path.read_text() == '# the loop\'s own settings\n[loop]\ntools = ["Read"]\n'
    assert Config.load(path).loop.tools == ["Read"]


def test_a_linked_config_is_edited_where_it_lives_and_the_link_kept(tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    real = _config(dotfiles, OWNERS)
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").symlink_to(real)
    add_server(home / "config.toml", {"name": "git", "command": ["mcp-server-git"]})
    assert (home / "config.toml").is_symlink()
    assert [s.name for s in Config.load(real).mcp.servers] == ["time", "git"]
