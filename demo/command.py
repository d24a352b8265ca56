"""The ``monitor demo`` command (entry point ``demo`` of the group ``training_monitor.commands``)."""
from __future__ import annotations

import contextlib
import json
import os
import sys

import click

from training_monitor.cli import fail

from .faults import Fault


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


@click.command()
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
@click.option("--alerts", "alerts_path", type=click.Path(exists=True, dir_okay=False),
              help="YAML file with alert settings (sinks): the demo's events are sent there too.")
@click.option("--file-sd-dir", type=click.Path(file_okay=False), help="Folder where the demo writes its Prometheus "
              "file_sd target while it runs, as a training job's file_sd_dir (deploy/prometheus/prometheus.yml).")
@click.option("--peak-tflops", type=click.FloatRange(min=0, min_open=True), help="Peak TFLOP/s of the device, so "
              "MFU is exported (a CPU has no entry in the peak table).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object with the outcome on stdout.")
def demo(steps, faults, port, data, output_dir, use_mf, alerts_path, file_sd_dir, peak_tflops, as_json):
    """Train a small decoder-only LM on CPU with real MindSpore, monitored, and show detection -> rollback."""
    late = [f"{f.kind}@{f.step}" for f in faults if f.step > steps]
    if late:
        raise click.BadParameter(f"{', '.join(late)} is past the last step ({steps})", param_hint="--inject")
    try:
        from training_monitor.callbacks.demo import run_demo
    except ImportError as exc:
        fail(f"the demo needs MindSpore: pip install '.[mindspore]' ({exc})")
    try:
        with _stdout_to_stderr():  # MindFormers logs to stdout: keep stdout for the result
            summary = run_demo(steps=steps, faults=faults, port=port, data=data, output_dir=output_dir,
                               use_mindformers=use_mf, alerts=alerts_path, file_sd_dir=file_sd_dir,
                               peak_tflops=peak_tflops)
    except (ValueError, OSError) as exc:
        fail(str(exc))
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
        if summary["stop_reason"]:
            click.echo(f"  stopped  {summary['stop_reason']}")
        click.echo(f"event log: {summary['event_log']}")
        if summary["mindformers_log"]:
            click.echo(f"MindFormers log: {summary['mindformers_log']}  "
                       f"(try: .venv/bin/monitor replay {summary['mindformers_log']})")
    if summary["stop_reason"]:
        fail(summary["stop_reason"])
