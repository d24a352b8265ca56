"""The ``monitor`` command: ``monitor replay``, ``dashboards``, ``relay``, and the commands of installed
plug-ins (``monitor demo``: :mod:`training_monitor.demo`)."""
from __future__ import annotations

import json
import os
import sys
from dataclasses import fields
from datetime import datetime
from importlib import import_module
from typing import NoReturn

import click

from .detectors import SEVERITIES
from .log import logger, to_stderr
from .policy import RollbackSettings
from .replay import ReplayError, replay_paths
from .replay.runner import PARSERS
from .replay.sources import shown
from .replay.summary import as_dict, as_text, count
from .ruleset import Rules, RulesError

COMMANDS = "training_monitor.commands"  # entry point group of more commands, e.g. `monitor demo`
PLOT_RANKS = 16  # ranks plotted in the --html report, all logs together (the others are in its tables)


def fail(message: str) -> NoReturn:
    """``monitor: error: MESSAGE`` on stderr, and exit with status 2."""
    click.echo(f"monitor: error: {message}", err=True)
    sys.exit(2)


def _declared():
    """The commands installed packages declare (:data:`COMMANDS`). importlib.metadata is imported here, not at the
    top: the built-in commands start without it."""
    from importlib.metadata import entry_points

    return entry_points(group=COMMANDS)


class _Commands(click.Group):
    """The commands defined here and those that installed packages declare in the entry point group
    :data:`COMMANDS` (each a click command, imported when it is run or listed by ``--help``)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *_declared().names})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if (command := super().get_command(ctx, name)) is not None:
            return command
        declared = _declared()
        if name not in declared.names:
            return None
        point = declared[name]
        try:
            return point.load()
        except ImportError as exc:
            fail(f"cannot load the command {name!r} ({point.value}): {exc}")


@click.group(cls=_Commands)
@click.option("--log-level", default="INFO", show_default=True, help="Level of messages on stderr.",
              type=click.Choice(["TRACE", "DEBUG", "INFO", "SUCCESS", "WARNING", "ERROR", "CRITICAL"],
                                case_sensitive=False))
def main(log_level: str) -> None:
    """Training observability and stability monitor for MindSpore / MindFormers."""
    to_stderr(log_level.upper())


def _start_time(ctx, param, value):
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        raise click.BadParameter(f"{value!r} is neither Unix seconds nor an ISO 8601 date-time") from None


def _rollback_options(command):
    """One ``--name`` option per :class:`~training_monitor.policy.RollbackSettings` field (its default, bounds and
    ``doc``); the command receives them as keyword arguments named as the fields."""
    for f in reversed(fields(RollbackSettings)):
        m = f.metadata
        kind = click.IntRange if f.type == "int" else click.FloatRange
        bounds = {"min_open": True} if m.get("min_open") else {}
        command = click.option(f"--{f.name.replace('_', '-')}", f.name, default=f.default, show_default=True,
                               type=kind(m.get("min"), m.get("max"), **bounds),
                               help=f"Would-be rollbacks: {m['doc']}.")(command)
    return command


@main.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--format", "fmt", default="auto", show_default=True, type=click.Choice(["auto", *PARSERS]),
              help="Log format, or auto to detect (the format most of the first 5000 lines have).")
@click.option("--rules", "rules_path", type=click.Path(), help="Rules YAML (default: the shipped rules).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
@_rollback_options
@click.option("--html", "html_path", type=click.Path(dir_okay=False),
              help="Write a self-contained HTML report (plots, anomalies, would-be rollbacks) to this file.")
@click.option("--openmetrics", "om_path", type=click.Path(dir_okay=False),
              help="Write the series as OpenMetrics text with timestamps, for "
                   "'promtool tsdb create-blocks-from openmetrics FILE DATA_DIR'.")
@click.option("--run", "run_label", help="OpenMetrics: the run label (default: each log's file name stem).")
@click.option("--start-time", callback=_start_time, metavar="TIME",
              help="OpenMetrics: start of runs whose lines carry no time (Unix seconds or ISO 8601; "
                   "default: now minus the run's duration).")
@click.option("--scrape-interval", default=15.0, show_default=True, type=click.FloatRange(0),
              help="OpenMetrics: seconds of run time between two points of the counters and histograms "
                   "(0: every step; gauges are written at every step).")
@click.option("--progress/--no-progress", default=None,
              help="Progress bar on stderr (default: when stderr is a terminal or the input is over 1 GiB).")
@click.option("--fail-on", default="never", show_default=True, type=click.Choice(["never", *SEVERITIES]),
              help="Exit with status 1 when an anomaly of this severity or a higher one was found (a CI gate).")
def replay(paths, fmt, rules_path, as_json, html_path, om_path, run_label, start_time, scrape_interval, progress,
           fail_on, **rollback):
    """Run logged training runs through the rules and report the anomalies, what the rollback policy would
    have done, and step time / TPS / MFU.

    PATHS are log files (gzip too), folders of per-rank logs (output/log/ with rank_N/ folders), or - for
    standard input. Each log is replayed through its own engine per rank.
    """
    from .replay.runner import ReplayOptions

    if html_path:
        try:
            import_module("plotly")
        except ImportError:
            fail("--html needs plotly: pip install 'training-monitor[replay]'")
    writer = None
    try:
        rules = Rules.load(rules_path)
        if om_path:
            from .openmetrics import OpenMetricsWriter

            writer = OpenMetricsWriter(om_path, scrape_interval, start_time, rules.rules)
        options = ReplayOptions(**rollback, plot_ranks=PLOT_RANKS if html_path else 0, openmetrics=writer,
                                run=run_label)
        results = replay_paths(paths, rules, fmt, options, progress)
        if writer is not None:
            done, writer = writer.close(), None
            click.echo(f"wrote {done['path']}: {done['samples']} samples of {done['series']} series, "
                       f"{done['bytes']} bytes; load it with: promtool tsdb create-blocks-from openmetrics "
                       f"{done['path']} DATA_DIR", err=True)
        if html_path:
            from .report import write_html

            size = write_html(results, html_path, {"checkpoint interval": options.checkpoint_every or "not given",
                                                   "healthy after": options.healthy_after,
                                                   "LR factor": options.lr_factor,
                                                   "max rollbacks": options.max_rollbacks,
                                                   "margin": options.rollback_margin})
            click.echo(f"wrote {html_path}: {size} bytes", err=True)
    except (ReplayError, RulesError) as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"{exc.filename or html_path or om_path}: cannot write: {exc.strerror or exc}")
    finally:
        if writer is not None:
            writer.discard()
    click.echo(json.dumps(as_dict(results)) if as_json else as_text(results))
    for left_out in dict.fromkeys(r.left_out for r in results if r.left_out):
        click.echo(f"note: monitor output folder: replayed its record logs (every step as the live engine saw it) "
                   f"with the event logs' events found outside them (the weights check's, the watchdog's); "
                   f"left out the other views of the same run (name one to replay it): "
                   f"{', '.join(map(shown, left_out))}", err=True)
    history = rules.rules["loss_spike"].params["min_history"]
    for r in results:
        if 0 < r.steps <= history:
            click.echo(f"note: {r.path} has {r.steps} step records; with fewer than {history} earlier ones the "
                       f"spike rules report only unambiguous excursions (lower min_history with --rules to judge "
                       f"more)", err=True)
    failing = 0 if fail_on == "never" else sum(SEVERITIES.index(e.severity) >= SEVERITIES.index(fail_on)
                                               for r in results for e in r.events)
    if failing:
        click.echo(f"monitor replay: exit status 1: {count(failing, 'anomaly', 'anomalies')} of severity {fail_on} "
                   f"or higher (--fail-on {fail_on})", err=True)
        sys.exit(1)


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
    from .dashboards import default_runbook_base
    from .grafana import PushError, push

    token = os.environ.get("GRAFANA_TOKEN", "")
    if not token.strip():
        fail("set GRAFANA_TOKEN to a Grafana service-account token (Editor role) to push dashboards")
    try:
        answers = push(url, token.strip(), folder=folder, overwrite=overwrite, runbook_base=runbook_base,
                       timeout=timeout)
    except PushError as exc:
        fail(str(exc))
    for a in answers:
        click.echo(f"{a['title']}: {a['url']} (version {a['version']})")
    base = runbook_base or default_runbook_base()
    if not base.startswith(("http://", "https://")):
        click.echo(f"note: the dashboards' runbook links are relative ({base}/<rule>.md), which Grafana opens under "
                   "its own URL; pass --runbook-base with the URL where the runbooks are served", err=True)


@main.command()
@click.option("--config", "config_path", required=True, type=click.Path(),
              help="YAML file with the alerts settings (sinks; see the README's Alerts section).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=9095, show_default=True, type=click.IntRange(0, 65535), help="Port to listen on.")
@click.option("--allow-unauthenticated", is_flag=True,
              help="Listen on a non-loopback address without credentials (MONITOR_RELAY_TOKEN, or "
                   "MONITOR_RELAY_USER and MONITOR_RELAY_PASSWORD).")
def relay(config_path, host, port, allow_unauthenticated):
    """Forward Alertmanager webhooks (POST /alerts) to Feishu, DingTalk, WeCom, Slack...

    Callers must send the bearer token of MONITOR_RELAY_TOKEN or the basic-auth user and password of
    MONITOR_RELAY_USER / MONITOR_RELAY_PASSWORD when those are set."""
    import signal

    from .alerts import AlertsConfig
    from .relay import Relay, RelayError
    from .schema import ConfigError

    try:
        config, problems = AlertsConfig.load(config_path)
    except ConfigError as exc:
        fail(str(exc))
    for problem in problems:
        logger.error(problem)
    if not config.sinks:
        fail(f"{config_path}: no usable alert sink")
    try:
        server = Relay(config, host, port, allow_unauthenticated=allow_unauthenticated)
    except RelayError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    logger.info("relay on http://{}:{}/alerts -> {} ({})", host, server.port, ", ".join(server.sender.sinks),
                "credentials required" if server.auth.required else "no credentials required")
    try:
        server.serve_forever()
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        logger.info("relay stopped: {}", server.close())


if __name__ == "__main__":
    main()
