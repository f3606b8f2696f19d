"""``guard install``, ``guard uninstall``, ``guard status``: our Claude Code hook written into,
removed from and read out of Claude Code's ``settings.json`` (its hooks reference: ``{"hooks":
{"PostToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": ...}]}]}}``).

Everything here is pure but for reading and writing the one file (and its backup):

* our hook is recognised by its command (``... guard claude-hook ...``); every other key, hook
  and matcher of the file is left as it is, in its order;
* installing puts one hook of ours in each of ``HOOK_EVENTS`` (replacing ours where it is, in
  place: installing twice is one hook, another policy replaces ours) and removes any other of
  ours; before a file with none of ours is changed, its bytes are kept in ``<file>.llm-forensics
  .bak``;
* the file is written whole or not at all (a temporary file beside it, renamed), in the style it
  was written in (its indent, its line ends, its last newline); a file that is not valid JSON is
  an error naming its line, and nothing is written;
* uninstalling a file that is exactly what our install made of the backup (the same bytes) gives
  the backup's bytes back (a file we created is removed); a file changed since loses only our
  hooks (a matcher's group, or an event, that we left empty goes with them).
"""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analyzer.engine.files import atomic_file, os_error
from analyzer.engine.resources import command_path
from analyzer.errors import ForensicsError

# The events our hook is installed for: after every tool call, where the hook's stop ends the
# turn ({"continue": false}) and its nudge reaches Claude ({"decision": "block"}), as
# ``backtest --recommend`` prints it. (A stop is judged on the calls the transcript holds, which
# a PreToolUse hook would only judge again.)
HOOK_EVENTS: tuple[str, ...] = ("PostToolUse",)
MATCHER = "*"
BACKUP_SUFFIX = ".llm-forensics.bak"
_OURS = re.compile(r"(?:^|\s)guard\s+claude-hook(?:\s|$)")


def project_settings(folder: Path) -> Path:
    """The project's settings file: ``FOLDER/.claude/settings.json``."""
    return folder / ".claude" / "settings.json"


def user_settings(env: Mapping[str, str], home: Path) -> Path:
    """The user's settings file: ``$CLAUDE_CONFIG_DIR/settings.json`` (the first folder, when
    it names several, as ``formats.places`` reads it), else ``~/.claude/settings.json``."""
    for d in env.get("CLAUDE_CONFIG_DIR", "").split(","):
        if d.strip() not in ("", "."):
            return Path(d.strip()).expanduser() / "settings.json"
    return home / ".claude" / "settings.json"


def hook_command(policy: str, policies: Path | None = None, command: str | None = None) -> str:
    """The hook's command line: the installed command by its absolute path (``command_path``:
    Claude Code runs a hook with the PATH it was started with), ``guard claude-hook --policy
    NAME`` and, for a policy of one's own file, ``--policies`` with the file's absolute path."""
    line = [command or command_path(), "guard", "claude-hook", "--policy", policy]
    if policies is not None:
        line += ["--policies", str(policies.expanduser().resolve())]
    return shlex.join(line)


def is_ours(hook: object) -> bool:
    """Whether ``hook`` (one entry of a matcher's ``hooks``) is our guard's."""
    return (
        isinstance(hook, dict)
        and isinstance(hook.get("command"), str)
        and _OURS.search(hook["command"]) is not None
    )


# ---------------------------------------------------------------- the file and its style


@dataclass(frozen=True)
class Style:
    """How a settings file is written, so that it is written back the same way."""

    indent: int | str | None = 2  # None: on one line
    compact: bool = False  # on one line without spaces after ':' and ','
    newline: str = "\n"
    final_newline: bool = True
    ascii: bool = False
    bom: bool = False


def style_of(text: str) -> Style:
    """The style ``text`` (a JSON document) is written in: the indent of its first indented
    line, its line ends, whether it ends with a newline, escapes non-ASCII text, has a BOM."""
    bom = text.startswith("\ufeff")
    text = text.removeprefix("\ufeff")
    newline = "\r\n" if "\r\n" in text else "\n"
    body = text.strip()
    indent: int | str | None = None
    for line in body.splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and stripped != line:
            lead = line[: len(line) - len(stripped)]
            indent = "\t" if lead.startswith("\t") else len(lead)
            break
    compact = indent is None and bool(body) and ": " not in body and ", " not in body
    ascii_only = "\\u" in body and body.isascii()
    return Style(indent, compact, newline, text.endswith(("\n", "\r")), ascii_only, bom)


def render(settings: Mapping[str, Any], style: Style) -> bytes:
    """``settings`` as ``style`` writes them."""
    if style.indent is None:
        separators = (",", ":") if style.compact else (", ", ": ")
        text = json.dumps(settings, ensure_ascii=style.ascii, separators=separators)
    else:
        text = json.dumps(settings, ensure_ascii=style.ascii, indent=style.indent)
    text = text.replace("\n", style.newline) + (style.newline if style.final_newline else "")
    return (("\ufeff" if style.bom else "") + text).encode("utf-8")


def parse(data: bytes, path: Path) -> tuple[dict[str, Any], Style]:
    """The settings ``data`` holds (an empty file: none) and their style; not a JSON object:
    an error naming the file and the line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ForensicsError(f"not UTF-8 text (byte {exc.start}): nothing written", path) from None
    if not text.strip("\ufeff \t\r\n"):
        return {}, Style()
    try:
        settings = json.loads(text.removeprefix("\ufeff"))
    except json.JSONDecodeError as exc:
        raise ForensicsError(
            f"not valid JSON ({exc.msg}, column {exc.colno}): nothing written", path, exc.lineno
        ) from None
    if not isinstance(settings, dict):
        raise ForensicsError("not a JSON object of settings: nothing written", path)
    return settings, style_of(text)


def read_bytes(path: Path) -> bytes | None:
    """The file's bytes (None: there is no such file)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise os_error(exc, path, "cannot read") from exc


def write_bytes(path: Path, data: bytes) -> None:
    """``data`` into ``path``, whole or not at all (renamed from a file beside it), keeping
    the mode of the file it replaces; its folder is made when missing."""
    try:
        mode = path.stat().st_mode & 0o7777
    except OSError:
        mode = None
    with atomic_file(path) as tmp:
        tmp.write_bytes(data)
        if mode is not None:
            os.chmod(tmp, mode)


# ---------------------------------------------------------------- the merge


def _hooks_of(settings: dict[str, Any], path: Path) -> dict[str, Any] | None:
    hooks = settings.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise ForensicsError('"hooks" is not a JSON object: nothing written', path)
    return hooks


def with_hook(
    settings: dict[str, Any], command: str, path: Path = Path("settings.json")
) -> tuple[dict[str, Any], list[str]]:
    """``settings`` with our hook running ``command`` in each of ``HOOK_EVENTS`` (where one of
    ours was, in its place; else in a group of its own, matcher ``*``, at the end) and no other
    of ours; with the commands of ours it replaced (other than ``command``)."""
    new = copy.deepcopy(settings)
    hooks = _hooks_of(new, path)
    if hooks is None:
        hooks = new["hooks"] = {}
    for event in HOOK_EVENTS:
        if event in hooks and not isinstance(hooks[event], list):
            raise ForensicsError(f'"hooks"."{event}" is not a JSON list: nothing written', path)
    placed: set[str] = set()
    replaced: list[str] = []

    def keep(event: str, hook: Any) -> Any:
        if hook["command"] != command and hook["command"] not in replaced:
            replaced.append(hook["command"])
        if event in HOOK_EVENTS and event not in placed:
            placed.add(event)
            return {**hook, "command": command}
        return None

    _sweep(hooks, keep)
    for event in HOOK_EVENTS:
        if event not in placed:
            group = {"matcher": MATCHER, "hooks": [{"type": "command", "command": command}]}
            hooks.setdefault(event, []).append(group)
    return new, replaced


def without_hooks(
    settings: dict[str, Any], drop_empty_hooks: bool = False
) -> tuple[dict[str, Any], list[str]]:
    """``settings`` without our hooks (a group or an event we left empty goes too, and the
    ``hooks`` object with ``drop_empty_hooks``); with the commands removed."""
    new = copy.deepcopy(settings)
    hooks = new.get("hooks")
    removed: list[str] = []
    if not isinstance(hooks, dict):
        return new, removed

    def drop(event: str, hook: Any) -> Any:
        removed.append(hook["command"])
        return None

    _sweep(hooks, drop)
    if drop_empty_hooks and removed and not hooks:
        del new["hooks"]
    return new, removed


def _sweep(hooks: dict[str, Any], change: Any) -> None:
    """Each of our hooks in ``hooks`` handed to ``change(event, hook)``, which returns what
    takes its place (None: nothing); a group or an event emptied so is removed."""
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept_groups = []
        for group in groups:
            inner = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(inner, list) or not any(is_ours(h) for h in inner):
                kept_groups.append(group)
                continue
            kept = []
            for hook in inner:
                if not is_ours(hook):
                    kept.append(hook)
                elif (instead := change(event, hook)) is not None:
                    kept.append(instead)
            if kept:
                group["hooks"] = kept
                kept_groups.append(group)
        if groups and not kept_groups:
            del hooks[event]
        else:
            hooks[event] = kept_groups


def installed_bytes(before: bytes | None, command: str, path: Path) -> tuple[bytes, list[str]]:
    """What installing ``command`` makes of a file of bytes ``before`` (None: no file), with
    the commands of ours it replaced."""
    settings, style = parse(before, path) if before is not None else ({}, Style())
    new, replaced = with_hook(settings, command, path)
    return render(new, style), replaced


# ---------------------------------------------------------------- install, uninstall


@dataclass
class Change:
    """What ``install`` or ``uninstall`` did (or, dry, would do) to ``path``."""

    path: Path
    before: bytes | None  # None: there was no file
    after: bytes | None  # None: no file (removed, or never made)
    commands: list[str] = field(default_factory=list)  # replaced (install) or removed
    backup: Path | None = None  # the backup written
    restored: bool = False  # uninstall gave the pre-install bytes back

    @property
    def changed(self) -> bool:
        return self.before != self.after


def backup_of(path: Path) -> Path:
    return path.with_name(path.name + BACKUP_SUFFIX)


def install(path: Path, command: str, dry_run: bool = False) -> Change:
    """Our hook running ``command`` installed in the settings file ``path`` (made, with its
    folder, when missing); the file's bytes kept in ``backup_of(path)`` first when none of
    ours is in it yet."""
    before = read_bytes(path)
    after, replaced = installed_bytes(before, command, path)
    change = Change(path, before, after, replaced)
    if not change.changed:
        return change
    if before is not None and not ours_in(parse(before, path)[0]):
        change.backup = backup_of(path)
    if dry_run:
        return change
    if change.backup is not None and before is not None:
        write_bytes(change.backup, before)
    write_bytes(path, after)
    return change


def uninstall(path: Path, dry_run: bool = False) -> Change:
    """Our hooks removed from the settings file ``path``: the backup's bytes back when the
    file is exactly what installing our hook made of them (no file, when there was none and
    no backup), else the file without ours, in its style."""
    before = read_bytes(path)
    if before is None:
        return Change(path, None, None)
    settings, style = parse(before, path)
    found = ours_in(settings)
    if not found:
        return Change(path, before, before)
    backup = backup_of(path)
    saved = read_bytes(backup)
    change = Change(path, before, before, [h.command for h in found])
    command = found[0].command
    if saved is not None and _made_of(saved, command, path) == before:
        change.after, change.restored = saved, True
    elif saved is None and _made_of(None, command, path) == before:
        change.after, change.restored = None, True
    else:
        had_hooks = saved is None or "hooks" in _parsed_or_empty(saved, backup)
        new, _ = without_hooks(settings, drop_empty_hooks=not had_hooks)
        change.after = render(new, style)
    if dry_run:
        return change
    if change.after is None:
        try:
            path.unlink()
        except OSError as exc:
            raise os_error(exc, path, "cannot remove") from exc
    else:
        write_bytes(path, change.after)
    if change.restored and saved is not None:
        backup.unlink(missing_ok=True)
    return change


def _made_of(before: bytes | None, command: str, path: Path) -> bytes | None:
    try:
        return installed_bytes(before, command, path)[0]
    except ForensicsError:
        return None


def _parsed_or_empty(data: bytes, path: Path) -> dict[str, Any]:
    try:
        return parse(data, path)[0]
    except ForensicsError:
        return {}


# ---------------------------------------------------------------- status


@dataclass(frozen=True)
class Hook:
    """One hook of ours in a settings file, and what its command line says."""

    event: str
    matcher: str | None
    command: str

    def words(self) -> list[str]:
        try:
            return shlex.split(self.command)
        except ValueError:
            return self.command.split()

    def option(self, name: str) -> str | None:
        words = self.words()
        for i, word in enumerate(words):
            if word == name and i + 1 < len(words):
                return words[i + 1]
            if word.startswith(name + "="):
                return word.split("=", 1)[1]
        return None

    @property
    def program(self) -> str:
        words = self.words()
        return words[0] if words else ""


def ours_in(settings: Mapping[str, Any]) -> list[Hook]:
    """Our hooks in ``settings``, in the file's order."""
    hooks = settings.get("hooks")
    found: list[Hook] = []
    if not isinstance(hooks, dict):
        return found
    for event, groups in hooks.items():
        for group in groups if isinstance(groups, list) else []:
            inner = group.get("hooks") if isinstance(group, dict) else None
            for hook in inner if isinstance(inner, list) else []:
                if is_ours(hook):
                    matcher = group.get("matcher")
                    found.append(
                        Hook(event, matcher if isinstance(matcher, str) else None, hook["command"])
                    )
    return found


@dataclass(frozen=True)
class Installed:
    """What ``guard status`` says of one settings file."""

    scope: str  # "project" or "user"
    path: Path
    exists: bool
    hooks: list[Hook]
    error: str | None = None  # the file could not be read as settings

    def to_json(self, project: Path | None = None) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "file": str(self.path),
            "file_exists": self.exists,
            "installed": bool(self.hooks),
            "error": self.error,
            "hooks": [check(h, project) for h in self.hooks],
        }


def check(hook: Hook, project: Path | None) -> dict[str, Any]:
    """One hook of ours, checked: its policy, whether its program exists and can be run,
    whether its ``--policies`` file exists (``$CLAUDE_PROJECT_DIR`` read as ``project``;
    None where that is not known)."""
    program = hook.program
    runs = os.path.isabs(program) and os.path.isfile(program) and os.access(program, os.X_OK)
    policies = hook.option("--policies")
    policies_exists: bool | None = None
    if policies is not None:
        if "$CLAUDE_PROJECT_DIR" in policies or "${CLAUDE_PROJECT_DIR}" in policies:
            if project is not None:
                where = policies.replace("${CLAUDE_PROJECT_DIR}", str(project))
                policies_exists = Path(where.replace("$CLAUDE_PROJECT_DIR", str(project))).is_file()
        else:
            policies_exists = Path(policies).expanduser().is_file()
    return {
        "event": hook.event,
        "matcher": hook.matcher,
        "command": hook.command,
        "policy": hook.option("--policy"),
        "program": program,
        "program_runs": runs,
        "policies": policies,
        "policies_exists": policies_exists,
    }


def installed(scope: str, path: Path) -> Installed:
    """What of ours the settings file ``path`` holds."""
    try:
        data = read_bytes(path)
        if data is None:
            return Installed(scope, path, False, [])
        return Installed(scope, path, True, ours_in(parse(data, path)[0]))
    except ForensicsError as exc:
        return Installed(scope, path, path.exists(), [], str(exc))


# ---------------------------------------------------------------- a recommended policy's file

# Where ``install --recommend`` keeps a recommended policy that is not a preset as it stands
# (another threshold): beside the settings file, marked as ours by its first line.
POLICY_FILE = "llm-forensics-guards.toml"
_POLICY_HEADER = (
    "# Written by `llm-forensics guard install --recommend`; `guard uninstall` removes it.\n"
)


def write_policy_file(folder: Path, table: str, dry_run: bool = False) -> Path:
    """The recommended policy's TOML ``table`` written to ``folder/POLICY_FILE`` (replacing
    one we wrote; any other file of that name is an error, and nothing is written)."""
    path = folder / POLICY_FILE
    old = read_bytes(path)
    if old is not None and not _written_by_us(old):
        raise ForensicsError(
            "exists and was not written by `guard install`: not replaced (install with "
            "--policies FILE --policy NAME instead)",
            path,
        )
    if not dry_run:
        write_bytes(path, (_POLICY_HEADER + table).encode("utf-8"))
    return path


def remove_policy_files(hooks: list[Hook], dry_run: bool = False) -> list[Path]:
    """The policy files of ``hooks`` that ``write_policy_file`` wrote, removed."""
    gone: list[Path] = []
    for hook in hooks:
        named = hook.option("--policies")
        if named is None or Path(named).name != POLICY_FILE:
            continue
        path = Path(named)
        data = read_bytes(path) if path.is_absolute() else None
        if data is not None and _written_by_us(data) and path not in gone:
            if not dry_run:
                path.unlink(missing_ok=True)
            gone.append(path)
    return gone


def _written_by_us(data: bytes) -> bool:
    return data.decode("utf-8", "replace").startswith(_POLICY_HEADER)


# ---------------------------------------------------------------- what is said


def status_lines(found: list[Installed], project: Path | None) -> list[str]:
    """``guard status`` on the terminal: each settings file, and of each hook of ours its
    policy, its command and whether they can run."""
    lines: list[str] = []
    for where in found:
        head = f"{where.scope}: {where.path}"
        if where.error is not None:
            lines.append(f"{head}: cannot be read ({where.error})")
            continue
        if not where.hooks:
            missing = "" if where.exists else " (no such file)"
            lines.append(f"{head}: not installed{missing}")
            continue
        lines.append(head)
        for hook in where.hooks:
            said = check(hook, project)
            matcher = f", matcher {said['matcher']}" if said["matcher"] is not None else ""
            lines.append(f"  policy {said['policy'] or '(none given)'} ({said['event']}{matcher})")
            lines.append(f"  command: {said['command']}")
            runs = (
                "exists and is executable"
                if said["program_runs"]
                else ("is not an executable file by an absolute path: the hook cannot run")
            )
            lines.append(f"  {said['program']} {runs}")
            if said["policies"] is not None:
                exists = {
                    True: "exists",
                    False: "is missing: the hook cannot load the policy",
                    None: "is relative to the project Claude Code runs in",
                }
                lines.append(f"  --policies {said['policies']} {exists[said['policies_exists']]}")
    return lines
