"""The real-log corpus (``tests/data/reallogs/``): ``monitor replay`` against what a careful reader names in
each public excerpt (``labels.yaml``; sources in ``SOURCES.md``).

The scoring is ``benchmarks/real_logs.py --json``, run once in its own process (it replays every file with
the ``monitor replay --json`` command line). Each file must be read (exit status 0, at least
``min_records`` step records), every ``must`` event of its labels found at its step, and nothing its
``must_not`` names raised. ``KNOWN_FAILING`` lists the files that assertion fails on today; they are
strict xfails, so a file that starts passing fails the run until its name is taken out of the list.
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "reallogs"
LABELS = yaml.safe_load((CORPUS / "labels.yaml").read_text(encoding="utf-8"))

# the team's shared samples (both tables of shared/samples/README.md), kept in tune/
SHARED_SAMPLES = frozenset({
    "mindformers_glm6b_finetune_overflow_01.log", "mindformers_llama2_13b_normal_01.log",
    "mindformers_llama31_8b_gradnorm_skip_01.log", "megatron_lm_gpt2_345m_normal_01.log",
    "megatron_ds_tr1_13b_spike_lossscale_01.log", "hf_deepspeed_trainer_normal_01.log",
    "deepspeed_zero2_overflow_storm_01.log", "deepspeed_overflow_collapse_07.log", "fairseq_min_loss_scale_10.log",
    "nanogpt_nan_14.log", "torchtitan_healthy_17.log", "olmo_loss_zero_18.log", "colossalai_found_inf_nan_24.log",
    "mindspore-msrun_healthy_29.log", "mindocr_nan_31.log", "custom_nan_33.log", "custom-minimind_healthy_36.log",
})

# files the full assertion fails on with the replay of this commit (not read, an event missed, or a false alarm)
KNOWN_FAILING = frozenset({
    "apex_yolact_scale_collapse_359.log",
    "bert_dle_squad_tqdm_1107.log",
    "bigdl_loss_infinity_1486.log",
    "bigscience_bloom_eval_hang_45000.log",
    "bigscience_bloom_gradnorm_spike_31216.log",
    "bigscience_bloom_wrapped_tflops_drop_42783.log",
    "bigscience_tr8_104b_gradnorm_spike_11447.log",
    "bigscience_tr8_104b_spike_6930.log",
    "bigscience_tr8_104b_spike_7010.log",
    "bigscience_tr8b_resume_overflow_17060.log",
    "cellpose_epoch_healthy_450.log",
    "colossalai_found_inf_nan_24.log",
    "custom-minimind_healthy_36.log",
    "custom_bloodcells_nan_15.log",
    "custom_gradnorm_tf_nan_17.log",
    "custom_nan_33.log",
    "custom_tinyllm_nan_high_step_31.log",
    "deepspeed_fused_min_scale_697.log",
    "deepspeed_hf_overflow_storm_534.log",
    "deepspeed_overflow_collapse_07.log",
    "deepspeed_t5_min_scale_14531.log",
    "fairseq_early_healthy_940.log",
    "fairseq_epoch_overflow_low_scale_506.log",
    "fairseq_min_loss_scale_10.log",
    "fairseq_old_epoch_steps_healthy_301.log",
    "fairseq_scale_collapse_515.log",
    "hf_dict_gradnorm_nan_loss_jump_ric20.log",
    "hf_dict_gradnorm_spike_unsloth5207.log",
    "hf_ppo_nan_chatglm49.log",
    "hf_viewer_watchdog_llamafactory8261.log",
    "litgpt_frozen_loss_689.log",
    "litgpt_lora_healthy_1055.log",
    "llamafactory_jsonl_trainer_log_774.log",
    "llamafactory_npu_overflow_storm_8514.log",
    "lmops_wrapped_overflow_130.log",
    "maxtext_absl_startup_4847.log",
    "megatron_ds_tr1_13b_spike_lossscale_01.log",
    "megatron_llm_bad_gradnorm_pr34.log",
    "megatron_lm_gpt2_345m_normal_01.log",
    "metaseq_json_startup_507.log",
    "mindformers_glm6b_finetune_overflow_01.log",
    "mindocr_nan_31.log",
    "mindocr_noisy_loss_670.log",
    "mindspore-msrun_healthy_29.log",
    "mindyolo_loss_spike_402.log",
    "minfm_threshold_skip_4.log",
    "mlx_cuda_healthy_330.log",
    "mlx_lora_slow_healthy_210.log",
    "mlx_mixtral_healthy_557.log",
    "mlx_val_interleaved_18.log",
    "mlx_vlm_orpo_healthy_795.log",
    "mlx_vlm_tqdm_mixed_261.log",
    "mmdet_nan_once_5911.log",
    "mmocr_fp16_gradnorm_nan_32.log",
    "nanogpt_nan_14.log",
    "nanotron_resumed_healthy_390.log",
    "nanovlm_nan_from_start_187.log",
    "nemo_lightning_watchdog_118369.log",
    "olmo_loss_zero_18.log",
    "paddle_multicard_nan_11659.log",
    "paddleslim_nan_1582.log",
    "torchtitan_dup_ranks_2389.log",
    "torchtitan_healthy_17.log",
    "torchtitan_rank_prefix_healthy_3393.log",
})


@pytest.fixture(scope="module")
def score():
    """``benchmarks/real_logs.py --json`` of the whole corpus: ``{"splits": .., "files": {name: outcome}}``."""
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "real_logs.py"), "--json"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    return {"splits": out["splits"], "files": {f["file"]: f for f in out["files"]}}


def test_corpus_files_labels_and_sources_agree():
    on_disk = {p.name: split for split in ("tune", "heldout") for p in (CORPUS / split).iterdir()}
    assert on_disk == {name: lab["split"] for name, lab in LABELS.items()}
    sources = (CORPUS / "SOURCES.md").read_text(encoding="utf-8")
    assert [n for n in on_disk if f"| `{n}` |" not in sources] == []
    assert SHARED_SAMPLES <= {n for n, s in on_disk.items() if s == "tune"}
    gathered = [s for n, s in on_disk.items() if n not in SHARED_SAMPLES]
    assert len(on_disk) >= 50 and 0.3 <= gathered.count("heldout") / len(gathered) <= 0.5
    assert KNOWN_FAILING <= set(on_disk)


def _check(outcome: dict):
    assert outcome["read"], (f"not read: exit {outcome['exit_code']} {outcome['error']}, "
                             f"{outcome['records']} records (at least {outcome['min_records']} expected)")
    assert outcome["missed"] == [], f"missed {outcome['missed']}; replay reported {outcome['events']}"
    assert outcome["false_alarms"] == {}, f"false alarms {outcome['false_alarms']}"


def _mark(names):
    return [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason="known to fail today"))
            if n in KNOWN_FAILING else n for n in sorted(names)]


@pytest.mark.parametrize("name", _mark(SHARED_SAMPLES))
def test_shared_sample(score, name, record_property):
    record_property("outcome", json.dumps(score["files"][name]))
    _check(score["files"][name])


@pytest.mark.parametrize("name", _mark(set(LABELS) - SHARED_SAMPLES))
def test_corpus_file(score, name, record_property):
    record_property("outcome", json.dumps(score["files"][name]))
    _check(score["files"][name])


def test_split_scores_add_up_the_files(score, record_property):
    """The per-split table the benchmark prints is the sum of its files' outcomes."""
    for split, summary in score["splits"].items():
        record_property(split, json.dumps({k: summary[k] for k in ("found", "labelled", "false_alarms", "read",
                                                                   "files")}))
        files = [f for f in score["files"].values() if f["split"] == split]
        assert summary["files"] == len(files) == sum(lab["split"] == split for lab in LABELS.values())
        assert summary["read"] == sum(f["read"] for f in files)
        assert summary["found"] == sum(len(f["found"]) for f in files)
        assert summary["labelled"] == sum(len(LABELS[f["file"]].get("must", [])) for f in files)
        assert summary["false_alarms"] == sum(len(f["false_alarms"]) for f in files)
        assert len(summary["misses"]) == summary["labelled"] - summary["found"]
