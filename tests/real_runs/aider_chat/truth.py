"""Independent truth for the Aider chat histories in this folder.

Standard library only; it imports nothing from the project. For every file under this
folder whose name ends in `.aider.chat.history.md` it counts, from the file's own text:

- sessions: lines starting `# aider chat started at`
- accounting lines: lines starting `> Tokens:` (a quoted tool-output line), their sums of tokens
  sent / cache write / cache hit / cached (a v0.50-era dev shape) / received and of the costs
  as the lines state them
  (`1.2k` -> 1200, `47k` -> 47000, `1,106` -> 1106, plain integers as themselves), and every
  distinct shape of the line (numbers replaced by N), with a count and the first example
- `Only N reflections allowed` lines
- user lines (`#### `) and user messages (runs of consecutive `#### ` lines)
- the models named in `> Main model:` / `> Model:` / `> Weak model:` / `> Editor model:` lines
  (and the older one-line `> Models: X with F edit format, weak model Y` header)
- a few other markers: edit-format failures, SEARCH/REPLACE misses, lint and test repairs

Aider writes the cost on the NEXT line (`Cost: ...`, not quoted) when a reply has both cache
write and cache hit tokens (base_coder.calculate_and_show_tokens_and_cost uses sep="\\n" and
io.tool_output quotes only the first line); that shape is handled, and counted apart.

Run: python3 truth.py   (writes truth.json beside this file, sorted keys, indent 1)
"""

import hashlib
import json
import re
from decimal import Decimal
from pathlib import Path

HERE = Path(__file__).resolve().parent

NUM = r"\d[\d,]*(?:\.\d+)?k?"
TOKENS_RE = re.compile(
    r"^> Tokens: (?P<sent>" + NUM + r") sent"
    r"(?:, (?P<cw>" + NUM + r") cache write)?"
    r"(?:, (?P<ch>" + NUM + r") cache hit)?"
    r"(?:, (?P<cached>" + NUM + r") cached)?"
    r", (?P<recv>" + NUM + r") received"
    r"(?P<note1>, cache costs not included)?\."
    r"(?: Cost: \$(?P<mc>[\d.]+) (?P<kind>message|request), \$(?P<sc>[\d.]+) session"
    r"(?P<note2>, cache costs not (?:included|available))?\.)?"
    r"\s*$"
)
COST_ALONE_RE = re.compile(
    r"^(?:> )?Cost: \$(?P<mc>[\d.]+) (?P<kind>message|request), \$(?P<sc>[\d.]+) session\.\s*$"
)
HEADER_RE = re.compile(
    r"^> (?P<kind>Main model|Model|Editor model): (?P<name>\S+) with (?P<fmt>.+?) edit format"
)
MODELS_OLD_RE = re.compile(
    r"^> Models: (?P<name>\S+) with (?:\S+ )?(?P<fmt>\S+) edit format"
    r"(?:, weak model (?P<weak>\S+))?"
)
WEAK_RE = re.compile(r"^> Weak model: (?P<name>\S+)")
REFLECT_RE = re.compile(r"Only (\d+) reflections allowed, stopping\.")
VERSION_RE = re.compile(r"^> Aider (v\S+)")


def tokens_value(text):
    """`1.2k` -> 1200, `47k` -> 47000, `1,106` -> 1106, `345` -> 345."""
    if text is None:
        return 0
    text = text.replace(",", "")
    if text.endswith("k"):
        return int((Decimal(text[:-1]) * 1000).to_integral_value())
    return int(text)


def shape(line):
    body = line.rstrip("\n")
    stripped = body.rstrip()
    trailing = body[len(stripped) :]
    out = re.sub(r"\$[\d.]+", "$N", stripped)
    out = re.sub(NUM, "N", out)
    if trailing:
        out += f"<{len(trailing)} trailing space{'' if len(trailing) == 1 else 's'}>"
    return out


def measure(path):
    raw = path.read_bytes()
    text = raw.decode("utf-8")
    lines = text.splitlines()
    res = {
        "bytes": len(raw),
        "sha256": hashlib.sha256(raw).hexdigest(),
        "lines": len(lines),
        "sessions": 0,
        "aider_versions": [],
        "accounting_lines": 0,
        "accounting_lines_with_cost": 0,
        "accounting_lines_cost_on_next_line": 0,
        "accounting_lines_without_cost": 0,
        "tokens_sent_sum": 0,
        "tokens_received_sum": 0,
        "tokens_cache_write_sum": 0,
        "tokens_cache_hit_sum": 0,
        "tokens_cached_sum": 0,
        "cost_message_sum": "0",
        "cost_kind_words": {},
        "session_cost_last_stated": [],
        "tokens_line_shapes": {},
        "unparsed_tokens_lines": [],
        "reflection_limit_lines": 0,
        "reflection_limit_texts": [],
        "user_lines": 0,
        "user_messages": 0,
        "models": {"main": [], "model": [], "weak": [], "editor": [], "models_old_header": []},
        "model_header_lines": {
            "Main model": 0,
            "Model": 0,
            "Weak model": 0,
            "Editor model": 0,
            "Models": 0,
        },
        "edit_formats": [],
        "edit_format_failures": 0,
        "search_replace_failed_to_match": 0,
        "lint_fix_prompts": 0,
        "fix_any_errors_below": 0,
        "test_fix_prompts": 0,
        "applied_edit_lines": 0,
    }
    cost_sum = Decimal("0")
    versions, edit_formats = set(), set()
    models = {k: set() for k in res["models"]}
    session_last = None
    in_user = False
    for i, line in enumerate(lines):
        if line.startswith("# aider chat started at"):
            res["sessions"] += 1
            if res["sessions"] > 1:
                res["session_cost_last_stated"].append(session_last)
            session_last = None
        if line.startswith("#### "):
            res["user_lines"] += 1
            if not in_user:
                res["user_messages"] += 1
            in_user = True
        else:
            in_user = False
        m = VERSION_RE.match(line)
        if m:
            versions.add(m.group(1))
        m = HEADER_RE.match(line)
        if m:
            kind = m.group("kind")
            res["model_header_lines"][kind] += 1
            key = {"Main model": "main", "Model": "model", "Editor model": "editor"}[kind]
            models[key].add(m.group("name"))
            edit_formats.add(m.group("fmt"))
        m = WEAK_RE.match(line)
        if m:
            res["model_header_lines"]["Weak model"] += 1
            models["weak"].add(m.group("name"))
        m = MODELS_OLD_RE.match(line)
        if m:
            res["model_header_lines"]["Models"] += 1
            models["models_old_header"].add(m.group("name"))
            if m.group("weak"):
                models["weak"].add(m.group("weak"))
            edit_formats.add(m.group("fmt"))
        for _ in REFLECT_RE.finditer(line):
            res["reflection_limit_lines"] += 1
            res["reflection_limit_texts"].append(line.rstrip())
        if line.startswith("> The LLM did not conform to the edit format"):
            res["edit_format_failures"] += 1
        if re.match(r"^> # \d+ SEARCH/REPLACE blocks? failed to match!", line):
            res["search_replace_failed_to_match"] += 1
        if line.startswith("> Attempt to fix lint errors?"):
            res["lint_fix_prompts"] += 1
        if line.startswith("> Attempt to fix test errors?"):
            res["test_fix_prompts"] += 1
        if line.startswith("> # Fix any errors below"):
            res["fix_any_errors_below"] += 1
        if line.startswith("> Applied edit to "):
            res["applied_edit_lines"] += 1
        if not line.startswith("> Tokens:"):
            continue
        res["accounting_lines"] += 1
        sh = shape(line)
        entry = res["tokens_line_shapes"].setdefault(
            sh, {"count": 0, "example": line, "line_no": i + 1}
        )
        entry["count"] += 1
        m = TOKENS_RE.match(line)
        if not m:
            res["unparsed_tokens_lines"].append({"line_no": i + 1, "text": line})
            continue
        res["tokens_sent_sum"] += tokens_value(m.group("sent"))
        res["tokens_received_sum"] += tokens_value(m.group("recv"))
        res["tokens_cache_write_sum"] += tokens_value(m.group("cw"))
        res["tokens_cache_hit_sum"] += tokens_value(m.group("ch"))
        res["tokens_cached_sum"] += tokens_value(m.group("cached"))
        cm = m if m.group("mc") else None
        if cm is None and i + 1 < len(lines):
            nxt = COST_ALONE_RE.match(lines[i + 1])
            if nxt:
                cm = nxt
                res["accounting_lines_cost_on_next_line"] += 1
                nsh = "(next line) " + shape(lines[i + 1])
                e2 = res["tokens_line_shapes"].setdefault(
                    nsh, {"count": 0, "example": lines[i + 1], "line_no": i + 2}
                )
                e2["count"] += 1
        if cm is None:
            res["accounting_lines_without_cost"] += 1
            continue
        if m.group("mc"):
            res["accounting_lines_with_cost"] += 1
        cost_sum += Decimal(cm.group("mc"))
        kind = cm.group("kind")
        res["cost_kind_words"][kind] = res["cost_kind_words"].get(kind, 0) + 1
        session_last = cm.group("sc")
    res["session_cost_last_stated"].append(session_last if res["sessions"] else None)
    res["cost_message_sum"] = str(cost_sum)
    res["aider_versions"] = sorted(versions)
    res["edit_formats"] = sorted(edit_formats)
    res["models"] = {k: sorted(v) for k, v in models.items()}
    return res


def main():
    out = {}
    for path in sorted(HERE.rglob("*")):
        if path.is_file() and path.name.endswith(".aider.chat.history.md"):
            out[path.relative_to(HERE).as_posix()] = measure(path)
    totals = {
        "files": len(out),
        "sessions": sum(v["sessions"] for v in out.values()),
        "accounting_lines": sum(v["accounting_lines"] for v in out.values()),
        "reflection_limit_lines": sum(v["reflection_limit_lines"] for v in out.values()),
        "tokens_line_shapes": sorted({s for v in out.values() for s in v["tokens_line_shapes"]}),
    }
    doc = {"files": out, "totals": totals}
    (HERE / "truth.json").write_text(
        json.dumps(doc, sort_keys=True, indent=1, ensure_ascii=False) + "\n"
    )
    for name, v in out.items():
        print(
            f"{name}: sessions={v['sessions']} tokens_lines={v['accounting_lines']} "
            f"sent={v['tokens_sent_sum']} recv={v['tokens_received_sum']} "
            f"cost_msg={v['cost_message_sum']} reflections={v['reflection_limit_lines']} "
            f"user_lines={v['user_lines']} unparsed={len(v['unparsed_tokens_lines'])}"
        )


if __name__ == "__main__":
    main()
