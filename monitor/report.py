"""``monitor replay --html OUT.html``: one self-contained HTML page of a replay, readable offline.

For each log: its counts, the step-time / TPS / MFU quantiles, plots of loss, grad norm, loss scale, TPS, MFU
and step time over the steps (one trace per rank; plotly, SVG), the anomalies marked where they were detected
(an ``x`` with the rule's name, the steps from onset to detection shaded) and the would-be rollbacks (a dashed
line at the step, the steps it would redo shaded) and stops (a red line), then tables of all of them.
plotly.js is inlined once (about 4.8 MB), so the file needs no network.

The plotted points are the replay's bounded, min/max-preserving downsample
(:class:`training_monitor.replay.tracks.Envelope`: at most 4 points per bucket, 1000 buckets per series), so the
page stays small for any log length and a one-step spike is still drawn; at most :data:`MAX_MARKS` anomalies are
drawn per log and :data:`MAX_ROWS` listed.

Needs plotly (``pip install 'training-monitor[replay]'``); :func:`write_html` raises ImportError without it.
"""
from __future__ import annotations

import html
import math
import os
import time
from collections import defaultdict

from .detectors import DETECTORS, EVALUATORS
from .replay.summary import count, excursions, rollback_lines, stats_lines
from .replay.tracks import PLOTTED

ROWS = {"loss": ("Loss", 1.0), "grad_norm": ("Grad norm", 1.0), "loss_scale": ("Loss scale", 1.0),
        "tokens_per_second": ("TPS (tokens/s)", 1.0), "mfu": ("MFU (%)", 100.0), "step_time_s": ("Step time (s)", 1.0)}
# stall: the watchdog's
RULE_ROW = {rule: d.plots for rule, d in (DETECTORS | EVALUATORS).items()} | {"stall": "step_time_s"}
VALUE_IS_PLOTTED = {rule for rule, d in DETECTORS.items() if d.value_is_plotted}  # the mark goes at the value
MAX_MARKS = 300
MAX_ROWS = 2000
_CSS = """body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:2px 8px;text-align:left;font-size:13px}th{background:#f3f3f3}
h2{margin-top:2em;border-bottom:1px solid #ddd}.note{color:#666;font-size:13px}
pre{font-size:13px;white-space:pre-wrap;overflow-wrap:anywhere}"""


def write_html(results, path: str, settings: dict | None = None) -> int:
    """Write the report of ``results`` (:class:`~training_monitor.replay.runner.ReplayResult`, plot series kept with
    ``ReplayOptions.plot_ranks``) to ``path``; return its size in bytes. ``settings``: shown as given (the
    rollback policy's options). Raises ImportError without plotly, OSError (naming ``path``) when it cannot
    be written."""
    import plotly.offline

    tmp = f"{path}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as out:
            out.write(f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>monitor replay report</title>"
                      f"<style>{_CSS}</style><script type='text/javascript'>{plotly.offline.get_plotlyjs()}</script>"
                      f"</head><body><h1>monitor replay</h1><p class='note'>{time.strftime('%Y-%m-%d %H:%M:%S %Z')}"
                      f"{''.join(f'; {html.escape(k)} {html.escape(str(v))}' for k, v in (settings or {}).items())}"
                      f"</p>")
            out.write(_table(["log", "format", "rank(s)", "records", "anomalies", "would-be rollbacks", "would stop"],
                             [[r.path, r.format or r.error, ", ".join(map(str, sorted(r.ranks))), r.records,
                               len(r.events) + r.events_dropped, len(r.would_be_rollbacks()),
                               "; ".join(f"step {s['at_step']}" for s in r.would_stop())] for r in results]))
            for r in results:
                if not r.error:
                    out.write(_section(r))
            out.write("</body></html>\n")
        os.replace(tmp, path)
    except OSError as exc:  # name the file asked for, not the temporary one beside it
        raise OSError(exc.errno, exc.strerror, path) from None
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return os.path.getsize(path)


def _table(head, rows) -> str:
    cells = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return "<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + f"</tr>{cells}</table>"


def _section(r) -> str:
    parts = [f"<h2>{html.escape(r.path)}</h2>", "<pre>" + html.escape("\n".join(stats_lines(r.stats.to_dict())))
             + "</pre>"]
    if r.tracks and not any(t.series for t in r.tracks.values()):
        parts.append("<p class='note'>no plots: this log has no step series (an event log holds the events "
                     "only; replay the run's records_rank&lt;r&gt;.csv or trainer log for the curves)</p>")
    elif r.tracks:
        parts.append(_figure(r).to_html(full_html=False, include_plotlyjs=False, config={"displaylogo": False}))
        unplotted = sorted(r.ranks - set(r.tracks))
        if unplotted:
            parts.append(f"<p class='note'>ranks {html.escape(', '.join(map(str, unplotted)))} not plotted "
                         f"(plots are kept for a limited number of ranks)</p>")
    lines = rollback_lines(r)
    if lines:
        parts.append("<h3>Rollback policy</h3><pre>" + html.escape("\n".join(lines)) + "</pre>")
    if r.events:
        more = f" (and {r.events_dropped} more not kept)" if r.events_dropped else ""
        runs = excursions(r.events)
        shown = runs[:MAX_ROWS]
        parts.append(f"<h3>Anomalies: {len(r.events)}{more}, {count(len(runs), 'excursion')}</h3>" + _table(
            ["rank", "rule", "onset step", "detected at step", "value", "severity", "message"],
            [[e.rank, e.rule, e.onset_step, e.step, e.value, e.severity, e.message + (
                f" (and at {count(len(again), 'more step')} of the same excursion, the last at step "
                f"{again[-1].step})" if again else "")] for e, again in shown]))
        if len(runs) > len(shown):
            parts.append(f"<p class='note'>{len(runs) - len(shown)} more excursions in monitor replay --json</p>")
    return "".join(parts)


def _figure(r):
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    rows = [n for n in PLOTTED if any(n in t.series for t in r.tracks.values())]
    fig = make_subplots(rows=len(rows), cols=1, shared_xaxes=True, vertical_spacing=0.04,
                        subplot_titles=[ROWS[n][0] for n in rows])
    points = {}
    for rank, track in sorted(r.tracks.items()):
        for i, name in enumerate(rows, 1):
            env = track.series.get(name)
            if env is None:
                continue
            xs, ys = env.points()
            ys = [y * ROWS[name][1] for y in ys]
            points[(rank, name)] = (xs, ys)
            xs, ys = _gapped(xs, ys)
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=f"rank {rank}", legendgroup=f"rank {rank}",
                                     showlegend=i == 1, line={"width": 1}), row=i, col=1)
    if "loss_scale" in rows:
        fig.update_yaxes(type="log", row=rows.index("loss_scale") + 1, col=1)
    marks, last = defaultdict(list), {}  # (one mark per excursion, shaded from its onset to its last step)
    for e, again in [(e, again) for e, again in excursions(r.events) if e.rank in r.tracks][:MAX_MARKS]:
        row = RULE_ROW.get(e.rule, rows[0])
        marks[row if row in rows else rows[0]].append(e)
        last[id(e)] = again[-1].step if again else e.step
    span = max((x for xs, _ in points.values() for x in xs[-1:]), default=1) - \
        min((x for xs, _ in points.values() for x in xs[:1]), default=0)
    for row, events in marks.items():
        i = rows.index(row) + 1
        fig.add_trace(go.Scatter(
            x=[e.step for e in events], y=[_y(e, row, points) for e in events], mode="markers+text",
            text=_labels(events, span), textposition="top center", name="anomalies", showlegend=False,
            marker={"symbol": "x", "size": 11, "color": "crimson"}, textfont={"color": "crimson"},
            hovertext=[f"{e.rule} (rank {e.rank}): onset step {e.onset_step}, detected at step {e.step}<br>"
                       f"{html.escape(e.message)}" for e in events], hoverinfo="text"), row=i, col=1)
        for e in events:
            if e.onset_step < last[id(e)]:
                fig.add_vrect(x0=e.onset_step, x1=last[id(e)], fillcolor="crimson", opacity=0.12, line_width=0,
                              row=i, col=1)
    for k, rb in enumerate(r.would_be_rollbacks()[:MAX_MARKS]):
        if rb["to_step"] is not None:
            fig.add_vrect(x0=rb["to_step"], x1=rb["at_step"], fillcolor="orange", opacity=0.10, line_width=0,
                          row="all", col=1)
        fig.add_vline(x=rb["at_step"], line={"color": "darkorange", "dash": "dash", "width": 1.5}, row="all", col=1)
        to = f"step {rb['to_step']}" if rb["to_step"] is not None else f"before step {rb['before_step']}"
        fig.add_annotation(x=rb["at_step"], y=0.98 - 0.09 * (k % 3), xref="x", yref="y domain", showarrow=False,
                           yanchor="top",  # (successive labels one under the other: close rollbacks' overlap)
                           xanchor="right", text=f"would roll back to {to}, LR x{rb['lr_multiplier']:g}",
                           font={"color": "darkorange", "size": 11}, bgcolor="rgba(255,255,255,0.7)")
    for stop in r.would_stop():
        fig.add_vline(x=stop["at_step"], line={"color": "red", "width": 2}, row="all", col=1)
        fig.add_annotation(x=stop["at_step"], y=0.80, xref="x", yref="y domain", showarrow=False, yanchor="top",
                           xanchor="right", text=f"would stop: {html.escape(stop['reason'])}",
                           font={"color": "red", "size": 11}, bgcolor="rgba(255,255,255,0.7)")
    fig.update_xaxes(title_text="step", row=len(rows), col=1)
    fig.update_layout(height=230 * len(rows) + 90, margin={"l": 60, "r": 20, "t": 50, "b": 40},
                      template="plotly_white", legend={"orientation": "h", "y": 1.02, "yanchor": "bottom"})
    return fig


def _gapped(xs: list, ys: list) -> tuple[list, list]:
    """The points with a gap (None) where the step goes back: a run that rolled back repeats its steps, and the
    line must not be drawn back to them."""
    gx: list = []
    gy: list = []
    for j, (x, y) in enumerate(zip(xs, ys)):
        if j and x <= xs[j - 1]:
            gx.append(None)
            gy.append(None)
        gx.append(x)
        gy.append(y)
    return gx, gy


def _labels(events, span: float) -> list[str]:
    """Each mark's rule name, left out where the same rule was named less than 8 % of the x range before
    (a cluster of firings would print over itself; the hover text names every one)."""
    last: dict[str, float] = {}
    out = []
    for e in events:
        near = e.rule in last and abs(e.step - last[e.rule]) < 0.08 * span
        out.append("" if near else e.rule)
        if not near:
            last[e.rule] = e.step
    return out


def _y(e, row: str, points: dict) -> float:
    """Where an anomaly's mark goes: its value when that is the plotted quantity, else the series at its step."""
    scale = ROWS[row][1]
    if e.rule in VALUE_IS_PLOTTED and e.value is not None and math.isfinite(e.value):
        return e.value * scale
    xs, ys = points.get((e.rank, row), ([], []))
    if not xs:
        return 0.0
    best = min(range(len(xs)), key=lambda j: abs(xs[j] - e.step))
    return ys[best]
