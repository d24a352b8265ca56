"""MindFormers' own Trainer, from a YAML, launched like ``run_mindformer.py --register_path``: a tiny legacy
LlamaForCausalLM on CPU, CheckpointMonitor with retention, MindFormers' NaN check on, and a NaN injected."""
import json
import math
import re
import subprocess
import sys
from pathlib import Path
from string import Template

import numpy as np
import pytest

from conftest import require

require("mindformers")  # installed by the README's set-up (extra "mindformers")

from training_monitor import callbacks  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.mindspore]

TESTS = Path(__file__).parent
STEP_LINE = re.compile(r"step:\[\s*(\d+)/\s*\d+\], loss:\[\s*([^/]+)/.*?lr: ([0-9.e-]+)")


def write_mindrecord(path: Path, rows: int, width: int) -> None:
    from mindspore.mindrecord import FileWriter

    writer = FileWriter(str(path), shard_num=1, overwrite=True)
    writer.add_schema({"input_ids": {"type": "int32", "shape": [-1]}}, "tokens")
    rng = np.random.default_rng(0)
    writer.write_raw_data([{"input_ids": rng.integers(1, 256, width).astype(np.int32)} for _ in range(rows)])
    writer.commit()


def write_config(tmp_path: Path, edit=lambda text: text) -> Path:
    """tests/data/mindformers/llama_tiny.yaml for ``tmp_path``, changed by ``edit``, over 200 rows of seq_length + 1
    = 33 token ids (the model shifts the labels inside), batch 2: 100 steps."""
    write_mindrecord(tmp_path / "data.mindrecord", 200, 33)
    config = tmp_path / "llama_tiny.yaml"
    config.write_text(edit(Template((TESTS / "data" / "mindformers" / "llama_tiny.yaml").read_text()).substitute(
        data=tmp_path / "data.mindrecord", output=tmp_path / "output", monitor_output=tmp_path / "monitor")))
    return config


def trainer(tmp_path: Path, config: Path, *options: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TESTS / "jobs" / "mindformers_trainer.py"), "--config", str(config),
                           "--register_path", callbacks.MINDFORMERS_REGISTER_PATH, *options],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)


def test_trainer_yaml_register_path_nan_rolls_back_to_a_checkpoint_monitor_file_with_the_lr_halved(tmp_path):
    out, mon_out = tmp_path / "output", tmp_path / "monitor"
    run = trainer(tmp_path, write_config(tmp_path), "--nan-at", "50")
    assert run.returncode == 0, run.stderr[-4000:]
    # MindFormers' TrainingStateMonitor (check_for_nan_in_loss_and_grad) was in the list and did not end the run
    assert "TrainingStateMonitor raises on a NaN/Inf loss or norm: the monitor judges each step first" in run.stderr

    log = [json.loads(line) for line in open(mon_out / "events_rank0.jsonl")]
    # NaN weights make the step's gradients NaN: the loss-scale cell flags an overflow and skips the update, so
    # the loss's event asks for no rollback (one bad batch would look the same); the weights check before
    # step 45's checkpoint is promoted finds them NaN: the rollback, from the step after the last check (45)
    nan = [(e["step"], e["onset_step"], e["source"], e["actions"]) for e in log if e.get("rule") == "nan_inf"]
    assert nan == [(50, 50, "rule", ["alert"]), (50, 46, "monitor", ["alert", "rollback"])]
    (rb,) = [e for e in log if e.get("action") == "rollback"]
    # CheckpointMonitor saved every 5 steps (keeping 3); 45 was still pending (healthy_after 5) at the NaN
    assert rb["to_step"] == 40 and rb["checkpoint"] == str(out / "checkpoint" / "rank_0" / "tiny_rank_0-1_40.ckpt")

    # MFLossMonitor's own lines: the LR printed after the rollback is half the LR of the same global step before
    lines = (out / "log" / "rank_0" / "info.log").read_text().splitlines()
    printed = {int(m[1]): (float(m[2]), float(m[3])) for m in map(STEP_LINE.search, lines) if m}
    assert math.isnan(printed[50][0]) and all(math.isfinite(printed[s][0]) for s in range(51, 101))
    assert printed[51][1] == pytest.approx(0.5 * printed[41][1], rel=1e-5)  # step 51 redoes global step 41
    # the Trainer's total_steps (100) reached the cosine schedule inside ScaledLearningRate
    assert printed[45][1] == pytest.approx(1e-4 + 0.5 * 9e-4 * (1 + math.cos(math.pi * 44 / 100)), rel=1e-5)

    records = (mon_out / "records_rank0.csv").read_text().splitlines()
    header = records[0].split(",")
    first = dict(zip(header, records[1].split(",")))
    assert int(first["tokens"]) == 2 * 32  # batch x seq_length, not x 33
    # no model in the monitor's entry: the FLOPs per token from the network's LlamaConfig (MFU exported)
    flops = float(re.search(r"MFU from the network's model config: ([0-9.e+]+) FLOPs per token", run.stderr)[1])
    row = dict(zip(header, records[-1].split(",")))
    tps = float(row["tokens"]) / (float(row["step_time_s"]) + float(row["data_wait_s"] or 0)
                                  + float(row["callbacks_s"] or 0))  # the step's whole period
    assert float(row["mfu"]) == pytest.approx(flops * tps / 0.05e12, rel=1e-3)  # (flops printed to 4 digits)
    assert len(records) == 1 + 100


def test_a_resume_with_a_dynamic_loss_scale_rolls_back_onto_a_checkpoint_saved_before_it(tmp_path):
    # fp16-style training: a DynamicLossScaleUpdateCell; MindFormers' resume makes its value a parameter of the
    # network (loss_scaling_manager.loss_scale_value), which the checkpoints saved before the restart lack
    pattern = str(tmp_path / "output" / "checkpoint" / "rank_{rank}" / "*.ckpt")
    config = write_config(tmp_path, lambda text: text.replace(
        "  scale_sense: 1.0\n", "  scale_sense:\n    type: DynamicLossScaleUpdateCell\n    loss_scale_value: 4096\n"
        "    scale_factor: 2\n    scale_window: 1000\n").replace(
        "    output_dir:", f"    resume_from: {pattern}\n    output_dir:"))
    first = trainer(tmp_path, config, "--kill-at", "32")
    assert first.returncode == -9, first.stderr[-4000:]
    # the entry names resume_from on a first start too: nothing saved there yet is no failure
    assert "no checkpoint saved there yet" in first.stderr and " ERROR " not in first.stderr, first.stderr[-4000:]
    events = tmp_path / "monitor" / "events_rank0.jsonl"
    assert "resume_failed" not in events.read_text()

    # resumed at step 30 (its newest checkpoint); the weights blow up 3 steps later: the rollback lands on the
    # newest checkpoint healthy then, step 25's, saved before the restart, and training goes on to its end
    resumed = trainer(tmp_path, config, "--resume", "--blowup-at", "3")
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert "resumed run" in resumed.stderr and "from step 30 " in resumed.stderr, resumed.stderr[-4000:]
    (rb,) = [e for e in map(json.loads, events.read_text().splitlines()) if e.get("action") == "rollback"]
    assert (rb["at_step"], rb["to_step"]) == (33, 25)
    assert rb["checkpoint"].endswith("tiny_rank_0-1_25.ckpt")
    assert "holds no loss_scaling_manager.loss_scale_value: the current loss scale is kept" in resumed.stderr

    # the same entry on a start afresh (no resume_training): the network does not hold that checkpoint's weights,
    # so the old run's detectors and checkpoints are not taken up
    fresh = trainer(tmp_path, config)
    assert fresh.returncode == 0, fresh.stderr[-4000:]
    assert "the trainer did not resume from it" in fresh.stderr and "resumed run" not in fresh.stderr
    assert "rolled back" not in fresh.stderr
