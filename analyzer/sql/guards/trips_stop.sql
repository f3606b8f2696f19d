-- One variant's stops: the first crossing of its threshold in each reach unit (lf_first).
-- Slots: <variant> its number; <first> its column of lf_first (p0, p1...).
SELECT {{variant}}, reach_unit, any_value(u_stream), min({{first}}), 'stop'
FROM lf_first WHERE {{first}} IS NOT NULL GROUP BY reach_unit
