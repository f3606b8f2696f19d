"""The public API's object, :class:`Forensics` (see ``analyzer.api``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from analyzer import pipeline
from analyzer.console import Console, use
from analyzer.detect.detectors import Selection, select, wasted_once
from analyzer.engine.store import Store, open_new_or_existing, open_store
from analyzer.guards.policy import Policy, all_policies
from analyzer.ingest.base import IngestOptions
from analyzer.load.flow import FileReport, Loaded
from analyzer.model.incident import Incident
from analyzer.model.timewindow import Window
from analyzer.views.audit import Summary, build_summary

if TYPE_CHECKING:  # the guards are imported where used (ingest does without)
    from analyzer.guards.backtest import GuardRun


Inputs = pipeline.Inputs
Paths = Sequence[str | Path] | pipeline.Inputs


class Forensics:
    """An open store and the steps of the job over it; each step is the one the command line
    runs (same functions, same results, same reuse of what the store kept)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    @classmethod
    @contextmanager
    def open(
        cls,
        db: str | Path = ":memory:",
        *,
        create: bool = True,
        console: Console | None = None,
        temp_dir: str | None = None,
    ) -> Iterator[Forensics]:
        """The store at ``db`` (``:memory:``: a throwaway one, spilling to ``temp_dir``).
        ``create``: made if missing (and removed again if the work fails before any file was
        stored); else it must exist. ``console``: where the run speaks (default: nowhere, what
        was said kept in :attr:`warnings`)."""
        console = console or Console.silent()
        if create:
            with open_new_or_existing(db, temp_dir=temp_dir, console=console) as store:
                yield cls(store)
        else:
            with open_store(db, must_exist=True, console=console) as store:
                yield cls(store)

    @property
    def console(self) -> Console:
        return self.store.console

    @property
    def warnings(self) -> list[str]:
        """The warnings said so far (each once)."""
        return list(self.console.warnings)

    def ingest(self, paths: Paths, options: IngestOptions | None = None) -> Loaded:
        """Load the files and folders ``paths`` (each file all-or-nothing), then link the logged
        calls to their billing rows; a report per file."""
        return pipeline.ingest_paths(self.store, _inputs(paths), options or IngestOptions())

    def detect(
        self, selection: Selection | None = None, window: Window | None = None
    ) -> list[Incident]:
        """Run the detectors (all built-in ones by default) over the calls in ``window``;
        the incidents recorded, most wasted dollars first."""
        return pipeline.detect_incidents(self.store, selection or select(), window)

    def wasted(self, incidents: list[Incident]) -> Decimal:
        """What ``incidents`` wasted, each wasted call counted once however many tell it."""
        return wasted_once(self.store, incidents)

    def backtest(self, policies: list[Policy] | None = None) -> GuardRun:
        """Replay the guard policies (the built-in presets by default) over the calls."""
        from analyzer.guards.backtest import guard_run

        with use(self.console):
            return guard_run(self.store, _policies(policies), reuse=True)

    def summary(self, top: int = 10) -> Summary:
        """Where the money went: the spend tables (``top`` rows each) and the incidents."""
        with use(self.console):
            return build_summary(self.store, top=top)

    def report(
        self,
        output: str | Path,
        report_format: str = "html",
        top_incidents: int = 20,
        policies: list[Policy] | None = None,
    ) -> Path:
        """Write the report (``html``, ``md``, ``json``, ``csv``, ``parquet``) to ``output``."""
        return pipeline.report(
            self.store, Path(output), report_format, top_incidents, _policies(policies)
        )

    def audit(
        self,
        paths: Paths,
        options: IngestOptions | None = None,
        selection: Selection | None = None,
        policies: list[Policy] | None = None,
        output: str | Path | None = None,
        report_format: str = "html",
        top_incidents: int = 20,
        top: int = 10,
        on_files: Callable[[list[FileReport]], None] | None = None,
        window: Window | None = None,
    ) -> pipeline.Audit:
        """The whole job: ingest, detect, replay the guards and (with ``output``) write the
        report, over the calls in ``window``."""
        return pipeline.audit(
            self.store,
            _inputs(paths),
            options or IngestOptions(),
            selection or select(),
            _policies(policies),
            output=Path(output) if output is not None else None,
            report_format=report_format,
            top_incidents=top_incidents,
            top=top,
            on_files=on_files,
            window=window,
        )

    def detect_on_spark(
        self,
        folder: str | Path,
        selection: Selection | None = None,
        master: str | None = None,
        window: Window | None = None,
    ) -> list[Incident]:
        """The detectors on Spark over the Parquet export in ``folder``; the incidents are
        written beside it and into this store."""
        pipeline.apply_window(self.store, window, incidents=False)
        return detect_on_spark(folder, selection, master, window, self.store, self.console)


def detect_on_spark(
    folder: str | Path,
    selection: Selection | None = None,
    master: str | None = None,
    window: Window | None = None,
    store: Store | None = None,
    console: Console | None = None,
) -> list[Incident]:
    """The detectors on Spark over the Parquet export in ``folder`` (the incidents written
    beside it, and into ``store`` when given); needs the ``[spark]`` extra."""
    from analyzer.detect import spark_engine

    console = console or Console.silent()
    with use(console):
        return spark_engine.detect_on_spark(
            Path(folder), selection or select(), master, window, store, console.note
        )


def _inputs(paths: Paths) -> pipeline.Inputs | list[str]:
    return paths if isinstance(paths, pipeline.Inputs) else [str(p) for p in paths]


def _policies(policies: list[Policy] | None) -> list[Policy]:
    return all_policies() if policies is None else policies
