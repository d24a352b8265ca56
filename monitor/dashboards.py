"""Grafana dashboards, built in code with grafana-foundation-sdk and committed as JSON in ``dashboards/``.

Three dashboards, linked to each other (tag ``training-monitor``), each with the variables ``datasource``
and ``run`` (and ``rank`` where a panel filters by rank):

- ``training-run-overview``: loss, grad norm, LR, loss scale, overflows, TPS, MFU, step time, data wait,
  anomalies, rollbacks, checkpoints: the run at a glance.
- ``training-ranks``: per-rank step time (mean and p95), each rank's step time against the job's median, each
  rank's time between steps beyond the median rank's (stragglers), TPS, data wait, liveness, and a table of the
  slowest ranks.
- ``training-stability``: anomalies by rule (with links to the runbooks), rollbacks, checkpoint health,
  loss scale and overflows, grad norm, loss; rollbacks and anomalies as annotations.

Every panel is defined once, in ``PANELS``; a dashboard is a list of rows naming panels (``LAYOUTS``), so a
panel shared by two dashboards is the same definition. Targets the Grafana dashboard model of Grafana 11.6
(the SDK release pinned in ``pyproject.toml``). ``monitor dashboards generate`` rewrites the JSON files,
``monitor dashboards push`` uploads them with grafana-client (:mod:`training_monitor.grafana`). The tests check that
the committed files match, that every PromQL expression passes ``promtool``, and that each dashboard
decodes into the SDK's 11.6 model classes with nothing lost or of the wrong type
(``model_problems`` in ``tests/grafana_model.py``).
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders import stat, table, text, timeseries
from grafana_foundation_sdk.builders.common import GraphThresholdsStyleConfig, ReduceDataOptions, TableSortByFieldState
from grafana_foundation_sdk.builders.dashboard import (
    AnnotationQuery,
    Dashboard,
    DashboardLink,
    DatasourceVariable,
    QueryVariable,
    Row,
    TextBoxVariable,
    ThresholdsConfig,
)
from grafana_foundation_sdk.builders.prometheus import Dataquery
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import BigValueGraphMode, FieldTextAlignment, GraphThresholdsStyleMode
from grafana_foundation_sdk.models.dashboard import (
    DashboardCursorSync,
    DashboardLinkType,
    DataSourceRef,
    DataTransformerConfig,
    DynamicConfigValue,
    Threshold,
    ThresholdsMode,
    VariableRefresh,
    VariableSort,
)
from grafana_foundation_sdk.models.prometheus import PromQueryFormat
from grafana_foundation_sdk.models.text import TextMode

TAG = "training-monitor"  # every dashboard carries it; the dashboard links list the dashboards with it
DS = DataSourceRef(type_val="prometheus", uid="${datasource}")
RUN = 'run=~"$run"'
RANK = 'run=~"$run", rank=~"$rank"'


def default_runbook_base() -> str:
    """The rules' ``runbook_base`` (``runbooks``, the repository folder, unless the default rules say otherwise)."""
    from .ruleset import Rules

    return Rules().runbook_base


# ---------------------------------------------------------------------------------------------- PromQL
def _mean(histogram: str, sel: str, window: str = "5m") -> str:
    """Mean observation per (run, rank) over ``window``, from a histogram's ``_sum`` and ``_count``."""
    return (f"sum by (run, rank) (rate({histogram}_sum{{{sel}}}[{window}])) / "
            f"sum by (run, rank) (rate({histogram}_count{{{sel}}}[{window}]))")


def _quantile(q: float, histogram: str, sel: str, by: str = "le, run, rank", window: str = "5m") -> str:
    return f"histogram_quantile({q}, sum by ({by}) (rate({histogram}_bucket{{{sel}}}[{window}])))"


STEP = "train_step_duration_seconds"
WAIT = "train_data_wait_duration_seconds"
# a rank's mean step time over the job's median across all its ranks (the median ignores the $rank filter)
JOB_MEDIAN_STEP = f"quantile by (run) (0.5, {_mean(STEP, RUN)})"
VS_MEDIAN = f"({_mean(STEP, RANK)}) / on (run) group_left () ({JOB_MEDIAN_STEP})"
# a rank's mean time between steps beyond the job's median rank's, over the median rank's step period (step time +
# time between steps): the time the other ranks of a synchronous job wait for it (TrainingRankStraggler's measure)
JOB_MEDIAN_WAIT = f"quantile by (run) (0.5, {_mean(WAIT, RUN)})"
JOB_MEDIAN_PERIOD = f"quantile by (run) (0.5, {_mean(WAIT, RUN)} + {_mean(STEP, RUN)})"


def _beyond_median(sel: str) -> str:
    return (f"(({_mean(WAIT, sel)}) - on (run) group_left () ({JOB_MEDIAN_WAIT})) "
            f"/ on (run) group_left () ({JOB_MEDIAN_PERIOD})")


SLOWEST = f"topk by (run) (20, {_mean(STEP, RANK)})"
STEPS_SINCE_HEALTHY = (f"max by (run, rank) (train_step{{{RANK}}}) - "
                       f"max by (run, rank) (train_last_healthy_checkpoint_step{{{RANK}}})")


def _among_slowest(expr: str) -> str:
    return f"({expr}) and on (run, rank) {SLOWEST}"


# ---------------------------------------------------------------------------------------------- panels
@dataclass(frozen=True)
class Query:
    expr: str
    legend: str = ""
    column: str = ""  # table panels: the column header of this query's value


@dataclass(frozen=True)
class PanelDef:
    """One panel. ``kind``: timeseries, stat (last value per series), table (instant queries merged on
    run and rank) or text (markdown ``content``). ``thresholds``: (value, colour) steps above a green base.
    ``links``: (title, url) data links; ``units``: column header -> unit for tables."""
    title: str
    unit: str = "none"
    queries: tuple[Query, ...] = ()
    kind: str = "timeseries"
    description: str = ""
    width: int = 8
    height: int = 8
    thresholds: tuple[tuple[float, str], ...] = ()
    links: tuple[tuple[str, str], ...] = ()
    units: tuple[tuple[str, str], ...] = ()
    decimals: int | None = None
    no_value: str = ""
    content: str = ""


def _q(expr: str, legend: str = "{{run}} rank {{rank}}", column: str = "") -> Query:
    return Query(expr, legend, column)


RUNBOOK_LINK = ("Runbook: ${__field.labels.rule}", "${runbook_base}/${__field.labels.rule}.md")
STRAGGLER = ((1.1, "orange"), (1.25, "red"))
WAITED_FOR = ((0.1, "orange"), (0.2, "red"))  # TrainingRankStraggler fires over 0.2


def _runbooks_markdown() -> str:
    from .ruleset import Rules

    pages = "".join(f"- [{r}](${{runbook_base}}/{r}.md)\n" for r in Rules().rules)
    return ("What each rule means and what to do when it fires:\n\n" + pages + "\nThe links follow the "
            "`runbook_base` variable (`monitor dashboards push --runbook-base URL` sets it).")


# Every panel of every dashboard, by key: the one place where panels are defined.
PANELS: dict[str, PanelDef] = {
    # optimisation
    "loss": PanelDef("Loss", queries=(_q(f"train_loss{{{RANK}}}"),)),
    "grad_norm": PanelDef("Grad norm (pre-clip)", queries=(_q(f"train_grad_norm{{{RANK}}}"),)),
    "learning_rate": PanelDef("Learning rate", queries=(_q(f"train_learning_rate{{{RANK}}}"),),
                              description="Each rollback multiplies the LR by lr_factor (0.5 by default): "
                                          "a step down here."),
    "loss_scale": PanelDef("Loss scale", queries=(_q(f"train_loss_scale{{{RANK}}}"),),
                           description="Halved at each fp16 overflow; a run of halvings to the floor is a "
                                       "loss-scale collapse."),
    "overflows": PanelDef("Overflowed steps per minute",
                          queries=(_q(f"60 * rate(train_overflow_steps_total{{{RANK}}}[5m])"),),
                          description="Steps whose gradients overflowed (update skipped), 5-minute rate."),
    # throughput
    "tps": PanelDef("Tokens per second (TPS)", queries=(
        _q(f"max by (run) (rate(train_tokens_total{{{RUN}}}[1m]))", "{{run}}"),
        _q(f"train_tokens_per_second{{{RANK}}}", "last step, {{run}} rank {{rank}}"))),
    "tps_per_device": PanelDef("TPS per device", queries=(_q(f"train_tokens_per_second_per_device{{{RANK}}}"),)),
    "mfu": PanelDef("MFU", "percentunit", (_q(f"train_mfu_ratio{{{RANK}}}"),),
                    description="Model FLOPs utilisation: 6N + 12LHS FLOPs per token x TPS / peak FLOP/s."),
    "step_time": PanelDef("Step time p50 / p95", "s", (
        _q(_quantile(0.5, STEP, RANK), "p50 {{run}} rank {{rank}}"),
        _q(_quantile(0.95, STEP, RANK), "p95 {{run}} rank {{rank}}"))),
    "data_wait_share": PanelDef("Data wait share of the step", "percentunit", (
        _q(f"rate({WAIT}_sum{{{RANK}}}[5m]) / (rate({WAIT}_sum{{{RANK}}}[5m]) + rate({STEP}_sum{{{RANK}}}[5m]))",
           "5m, rank {{rank}}"),
        _q(f"train_data_wait_ratio{{{RANK}}}", "last step, {{run}} rank {{rank}}"))),
    "data_wait": PanelDef("Data wait of the last step", "s", (_q(f"train_data_wait_seconds{{{RANK}}}"),)),
    "since_last_step": PanelDef("Seconds since the last step", "s",
                                (_q(f"time() - train_last_step_timestamp_seconds{{{RANK}}}"),),
                                description="Climbs without bound when a rank hangs."),
    # stability
    "anomalies": PanelDef(
        "Anomalies by rule (per 10 min)",
        queries=(_q(f"max by (run, rule) (increase(train_anomalies_total{{{RUN}}}[10m]))", "{{rule}} ({{run}})"),),
        description="Rule firings in the last 10 minutes (max over the run's ranks: with consensus every "
                    "rank fires the same events). Click a series for the rule's runbook.",
        links=(RUNBOOK_LINK,)),
    "anomalies_in_range": PanelDef(
        "Anomalies in the time range", kind="stat",
        queries=(_q(f"max by (run, rule) (increase(train_anomalies_total{{{RUN}}}[$__range])) > 0",
                    "{{rule}} ({{run}})"),),
        description="Rules that fired in the dashboard's time range, and how often. Click for the runbook.",
        thresholds=((1, "orange"),), decimals=0, no_value="none", links=(RUNBOOK_LINK,)),
    "runbooks": PanelDef("Runbooks", kind="text", content=_runbooks_markdown()),
    "rollbacks": PanelDef("Rollbacks", queries=(_q(f"train_rollbacks_total{{{RUN}}}"),),
                          description="Rollbacks to the last healthy checkpoint, total (every rank rolls back "
                                      "together)."),
    "rollbacks_in_range": PanelDef(
        "Rollbacks in the time range", kind="stat", width=8,
        queries=(_q(f"max by (run) (increase(train_rollbacks_total{{{RUN}}}[$__range]))", "{{run}}"),),
        thresholds=((1, "orange"), (3, "red")), decimals=0,
        description="After max_rollbacks (3 by default) the next request stops the run."),
    "checkpoint_step": PanelDef("Last healthy checkpoint step", queries=(
        _q(f"train_last_healthy_checkpoint_step{{{RANK}}}"),
        _q(f"train_step{{{RANK}}}", "current step, {{run}} rank {{rank}}"))),
    "steps_since_healthy": PanelDef(
        "Steps since the last healthy checkpoint", queries=(_q(STEPS_SINCE_HEALTHY),),
        description="How much training a rollback would lose now. It should saw-tooth at checkpoint_every + "
                    "healthy_after; a steady climb means checkpoints are not being marked healthy."),
    "steps_since_healthy_now": PanelDef(
        "Steps since the last healthy checkpoint (now)", kind="stat",
        queries=(_q(f"max by (run) ({STEPS_SINCE_HEALTHY})", "{{run}}"),), decimals=0),
    # ranks
    "ranks_reporting": PanelDef("Ranks reporting", kind="stat", width=6, height=4,
                                queries=(_q(f"count by (run) (train_step{{{RUN}}})", "{{run}}"),)),
    "most_waited_for": PanelDef(
        "Rank the others wait for, share of the step period", "percentunit", kind="stat", width=6, height=4,
        queries=(_q(f"topk by (run) (1, {_beyond_median(RUN)})"),), thresholds=WAITED_FOR, decimals=1,
        description="The rank that spends the most between its steps beyond the job's median rank, and that time "
                    "over the median step period (TrainingRankStraggler fires over 20 %)."),
    "oldest_step": PanelDef(
        "Longest since a rank's last step", "s", kind="stat", width=6, height=4,
        queries=(_q(f"max by (run) (time() - train_last_step_timestamp_seconds{{{RUN}}})", "{{run}}"),)),
    "step_spread": PanelDef(
        "Step spread across ranks", kind="stat", width=6, height=4, decimals=0,
        queries=(_q(f"max by (run) (train_step{{{RUN}}}) - min by (run) (train_step{{{RUN}}})", "{{run}}"),),
        description="Leading rank's step minus the last rank's: stays near 0 in a synchronous job."),
    "step_mean_by_rank": PanelDef("Mean step time by rank (5m)", "s", (_q(_mean(STEP, RANK)),),
                                  description="rate(_sum) / rate(_count) of train_step_duration_seconds."),
    "step_p95_by_rank": PanelDef("p95 step time by rank (5m)", "s", (_q(_quantile(0.95, STEP, RANK)),)),
    "vs_median_by_rank": PanelDef(
        "Step time x the job's median", queries=(_q(VS_MEDIAN),), thresholds=STRAGGLER, decimals=2,
        description="Each rank's mean step time over the median of all the run's ranks: 1 is typical. In a "
                    "synchronous job the ranks above wait inside their step for a rank that is late between its "
                    "steps (see the stragglers panel), or differ by design (pipeline stages)."),
    "beyond_median_by_rank": PanelDef(
        "Time between steps beyond the job's median (stragglers)", "percentunit",
        queries=(_q(_beyond_median(RANK)),), thresholds=WAITED_FOR, decimals=1,
        description="Each rank's mean time between its steps (data wait, callbacks) minus the median rank's, "
                    "over the median step period: the time a synchronous job's other ranks wait for this one "
                    "(lines at 10 % and 20 %; TrainingRankStraggler fires over 20 % for 10 minutes)."),
    "tps_by_rank": PanelDef("TPS per device by rank (last step)",
                            queries=(_q(f"train_tokens_per_second_per_device{{{RANK}}}"),)),
    "data_wait_by_rank": PanelDef("Mean data wait per step by rank (5m)", "s", (_q(_mean(WAIT, RANK)),)),
    "since_last_step_by_rank": PanelDef("Seconds since each rank's last step", "s",
                                        (_q(f"time() - train_last_step_timestamp_seconds{{{RANK}}}"),)),
    "stalled_by_rank": PanelDef("Stalled ranks (hang watchdog)", queries=(_q(f"train_stalled{{{RANK}}}"),),
                                description="1 from the watchdog's stall report until the rank's next step."),
    "lag_by_rank": PanelDef(
        "Steps behind the leading rank",
        queries=(_q(f"max by (run) (train_step{{{RUN}}}) - on (run) group_right () "
                    f"max by (run, rank) (train_step{{{RANK}}})"),),
        description="A rank that stops advancing (hang, dead process) climbs here."),
    "slowest_ranks": PanelDef(
        "Slowest ranks (top 20 per run by mean step time, 5m)", "s", kind="table", width=24, height=10,
        queries=(
            _q(SLOWEST, column="mean step"),
            _q(_among_slowest(VS_MEDIAN), column="x job median"),
            _q(_among_slowest(_quantile(0.95, STEP, RANK)), column="p95 step"),
            _q(_among_slowest(f"sum by (run, rank) (rate({WAIT}_sum{{{RANK}}}[5m])) / "
                              f"(sum by (run, rank) (rate({WAIT}_sum{{{RANK}}}[5m])) + "
                              f"sum by (run, rank) (rate({STEP}_sum{{{RANK}}}[5m])))"), column="data wait share"),
            _q(_among_slowest(f"max by (run, rank) (time() - train_last_step_timestamp_seconds{{{RANK}}})"),
               column="since last step"),
            _q(_among_slowest(f"max by (run, rank) (train_step{{{RANK}}})"), column="step")),
        units=(("x job median", "none"), ("data wait share", "percentunit"), ("step", "none"))),
}


@dataclass(frozen=True)
class Annotation:
    name: str
    expr: str
    color: str


ANNOTATIONS = {
    "rollbacks": Annotation("Rollbacks", f"max by (run) (changes(train_rollbacks_total{{{RUN}}}[2m])) > 0", "red"),
    "anomalies": Annotation("Anomalies", f"max by (run, rule) (changes(train_anomalies_total{{{RUN}}}[2m])) > 0",
                            "orange"),
}


@dataclass(frozen=True)
class Layout:
    uid: str
    title: str
    description: str
    rows: tuple[tuple[str, tuple[str, ...]], ...]
    annotations: tuple[str, ...] = ("rollbacks", "anomalies")


LAYOUTS: dict[str, Layout] = {
    "training-run-overview.json": Layout(
        "training-run-overview", "Training run overview",
        "The run at a glance: optimisation, throughput, stability.",
        (("Optimisation", ("loss", "grad_norm", "learning_rate", "loss_scale", "overflows")),
         ("Throughput", ("tps", "tps_per_device", "mfu", "step_time", "data_wait_share", "data_wait",
                         "since_last_step", "stalled_by_rank")),
         ("Stability", ("anomalies", "rollbacks", "checkpoint_step")))),
    "training-ranks.json": Layout(
        "training-ranks", "Training ranks",
        "Per-rank step time, stragglers against the job's median, throughput, data wait and liveness.",
        (("Job", ("ranks_reporting", "most_waited_for", "oldest_step", "step_spread")),
         ("Step time by rank", ("step_mean_by_rank", "step_p95_by_rank", "vs_median_by_rank",
                                "beyond_median_by_rank")),
         ("Throughput, input and liveness by rank", ("tps_by_rank", "data_wait_by_rank", "since_last_step_by_rank",
                                                     "stalled_by_rank", "lag_by_rank")),
         ("Slowest ranks", ("slowest_ranks",))),
        annotations=("rollbacks",)),
    "training-stability.json": Layout(
        "training-stability", "Training stability",
        "Anomalies by rule, rollbacks, checkpoint health, loss scale and overflows, grad norm and loss.",
        (("Anomalies and rollbacks", ("anomalies", "anomalies_in_range", "runbooks", "rollbacks",
                                      "rollbacks_in_range", "steps_since_healthy_now")),
         ("Checkpoint health", ("steps_since_healthy", "checkpoint_step")),
         ("Loss scale and overflows", ("loss_scale", "overflows")),
         ("Loss and gradients", ("loss", "grad_norm")))),
}


# ---------------------------------------------------------------------------------------------- building
def _thresholds(steps) -> ThresholdsConfig:
    return ThresholdsConfig().mode(ThresholdsMode.ABSOLUTE).steps(
        [Threshold(value=None, color="green")] + [Threshold(value=float(v), color=c) for v, c in steps])


def _panel(defn: PanelDef, pid: int):
    if defn.kind == "text":
        return (text.Panel().id(pid).title(defn.title).height(defn.height).span(defn.width)
                .mode(TextMode.MARKDOWN).content(defn.content))
    kinds: dict[str, Any] = {"timeseries": timeseries.Panel, "stat": stat.Panel, "table": table.Panel}
    builder = kinds[defn.kind]()
    panel = builder.id(pid).title(defn.title).unit(defn.unit).datasource(DS).height(defn.height).span(defn.width)
    if defn.description:
        panel = panel.description(defn.description)
    if defn.decimals is not None:
        panel = panel.decimals(defn.decimals)
    if defn.no_value:
        panel = panel.no_value(defn.no_value)
    if defn.links:
        panel = panel.data_links([DashboardLink(t).type(DashboardLinkType.LINK).url(u).target_blank(True)
                                  for t, u in defn.links])
    if defn.thresholds:
        panel = panel.thresholds(_thresholds(defn.thresholds))
        if defn.kind == "timeseries":
            panel = panel.thresholds_style(GraphThresholdsStyleConfig().mode(GraphThresholdsStyleMode.DASHED))
    if defn.kind == "stat":
        panel = panel.graph_mode(BigValueGraphMode.AREA).reduce_options(
            ReduceDataOptions().calcs(["lastNotNull"]).values(False))
    for i, q in enumerate(defn.queries):
        target = Dataquery().expr(q.expr).ref_id("ABCDEFGH"[i])
        if defn.kind == "table":
            target = target.instant().format(PromQueryFormat.TABLE)
        else:
            target = target.legend_format(q.legend)
        panel = panel.with_target(target)
    if defn.kind == "table":
        columns = {f"Value #{'ABCDEFGH'[i]}": q.column for i, q in enumerate(defn.queries)}
        panel = (panel.with_transformation(DataTransformerConfig(id_val="merge", options={}))
                 .with_transformation(DataTransformerConfig(id_val="organize", options={
                     "excludeByName": {"Time": True},
                     "indexByName": {name: i for i, name in enumerate(["run", "rank", *columns])},
                     "renameByName": columns}))
                 .sort_by([TableSortByFieldState().display_name(defn.queries[0].column).desc(True)]))
        panel = panel.align(FieldTextAlignment.AUTO).inspect(False)
        for column, unit in defn.units:
            panel = panel.override_by_name(column, [DynamicConfigValue(id_val="unit", value=unit)])
    return panel


def build(layout: Layout, runbook_base: str | None = None) -> dict:
    """The dashboard of ``layout`` as Grafana JSON (a dict). ``runbook_base``: default of the
    ``runbook_base`` variable (where ``runbooks/<rule>.md`` are served); the rules' default when None."""
    defs = [PANELS[key] for _, keys in layout.rows for key in keys]
    texts = [q.expr for d in defs for q in d.queries] + [u for d in defs for _, u in d.links] + \
            [d.content for d in defs]
    dash = (Dashboard(layout.title).uid(layout.uid).description(layout.description).tags([TAG, "training", "mindspore"])
            .refresh("10s").time("now-3h", "now").tooltip(DashboardCursorSync.CROSSHAIR)
            .link(DashboardLink("Training dashboards").type(DashboardLinkType.DASHBOARDS).tags([TAG])
                  .icon("external link").tooltip("The training monitor's dashboards")
                  .as_dropdown(False).include_vars(True).keep_time(True))
            .with_variable(DatasourceVariable("datasource").label("Prometheus").type("prometheus"))
            .with_variable(QueryVariable("run").label("Run").datasource(DS).query("label_values(train_step, run)")
                           .multi(True).include_all(True).all_value(".*")
                           .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)))
    if any("$rank" in t for t in texts):
        dash = dash.with_variable(
            QueryVariable("rank").label("Rank").datasource(DS).query('label_values(train_step{run=~"$run"}, rank)')
            .multi(True).include_all(True).all_value(".*").sort(VariableSort.NUMERICAL_ASC)
            .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED))
    if any("${runbook_base}" in t for t in texts):
        base = runbook_base if runbook_base is not None else default_runbook_base()
        dash = dash.with_variable(
            TextBoxVariable("runbook_base").label("Runbooks at").default_value(base)
            .description("Base URL of the runbooks/ folder (one page per rule: <base>/<rule>.md)"))
    for key in layout.annotations:
        a = ANNOTATIONS[key]
        dash = dash.annotation(AnnotationQuery().name(a.name).datasource(DS).expr(a.expr).icon_color(a.color)
                               .enable(True).hide(False))
    pid = 0
    for row, keys in layout.rows:
        pid += 1
        dash = dash.with_row(Row(row).id(pid))
        for key in keys:
            pid += 1
            dash = dash.with_panel(_panel(PANELS[key], pid))
    return json.loads(JSONEncoder(sort_keys=True, indent=2).encode(dash.build()))


def overview() -> dict:
    """The run overview dashboard as Grafana JSON (a dict)."""
    return build(LAYOUTS["training-run-overview.json"])


# file name -> function building that dashboard with the defaults
DASHBOARDS = {name: functools.partial(build, layout) for name, layout in LAYOUTS.items()}


def expressions(dashboard: dict) -> list[str]:
    """Every PromQL expression of a dashboard: its panels' targets and its annotation queries."""
    exprs = [t["expr"] for p in dashboard.get("panels", []) for t in p.get("targets", [])]
    return exprs + [a["expr"] for a in dashboard.get("annotations", {}).get("list", []) if "expr" in a]


def generate(folder: str | Path) -> list[Path]:
    """Write every dashboard to ``folder``; return the paths."""
    out = []
    for name, make in DASHBOARDS.items():
        path = Path(folder) / name
        path.write_text(json.dumps(make(), indent=2, sort_keys=True) + "\n")
        out.append(path)
    return out
