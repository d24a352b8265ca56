"""Grafana dashboards, built in code with grafana-foundation-sdk and committed as JSON in ``dashboards/``.

Targets the Grafana dashboard schema of Grafana 11.6 (the SDK release pinned in ``pyproject.toml``).
``monitor dashboards generate`` rewrites the JSON files; a test checks they match and that every PromQL
expression passes ``promtool``.
"""
from __future__ import annotations

import json
from pathlib import Path

from grafana_foundation_sdk.builders.dashboard import Dashboard, DatasourceVariable, QueryVariable, Row
from grafana_foundation_sdk.builders.prometheus import Dataquery
from grafana_foundation_sdk.builders.timeseries import Panel
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef

DS = DataSourceRef(type_val="prometheus", uid="${datasource}")
SEL = 'run=~"$run"'

# (title, unit, [(PromQL, legend)]) per panel, by row
OVERVIEW = {
    "Optimisation": [
        ("Loss", "none", [(f"train_loss{{{SEL}}}", "rank {{rank}}")]),
        ("Grad norm (pre-clip)", "none", [(f"train_grad_norm{{{SEL}}}", "rank {{rank}}")]),
        ("Learning rate", "none", [(f"train_learning_rate{{{SEL}}}", "rank {{rank}}")]),
        ("Loss scale", "none", [(f"train_loss_scale{{{SEL}}}", "rank {{rank}}")]),
        ("Overflowed steps per minute", "none",
         [(f"60 * rate(train_overflow_steps_total{{{SEL}}}[5m])", "rank {{rank}}")]),
    ],
    "Throughput": [
        ("Tokens per second (TPS)", "none", [(f"max by (run) (rate(train_tokens_total{{{SEL}}}[1m]))", "{{run}}"),
                                            (f"train_tokens_per_second{{{SEL}}}", "last step, rank {{rank}}")]),
        ("TPS per device", "none", [(f"train_tokens_per_second_per_device{{{SEL}}}", "rank {{rank}}")]),
        ("MFU", "percentunit", [(f"train_mfu_ratio{{{SEL}}}", "rank {{rank}}")]),
        ("Step time p50 / p95", "s", [
            (f"histogram_quantile(0.5, sum by (le, rank) (rate(train_step_duration_seconds_bucket{{{SEL}}}[5m])))",
             "p50 rank {{rank}}"),
            (f"histogram_quantile(0.95, sum by (le, rank) (rate(train_step_duration_seconds_bucket{{{SEL}}}[5m])))",
             "p95 rank {{rank}}")]),
        ("Data wait share of the step", "percentunit", [
            (f"rate(train_data_wait_duration_seconds_sum{{{SEL}}}[5m]) / "
             f"rate(train_step_duration_seconds_sum{{{SEL}}}[5m])", "5m, rank {{rank}}"),
            (f"train_data_wait_ratio{{{SEL}}}", "last step, rank {{rank}}")]),
        ("Data wait of the last step", "s", [(f"train_data_wait_seconds{{{SEL}}}", "rank {{rank}}")]),
        ("Seconds since the last step", "s", [(f"time() - train_last_step_timestamp_seconds{{{SEL}}}",
                                               "rank {{rank}}")]),
    ],
    "Stability": [
        ("Anomalies (per 10 min)", "none", [(f"sum by (rule) (increase(train_anomalies_total{{{SEL}}}[10m]))",
                                             "{{rule}}")]),
        ("Rollbacks", "none", [(f"train_rollbacks_total{{{SEL}}}", "rank {{rank}}")]),
        ("Last healthy checkpoint step", "none", [(f"train_last_healthy_checkpoint_step{{{SEL}}}", "rank {{rank}}"),
                                                  (f"train_step{{{SEL}}}", "current step, rank {{rank}}")]),
    ],
}


def overview() -> dict:
    """The run overview dashboard as Grafana JSON (a dict)."""
    dash = (Dashboard("Training run overview").uid("training-run-overview").tags(["training", "mindspore"])
            .refresh("10s").time("now-3h", "now")
            .with_variable(DatasourceVariable("datasource").label("Prometheus").type("prometheus"))
            .with_variable(QueryVariable("run").label("Run").datasource(DS).query("label_values(train_step, run)")
                           .multi(True).include_all(True)))
    for row, panels in OVERVIEW.items():
        dash = dash.with_row(Row(row))
        for title, unit, targets in panels:
            panel = Panel().title(title).unit(unit).datasource(DS).height(8).span(8)
            for i, (expr, legend) in enumerate(targets):
                panel = panel.with_target(Dataquery().expr(expr).legend_format(legend).ref_id("ABCDEFGH"[i]))
            dash = dash.with_panel(panel)
    return json.loads(JSONEncoder(sort_keys=True, indent=2).encode(dash.build()))


DASHBOARDS = {"training-run-overview.json": overview}


def expressions(dashboard: dict) -> list[str]:
    """Every PromQL expression of a dashboard's panels."""
    return [t["expr"] for p in dashboard.get("panels", []) for t in p.get("targets", [])]


def generate(folder: str | Path) -> list[Path]:
    """Write every dashboard to ``folder``; return the paths."""
    out = []
    for name, build in DASHBOARDS.items():
        path = Path(folder) / name
        path.write_text(json.dumps(build(), indent=2, sort_keys=True) + "\n")
        out.append(path)
    return out
