"""Rules: their configuration, a rules file (YAML) over the defaults of the rules' settings classes.

``default_rules.yaml``, a copy of those defaults for users to edit, is generated from the settings classes
(each detector's ``settings``, the evaluation detectors' too, and :class:`StallSettings` for the watchdog's
rule)::

    python -c "from training_monitor.ruleset import default_rules_yaml as y; print(y(), end='')" \
        > monitor/default_rules.yaml

(``tests/test_rules.py`` checks it).
"""
from __future__ import annotations

import inspect
from dataclasses import asdict, dataclass, field, fields, make_dataclass
from pathlib import Path

import yaml

from .detectors import DETECTORS, EVALUATORS, RuleSettings, override, setting
from .schema import ConfigError, check, did_you_mean, located
from .yamlfile import load_yaml

MAX_NUMBER = 10**7  # every number of a rule (windows, steps, thresholds, seconds) is in 0..MAX_NUMBER


@dataclass(frozen=True)
class StallSettings(RuleSettings):
    """No step finished for longer than allowed (hang: a collective a peer never joins, a dead data loader).
    Allowed: startup_seconds until startup_steps steps are done (compilation), then
    max(min_seconds, factor x median step time). The event carries every Python thread's stack.
    Action `stop` ends the hung process (exit status 3) after reporting, for a scheduler to restart it."""

    severity: str = override(RuleSettings, "severity", "critical")
    factor: float = setting(10.0, "allowed: this x the median of the last step times...", min=1)
    min_seconds: float = setting(60.0, "...and at least this many seconds", min=0)
    startup_seconds: float = setting(1800.0, "allowed until startup_steps steps are done (compilation)", min=0)
    startup_steps: int = setting(3, "steps that get startup_seconds", min=0)


@dataclass(frozen=True)
class TrainerCrashSettings(RuleSettings):
    """The trainer's process crashed, as its log says: an Ascend CANN error code (`E` + module + 4 digits), a
    fatal signal (segmentation fault, `Fatal Python error`, OpenMPI's signal handler), read by replay from the
    log; live, an exception that ends training (`Model.train` or a LoopMonitor loop raised), reported by the
    callback at the last step judged, its traceback in the event's details."""

    severity: str = override(RuleSettings, "severity", "critical")


SETTINGS = {**{rule: d.settings for rule, d in DETECTORS.items()}, "stall": StallSettings,
            **{rule: d.settings for rule, d in EVALUATORS.items()},
            "trainer_crash": TrainerCrashSettings}  # rule id -> settings

_HEADER = """\
# Default rules, generated from the rules' settings classes (training_monitor.ruleset.default_rules_yaml).
# Copy this file, change what you need, and pass it with `rules: PATH` in the monitor config or
# `monitor replay --rules PATH`. Keys left out keep these values.
#
# Every rule also takes enabled (true|false) and skip_extra_batches (batches the skip_batches action skips
# ahead of the data reader, beyond those a rollback already leaves behind; needs a
# training_monitor.callbacks.SkippableSource dataset; default 0).
runbook_base: runbooks"""


def default_rules_yaml() -> str:
    """The text of ``default_rules.yaml``: each rule's description (its settings class's docstring) and
    each setting with its default and doc."""
    out = [_HEADER]
    for rule, cls in SETTINGS.items():
        out += ["", f"{rule}:"] + [f"  # {line}".rstrip() for line in inspect.cleandoc(cls.__doc__ or "").splitlines()]
        for f in fields(cls):
            value = list(f.default) if isinstance(f.default, tuple) else f.default
            text = yaml.safe_dump([value], default_flow_style=True, width=1000).strip()[1:-1]  # one flow value
            out.append(f"  {f.name}: {text}  # {f.metadata['doc']}")
    return "\n".join(out) + "\n"


class RulesError(ValueError):
    """A rules file that cannot be used; the message names the file, the line, the key and the reason."""


@dataclass(frozen=True)
class RuleConfig:
    """One rule's settings. ``params`` holds the detector-specific keys (window, threshold...).
    ``skip_extra_batches``: batches the ``skip_batches`` action skips beyond those already consumed
    (a setting every rule accepts; 0 by default)."""

    id: str
    severity: str
    actions: tuple[str, ...]
    warmup_steps: int
    cooldown_steps: int
    escalation: float = 0.0
    enabled: bool = True
    skip_extra_batches: int = 0
    params: dict = field(default_factory=dict)


def _file_settings(cls):
    """``cls`` with the settings every rule takes in the rules file besides its own."""
    return make_dataclass(cls.__name__, [
        ("enabled", bool, setting(True, "false turns the rule off")),
        ("skip_extra_batches", int, setting(0, "batches skip_batches skips beyond those a rollback leaves behind",
                                            min=0))], bases=(cls,), frozen=True)


FILE_SETTINGS = {rule: _file_settings(cls) for rule, cls in SETTINGS.items()}


class Rules:
    """The rule set in force: the settings classes' defaults (:data:`SETTINGS`) overridden by a file or dict.

    ``source``, ``lines`` and ``path`` say where the overrides were read (see
    :func:`training_monitor.schema.check`): a rules file has them at the top (``path`` empty); a settings
    file's ``rules:`` mapping at ``path`` ``("rules",)`` or ``("monitor", "rules")``.

    Raises:
        RulesError: unreadable file, bad YAML, unknown rule or key, or a value of the wrong type; the
            message is ``FILE:LINE: rule.key: reason`` (the key path from the file's top), a line for each
            wrong rule and key of the file.
    """

    def __init__(self, overrides: dict | None = None, source: str = "rules", lines: dict | None = None,
                 path: tuple = ()):
        overrides = dict(overrides or {})

        def at(key):  # SOURCE[:LINE]: KEY.PATH of a key of the overrides
            return located(source, lines, (*path, key))

        self.runbook_base = overrides.pop("runbook_base", "runbooks")
        if not isinstance(self.runbook_base, str):
            raise RulesError(f"{at('runbook_base')}: expected a string, got {self.runbook_base!r}")
        known = sorted(SETTINGS)
        problems = {rid: f"{at(rid)}: unknown rule ({did_you_mean(rid, known)}known: {', '.join(known)}; or "
                         "runbook_base)" for rid in overrides if rid not in SETTINGS}
        self.rules: dict[str, RuleConfig] = {}
        for rid, cls in FILE_SETTINGS.items():
            body = overrides.get(rid) or {}
            if not isinstance(body, dict):
                problems[rid] = f"{at(rid)}: expected a mapping of settings, got {body!r}"
                continue
            try:
                params = asdict(check(cls, body, source, lines, (*path, rid), RulesError,
                                      bounds={"max": MAX_NUMBER}))
            except RulesError as exc:
                problems[rid] = str(exc)
                continue
            self.rules[rid] = RuleConfig(
                id=rid, severity=params.pop("severity"), actions=tuple(params.pop("actions")),
                warmup_steps=params.pop("warmup_steps"), cooldown_steps=params.pop("cooldown_steps"),
                escalation=params.pop("escalation"),
                enabled=params.pop("enabled"), skip_extra_batches=params.pop("skip_extra_batches"), params=params)
        if problems:  # every rule's, in the file's order
            raise RulesError("\n".join(problems[rid] for rid in overrides if rid in problems))

    @classmethod
    def load(cls, path: str | Path | None = None) -> Rules:
        """Defaults, overridden by the YAML file at ``path`` when given."""
        if path is None:
            return cls()
        try:
            data, lines = load_yaml(path, "rules file")
        except ConfigError as exc:  # unreadable, not YAML, aliases, too deep, a number that is not finite
            raise RulesError(str(exc)) from None
        if data is not None and not isinstance(data, dict):
            raise RulesError(f"{path}:1: expected a mapping of rule ids to settings")
        return cls(data, str(path), lines)

    def runbook(self, rule: str) -> str:
        return f"{self.runbook_base.rstrip('/')}/{rule}.md"

    def detectors(self, table: dict = DETECTORS) -> list:
        """Fresh detector instances of the enabled rules that have one in ``table`` (:data:`DETECTORS`, the
        step records' rules; :data:`EVALUATORS`, the evaluation losses'; ``stall`` is the watchdog's)."""
        return [table[r.id](r) for r in self.rules.values() if r.enabled and r.id in table]

