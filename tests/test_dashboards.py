"""Dashboards: the committed JSON is what the code builds, every PromQL expression is valid and computes
what its panel says, the JSON fits Grafana 11.6's dashboard model, and ``monitor dashboards push`` talks
to Grafana's HTTP API as Grafana documents it."""
import json
import re
import socket
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from grafana_model import model_problems
from training_monitor import dashboards as dashmod
from training_monitor.cli import main
from training_monitor.dashboards import DASHBOARDS, PANELS, expressions

ROOT = Path(__file__).resolve().parent.parent
# what Grafana puts in place of the variables when it sends a query ("All" is ".*" for run and rank)
VARIABLES = {"$run": ".*", "$rank": ".*", "$__range": "1h"}


def _promql(expr: str) -> str:
    for name, value in VARIABLES.items():
        expr = expr.replace(name, value)
    return expr


def test_committed_dashboards_match_the_code():
    names = sorted(p.name for p in (ROOT / "dashboards").glob("*.json"))
    assert names == sorted(DASHBOARDS), "dashboards/ and the code disagree on the set of dashboards"
    for name, build in DASHBOARDS.items():
        committed = json.loads((ROOT / "dashboards" / name).read_text())
        assert committed == build(), f"dashboards/{name} is stale: run 'monitor dashboards generate'"


def test_generate_writes_every_dashboard(tmp_path):
    result = CliRunner().invoke(main, ["dashboards", "generate", "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(DASHBOARDS)
    for name in DASHBOARDS:
        assert (tmp_path / "out" / name).read_text() == (ROOT / "dashboards" / name).read_text()


@pytest.mark.slow
def test_every_expression_passes_promtool(tmp_path, promtool):
    exprs = [_promql(e) for build in DASHBOARDS.values() for e in expressions(build())]
    assert len(exprs) >= 45
    assert not [e for e in exprs if "$" in e], "a Grafana variable the test does not substitute"
    rules = {"groups": [{"name": "dashboard", "rules": [{"record": f"dashboard:expr{i}", "expr": e}
                                                        for i, e in enumerate(exprs)]}]}
    path = tmp_path / "exprs.yaml"
    path.write_text(yaml.safe_dump(rules))
    out = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.slow
def test_rank_expressions_compute_what_the_panels_say(tmp_path, promtool):
    """promtool evaluates the per-rank expressions on three ranks, rank 2 twice as slow as the others."""
    def series(metric, values):
        return [{"series": f'{metric}{{run="r", rank="{r}"}}', "values": values(r)} for r in range(3)]

    # 60 steps a minute at 1 s on ranks 0 and 1; 30 steps a minute at 2 s on rank 2; rank r is 5 r steps behind;
    # between steps ranks 0 and 1 wait 1 s, rank 2 1.5 s: 0.5 s beyond the median rank's 1 s, a quarter of its 2 s
    inputs = (series("train_step_duration_seconds_sum", lambda r: "0+60x20")
              + series("train_step_duration_seconds_count", lambda r: f"0+{30 if r == 2 else 60}x20")
              + series("train_data_wait_duration_seconds_sum", lambda r: "0+45x20" if r == 2 else "0+60x20")
              + series("train_data_wait_duration_seconds_count", lambda r: f"0+{30 if r == 2 else 60}x20")
              + series("train_step", lambda r: f"{1200 - 5 * r}+0x20")
              + series("train_last_healthy_checkpoint_step", lambda r: "1000+0x20"))

    def expr_of(key, i=0):
        return _promql(PANELS[key].queries[i].expr)

    def samples(values):
        return [{"labels": f'{{rank="{r}", run="r"}}', "value": v} for r, v in values.items()]

    tests = [
        (expr_of("step_mean_by_rank"), samples({0: 1, 1: 1, 2: 2})),
        (expr_of("vs_median_by_rank"), samples({0: 1, 1: 1, 2: 2})),
        (expr_of("beyond_median_by_rank"), samples({0: 0, 1: 0, 2: 0.25})),
        (expr_of("most_waited_for"), samples({2: 0.25})),
        (expr_of("lag_by_rank"), samples({0: 0, 1: 5, 2: 10})),
        (expr_of("step_spread"), [{"labels": '{run="r"}', "value": 10}]),
        (expr_of("steps_since_healthy"), samples({0: 200, 1: 195, 2: 190})),
        (expr_of("slowest_ranks"), samples({0: 1, 1: 1, 2: 2})),
        (expr_of("slowest_ranks", 1), samples({0: 1, 1: 1, 2: 2})),
    ]
    spec = {"rule_files": [], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": inputs,
        "promql_expr_test": [{"expr": e, "eval_time": "10m", "exp_samples": x} for e, x in tests]}]}
    path = tmp_path / "ranks_test.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_dashboards_fit_the_grafana_11_6_model():
    for name, build in DASHBOARDS.items():
        assert model_problems(build()) == [], name


def test_the_model_check_finds_what_grafana_11_6_does_not_know():
    dash = DASHBOARDS["training-ranks.json"]()
    table = next(p for p in dash["panels"] if p["type"] == "table")
    series = next(p for p in dash["panels"] if p["type"] == "timeseries")
    dash["graphTooltip"] = 7                                   # not a DashboardCursorSync
    series["fieldConfig"]["defaults"]["colour"] = "red"       # unknown key
    series["targets"][0]["format"] = "csv"                     # not a PromQueryFormat
    series["fieldConfig"]["defaults"]["custom"] = {"fillOpacity": "high"}  # timeseries field config: a number
    table["transformations"][0]["topic"] = "everything"       # left undecoded by the SDK, checked all the same
    dash["panels"].append({"type": "no-such-panel", "title": "x"})
    problems = "\n".join(model_problems(dash))
    for needle in ("/graph_tooltip: 7", "/defaults/colour: not in the model", "format_val: 'csv'",
                   "custom/fill_opacity: 'high'", "transformations/0/topic: 'everything'",
                   "panel type 'no-such-panel' is not in the model"):
        assert needle in problems, problems


def test_each_dashboard_has_its_panels_variables_and_links():
    built = {name: build() for name, build in DASHBOARDS.items()}
    for name, dash in built.items():
        variables = [v["name"] for v in dash["templating"]["list"]]
        assert variables[:2] == ["datasource", "run"], name
        assert ("rank" in variables) == any("$rank" in e for e in expressions(dash)), name
        assert dash["links"] == [{"asDropdown": False, "icon": "external link", "includeVars": True,
                                  "keepTime": True, "tags": [dashmod.TAG], "targetBlank": False,
                                  "title": "Training dashboards", "tooltip": "The training monitor's dashboards",
                                  "type": "dashboards"}]
        assert dashmod.TAG in dash["tags"]
        ids = [p["id"] for p in dash["panels"]]
        assert len(ids) == len(set(ids)), name
        for p in dash["panels"]:
            if p["type"] not in ("row", "text"):
                assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    titles = {name: {p["title"] for p in dash["panels"]} for name, dash in built.items()}
    assert {"Loss", "Grad norm (pre-clip)", "Loss scale", "Overflowed steps per minute", "Tokens per second (TPS)",
            "MFU", "Step time p50 / p95", "Data wait share of the step", "Learning rate"} <= \
        titles["training-run-overview.json"]
    assert {"Mean step time by rank (5m)", "p95 step time by rank (5m)", "Step time x the job's median",
            "Time between steps beyond the job's median (stragglers)",
            "TPS per device by rank (last step)", "Mean data wait per step by rank (5m)",
            "Seconds since each rank's last step", "Slowest ranks (top 20 per run by mean step time, 5m)"} <= \
        titles["training-ranks.json"]
    assert {"Anomalies by rule (per 10 min)", "Rollbacks", "Steps since the last healthy checkpoint", "Loss scale",
            "Overflowed steps per minute", "Grad norm (pre-clip)", "Loss", "Runbooks"} <= \
        titles["training-stability.json"]
    # a panel on two dashboards is one definition: the same JSON but for its id and place
    def strip(p):
        return {k: v for k, v in p.items() if k not in ("id", "gridPos")}
    loss = [strip(p) for d in built.values() for p in d["panels"] if p["title"] == "Loss"]
    assert len(loss) == 2 and loss[0] == loss[1]
    # runbook links of the stability dashboard follow its runbook_base variable
    stability = built["training-stability.json"]
    base = next(v for v in stability["templating"]["list"] if v["name"] == "runbook_base")
    assert base["type"] == "textbox" and base["query"] == "runbooks"
    anomalies = next(p for p in stability["panels"] if p["title"].startswith("Anomalies by rule"))
    assert anomalies["fieldConfig"]["defaults"]["links"][0]["url"] == "${runbook_base}/${__field.labels.rule}.md"
    assert [a["name"] for a in stability["annotations"]["list"]] == ["Rollbacks", "Anomalies"]
    runbooks = next(p for p in stability["panels"] if p["title"] == "Runbooks")["options"]["content"]
    pages = re.findall(r"\$\{runbook_base\}/(\w+\.md)", runbooks)
    assert len(pages) >= 10 and all((ROOT / "runbooks" / page).is_file() for page in pages), pages


def test_every_exported_metric_has_a_panel():
    from training_monitor.metrics import Metrics
    from training_monitor.record import StepRecord

    m = Metrics()
    m.on_record(StepRecord(1, 1.0, 1.0, 1.0, False, 1e-3, 0.1, 0.01, 10, 0, 1.0, 1, 0.5))
    m.set_healthy(1)
    exported = {f.name for f in m.registry.collect()}
    assert len(exported) == len(__import__("training_monitor.metrics").metrics.GAUGES) + 6
    for names in ([DASHBOARDS["training-run-overview.json"]], list(DASHBOARDS.values())):
        text = " ".join(e for build in names for e in expressions(build()))
        missing = [m for m in exported if m not in text and m + "_total" not in text and m + "_seconds" not in text]
        assert missing == [], missing


# ---------------------------------------------------------------------------------------------- push
TOKEN = "glsa_test-token-5f1d0c8e"


class FakeGrafana(ThreadingHTTPServer):
    """Stands in for a Grafana server, because no Grafana server can run here (Debian has no package and
    nothing else can be downloaded). It answers the endpoints that grafana-client calls for a push, as
    Grafana's HTTP API documentation describes them: ``GET /api/folders`` (list), ``POST /api/folders``
    (create: ``{"title", "uid"?}`` -> the folder), ``POST /api/dashboards/db`` (``{"dashboard",
    "folderUid"?, "overwrite", "message"?}`` -> ``{"id", "uid", "url", "status", "version", "slug"}``;
    412 ``version-mismatch`` for an existing uid without overwrite; 400 for an unknown folder). Every
    request must carry ``Authorization: Bearer <token>`` or gets Grafana's 401. It records each request.
    ``sub_path``: serve under a sub-path, as Grafana does with ``serve_from_sub_path``.
    """

    def __init__(self, token=TOKEN, folders=(), sub_path=""):
        self.token, self.sub_path, self.requests = token, sub_path, []
        self.folders = {f["uid"]: dict(f) for f in folders}
        self.dashboards = {}
        super().__init__(("127.0.0.1", 0), _GrafanaHandler)
        threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True).start()  # close() waits a poll

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_port}"

    def close(self):
        self.shutdown()
        self.server_close()


class _GrafanaHandler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self, method):
        g = self.server
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        g.requests.append({"method": method, "path": self.path, "auth": self.headers.get("Authorization"),
                           "body": body})
        if self.headers.get("Authorization") != f"Bearer {g.token}":
            return self._answer(401, {"message": "Invalid API key", "messageId": "api-keys.invalid",
                                      "statusCode": 401, "traceID": ""})
        path = self.path.split("?")[0]
        if not path.startswith(g.sub_path + "/api/"):
            return self._answer(404, {"message": "Not found"})
        path = path[len(g.sub_path):]
        if method == "GET" and path == "/api/folders":
            return self._answer(200, [{"id": i + 1, "uid": f["uid"], "title": f["title"]}
                                      for i, f in enumerate(g.folders.values())])
        if method == "POST" and path == "/api/folders":
            if any(f["title"] == body["title"] for f in g.folders.values()):
                return self._answer(409, {"message": "a folder with the same name already exists"})
            uid = body.get("uid") or f"f{len(g.folders) + 1:05d}"
            g.folders[uid] = {"uid": uid, "title": body["title"]}
            return self._answer(200, {"id": len(g.folders), "uid": uid, "title": body["title"],
                                      "url": f"/dashboards/f/{uid}/", "version": 1})
        if method == "POST" and path == "/api/dashboards/db":
            dash, folder = body["dashboard"], body.get("folderUid", "")
            if folder and folder not in g.folders:
                return self._answer(400, {"message": "folder not found", "status": "not-found"})
            old = g.dashboards.get(dash["uid"])
            if old is not None and not body.get("overwrite"):
                return self._answer(412, {"message": "The dashboard has been changed by someone else",
                                          "status": "version-mismatch"})
            version = old["version"] + 1 if old else 1
            g.dashboards[dash["uid"]] = {"version": version, "dashboard": dash, "folderUid": folder}
            slug = dash["title"].lower().replace(" ", "-")
            return self._answer(200, {"id": len(g.dashboards), "uid": dash["uid"], "url": f"/d/{dash['uid']}/{slug}",
                                      "status": "success", "version": version, "slug": slug})
        return self._answer(404, {"message": "Not found"})

    def do_GET(self):
        self._handle("GET")

    def do_POST(self):
        self._handle("POST")


@pytest.fixture
def grafana(request):
    server = FakeGrafana(**getattr(request, "param", {}))
    yield server
    server.close()


def _push(*args, url=None, token=TOKEN):
    env = {"GRAFANA_TOKEN": token, "GRAFANA_URL": url}
    return CliRunner().invoke(main, ["dashboards", "push", *args], env=env)


def test_push_creates_the_folder_and_uploads_every_dashboard_as_generated(grafana):
    result = _push("--folder", "Training", url=grafana.url)  # URL from GRAFANA_URL
    assert result.exit_code == 0, result.output
    assert TOKEN not in result.output
    calls = [(r["method"], r["path"]) for r in grafana.requests]
    assert calls == [("GET", "/api/folders"), ("POST", "/api/folders")] + \
        [("POST", "/api/dashboards/db")] * len(DASHBOARDS)
    assert all(r["auth"] == f"Bearer {TOKEN}" for r in grafana.requests)
    assert grafana.requests[1]["body"] == {"title": "Training"}
    folder_uid = next(iter(grafana.folders))
    for request, (name, build) in zip(grafana.requests[2:], DASHBOARDS.items()):
        assert request["body"]["dashboard"] == build() == json.loads((ROOT / "dashboards" / name).read_text())
        assert request["body"]["overwrite"] is False
        assert request["body"]["folderUid"] == folder_uid
    lines = result.stdout.splitlines()
    assert lines == [f"{d['title']}: {grafana.url}/d/{d['uid']}/{d['title'].lower().replace(' ', '-')} (version 1)"
                     for d in (b() for b in DASHBOARDS.values())]
    # no --runbook-base: the links are the repository's relative path, which Grafana would open under its own URL
    assert result.stderr.startswith("note: the dashboards' runbook links are relative (runbooks/<rule>.md)")


@pytest.mark.parametrize("grafana", [{"folders": [{"uid": "tm", "title": "Training"}]}], indirect=True)
def test_push_into_an_existing_folder_needs_overwrite_to_replace(grafana):
    first = _push("--url", grafana.url, "--folder", "Training", "--runbook-base", "https://git.example/runbooks")
    assert first.exit_code == 0, first.output
    assert first.stderr == ""  # runbook links Grafana can open
    assert ("POST", "/api/folders") not in [(r["method"], r["path"]) for r in grafana.requests]
    assert {d["folderUid"] for d in grafana.dashboards.values()} == {"tm"}
    stability = grafana.dashboards["training-stability"]["dashboard"]
    assert next(v for v in stability["templating"]["list"] if v["name"] == "runbook_base")["query"] == \
        "https://git.example/runbooks"

    again = _push("--url", grafana.url, "--folder", "tm")  # the folder by uid, too
    assert again.exit_code == 2
    assert again.stderr.count("\n") == 1 and "--overwrite" in again.stderr and "already exists" in again.stderr
    assert again.stderr.startswith("monitor: error: ")

    replaced = _push("--url", grafana.url, "--folder", "Training", "--overwrite")
    assert replaced.exit_code == 0, replaced.output
    assert grafana.requests[-1]["body"]["overwrite"] is True
    assert {d["version"] for d in grafana.dashboards.values()} == {2}


@pytest.mark.parametrize("grafana", [{"sub_path": "/grafana"}], indirect=True)
def test_push_to_grafana_under_a_sub_path(grafana):
    result = _push("--url", grafana.url + "/grafana")
    assert result.exit_code == 0, result.output
    assert [r["path"] for r in grafana.requests] == ["/grafana/api/dashboards/db"] * len(DASHBOARDS)
    assert "folderUid" not in grafana.requests[0]["body"]


@pytest.mark.parametrize("grafana", [{"token": "another-token"}], indirect=True)
def test_push_with_a_refused_token_fails_clearly_without_printing_it(grafana, caplog):
    result = _push("--url", grafana.url, "--folder", "Training")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert "refused the token (401 Unauthorized: Invalid API key)" in result.stderr
    assert TOKEN not in result.output and TOKEN not in caplog.text
    assert grafana.dashboards == {}


def test_push_to_an_unreachable_server_fails_clearly_without_printing_the_token(caplog):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = _push("--url", f"http://127.0.0.1:{port}")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"monitor: error: cannot reach Grafana at http://127.0.0.1:{port}")
    assert TOKEN not in result.output and TOKEN not in caplog.text


def test_push_needs_a_token_and_a_url(grafana):
    no_token = _push("--url", grafana.url, token="")
    assert no_token.exit_code == 2 and "GRAFANA_TOKEN" in no_token.stderr
    assert grafana.requests == []
    bad_url = _push("--url", "grafana:3000")
    assert bad_url.exit_code == 2 and "http://HOST:PORT" in bad_url.stderr
    no_url = CliRunner().invoke(main, ["dashboards", "push"], env={"GRAFANA_TOKEN": TOKEN, "GRAFANA_URL": None})
    assert no_url.exit_code == 2 and "GRAFANA_URL" in no_url.output
