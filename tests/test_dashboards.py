"""Dashboards: the committed JSON is what the code builds, and every PromQL expression is valid."""
import json
import subprocess
from pathlib import Path

import yaml

from monitor.dashboards import DASHBOARDS, expressions

ROOT = Path(__file__).resolve().parent.parent


def test_committed_dashboards_match_the_code():
    for name, build in DASHBOARDS.items():
        committed = json.loads((ROOT / "dashboards" / name).read_text())
        assert committed == build(), f"dashboards/{name} is stale: run 'monitor dashboards generate'"


def test_every_expression_passes_promtool(tmp_path, promtool):
    exprs = [e.replace("$run", ".*") for build in DASHBOARDS.values() for e in expressions(build())]
    assert len(exprs) >= 15
    rules = {"groups": [{"name": "dashboard", "rules": [{"record": f"dashboard:expr{i}", "expr": e}
                                                        for i, e in enumerate(exprs)]}]}
    path = tmp_path / "exprs.yaml"
    path.write_text(yaml.safe_dump(rules))
    out = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_every_exported_metric_has_a_panel():
    from monitor.metrics import Metrics

    from monitor.record import StepRecord

    m = Metrics()
    m.observe(StepRecord(1, 1.0, 1.0, 1.0, False, 1e-3, 0.1, 0.01, 10, 0, 1.0, 1, 0.5))
    m.set_healthy(1)
    exported = {f.name for f in m.registry.collect()}
    assert len(exported) == len(__import__("monitor.metrics").metrics.GAUGES) + 6
    text = " ".join(e for build in DASHBOARDS.values() for e in expressions(build()))
    missing = [m for m in exported if m not in text and m + "_total" not in text and m + "_seconds" not in text]
    assert missing == [], missing
