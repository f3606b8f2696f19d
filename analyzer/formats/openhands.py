"""OpenHands: an evaluation's ``output.jsonl``, and the conversation folders of the CLI / agent SDK.

**The evaluation output** (``evaluation/benchmarks/*/run_infer.py``; the real run the tests read,
``../shared/samples/real-loops/openhands_eval_output``, 3 instances of OpenHands 0.35 with
llama-4-maverick behind an OpenRouter proxy): JSON Lines, one benchmark instance per line,
``{instance_id, instruction, metadata, history, metrics, error, test_result, instance}``.
``metadata`` is the run's (``agent_class``, ``llm_config.model``, ``max_iterations``,
``eval_output_dir``, ``start_time``); ``error`` how the instance ended ("RuntimeError: Agent
reached maximum iteration in headless mode...", "AgentStuckInLoopError: Agent got stuck in a
loop"; null: no error). ``history`` is the V0 event stream: actions (``action``: ``message``,
``system``, ``recall``, ``run``, ``read``, ``edit``, ``think``, ``finish``...) and observations
(``observation``, ``cause`` = the id of the action it answers, ``content``, ``extras``). An
action the model called carries ``tool_call_metadata``: ``function_name``, ``tool_call_id`` and
the whole ``model_response`` (litellm's: ``id``, ``model`` - the real model,
``meta-llama/llama-4-maverick``, where the configuration names a proxy alias - ``choices``,
``usage``). A cause-less ``error`` observation is the agent refusing an invalid tool call
("Parameter 'command' is expected to be one of..."): a ``format_error`` (in the real run the
refused reply is in no metric: every token usage there is an action's).
The benchmarks of the V1 SDK (``OpenHands/benchmarks``, ``EvalOutput``) write the same line
with V1 events in ``history`` (``kind``, below), ``metadata.llm.model`` and ``attempt``.

**Metrics** (the same object in both versions: ``openhands/sdk/llm/utils/metrics.py``):
``token_usages`` - one per model call, with ``response_id``, ``model``, ``prompt_tokens`` (the
whole prompt, cache reads and writes included), ``cache_read_tokens``, ``cache_write_tokens``,
``completion_tokens`` (reasoning included; ``reasoning_tokens`` in V1); ``response_latencies``
(one per response); ``costs`` (``{model, cost, timestamp}``, no response id: the SDK's
``Telemetry.on_response`` appends one only when litellm priced the call above 0);
``accumulated_cost`` and ``accumulated_token_usage``. Each token usage is one call; the events
that came from it are found by its ``response_id`` (V0: ``model_response.id``; V1:
``llm_response_id``), which gives the call its time (the event's ``timestamp``), text, reasoning
and tool calls. ``accumulated_cost`` 0.0 is what litellm writes when it could not price a model
(the real run's proxy alias ``openai/openrouter-llama-4-maverick``): no stated cost, the calls
are priced at list prices. A stated cost is each call's own when ``costs`` has one for every
call, else the run's, divided over its calls (``apportioned``).

**Conversation folders** (software-agent-sdk ``openhands/sdk/conversation``: ``state.py``,
``persistence_const.py``, ``event_store.py``; the CLI's ``openhands_cli/locations.py``): one
folder per conversation (``<conversations>/<id hex>``) holding ``base_state.json`` (the
``ConversationState``: ``id``, ``agent.llm.model``, ``max_iterations``, ``execution_status`` -
``idle``, ``running``, ``paused``, ``waiting_for_confirmation``, ``finished``, ``error``,
``stuck`` - and ``stats.usage_to_metrics.<usage_id>``: a ``Metrics`` per LLM, ``agent``,
``condenser``...) and ``events/event-<index, 5 or more digits>-<event id>.json``, one event each
(``id``, ``timestamp`` without a zone, ``source``, ``kind``): ``SystemPromptEvent``,
``MessageEvent`` (``llm_message``; an agent's carries ``llm_response_id``), ``ActionEvent``
(``thought``, ``reasoning_content``, ``tool_name``, ``tool_call_id``, ``tool_call.arguments``,
``llm_response_id``: several actions of one response share it), ``ObservationEvent``
(``tool_call_id``, ``observation.content``, ``is_error``), ``UserRejectObservation``,
``AgentErrorEvent`` (a tool call that could not run), ``ConversationErrorEvent`` (``code``,
``detail``: what ended a run in error), ``ConversationIterationLimitEvent``, ``PauseEvent``,
``Condensation`` (the condenser's call, by ``llm_response_id``). The CLI keeps them in
``~/.openhands/conversations`` (``$OPENHANDS_CONVERSATIONS_DIR``, else
``$OPENHANDS_PERSISTENCE_DIR/conversations``). The folder is the unit: ``base_state.json`` is
the file read, and it reads its ``events/`` (in index order; each event file is a record of
it). An event file met on its own is ``member_of`` its ``base_state.json``. The trajectory
visualizer's export (atineoSE/openhands-trajectory-visualizer ``build_static.py``: real
exports in its ``docs/data``) holds the same objects: ``trajectory.json`` (``{id, created,
eventCount, baseState, model}``) beside ``events.json`` (the list of events): read alike.

**The run's verdict** (a ``runs`` row per instance or conversation): the instance's ``error``
(null: none stated), or the stuck detector's words where an event has them; a conversation's
``execution_status`` (``error`` with its last ``ConversationErrorEvent``'s ``code: detail``);
``step_limit`` = ``max_iterations``; the stated tokens and cost of its metrics.

Timestamps carry no zone: OpenHands writes the machine's local time (the real run's are UTC+8,
by ``model_response.created``): read in ``--tz``. Records: each line of an evaluation output is
one (its run row accounts for it); in a folder ``base_state.json`` and each event file. A
reject's line is the JSON line, or the event's index.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from analyzer.errors import InputError
from analyzer.formats.openhands_events import Session, Usage, run_row, usages_of
from analyzer.ingest.base import Head, LoadContext, LoadResult
from analyzer.ingest.jsonl import head_objects, json_lines
from analyzer.ingest.lowering import Lowering, brief
from analyzer.ingest.reading import MAX_DOCUMENT_BYTES, read_json_document
from analyzer.ingest.spec import FormatSpec
from analyzer.ingest.values import as_dict, as_int, as_list, as_str

BASE_STATE, EVENTS_DIR = "base_state.json", "events"
EXPORT, EXPORT_EVENTS = "trajectory.json", "events.json"
EVENT_FILE = re.compile(r"^event-(\d{5,})-[0-9a-fA-F\-]{8,}\.json$")  # persistence_const.py
_UUID = rb'"id"\s*:\s*"[0-9a-fA-F-]{32,36}"\s*,\s*'
_STATE = re.compile(rb"^\s*\{\s*" + _UUID + rb'"agent"\s*:\s*\{')
_STATE_START = re.compile(rb'^\s*\{\s*"(id|agent|execution_status)"\s*:')
_EXPORT = re.compile(
    rb"^\s*\{\s*" + _UUID + rb'"created"\s*:\s*"[^"]*"\s*,\s*"eventCount"'
    rb'\s*:\s*\d+\s*,\s*"baseState"\s*:\s*\{'
)
# Every V1 event starts with the fields of ``Event``: id, timestamp, source.
_EVENT = re.compile(
    rb'^\s*\[?\s*\{\s*"id"\s*:\s*"[^"]{1,100}"\s*,\s*"timestamp"\s*:\s*"[^"]{1,64}"'
    rb'\s*,\s*"source"\s*:\s*"(agent|user|environment|hook)"'
)
_EVENT_KIND = re.compile(
    rb'"kind"\s*:\s*"[A-Za-z]*(Event|Observation|Condensation|Request)"'
    rb'|"system_prompt"\s*:'
)


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False


def _is_export(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return bool(_EXPORT.match(fh.read(4096)))
    except OSError:
        return False


def member_of(path: Path) -> Path | None:
    """The file that reads ``path`` with it, if ``path`` is part of a conversation: an event
    file of a conversation folder (its ``base_state.json``), or the ``events.json`` of a
    visualizer export (its ``trajectory.json``). Cheap for any other file (its name decides)."""
    if path.parent.name == EVENTS_DIR and EVENT_FILE.match(path.name):
        owner = path.parent.parent / BASE_STATE
        return owner if _is_file(owner) else None
    if path.name == EXPORT_EVENTS:
        owner = path.parent / EXPORT
        return owner if _is_file(owner) and _is_export(owner) else None
    return None


def _is_instance(obj: dict[str, Any]) -> bool:
    """A line of an evaluation output: an instance with its history of events."""
    history = obj.get("history")
    if as_str(obj.get("instance_id")) is None or not isinstance(history, list):
        return False
    if not isinstance(obj.get("metrics"), dict) and not isinstance(obj.get("metadata"), dict):
        return False
    first = as_dict(history[0]) if history else {}
    return "source" in first or (not history and isinstance(obj.get("metadata"), dict))


def _is_state(data: bytes) -> bool:
    if _STATE.match(data):
        return True
    # Another SDK version's field order: a document of its own fields, the state's marks in it.
    keys = (b'"execution_status"', b'"usage_to_metrics"', b'"agent"')
    if _EVENT.match(data):  # (an event that carries a state, as a state update would)
        return False
    return bool(_STATE_START.match(data)) and all(k in data for k in keys)


def sniff(head: Head) -> bool:
    data = head.utf8
    if _is_state(data) or _EXPORT.match(data):
        return True
    if _EVENT.match(data) and _EVENT_KIND.search(data):
        return True
    return any(_is_instance(obj) for obj in head_objects(head))


def load(ctx: LoadContext) -> LoadResult:
    data = ctx.source.head.utf8
    if _EXPORT.match(data):
        return _Conversation(ctx).export()
    if _is_state(data):
        return _Conversation(ctx).folder()
    if _EVENT.match(data):
        return _member(ctx)
    return _evaluation(ctx)


# -- an evaluation's output.jsonl ------------------------------------------------------------


def _instance_session(obj: dict[str, Any], meta: dict[str, Any], model: str | None) -> str:
    """An instance's session: its id, and a tag of its run (the same instance is in the output
    of every run of a benchmark), and its attempt after the first."""
    run = [as_str(meta.get(k)) or "" for k in ("eval_output_dir", "start_time", "dataset")]
    tag = hashlib.sha256("\0".join([*run, model or ""]).encode()).hexdigest()[:8]
    attempt = as_int(obj.get("attempt"))
    return f"{obj['instance_id']}@{tag}" + (f"#{attempt}" if attempt and attempt > 1 else "")


def _instance(low: Lowering, tz: str, line: int, obj: dict[str, Any]) -> None:
    if not _is_instance(obj):
        low.reject(
            line, "not an OpenHands evaluation instance (no instance_id and history)", brief(obj)
        )
        return
    meta = as_dict(obj.get("metadata"))
    metrics = as_dict(obj.get("metrics"))
    model = as_str(as_dict(meta.get("llm_config") or meta.get("llm")).get("model"))
    s = Session(low, _instance_session(obj, meta, model), tz, usages_of(metrics))
    for ev in as_list(obj.get("history")):
        if isinstance(ev, dict):
            s.event(ev, 0, line)
    s.calls(line)
    error = as_str(obj.get("error")) or None
    status = error or s.stuck or (s.errors[-1] if s.errors else None)
    step_limit = as_int(meta.get("max_iterations"))
    low.add_run(
        run_row(
            s,
            status,
            status is not None,
            [metrics],
            model=model,
            line=line,
            step_limit=step_limit,
            n_records=1,
        )
    )


def _evaluation(ctx: LoadContext) -> LoadResult:
    low = Lowering(ctx, SPEC.name, SPEC.call_prefix)
    for line, obj in json_lines(ctx.source, low):
        _instance(low, ctx.options.tz, line, obj)
    return low.finish()


# -- a conversation folder, or its visualizer export -------------------------------------------


def _read_json(path: Path) -> tuple[object, str | None]:
    """A small JSON file's value, or why it could not be read."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_DOCUMENT_BYTES + 1)
    except OSError as exc:
        return None, f"cannot read: {exc.strerror or exc}"
    if len(raw) > MAX_DOCUMENT_BYTES:
        return None, f"over {MAX_DOCUMENT_BYTES // 2**20} MB"
    try:
        return orjson.loads(raw.removeprefix(b"\xef\xbb\xbf")), None
    except orjson.JSONDecodeError as exc:
        return None, f"not valid JSON: {exc}"


def event_files(folder: Path) -> list[tuple[int, Path]]:
    """A conversation's event files, in index order (``event_store.py`` names them)."""
    try:
        names = os.listdir(folder / EVENTS_DIR)
    except OSError:
        return []
    found = [(m, n) for n in names if (m := EVENT_FILE.match(n))]
    return sorted((int(m.group(1)), folder / EVENTS_DIR / n) for m, n in found)


class _Conversation:
    def __init__(self, ctx: LoadContext) -> None:
        self.ctx = ctx
        self.low = Lowering(ctx, SPEC.name, SPEC.call_prefix)
        self.path = Path(ctx.source.path)

    def state_of(self, doc: object, what: str) -> dict[str, Any]:
        if not isinstance(doc, dict):
            raise InputError(
                f"an OpenHands {what} that is not a JSON object", self.ctx.source.display
            )
        self.low.read()  # the state: its run row accounts for it
        return doc

    def folder(self) -> LoadResult:
        state = self.state_of(read_json_document(self.ctx.source), BASE_STATE)
        return self.run(state, self.path.parent.name, self.folder_events())

    def folder_events(self) -> Iterator[tuple[int, dict[str, Any]]]:
        for index, path in event_files(self.path.parent):
            self.low.read()
            value, why = _read_json(path)
            if why is not None or not isinstance(value, dict):
                why = why or "an event that is not a JSON object"
                self.low.reject(index, f"{EVENTS_DIR}/{path.name}: {why}", brief(value))
                continue
            yield index, value

    def export(self) -> LoadResult:
        doc = self.state_of(read_json_document(self.ctx.source), EXPORT)
        state = as_dict(doc.get("baseState"))
        return self.run(state, as_str(doc.get("id")) or self.path.parent.name, self.export_events())

    def export_events(self) -> Iterator[tuple[int, dict[str, Any]]]:
        path = self.path.parent / EXPORT_EVENTS
        if not _is_file(path):
            return
        value, why = _read_json(path)
        if why is not None or not isinstance(value, list):
            self.low.read()
            self.low.reject(None, f"{EXPORT_EVENTS}: {why or 'not a list of events'}", brief(value))
            return
        for index, ev in enumerate(value):
            self.low.read()
            if isinstance(ev, dict):
                yield index, ev
            else:
                self.low.reject(
                    index, f"{EXPORT_EVENTS}: an event that is not an object", brief(ev)
                )

    def run(
        self, state: dict[str, Any], fallback: str, events: Iterator[tuple[int, dict[str, Any]]]
    ) -> LoadResult:
        low = self.low
        metrics = [
            as_dict(m)
            for m in as_dict(as_dict(state.get("stats")).get("usage_to_metrics")).values()
        ]
        usages: list[Usage] = []
        for m in metrics:
            usages += usages_of(m, len(usages))
        session = as_str(state.get("id")) or fallback
        s = Session(low, session, self.ctx.options.tz, usages)
        for index, ev in events:
            skipped = s.event(ev, 1, index)
            if skipped is not None:
                low.skip(skipped)
        s.calls(None)
        status = as_str(state.get("execution_status"))
        exit_status, is_error = status, status in ("error", "stuck")
        if status == "error" and s.errors:
            exit_status = s.errors[-1]
        elif s.limit is not None and status != "finished":
            exit_status, is_error = s.limit, True
        model = as_str(as_dict(as_dict(state.get("agent")).get("llm")).get("model"))
        low.add_run(
            run_row(
                s,
                exit_status,
                is_error,
                metrics,
                model=model,
                n_records=1,
                step_limit=as_int(state.get("max_iterations")),
            )
        )
        if not usages:
            low.result.note = "no token usage in the conversation's stats"
        return low.finish()


def _member(ctx: LoadContext) -> LoadResult:
    """An event file (or an export's ``events.json``) met on its own: its conversation's state
    reads it (see ``member_of``); without that state it holds no tokens to read."""
    low = Lowering(ctx, SPEC.name, SPEC.call_prefix)
    owner = member_of(Path(ctx.source.path))
    low.read()
    if owner is not None:
        low.skip(f"read with {owner.name}")
        low.result.note = f"an OpenHands event, read with {owner.parent.name}/{owner.name}"
    else:
        low.skip("event without its conversation")
        low.result.note = "an OpenHands event without its conversation's state: nothing to read"
    return low.finish()


# What this module is to the registry (analyzer.formats).
SPEC = FormatSpec(
    name="openhands",
    title="OpenHands evaluation output.jsonl, or conversation (base_state.json + events/)",
    kind="log",
    sniff_order=75,  # before the trajectories (80-85) and saved conversations (90)
    call_prefix="oh",
    sniff=sniff,
    load=load,
    member_of=member_of,
)
