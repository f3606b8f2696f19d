"""What a run reads: the user's paths, or the places agents keep their logs by default
(found without importing a format), and the one line a refresh of those places says."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from analyzer.formats import default_homes
from analyzer.load.reports import FileReport


@dataclass
class Inputs:
    """What to read: the user's paths, or the places agents keep their logs by default."""

    paths: list[str]
    labels: dict[str, str] = field(default_factory=dict)  # path -> how to name it (~/.claude/..)
    absent: list[str] = field(default_factory=list)  # default places looked at, not there

    @property
    def defaults(self) -> bool:
        return bool(self.labels)


def _tilde(path: Path, home: Path) -> str:
    try:
        return "~/" + str(path.relative_to(home))
    except ValueError:
        return str(path)


def default_inputs(env: Mapping[str, str], home: Path) -> Inputs:
    """The default places of every agent format that exist (``~/.claude/projects``,
    ``~/.codex/sessions``...), each once."""
    found = Inputs([])
    for _fmt, place in default_homes(env, home):
        label = _tilde(place, home)
        if str(place) in found.labels or label in found.absent:
            continue
        if place.is_dir():
            found.paths.append(str(place))
            found.labels[str(place)] = label
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
