"""Score ``monitor replay`` on the real-log corpus (``tests/data/reallogs/``) against its ``labels.yaml``.

Every file of the corpus is an excerpt of a public training log (``SOURCES.md`` names each source), in ``tune/``
(may be used to improve the reader and the rules), ``heldout/``, ``heldout2/``, ``heldout3/``, ``heldout4/``,
``heldout5/`` to ``heldout13/`` (only scored; each later held-out batch was gathered
and labelled after the ones before it had been used). Each file is replayed with the command line, ``monitor replay FILE
--json`` (invoked through click in this process, one invocation per file, so the corpus takes seconds), and its
anomalies are matched to the file's labels:

* a ``must`` event ``[category, step, tolerance]`` is *found* when an anomaly of that category has its step
  or its onset step within ``tolerance`` of ``step`` (``step: null``: anywhere in the file);
* a ``must_not`` category is a *false alarm* when any anomaly of that category is reported (counted once
  per file and category);
* a file is *read* when replay exits with status 0 and reads at least ``min_records`` records (``records``: step
  records, evaluations and lines merged into a step record, such as a timing line after its step line);
* ``soft`` events are counted like ``must`` ones but required by nobody.

Anomalies are put in categories by their rule id (:data:`CATEGORIES`). A file that is not read still counts
its ``must`` events as missed. Per split it prints, for each category, events found / labelled and false
alarms, then files read / files, and the misses, false alarms and unread files by name.

Usage: ``.venv/bin/python benchmarks/real_logs.py
[--split tune|heldout|heldoutN|all] [--json] [--corpus DIR]``;
``--json`` prints one object: ``splits`` (the tables' numbers) and ``files`` (each file's outcome).
"""
from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import click
import yaml
from click.testing import CliRunner

from training_monitor.cli import main as monitor_cli

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "data" / "reallogs"
SPLITS = ("tune", "heldout", *(f"heldout{n}" for n in range(2, 110)))  # the batches, in the order gathered
# corpus category -> substrings of the rule ids that report it (rule ids are the engine's, e.g. nan_inf,
# overflow_storm, loss_scale_collapse, loss_degenerate, loss_plateau, throughput_drop, stall); anomalies of
# other rules (low_mfu: a level, not an event in the log) are listed per file but not scored
CATEGORIES = {
    "nan": ("nan",),
    "loss_spike": ("loss_spike",),
    "grad_norm": ("grad_norm",),
    "overflow": ("overflow", "loss_scale"),
    "stall": ("stall", "hang", "timeout", "watchdog"),
    "degenerate": ("degenerate", "plateau"),
    "throughput": ("throughput", "tps"),
}


def category(rule: str) -> str | None:
    """The corpus category of an anomaly's rule id, or None."""
    rule = rule.lower()
    return next((cat for cat, words in CATEGORIES.items() if any(w in rule for w in words)), None)


def load_labels(corpus: Path) -> dict:
    """``labels.yaml`` of the corpus; ValueError naming the file when an entry is malformed."""
    path = corpus / "labels.yaml"
    labels = yaml.safe_load(path.read_text(encoding="utf-8"))
    for name, lab in labels.items():
        cats = [e[0] for e in lab.get("must", []) + lab.get("soft", [])] + list(lab.get("must_not", []))
        bad = [c for c in cats if c not in CATEGORIES]
        if lab.get("split") not in SPLITS or bad:
            raise ValueError(f"{path}: {name}: split must be one of {SPLITS} and categories of "
                             f"{tuple(CATEGORIES)} (got split {lab.get('split')!r}, categories {bad})")
    return labels


def replay(path: Path) -> tuple[int, dict | None, str]:
    """``monitor replay PATH --json``: exit status, its JSON (None when it printed none), last stderr line."""
    result = CliRunner().invoke(monitor_cli, ["replay", str(path), "--json"])
    err = result.stderr.strip().splitlines()
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        err.append(f"{type(result.exception).__name__}: {result.exception}")
    try:
        out = json.loads(result.stdout) if result.exit_code == 0 else None
    except json.JSONDecodeError:
        out = None
    return result.exit_code, out, err[-1].replace(f"{path}: ", "").replace("monitor: error: ", "") if err else ""


def _matches(event: dict, cat: str, step, tol: int) -> bool:
    if category(event["rule"]) != cat:
        return False
    return step is None or any(s is not None and abs(int(s) - step) <= tol
                               for s in (event.get("step"), event.get("onset_step")))


def score_file(name: str, lab: dict, exit_code: int, out: dict | None, error: str) -> dict:
    """One file's outcome: read or not, records, the must events found and missed, false alarms, soft found."""
    events = [{"rule": str(a.get("rule", "")), "step": a.get("step"), "onset_step": a.get("onset_step")}
              for a in (out or {}).get("anomalies", [])]
    records = (out or {}).get("records", 0)
    found, missed = [], []
    for cat, step, tol in lab.get("must", []):
        (found if any(_matches(e, cat, step, tol) for e in events) else missed).append([cat, step, tol])
    false_alarms = {cat: [f"{e['rule']}@{e['step']}" for e in events if category(e["rule"]) == cat]
                    for cat in lab.get("must_not", [])}
    return {"file": name, "split": lab["split"], "exit_code": exit_code,
            "error": error if exit_code else "", "records": records,
            "min_records": lab.get("min_records", 0),
            "read": exit_code == 0 and records >= lab.get("min_records", 0),
            "found": found, "missed": missed,
            "false_alarms": {cat: hits for cat, hits in false_alarms.items() if hits},
            "soft_found": [s for s in lab.get("soft", []) if any(_matches(e, *s) for e in events)],
            "soft": lab.get("soft", []),
            "events": sorted({f"{e['rule']}@{e['step']}" for e in events})}


def summarize(files: list[dict]) -> dict:
    """Per category found / labelled, false alarms and soft found / labelled; files read / files; misses."""
    per = {cat: Counter() for cat in CATEGORIES}
    for f in files:
        for cat, *_ in f["found"]:
            per[cat]["found"] += 1
        for cat, *_ in f["found"] + f["missed"]:
            per[cat]["labelled"] += 1
        for cat in f["false_alarms"]:
            per[cat]["false_alarms"] += 1
        for cat, *_ in f["soft"]:
            per[cat]["soft"] += 1
        for cat, *_ in f["soft_found"]:
            per[cat]["soft_found"] += 1
    return {"categories": {cat: {k: c[k] for k in ("found", "labelled", "false_alarms", "soft_found", "soft")}
                           for cat, c in per.items()},
            "found": sum(c["found"] for c in per.values()),
            "labelled": sum(c["labelled"] for c in per.values()),
            "false_alarms": sum(c["false_alarms"] for c in per.values()),
            "files": len(files), "read": sum(f["read"] for f in files),
            "misses": [f"{f['file']}: {cat}@{step}" for f in files for cat, step, _ in f["missed"]],
            "false_alarm_files": [f"{f['file']}: {cat} ({', '.join(hits[:3])})"
                                  for f in files for cat, hits in f["false_alarms"].items()],
            "unread": [f"{f['file']}: " + (f"exit {f['exit_code']}: {f['error']}" if f["exit_code"] else
                                           f"{f['records']} records < {f['min_records']}")
                       for f in files if not f["read"]]}


def score_corpus(corpus: Path = CORPUS, splits=SPLITS) -> dict:
    """Replay and score every labelled file of ``splits``: ``{"splits": {split: summary}, "files": [...]}``."""
    labels = load_labels(corpus)
    files = []
    for name, lab in sorted(labels.items()):
        if lab["split"] in splits:
            path = corpus / lab["split"] / name
            if not path.is_file():
                raise FileNotFoundError(f"{corpus / 'labels.yaml'}: {name}: no file {path}")
            files.append(score_file(name, lab, *replay(path)))
    return {"splits": {s: summarize([f for f in files if f["split"] == s]) for s in splits}, "files": files}


def table(split: str, s: dict) -> str:
    """The text table of one split's summary."""
    lines = [f"{split}: files read {s['read']}/{s['files']}, events found {s['found']}/{s['labelled']}, "
             f"false alarms {s['false_alarms']}",
             f"  {'category':<12}{'found/labelled':>16}{'false alarms':>14}{'soft found':>12}"]
    for cat, c in s["categories"].items():
        lines.append(f"  {cat:<12}{c['found']:>8}/{c['labelled']:<7}{c['false_alarms']:>14}"
                     f"{c['soft_found']:>7}/{c['soft']:<4}")
    for title, key in (("missed", "misses"), ("false alarms", "false_alarm_files"), ("not read", "unread")):
        if s[key]:
            lines.append(f"  {title}:")
            lines.extend(f"    {x}" for x in s[key])
    return "\n".join(lines)


@click.command()
@click.option("--split", "split", type=click.Choice([*SPLITS, "all"]), default="all", show_default=True,
              help="Which part of the corpus to score.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (summaries and every file's outcome).")
@click.option("--corpus", type=click.Path(file_okay=False, exists=True, path_type=Path), default=CORPUS,
              show_default=True, help="Corpus folder (labels.yaml, tune/ and the heldout*/ folders).")
def main(split: str, as_json: bool, corpus: Path) -> None:
    """Replay every corpus file and print per split: events found / labelled per category, false alarms,
    files read, and the misses by name."""
    t0 = time.perf_counter()
    result = score_corpus(corpus, SPLITS if split == "all" else (split,))
    if as_json:
        click.echo(json.dumps(result))
        return
    click.echo("\n\n".join(table(s, summary) for s, summary in result["splits"].items()))
    click.echo(f"\n({len(result['files'])} files replayed in {time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
