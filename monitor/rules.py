"""Rules: their configuration (a YAML file merged over the shipped defaults) and their detectors.

Every detector sees the records of one rank in step order and answers, per record, either nothing or
``(value, onset_step, message)``. Detectors hold only bounded state (a window of recent values), so
the same detector serves a live run and a million-line replay.
"""
from __future__ import annotations

import math
from bisect import bisect_left, insort
from abc import ABC, abstractmethod
from collections import deque
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import yaml

from .record import StepRecord

SEVERITIES = ("info", "warning", "critical")
ACTIONS = ("alert", "rollback", "stop")


class RulesError(ValueError):
    """A rules file that cannot be used; the message names the file, the line, the key and the reason."""


@dataclass(frozen=True)
class RuleConfig:
    """One rule's settings. ``params`` holds the detector-specific keys (window, threshold...)."""

    id: str
    severity: str
    actions: tuple[str, ...]
    warmup_steps: int
    cooldown_steps: int
    enabled: bool = True
    params: dict = field(default_factory=dict)


def _key_lines(text: str) -> dict[tuple, int]:
    """1-based line of every mapping key in a YAML document, by key path."""
    lines: dict[tuple, int] = {}

    def walk(node, path):
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                lines[path + (k.value,)] = k.start_mark.line + 1
                walk(v, path + (k.value,))

    walk(yaml.compose(text), ())
    return lines


def _defaults() -> dict:
    return yaml.safe_load(resources.files("monitor").joinpath("default_rules.yaml").read_text())


def _check(value, default, where: str):
    """``value`` coerced to the type of ``default``; raises RulesError(where + reason)."""
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, (int, float)):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
        if ok and isinstance(default, int) and not isinstance(value, int):
            ok = False
    elif isinstance(default, list):
        ok = isinstance(value, list) and all(a in ACTIONS for a in value)
    else:
        ok = isinstance(value, str)
    if not ok:
        kind = {bool: "true or false", int: "a non-negative integer", float: "a non-negative number",
                list: f"a list of {', '.join(ACTIONS)}", str: "a string"}[type(default)]
        raise RulesError(f"{where}: expected {kind}, got {value!r}")
    if isinstance(default, str) and where.endswith("severity") and value not in SEVERITIES:
        raise RulesError(f"{where}: expected one of {', '.join(SEVERITIES)}, got {value!r}")
    return value


class Rules:
    """The rule set in force: shipped defaults (``monitor/default_rules.yaml``) overridden by a file or dict.

    Raises:
        RulesError: unreadable file, bad YAML, unknown rule or key, or a value of the wrong type; the
            message is ``FILE:LINE: rule.key: reason``.
    """

    def __init__(self, overrides: dict | None = None, source: str = "<config>", lines: dict | None = None):
        merged = _defaults()
        lines = lines or {}
        for rid, body in (overrides or {}).items():
            where = f"{source}:{lines.get((rid,), '?')}: {rid}"
            if rid not in merged:
                known = sorted(k for k in merged if k != "runbook_base")
                raise RulesError(f"{where}: unknown rule (known: {', '.join(known)}; or runbook_base)")
            if rid == "runbook_base":
                merged[rid] = _check(body, merged[rid], where)
                continue
            if not isinstance(body, dict):
                raise RulesError(f"{where}: expected a mapping of settings, got {body!r}")
            for key, value in body.items():
                kwhere = f"{source}:{lines.get((rid, key), '?')}: {rid}.{key}"
                if key == "enabled":
                    merged[rid][key] = _check(value, True, kwhere)
                elif key not in merged[rid]:
                    known = sorted([*merged[rid], "enabled"])
                    raise RulesError(f"{kwhere}: unknown setting (known: {', '.join(known)})")
                else:
                    merged[rid][key] = _check(value, merged[rid][key], kwhere)
        self.runbook_base = merged.pop("runbook_base")
        self.rules: dict[str, RuleConfig] = {}
        for rid, body in merged.items():
            body = dict(body)
            self.rules[rid] = RuleConfig(
                id=rid, severity=body.pop("severity"), actions=tuple(body.pop("actions")),
                warmup_steps=body.pop("warmup_steps"), cooldown_steps=body.pop("cooldown_steps"),
                enabled=body.pop("enabled", True), params=body)

    @classmethod
    def load(cls, path: str | Path | None = None) -> "Rules":
        """Defaults, overridden by the YAML file at ``path`` when given."""
        if path is None:
            return cls()
        try:
            text = Path(path).read_text()
            data = yaml.safe_load(text)
            lines = _key_lines(text)
        except OSError as exc:
            raise RulesError(f"{path}: cannot read rules file: {exc.strerror}") from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = mark.line + 1 if mark else "?"
            raise RulesError(f"{path}:{line}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
        if data is not None and not isinstance(data, dict):
            raise RulesError(f"{path}:1: expected a mapping of rule ids to settings")
        return cls(data, str(path), lines)

    def runbook(self, rule: str) -> str:
        return f"{self.runbook_base.rstrip('/')}/{rule}.md"

    def detectors(self) -> list["Detector"]:
        return [DETECTORS[r.id](r) for r in self.rules.values() if r.enabled and r.id in DETECTORS]


class Detector(ABC):
    """Base detector: ``update(record)`` returns ``(value, onset_step, message)`` or None."""

    def __init__(self, cfg: RuleConfig):
        self.cfg = cfg
        self.__dict__.update(cfg.params)

    @abstractmethod
    def update(self, rec: StepRecord) -> tuple[float, int, str] | None:
        """Judge one record (and learn from it)."""

    def rewind(self, step: int) -> None:
        """Forget what was seen after ``step`` (the run went back to it: rollback or resume)."""


class NanInf(Detector):
    """Loss not finite; or grad norm not finite on a step not flagged as a loss-scale overflow."""

    def update(self, rec):
        if rec.loss is not None and not math.isfinite(rec.loss):
            return rec.loss, rec.step, f"loss is {rec.loss} at step {rec.step}"
        if rec.grad_norm is not None and not math.isfinite(rec.grad_norm) and not rec.overflow:
            return rec.grad_norm, rec.step, f"grad norm is {rec.grad_norm} at step {rec.step} without an overflow"
        return None


def median(sorted_values: list[float]) -> float:
    n = len(sorted_values)
    mid = n // 2
    return sorted_values[mid] if n % 2 else 0.5 * (sorted_values[mid - 1] + sorted_values[mid])


class RobustSpike(Detector):
    """Upward spike of one field against the median and MAD of its last ``window`` finite values.

    Fires when ``x > m + threshold * s`` and ``x > (1 + min_ratio) * m``, with ``m`` the median, ``s`` the
    MAD times 1.4826 (the normal-consistent scale; Rousseeuw & Croux 1993) floored at
    ``min_sigma_ratio * m``. The onset is the earliest step of the contiguous run, ending at the detected
    step, whose values all exceed ``m + threshold * s / 2``. Steps up to ``warmup_steps`` are not judged
    nor learned from (compile, noisy start).
    """

    field = ""
    label = ""

    def __init__(self, cfg):
        super().__init__(cfg)
        self.history: deque[tuple[int, float]] = deque()
        self.ordered: list[float] = []  # the same values, sorted: the median is O(1) on the hot path

    def update(self, rec):
        x = getattr(rec, self.field)
        if x is None or rec.step <= self.cfg.warmup_steps or not math.isfinite(x) or rec.overflow:
            return None
        out = None
        hist, vals = self.history, self.ordered
        if len(hist) >= self.min_history:
            m = median(vals)
            # cheap bound first: with s >= min_sigma_ratio * |m| no value under it can fire
            if x > (1.0 + self.min_ratio) * m and x > m + self.threshold * self.min_sigma_ratio * abs(m):
                s = max(1.4826 * median(sorted(abs(v - m) for v in vals)), self.min_sigma_ratio * abs(m))
                if x > m + self.threshold * s:
                    out = self._event(rec.step, x, m, s)
        hist.append((rec.step, x))
        insort(vals, x)
        if len(hist) > self.window:
            del vals[bisect_left(vals, hist.popleft()[1])]
        return out

    def _event(self, step, x, m, s):
        soft, onset = m + 0.5 * self.threshold * s, step
        for prev, v in reversed(self.history):
            if v <= soft:
                break
            onset = prev
        return (x, onset, f"{self.label} {x:.4g} at step {step} vs median {m:.4g} "
                          f"of the last {len(self.history)} steps ({(x - m) / s:.1f} robust sigma)")

    def rewind(self, step):
        while self.history and self.history[-1][0] > step:
            del self.ordered[bisect_left(self.ordered, self.history.pop()[1])]


class LossSpike(RobustSpike):
    field, label = "loss", "loss"


class GradNormSpike(RobustSpike):
    field, label = "grad_norm", "grad norm"


class OverflowStorm(Detector):
    """At least ``max_overflows`` overflowed steps within the last ``window`` steps, after calibration.

    Calibration is the stretch of overflows before the first clean step, while a dynamic loss scale
    halves down from its initial value; those never count. The onset is the window's first overflow.
    """

    def __init__(self, cfg):
        super().__init__(cfg)
        self.calibrated = False
        self.overflow_steps: deque[int] = deque()

    def update(self, rec):
        if rec.overflow is None:
            return None
        if not rec.overflow:
            self.calibrated = True
            return None
        if not self.calibrated:
            return None
        q = self.overflow_steps
        q.append(rec.step)
        while q[0] <= rec.step - self.window:
            q.popleft()
        if len(q) >= self.max_overflows:
            return (float(len(q)), q[0], f"{len(q)} overflowed steps within {self.window} steps "
                                         f"(loss scale {rec.loss_scale})")
        return None

    def rewind(self, step):
        while self.overflow_steps and self.overflow_steps[-1] > step:
            self.overflow_steps.pop()


DETECTORS = {"nan_inf": NanInf, "loss_spike": LossSpike, "grad_norm_spike": GradNormSpike,
             "overflow_storm": OverflowStorm}
