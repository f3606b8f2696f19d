-- The stated cost of each run of source sid that says cost_apportioned, divided over its
-- session's calls of format fmt that carry no billed or reported cost of their own (those
-- divided before, from an earlier version of the run, again) and of its sub-agents (sessions
-- whose parent_session_id is the run's: the Claude Code CLI's total_cost_usd counts every
-- call of the run, its Task sub-agents' too, as the result line's modelUsage shows; no other
-- format that states a run's cost names a parent): in proportion to their list-price
-- estimates where every one of them has one, else evenly, in the order of seq
-- (then call_id). Each share is the difference of two rounded running totals, so the shares
-- add up to the stated cost exactly. A run stating only its tokens' estimate
-- (cost_estimate_usd) has it divided the same way, as its calls' 'estimated' cost.
-- Parameters: sid, fmt.
WITH c AS (
    SELECT c.call_id, r.session_id, c.seq,
           coalesce(r.reported_cost_usd, r.cost_estimate_usd) AS total,
           CASE WHEN r.reported_cost_usd IS NOT NULL THEN 'apportioned'
                ELSE 'estimated' END AS basis,
           c.cost_estimate_usd::DOUBLE AS est
    FROM calls c JOIN runs r ON r.session_id = coalesce(c.parent_session_id, c.session_id)
    WHERE r.source_id = $sid AND r.cost_apportioned
      AND coalesce(r.reported_cost_usd, r.cost_estimate_usd) IS NOT NULL
      AND c.format = $fmt
      AND coalesce(c.cost_basis, 'estimated')
          IN ('estimated', 'estimated_output', 'apportioned')),
w AS (
    SELECT *, CASE WHEN bool_and(coalesce(est, 0) > 0) OVER (PARTITION BY session_id)
                   THEN est ELSE 1.0 END AS w
    FROM c),
cum AS (
    SELECT call_id, session_id, seq, basis,
           round(total::DOUBLE * sum(w) OVER (PARTITION BY session_id
                                              ORDER BY seq NULLS LAST, call_id
                                              ROWS UNBOUNDED PRECEDING)
                 / sum(w) OVER (PARTITION BY session_id), 10)::DECIMAL(18, 10) AS upto
    FROM w)
UPDATE calls SET cost_usd = s.share, cost_basis = s.basis, cost_logged_usd = NULL,
                 cost_estimate_usd = CASE WHEN s.basis = 'estimated' THEN s.share
                                          ELSE calls.cost_estimate_usd END
FROM (SELECT call_id, basis,
             upto - coalesce(lag(upto) OVER (PARTITION BY session_id
                                            ORDER BY seq NULLS LAST, call_id), 0) AS share
      FROM cum) s
WHERE calls.call_id = s.call_id;
