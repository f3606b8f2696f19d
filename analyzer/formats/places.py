"""Where each agent keeps its logs by default, the hidden folders of its own that a walk of a
home folder enters, and the hidden files of its own that a walk of a folder reads: declared
here, apart from the formats, so that finding the default places (a refresh before every
command given no input) imports no format.

``HOMES`` lists them in the formats' sniffing order (the order a refresh names them in); the
registry (``analyzer.formats``) reads them from here, and a test holds every name to a format.
A place is a folder, or (an agent that writes one file into each project: Aider) a file.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

# Where an agent keeps its logs (``homes(env, home)``), whether they exist or not.
Homes = Callable[[Mapping[str, str], Path], list[Path]]

# The VS Code extensions whose tasks are read from their default place (Cline, Roo Code; a
# Kilo Code task is read where it is given: ``cline_task.EXTENSIONS``).
_VSCODE_EXTENSIONS = ("saoudrizwan.claude-dev", "rooveterinaryinc.roo-cline")

# The chat history Aider writes into every project folder it runs in.
AIDER_CHAT = ".aider.chat.history.md"


def claude_code(env: Mapping[str, str], home: Path) -> list[Path]:
    """Where Claude Code keeps its transcripts: each folder of ``$CLAUDE_CONFIG_DIR``
    (comma-separated, as Claude Code allows), else ``~/.config/claude`` and ``~/.claude``."""
    dirs = [Path(d.strip()).expanduser() for d in env.get("CLAUDE_CONFIG_DIR", "").split(",")]
    dirs = [d for d in dirs if str(d) not in ("", ".")]
    if not dirs:
        dirs = [home / ".config" / "claude", home / ".claude"]
    return [d / "projects" for d in dirs]


def codex(env: Mapping[str, str], home: Path) -> list[Path]:
    """Where Codex keeps its rollouts: ``$CODEX_HOME/sessions``, else ``~/.codex/sessions``."""
    base = Path(env["CODEX_HOME"]).expanduser() if env.get("CODEX_HOME") else home / ".codex"
    return [base / "sessions"]


def nexus3_raw(env: Mapping[str, str], home: Path) -> list[Path]:
    """Where NEXUS3 writes its raw logs (with ``--raw-log``): ``~/.nexus3/logs``."""
    return [home / ".nexus3" / "logs"]


def gemini_cli(env: Mapping[str, str], home: Path) -> list[Path]:
    """Where Gemini CLI keeps its chats: ``$GEMINI_CLI_HOME/.gemini/tmp`` (the variable stands
    for the home folder, Gemini CLI's ``paths.ts``), else ``~/.gemini/tmp``."""
    base = Path(env["GEMINI_CLI_HOME"]).expanduser() if env.get("GEMINI_CLI_HOME") else home
    return [base / ".gemini" / "tmp"]


def opencode(env: Mapping[str, str], home: Path) -> list[Path]:
    """Where OpenCode keeps its messages and their parts: ``$XDG_DATA_HOME/opencode/storage``
    (as ``xdg-basedir`` reads the variable: any non-empty value), else
    ``~/.local/share/opencode/storage``."""
    data = Path(env["XDG_DATA_HOME"]) if env.get("XDG_DATA_HOME") else home / ".local" / "share"
    storage = data / "opencode" / "storage"
    return [storage / "message", storage / "part"]


def cline(env: Mapping[str, str], home: Path) -> list[Path]:
    """Where the Cline SDK and CLI keep their sessions (``shared/src/storage/paths.ts``):
    ``$CLINE_SESSION_DATA_DIR``, else ``$CLINE_DATA_DIR/sessions``, else
    ``$CLINE_DIR/data/sessions``, else ``~/.cline/data/sessions``."""
    if env.get("CLINE_SESSION_DATA_DIR", "").strip():
        return [Path(env["CLINE_SESSION_DATA_DIR"].strip()).expanduser()]
    if env.get("CLINE_DATA_DIR", "").strip():
        return [Path(env["CLINE_DATA_DIR"].strip()).expanduser() / "sessions"]
    base = Path(env["CLINE_DIR"].strip()).expanduser() if env.get("CLINE_DIR", "").strip() else None
    return [(base or home / ".cline") / "data" / "sessions"]


def cline_task(env: Mapping[str, str], home: Path, platform: str = sys.platform) -> list[Path]:
    """Where VS Code keeps Cline's and Roo Code's tasks: its user data folder
    (``~/Library/Application Support/Code`` on macOS, else ``$XDG_CONFIG_HOME/Code`` or
    ``~/.config/Code``, as Electron's ``appData``), ``User/globalStorage/<extension>/tasks``."""
    if platform == "darwin":
        base = home / "Library" / "Application Support"
    else:
        xdg = env.get("XDG_CONFIG_HOME", "").strip()
        base = Path(xdg).expanduser() if xdg else home / ".config"
    storage = base / "Code" / "User" / "globalStorage"
    return [storage / ext / "tasks" for ext in _VSCODE_EXTENSIONS]


def openhands(env: Mapping[str, str], home: Path) -> list[Path]:
    """Where the OpenHands CLI keeps its conversations (``openhands_cli/locations.py``):
    ``$OPENHANDS_CONVERSATIONS_DIR``, else ``$OPENHANDS_PERSISTENCE_DIR/conversations``, else
    ``~/.openhands/conversations``."""
    if env.get("OPENHANDS_CONVERSATIONS_DIR"):
        return [Path(env["OPENHANDS_CONVERSATIONS_DIR"]).expanduser()]
    base = env.get("OPENHANDS_PERSISTENCE_DIR")
    return [(Path(base).expanduser() if base else home / ".openhands") / "conversations"]


def aider_chat(env: Mapping[str, str], home: Path) -> list[Path]:
    """Aider's chat histories. Aider keeps no central folder: it writes
    ``.aider.chat.history.md`` into the project folder it runs in. So its places are under the
    roots the user named (``llm-forensics config add-root DIR``, ``$LLM_FORENSICS_ROOTS``:
    ``analyzer.engine.roots``): each root's own history, whether it exists or not, and those of
    the folders one level below it (its projects) that have one."""
    from analyzer.engine import roots  # (lazily: a format is read without the store)

    return [p for root in roots.all_roots(env, home) for p in chat_histories(root.path)]


def chat_histories(root: Path) -> list[Path]:
    """``ROOT/.aider.chat.history.md`` (there or not), then each ``ROOT/*/.aider.chat.history.md``
    that is there, in name order (hidden folders are no projects; linked ones are). A root
    that is gone or cannot be listed has only the first."""
    found = [root / AIDER_CHAT]
    try:
        with os.scandir(root) as listed:
            entries = sorted(
                (e for e in listed if not e.name.startswith(".")), key=lambda e: e.name
            )
    except OSError:
        return found
    for entry in entries:
        try:
            project = entry.is_dir()
        except OSError:
            continue
        if project and os.path.isfile(os.path.join(entry.path, AIDER_CHAT)):
            found.append(root / entry.name / AIDER_CHAT)
    return found


# Each format's default places, in sniffing order.
HOMES: dict[str, Homes] = {
    "claude_code": claude_code,
    "codex": codex,
    "nexus3_raw": nexus3_raw,
    "gemini_cli": gemini_cli,
    "opencode": opencode,
    "cline": cline,
    "cline_task": cline_task,
    "aider_chat": aider_chat,
    "openhands": openhands,
}

# The hidden folders that are an agent's own (a walk of a home folder enters them).
AGENT_FOLDERS: dict[str, tuple[str, ...]] = {
    "claude_code": (".claude",),
    "codex": (".codex",),
    "nexus3_raw": (".nexus3",),
    "gemini_cli": (".gemini",),
    "cline": (".cline",),
    "openhands": (".openhands",),
}

# The hidden files that are an agent's own and hold its calls (a walk of a folder reads them;
# other hidden files, such as Aider's ``.aider.input.history``, stay passed over).
AGENT_FILES: dict[str, tuple[str, ...]] = {
    "aider_chat": (AIDER_CHAT,),
}
