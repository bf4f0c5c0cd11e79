"""The MCP tools' output schemas (scprof/mcp_server.py), as pydantic models the SDK publishes as each
tool's outputSchema and checks every structured result against.

They name and describe the fields an agent reads; every model allows more (`extra="allow"`): the
documents are the CLI's `--json` (scprof/answers.py), and a field added there must not make the
tool fail. Figures are in the store's units: times in picoseconds (`_ps`), shares as fractions.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class RunRow(_Open):
    run_id: int
    name: str
    source: str = Field(description="scprof-trace (emulated or recorded by scprof), xplane, chrome-json, ...")
    status: str = Field(description="ok, or failed: a run that stopped (its failure in `failure`)")
    steps: int = Field(description="steps the store times (0: a run without steps)")
    counted_steps: int | None = Field(None, description="steps summaries count (warm-up and last left out at >= 5)")
    mean_step_ps: float | None = Field(None, description="mean step time over the counted steps, ps")
    events: int | None = None
    failure: str | None = None
    whatif_origin: str | None = Field(None, description="a what-if trial's origin run (listed with trials=true)")


class Truncation(_Open):
    truncated: bool = Field(False, description="rows were left out: narrow the question (steps, chip, LIMIT)")
    note: str | None = Field(None, description="what was cut and how to ask for less, when truncated")


class RunList(Truncation):
    runs: list[RunRow] = Field(description="`scprof runs --json`, row for row")


class RunRef(_Open):
    run_id: int
    name: str


class Finding(_Open):
    rule: str
    severity: str = Field(description="critical, warning or info")
    title: str
    metric: str
    value: float | None = Field(description="the headline figure, in `unit`")
    unit: str
    recommendation: str
    evidence: dict[str, Any] = Field(description="further figures by name (units in the names: _ps, _share)")
    entities: dict[str, list[Any]] = Field(description="what is affected: chips, steps, tables, ops")
    confidence: str = Field(description="high: measured; medium: inferred; low: data missing")
    evidence_sql: str = Field(description="a query that reproduces the evidence (run it with the sql tool)")
    fix: dict[str, Any] | None = Field(description="the config change (`set`: KEY -> value as `record --set`)")
    verified: dict[str, Any] | None = Field(description="the fix simulated alone (analyze with verify=true)")


class Analysis(_Open):
    run: RunRef
    figures: dict[str, Any] = Field(description="per analyzer, its figures (breakdown: step time and time split)")
    findings: list[Finding] = Field(description="most severe first")
    notes: dict[str, list[str]] = Field(description="per analyzer, what it could not look at (data the run lacks)")
    simulations: int | None = Field(None, description="verify only: simulations run")
    not_verified: str | None = Field(None, description="verify only: why the fixes could not be simulated")


class BriefFinding(_Open):
    rule: str
    severity: str
    title: str
    metric: str
    value: float | None
    unit: str
    confidence: str


class Summary(_Open):
    run: RunRef
    step_time: dict[str, Any] | None = Field(
        description="step_ps_mean / p50 / p90 over the counted steps, `steps` counted, `covers` in words; "
        "null for a run without steps"
    )
    share: dict[str, float] | None = Field(description="the time split: category -> share of step time")
    findings: int = Field(description="how many findings analyze reports")
    top_findings: list[BriefFinding]
    fixable: int = Field(description="findings with a config fix (verify them with analyze verify=true)")
    notes: dict[str, list[str]]


class StepTime(_Open):
    base_mean_ps: float
    cand_mean_ps: float
    change: float = Field(description="cand / base - 1: negative is faster")
    ci_low: float | None = Field(
        description="95% interval of `change` (bootstrap-t of the log ratio), low end; null: not enough steps"
    )
    ci_high: float | None
    base_steps: int
    cand_steps: int
    verdict: str = Field(
        description="improved or regressed (the interval excludes 0), no change (the interval lies within +-1%), "
        "inconclusive (otherwise), or not enough steps (fewer than min_steps counted steps on a side)"
    )
    paired: bool
    method: str = Field(description="how the interval was computed")
    min_steps: int = Field(description="counted steps each run needs for an interval")


class Comparison(_Open):
    base: dict[str, Any]
    cand: dict[str, Any]
    step_time: StepTime
    breakdown: list[dict[str, Any]] = Field(description="per category: base_ps, cand_ps, delta_ps per step and chip")
    findings: dict[str, list[dict[str, Any]]] = Field(description="resolved, new, persisting")
    ops: list[dict[str, Any]] = Field(
        description="per-op changes per step, the largest with a 95% interval (ci_low, ci_high) and a `change` label: "
        "faster, slower, no change, inconclusive, not enough steps, added or removed"
    )
    tables: list[dict[str, Any]]
    config_diff: list[dict[str, Any]]
    memory: dict[str, Any] | None = Field(
        None,
        description="each run's device memory peak (base, cand: word, figure, bytes): the memory counters' peak, "
        "else the allocators'; delta_bytes when both come from the same figure",
    )
    notes: list[str]
    ops_method: str | None = Field(None, description="how the per-op intervals were computed")
    attribution: dict[str, Any] | None = Field(
        None, description="attribute only: per changed key its share of the gain, alone and left out"
    )
    not_attributed: str | None = Field(None, description="attribute only: why the gain could not be attributed")


class TopOps(Truncation):
    run: RunRef
    steps: list[int] | None = Field(description="[A, B]: the events of steps A..B-1; null: every event")
    chip: int | None
    ops: int = Field(description="distinct ops (kind, name, category) in the selection")
    rows: list[dict[str, Any]] = Field(
        description="track_kind, name, category, host_work, events, total_ps, self_ps, share (of the kind's self "
        "time), flops, bytes; device work first, by self time"
    )


class FoundEvents(Truncation):
    run: RunRef
    name: str
    window_ps: list[int] = Field(description="[t0, t1): the window searched, ps")
    count: int = Field(description="events that match in the window (rows holds the first `limit`)")
    rows: list[dict[str, Any]] = Field(
        description="event_id, track_id, plane, line, track_kind, chip, name, step, start_ps, dur_ps"
    )


class SqlResult(Truncation):
    columns: list[str]
    rows: list[dict[str, Any]] = Field(description="`scprof sql QUERY --format json`, row for row")
    capped_by: str | None = Field(description="rows or bytes, when the result was cut")


class Link(_Open):
    url: str = Field(description="a page of `scprof ui` a person can open")
    serve: str = Field(description="the command that serves the UI at that address")


class Ingested(_Open):
    runs: list[dict[str, Any]] = Field(description="per stored run: run_id, name, events, cut_message")


class Slice(_Open):
    event_id: int = Field(description="the event's id (-1: a step marker, named `step N`)")
    track_id: int
    plane: str
    line: str
    track_kind: str
    chip: int
    name: str
    step: int | None
    start_ps: int
    dur_ps: int


class Events(Truncation):
    run: RunRef
    window_ps: list[int] = Field(description="[t0, t1): the window, ps (of the steps asked for, or the whole run)")
    steps: list[int] | None = Field(description="[A, B]: the window is steps A..B-1's span on the Timeline")
    tracks: list[dict[str, Any]] = Field(
        description="per track with slices in the window: its id, plane, line, track_kind, chip and `count`"
    )
    count: int = Field(description="slices (events and step markers) in the window on the chosen tracks")
    rows: list[Slice] = Field(description="the first `limit` slices in time order (ties: track, id)")


class StepBreakdown(Truncation):
    run: RunRef
    steps: list[int] | None = Field(description="[A, B]: steps A..B-1; null: every step")
    chip: int | None = Field(description="per step: this chip's time (null: the mean over chips)")
    categories: list[str] = Field(description="the time split's categories (the Overview's)")
    counted_steps: int = Field(description="how many steps per_chip averages over (warm-up and last left out)")
    steps_in_range: int = Field(description="steps in the range asked; rows holds the first `limit` of them")
    per_chip: list[dict[str, Any]] = Field(description="per chip: each category's mean time per counted step, ps")
    rows: list[dict[str, Any]] = Field(description="per step: step, total_ps and each category's time, ps")


class Recorded(_Open):
    run_id: int
    name: str
    status: str = Field(description="ok, or failed (`failure` says why; the run is stored all the same)")
    failure: str | None
    trace: str = Field(description="the trace file written, under the server's runs folder")
    events: int = Field(description="events stored (every event of the trace: runs.events)")
    steps: int | None = Field(None, description="steps timed (breakdown.steps_recorded)")
    steps_counted: int | None = Field(None, description="steps the summaries count (breakdown.steps)")
    step_ps_mean: float | None = Field(None, description="mean step time over the counted steps, ps")
    share: dict[str, float] | None = Field(
        None, description="wall-time split of the counted steps, all chips (breakdown.share; idle: nothing running)"
    )
    minibatches_per_step_mean: float | None = None
    dropped_ids: int | None = None
    findings: int = Field(0, description="how many findings the stored analysis has (analyze for them)")
    warnings: list[str]


class Tuned(_Open):
    baseline: dict[str, Any] = Field(description="run and step_time_ps the search started from")
    best: dict[str, Any] = Field(
        description="run, step_time_ps, overrides, config (the tuned TOML), change and "
        "its 95% interval (ci_low, ci_high) against the baseline"
    )
    trials: list[dict[str, Any]] = Field(description="every trial: overrides, step time, change, verdict, accepted")
    simulations: int
    stopped: str = Field(description="why the search stopped")
