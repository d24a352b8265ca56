"""Prometheus exposition of the per-step metrics (prometheus-client, one registry per monitor)."""
from __future__ import annotations

import math

from loguru import logger
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from .events import Event
from .record import StepRecord

STEP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
WAIT_BUCKETS = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30)


class Metrics:
    """The ``train_*`` series of one rank, labelled ``run`` and ``rank`` (no step or free text in labels).

    Units are Prometheus base units: seconds, tokens, ratios in 0..1. ``train_tokens_total`` is a
    counter, so ``rate(train_tokens_total[1m])`` is TPS over any window; ``train_tokens_per_second`` is
    the TPS of the last step (tokens of the step / its wall time).
    """

    def __init__(self, run: str = "default", rank: int = 0):
        self.registry = r = CollectorRegistry()
        self.server = None
        lab = {"run": run, "rank": str(rank)}
        names = list(lab)

        def gauge(name, doc):
            return Gauge(name, doc, names, registry=r).labels(**lab)

        self.step = gauge("train_step", "Last finished global step.")
        self.loss = gauge("train_loss", "Training loss of the last step.")
        self.grad_norm = gauge("train_grad_norm", "Global L2 norm of the gradients of the last step, before clipping.")
        self.loss_scale = gauge("train_loss_scale", "Loss scale in use.")
        self.lr = gauge("train_learning_rate", "Learning rate of the last step.")
        self.tps = gauge("train_tokens_per_second", "Tokens per second of the last step, all data-parallel ranks.")
        self.data_wait = gauge("train_data_wait_seconds", "Time the last step waited for its batch.")
        self.last_ts = gauge("train_last_step_timestamp_seconds", "Unix time at which the last step finished.")
        self.healthy = gauge("train_last_healthy_checkpoint_step", "Step of the newest checkpoint marked healthy.")
        self.overflows = Counter("train_overflow_steps", "Steps whose gradients overflowed (update skipped).",
                                 names, registry=r).labels(**lab)
        self.tokens = Counter("train_tokens", "Tokens consumed, all data-parallel ranks.", names,
                              registry=r).labels(**lab)
        self.rollbacks = Counter("train_rollbacks", "Rollbacks to a healthy checkpoint.", names,
                                 registry=r).labels(**lab)
        self.step_time = Histogram("train_step_duration_seconds", "Wall time of one training step.", names,
                                   buckets=STEP_BUCKETS, registry=r).labels(**lab)
        self.data_wait_hist = Histogram("train_data_wait_duration_seconds", "Time each step waited for data.",
                                        names, buckets=WAIT_BUCKETS, registry=r).labels(**lab)
        self._anomalies = Counter("train_anomalies", "Anomaly events, by rule.", names + ["rule"], registry=r)
        self._lab = lab

    def serve(self, host: str, port: int) -> str | None:
        """Serve ``/metrics`` on ``host:port`` (0: any free port). Return the URL, or None when the port is
        taken or not allowed; that is logged as an error and training goes on without the endpoint."""
        try:
            self.server, _ = start_http_server(port, addr=host, registry=self.registry)
        except OSError as exc:
            logger.error("metrics endpoint {}:{} not started ({}); training goes on without /metrics",
                         host, port, exc.strerror or exc)
            return None
        return f"http://{host}:{self.server.server_port}/metrics"

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def observe(self, rec: StepRecord) -> None:
        """Export one record. Fields that are None keep their last value."""
        self.step.set(rec.step)
        for gauge, value in ((self.loss, rec.loss), (self.grad_norm, rec.grad_norm),
                             (self.loss_scale, rec.loss_scale), (self.lr, rec.lr)):
            if value is not None:
                gauge.set(value)
        if rec.overflow:
            self.overflows.inc(rec.steps)
        if rec.tokens:
            self.tokens.inc(rec.tokens * rec.steps)
        if rec.step_time_s is not None:
            self.step_time.observe(rec.step_time_s)
            tps = rec.tokens_per_second
            if tps is not None:
                self.tps.set(tps)
        if rec.data_wait_s is not None:
            self.data_wait.set(rec.data_wait_s)
            self.data_wait_hist.observe(rec.data_wait_s)
        if rec.timestamp is not None:
            self.last_ts.set(rec.timestamp)

    def on_event(self, event: Event) -> None:
        self._anomalies.labels(**self._lab, rule=event.rule).inc()

    def on_rollback(self, healthy_step: int | None) -> None:
        self.rollbacks.inc()
        self.set_healthy(healthy_step)

    def set_healthy(self, step: int | None) -> None:
        self.healthy.set(step if step is not None else math.nan)
