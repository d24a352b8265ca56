"""``monitor replay --openmetrics OUT``: replayed runs as OpenMetrics text with timestamps, for Prometheus backfill
(``promtool tsdb create-blocks-from openmetrics OUT DATA_DIR``), so the Grafana dashboards show a logged run.

What is written: the live exporter's series (:class:`training_monitor.metrics.Metrics` is fed the replayed records, so
the names, types, help, buckets and labels are the live ones), labelled ``run`` and ``rank``:

* gauges (``train_loss``, ``train_step``, ...) at every record, so a one-step spike is in Prometheus as in the
  log; a field the log lacks is not written, and one it gave keeps its last value, as live;
* counters (``train_tokens_total``, ``train_anomalies_total{rule}`` with ``_created``, ...) and the histograms
  (``train_step_duration_seconds``, same buckets) once per ``scrape_interval`` seconds of the run, as a scrape
  would see them (0: at every record), and at each rank's last record.

``train_rollbacks_total`` stays 0 (the log's own rollbacks are not known); ``train_last_healthy_checkpoint_step``
is the would-be policy's (:mod:`training_monitor.replay.policy`) when checkpoints are known; TPS per device equals TPS
(a log does not say its world size).

Times: a record's own time (the log line's prefix, :mod:`training_monitor.replay.clock`, or the CSV's ``timestamp``);
a record without one comes its step time (x ``steps``; when it has none, the last step time known, as MindSpore's
``TimeMonitor`` prints one at each epoch's end; 1 s per step before any) after the one before. A rank
whose first record has no time is timed from ``start_time``, the start of the log's first step (default: now
minus the longest such run). Each
rank's times strictly increase (a time not after the one before becomes 1 ms after it), as Prometheus needs.

Format (OpenMetrics 1.0 text): per family ``# TYPE`` and ``# HELP``, then its samples ``name{labels} value
timestamp`` (Unix seconds, ms precision), each labelset's points together in time order; ``# EOF`` last.

Memory is bounded whatever the run's length: OpenMetrics wants each family's samples together, each labelset's
in one block, while a replay makes them step by step; so lines are buffered (:data:`BUFFERED` lines in all) and
appended to one spool file per labelset in a temporary folder beside ``OUT``. :meth:`OpenMetricsWriter.close`
concatenates them family by family into ``OUT`` (adding the start time to relative times) and removes the folder.
"""
from __future__ import annotations

import math
import os
import shutil
import tempfile
import time

from .metrics import GAUGES, Metrics
from .sinks import Sink

BUFFERED = 200_000  # lines held in memory before the spool files are appended to
_TIME_VALUED = "train_last_step_timestamp_seconds"


def _num(v) -> str:
    if v.__class__ is float and v - v == 0:  # finite
        return repr(v)
    if isinstance(v, int):
        return str(v)
    if v != v:
        return "NaN"
    if v in (math.inf, -math.inf):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


def _labels(labels: dict) -> str:
    esc = (str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"') for v in labels.values())
    return "{" + ",".join(f'{k}="{v}"' for k, v in zip(labels, esc)) + "}"


class OpenMetricsWriter:
    """One OpenMetrics file from any number of replayed logs and ranks; see the module docstring.

    Args:
        path: the file to write (replaced at :meth:`close`; the spool folder is made beside it).
        scrape_interval: seconds of run time between two points of the counters and histograms (0: every record).
        start_time: Unix time at which runs without times of their own started (None: now minus the longest).
        rules: rule ids, each with a ``train_anomalies_total`` series from the start, as live.
        buffered: lines held in memory before the spool files are appended to.

    Raises:
        OSError: the folder of ``path`` is not writable (at construction), or writing fails.
    """

    def __init__(self, path: str, scrape_interval: float = 15.0, start_time: float | None = None, rules=(),
                 buffered: int = BUFFERED):
        self.path, self.scrape_interval, self.start_time, self.rules = path, scrape_interval, start_time, list(rules)
        self.max_buffered = buffered
        self.spool = tempfile.mkdtemp(prefix=".openmetrics-", dir=os.path.dirname(os.path.abspath(path)))
        self.families: dict[str, list] = {}  # name -> [type, help, [labelset ids]]
        self.ids: dict[tuple, int] = {}  # (family, labels) -> labelset id
        self.relative: set[int] = set()  # labelsets timed from start_time
        self.buffers: dict[int, list] = {}
        self.buffered = 0
        self.feeds: dict[tuple, Feed] = {}
        self.samples = 0

    def feed(self, run: str, rank: int) -> Feed:
        """The sink of the series of ``run`` and ``rank`` (the same object for the same pair, so a second log
        continues them)."""
        feed = self.feeds.get((run, rank))
        if feed is None:
            feed = self.feeds[(run, rank)] = Feed(self, run, rank)
        return feed

    def slot(self, family: str, labels: str, relative: bool, kind: str = "gauge", doc: str = "") -> list:
        """The line buffer of the labelset ``labels`` of ``family`` (made on first use); see :meth:`added`."""
        key = (family, labels)
        i = self.ids.get(key)
        if i is None:
            i = self.ids[key] = len(self.ids)
            self.families.setdefault(family, [kind, doc or GAUGES.get(family, ""), []])[2].append(i)
            self.buffers[i] = []
            if relative:
                self.relative.add(i)
        return self.buffers[i]

    def added(self, n: int) -> None:
        """``n`` lines were appended to the slots: spool them when too many are held."""
        self.buffered += n
        self.samples += n
        if self.buffered >= self.max_buffered:
            self._flush()

    def _flush(self) -> None:
        for i, lines in self.buffers.items():
            if lines:
                with open(os.path.join(self.spool, str(i)), "a") as f:
                    f.writelines(lines)
                lines.clear()
        self.buffered = 0

    def discard(self) -> None:
        """Remove the spool folder without writing (a replay that failed); nothing happens after close()."""
        shutil.rmtree(self.spool, ignore_errors=True)

    def close(self) -> dict:
        """Finish every feed, write the file, remove the spool; return ``{"path", "samples", "series", "bytes",
        "start_time"}`` (``start_time``: the one used for runs without times, None when there were none)."""
        for feed in self.feeds.values():
            feed.finish()
        self._flush()
        durations = [f.t for f in self.feeds.values() if f.relative and f.t is not None]
        base = 0.0  # used only when a series is relative, which gives a duration
        if durations:
            base = self.start_time if self.start_time is not None else round(time.time() - max(durations), 3)
        tmp = f"{self.path}.tmp"
        try:
            with open(tmp, "w") as out:
                for name, (kind, doc, ids) in self.families.items():
                    doc = doc.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
                    out.write(f"# TYPE {name} {kind}\n# HELP {name} {doc}\n")
                    for i in ids:
                        path = os.path.join(self.spool, str(i))
                        if not os.path.exists(path):
                            continue
                        with open(path) as f:
                            if i in self.relative:
                                out.writelines(_shift(line, base) for line in f)
                            else:
                                shutil.copyfileobj(f, out)
                out.write("# EOF\n")
            os.replace(tmp, self.path)
        finally:
            shutil.rmtree(self.spool, ignore_errors=True)
            if os.path.exists(tmp):
                os.remove(tmp)
        return {"path": self.path, "samples": self.samples, "series": len(self.ids),
                "bytes": os.path.getsize(self.path), "start_time": base}


def _shift(line: str, base: float) -> str:
    """A relative line with ``base`` added to its time (and to its value, for a value that is a time)."""
    head, value, t = line.rsplit(" ", 2)
    if head.endswith("_created", 0, head.index("{")) or head.startswith(_TIME_VALUED + "{"):
        value = _num(float(value) + base)
    return f"{head} {value} {float(t) + base:.3f}\n"


class Feed(Sink):
    """The series of one (run, rank), a sink: :meth:`on_event` counts each event (rule events and trainer
    reports) in ``train_anomalies_total`` from the next point on, :meth:`on_record` writes a point per judged
    record. ``policy``: an object whose ``last_healthy`` is the step of the newest healthy checkpoint (None:
    not known), read at each record (the replay's would-be policy, :mod:`training_monitor.replay.policy`)."""

    def __init__(self, writer: OpenMetricsWriter, run: str, rank: int):
        self.w, self.metrics = writer, Metrics(run, rank, rules=writer.rules)
        self.labels = _labels(self.metrics.labels)
        self.relative: bool | None = None  # timed from the writer's start_time (decided by the first record)
        self.t: float | None = None  # time of the last record (seconds; from start_time when relative)
        self.step_time = 1.0  # the last step time known (s), for a record without one
        self.next_scrape = -math.inf
        self.scraped: float | None = None
        self.slots: dict = {}  # sample name and label values -> (line buffer, line start)
        self.policy = None

    def _time(self, rec) -> float:
        if self.relative is None:
            self.relative = rec.timestamp is None
        if rec.timestamp is not None and not self.relative:
            t = rec.timestamp
        elif self.t is None:  # the log's first step; what came before it is not in the log
            t = rec.step_time_s or self.step_time
        else:
            t = self.t + (rec.step_time_s or self.step_time) * rec.steps
        if rec.step_time_s:
            self.step_time = rec.step_time_s
        t = round(t, 3)
        if self.t is not None and t <= self.t:
            t = round(self.t + 0.001, 3)
        return t

    def on_record(self, rec, events=()) -> None:
        """Write the gauges after ``rec`` (and the counters and histograms when a scrape is due); its
        ``events`` were counted by :meth:`on_event`."""
        first = self.t is None
        t = self.t = self._time(rec)
        m = self.metrics
        if first:
            m.created = t - (rec.step_time_s or 1.0)
        m.on_record(rec)
        healthy = None if self.policy is None else self.policy.last_healthy
        if healthy is not None:
            m.set_healthy(healthy)
        m.values[_TIME_VALUED] = t
        slots, ts = self.slots, f" {t:.3f}\n"
        for name, value in m.values.items():
            slot = slots.get(name)
            if slot is None:
                slot = slots[name] = (self.w.slot(name, self.labels, bool(self.relative)), f"{name}{self.labels} ")
            slot[0].append(slot[1] + _num(value) + ts)
        self.w.added(len(m.values))
        if t >= self.next_scrape:
            self._scrape(t)

    def on_event(self, event) -> None:
        self.metrics.on_event(event)

    def finish(self) -> None:
        if self.t is not None and self.scraped != self.t:
            self._scrape(self.t)

    def _scrape(self, t: float) -> None:
        self.scraped, self.next_scrape = t, t + self.w.scrape_interval
        ts, slots, n = f" {t:.3f}\n", self.slots, 0
        for fam in self.metrics.collect():
            if fam.type == "gauge":
                continue
            for s in fam.samples:
                key = (s.name, *s.labels.values())
                slot = slots.get(key)
                if slot is None:
                    labels = _labels({k: v for k, v in s.labels.items() if k != "le"})
                    relative = bool(self.relative)
                    slot = slots[key] = (self.w.slot(fam.name, labels, relative, fam.type, fam.documentation),
                                         f"{s.name}{_labels(s.labels)} ")
                slot[0].append(slot[1] + _num(s.value) + ts)
                n += 1
        self.w.added(n)
