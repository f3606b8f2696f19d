-- The variants' nudges into lf_trips: the crossings of each one's nudge level (coming from
-- below it) before the stop of their reach unit, all the variants in one pass over the trace.
-- Slots: <which> a list, for a row of the trace, of the variants it nudges (an item each,
-- NULL where it does not: the variant's own rows, its value reaching the level, its value
-- before the call below it); <any> whether it nudges any; <earlier> the nudge n comes before
-- the stop s ("n.pos < s.pos"; in a period, in time order).
INSERT INTO lf_trips
SELECT n.v, n.reach_unit, n.u_stream, n.pos, 'nudge'
FROM (SELECT unnest(list_filter({{which}}, lambda x: x IS NOT NULL)) AS v, *
      FROM lf_trace n WHERE {{any}}) n
LEFT JOIN lf_trips s
  ON s.variant = n.v AND s.action = 'stop' AND s.reach_unit = n.reach_unit
WHERE s.pos IS NULL OR {{earlier}};
