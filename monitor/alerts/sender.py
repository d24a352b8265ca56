"""Delivery that never blocks training: a bounded queue and a sender thread per destination.

``AlertSender.send`` only appends to each sink's queue (microseconds) and returns. Each sink's thread
posts what is queued, waiting for the platform's rate-limit windows; alerts that pile up meanwhile go
out together as one digest message (up to 1000 a post) instead of being dropped. Timeouts, connection
errors, HTTP 429 and 5xx (and the vendors' "too many requests" codes) are retried with exponential backoff
(1 s doubling to 60 s, or the server's ``Retry-After``); other answers are final failures. A sink that goes
down is logged once when it goes down and once when it comes back, never per alert. Nothing logged ever
contains a URL or a secret.

The queue holds each alert once (an alert already queued, such as a webhook Alertmanager sends again, is
not queued twice). When it is full, a new alert takes the place of the newest queued alert of the rule
(alert name) that holds the most places, when its own rule holds at least two fewer: a flood of one name
cannot keep other alerts out. What finds no place is dropped and counted (``put`` returns it). A failure of
the sender thread on one batch (a bug, a bad value) counts the batch as failed, is logged once per kind,
and the thread goes on.
"""
from __future__ import annotations

import json
import threading
import time
from collections import deque

import requests

from ..events import Event
from ..log import logger
from ..sinks import Sink
from .config import AlertsConfig, SinkSpec
from .message import Alert
from .platforms import PLATFORMS

MAX_BACKOFF_S = 60.0
MAX_BATCH = 1000  # alerts of one post (a chat digest lists 20 of them; a webhook's JSON holds them all)
JSON = {"Content-Type": "application/json; charset=utf-8"}


class Destination:
    """One destination's (one ``alerts.sinks`` entry's) queue, counters and sender thread.

    Attributes:
        sent, failed, dropped: alerts delivered, refused for good (or still unsent at close), and not
            queued because the queue was full. retries: failed attempts that were retried. sending: alerts
            taken off the queue and being posted (retried while the destination is down).
        down_since: time of the first failed attempt of the current outage, or None.
    """

    def __init__(self, spec: SinkSpec, capacity: int):
        self.spec, self.platform, self.capacity = spec, PLATFORMS[spec.type], capacity
        self.queue: deque[Alert] = deque()
        self._queued: dict[tuple, int] = {}  # Alert.key() of the queued alerts -> how many
        self._per_rule: dict[str, int] = {}  # queued alerts by rule
        self.sent = self.failed = self.dropped = self.retries = self.sending = 0
        self.down_since: float | None = None
        self.busy = False  # a batch taken off the queue is being posted (or waits to be retried)
        self.posting_since: float | None = None  # monotonic time the HTTP request under way began (None: none)
        self._cond = threading.Condition()
        self._posts: deque[float] = deque()  # times of recent posts, for the rate windows
        self._closing = threading.Event()
        self._deadline = float("inf")
        self._refusals: set[str] = set()
        self._abandoned = False  # closed while a post hung: what the thread does after is not counted
        self._session = requests.Session()
        self._thread = threading.Thread(target=self._run, name=f"alert-sink-{spec.name}", daemon=True)
        self._thread.start()

    def put(self, alerts: list[Alert]) -> list[Alert]:
        """Queue the alerts this sink wants (see the module docstring); return those that found no place."""
        alerts = [a for a in alerts if self.spec.wants(a.severity)]
        if not alerts:
            return []
        lost = []
        with self._cond:
            for a in alerts:
                key = a.key()
                if key in self._queued:
                    continue
                if len(self.queue) >= self.capacity and not self._evict_for(a.rule):
                    lost.append(a)
                    continue
                self.queue.append(a)
                self._count(a, 1)
            if lost:
                if not self.dropped:
                    logger.error("alert sink {}: queue full ({} alerts); dropping and counting further alerts",
                                 self.spec.name, self.capacity)
                self.dropped += len(lost)
            self._cond.notify()
        return lost

    def _count(self, a: Alert, n: int) -> None:
        key = a.key()
        self._queued[key] = self._queued.get(key, 0) + n
        self._per_rule[a.rule] = self._per_rule.get(a.rule, 0) + n
        if not self._queued[key]:
            del self._queued[key]
        if not self._per_rule[a.rule]:
            del self._per_rule[a.rule]

    def _evict_for(self, rule: str) -> bool:
        """Drop the newest queued alert of the rule holding the most places, if ``rule`` holds at least two
        fewer (so the two do not trade places back and forth)."""
        top = max(self._per_rule, key=lambda r: self._per_rule[r])
        if self._per_rule[top] < 2 or self._per_rule.get(rule, 0) >= self._per_rule[top] - 1:
            return False
        for i in range(len(self.queue) - 1, -1, -1):
            if self.queue[i].rule == top:
                self._count(self.queue[i], -1)
                del self.queue[i]
                self.dropped += 1
                return True
        return False

    def close(self, deadline: float) -> None:
        self._deadline = deadline
        self._closing.set()
        with self._cond:
            self._cond.notify()

    def join(self) -> None:
        """Wait for the sender thread until the close deadline (+1 s); a post still hanging then is given up:
        its alerts and the queued ones are counted as failed."""
        self._thread.join(max(self._deadline - time.monotonic(), 0) + 1)
        if not self._thread.is_alive():
            return
        with self._cond:
            self._abandoned = True
            unsent = len(self.queue) + self.sending
            self.failed += unsent
            self.queue.clear()
            self._queued.clear()
            self._per_rule.clear()
            self.sending = 0
        if unsent:
            logger.error("alert sink {}: {} alerts not delivered before shutdown (a post still hanging)",
                         self.spec.name, unsent)

    def healthy(self) -> bool:
        """The sender thread is alive (or was closed) and not stuck in one HTTP request for longer than 3 client
        timeouts + 5 s (a sink waiting between retries of a platform that is down is not stuck)."""
        since = self.posting_since
        stuck = since is not None and time.monotonic() - since > 3 * self.spec.timeout_s + 5
        return (self._thread.is_alive() or self._closing.is_set()) and not stuck

    def stats(self) -> dict:
        return {"type": self.spec.type, "sent": self.sent, "failed": self.failed, "dropped": self.dropped,
                "retries": self.retries, "queued": len(self.queue), "sending": self.sending,
                "down": self.down_since is not None, "sender": "ok" if self.healthy() else "dead or stuck"}

    # sender thread ----------------------------------------------------------------------------------
    def _run(self) -> None:
        failures: set[str] = set()
        left = 0  # alerts of the post the close deadline cut short
        while True:
            with self._cond:
                while not self.queue and not self._closing.is_set():
                    self._cond.wait()
                if not self.queue:
                    return
            if not self._sleep(self._budget_wait()):
                break
            with self._cond:
                # what was queued while the rate windows were full: one message (a digest)
                batch = [self.queue.popleft() for _ in range(min(len(self.queue), MAX_BATCH))]
                for a in batch:
                    self._count(a, -1)
                self.busy, self.sending = True, len(batch)
            try:
                delivered = self._deliver(batch)
            except Exception as exc:  # a bug or a value no platform format expected: count, log once, go on
                delivered = True
                self.failed += len(batch)
                if type(exc).__name__ not in failures:
                    failures.add(type(exc).__name__)
                    logger.error("alert sink {} could not post {} alert(s) ({}); the sender goes on",
                                 self.spec.name, len(batch), type(exc).__name__)
            finally:
                self.busy, self.sending = False, 0
            if not delivered:
                left = len(batch)
                break
        if self._abandoned:
            return
        with self._cond:  # closed before everything went out
            unsent = len(self.queue) + left
            self.failed += unsent
            self.queue.clear()
            self._queued.clear()
            self._per_rule.clear()
        if unsent:
            logger.error("alert sink {}: {} alerts not delivered before shutdown", self.spec.name, unsent)

    def _budget_wait(self) -> float:
        """Seconds until every rate window has room for one more post."""
        now, wait = time.monotonic(), 0.0
        longest = max((s for _, s in self.spec.limits), default=0.0)
        while self._posts and self._posts[0] < now - longest:
            self._posts.popleft()
        for n, period in self.spec.limits:
            recent = [t for t in self._posts if t >= now - period]
            if len(recent) >= n:
                wait = max(wait, recent[-n] + period - now)
        return wait

    def _sleep(self, seconds: float) -> bool:
        """Sleep ``seconds`` (cut short at the close deadline); False when the deadline has passed."""
        end = time.monotonic() + max(seconds, 0.0)
        if seconds > 0 and not self._closing.is_set():
            self._closing.wait(seconds)
        remaining = min(end, self._deadline) - time.monotonic()
        if remaining > 0:
            time.sleep(remaining)
        return time.monotonic() < self._deadline

    def _deliver(self, batch: list[Alert]) -> bool:
        """Post ``batch`` as one message until it is delivered or refused; False if the deadline passed."""
        delay = 1.0
        while True:
            self.posting_since = time.monotonic()
            self._posts.append(self.posting_since)
            try:
                verdict, reason, retry_after = self._post(batch)
            finally:
                self.posting_since = None
            if self._abandoned:  # counted as failed by join
                return False
            if verdict == "ok":
                self.sent += len(batch)
                if self.down_since is not None:
                    logger.info("alert sink {} is back after {:.0f} s", self.spec.name, time.time() - self.down_since)
                    self.down_since = None
                return True
            if verdict == "fail":
                self.failed += len(batch)
                if reason not in self._refusals:  # the same refusal again is counted, not logged
                    self._refusals.add(reason)
                    logger.error("alert sink {} refused {} alert(s): {}", self.spec.name, len(batch), reason)
                return True
            self.retries += 1
            if self.down_since is None:
                self.down_since = time.time()
                state = "is rate-limiting" if reason == "HTTP 429" or reason.startswith("code ") else "is down"
                logger.error("alert sink {} {} ({}); retrying in the background", self.spec.name, state, reason)
            if not self._sleep(max(retry_after or 0.0, delay, self._budget_wait())):
                return False
            delay = min(delay * 2, MAX_BACKOFF_S)

    def _post(self, batch: list[Alert]) -> tuple[str, str, float | None]:
        """One attempt: ``(verdict, reason, retry_after_s)``. Reasons never contain the URL."""
        url, body = self.platform.request(self.spec.url, self.spec.secret, batch, self.spec.mentions)
        try:
            data = json.dumps(body, ensure_ascii=False, allow_nan=False).encode()  # UTF-8: a CJK character 3 bytes
            resp = self._session.post(url, data=data, headers=JSON, timeout=self.spec.timeout_s)
        except ValueError as exc:  # our payload, not the network: retrying won't help
            return "fail", type(exc).__name__, None
        except requests.RequestException as exc:
            return "retry", type(exc).__name__, None
        if resp.status_code == 429 or resp.status_code >= 500:
            after = resp.headers.get("Retry-After", "")
            return "retry", f"HTTP {resp.status_code}", float(after) if after.isdigit() else None
        if not 200 <= resp.status_code < 300:
            return "fail", f"HTTP {resp.status_code}", None
        try:
            reply = resp.json()
        except ValueError:
            reply = None
        verdict, reason = self.platform.verdict(resp.status_code, reply if isinstance(reply, dict) else None)
        return verdict, reason, None


class AlertSender(Sink):
    """Fan alerts out to the configured sinks without blocking the caller; as a
    :class:`~training_monitor.sinks.Sink`, :meth:`on_action` makes them from events.

    Args:
        config: an :class:`~training_monitor.alerts.config.AlertsConfig`.
        run: the run's name, in the alerts :meth:`on_action` makes.
    """

    def __init__(self, config: AlertsConfig, run: str = ""):
        self.config, self.run = config, run
        self.sinks = {spec.name: Destination(spec, config.queue_size) for spec in config.sinks}
        self._said: dict[tuple, tuple] = {}  # (rule, rank) -> (onset step, action) of the last alert made

    def on_action(self, events: list[Event], action: str) -> None:
        """Queue ``events`` as alerts (one message, or a digest) saying ``action``, what was done at their step
        (an event whose rule asks for nothing but an alert says so, then that: the step's rollback is another
        rule's doing), with the configured runbook and dashboard links (returns at once; delivery is in the
        background). One alert per excursion: an event of the rule and rank of the last alert, from the same
        onset and saying the same action (a NaN loss on every step of a run that does not roll back), is in the
        event log and the metrics, not sent again; a new onset or another action (the rollback ``skipped_run``
        asks for) is."""
        c, now, alerts = self.config, time.time(), []
        for e in events:
            said = (action if action == "alerted" or set(e.actions) - {"alert"}
                    else f"alert only; at this step: {action}")
            if self._said.get((e.rule, e.rank)) == (e.onset_step, said):
                continue
            self._said[e.rule, e.rank] = (e.onset_step, said)
            alerts.append(Alert.from_event(e, self.run, said, c.runbook_base, c.dashboard_url, now))
        if alerts:
            self.send(alerts)

    def send(self, alerts: list[Alert], sink: str | None = None) -> int | None:
        """Queue ``alerts`` (one message, or a digest) for every sink, or only for ``sink``; return how many
        alert places were refused (a full queue, 0 when all were queued), None when there is no sink of
        that name."""
        targets = self.targets(sink)
        if not targets:
            return None
        return sum(len(s.put(alerts)) for s in targets)

    def targets(self, sink: str | None = None) -> list[Destination]:
        """Every sink, or only the one named ``sink`` (none when there is no sink of that name)."""
        return list(self.sinks.values()) if sink is None else [self.sinks[sink]] if sink in self.sinks else []

    def healthy(self) -> bool:
        """Every sink's sender thread is alive and not stuck (see :meth:`Destination.healthy`)."""
        return all(s.healthy() for s in self.sinks.values())

    def stats(self) -> dict:
        """Per sink: ``sent``, ``failed``, ``dropped``, ``retries``, ``queued`` and ``sending`` alerts, whether
        it is ``down`` (its platform failing, retried) and its ``sender`` thread (``ok``, or ``dead or stuck``)."""
        return {name: s.stats() for name, s in self.sinks.items()}

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait up to ``timeout_s`` for every queue to be empty and every post to be over; True if they are."""
        deadline = time.monotonic() + timeout_s
        while any(s.queue or s.busy for s in self.sinks.values()):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True

    def close(self, timeout_s: float = 5.0) -> dict:
        """Deliver what is queued for up to ``timeout_s`` seconds, then give up; return the counters."""
        deadline = time.monotonic() + timeout_s
        for s in self.sinks.values():
            s.close(deadline)
        for s in self.sinks.values():
            s.join()
        return self.stats()
