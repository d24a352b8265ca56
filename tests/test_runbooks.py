"""Every rule has a runbook page, and events link to it."""
from pathlib import Path

from monitor.engine import Engine
from monitor.record import StepRecord
from monitor.rules import Rules

ROOT = Path(__file__).resolve().parent.parent


def test_every_rule_has_a_runbook_and_events_link_it():
    rules = Rules.load()
    for rule in rules.rules:
        page = ROOT / rules.runbook(rule)
        assert page.is_file(), f"missing runbook {page}"
        assert page.read_text().startswith(f"# `{rule}`")
        assert f"({rule}.md)" in (ROOT / "runbooks" / "README.md").read_text()
    (event,) = Engine(rules).observe(StepRecord(1, loss=float("nan")))
    assert event.to_dict()["runbook"] == "runbooks/nan_inf.md"
