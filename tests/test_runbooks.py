"""Every rule has a runbook, events link to it, and the pages say what the code does: the thresholds,
severities and actions they quote are the shipped defaults, and each gives its checks in order, each with
the metric or command that answers it."""
import re
from dataclasses import fields
from pathlib import Path

import yaml

from training_monitor.config import MonitorConfig
from training_monitor.engine import Engine
from training_monitor.record import StepRecord
from training_monitor.ruleset import Rules

ROOT = Path(__file__).resolve().parent.parent
RUNBOOKS = ROOT / "runbooks"
PAGES = sorted(p for p in RUNBOOKS.glob("*.md") if p.name != "README.md")


def test_every_rule_has_a_runbook_and_events_link_it():
    rules = Rules.load()
    for rule in rules.rules:
        page = ROOT / rules.runbook(rule)
        assert page.is_file(), f"missing runbook {page}"
        assert page.read_text().startswith(f"# `{rule}`")
        assert f"({rule}.md)" in (RUNBOOKS / "README.md").read_text()
    (event,) = Engine(rules).observe(StepRecord(1, loss=float("nan")))
    assert event.to_dict()["runbook"] == "runbooks/nan_inf.md"


def test_every_page_is_indexed_and_has_ordered_checks_with_a_metric_or_command_each():
    index = (RUNBOOKS / "README.md").read_text()
    assert len(PAGES) >= 12
    for page in PAGES:
        text = page.read_text()
        assert re.match(r"# `\w+`: \S", text), f"{page.name}: first line must be '# `name`: ...'"
        assert f"]({page.name})" in index, f"{page.name} is not in runbooks/README.md"
        assert "**Fires when**" in text, page.name
        checks = text.split("## Check, in this order\n", 1)
        assert len(checks) == 2, f"{page.name}: no '## Check, in this order' section"
        steps = re.split(r"^\d+\. ", checks[1], flags=re.M)[1:]
        assert len(steps) >= 3, f"{page.name}: fewer than 3 checks"
        numbers = [int(n) for n in re.findall(r"^(\d+)\. ", checks[1], flags=re.M)]
        assert numbers == list(range(1, len(numbers) + 1)), f"{page.name}: checks not numbered 1, 2, 3..."
        for i, step in enumerate(steps, 1):
            assert step.startswith("**"), f"{page.name} check {i}: starts with a bold question or subject"
            assert re.search(r"`[^`]+`", step), f"{page.name} check {i}: names no metric, setting or command"


def _number(value: str, percent: str) -> float:
    return float(value) / 100 if percent else float(value)


def test_engine_pages_quote_the_shipped_defaults():
    """'`window` (100)', '`ratio` (70 %)', 'Cooldown 10 steps', 'Severity `critical`', 'default actions
    `alert, rollback`': each must be what monitor/default_rules.yaml (or the monitor config) ships."""
    rules = Rules()
    config = {f.name: f.default for f in fields(MonitorConfig)}
    checked = 0
    for rid, rule in rules.rules.items():
        text = re.sub(r"\s+", " ", (RUNBOOKS / f"{rid}.md").read_text())
        settings = {**rule.params, "warmup_steps": rule.warmup_steps, "cooldown_steps": rule.cooldown_steps,
                    "escalation": rule.escalation}
        for key, value, percent in re.findall(r"`(\w+)` \(([0-9][0-9.e+-]*)\s*(%?)", text):
            known = settings.get(key, config.get(key))
            assert known is not None, f"{rid}.md quotes `{key}`, which is no setting of the rule or the monitor"
            assert abs(_number(value, percent) - known) <= 1e-9 * max(1.0, abs(known)), \
                f"{rid}.md says {key} = {value}{percent}, the default is {known}"
            checked += 1
        for key, value in re.findall(r"`(\w+): ([0-9][0-9.e+-]*)`", text):
            if key in settings:
                assert float(value) == settings[key], f"{rid}.md says {key}: {value}, the default is {settings[key]}"
                checked += 1
        (severity,) = re.findall(r"Severity `(\w+)`", text)
        assert severity == rule.severity, f"{rid}.md: severity {severity}, the default is {rule.severity}"
        (actions,) = re.findall(r"default actions? `([a-z_, ]+)`", text)
        assert tuple(a.strip() for a in actions.split(",")) == rule.actions, f"{rid}.md: actions {actions}"
        cooldown = re.findall(r"Cooldown (\d+) steps", text)
        assert cooldown in ([], [str(rule.cooldown_steps)]), f"{rid}.md: cooldown {cooldown}"
        if rule.cooldown_steps:
            assert cooldown, f"{rid}.md does not say its cooldown ({rule.cooldown_steps} steps)"
    assert checked >= 30


def test_pages_name_only_alerts_that_exist():
    """Pages mention Prometheus alerts by name: those names must be alerts of deploy/prometheus/alerts.yml."""
    groups = yaml.safe_load((ROOT / "deploy" / "prometheus" / "alerts.yml").read_text())["groups"]
    names = {r["alert"] for g in groups for r in g["rules"] if "alert" in r}
    for page in [*PAGES, RUNBOOKS / "README.md"]:
        for name in re.findall(r"`(Training[A-Z][A-Za-z]+)`", page.read_text()):
            assert name in names, f"{page.name} names {name}, which alerts.yml does not have"
