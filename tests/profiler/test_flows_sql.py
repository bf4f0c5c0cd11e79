"""The flows rule is one: the Perfetto export's template (profiler/flows.FLOWS_SQL) is the tree's
ingest.flows.flows with the export's event filter where the tree's query takes a step range."""

from profiler import sqltree
from profiler.flows import FLOWS_SQL


def test_the_export_template_is_the_trees_flows_query():
    step_range = "($all_steps OR (e.step >= $step_lo AND e.step < $step_hi))"
    assert FLOWS_SQL.strip().replace("{event_filter}", step_range) == sqltree.get("ingest.flows.flows").sql
