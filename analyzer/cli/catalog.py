"""Commands that list what the tool knows (detectors, guard policies) and write the sample data
set: nothing here reads the store."""

from __future__ import annotations

from pathlib import Path

import click

from analyzer.cli.options import (
    json_option,
    policies_named,
    policies_option,
    print_json,
    queries_option,
)
from analyzer.detect.detectors import discover


@click.command("detectors")
@queries_option
@json_option
def detectors_command(queries: tuple[str, ...], as_json: bool) -> None:
    """List the detectors with their severity, title and parameters.

    \b
    Example:
      llm-forensics detectors
    """
    found = discover(list(queries))
    if as_json:
        print_json(
            [
                {
                    "name": d.name,
                    "severity": d.severity,
                    "title": d.title,
                    "params": d.params,
                    "description": d.reasoning,
                    "path": str(d.path),
                }
                for d in found
            ]
        )
        return
    for d in found:
        click.echo(f"{d.name}  [{d.severity}]  {d.title}")
        if d.params:
            click.echo("    " + ", ".join(f"{k}={v}" for k, v in d.params.items()))


@click.command()
@click.option(
    "-o",
    "--output",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Folder to write the sample data set into (created if missing).",
)
@click.option(
    "--rows",
    type=click.IntRange(min=1000),
    default=None,
    help="Rows in the billing export (default: the committed sample's size). Healthy traffic "
    "is scaled; the planted incidents stay as they are.",
)
@click.option(
    "--seed", default=2025, show_default=True, help="Random seed (same seed, same bytes)."
)
def sample(out_dir: str, rows: int | None, seed: int) -> None:
    """Write the deterministic sample data set with the seed incidents planted.

    \b
    Example:
      llm-forensics sample -o /tmp/big --rows 10000000
    """
    from analyzer.sample import DEFAULT_ROWS, write_sample

    written = write_sample(Path(out_dir), rows=rows or DEFAULT_ROWS, seed=seed)
    for path in written:
        click.echo(str(path))


@click.command("policies")
@policies_option
@json_option
def policies_command(policy_files: tuple[str, ...], as_json: bool) -> None:
    """List the guard policies (built-in presets and your own) with their parameters.

    \b
    Example:
      llm-forensics policies
    """
    found = policies_named(policy_files)
    if as_json:
        print_json([p.to_json() for p in found])
        return
    for p in found:
        click.echo(f"{p.name}  [{p.type}, per {p.scope}]  {p.description}")
        params = ", ".join(f"{k}={v}" for k, v in p.params().items() if k not in ("type", "scope"))
        click.echo(f"    {params}")


COMMANDS = [detectors_command, sample, policies_command]
