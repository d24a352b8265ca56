"""How fast ``monitor replay`` reads a long MindFormers log, and the same run as a custom training loop's log,
against ``awk`` pulling the loss out of the same file.

1. ``generate`` (once; cached under ``--out``, by default ``$TMPDIR/replay-speed``): a MindFormers 1.x
   ``MFLossMonitor`` log of a 1,000,000-step pretraining run (282 MB), every step line in the shape and
   number formats the callback prints, behind the logger prefix of
   ``tests/data/mindformers_llama2_13b_normal_01.log``::

       2025-04-07 15:34:29,173 - [mindformers/core/callback/callback.py:529] - INFO - { Epoch:[  1/  2], step:[     2/500000], loss: 10.633, per_step_time: 1752ms, lr: 1e-05, overflow cond: False, loss_scale: 65536.0, global_norm: [4.508834], train_throughput_per_npu: 170.738T

   The run: a noisy decreasing loss (10.6 -> ~1.75, 1.5 % noise), a warm-up + cosine LR, a grad norm
   falling from ~4 to ~0.25 with log-normal noise and healthy one-batch outliers, step times with jitter
   and a slow step at each checkpoint, a dynamic loss scale (65536, x2 after 1000 clean steps, halved on
   each overflow, so it overflows every ~1000 steps as it grows), a progress line every 100 steps and a
   checkpoint line every 5000 (MindFormers versions that print the progress line after every step line
   give a file ~60 % larger, with lines that replay skips at once). Injected faults, each a real way a
   run goes wrong:

   * step 300000: a bad batch region, the loss x1.8 decaying back over ~10 steps (``loss_spike``);
   * step 650000: a NaN loss; MindFormers prints its NaN termination line and the run resumes from the
     step-645000 checkpoint, so steps 645001-650000 appear twice (1,005,000 step lines; ``nan_inf``; the
     engine rewinds);
   * step 820000: the LR x30 for 3 steps (a schedule edit), the grad norm and then the loss surge
     (``grad_norm_spike``);
   * step 900000: 12 overflows in a row, the loss scale halving at each (``overflow_storm``,
     ``loss_scale_collapse``).

   The same run is also written as a custom loop's log (``CUSTOM_LINE``, 1,000,000 step lines of
   ``[2025-04-07 15:34:29] Step 2/1000000 | loss 10.4161 | lr 3.000e-07 | grad_norm 4.864801 | loss_scale
   65536.0 | time 1742ms``, apex's ``Gradient overflow.  Skipping step, ..`` message before an overflowed
   step's line, a line saying the run resumes after the NaN), read by the generic text reader.

2. Time, side by side, interleaved, ``--rounds`` times (median), each a fresh process on the same file:

   * ``awk``: the one-liner a person writes to get the loss column (``awk -F'loss: ' ...``), with the
     system's awk (its name and version are printed);
   * ``monitor replay``: the command line, end to end, all default rules (``monitor replay --json FILE``;
     the JSON is what the fault check below reads);
   * where its time goes, each timed inside its process (no start-up): the same replay (``replay_file``)
     with all default rules, and with every rule turned off (reading, parsing, and the runner's
     per-record work: would-be rollback policy, step-time statistics); the difference is the rules' share
     (the compiled detectors, :mod:`training_monitor.detectors`); and the command on a 5-line log (start-up and
     output). What is left of the end-to-end time is the command's own (JSON of the result, exit).

   and, for the custom loop's log, awk (``awk -F'loss ' ..``), ``monitor replay --json`` and the replay with
   every rule off.

   Each process imports the package's cached bytecode, as a ``pip install``-ed package does (its bytecode
   is written on install), also where ``PYTHONDONTWRITEBYTECODE`` is set, which would have every start-up
   compile the sources anew (about 70 ms). Wall time and CPU time (user + system) are both reported: on a shared machine the CPU time moves
   less. Then the replay's anomalies are checked against the injected faults (each must be caught within
   10 steps of its start) and any other anomaly is listed.

Run: ``.venv/bin/python benchmarks/replay_speed.py [--rounds 5] [--steps 1000000] [--out DIR]``; prints a
Markdown table. ``--steps 100000`` (faults scaled along) for quick runs while iterating.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)

PREFIX = "{date} - [mindformers/core/callback/callback.py:529] - INFO - "
STEP_LINE = ("{{ Epoch:[{epoch:3d}/{epochs:3d}], step:[{step:6d}/{per_epoch:6d}], loss: {loss:5.3f}, "
             "per_step_time: {ms}ms, lr: {lr}, overflow cond: {overflow}, loss_scale: {scale}, "
             "global_norm: [{norm}], train_throughput_per_npu: {tput:.3f}T")
PROGRESS_LINE = "  {pct:4.1f}% |{bar:<50}| {sps:.5f} samples/s/p  {eta} }}"
SAVE_LINE = "......Saving ckpt......, step: {step}, path: ./output/checkpoint/rank_0/llama2_13b_rank_0-{step}_1.ckpt"
NAN_LINE = "The current value of loss is NaN, terminate training."
EPOCHS = 2
# the custom loop: a torch.cuda.amp-style fp16 loop printing its own line (as torchtitan, MiniMind and most
# hand-written loops do) and its scaler's overflow message; read by the generic text reader
CUSTOM_LINE = ("[{date}] Step {step}/{steps} | loss {loss:.4f} | lr {lr:.3e} | grad_norm {norm} | "
               "loss_scale {scale:.1f} | time {ms}ms")
CUSTOM_OVERFLOW = "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to {scale:.1f}"
AWK_PROGRAM = "-F'loss: ' 'NF > 1 { split($2, v, \",\"); print v[1] }'"
AWK_CUSTOM = "-F'loss ' 'NF > 1 { split($2, v, \" \"); print v[1] }'"
FAULT_WINDOW = 10
TINY = os.path.join(ROOT, "tests", "data", "mindformers_llama2_13b_normal_01.log")  # 5 lines: start-up and output


def faults(steps: int) -> dict:
    """Fault name -> its first step, at the same fractions of the run whatever its length."""
    return {"loss_spike": int(steps * 0.30), "nan_inf": int(steps * 0.65), "lr_surge": int(steps * 0.82),
            "overflow_storm": int(steps * 0.90)}


# steps each fault lasts: the spike decays over 10 steps, the surged LR's damage over 3 + 8, 12 overflows
FAULT_STEPS = {"loss_spike": 10, "nan_inf": 1, "lr_surge": 11, "overflow_storm": 12}


def _lr(step: int, steps: int) -> float:
    peak, floor, warm = 3e-4, 3e-5, 2000
    if step <= warm:
        return peak * step / warm
    return floor + 0.5 * (peak - floor) * (1 + math.cos(math.pi * (step - warm) / (steps - warm)))


def _float32_text(x: float) -> str:
    """``x`` as MindFormers prints a float32 learning rate (numpy's shortest repr)."""
    text = f"{x:.8g}"
    return text if ("e" in text or "." in text) else text + ".0"


def generate(path: str, steps: int, seed: int = 0, custom: bool = False) -> None:
    """Write the run's log: MindFormers' lines, or (``custom``) a custom loop's (:data:`CUSTOM_LINE`)."""
    rng = random.Random(seed)
    at = faults(steps)
    resume_from = at["nan_inf"] - steps // 200  # the checkpoint before the NaN
    per_epoch = steps // EPOCHS
    clock = 1744040067.308  # 2025-04-07 15:34:27.308 UTC
    scale, clean = 65536.0, 0
    capacity = 2.0 ** 17  # the scale the gradients can take before overflowing (drifts)
    spike_left, surge_left = 0, 0
    out = []
    tmp = path + ".part"
    with open(tmp, "w") as f:
        step, done_nan = 0, False
        while step < steps:
            step += 1
            t = step
            loss = 1.55 + 8.2 * math.exp(-t / 6000) + 0.9 * (1 + t / 50000) ** -0.5
            loss *= 1 + rng.gauss(0, 0.015)
            norm = (0.25 + 4.0 * math.exp(-t / 150)) * math.exp(rng.gauss(0, 0.15))
            if rng.random() < 0.002:
                norm *= rng.uniform(1.5, 2.5)  # a healthy one-batch outlier (clipped)
            lr = _lr(step, steps)
            ms = int(1752 * (1 + rng.gauss(0, 0.004)))
            if step % 5000 == 0:
                ms += 2900  # the checkpoint save
            if step == at["loss_spike"]:
                spike_left = 10
            if spike_left:
                loss *= 1 + 0.8 * spike_left / 10
                norm *= 1 + 0.3 * spike_left
                spike_left -= 1
            if step == at["lr_surge"]:
                surge_left = 3
            if surge_left:
                lr *= 30
                norm *= 12
                surge_left -= 1
            elif at["lr_surge"] < step <= at["lr_surge"] + 8:
                loss *= 1 + 0.6 * (at["lr_surge"] + 9 - step) / 8  # the surged updates' damage
                norm *= 3
            capacity *= math.exp(rng.gauss(0, 0.01))
            capacity = min(max(capacity, 2.0 ** 15), 2.0 ** 19)
            storm = at["overflow_storm"] <= step < at["overflow_storm"] + 12
            overflow = storm or scale > capacity
            if overflow:
                norm_text = "inf"
                scale_now = scale
                scale = max(scale / 2, 1.0)
                clean = 0
            else:
                norm_text = f"{norm:.6f}"
                scale_now = scale
                clean += 1
                if clean == 1000:
                    scale, clean = scale * 2, 0
            nan = step == at["nan_inf"] and not done_nan
            clock += ms / 1000.0
            date = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(clock)) + f",{int(clock * 1000) % 1000:03d}"
            epoch, in_epoch = (step - 1) // per_epoch + 1, (step - 1) % per_epoch + 1
            if custom:  # the scaler's message comes during the step, before the loop prints the step's line
                if overflow:
                    out.append(CUSTOM_OVERFLOW.format(scale=scale))
                out.append(CUSTOM_LINE.format(date=date[:19], step=step, steps=steps, loss=math.nan if nan else loss,
                                              lr=lr, norm="nan" if nan else norm_text, scale=scale_now, ms=ms))
                if nan:
                    out.append(f"[{date[:19]}] resuming from the checkpoint of step {resume_from} after a NaN loss")
                    step, done_nan = resume_from, True
                continue
            out.append(PREFIX.format(date=date) + STEP_LINE.format(
                epoch=epoch, epochs=EPOCHS, step=in_epoch, per_epoch=per_epoch,
                loss=math.nan if nan else loss, ms=ms, lr=_float32_text(lr), overflow=overflow,
                scale=scale_now, norm="nan" if nan else norm_text, tput=170.738 * 1752 / ms))
            if step % 100 == 0:
                frac = in_epoch / per_epoch
                eta = (per_epoch - in_epoch) * ms / 1000
                out.append(PREFIX.format(date=date) + PROGRESS_LINE.format(
                    pct=100 * frac, bar="\u2588" * int(50 * frac), sps=8 / (ms / 1000),
                    eta=f"{int(eta // 86400)} days, {int(eta % 86400 // 3600)}:{int(eta % 3600 // 60):02d}:"
                        f"{int(eta % 60):02d}"))
            if step % 5000 == 0:
                out.append(PREFIX.format(date=date) + SAVE_LINE.format(step=step))
            if nan:
                out.append(PREFIX.replace("INFO", "ERROR").format(date=date) + NAN_LINE)
                out.append(f"{date} - [mindformers/trainer/base_trainer.py:1012] - INFO - Resuming training from "
                           f"./output/checkpoint/rank_0/llama2_13b_rank_0-{resume_from}_1.ckpt, step {resume_from}")
                step, done_nan = resume_from, True
            if len(out) >= 20000 or custom and len(out) >= 10000:
                f.write("\n".join(out) + "\n")
                out.clear()
        f.write("\n".join(out) + "\n")
    os.replace(tmp, path)


def log_path(out: str, steps: int, custom: bool = False) -> str:
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, f"{'custom' if custom else 'mindformers'}_{steps}_steps.log")
    if not os.path.exists(path):
        print(f"generating {path} ...", file=sys.stderr, flush=True)
        t = time.perf_counter()
        generate(path, steps, custom=custom)
        print(f"  {os.path.getsize(path) / 1e6:.0f} MB in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    return path


# --- the parts, each run in a fresh process (``--part NAME FILE``): prints {"wall": s, "cpu": s} -------------

def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(start: tuple[float, float]) -> dict:
    return {"wall": time.perf_counter() - start[0], "cpu": time.process_time() - start[1]}


def _part_replay(path: str, rules=None) -> dict:
    from training_monitor.replay import runner

    start = _clock()
    res = runner.replay_file(path, rules)
    took = _since(start)
    assert res.steps > 0
    return took


def _part_parse(path: str) -> dict:
    from training_monitor.ruleset import Rules

    return _part_replay(path, Rules({rule: {"enabled": False} for rule in Rules().rules}))


PARTS = {"parse": _part_parse, "inproc": _part_replay}


# --- the side-by-side timing ------------------------------------------------------------------------------

def _awk_name() -> str:
    awk = shutil.which("awk")
    real = os.path.realpath(awk)
    for flag in ("--version", "-W version", "-Wversion"):
        out = subprocess.run(f"{awk} {flag} 2>&1 </dev/null", shell=True, capture_output=True, text=True,
                             check=False)
        first = out.stdout.strip().splitlines()[0] if out.stdout.strip() else ""
        if out.returncode == 0 and first and "not an option" not in first:
            return f"{awk} -> {real}: {first}"
    return f"{awk} -> {real}"


def _timed(cmd, **kw):
    """(wall seconds, CPU seconds of the child, completed process)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if out.returncode != 0:
        raise SystemExit(f"{cmd}: exit {out.returncode}\n{out.stderr[-2000:]}")
    return wall, cpu, out


def check(events: list, steps: int) -> tuple[list, list]:
    """(lines saying which injected fault was caught by what, anomalies that match no fault). A fault is
    caught by an anomaly of its rules within 10 steps of its first step; the anomalies of those rules until
    10 steps after its last step are its own too (e.g. the level shift as a spike decays)."""
    at = faults(steps)
    want = {"loss_spike": ("loss_spike", "grad_norm_spike"), "nan_inf": ("nan_inf",),
            "lr_surge": ("grad_norm_spike", "loss_spike"), "overflow_storm": ("overflow_storm", "loss_scale_collapse")}
    lines, used = [], set()
    for fault, step in at.items():
        hits = [(i, e) for i, e in enumerate(events)
                if e["rule"] in want[fault] and step <= e["step"] <= step + FAULT_STEPS[fault] + FAULT_WINDOW]
        used.update(i for i, _ in hits)
        got = ", ".join(f"{e['rule']} at {e['step']} (onset {e['onset_step']}, {e['source']})" for _, e in hits)
        caught = any(e["step"] <= step + FAULT_WINDOW for _, e in hits)
        lines.append(f"{fault} injected at steps {step}-{step + FAULT_STEPS[fault] - 1}: " + (got or "none")
                     + ("" if caught else " -> MISSED"))
    other = [e for i, e in enumerate(events) if i not in used]
    return lines, other


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "replay-speed"))
    ap.add_argument("--part", choices=sorted(PARTS), help=argparse.SUPPRESS)
    ap.add_argument("file", nargs="?", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.part:
        print(json.dumps(PARTS[args.part](args.file)))
        return
    path = log_path(args.out, args.steps)
    custom = log_path(args.out, args.steps, custom=True)
    py = sys.executable
    monitor = os.path.join(os.path.dirname(py), "monitor")
    awk_out = os.path.join(args.out, "loss.txt")
    contenders = {
        "awk": f"awk {AWK_PROGRAM} '{path}' > '{awk_out}'",
        "replay": [monitor, "replay", "--json", path],
        "inproc": [py, __file__, "--part", "inproc", path],
        "parse": [py, __file__, "--part", "parse", path],
        "start-up": [monitor, "replay", "--json", TINY],
        "awk custom": f"awk {AWK_CUSTOM} '{custom}' > '{awk_out}.custom'",
        "replay custom": [monitor, "replay", "--json", custom],
        "parse custom": [py, __file__, "--part", "parse", custom],
    }
    # each process imports the package's bytecode as an installed package has it (pip compiles it on install),
    # not the sources compiled anew, as they are where PYTHONDONTWRITEBYTECODE is set; a first run writes it
    env = {**os.environ, "PYTHONPYCACHEPREFIX": os.path.join(args.out, "pycache")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    _timed(contenders["start-up"], env=env)
    wall = {k: [] for k in contenders}
    cpu = {k: [] for k in contenders}
    load = [os.getloadavg()[0]]
    replay_out = custom_out = None
    for r in range(args.rounds):
        for name, cmd in contenders.items():
            w, c, out = _timed(cmd, shell=isinstance(cmd, str), env=env)
            if name in PARTS:  # timed inside: without start-up
                w, c = json.loads(out.stdout)["wall"], json.loads(out.stdout)["cpu"]
            elif name == "replay":
                replay_out = out.stdout
            elif name == "replay custom":
                custom_out = out.stdout
            wall[name].append(w)
            cpu[name].append(c)
        load.append(os.getloadavg()[0])
        print(f"round {r + 1}/{args.rounds}: " + ", ".join(f"{k} {wall[k][-1]:.2f} s" for k in wall),
              file=sys.stderr, flush=True)
    with open(awk_out) as f:
        awk_lines = sum(1 for _ in f)
    res = json.loads(replay_out)
    size = os.path.getsize(path)
    med_w = {k: statistics.median(v) for k, v in wall.items()}
    med_c = {k: statistics.median(v) for k, v in cpu.items()}
    best = {k: min(v) for k, v in wall.items()}
    print(f"{size / 1e6:.0f} MB, {res['lines']} lines, {res['steps']} step records "
          f"(awk printed {awk_lines} losses); {_awk_name()}; Python {sys.version.split()[0]}; {os.cpu_count()} CPUs, "
          f"load average (1 min) {min(load):.2f}-{max(load):.2f} during the runs; median of {args.rounds} "
          f"interleaved rounds; Python bytecode cached, as installed")
    print(f"awk program: awk {AWK_PROGRAM} FILE > loss.txt")
    print()
    print("| what | wall s | vs awk | CPU s | vs awk (CPU) | µs per line (CPU) | fastest round: wall s, vs awk |")
    print("|---|---|---|---|---|---|---|")
    rows = [("awk: the loss field", "awk"), ("`monitor replay`, all default rules (CLI, end to end)", "replay")]
    for label, key in rows:
        w, c = med_w[key], med_c[key]
        print(f"| {label} | {w:.2f} | {w / med_w['awk']:.1f}x | {c:.2f} | {c / med_c['awk']:.1f}x | "
              f"{1e6 * c / res['lines']:.2f} | {best[key]:.2f}, {best[key] / best['awk']:.1f}x |")
    rows = [("of which: reading, parsing, runner (replay with every rule off)", med_w["parse"], med_c["parse"]),
            ("of which: the rules (replay with all default rules, minus the above)",
             *(m["inproc"] - m["parse"] for m in (med_w, med_c))),
            ("of which: start-up and output (`monitor replay` of a 5-line log)", med_w["start-up"],
             med_c["start-up"]),
            ("of which: the rest (the command's own: JSON of the result, exit; noise)",
             *(m["replay"] - m["inproc"] - m["start-up"] for m in (med_w, med_c)))]
    for label, w, c in rows:
        print(f"| {label} | {w:.2f} | {w / med_w['awk']:.1f}x | {c:.2f} | {c / med_c['awk']:.1f}x | "
              f"{1e6 * c / res['lines']:.2f} | |")
    cres = json.loads(custom_out)
    print()
    print(f"The same run as a custom loop's log ({os.path.getsize(custom) / 1e6:.0f} MB, {cres['lines']} lines, "
          f"{cres['steps']} step records), read by the generic text reader:")
    print()
    print("| what | wall s | vs awk | CPU s | vs awk (CPU) | µs per line (CPU) | fastest round: wall s, vs awk |")
    print("|---|---|---|---|---|---|---|")
    for label, key in (("awk: the loss field", "awk custom"),
                       ("`monitor replay`, all default rules (CLI, end to end)", "replay custom"),
                       ("of which: reading, parsing, runner (replay with every rule off)", "parse custom")):
        w, c = med_w[key], med_c[key]
        print(f"| {label} | {w:.2f} | {w / med_w['awk custom']:.1f}x | {c:.2f} | {c / med_c['awk custom']:.1f}x | "
              f"{1e6 * c / cres['lines']:.2f} | {best[key]:.2f}, {best[key] / best['awk custom']:.1f}x |")
    missed = False
    for title, result in (("MindFormers log", res), ("custom-loop log", cres)):
        lines, other = check(result["anomalies"], args.steps)
        print()
        print(f"Injected faults, {title} (caught within 10 steps):")
        for line in lines:
            print(f"- {line}")
        print(f"Other anomalies: {len(other)}" + "".join(
            f"\n- {e['rule']} at step {e['step']} (onset {e['onset_step']}): {e['message']}" for e in other))
        missed = missed or any(line.endswith("MISSED") for line in lines)
    if missed:
        sys.exit(1)


if __name__ == "__main__":
    main()
