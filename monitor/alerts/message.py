"""What an alert says, whatever it came from (an engine event or an Alertmanager webhook) and wherever
it goes (a chat platform, Alertmanager)."""
from __future__ import annotations

import math
import re
import urllib.parse
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

from ..events import json_value

MAX_TEXT = 1000  # characters kept of a summary from a webhook; other fields keep MAX_FIELD
MAX_FIELD = 200
_PAGE = re.compile(r"^[\w./-]+$")  # a relative runbook path (runbooks/stall.md)


def _no_dots(path: str) -> bool:
    """No segment of ``path`` is ``.`` or ``..`` (also after a backslash, which browsers read as a slash)."""
    return not any(part in (".", "..") for part in re.split(r"[/\\]", path))


def _under(url: str, base: str) -> bool:
    """``url`` is a page under ``base``: it starts with ``base/`` and no path segment after it is ``.`` or ``..``
    (also percent-encoded)."""
    prefix = base.rstrip("/") + "/"
    return url.startswith(prefix) and _no_dots(urllib.parse.unquote(urllib.parse.urlsplit(url[len(prefix):]).path))


AM_FIELDS = {"status": str, "labels": dict, "annotations": dict, "startsAt": str, "endsAt": str,
             "generatorURL": str, "fingerprint": str}  # an Alertmanager webhook alert's fields and their types


@dataclass(slots=True)
class Alert:
    """One alert, as chat messages and Alertmanager show it.

    Attributes:
        rule: rule id (``loss_spike``) or Prometheus alert name (``TrainingStalled``).
        severity: ``warning`` or ``critical`` (free text from Alertmanager labels).
        summary: one human sentence.
        run, rank: where it happened; rank None for a job-wide alert.
        step, onset_step: detection step and the step where the excursion began; None when unknown.
        trainer_step: the trainer's own number of ``step`` when it differs (after a rollback), else None.
        value: the offending value (loss, grad norm, seconds...); None when there is none.
        action: what the monitor did about it (``rolled back to step 125, LR x0.5``), or empty.
        runbook: link to the runbook page.
        dashboard: link to the Grafana dashboard of the run, or empty.
        status: ``firing`` or ``resolved``.
        starts_at: Unix time at which it fired.
        ends_at: Unix time at which a resolved alert ended (0: unknown).
    """

    rule: str
    severity: str
    summary: str
    run: str = ""
    rank: int | None = None
    step: int | None = None
    onset_step: int | None = None
    trainer_step: int | None = None
    value: float | None = None
    action: str = ""
    runbook: str = ""
    dashboard: str = ""
    status: str = "firing"
    starts_at: float = 0.0
    ends_at: float = 0.0

    @classmethod
    def from_event(cls, event, run: str, action: str = "", runbook_base: str = "", dashboard: str = "",
                   now: float = 0.0) -> Alert:
        """An engine :class:`~training_monitor.events.Event` as an alert. ``runbook_base`` (a URL) replaces the
        event's relative ``runbooks`` folder; ``dashboard`` may hold ``{run}`` (replaced URL-quoted)."""
        runbook = event.runbook
        if runbook_base:
            runbook = f"{runbook_base.rstrip('/')}/{event.rule}.md"
        return cls(rule=event.rule, severity=event.severity, summary=event.message, run=run, rank=event.rank,
                   step=event.step, onset_step=event.onset_step, trainer_step=event.trainer_step,
                   value=event.value, action=action,
                   runbook=runbook, dashboard=_dashboard(dashboard, run), starts_at=now)

    @classmethod
    def from_alertmanager(cls, alert, dashboard: str = "", runbook_base: str = "", where: str = "alert") -> Alert:
        """One entry of an Alertmanager webhook's ``alerts`` list (payload version 4). The annotations that
        the monitor's own ``alertmanager`` sink writes (``step``, ``onset_step``, ``trainer_step``, ``value``,
        ``action``, ``runbook_url``, ``dashboard_url``) are read back. Links are kept only under the configured bases: a
        relative ``runbook_url`` (a path such as the shipped ``runbooks/<page>.md``, no ``.`` or ``..`` segment) is
        put under ``runbook_base``, any other is kept only when it is under ``runbook_base`` (no ``..`` segment
        after it, percent-encoded or not); a ``dashboard_url`` or
        ``generatorURL`` is kept when it has the origin (scheme, host, port) of ``dashboard``, else
        ``dashboard`` itself is the link. Texts are cut to :data:`MAX_TEXT` (summary) and :data:`MAX_FIELD` characters.

        Raises:
            ValueError: a field of the wrong type (every label and annotation value must be a string), or
                a ``status`` other than firing/resolved; the message names the field under ``where``.
        """
        if not isinstance(alert, dict):
            raise ValueError(f"{where}: expected a mapping, got {type(alert).__name__}")
        for key, kind in AM_FIELDS.items():
            if key in alert and not isinstance(alert[key], kind):
                raise ValueError(f"{where}.{key}: expected a {'mapping' if kind is dict else 'string'}, "
                                 f"got {type(alert[key]).__name__}")
        if "labels" not in alert:
            raise ValueError(f"{where}.labels: missing")
        labels, notes = alert["labels"], alert.get("annotations", {})
        for name, mapping in (("labels", labels), ("annotations", notes)):
            for k, v in mapping.items():
                if not isinstance(v, str):
                    raise ValueError(f"{where}.{name}.{k}: expected a string, got {type(v).__name__}")
        status = alert.get("status", "firing")
        if status not in ("firing", "resolved"):
            raise ValueError(f"{where}.status: expected firing or resolved, got {status[:MAX_FIELD]!r}")
        run = labels.get("run", "")[:MAX_FIELD]
        runbook = notes.get("runbook_url", "")
        relative = _PAGE.match(runbook) is not None and _no_dots(runbook)  # a page, as the shipped rules name them
        if relative and runbook_base:
            runbook = f"{runbook_base.rstrip('/')}/{runbook.rsplit('/', 1)[-1]}"
        if not (_under(runbook, runbook_base) if runbook_base else relative):
            runbook = ""
        home = _dashboard(dashboard, run)
        links = [u for u in (notes.get("dashboard_url", ""), alert.get("generatorURL", ""))
                 if u and dashboard and _origin(u) == _origin(dashboard)]
        return cls(rule=(labels.get("rule") or labels.get("alertname") or "alert")[:MAX_FIELD],
                   severity=labels.get("severity", "warning")[:MAX_FIELD],
                   summary=(notes.get("summary") or notes.get("description") or labels.get("alertname", ""))[:MAX_TEXT],
                   run=run, rank=_int(labels.get("rank")), step=_int(notes.get("step")),
                   onset_step=_int(notes.get("onset_step")), trainer_step=_int(notes.get("trainer_step")),
                   action=notes.get("action", "")[:MAX_FIELD],
                   value=_float(notes.get("value")), runbook=runbook[:MAX_TEXT],
                   dashboard=(links[0] if links else home)[:MAX_TEXT],
                   status=status, starts_at=_unix(alert.get("startsAt")),
                   ends_at=_unix(alert.get("endsAt")) if status == "resolved" else 0.0)

    def key(self) -> tuple:
        """What makes two alerts the same one (a retried webhook, a repeated notification)."""
        return self.rule, self.run, self.rank, self.status, self.step, self.starts_at, self.summary

    def to_dict(self) -> dict:
        """The fields as JSON-safe values (a NaN/Inf value as its string)."""
        d = asdict(self)
        d["value"] = json_value(self.value)
        return d

    def title(self) -> str:
        state = "RESOLVED" if self.status == "resolved" else self.severity.upper()
        where = f" on {self.run}" if self.run else ""
        return f"[{state}] {self.rule}{where}"

    def facts(self) -> list[tuple[str, str]]:
        """(name, text) pairs of what is known, in display order; links last."""
        out = []
        if self.rank is not None:
            out.append(("rank", str(self.rank)))
        if self.step is not None:
            notes = [f"onset {self.onset_step}"] if self.onset_step not in (None, self.step) else []
            notes += [f"trainer step {self.trainer_step}"] if self.trainer_step is not None else []
            out.append(("step", f"{self.step} ({'; '.join(notes)})" if notes else str(self.step)))
        if self.value is not None:
            out.append(("value", f"{self.value:.6g}" if math.isfinite(self.value) else str(self.value)))
        if self.action:
            out.append(("action", self.action))
        if self.starts_at:
            out.append(("since", datetime.fromtimestamp(self.starts_at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")))
        if self.runbook:
            out.append(("runbook", self.runbook))
        if self.dashboard:
            out.append(("dashboard", self.dashboard))
        return out


def _dashboard(template: str, run: str) -> str:
    """The dashboard link of ``run``: ``{run}`` in ``template`` replaced by the URL-quoted run name."""
    return template.replace("{run}", urllib.parse.quote(run, safe=""))


def _origin(url: str) -> tuple:
    try:
        p = urllib.parse.urlsplit(url)
        return p.scheme.lower(), (p.hostname or "").lower(), p.port
    except ValueError:
        return ("", "", None)


def _int(text) -> int | None:
    return int(text) if isinstance(text, str) and text.isascii() and text.isdigit() and len(text) < 19 else None


def _float(text) -> float | None:
    if not isinstance(text, str) or len(text) > 64:
        return None
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def _unix(stamp) -> float:
    """RFC 3339 time from Alertmanager (``2026-11-30T14:00:00.123456789Z``) as Unix seconds; 0 if unknown."""
    if not isinstance(stamp, str) or stamp.startswith("0001-"):
        return 0.0
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return 0.0
