"""The event bus from the outside: `pfar events` lists task events in commit order, and a
named subscriber (`--as`) killed with SIGKILL and started again goes on after the last
event it acknowledged: nothing missed, nothing shown twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from pfar.vault.home import Home

from ..crash.test_regressions import kernel, rows
from ..support import make_home, pfar, said, wait_for

NOTE = """
id = "note"
description = "Take a note"
allowed_tools = ["file.read"]
"""
SCRIPT = """
[[responses]]
phase = "plan"
json = { steps = [] }

[[responses]]
phase = "synthesize"
text = "noted"
"""


def _offset(home: Home, name: str) -> int | None:
    found = rows(home, "SELECT seq FROM bus_offsets WHERE subscriber = ?", name)
    return int(found[0]["seq"]) if found else None


def _all_seqs(home: Home) -> list[int]:
    return [int(r["seq"]) for r in rows(home, "SELECT seq FROM bus_events ORDER BY seq")]


def _follow(home: Home, out: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("PFAR_HOME", "PFAR_FAULT")}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pfar",
            "--home",
            str(home.root),
            "events",
            "--follow",
            "--as",
            "watcher",
            "--json",
        ],
        stdout=out.open("wb"),
        stderr=subprocess.STDOUT,
        env=env,
    )


def _seqs(out: Path) -> list[int]:
    return [
        json.loads(line)["seq"] for line in out.read_text().splitlines() if line.startswith("{")
    ]


def test_a_killed_subscriber_goes_on_after_what_it_acknowledged(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", templates={"note": NOTE}, script=SCRIPT)
    with kernel(home) as k:
        for n in range(3):
            assert pfar(home, "submit", "note", f"first {n}").returncode == 0
        k.request("wait_idle")
        first = tmp_path / "first.jsonl"
        watcher = _follow(home, first)
        try:
            wait_for(lambda: _offset(home, "watcher") == _all_seqs(home)[-1], what="the acks")
        finally:
            watcher.send_signal(signal.SIGKILL)
            watcher.wait(10)
        acked = _offset(home, "watcher")
        for n in range(2):  # while the subscriber is down
            assert pfar(home, "submit", "note", f"then {n}").returncode == 0
        k.request("wait_idle")
        r = pfar(home, "events", "--as", "watcher", "--json")
        assert r.returncode == 0, said(r)
        second = [json.loads(line)["seq"] for line in r.stdout.splitlines()]
    seen = _seqs(first)
    assert seen and seen[-1] == acked
    assert second and second[0] > acked  # it went on after its offset
    assert sorted(seen + second) == _all_seqs(home)  # every event, each once
    kinds = [json.loads(line)["kind"] for line in first.read_text().splitlines()]
    assert kinds.count("TaskCreated") == 3 and kinds.count("TaskCompleted") == 3


def test_events_are_listed_in_order_and_bad_input_is_named(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", templates={"note": NOTE}, script=SCRIPT)
    with kernel(home) as k:
        assert pfar(home, "submit", "note", "one").returncode == 0
        k.request("wait_idle")
        r = pfar(home, "events")
        assert r.returncode == 0, said(r)
        lines = r.stdout.splitlines()
        assert [line.split()[3] for line in lines] == [
            "TaskCreated",
            "TaskStarted",
            "TaskCompleted",
        ]
        later = pfar(home, "events", "--after", lines[1].split()[0], "--json")
        assert [json.loads(x)["kind"] for x in later.stdout.splitlines()] == ["TaskCompleted"]
        bad = pfar(home, "events", "--as", "no spaces please")
        assert bad.returncode != 0 and "subscriber" in said(bad) and "no spaces please" in said(bad)
