"""What a run reads: the user's paths, or the places agents keep their logs by default
(found without importing a format), and the one line a refresh of those places says."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from analyzer.formats import agent_files, default_homes
from analyzer.load.reports import FileReport


@dataclass
class Inputs:
    """What to read: the user's paths, or the places agents keep their logs by default."""

    paths: list[str]
    labels: dict[str, str] = field(default_factory=dict)  # path -> how to name it (~/.claude/..)
    absent: list[str] = field(default_factory=list)  # default places looked at, not there
    # The paths that are an agent's own file rather than a folder (Aider's chat histories).
    files: set[str] = field(default_factory=set)

    @property
    def defaults(self) -> bool:
        return bool(self.labels)

    def places(self, counts: Mapping[str, int] | None = None) -> list[str]:
        """How a refresh names what it read: each place by its label (with ``counts``, the
        files found under each path: ``2 files from ~/.codex/sessions``), except that an
        agent's files of one name in several folders side by side (Aider's chat histories,
        one in each project) are named together: ``~/code/*/.aider.chat.history.md``."""
        keys = {p: self._together(p) for p in self.paths}
        shared = Counter(keys.values())
        groups: dict[str, list[str]] = {}
        for p in self.paths:
            where = keys[p] if shared[keys[p]] > 1 else self.labels.get(p, p)
            groups.setdefault(where, []).append(p)
        if counts is None:
            return list(groups)
        said = []
        for where, members in groups.items():
            n = sum(counts.get(p, 0) for p in members)
            said.append(f"{n:,} {'file' if n == 1 else 'files'} from {where}")
        return said

    def _together(self, path: str) -> str:
        """The name a path's place shares with its like: ``A/*/NAME`` for an agent's file
        ``A/x/NAME``; a folder's own label."""
        label = Path(self.labels.get(path, path))
        if path not in self.files:
            return str(label)
        return str(label.parent.parent / "*" / label.name)


def _tilde(path: Path, home: Path) -> str:
    try:
        return "~/" + str(path.relative_to(home))
    except ValueError:
        return str(path)


def default_inputs(env: Mapping[str, str], home: Path) -> Inputs:
    """The default places of every agent format that exist (``~/.claude/projects``,
    ``~/.codex/sessions``...: folders; an agent's own file in a project folder under the roots
    the user named, ``~/code/app/.aider.chat.history.md``), each once."""
    found = Inputs([])
    own = agent_files()
    for _fmt, place in default_homes(env, home):
        label = _tilde(place, home)
        if str(place) in found.labels or label in found.absent:
            continue
        is_file = place.name in own and place.is_file()
        if is_file or place.is_dir():
            found.paths.append(str(place))
            found.labels[str(place)] = label
            if is_file:
                found.files.add(str(place))
        else:
            found.absent.append(label)
    return found


def refreshed(
    reports: list[FileReport],
    before: set[str],
    places: list[str],
    usage: frozenset[str] = frozenset(),
) -> str:
    """What a refresh read, in one line: ``refresh: read 2 new files and 1 grown (81
    unchanged) from ~/.claude/projects``. ``usage``: the files of ``before`` that were read
    usage first (``analyzer.load.usage_first``), read again now for their content."""
    loaded = [r for r in reports if r.status == "loaded"]
    whole = sum(1 for r in loaded if r.path in usage)
    grown = sum(1 for r in loaded if r.path in before) - whole
    new = len(loaded) - grown - whole
    unchanged = sum(1 for r in reports if r.status == "unchanged")
    failed = sum(1 for r in reports if r.status == "failed")
    if not places and not reports:  # a store filled by `ingest PATH`, no agent log here
        return (
            "refresh: no agent logs in their default places; the store holds what was read into it"
        )
    where = ", ".join(places)
    if not loaded:
        said = f"nothing new in {unchanged:,} {'file' if unchanged == 1 else 'files'}"
    else:
        parts = [f"{new:,} new {'file' if new == 1 else 'files'}"] if new else []
        parts += [f"{grown:,} grown"] if grown else []
        parts += [f"{whole:,} for {'its' if whole == 1 else 'their'} content"] if whole else []
        said = f"read {' and '.join(parts)} ({unchanged:,} unchanged)"
    records = sum(r.rows_loaded for r in loaded)
    later = sum(r.later for r in loaded)
    more = f", {records:,} records loaded" if records else ""
    if later:  # (a usage-first read: analyzer.load.usage_first)
        more += f" (usage first: {later:,} lines left for a command that needs their content)"
    failing = f"; {failed:,} could not be read (said above)" if failed else ""
    return f"refresh: {said} from {where}{more}{failing}"
