"""Project names as a person tells them apart (issue 50): the real-world home's Claude Code
project folders, Codex working directories, bill apps, and names that must never merge."""

from __future__ import annotations

from analyzer.model.projects import short_names, tail

SPOTTER = "-home-marco-projects-spotter-worktrees-spotter-"


def test_worktrees_alone_read_as_ccusage_prints_them() -> None:
    names = [SPOTTER + w for w in ("fum", "a0y", "4te")]
    assert short_names(names) == {SPOTTER + w: f"spotter-{w}" for w in ("fum", "a0y", "4te")}


def test_the_real_world_home_keeps_what_tells_projects_apart() -> None:
    names = [
        SPOTTER + "fum",
        SPOTTER + "a0y",
        "-home-marco-projects-spotter",
        "-home-jn-projects-agentcmd",
        "-home-dd-projects-claude-code-log",
    ]
    assert list(short_names(names).values()) == [
        "claude-code-log",
        "agentcmd",
        "spotter",
        "spotter-worktrees-spotter-a0y",
        "spotter-worktrees-spotter-fum",
    ]


def test_paths_apps_and_the_home_itself() -> None:
    got = short_names(["/home/me/work/api", "/Users/me/work/web", "Cline", "-home-me", "~/x"])
    assert got == {
        "/home/me/work/api": "work/api",
        "/Users/me/work/web": "work/web",
        "Cline": "Cline",
        "-home-me": "~",
        "~/x": "x",
    }
    assert short_names(["/srv/agents/a", "/srv/agents/b"]) == {
        "/srv/agents/a": "a",
        "/srv/agents/b": "b",
    }


def test_names_that_would_read_the_same_keep_their_whole_names() -> None:
    names = ["-home-ann-x", "-home-bob-x", "-home-bob-y"]
    assert short_names(names) == {
        "-home-ann-x": "-home-ann-x",
        "-home-bob-x": "-home-bob-x",
        "-home-bob-y": "y",
    }


def test_tail_keeps_the_end() -> None:
    assert tail("spotter-worktrees-spotter-fum", 12) == "…spotter-fum"
    assert tail("api", 12) == "api"
    assert tail("abc", 1) == "…" and tail("abc", 0) == ""


def test_dashed_names_and_paths_are_cut_each_among_their_kind() -> None:
    names = [SPOTTER + "fum", "-home-marco-projects-agentcmd", "/srv/x/api", "/Users/a/Dev/web"]
    assert short_names(names) == {
        SPOTTER + "fum": "spotter-worktrees-spotter-fum",
        "-home-marco-projects-agentcmd": "agentcmd",
        "/srv/x/api": "srv/x/api",
        "/Users/a/Dev/web": "Dev/web",
    }
