"""Project names as a person tells them apart (issue 50).

A Claude Code project is the folder Claude Code names after the working directory, every ``/``
written as ``-`` (``-home-marco-projects-spotter-worktrees-spotter-fum``); a Codex project is
the working directory itself (``/home/marco/projects/spotter``); a bill's project is its app
(``Cline``). Printed whole, the first kind is cut to sameness in a table (three worktrees as
``-home-marco-projects-spotter-worktre…``). ``short_names`` gives each name of a set its
shortest telling form:

1. the home folder goes (``-home-<user>-``, ``-Users-<user>-``, ``C--Users-<user>-``,
   ``/home/<user>/``, ``/Users/<user>/``, ``~/``): a project is somewhere in the user's home;
2. the leading parts every path-like name of the set shares go (``projects-``), among the
   names of its kind (Claude Code's dashed form, or paths), as long as each keeps at least one
   part; when that would leave every name of Claude Code's dashed
   form one part, they keep one more (the last folder's name may hold a dash: three
   worktrees read ``spotter-fum``, ``spotter-a0y``, ``spotter-4te``, never ``fum``);
3. a name left empty (the home folder itself) is ``~``; a name that is not a path (an app) is
   kept as it is;
4. two names that would read the same keep their whole names, so no two projects ever merge.

So ``-home-marco-projects-spotter-worktrees-spotter-fum``, ``...-spotter-a0y`` and
``-home-marco-projects-agentcmd`` read ``spotter-worktrees-spotter-fum``,
``spotter-worktrees-spotter-a0y`` and ``agentcmd``. A dash inside a folder's own name cannot be
told from a ``/`` in Claude Code's form: such a name is cut only where the whole set agrees, so
it is never cut inside what tells it apart. ``tail`` cuts a name for a narrow column from the
left, keeping the end, where names differ.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# A home folder at the start of a name: Claude Code's dashed form, then a path.
_HOME = re.compile(r"^(?:-(?:home|Users)-[^-]+-|[A-Za-z]--Users-[^-]+-|/(?:home|Users)/[^/]+/|~/)")
_HOME_ONLY = re.compile(
    r"^(?:-(?:home|Users)-[^-]+|[A-Za-z]--Users-[^-]+|/(?:home|Users)/[^/]+|~)/?$"
)


def _separator(name: str) -> str | None:
    """The separator of a path-like name (``-`` for Claude Code's form, ``/`` for a path), or
    None for a name that is not a path."""
    if name.startswith(("/", "~/")) or re.match(r"^[A-Za-z]:[\\/]", name):
        return "/"
    if name.startswith("-") or re.match(r"^[A-Za-z]--", name):
        return "-"
    return None


def _parts(name: str, sep: str) -> list[str]:
    """A path-like name's parts after its home folder (an empty list: the home itself)."""
    if _HOME_ONLY.match(name):
        return []
    rest = _HOME.sub("", name, count=1)
    if rest == name:  # not under a home folder: the whole path
        rest = name.lstrip(sep).replace("\\", "/") if sep == "/" else name.lstrip("-")
    return [p for p in re.split(r"[/\\]" if sep == "/" else "-", rest) if p]


def short_names(names: Iterable[str]) -> dict[str, str]:
    """Each name of the set and its shortest telling form (see the module's rules)."""
    unique = sorted(set(names))
    parted: dict[str, tuple[str, list[str]]] = {}
    for name in unique:
        sep = _separator(name)
        if sep is not None:
            parted[name] = (sep, _parts(name, sep))
    # Claude Code's dashed names and paths are cut each among their own kind.
    shared = {
        sep: _shared_lead([named for named in parted.values() if named[0] == sep])
        for sep in ("-", "/")
    }
    short: dict[str, str] = {}
    for name in unique:
        if name not in parted:
            short[name] = name
            continue
        sep, parts = parted[name]
        kept = parts[shared[sep] :]
        short[name] = sep.join(kept) if kept else "~"
    return _unmerged(short)


def _shared_lead(named: list[tuple[str, list[str]]]) -> int:
    """How many leading parts every name shares, each keeping at least one part of its own,
    and two when every name is of the dashed form and would keep one."""
    if len(named) < 2 or any(not parts for _sep, parts in named):
        return 0
    n = 0
    while all(len(parts) > n + 1 for _sep, parts in named) and (
        len({parts[n] for _sep, parts in named}) == 1
    ):
        n += 1
    dashed = all(sep == "-" for sep, _parts in named)
    if n and dashed and all(len(parts) == n + 1 for _sep, parts in named):
        n -= 1
    return n


def _unmerged(short: dict[str, str]) -> dict[str, str]:
    """Names whose short forms collide keep their whole names."""
    seen: dict[str, int] = {}
    for s in short.values():
        seen[s] = seen.get(s, 0) + 1
    return {name: (s if seen[s] == 1 else name) for name, s in short.items()}


def tail(name: str, width: int) -> str:
    """``name`` in at most ``width`` characters, cut from the left (``…`` first): the end of a
    project's name is what tells it apart."""
    if width <= 0:
        return ""
    if len(name) <= width:
        return name
    return "…" + name[len(name) - width + 1 :] if width > 1 else "…"
