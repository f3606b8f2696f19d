-- Per variant (-1: every variant, a trace read for all thresholds), the highest value the
-- guard reached on healthy units (reach units holding no incident's waste) where it is not
-- blind. Reads lf_trace, lf_truth_calls. Slots: <unit> the reach's unit column.
SELECT coalesce(variant, -1), max(value) FROM lf_trace
WHERE NOT blind
  AND reach_unit NOT IN (SELECT DISTINCT {{unit}} FROM lf_truth_calls
                         WHERE {{unit}} IS NOT NULL)
GROUP BY 1;
