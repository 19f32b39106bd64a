"""What a standing answer covers (runners/loop/standing.py): a kept answer exactly what
the owner saw; a pattern only one the owner wrote; old pattern rows read safely."""

from __future__ import annotations

import pytest

from pfar.journal.turns import PermissionRule
from pfar.runners.loop.standing import Declared, decide, declared, scope


def test_a_kept_always_covers_its_text_literally() -> None:
    kept = [PermissionRule("Bash", "ls *.txt", "allow")]
    assert decide(kept, (), "Bash", "ls *.txt") == "allow"
    assert decide(kept, (), "Bash", "ls ; id > FILE; echo .txt") is None
    assert decide(kept, (), "Bash", "ls a.txt") is None
    assert decide(kept, (), "Write", "ls *.txt") is None


def test_a_kept_never_still_covers_what_its_old_pattern_matched() -> None:
    kept = [PermissionRule("Bash", "rm *", "deny"), PermissionRule("Bash", "rm a", "allow")]
    assert decide(kept, (), "Bash", "rm a") == "deny"
    assert decide(kept, (), "Bash", "rm *") == "deny"
    assert decide(kept, (), "Bash", "ls") is None


@pytest.mark.parametrize(
    ("command", "covered"),
    [
        ("npm run test", True),
        ("npm run test -- --watch", True),
        ("npm  run  'test' unit", True),
        ("npm run testx", False),
        ("npm run test; id", False),
        ("npm run test && id", False),
        ("npm run test | sh", False),
        ("npm run test > /etc/x", False),
        ("npm run test $(id)", False),
        ("npm run test `id`", False),
        ("npm run test\nid", False),
        ("npm run", False),
    ],
)
def test_a_written_prefix_rule_covers_one_simple_command(command: str, covered: bool) -> None:
    rules = declared(["Bash(npm run test:*)"], [])
    assert (decide([], rules, "Bash", command) == "allow") is covered


def test_written_rules_glob_paths_but_never_through_dot_dot_and_deny_wins() -> None:
    rules = declared(["Write(src/*)", "WebFetch(*.python.org)", "Read"], ["Bash(git push:*)"])
    assert decide([], rules, "Write", "src/a.py") == "allow"
    assert decide([], rules, "Write", "src/../../.bashrc") is None
    assert decide([], rules, "WebFetch", "docs.python.org") == "allow"
    assert decide([], rules, "Read", "anything") == "allow"
    # a written "deny" prefix refuses the command wherever it appears in a chain
    assert decide([], rules, "Bash", "echo hi && git push origin main") == "deny"
    assert decide([], rules, "Bash", "git status") is None


def test_the_question_says_what_always_covers() -> None:
    assert scope("Bash", "ls *.txt") == "exactly the command 'ls *.txt', word for word"
    assert scope("Write", "a.txt").startswith("Write on exactly the path 'a.txt', whatever")
    assert scope("WebFetch", "example.com") == "any WebFetch call to the host 'example.com'"
    assert scope("Task", "*") == "every Task call"


def test_a_malformed_written_rule_is_named() -> None:
    with pytest.raises(ValueError, match=r"\[loop\] allow: 'Bash\(' is not Tool"):
        Declared.parse("Bash(", "allow")
