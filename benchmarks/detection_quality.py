"""Detection quality of the default rules against peers' rules, on curves from real training runs.

1. ``generate``: real MindSpore training on CPU (TinyLM through MindFormers' ``MFTrainOneStepCell``, so
   loss, grad norm and loss scale are the real ones), healthy runs at several seeds and learning rates
   and runs with a real fault injected at a labelled step:
   * ``lr_surge``: the learning rate x30 for 3 steps (a bad schedule edit: every copy of the schedule
     changes, the optimizer's and the one ``MFTrainOneStepCell`` logs, so the record's LR is the one applied);
   * ``nan_batch``: one batch whose loss mask holds a NaN (a corrupted sample);
   * ``noise_batch``: one batch of random bytes (a garbled shard);
   * ``fp16_overflow``: in a half-precision run (``auto_mixed_precision(net, "O2")``, dynamic loss
     scale), the loss scale jumps to 2^30 (a stale scaler state restored with a checkpoint), so the fp16
     gradients overflow step after step while the scale halves back down.
   Healthy half-precision runs (with their periodic overflow when the scale grows) are among the healthy runs.
   Each run's curve is the monitor's own record log (rollback off), labelled in ``manifest.json``.
2. ``evaluate``: every detector reads the same curves. Ours: the shipped rules through the engine
   (``monitor replay`` of the record log). Peers, implemented here only, from their published rules:
   OLMo-core (value > mean + 6 sd of the last 128, loss or grad norm), ZClip (grad-norm EMA z-score > 2.5,
   alpha 0.97, 25 warm-up steps), Lightning SpikeDetection (|loss - mean of last 10| >= 2 x that mean, or
   NaN), Megatron-LM (loss >= 10 x max of the first 100, or NaN), MindFormers (global norm >= 3.0, or NaN).
   A fault counts as detected when an alarm falls in [inject step, inject step + 10]; latency is the
   alarm step minus the inject step; false alarms are alarms on healthy runs (and before the fault),
   per 10k steps.

Run: ``.venv/bin/python benchmarks/detection_quality.py [--out DIR] [--quick] [--seeds 12,13,14] [--details]``;
prints a Markdown table and the ``throughput_drop`` warnings on the healthy runs. Each trained run is kept in
``--out`` (default ``$TMPDIR/detection-quality``) and not trained again, so a rule change is scored in
seconds. The shipped rules were tuned on seeds 0-14; other seeds check them on runs they were not tuned on.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
from collections import deque
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

WINDOW = 10
KINDS = ("lr_surge", "nan_batch", "noise_batch", "fp16_overflow")
# how each fault is injected (in a run's cache key: a run injected otherwise is trained again)
FAULTS = {"lr_surge": "lr x30 for 3 steps, logged", "nan_batch": "NaN in a loss mask",
          "noise_batch": "random bytes", "fp16_overflow": "loss scale 2^30"}
OUR_RULES = {"nan_inf", "lr_surge", "loss_spike", "grad_norm_spike", "overflow_storm", "loss_scale_collapse",
             "loss_degenerate"}


def generate(out: Path, quick: bool, seeds: tuple[int, ...] = (0, 1, 2)) -> dict:
    os.environ.setdefault("LOG_MF_PATH", str(out / "mf_log"))
    os.environ.setdefault("LOCAL_DEFAULT_PATH", str(out / "mf_out"))
    import mindformers  # noqa: F401  (before set_context: its import resets the mode)
    import mindspore as ms
    import numpy as np
    from mindspore import Parameter, Tensor, nn, ops
    from mindspore.train import Callback, Model

    from training_monitor.callbacks import ScaledLearningRate, TrainingMonitor, mindformers_train_step
    from training_monitor.callbacks.tinylm import ByteWindows, TinyLM, load_corpus, make_dataset
    from training_monitor.ruleset import Rules

    class Source(ByteWindows):
        noise: set = set()

        def __getitem__(self, i):
            ids, mask = super().__getitem__(i)
            if i in self.noise:
                ids = np.random.default_rng(i).integers(0, 256, ids.shape).astype(np.int32)
            return ids, mask

    class Surge(nn.learning_rate_schedule.LearningRateSchedule):
        def __init__(self, lr):
            super().__init__()
            self.lr = lr
            self.factor = Parameter(Tensor(1.0, ms.float32), name="surge", requires_grad=False)

        def construct(self, global_step):
            return self.lr * self.factor

    class Inject(Callback):
        def __init__(self, kind, cell, step):
            super().__init__()
            self.kind, self.cell, self.step = kind, cell, step
            # the optimizer's schedule and MFTrainOneStepCell's copy of it (the one it logs)
            self.factors = [c.factor for _, c in cell.cells_and_names() if isinstance(c, Surge)]

        def on_train_step_begin(self, run_context):
            n = run_context.original_args().cur_step_num  # the step about to run
            if self.kind == "lr_surge" and n in (self.step, self.step + 3):
                for factor in self.factors:
                    ops.assign(factor, Tensor(30.0 if n == self.step else 1.0, ms.float32))
            if self.kind == "fp16_overflow" and n == self.step:
                ops.assign(self.cell.scale_sense, Tensor(2.0 ** 30, ms.float32))

    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    corpus = load_corpus()
    seeds = seeds[:2] if quick else seeds
    healthy_steps = 600 if quick else 1200
    # the fault runs first (shorter), then the healthy ones
    runs = [(f"{kind}_s{s}", kind, s, 1e-3, 500, 300 + 37 * (s % 5)) for kind in KINDS for s in seeds]
    runs += [(f"healthy_s{s}_lr{lr:g}", None, s, lr, healthy_steps, None) for s in seeds for lr in (3e-4, 1e-3)]
    runs += [(f"healthy_fp16_s{s}", None, s, 1e-3, healthy_steps, None) for s in seeds]
    no_rules = {rule: {"enabled": False} for rule in Rules().rules}
    manifest = {}
    for name, kind, seed, lr, steps, at in runs:
        run_dir = out / name
        entry = {"kind": kind, "seed": seed, "lr": lr, "steps": steps, "inject_step": at,
                 "records": str(run_dir / "records_rank0.csv"), "fault": FAULTS.get(kind)}
        done = run_dir / "run.json"  # written last: a run cut short is trained again
        if done.exists() and json.loads(done.read_text()) == entry:
            manifest[name] = entry
            continue
        ms.set_seed(seed)
        source = Source(corpus, 32, 8, steps, seed)
        if kind == "nan_batch":
            source.poison = {at - 1}
        if kind == "noise_batch":
            source.noise = {at - 1}
        net = TinyLM(seq_len=32, hidden=48, layers=1, heads=4)
        half = "fp16" in name
        if half:
            net = ms.amp.auto_mixed_precision(net, "O2")
        surge = Surge(lr)
        opt = nn.AdamWeightDecay(net.trainable_params(), learning_rate=ScaledLearningRate(surge))
        cell = mindformers_train_step(net, opt, use_clip_grad=True, max_grad_norm=1.0,
                                      scale_sense=nn.DynamicLossScaleUpdateCell(2.0 ** (16 if half else 12), 2,
                                                                                50 if half else 200))
        if run_dir.exists():
            shutil.rmtree(run_dir)
        # the curve is the record log; the rules read it afterwards (so a rule change needs no new training)
        mon = TrainingMonitor(run=name, output_dir=str(run_dir), metrics_port=None, rollback=False, watchdog=False,
                              tokens_per_step=8 * 32, exit_on_stop=False, rules=no_rules)
        callbacks = [mon] + ([Inject(kind, cell, at)] if kind in ("lr_surge", "fp16_overflow") else [])
        Model(cell).train(1, make_dataset(source), callbacks=callbacks, dataset_sink_mode=False)
        mon.close()
        done.write_text(json.dumps(entry))
        manifest[name] = entry
        print(f"generated {name}", file=sys.stderr)
    return manifest


# ---- peers' rules, as published (see the module docstring) -------------------------------------------
def olmo_core(recs):
    hist = {"loss": deque(maxlen=128), "grad_norm": deque(maxlen=128)}
    for r in recs:
        for field, q in hist.items():
            x = getattr(r, field)
            if x is None:
                continue
            if len(q) >= 20:  # plain arithmetic, as torch does it: a NaN in the window makes mean and sd NaN
                mean = sum(q) / len(q)
                sd = math.sqrt(sum((v - mean) ** 2 for v in q) / len(q))
                if x > mean + 6 * sd:
                    yield r.step
            q.append(x)


def zclip(recs, alpha=0.97, z_max=2.5, warmup=25):
    mean = var = None
    for n, r in enumerate(r for r in recs if r.grad_norm is not None):
        g = r.grad_norm
        if mean is None:
            mean, var = g, 0.0
            continue
        if n >= warmup and var > 0 and (g - mean) / math.sqrt(var) > z_max:
            yield r.step
        mean, var = alpha * mean + (1 - alpha) * g, alpha * var + (1 - alpha) * (g - mean) ** 2


def lightning(recs):
    last = deque(maxlen=10)
    for r in recs:
        if r.loss is None:
            continue
        if not math.isfinite(r.loss):
            yield r.step
            continue
        if len(last) == 10:
            mean = sum(last) / 10
            if abs(r.loss - mean) >= 2 * mean:
                yield r.step
        last.append(r.loss)


def megatron(recs):
    first = []
    for r in recs:
        if r.loss is None:
            continue
        if not math.isfinite(r.loss) or (len(first) == 100 and r.loss >= 10 * max(first)):
            yield r.step
        elif len(first) < 100:
            first.append(r.loss)


def mindformers_norm(recs):
    for r in recs:
        if (r.grad_norm is not None and (not math.isfinite(r.grad_norm) or r.grad_norm >= 3.0)) or \
                (r.loss is not None and not math.isfinite(r.loss)):
            yield r.step


def ours(path, rules=OUR_RULES):
    from training_monitor.replay import replay_file

    return [e.step for e in replay_file(path).events if e.rule in rules]


def throughput_warnings(manifest: dict) -> str:
    """``throughput_drop`` events on the healthy runs (their only slowdowns are the machine's)."""
    runs = [r for r in manifest.values() if r["inject_step"] is None]
    hits = sum(len(ours(r["records"], {"throughput_drop"})) for r in runs)
    return f"throughput_drop warnings on the {len(runs)} healthy runs: {hits}"


def evaluate(manifest: dict, details: bool = False) -> str:
    from training_monitor.replay import csvlog

    def records(path):
        p = csvlog.Parser()
        return [x for x in (p.feed(line) for line in open(path)) if x is not None]

    peers = {"OLMo-core 6 sd / 128": olmo_core, "ZClip z > 2.5": zclip, "Lightning 2x mean of 10": lightning,
             "Megatron 10x max of first 100": megatron, "MindFormers norm >= 3.0": mindformers_norm}
    detectors = {"this monitor (default rules)": ours, **{k: (lambda path, f=f: list(f(records(path))))
                                                           for k, f in peers.items()}}
    kinds = KINDS
    rows = []
    for name, detect in detectors.items():
        hits = {k: [] for k in kinds}
        false_alarms = healthy_steps = 0
        for run_name, run in manifest.items():
            alarms = sorted(set(detect(run["records"])))
            at = run["inject_step"]
            if at is None:
                false = alarms
                healthy_steps += run["steps"]
            else:
                false = [a for a in alarms if a < at]
                healthy_steps += at - 1
                caught = [a - at for a in alarms if at <= a <= at + WINDOW]
                hits[run["kind"]].append(caught[0] if caught else None)
                if details and detect is ours:
                    print(f"{run_name}: fault at {at}, latency {caught[0] if caught else 'missed'}", file=sys.stderr)
            false_alarms += len(false)
            if details and detect is ours and false:
                print(f"{run_name}: false alarms at {false}", file=sys.stderr)
        cells = []
        for k in kinds:
            caught = [x for x in hits[k] if x is not None]
            lat = f"{max(caught)}" if caught else "-"
            cells.append(f"{len(caught) / len(hits[k]):.2f} / {lat}")
        rows.append(f"| {name} | " + " | ".join(cells) + f" | {10000 * false_alarms / healthy_steps:.1f} |")
    head = ("| detector | LR surge | NaN batch | garbled batch | fp16 overflow | false alarms / 10k healthy steps |\n"
            "|---|---|---|---|---|---|")
    return head + "\n" + "\n".join(rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "detection-quality"),
                    help="folder for the trained curves; a run already there is not trained again "
                         "(default: $TMPDIR/detection-quality)")
    ap.add_argument("--quick", action="store_true", help="fewer and shorter runs")
    ap.add_argument("--seeds", default="0,1,2", help="seeds of the runs (the shipped thresholds were set on "
                    "0-14; see the README for the seeds held out)")
    ap.add_argument("--details", action="store_true", help="list each fault's latency and each false alarm on stderr")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    manifest = generate(out, args.quick, tuple(int(x) for x in args.seeds.split(",")))
    healthy = sum(r["steps"] for r in manifest.values() if r["inject_step"] is None)
    print(f"{len(manifest)} runs (seeds {args.seeds}), {healthy} healthy-run steps; fault window {WINDOW} steps; "
          f"cells: recall / worst latency in steps\n")
    print(evaluate(manifest, args.details))
    print("\n" + throughput_warnings(manifest))


if __name__ == "__main__":
    main()
