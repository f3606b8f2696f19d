-- lf_truncated(...): whether a replayed call is a cut-off tool call. Known in a log; in a
-- bill inferred from the next call's prompt (lf_output_discarded, classify.sql, the rule of
-- the truncated_tool_call_streak detector) - and unknown (NULL) where there is no next call
-- to judge by. Its last two arguments are the gap in seconds past which the next call judges
-- nothing, and the share of the output a next prompt must keep. No parameters.
CREATE OR REPLACE TEMP MACRO lf_truncated(response_kind, finish_reason, content_chars,
                                          tool_call_count, input_tokens, output_tokens,
                                          next_in, next_gap, gap_s, kept_ratio) AS
CASE WHEN response_kind = 'truncated_tool_call' THEN true
     WHEN finish_reason = 'length' AND content_chars IS NULL AND tool_call_count IS NULL
          AND (next_in IS NULL OR next_gap > gap_s) THEN NULL
     ELSE coalesce(lf_output_discarded(finish_reason, content_chars, tool_call_count,
                                       input_tokens, output_tokens, next_in, next_gap,
                                       gap_s, kept_ratio), false)
END;
