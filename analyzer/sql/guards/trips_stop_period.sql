-- One variant's stops in a period (a day, a window, a month: every stream's calls): the
-- first crossing of its threshold in each period, in time order (lf_first's picks are
-- places in time order, ord), as the call at that place (lf_trace). Slots: <variant> its
-- number; <first> its column of lf_first (p0, p1...).
SELECT {{variant}}, f.reach_unit, t.u_stream, t.pos, 'stop'
FROM lf_first f
JOIN lf_trace t ON t.reach_unit = f.reach_unit AND t.ord = f.{{first}}
                AND (t.variant IS NULL OR t.variant = {{variant}})
WHERE f.{{first}} IS NOT NULL
