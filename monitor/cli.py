"""The ``monitor`` command: ``monitor demo`` and ``monitor replay``."""
from __future__ import annotations

import contextlib
import json
import os
import sys

import click
from loguru import logger

from .faults import Fault
from .replay import ReplayError, replay_paths
from .replay.summary import as_dict, as_text
from .replay.runner import PARSERS
from .rules import Rules, RulesError


def _fail(message: str) -> None:
    click.echo(f"monitor: error: {message}", err=True)
    sys.exit(2)


@click.group()
@click.option("--log-level", default="INFO", show_default=True, help="Level of messages on stderr.",
              type=click.Choice(["TRACE", "DEBUG", "INFO", "SUCCESS", "WARNING", "ERROR", "CRITICAL"],
                                case_sensitive=False))
def main(log_level: str) -> None:
    """Training observability and stability monitor for MindSpore / MindFormers."""
    logger.remove()
    logger.add(sys.stderr, level=log_level.upper())


@contextlib.contextmanager
def _stdout_to_stderr():
    """Send everything written to file descriptor 1 (Python or C code) to stderr meanwhile."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _parse_fault(ctx, param, values):
    try:
        return [Fault.parse(v) for v in values]
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@main.command()
@click.option("--steps", default=300, show_default=True, type=click.IntRange(min=1), help="Training steps.")
@click.option("--inject", "faults", multiple=True, callback=_parse_fault, metavar="KIND@STEP",
              help="Inject a fault: nan@STEP (poisoned batch) or spike@STEP (learning-rate surge). Repeatable.")
@click.option("--port", default=9400, show_default=True, type=click.IntRange(0, 65535),
              help="Port for /metrics (0: any free port).")
@click.option("--data", type=click.Path(exists=True, dir_okay=False), help="Text file to train on "
              "(default: the Python documentation text shipped with CPython).")
@click.option("--output-dir", default="demo_output", show_default=True, help="Event log, ledger, checkpoints.")
@click.option("--mindformers/--no-mindformers", "use_mf", default=None,
              help="Train through MindFormers' MFTrainOneStepCell (default: when mindformers is installed).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object with the outcome on stdout.")
def demo(steps, faults, port, data, output_dir, use_mf, as_json):
    """Train a small decoder-only LM on CPU with real MindSpore, monitored, and show detection -> rollback."""
    late = [f"{f.kind}@{f.step}" for f in faults if f.step > steps]
    if late:
        raise click.BadParameter(f"{', '.join(late)} is past the last step ({steps})", param_hint="--inject")
    try:
        from callbacks.demo import run_demo
    except ImportError as exc:
        _fail(f"the demo needs MindSpore: pip install '.[mindspore]' ({exc})")
    try:
        with _stdout_to_stderr():  # MindFormers logs to stdout: keep stdout for the result
            summary = run_demo(steps=steps, faults=faults, port=port, data=data, output_dir=output_dir,
                               use_mindformers=use_mf)
    except (ValueError, OSError) as exc:
        _fail(str(exc))
    if as_json:
        click.echo(json.dumps(summary))
    else:
        click.echo(f"trained {summary['trainer_steps']} steps through {summary['step_cell']}; "
                   f"final step {summary['steps']}, final loss {summary['final_loss']:.4f}")
        for e in summary["anomalies"]:
            value = e["value"] if isinstance(e["value"], str) else f"{e['value']:.4g}"
            click.echo(f"  anomaly  {e['rule']:<16} step {e['step']:>5} (onset {e['onset_step']}) "
                       f"value {value}  -> {', '.join(e['actions'])}")
        for r in summary["rollbacks"]:
            click.echo(f"  rollback step {r['at_step']} -> healthy checkpoint at step {r['to_step']}, "
                       f"LR x{r['lr_scale']} (now x{r['lr_multiplier']:g} of the schedule)")
        click.echo(f"event log: {summary['event_log']}")
        if summary["mindformers_log"]:
            click.echo(f"MindFormers log: {summary['mindformers_log']}  "
                       f"(try: .venv/bin/monitor replay {summary['mindformers_log']})")
    if summary["stop_reason"]:
        _fail(summary["stop_reason"])


@main.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--format", "fmt", default="auto", show_default=True, type=click.Choice(["auto", *PARSERS]),
              help="Log format, or auto to detect (the format most of the first 5000 lines have).")
@click.option("--rules", "rules_path", type=click.Path(), help="Rules YAML (default: the shipped rules).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def replay(paths, fmt, rules_path, as_json):
    """Run logged training runs through the rules and report the anomalies.

    PATHS are log files (gzip too), folders of per-rank logs (output/log/ with rank_N/ folders), or - for
    standard input. Each log is replayed through its own engine per rank.
    """
    try:
        rules = Rules.load(rules_path)
        results = replay_paths(paths, rules, fmt)
    except (ReplayError, RulesError) as exc:
        _fail(str(exc))
    click.echo(json.dumps(as_dict(results)) if as_json else as_text(results))


@main.group()
def dashboards():
    """Grafana dashboards built from code."""


@dashboards.command("generate")
@click.option("--out", default="dashboards", show_default=True, type=click.Path(file_okay=False),
              help="Folder for the JSON files.")
def dashboards_generate(out):
    """Write the dashboards' JSON files (committed in dashboards/)."""
    from .dashboards import generate

    os.makedirs(out, exist_ok=True)
    for path in generate(out):
        click.echo(str(path))


@dashboards.command("push")
@click.option("--url", envvar="GRAFANA_URL", show_envvar=True, required=True,
              help="Grafana's base URL, e.g. http://grafana.example:3000.")
@click.option("--folder", help="Title (or uid) of the Grafana folder for the dashboards; created when missing "
              "(default: the General folder).")
@click.option("--overwrite", is_flag=True, help="Replace dashboards of the same uid already on the server.")
@click.option("--runbook-base", help="URL where runbooks/<rule>.md are served (the dashboards' runbook links; "
              "default: the rules' runbook_base).")
@click.option("--timeout", default=10.0, show_default=True, type=click.FloatRange(min=0.1),
              help="Seconds to wait for each answer.")
def dashboards_push(url, folder, overwrite, runbook_base, timeout):
    """Upload the dashboards to Grafana with the API token in the environment variable GRAFANA_TOKEN
    (a service-account token with the Editor role)."""
    from .grafana import PushError, push

    token = os.environ.get("GRAFANA_TOKEN", "")
    if not token.strip():
        _fail("set GRAFANA_TOKEN to a Grafana service-account token (Editor role) to push dashboards")
    try:
        answers = push(url, token.strip(), folder=folder, overwrite=overwrite, runbook_base=runbook_base,
                       timeout=timeout)
    except PushError as exc:
        _fail(str(exc))
    for a in answers:
        click.echo(f"{a['title']}: {a['url']} (version {a['version']})")


@main.command()
@click.option("--config", "config_path", required=True, type=click.Path(),
              help="YAML file with the alerts settings (sinks; see monitor/alerts/config.py).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=9095, show_default=True, type=click.IntRange(0, 65535), help="Port to listen on.")
def relay(config_path, host, port):
    """Forward Alertmanager webhooks (POST /alerts) to Feishu, DingTalk, WeCom, Slack..."""
    import signal

    from .alerts import AlertsConfig
    from .config import ConfigError
    from .relay import Relay

    try:
        config, problems = AlertsConfig.load(config_path)
    except ConfigError as exc:
        _fail(str(exc))
    for problem in problems:
        logger.error(problem)
    if not config.sinks:
        _fail(f"{config_path}: no usable alert sink")
    try:
        server = Relay(config, host, port)
    except OSError as exc:
        _fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    logger.info("relay on http://{}:{}/alerts -> {}", host, server.port, ", ".join(server.sender.sinks))
    try:
        server.serve_forever()
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        logger.info("relay stopped: {}", server.close())


if __name__ == "__main__":
    main()
