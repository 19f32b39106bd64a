"""TemplateRegistry.fresh: a template is read, and its permissions checked, when its file
changed (content, inode, or a chmod, which moves its change time); otherwise the one read
before is used."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pfar.errors import UnsafePermissions
from pfar.runners.templates import TemplateRegistry

TEMPLATE = 'id = "note"\nallowed_tools = []\n'


@pytest.fixture
def registry(tmp_path: Path) -> TemplateRegistry:
    directory = tmp_path / "templates"
    directory.mkdir(mode=0o700)
    (directory / "note.toml").write_text(TEMPLATE)
    (directory / "note.toml").chmod(0o600)
    reg = TemplateRegistry(directory, tools=[])
    assert reg.load() == []
    return reg


def test_an_unchanged_template_is_the_one_read_before(registry: TemplateRegistry) -> None:
    first = registry.fresh("note")
    assert first is not None
    assert registry.fresh("note") is first


def test_a_changed_template_is_read_again(registry: TemplateRegistry) -> None:
    first = registry.fresh("note")
    path = registry.directory / "note.toml"
    path.write_text(TEMPLATE + "priority = 5\n")
    again = registry.fresh("note")
    assert again is not None and again is not first
    assert again.priority == 5


def test_a_loosened_template_is_refused_at_its_next_use(registry: TemplateRegistry) -> None:
    path = registry.directory / "note.toml"
    assert registry.fresh("note") is not None
    path.chmod(0o666)  # neither its size nor its mtime moves
    with pytest.raises(UnsafePermissions, match="world-writable"):
        registry.fresh("note")
    with pytest.raises(UnsafePermissions):  # and every use after, until it is fixed
        registry.fresh("note")
    path.chmod(0o600)
    assert registry.fresh("note") is not None


def test_a_template_replaced_in_a_loosened_directory_is_refused(
    registry: TemplateRegistry,
) -> None:
    directory = registry.directory
    assert registry.fresh("note") is not None
    directory.chmod(0o770)
    try:
        # someone else could now swap the file: what they put there is never read
        replacement = directory / "note.toml.new"
        replacement.write_text(TEMPLATE + "priority = 9\n")
        os.replace(replacement, directory / "note.toml")
        with pytest.raises(UnsafePermissions, match="group-writable"):
            registry.fresh("note")
    finally:
        directory.chmod(0o700)


def test_a_removed_template_is_gone(registry: TemplateRegistry) -> None:
    assert registry.fresh("note") is not None
    (registry.directory / "note.toml").unlink()
    assert registry.fresh("note") is None
    assert registry.get("note") is None


def test_a_dangling_link_among_the_templates_is_reported_and_the_rest_load(
    registry: TemplateRegistry,
) -> None:
    (registry.directory / "gone.toml").symlink_to(registry.directory / "nowhere.toml")
    errors = registry.load()
    assert [e for e in errors if "gone.toml" in str(e) and "cannot be read" in str(e)]
    assert registry.get("note") is not None
