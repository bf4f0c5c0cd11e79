-- core_busy_events: TensorCore and SparseCore op events per chip as
-- (chip, start_ps, end_ps, priority) for the overlap analysis: priority 0 is
-- the core kind given by $first ('tensorcore' or 'sparsecore'), 1 the other.
SELECT chip, start_ps, end_ps,
       CASE WHEN track_kind = $first THEN 0 ELSE 1 END::TINYINT AS priority
FROM {op_events}
WHERE dur_ps > 0 AND chip >= 0 AND line IN ('XLA Ops', 'Sparse Core Ops')
