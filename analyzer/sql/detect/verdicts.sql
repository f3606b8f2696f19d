-- Each run's own verdict for the sessions in $s (a list of session ids): its exit status,
-- outcome and result, and its last live call (the call with the highest seq). No slots.
SELECT r.session_id, r.exit_status, r.outcome, r.result_excerpt,
       (SELECT arg_max(c.call_id, c.seq) FROM live_calls c
        WHERE c.session_id = r.session_id)
FROM runs r WHERE r.session_id IN (SELECT unnest($s));
