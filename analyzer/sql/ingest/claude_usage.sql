-- The calls of Claude Code transcripts read usage first, by DuckDB's JSON reader: the same
-- rows, column for column, as formats/claude_code.py builds reading the same file without its
-- content (formats/claude_usage.py says when it is used and how the two are held equal).
-- Parameters: sources (what DuckDB reads: the files, or one file they were joined into,
-- joined), and a list each, an item a file: files (their paths), starts (joined: the place of
-- each one's first line among the lines read), stems (the session of a line that names none),
-- folders (the project folder under projects/, or NULL), parents (the folder each is in).
-- Every JSON value is read as JSON and its type tested as the Python reader tests it (by its
-- first character: DuckDB keeps a value as compact JSON, a string from its quote on); what
-- that reader would treat in a way this file does not write out (a line it rejects, an API
-- error's status, a usage object of another shape, a count written as text, ...) makes the
-- file `odd`: it is then read by the Python reader instead (lf_cu_verdict says which).

-- The files, numbered as given (f, from 0), each with the place of its first line among the
-- lines read, where they were joined into one (formats/claude_usage.py counts their lines).
CREATE OR REPLACE TEMP TABLE lf_cu_files AS
SELECT generate_subscripts($files, 1) - 1 AS f, unnest($starts) AS start, unnest($stems) AS stem,
       unnest($folders) AS folder, unnest($parents) AS parent;

-- The lines as read (only an assistant line's fields are kept), in the files' order.
CREATE OR REPLACE TEMP TABLE lf_cu_raw AS
SELECT CAST(file_index AS INTEGER) AS fi, type = '"assistant"' AS assistant,
       CASE WHEN assistant THEN sessionId END AS sid,
       CASE WHEN assistant THEN agentId END AS agent,
       CASE WHEN assistant THEN isSidechain END AS side,
       CASE WHEN assistant THEN requestId END AS request,
       CASE WHEN assistant THEN "timestamp" END AS ts,
       CASE WHEN assistant THEN version END AS version,
       CASE WHEN assistant THEN costUSD END AS cost,
       CASE WHEN assistant THEN isApiErrorMessage END AS api_error,
       CASE WHEN assistant THEN cwd END AS cwd,
       assistant AND message IS NULL AS no_message,
       CASE WHEN assistant THEN message.id END AS id,
       CASE WHEN assistant THEN message.model END AS model,
       CASE WHEN assistant THEN message.stop_reason END AS stop_reason,
       CASE WHEN assistant THEN message.usage END AS usage,
       CASE WHEN assistant THEN message.content END AS content
FROM read_json($sources, format = 'newline_delimited', records = true,
               maximum_object_size = 134217727,
               columns = {type: 'JSON', sessionId: 'JSON', agentId: 'JSON', isSidechain: 'JSON',
                          requestId: 'JSON', "timestamp": 'JSON', version: 'JSON',
                          costUSD: 'JSON', isApiErrorMessage: 'JSON', cwd: 'JSON',
                          message: 'STRUCT(id JSON, model JSON, stop_reason JSON, usage JSON, content JSON)'});

-- Every line's file and number: the reader keeps the lines in order, a file after another,
-- so a line's number is its place after its file's first line (of the files read as they
-- are: file_index), or after its file's start (of files joined into one). A blank line, which
-- the reader passes over, is found by the count of each file's lines (lf_cu_lines against
-- formats/claude_usage.py's count).
CREATE OR REPLACE TEMP TABLE lf_cu_place_all AS
SELECT r.rowid AS pos, n.f, r.rowid - n.start + 1 AS line, r.assistant
FROM lf_cu_raw r ASOF JOIN lf_cu_files n ON r.rowid >= n.start
WHERE $joined
UNION ALL
SELECT r.rowid, r.fi, r.rowid - b.first + 1, r.assistant
FROM lf_cu_raw r JOIN (SELECT fi, min(rowid) AS first FROM lf_cu_raw GROUP BY fi) b USING (fi)
WHERE NOT $joined;

CREATE OR REPLACE TEMP TABLE lf_cu_lines AS
SELECT f, count(*) AS lines FROM lf_cu_place_all GROUP BY f;

CREATE OR REPLACE TEMP TABLE lf_cu_place AS
SELECT pos, f, line FROM lf_cu_place_all WHERE assistant;

-- Of a JSON value: its kind by its first character ('s' a string, 'n' a number, 'b' true or
-- false, 'z' null, 'o' an object, 'a' an array; NULL: not there), and a string's value.
CREATE OR REPLACE TEMP MACRO lf_cu_kind(j) AS
    CASE WHEN j IS NOT NULL THEN
        CASE left(CAST(j AS VARCHAR), 1) WHEN '"' THEN 's' WHEN '{' THEN 'o' WHEN '[' THEN 'a'
             WHEN 't' THEN 'b' WHEN 'f' THEN 'b' WHEN 'n' THEN 'z' ELSE 'n' END END;
CREATE OR REPLACE TEMP MACRO lf_cu_str(j) AS CASE WHEN left(CAST(j AS VARCHAR), 1) = '"' THEN j ->> '$' END;
-- whether a value is there that is neither a string nor null
CREATE OR REPLACE TEMP MACRO lf_cu_not_str(j) AS coalesce(lf_cu_kind(j) NOT IN ('s', 'z'), false);
-- values.as_int: a whole number from 0 to 10^12 - 1 (an integral float too), else NULL.
CREATE OR REPLACE TEMP MACRO lf_cu_num(j) AS
    CASE WHEN lf_cu_kind(j) = 'n' THEN TRY_CAST(CAST(j AS VARCHAR) AS DOUBLE) END;
CREATE OR REPLACE TEMP MACRO lf_cu_whole(d) AS
    CASE WHEN d >= 0 AND d < 1e12 AND d = floor(d) THEN CAST(d AS BIGINT) END;
-- content.text_measure: characters, and those that are not whitespace as str.split() splits
-- (every character str.isspace() holds; tests/test_claude_usage.py checks them all).
CREATE OR REPLACE TEMP MACRO lf_cu_visible(t) AS
    length(regexp_replace(t, '[\t\n\x{0b}\x{0c}\r\x{1c}-\x{1f} \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]+', '', 'g'));

-- What each assistant line wrote (formats/claude_code._said): its text and thinking measured,
-- its tool calls counted with their arguments as compact JSON (content.args_text; DuckDB
-- writes a number of 21 digits or more as 1e21 where orjson writes 1e+21: such a line is odd),
-- and an API error's text (claude_code._result_text: its text blocks, joined).
CREATE OR REPLACE TEMP TABLE lf_cu_said AS
WITH blocks AS (
    SELECT r.rowid AS pos, CAST(r.api_error AS VARCHAR) = 'true' AS api_error,
           unnest(json_transform(r.content, '[{"type": "JSON", "text": "JSON", "thinking": "JSON",
                                               "data": "JSON", "signature": "JSON", "name": "JSON",
                                               "input": "JSON"}]')) AS b,
           generate_subscripts(CAST(r.content AS JSON[]), 1) AS place
    FROM lf_cu_raw r WHERE r.assistant AND left(CAST(r.content AS VARCHAR), 1) = '['
    UNION ALL
    SELECT r.rowid, CAST(r.api_error AS VARCHAR) = 'true',
           {'type': '"text"', 'text': r.content, 'thinking': NULL, 'data': NULL,
            'signature': NULL, 'name': NULL, 'input': NULL}, 1
    FROM lf_cu_raw r WHERE r.assistant AND left(CAST(r.content AS VARCHAR), 1) = '"'
), typed AS (
    SELECT pos, place, api_error, lf_cu_str(b.type) AS bt, lf_cu_str(b.text) AS text,
           lf_cu_str(b.thinking) AS thought, b.data, b.signature, b.name,
           CASE lf_cu_kind(b.input) WHEN 's' THEN b.input ->> '$' WHEN 'z' THEN NULL
                ELSE CAST(b.input AS VARCHAR) END AS args, lf_cu_kind(b.input) AS args_kind
    FROM blocks
)
SELECT pos,
       string_agg(CASE WHEN bt = 'text' THEN coalesce(text, '') END, '' ORDER BY place)
           FILTER (WHERE api_error) AS said,
       sum(CASE WHEN bt = 'text' THEN coalesce(length(text), 0) ELSE 0 END) AS text_chars,
       sum(CASE WHEN bt = 'text' THEN coalesce(lf_cu_visible(text), 0) ELSE 0 END) AS visible_chars,
       sum(CASE WHEN bt IN ('thinking', 'redacted_thinking')
                THEN coalesce(length(nullif(thought, '')), length(lf_cu_str(data)), 0)
                ELSE 0 END) AS reasoning_chars,
       sum(CASE WHEN bt = 'thinking' THEN coalesce(length(thought), 0) ELSE 0 END) AS thinking_chars,
       count(*) FILTER (WHERE bt IN ('tool_use', 'server_tool_use')) AS tool_calls,
       sum(CASE WHEN bt IN ('tool_use', 'server_tool_use')
                THEN coalesce(length(args), 0) + coalesce(length(lf_cu_str(name)), 0)
                ELSE 0 END) AS args_chars,
       coalesce(bool_or(bt = 'redacted_thinking'
                        OR (bt = 'thinking' AND coalesce(thought, '') = ''
                            AND coalesce(lf_cu_str(signature), '') <> '')), false) AS redacted,
       coalesce(bool_or((bt = 'thinking' AND lf_cu_not_str(signature))
                        OR (bt IN ('tool_use', 'server_tool_use') AND args_kind IN ('o', 'a', 'n')
                            AND regexp_matches(args, '(^|[:,\[])-?[0-9]+(\.[0-9]+)?e[0-9]'))), false) AS odd
FROM typed
GROUP BY pos;

-- The assistant lines: what each says of its call, its usage object as the token columns
-- (usage.token_counts, Anthropic's shape), what it wrote, and whether it makes its file odd.
CREATE OR REPLACE TEMP TABLE lf_cu_line AS
WITH lines AS (
    SELECT b.f, b.line, b.pos, r.sid, r.agent, r.side, r.request,
           r.ts, r.version, r.api_error, r.cwd, r.no_message, r.id, r.model, r.stop_reason,
           CASE WHEN left(CAST(r.usage AS VARCHAR), 1) = '{' THEN r.usage END AS usage_json,
           lf_cu_num(r.cost) AS cost_n
    FROM lf_cu_raw r JOIN lf_cu_place b ON b.pos = r.rowid
), typed AS (
    SELECT l.*,
           lf_cu_str(id) AS msg_id,
           coalesce(CAST(side AS VARCHAR) = 'true', false) AS sidechain,
           lf_cu_str(ts) AS ts_text,
           coalesce(CAST(api_error AS VARCHAR) = 'true', false) AS error_line,
           json_transform(usage_json, '{"input_tokens": "JSON", "output_tokens": "JSON",
                                        "cache_creation_input_tokens": "JSON", "cache_read_input_tokens": "JSON",
                                        "cache_creation": {"ephemeral_1h_input_tokens": "JSON"},
                                        "server_tool_use": {"web_search_requests": "JSON"}, "speed": "JSON"}') AS u
    FROM lines l
), counted AS (
    SELECT t.*, lf_cu_num(u.output_tokens) AS n_out, lf_cu_num(u.input_tokens) AS n_fresh,
           lf_cu_num(u.cache_creation_input_tokens) AS n_written,
           lf_cu_num(u.cache_read_input_tokens) AS n_read,
           lf_cu_num(u.cache_creation.ephemeral_1h_input_tokens) AS n_written_1h,
           lf_cu_num(u.server_tool_use.web_search_requests) AS n_searches
    FROM typed t
)
SELECT c.f, c.line, c.msg_id,
       coalesce(lf_cu_str(request), '') AS request,
       coalesce(nullif(lf_cu_str(sid), ''), n.stem) AS sid,
       CASE WHEN sidechain THEN lf_cu_str(agent) END AS agent,
       sidechain, ts_text, lf_cu_str(model) AS model, lf_cu_str(cwd) AS cwd,
       nullif(lf_cu_str(stop_reason), '') AS stopped, error_line AS api_error,
       CASE WHEN cost_n >= 0 AND cost_n < 1e6 THEN cost_n END AS cost,
       -- output_estimate.FINAL_ON_EVERY_LINE: a version from 2.1.97 on writes final counts
       CASE WHEN regexp_matches(lf_cu_str(version), '^[0-9]+\.[0-9]+\.[0-9]+')
            THEN list_transform(string_split(regexp_extract(lf_cu_str(version), '^[0-9]+\.[0-9]+\.[0-9]+'), '.'),
                                lambda x: CAST(x AS DOUBLE)) >= [2.0, 1.0, 97.0]
            ELSE false END AS final_version,
       -- an API error's status: claude_code._api_error
       CASE WHEN error_line
            THEN TRY_CAST(nullif(regexp_extract(s.said, 'API Error:?[\t\n\x{0b}\x{0c}\r\x{1c}-\x{1f} ]*([0-9]{3})', 1), '')
                          AS INTEGER) END AS http_status,
       lf_cu_whole(n_out) AS output_tokens, lf_cu_whole(n_fresh) AS fresh,
       coalesce(lf_cu_whole(n_written), 0) AS written, coalesce(lf_cu_whole(n_read), 0) AS read,
       coalesce(lf_cu_whole(n_written_1h), 0) AS written_1h, lf_cu_whole(n_searches) AS searches,
       coalesce(lf_cu_str(u.speed) = 'fast', false) AS fast,
       coalesce(s.text_chars, 0) AS text_chars, coalesce(s.visible_chars, 0) AS visible_chars,
       coalesce(s.reasoning_chars, 0) AS reasoning_chars,
       coalesce(s.thinking_chars, 0) AS thinking_chars, coalesce(s.tool_calls, 0) AS tool_calls,
       coalesce(s.args_chars, 0) AS args_chars, coalesce(s.redacted, false) AS redacted,
       -- what makes the file odd (see the top)
       no_message OR msg_id IS NULL OR msg_id = '' OR coalesce(s.odd, false)
         OR lf_cu_not_str(request) OR lf_cu_not_str(sid)
         OR coalesce(lf_cu_kind(side) NOT IN ('b', 'z'), false)
         OR (sidechain AND (lf_cu_not_str(agent) OR lf_cu_str(agent) = ''))
         OR lf_cu_not_str(ts) OR lf_cu_not_str(model) OR lf_cu_not_str(cwd)
         OR lf_cu_not_str(stop_reason)
         OR coalesce(regexp_matches(lf_cu_str(version), '[^\x00-\x7f]'), false)
         OR coalesce(lf_cu_kind(api_error) NOT IN ('b', 'z'), false)
         -- (a time of this form that is no day fails its cast in lf_cu_calls: the file is left)
         OR (ts_text IS NOT NULL
             AND (NOT regexp_full_match(ts_text, '[0-9]{4}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?Z')
                  OR left(ts_text, 4) = '0000'))
         -- another provider's usage (usage.token_counts tells them by these keys; the same
         -- words inside a value make the file odd too, which costs only speed)
         OR coalesce(regexp_matches(CAST(usage_json AS VARCHAR),
                     '"(prompt_tokens|completion_tokens|prompt_cache_hit_tokens|input_tokens_details|cached_input_tokens)"'),
                     false)
         -- (Python's \s and \d take in more than ASCII: a status written so is the Python's)
         OR (error_line AND coalesce(regexp_matches(s.said,
                 'API Error:?[\t\n\x{0b}\x{0c}\r\x{1c}-\x{1f} ]*[0-9]{0,2}[^\x00-\x7f]'), false)) AS odd
FROM counted c JOIN lf_cu_files n USING (f) LEFT JOIN lf_cu_said s USING (pos);

-- Each file: its assistant lines, whether it is odd, and its calls (none for an odd file).
CREATE OR REPLACE TEMP TABLE lf_cu_verdict AS
SELECT n.f, coalesce(u.assistant, 0) AS assistant,
       coalesce(u.odd, false) AS odd,
       CASE WHEN coalesce(u.odd, false) THEN 0 ELSE coalesce(u.calls, 0) END AS calls
FROM lf_cu_files n
LEFT JOIN (SELECT f, count(*) AS assistant, bool_or(odd) AS odd,
                  count(DISTINCT (msg_id, request)) AS calls
           FROM lf_cu_line GROUP BY f) u USING (f)
ORDER BY n.f;

-- The calls: a call is a file's lines of one (message id, request id), in the order of its
-- first line; its session, time, model and project are its first line's, its counts the
-- largest its lines wrote (output_tokens is a streaming snapshot), its measures their sums.
CREATE OR REPLACE TEMP TABLE lf_cu_calls AS
WITH calls AS (
    SELECT f, msg_id, request, min(line) AS line, count(*) AS n_records,
           max(cost) AS cost, max(output_tokens) AS output_tokens,
           max(fresh + written + read) FILTER (WHERE fresh IS NOT NULL) AS input_tokens,
           max(read) FILTER (WHERE fresh IS NOT NULL) AS cached_input_tokens,
           max(written) FILTER (WHERE fresh IS NOT NULL) AS cache_write_tokens,
           max(written_1h) FILTER (WHERE fresh IS NOT NULL) AS cache_write_1h_tokens,
           max(searches) AS web_search_requests, bool_or(fast) AS fast,
           -- the last line that says how it ended (an API error's line says 'error')
           arg_max(CASE WHEN api_error THEN 'error' ELSE stopped END, line)
               FILTER (WHERE api_error OR stopped IS NOT NULL) AS finish_reason_raw,
           (arg_max({'s': http_status}, line) FILTER (WHERE api_error)).s AS http_status,
           bool_or(stopped IS NOT NULL) OR bool_or(final_version) AS output_final,
           sum(text_chars) AS content_chars, sum(visible_chars) AS visible_chars,
           sum(reasoning_chars) AS reasoning_chars, sum(tool_calls) AS tool_call_count,
           sum(thinking_chars) AS thinking_chars, sum(args_chars) AS args_chars,
           bool_or(redacted) AS redacted
    FROM lf_cu_line
    WHERE f IN (SELECT f FROM lf_cu_verdict WHERE NOT odd)
    GROUP BY f, msg_id, request
), firsts AS (
    SELECT c.*, l.sid, l.agent, l.sidechain, l.ts_text, l.model, l.cwd
    FROM calls c JOIN lf_cu_line l USING (f, line)
)
SELECT f, CASE WHEN request <> '' THEN msg_id || ':' || request ELSE msg_id END AS native_id,
       msg_id AS response_id, line,
       CAST(left(ts_text, -1) AS TIMESTAMP) AS ts,
       CASE WHEN agent IS NOT NULL THEN sid || ':agent-' || agent ELSE sid END AS stream_key,
       CASE WHEN agent IS NOT NULL THEN sid || ':agent-' || agent ELSE sid END AS session_id,
       row_number() OVER (PARTITION BY f, sid, agent ORDER BY line) AS seq,
       agent AS agent_id,
       CASE WHEN agent IS NOT NULL THEN sid END AS parent_session_id,
       model, 'anthropic' AS provider, 'claude-code' AS app,
       coalesce(n.folder, nullif(cwd, ''), n.parent) AS project,
       CASE WHEN fast THEN 'fast' END AS variant,
       input_tokens, cached_input_tokens, cache_write_tokens, cache_write_1h_tokens, output_tokens,
       output_final,
       CASE WHEN model = '<synthetic>' OR cost IS NOT NULL
            THEN greatest(0.0, coalesce(cost, 0.0)) + 0.0 END AS cost_usd,
       CASE WHEN model = '<synthetic>' OR cost IS NOT NULL THEN 'reported' END AS cost_basis,
       web_search_requests, finish_reason_raw,
       content_chars, visible_chars, reasoning_chars, tool_call_count, http_status,
       n_records, n_records AS parts,
       sidechain AND request <> '' AS replay,
       -- output_estimate.settle: a placeholder count kept, the output estimated beside it
       CASE WHEN NOT output_final AND output_tokens IS NOT NULL
            THEN greatest(output_tokens,
                          CAST(ceil(CAST(content_chars + thinking_chars AS DOUBLE) / 3.2
                                    + CAST(args_chars AS DOUBLE) / 3.0
                                    + tool_call_count * 48) AS BIGINT)) END AS output_estimate_tokens,
       CASE WHEN NOT output_final AND output_tokens IS NOT NULL THEN redacted END AS output_estimate_floor
FROM firsts JOIN lf_cu_files n USING (f)
ORDER BY f, line;
