"""The demo's world: its task templates, the scripted model's answers (plans that read,
post, write and run slow shell steps; an agent that edits a file and runs the tests), and
the agent's config."""

from __future__ import annotations

import json
from pathlib import Path

TEMPLATES = {
    "publish": """
        id = "publish"
        description = "Publish the weekly notes"
        allowed_tools = ["http.request", "file.write", "shell.run"]
        [timeouts]
        step_seconds = 20
    """,
    "deploy": """
        id = "deploy"
        description = "Deploy the site"
        allowed_tools = ["shell.run"]
        [approval]
        require = ["shell.run"]
        on_deny = "fail"
    """,
    "sync": """
        id = "sync"
        description = "Sync the calendar"
        allowed_tools = ["http.request"]
        [timeouts]
        step_seconds = 20
    """,
    "digest": """
        id = "digest"
        description = "Morning digest"
        allowed_tools = ["http.request"]
    """,
}


def script(url: str, write_log: Path) -> str:
    def shell(tag: str, sleep: float) -> str:
        return json.dumps(["sh", "-c", f"echo {tag} >> {write_log}; sleep {sleep}"])

    def step(template: str, tool: str, description: str, args: str) -> str:
        return (
            f'[[responses.json.steps]]\ntool = "{tool}"\ndescription = "{description}"\n'
            f"args = {{ {args} }}\n"
        )

    return (
        "\n".join(
            [
                '[[responses]]\ntemplate = "publish"\nphase = "plan"',
                step(
                    "publish",
                    "http.request",
                    "read this week's notes",
                    f'method = "GET", url = "{url}/notes/week"',
                ),
                step(
                    "publish",
                    "http.request",
                    "post them to the blog",
                    f'method = "POST", url = "{url}/blog", body = "weekly"',
                ),
                step(
                    "publish", "file.write", "keep a copy", 'path = "weekly.md", content = "$step0"'
                ),
                step(
                    "publish",
                    "shell.run",
                    "announce it (slow)",
                    f"argv = {shell('publish:announce', 4)}",
                ),
                '[[responses]]\ntemplate = "deploy"\nphase = "plan"',
                step("deploy", "shell.run", "release", f"argv = {shell('deploy:release', 0)}"),
                '[[responses]]\ntemplate = "sync"\nphase = "plan"',
                step(
                    "sync",
                    "http.request",
                    "push events (the far side is slow)",
                    f'method = "PUT", url = "{url}/calendar/slow", body = "x"',
                ),
                step(
                    "sync",
                    "http.request",
                    "mark synced",
                    f'method = "POST", url = "{url}/calendar/done"',
                ),
                '[[responses]]\ntemplate = "digest"\nphase = "plan"\ndelay_seconds = 30\n'
                "json = { steps = [] }",
                '[[responses]]\nphase = "synthesize"\ntext = "done ($template)."',
                # the agentic loop: writes a file, then runs the (slow) tests
                '[[turns]]\nmatch = "^Fix the greeting"\nturn = 1\n'
                'text = "I will fix the greeting, then run the tests."\n'
                "tool_calls = [\n"
                '  { name = "file.write", input = { path = "greeting.txt", '
                'content = "hello, world" } },\n'
                f'  {{ name = "shell.run", input = {{ argv = {shell("loop:tests", 5)} }} }},\n'
                "]",
                '[[turns]]\nmatch = "^Fix the greeting"\ntext = "What I know: $last"',
            ]
        )
        + "\n"
    )


LOOP_CONFIG = """[loop]
tools = ["file.read", "file.write", "shell.run"]
always_allow = ["file.read", "file.write", "shell.run"]
"""
