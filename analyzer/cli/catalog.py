"""Commands that list what the tool knows (detectors, guard policies) and write the sample data
set: nothing here reads the store."""

from __future__ import annotations

from pathlib import Path

import click

from analyzer.cli.options import (
    emit,
    json_option,
    output_choice,
    policies_named,
    policies_option,
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
    from analyzer.views.catalog import detectors_view

    emit(detectors_view(discover(list(queries))), output_choice(as_json))


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
    from analyzer.views.catalog import policies_view

    emit(policies_view(policies_named(policy_files)), output_choice(as_json))
