-- Classification rules shared by every ingestor: the ONE place where a provider's finish reason
-- is normalised and a response is given its kind. Loaded as temporary macros on every
-- connection, so a store written by an older version is read with today's rules.
--
-- lf_finish_reason(raw, cancelled) -> stop | length | tool_calls | content_filter | error |
--                                     cancelled | unknown
--   raw is the provider's or the export's finish reason, any case, surrounding blanks ignored.
--   stop           stop, end_turn, stop_sequence, eos, complete(d), finished
--   length         length, max_tokens, max_output_tokens, model_context_window_exceeded
--   tool_calls     tool_calls, tool_call, tool_use, function_call
--   content_filter content_filter, safety, recitation, refusal, blocklist, prohibited_content, spii
--   error          error
--   cancelled      cancelled, canceled, aborted, abort; or no reason at all on a call marked
--                  cancelled (a cancelled stream has finish_reason null)
--   unknown        anything else, or nothing (Claude Code writes stop_reason null)
CREATE OR REPLACE TEMP MACRO lf_finish_reason(raw, cancelled) AS (
    CASE
        WHEN lower(trim(raw)) IN ('stop', 'end_turn', 'stop_sequence', 'eos', 'complete',
                                  'completed', 'finished') THEN 'stop'
        WHEN lower(trim(raw)) IN ('length', 'max_tokens', 'max_output_tokens',
                                  'model_context_window_exceeded') THEN 'length'
        WHEN lower(trim(raw)) IN ('tool_calls', 'tool_call', 'tool_use',
                                  'function_call') THEN 'tool_calls'
        WHEN lower(trim(raw)) IN ('content_filter', 'safety', 'recitation', 'refusal',
                                  'blocklist', 'prohibited_content', 'spii') THEN 'content_filter'
        WHEN lower(trim(raw)) = 'error' THEN 'error'
        WHEN lower(trim(raw)) IN ('cancelled', 'canceled', 'aborted', 'abort') THEN 'cancelled'
        WHEN (raw IS NULL OR trim(raw) = '') AND coalesce(cancelled, false) THEN 'cancelled'
        ELSE 'unknown'
    END
);

-- lf_response_kind(finish_reason, http_status, output_tokens, reasoning_tokens,
--                  content_chars, visible_chars, reasoning_chars, tool_call_count)
--   -> text | tool_call | thinking_only | empty | whitespace | truncated_tool_call | error
-- finish_reason is already normalised. Pass NULL for what a format does not show: a billing
-- row knows tokens but not content or tool calls; a log knows content but may lack tokens.
-- The rules, first match wins:
--   1. error               HTTP status >= 400, or finish_reason 'error'
--   2. truncated_tool_call the response carries tool calls and finished on 'length' (the
--                          call's arguments were cut off: it cannot run)
--   3. tool_call           it carries tool calls, or finished on 'tool_calls'
--   When the visible content is known (content_chars not NULL):
--   4. text                some visible character
--   5. whitespace          content, but only blanks
--   6. thinking_only       no content, but reasoning (characters or tokens)
--   7. empty               nothing at all
--   When only token counts are known (a billing row):
--   8. empty               zero output tokens
--   9. thinking_only       every output token was a reasoning token
--  10. text                otherwise (a billing row cannot show whitespace, and a 'length'
--                          finish there cannot show whether a tool call was cut off)
--  11. NULL                neither content nor output tokens known: the kind is unknown (a
--                          reply the agent never saved, say), not guessed
CREATE OR REPLACE TEMP MACRO lf_response_kind(finish_reason, http_status, output_tokens,
        reasoning_tokens, content_chars, visible_chars, reasoning_chars, tool_call_count) AS (
    CASE
        WHEN coalesce(http_status, 0) >= 400 OR finish_reason = 'error' THEN 'error'
        WHEN coalesce(tool_call_count, 0) > 0 AND finish_reason = 'length'
            THEN 'truncated_tool_call'
        WHEN coalesce(tool_call_count, 0) > 0 OR finish_reason = 'tool_calls' THEN 'tool_call'
        WHEN content_chars IS NOT NULL THEN
            CASE
                WHEN coalesce(visible_chars, content_chars) > 0 THEN 'text'
                WHEN content_chars > 0 THEN 'whitespace'
                WHEN coalesce(reasoning_chars, 0) > 0 OR coalesce(reasoning_tokens, 0) > 0
                    THEN 'thinking_only'
                ELSE 'empty'
            END
        WHEN output_tokens = 0 THEN 'empty'
        WHEN coalesce(reasoning_tokens, 0) > 0 AND reasoning_tokens >= output_tokens
            THEN 'thinking_only'
        WHEN output_tokens > 0 THEN 'text'
        ELSE NULL
    END
);

-- lf_model_key(model) -> a name to compare models written differently by a bill and a log:
-- lower case, without the vendor prefix, the :variant, a trailing date (Anthropic's 20251101,
-- OpenAI's 2025-08-07) or -latest, dots and blanks as dashes ('anthropic/claude-opus-4.5',
-- 'claude-opus-4-5-20251101' and a bill's display name 'Claude Opus 4.5' are all
-- 'claude-opus-4-5').
CREATE OR REPLACE TEMP MACRO lf_model_key(model) AS (
    replace(replace(
        regexp_replace(
            regexp_replace(regexp_replace(lower(trim(model)), '^[^/]*/', ''), ':.*$', ''),
            '([-@]\d{8}|-\d{4}-\d{2}-\d{2}|-latest)$', ''),
        '.', '-'), ' ', '-')
);

-- lf_output_discarded(finish_reason, content_chars, tool_call_count, input_tokens,
--                     output_tokens, next_in, next_gap, max_gap_s, kept_ratio) -> boolean
-- A billing row only shows a 'length' finish, not whether a tool call was cut off; the cut is
-- inferred from what came next: the call is a billing view (no content nor tool calls known),
-- the next call of its stream (prompt next_in tokens, next_gap seconds later) followed within
-- max_gap_s, and its prompt grew by less than kept_ratio of this call's output - the output
-- was thrown away, not kept in the conversation (a long answer that was delivered is kept).
-- Used by the truncated_tool_call_streak and length_counter_false_alarm detectors and by the
-- guard replay's `truncated` column: one rule.
CREATE OR REPLACE TEMP MACRO lf_output_discarded(finish_reason, content_chars, tool_call_count,
        input_tokens, output_tokens, next_in, next_gap, max_gap_s, kept_ratio) AS (
    finish_reason = 'length' AND content_chars IS NULL AND tool_call_count IS NULL
    AND next_in IS NOT NULL AND next_gap <= max_gap_s
    AND next_in - input_tokens < output_tokens * kept_ratio
);
