"""What ``ingest`` did, as a view: one line, or a line per file; as JSON, every file's report."""

from __future__ import annotations

from collections import Counter

from analyzer.console import safe_line
from analyzer.load.flow import FileReport
from analyzer.views.view import How, View


def files_summary(reports: list[FileReport]) -> str:
    """What ingest did, in one line: files read, loaded, unchanged and passed over (named)."""
    counts = Counter(r.status for r in reports)
    records = sum(r.rows_read for r in reports)
    parts = [f"{counts['loaded']:,} loaded ({records:,} records"]
    rejected = sum(r.rows_rejected for r in reports)
    dup = sum(r.rows_duplicate for r in reports)
    parts[0] += (
        (f", {rejected:,} rejected" if rejected else "")
        + (f", {dup:,} duplicate" if dup else "")
        + ")"
    )
    if counts["unchanged"]:
        parts.append(f"{counts['unchanged']:,} unchanged")
    if counts["read_with"]:
        parts.append(f"{counts['read_with']:,} read with the file they belong to")
    many = False
    groups = (
        ("could not be loaded", [r.path for r in reports if r.status == "failed"]),
        (
            "data no reader recognises",
            [r.path for r in reports if r.status == "unrecognised" and r.data],
        ),
        (
            "not an agent log or bill",
            [
                r.path
                for r in reports
                if r.status == "unreadable" or (r.status == "unrecognised" and not r.data)
            ],
        ),
    )
    for what, paths in groups:
        if paths:
            more = f" and {len(paths) - 3:,} more" if len(paths) > 3 else ""
            parts.append(f"{len(paths):,} {what} ({', '.join(paths[:3]) + more})")
            many = many or len(paths) > 3
    return (
        f"read {len(reports):,} {'file' if len(reports) == 1 else 'files'}: "
        + "; ".join(parts)
        + (" (--verbose lists every file)" if many else "")
    )


def file_lines(reports: list[FileReport]) -> list[str]:
    """What ingest did with each file, a line each."""
    lines = []
    for r in reports:
        if r.status == "loaded":
            lines.append(
                f"{r.path}  [{r.format}]  read {r.rows_read:,}  loaded {r.rows_loaded:,}  "
                f"rejected {r.rows_rejected:,}  duplicate {r.rows_duplicate:,}  "
                f"skipped {r.rows_skipped:,}"
            )
        elif r.status == "unchanged":
            lines.append(f"{r.path}  [{r.format}]  unchanged (already ingested)")
        elif r.status == "unreadable":
            lines.append(f"{r.path}  skipped (cannot be read as a file)")
        elif r.status == "failed":
            lines.append(f"{r.path}  not read: {r.reason}")
        elif r.status == "read_with":
            lines.append(f"{r.path}  [{r.format}]  {r.reason}")
        else:
            lines.append(f"{r.path}  skipped ({r.reason or 'not a recognised format'})")
        if r.status == "loaded" and r.calls == 0 and r.reason:
            lines[-1] += f"  0 calls: {r.reason}"
    return lines


class IngestView(View):
    """What ``ingest`` did: one summary line, or with ``verbose`` a line for every file; as
    JSON, every file's report."""

    name = "ingest"

    def __init__(self, reports: list[FileReport], verbose: bool = False) -> None:
        self.reports, self.verbose = reports, verbose

    def text(self, how: How) -> str:
        lines = file_lines(self.reports) if self.verbose else [files_summary(self.reports)]
        return "".join(safe_line(line) + "\n" for line in lines)

    def json(self) -> list[dict[str, object]]:
        return [r.to_dict() for r in self.reports]
