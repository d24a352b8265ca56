"""Prometheus exposition of the per-step metrics (a prometheus-client collector, one registry per monitor).

The training thread only stores numbers (a few attribute writes per step); the metric families are built
when Prometheus scrapes, in the HTTP server's thread. That keeps the per-step cost at a few microseconds.
"""
from __future__ import annotations

import errno
import math
import time
from bisect import bisect_left

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from .events import Event
from .http import Server
from .log import logger
from .record import StepRecord
from .sinks import Sink

STEP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
WAIT_BUCKETS = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30)

# name -> help text of the gauges, in exposition order
GAUGES = {
    "train_step": "Last finished global step.",
    "train_loss": "Training loss of the last step.",
    "train_grad_norm": "Global L2 norm of the gradients of the last step, before clipping.",
    "train_loss_scale": "Loss scale in use.",
    "train_learning_rate": "Learning rate of the last step.",
    "train_tokens_per_second": "Tokens per second of the last step, all data-parallel ranks.",
    "train_tokens_per_second_per_device": "Tokens per second of the last step per device.",
    "train_mfu_ratio": "Model FLOPs utilisation of the last step, 0..1 (6N + 12LHS FLOPs per token).",
    "train_data_wait_seconds": "Time the last step waited for its batch.",
    "train_data_wait_ratio": "Share of the last step's wall time spent waiting for data.",
    "train_last_step_timestamp_seconds": "Unix time at which the last step finished.",
    "train_last_healthy_checkpoint_step": "Step of the newest checkpoint marked healthy.",
    "train_stalled": "1 from a stall the hang watchdog reported until the next step finishes, else 0.",
}


class _Histogram:
    """Bucket counts, kept as plain numbers on the hot path."""

    def __init__(self, bounds):
        self.bounds, self.counts, self.sum = bounds, [0] * (len(bounds) + 1), 0.0

    def observe(self, v: float) -> None:
        self.counts[bisect_left(self.bounds, v)] += 1
        self.sum += v

    def buckets(self):
        total, out = 0, []
        for bound, n in zip(list(self.bounds) + [math.inf], self.counts):
            total += n
            out.append(("+Inf" if bound == math.inf else repr(float(bound)), total))
        return out


def alert_counters(name: str, what: str, stats: dict, names: list | None = None,
                   values: list | None = None) -> CounterMetricFamily:
    """The counter family ``name`` of :meth:`training_monitor.alerts.AlertSender.stats` (``stats``: sink ->
    counters), one series per sink and outcome (sent, failed, dropped), after the labels ``names`` = ``values``."""
    names, values = names or [], values or []
    c = CounterMetricFamily(name, f"{what}, by outcome (sent, failed, dropped because the queue was full).",
                            labels=names + ["sink", "outcome"])
    for sink, st in sorted(stats.items()):
        for outcome in ("sent", "failed", "dropped"):
            c.add_metric(values + [sink, outcome], st[outcome])
    return c


class Metrics(Collector, Sink):
    """A sink (records and events) holding the ``train_*`` series of one rank, labelled ``run`` and ``rank`` (no
    step or free text in labels).

    Units are Prometheus base units: seconds, tokens, ratios in 0..1. ``train_tokens_total`` is a counter,
    so ``rate(train_tokens_total[1m])`` is TPS over any window (exported from the first record counting its tokens:
    a run whose tokens are not known has no series, not a TPS of 0); ``train_tokens_per_second`` is the TPS of
    the last step (tokens of the step / its wall time). ``train_anomalies_total`` has a series per rule,
    starting at 0; ``train_anomaly_last_step`` and ``train_anomaly_last_value`` give the step and the offending
    value of each fired rule's last event (the alert rules' annotations read them).

    Args:
        run, rank: label values. world_size: devices in the job (TPS per device). rules: rule ids.
    """

    def __init__(self, run: str = "default", rank: int = 0, world_size: int = 1, rules=()):
        self.labels = {"run": run, "rank": str(rank)}
        self.world_size = world_size
        self.values: dict[str, float] = {"train_stalled": 0}
        self.overflow_steps = self.rollbacks = 0
        self.tokens: int | None = None  # None until a record counts its tokens: no series then, no false 0 TPS
        self.anomalies = {rule: 0 for rule in rules}
        self.last_anomaly: dict[str, tuple[int, float]] = {}  # rule -> (step, value) of its last event
        self.step_hist, self.wait_hist = _Histogram(STEP_BUCKETS), _Histogram(WAIT_BUCKETS)
        self.created = time.time()  # exported as the counters' _created: lets alert rules tell a young process
        self.alert_stats = None  # callable giving AlertSender.stats(), when alerts are configured
        self.registry = CollectorRegistry()
        self.registry.register(self)
        self.server: Server | None = None

    def serve(self, host: str, port: int) -> str | None:
        """Serve ``/metrics`` on ``host:port`` (0: any free port) with the bounds of
        :class:`training_monitor.http.Limits` (2 threads, 64 connections, 30 s idle timeout). A port another
        process holds (a second job on the node) is logged as an error and a free port served instead (a
        file_sd target names it). Return the URL, or None when no port could be served (an address not
        allowed): logged as an error, and training goes on without the endpoint."""
        try:
            server = self.server = Server(make_wsgi_app(self.registry), host, port, name="monitor-metrics").start()
        except OSError as exc:
            taken = exc.errno == errno.EADDRINUSE and port != 0
            logger.error("metrics endpoint {}:{} not started ({}); {}", host, port, exc.strerror or exc,
                         "serving /metrics on a free port instead" if taken else "training goes on without /metrics")
            return self.serve(host, 0) if taken else None
        return f"http://{host}:{server.port}/metrics"

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None

    def on_record(self, rec: StepRecord, events=()) -> None:
        """Record one step (its ``events`` were counted by :meth:`on_event`). Fields that are None keep
        their last value."""
        v = self.values
        v["train_step"] = rec.step
        v["train_stalled"] = 0
        if rec.loss is not None:
            v["train_loss"] = rec.loss
        if rec.grad_norm is not None:
            v["train_grad_norm"] = rec.grad_norm
        if rec.loss_scale is not None:
            v["train_loss_scale"] = rec.loss_scale
        if rec.lr is not None:
            v["train_learning_rate"] = rec.lr
        if rec.overflows is not None:  # the trainer counted the overflowed steps since the previous record
            self.overflow_steps += rec.overflows
        elif rec.overflow:
            self.overflow_steps += rec.steps
        if rec.tokens:
            self.tokens = (self.tokens or 0) + rec.tokens * rec.steps
        if rec.step_time_s is not None:
            self.step_hist.observe(rec.step_time_s)
            tps = rec.tokens_per_second
            if tps is not None:
                v["train_tokens_per_second"] = tps
                v["train_tokens_per_second_per_device"] = tps / self.world_size
        if rec.mfu is not None:
            v["train_mfu_ratio"] = rec.mfu
        if rec.data_wait_s is not None:
            v["train_data_wait_seconds"] = rec.data_wait_s
            self.wait_hist.observe(rec.data_wait_s)
            if (period := rec.period_s) is not None:
                v["train_data_wait_ratio"] = rec.data_wait_s / period
        if rec.timestamp is not None:
            v["train_last_step_timestamp_seconds"] = rec.timestamp

    def on_event(self, event: Event) -> None:
        # the step and value first: a scrape (another thread) that sees the new count sees them too (collect
        # reads the counts first)
        self.last_anomaly[event.rule] = (event.step, math.nan if event.value is None else event.value)
        self.anomalies[event.rule] = self.anomalies.get(event.rule, 0) + 1
        if event.rule == "stall":
            self.values["train_stalled"] = 1

    def on_rollback(self, healthy_step: int | None) -> None:
        self.rollbacks += 1
        self.set_healthy(healthy_step)

    def set_healthy(self, step: int | None) -> None:
        self.values["train_last_healthy_checkpoint_step"] = step if step is not None else math.nan

    def collect(self):
        names, values = list(self.labels), list(self.labels.values())
        current = dict(self.values)
        for name, doc in GAUGES.items():
            if name in current:
                g = GaugeMetricFamily(name, doc, labels=names)
                g.add_metric(values, current[name])
                yield g
        for name, doc, value in (("train_tokens", "Tokens consumed, all data-parallel ranks.", self.tokens),
                                 ("train_overflow_steps", "Steps whose gradients overflowed (update skipped).",
                                  self.overflow_steps),
                                 ("train_rollbacks", "Rollbacks to a healthy checkpoint.", self.rollbacks)):
            if value is None:
                continue
            c = CounterMetricFamily(name, doc, labels=names)
            c.add_metric(values, value)
            yield c
        c = CounterMetricFamily("train_anomalies", "Anomaly events, by rule.", labels=names + ["rule"])
        for rule, n in sorted(self.anomalies.items()):
            c.add_metric(values + [rule], n, created=self.created)
        yield c
        last = sorted(self.last_anomaly.items())
        for i, (name, doc) in enumerate((("train_anomaly_last_step", "Step of the rule's last event."),
                                         ("train_anomaly_last_value", "Offending value of the rule's last event "
                                                                      "(NaN when it has none)."))):
            g = GaugeMetricFamily(name, doc, labels=names + ["rule"])
            for rule, sv in last:
                g.add_metric(values + [rule], sv[i])
            if last:
                yield g
        if self.alert_stats is not None:
            yield alert_counters("train_alerts", "Alerts handed to each sink", self.alert_stats(), names, values)
        for name, doc, hist in (("train_step_duration_seconds", "Wall time of one training step.", self.step_hist),
                                ("train_data_wait_duration_seconds", "Time each step waited for data.",
                                 self.wait_hist)):
            h = HistogramMetricFamily(name, doc, labels=names)
            h.add_metric(values, hist.buckets(), hist.sum)
            yield h
