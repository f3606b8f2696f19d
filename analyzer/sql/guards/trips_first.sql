-- lf_first: in each group of the trace (the finer of scope and reach; a group lies in one
-- reach unit, and both in one stream), the first position where each threshold is crossed.
-- Slots: <picks> "min(pos) FILTER (WHERE value >= t) AS p0, ..." one per threshold; <mine>
-- the trace's rows of these variants; <crossing> where a value may cross the least threshold.
CREATE OR REPLACE TEMP TABLE lf_first AS
SELECT grp, any_value(reach_unit) AS reach_unit,
       any_value(u_stream) AS u_stream, {{picks}}
FROM lf_trace WHERE {{mine}} AND {{crossing}} GROUP BY grp;
