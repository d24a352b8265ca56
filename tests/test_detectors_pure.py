"""The detectors' one source, compiled and not: ``monitor/detectors.py`` run as plain Python (loaded from
its file under another name, or put in the compiled module's place in a fresh interpreter, as an install
without a C compiler has it) decides exactly as the compiled build, record by record."""
import importlib.util
import json
import math
import random
import subprocess
import sys
import types
from pathlib import Path

import pytest

from test_rules import check_window
from training_monitor import detectors
from training_monitor.record import StepRecord
from training_monitor.replay.runner import ReplayError, replay_file
from training_monitor.ruleset import Rules

ROOT = Path(__file__).resolve().parent.parent
LOGS = sorted((ROOT / "tests" / "data" / "reallogs").glob("*/*.log")) + sorted(
    (ROOT.parent / "shared" / "samples").glob("*.log"))

# small windows, so that every rule is judged often in a few thousand records; an int for a float setting
SMALL = {"loss_spike": {"window": 20, "min_history": 5, "shift_steps": 3},
         "grad_norm_spike": {"window": 30, "min_history": 10, "climb_window": 10, "warmup_steps": 5},
         "loss_plateau": {"window": 50, "until_step": 10 ** 6, "warmup_steps": 10},
         "throughput_drop": {"window": 60, "min_history": 10, "min_steps": 5, "min_seconds": 3},
         "low_mfu": {"min_steps": 5, "warmup_steps": 0}, "lr_surge": {"ratio": 2},
         "overflow_storm": {"window": 20}, "loss_scale_collapse": {"window": 30, "max_halvings": 4}}


def source_module():
    """``monitor/detectors.py`` loaded as plain Python (not the installed, compiled module)."""
    path = Path(detectors.__file__).with_name("detectors.py")
    spec = importlib.util.spec_from_file_location("detectors_source", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def records(seed, n=2500):
    """A record stream of every kind the rules judge: noise, spikes, shifts, climbs, NaN, overflows (flagged
    and not), halvings, zero and frozen losses, plateaus, data waits, slow steps, low MFU, LR surges, fields
    missing, ties and steps going back."""
    rng = random.Random(seed)
    out, step, base, scale, lr = [], 0, 6.0, 65536.0, 1e-4
    while len(out) < n:
        mode = rng.choice(["healthy"] * 6 + ["spike", "shift", "grad", "climb", "nan", "storm", "halve", "zero",
                                              "frozen", "plateau", "wait", "slow", "mfu", "lr", "missing", "back"])
        for i in range(rng.randint(20, 120)):
            step += 1 if rng.random() > 0.03 else rng.randint(2, 9)
            base = max(base * 0.999, 2.0) if mode != "plateau" else base
            loss = round(base * (1 + 0.02 * rng.gauss(0, 1)), 3 if rng.random() < 0.3 else 9)
            grad, overflow, wait, time_s, mfu, rate = 1 + 0.1 * rng.random(), False, 0.001, 0.5, 0.45, lr
            if mode == "spike" and i == 10 or mode == "shift" and i > 10:
                loss *= 3.0 if mode == "spike" else 1.3
            elif mode == "grad" and i in (10, 11) or mode == "climb" and i > 5:
                grad *= 40.0 if mode == "grad" else 1 + i / 10
            elif mode == "nan" and i == 5:
                loss, grad = rng.choice([(math.nan, grad), (loss, math.inf), (math.inf, math.nan)])
            elif mode in ("storm", "halve") and i % 3 == 0:
                scale, overflow = scale / 2, True if mode == "storm" else None
            elif mode == "zero" and i > 5 or mode == "frozen":
                loss = 0.0 if mode == "zero" else -0.0 if i % 2 else base
            elif mode in ("wait", "slow") and i > 5:
                wait, time_s = (0.6, 0.5) if mode == "wait" else (0.001, 2.0)
            elif mode == "mfu" and i > 5 or mode == "lr" and i == 8:
                mfu, rate = (0.1, lr) if mode == "mfu" else (0.45, 50 * lr)
            elif mode == "back" and i == 0:
                step = max(1, step - rng.randint(1, 40))
            if mode != "storm" and i % 40 == 39 and scale < 65536.0:
                scale *= 2
            missing = mode == "missing" and rng.random() < 0.5
            out.append(StepRecord(step, loss=None if missing else loss, grad_norm=grad, overflow=overflow,
                                  loss_scale=None if missing else scale, lr=None if missing else rate,
                                  mfu=mfu, tokens=4096, step_time_s=time_s, data_wait_s=wait,
                                  slow_reason="checkpoint" if rng.random() < 0.01 else None))
    return out


def test_the_build_under_test_is_compiled():
    # (the comparisons below would compare the source with itself)
    assert not isinstance(detectors.median, types.FunctionType)
    assert isinstance(source_module().median, types.FunctionType)


def test_the_source_judges_every_stream_exactly_as_the_compiled_build():
    source, fired = source_module(), set()
    for overrides in (None, SMALL):
        rules = Rules(overrides)
        for seed in range(4):
            compiled = detectors.Judge(rules.detectors(), rules.detectors(detectors.EVALUATORS))
            plain = source.Judge(*([table[r.id](r) for r in rules.rules.values() if r.id in table]
                                   for table in (source.DETECTORS, source.EVALUATORS)))
            for k, rec in enumerate(records(seed)):
                if k % 997 == 996:  # the engine's rewind after a rollback
                    compiled.rewind(rec.step - 5)
                    plain.rewind(rec.step - 5)
                hits = compiled.observe(rec)
                assert repr(hits) == repr(plain.observe(rec)), (overrides and "small", seed, rec)
                assert (compiled.went_back, compiled.last_step) == (plain.went_back, plain.last_step)
                fired.update(rule for rule, _ in hits or ())
                if k % 25 == 24 and rec.loss is not None:  # an evaluation: the step's loss, now and then broken
                    loss = rec.loss * (4.0 if k % 300 == 299 else math.nan if k % 500 == 499 else 1.0 + 0.01 * (k % 7))
                    hits = compiled.evaluate(rec.step, loss)
                    assert repr(hits) == repr(plain.evaluate(rec.step, loss)), (overrides and "small", seed, rec)
                    fired.update(rule for rule, _ in hits or ())
    assert fired == set(detectors.DETECTORS) | set(detectors.EVALUATORS)  # every rule was judged firing


def test_the_source_window_keeps_the_compiled_window_s_order():
    source = source_module()
    for lazy in (False, True):
        check_window(source.Window(7, lazy=lazy), random.Random(0))


# replays the corpus with the sources in the compiled modules' places, as an install without a C compiler has
# them: the detectors and the quantile sample from their .py files, no compiled reader (every line through
# its format's parser)
UNCOMPILED = """
import importlib.util, sys, types
from pathlib import Path
package = Path(importlib.util.find_spec("training_monitor").origin).parent  # (found, not imported yet)
sys.modules["training_monitor.replay.scan"] = None  # not built
for name in ("detectors", "replay.sample"):
    path = package.joinpath(*name.split(".")).with_suffix(".py")
    spec = importlib.util.spec_from_file_location("training_monitor." + name, path)
    sys.modules[spec.name] = module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
from training_monitor import engine
from training_monitor.replay import tracks
assert isinstance(engine.Judge.observe, types.FunctionType) and isinstance(tracks.Sample.add, types.FunctionType)
from test_detectors_pure import replayed
print(replayed())
"""


def replayed() -> str:
    """Each log's replay result (or its error), as JSON."""
    out = []
    for path in LOGS:
        try:
            out.append(replay_file(str(path)).to_dict())
        except ReplayError as exc:
            out.append({"error": str(exc)})
    return json.dumps(out, default=repr)


@pytest.mark.slow
def test_an_uncompiled_install_replays_the_corpus_with_the_same_results():
    assert len(LOGS) > 100
    out = subprocess.run([sys.executable, "-c", UNCOMPILED], capture_output=True, text=True, cwd=ROOT / "tests")
    assert out.returncode == 0, out.stderr
    assert "the detectors run uncompiled" in out.stderr  # the one warning at import
    assert json.loads(out.stdout) == json.loads(replayed())
