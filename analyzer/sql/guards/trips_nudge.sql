-- One variant's nudges into lf_trips: the crossings of its nudge level (coming from below
-- it) before the stop of their reach unit. Parameter $v: the variant. Slots: <crosses> the
-- value reaches the nudge level; <below> the value before the call was below it; <earlier>
-- the nudge n comes before the stop s ("n.pos < s.pos"; in a period, in time order).
INSERT INTO lf_trips
SELECT $v, n.reach_unit, n.u_stream, n.pos, 'nudge'
FROM lf_trace n
LEFT JOIN lf_trips s
  ON s.variant = $v AND s.action = 'stop' AND s.reach_unit = n.reach_unit
WHERE (n.variant IS NULL OR n.variant = $v)
  AND {{crosses}} AND {{below}}
  AND (s.pos IS NULL OR {{earlier}});
