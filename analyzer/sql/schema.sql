-- The canonical store (docs/architecture.md, "The tables"). Every ingestor lowers its format to
-- these tables; detectors, the backtest and the report read only these. Columns may grow, their
-- meanings stay. Times are TIMESTAMP values in UTC. Money is DECIMAL so sums are exact.

CREATE TABLE IF NOT EXISTS meta (
    key   VARCHAR PRIMARY KEY,
    value VARCHAR
);

CREATE SEQUENCE IF NOT EXISTS source_id_seq START 1;

-- One row per ingested file. A "row" is one input record (CSV row, JSONL line, message).
-- Invariant: rows_read = rows_loaded + rows_rejected + rows_duplicate + rows_skipped.
CREATE TABLE IF NOT EXISTS sources (
    source_id      INTEGER PRIMARY KEY,
    path           VARCHAR NOT NULL,     -- as the user pointed at it (relative stays relative)
    format         VARCHAR NOT NULL,
    sha256         VARCHAR NOT NULL,     -- of the file's bytes as stored on disk
    bytes          BIGINT NOT NULL,
    ingested_at    TIMESTAMP NOT NULL,
    rows_read      BIGINT NOT NULL,
    rows_loaded    BIGINT NOT NULL,
    rows_rejected  BIGINT NOT NULL,
    rows_duplicate BIGINT NOT NULL,
    rows_skipped   BIGINT NOT NULL,
    skipped_kinds  JSON,                 -- {"<kind>": n} for rows_skipped
    encoding       VARCHAR,
    options        JSON,                 -- ingest options that shaped the rows (tz, session gap)
    file_stat      VARCHAR,              -- resolved path|size|mtime: unchanged without hashing
    -- Store format 10: the machine the file was read on (`ingest --machine NAME`, else this
    -- machine's host name), taken from the connection's variable lf_machine as the row is
    -- inserted (analyzer.engine.store.Store.machine).
    machine        VARCHAR DEFAULT getvariable('lf_machine')
);
ALTER TABLE sources ADD COLUMN IF NOT EXISTS file_stat VARCHAR;

-- One row per LLM call: a billed generation or a logged request.
CREATE TABLE IF NOT EXISTS calls (
    call_id             VARCHAR NOT NULL,   -- stable: <format prefix>:<native id>
    source_id           INTEGER NOT NULL,
    format              VARCHAR NOT NULL,
    native_id           VARCHAR,            -- generation_id, requestId, ...
    response_id         VARCHAR,            -- the provider's id for the response, when logged
                                            -- (an OpenRouter "gen-..." id links to the bill)
    line                BIGINT,             -- record line in the source file
    record_count        BIGINT,             -- input records that shaped it (log formats)
    ts                  TIMESTAMP,          -- UTC
    stream_key          VARCHAR NOT NULL,   -- what the calls of one agent share
    session_id          VARCHAR,            -- given, or inferred from time gaps
    turn_id             VARCHAR,            -- one user prompt, where known
    seq                 BIGINT,             -- order within the stream
    agent_id            VARCHAR,
    parent_session_id   VARCHAR,
    model               VARCHAR,
    provider            VARCHAR,
    app                 VARCHAR,
    project             VARCHAR,            -- the work it belongs to: a Claude Code project
                                            -- folder or Codex cwd; a bill's app
    api_key             VARCHAR,            -- the key's name or label, never a secret
    user_id             VARCHAR,
    variant             VARCHAR,            -- OpenRouter's variant (free, ...); 'fast' for a
                                            -- call in Anthropic's fast mode (priced higher)
    input_tokens        BIGINT,             -- whole prompt, cached part included
    cached_input_tokens BIGINT,             -- read from the prompt cache (part of input_tokens)
    cache_write_tokens  BIGINT,             -- written to the cache (part of input_tokens)
    cache_write_1h_tokens BIGINT,           -- of which with a 1-hour lifetime (Anthropic)
    output_tokens       BIGINT,             -- reasoning included
    reasoning_tokens    BIGINT,
    output_final        BOOLEAN,            -- output_tokens is the final count (false: a
                                            -- streaming snapshot, as in Claude Code logs)
    cost_usd            DECIMAL(18, 10),
    cost_basis          VARCHAR,            -- billed | reported | apportioned (the run's
                                            -- stated cost divided over its calls, see
                                            -- runs; a SWE-agent call's tokens too, the
                                            -- run's stated tokens divided the same way)
                                            -- | estimated | estimated_output (list
                                            -- prices at output_estimate_tokens) | NULL
    cost_cache_usd      DECIMAL(18, 10),    -- negative = cache discount (already in cost_usd)
    cost_extra_usd      DECIMAL(18, 10),    -- web search + file processing (already in cost_usd)
    cost_estimate_usd   DECIMAL(18, 10),    -- on a logged call: what list prices say it cost,
                                            -- kept beside a reported or billed cost_usd
    web_search_requests BIGINT,             -- server-side web searches the call ran (priced
                                            -- per request, part of the estimate)
    byok_usd            DECIMAL(18, 10),
    finish_reason       VARCHAR,            -- stop, length, tool_calls, content_filter, error,
                                            -- cancelled, unknown
    finish_reason_raw   VARCHAR,
    response_kind       VARCHAR,            -- text, tool_call, thinking_only, empty, whitespace,
                                            -- truncated_tool_call, error
    content_chars       BIGINT,             -- visible answer text, blanks included
    visible_chars       BIGINT,             -- of which not blank
    reasoning_chars     BIGINT,
    tool_call_count     BIGINT,
    http_status         INTEGER,
    received_done       BOOLEAN,
    event_count         BIGINT,
    duration_ms         DOUBLE,
    ttft_ms             DOUBLE,
    streamed            BOOLEAN,
    cancelled           BOOLEAN,
    reply_saved         BOOLEAN,            -- the agent kept the reply in its conversation
    billing_call_id     VARCHAR,            -- on a logged call: the billing row it was matched to
    superseded_by       VARCHAR,            -- on a billing row: the logged call that stands for
                                            -- it (the same call, seen in more detail)
    -- Store format 9 (added last, so an upgraded store has the same columns in the same order):
    output_estimate_tokens BIGINT,          -- where output_tokens is a streaming placeholder
                                            -- (output_final false): the output estimated from
                                            -- what the call wrote (text, tool-call arguments,
                                            -- thinking where the log has it), never below the
                                            -- logged count; NULL elsewhere
    output_estimate_floor  BOOLEAN,         -- that estimate is a lower bound: the call's
                                            -- thinking is redacted in the log
    cost_logged_usd        DECIMAL(18, 10), -- on a call priced at its estimated output
                                            -- (cost_basis 'estimated_output'): the list price
                                            -- at the logged placeholder count (what ccusage
                                            -- and the log's own figures say)
    -- Store format 10: the machine whose logs the call was read from (as sources.machine; a
    -- call two machines' files both hold is stored once, under the first).
    machine                VARCHAR DEFAULT getvariable('lf_machine'),
    -- Store format 13: what the log says the call was made for, as dimensions: JSON text of an
    -- object, string keys to string values, keys sorted (OpenTelemetry resource attributes
    -- such as team.id, department, cost_center, service.name, and a record's user.* and
    -- organization.id; a trace platform's user and tags); NULL where the log records none.
    -- The usage views break down by one (`usage daily --by team.id`).
    labels                 VARCHAR
);

-- Every call once: billing rows matched to a logged call are represented by that call.
CREATE OR REPLACE VIEW live_calls AS SELECT * FROM calls WHERE superseded_by IS NULL;

-- Conversation content where a format has it (excerpts only, never whole contents).
-- kind: prompt (a user's turn), text, thinking, tool_call, tool_result, system, placeholder,
-- compaction, format_error (the agent refused a reply it could not parse and said so: call_id
-- is the refused call, tool_result_hash the refusal's text), synthetic (a reply the agent
-- wrote itself without calling a model, such as Claude Code's `<synthetic>` limit notices).
CREATE TABLE IF NOT EXISTS messages (
    source_id      INTEGER NOT NULL,
    session_id     VARCHAR,
    idx            BIGINT,                -- order within the session
    role           VARCHAR,
    kind           VARCHAR,
    ts             TIMESTAMP,
    turn_id        VARCHAR,
    text_chars     BIGINT,
    visible_chars  BIGINT,
    tool_name      VARCHAR,
    tool_args_hash VARCHAR,               -- sha256 of the arguments as JSON with sorted keys
    tool_use_id    VARCHAR,               -- the id tying a tool call to its result (both rows)
    tool_result_hash VARCHAR,             -- on a tool result: sha256 of what the tool returned
    is_error       BOOLEAN,
    call_id        VARCHAR,               -- the call that produced it (assistant side)
    excerpt        VARCHAR,               -- at most 200 characters, for the report
    -- what it means (tool calls, tool results, refusals): sha256 of its kind, tool and content
    -- with times, ids, numbers, temporary names and spacing masked (ingest/meaning.py): the
    -- same action on another line, the same output with other timings, hash the same
    meaning_key    VARCHAR
);

-- A bill without calls: what a provider's usage or cost report says for one time bucket (a
-- day, an hour, a minute), one row per record of the report. Never a call: no detector reads it;
-- the spend views show it and reconciliation compares it with the logged calls of its bucket.
-- Tokens count as in `calls` (input_tokens is the whole prompt, cache reads and writes
-- included); a column the report does not give is NULL.
CREATE TABLE IF NOT EXISTS bill_buckets (
    source_id             INTEGER NOT NULL,
    format                VARCHAR NOT NULL,
    line                  BIGINT,             -- record line (or number, in a JSON document)
    bucket_key            VARCHAR NOT NULL,   -- what makes it the same bucket in another export
    provider              VARCHAR NOT NULL,   -- anthropic | openai
    measure               VARCHAR NOT NULL,   -- usage (tokens) | cost (dollars)
    bucket_start          TIMESTAMP NOT NULL, -- UTC, inclusive
    bucket_end            TIMESTAMP NOT NULL, -- UTC, exclusive
    model                 VARCHAR,            -- as the report names it (NULL: not grouped by it)
    model_key             VARCHAR,            -- lf_model_key(model): compared with the logs
    workspace             VARCHAR,            -- workspace or organisation
    project               VARCHAR,
    api_key               VARCHAR,            -- the key's name or id, never a secret
    user_id               VARCHAR,
    service_tier          VARCHAR,            -- standard, batch, priority...
    context_window        VARCHAR,            -- Anthropic: up to 200k, or above it
    item                  VARCHAR,            -- a cost row's line item or token type
    requests              BIGINT,
    input_tokens          BIGINT,
    cached_input_tokens   BIGINT,
    cache_write_tokens    BIGINT,
    cache_write_1h_tokens BIGINT,
    output_tokens         BIGINT,
    web_search_requests   BIGINT,
    cost_usd              DECIMAL(18, 10),    -- what the report says was charged
    cost_estimate_usd     DECIMAL(18, 10)     -- its tokens at list prices (usage rows)
);

-- One row per agent run whose log says how it ended or what it cost: a Claude Code `result`
-- line, a mini-swe-agent or SWE-agent trajectory's `info`, an OpenHands instance's `error` and
-- metrics, a Gemini CLI `result` line. Its calls are the calls of `session_id` (one run is
-- one session). The run's own verdict is evidence a detector may read; by itself it is never
-- an incident.
CREATE TABLE IF NOT EXISTS runs (
    source_id              INTEGER NOT NULL,
    session_id             VARCHAR NOT NULL,   -- the session its calls carry
    stream_key             VARCHAR NOT NULL,   -- the stream the session is in
    seq                    BIGINT,             -- the run's order in its stream (relaunches)
    line                   BIGINT,             -- the record that says how it ended (or began)
    agent                  VARCHAR,            -- claude-code, mini-swe-agent, swe-agent, ...
    model                  VARCHAR,            -- as the run's configuration names it
    exit_status            VARCHAR,            -- as the log writes it: LimitsExceeded,
                                               -- exit_cost, submitted, error_max_turns...
    outcome                VARCHAR,            -- completed, step_limit, cost_limit,
                                               -- context_limit, format_error, error, stuck,
                                               -- interrupted, other; NULL: the log says none
    is_error               BOOLEAN,            -- the log marks the run as failed
    result_excerpt         VARCHAR,            -- its result text or error (200 characters)
    reported_calls         BIGINT,             -- model calls or turns the log counts for it
    reported_input_tokens  BIGINT,             -- its stated totals (whole prompt)
    reported_cached_tokens BIGINT,             -- of which read from the cache
    reported_output_tokens BIGINT,
    reported_cost_usd      DECIMAL(18, 10),    -- the cost the log states (NULL: none; a 0 the
                                               -- agent writes when it could not price is none)
    cost_apportioned       BOOLEAN,            -- that cost was divided over the run's calls,
                                               -- which then have cost_basis 'apportioned'
    cost_estimate_usd      DECIMAL(18, 10),    -- its stated tokens at list prices, where the
                                               -- log states the run's tokens but no cost and
                                               -- no call's tokens (divided over the calls as
                                               -- their 'estimated' cost)
    duration_ms            DOUBLE,
    step_limit             BIGINT,             -- the run's own limits, where its log says them
    cost_limit_usd         DECIMAL(18, 10)
);

-- Every input record that could not be loaded, with the reason.
CREATE TABLE IF NOT EXISTS rejects (
    source_id INTEGER NOT NULL,
    line      BIGINT,
    reason    VARCHAR NOT NULL,
    excerpt   VARCHAR
);

-- Store format 11: where the next read of a growing log can start (analyzer.ingest.resume), one
-- row per file (its resolved path), replaced at every read of it: the read it follows from
-- (source_id), the byte after the last line that read took whole, the line ends before that
-- byte, the SHA-256 of the bytes before it (a file whose start is not those bytes is read
-- whole) and the format's reader state there (JSON).
CREATE TABLE IF NOT EXISTS resume_points (
    file          VARCHAR NOT NULL,
    source_id     INTEGER NOT NULL,
    byte_offset   BIGINT NOT NULL,
    lines         BIGINT NOT NULL,
    prefix_sha256 VARCHAR NOT NULL,
    state         VARCHAR NOT NULL
);

-- Detector output: the same columns for every detector so the report can rank across them.
CREATE TABLE IF NOT EXISTS incidents (
    incident_id   VARCHAR NOT NULL,
    detector      VARCHAR NOT NULL,
    severity      VARCHAR NOT NULL,       -- info, low, medium, high
    stream_key    VARCHAR,
    session_id    VARCHAR,
    start_ts      TIMESTAMP,
    end_ts        TIMESTAMP,
    n_calls       BIGINT,
    first_call_id VARCHAR,
    last_call_id  VARCHAR,
    wasted_usd    DECIMAL(18, 10),
    wasted_tokens BIGINT,
    cost_basis    VARCHAR,
    summary       VARCHAR,
    evidence      JSON,
    -- Store format 9: what the incident is attributed to, decided once at detection (the
    -- most common value among its wasted calls) and read by every view.
    app           VARCHAR,
    api_key       VARCHAR,
    model         VARCHAR,
    project       VARCHAR,
    -- Store format 10: the machine its wasted calls were read from (attributed as the above).
    machine       VARCHAR
);

-- A short number for each incident, given when it is first found and kept while it is found
-- again (the id `show N` takes and the report's anchors use).
CREATE TABLE IF NOT EXISTS incident_numbers (
    incident_id VARCHAR PRIMARY KEY,
    number      BIGINT NOT NULL
);

-- The calls an incident's waste is made of (what a guard that stopped earlier would have saved).
CREATE TABLE IF NOT EXISTS incident_calls (
    incident_id VARCHAR NOT NULL,
    call_id     VARCHAR NOT NULL
);

-- Results that cost seconds to recompute (detection, the guard replay, the report page), with
-- the key they were computed under (analyzer/cache.py); one entry per name.
CREATE TABLE IF NOT EXISTS cache (
    name    VARCHAR PRIMARY KEY,
    key     VARCHAR NOT NULL,
    payload VARCHAR NOT NULL
);
