"""Trainer messages about the run failing, read from public logs (lines copied exactly; source above each):
a skipped AMP step with its scales, a trainer's own non-finite loss check, the process crashing; and the
log shapes of the heldout6 batch: a name-value block under its counter line, Lightning's CSV metrics."""
from __future__ import annotations

import math

from test_replay_text import read
from training_monitor.record import StepRecord
from training_monitor.replay import replay_file, text
from training_monitor.replay.base import Report
from training_monitor.replay.fields import lookup


def reports(lines):
    """The reports of ``lines``, those held for a step line that never came included (the runner publishes them
    at the end)."""
    parser = text.Parser()
    return [r for r in read(lines, parser) if isinstance(r, Report)] + parser.held


def _write(tmp_path, lines, name="run.log"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_paddlenlp_optimizer_not_run_marks_the_next_step_overflowed_with_the_scale_it_ran_with():
    # PaddlePaddle/PaddleNLP pull request #10413, turn 2 (PaddleNLP Trainer, AMP O2)
    lines = [
        "[2025-04-24 15:19:26,044] [    INFO] - loss: 1.44202387, learning_rate: 0.0, global_step: 3, current_memory_allocated: 15.395037412643433, current_memory_reserved: 16.195343732833862, max_memory_allocated: 16.186050415039062, max_memory_reserved: 16.195343732833862, interval_runtime: 0.3833, interval_samples_per_second: 2.609, interval_steps_per_second: 2.609, ppl: 4.229246606564234, progress_or_epoch: 0.006",  # noqa: E501
        "[2025-04-24 15:19:26,426] [ WARNING] - optimizer not run, scale_before: 4096.0, scale_after: 2048.0",
        "[2025-04-24 15:19:26,429] [    INFO] - loss: 5.85809898, learning_rate: 0.0, global_step: 4, current_memory_allocated: 15.395037412643433, current_memory_reserved: 16.195343732833862, max_memory_allocated: 16.186050415039062, max_memory_reserved: 16.195343732833862, interval_runtime: 0.3853, interval_samples_per_second: 2.5952, interval_steps_per_second: 2.5952, ppl: 350.05804374322315, progress_or_epoch: 0.008",  # noqa: E501
    ]
    recs = read(lines)
    assert [(r.step, r.loss, r.overflow, r.loss_scale) for r in recs] == [
        (3, 1.44202387, None, None), (4, 5.85809898, True, 4096.0)]


def test_the_paddlenlp_scale_halving_excerpt_is_an_overflow_at_its_step():
    # tests/data/reallogs/tune/paddlenlp_lora_optimizer_not_run_scale_halving_7537.log: 0.25 -> 0.125 -> 0.0625
    res = replay_file("tests/data/reallogs/tune/paddlenlp_lora_optimizer_not_run_scale_halving_7537.log")
    assert res.steps == 2
    assert [(e.rule, e.step) for e in res.events] == [("loss_scale_collapse", 18)]


def test_tensorflow_nan_tensor_hook_is_a_nan_report_after_the_last_step():
    # tensorflow/models issue #8549, description (TF Estimator, NanTensorHook)
    lines = [
        "I0521 14:43:59.269938 140033274427136 basic_session_run_hooks.py:260] loss = 1.3336712, step = 400 (85.220 sec)",
        "E0521 14:44:30.800493 140033274427136 basic_session_run_hooks.py:760] Model diverged with loss = NaN.",
        "",
        "tensorflow.python.training.basic_session_run_hooks.NanLossDuringTrainingError: NaN loss during training.",
    ]
    items = read(lines)
    assert [(r.step, r.loss) for r in items if isinstance(r, StepRecord)] == [(400, 1.3336712)]
    assert [(r.rule, r.step) for r in items if isinstance(r, Report)] == [("nan_inf", 400)]  # once: the same check


def test_a_log_of_nothing_but_its_nan_check_is_read(tmp_path):
    # JiDong-CS/icme2019-bytedance-grand-challenge issue #14, description
    path = _write(tmp_path, [
        "INFO:tensorflow:Saving checkpoints for 0 into finish/model.ckpt.",
        "I0410 22:34:06.100261 4483055104 basic_session_run_hooks.py:606] Saving checkpoints for 0 into finish/model.ckpt.",  # noqa: E501
        "ERROR:tensorflow:Model diverged with loss = NaN.",
        "E0410 22:34:13.729731 4483055104 basic_session_run_hooks.py:760] Model diverged with loss = NaN.",
        "tensorflow.python.training.basic_session_run_hooks.NanLossDuringTrainingError: NaN loss during training. ",
    ])
    res = replay_file(path)
    assert (res.steps, res.reports) == (0, 1) and [(e.rule, e.step) for e in res.events] == [("nan_inf", 0)]


def test_pytorch_anomaly_detection_and_keras_terminate_on_nan_are_nan_reports():
    # PyTorch's anomaly mode (torch.autograd.set_detect_anomaly / Lightning detect_anomaly=True), as quoted in
    # pytorch issue threads; Keras TerminateOnNaN: bricewalker/Hey-Jetson issue #7, description
    anomaly = reports(["RuntimeError: Function 'LogSoftmaxBackward0' returned nan values in its 0th output."])
    assert [(r.rule, r.step) for r in anomaly] == [("nan_inf", 0)] and "LogSoftmaxBackward0" in anomaly[0].message
    keras = reports(["1883/3455 [===============>..............] - ETA: 2:39:53 - loss: nan     Batch 1882: Invalid loss, terminating training"])  # noqa: E501
    assert [r.rule for r in keras] == ["nan_inf"]


def test_a_segmentation_fault_after_steps_is_a_crash_after_the_last_step():
    # mindspore-lab/mindyolo issue #242, turn 0 (MindYOLO on Ascend 910A, OpenMPI's signal handler)
    lines = [
        "  2023-11-03 17:50:49,472 [INFO] Epoch 2/100, Step 600/924, imgsize (640, 640), loss: 5.2299, lbox: 1.3107, lcls: 2.3511, dfl: 1.5682, ",  # noqa: E501
        "   cur_lr: 0.05046505108475685",
        "  2023-11-03 17:50:49,478 [INFO] Epoch 2/100, Step 600/924, step time: 305.22 ms",
        "  [m2301007135:374576] *** Process received signal ***",
        "  [m2301007135:374576] Signal: Segmentation fault (11)",
        "  [m2301007135:374576] Signal code: Address not mapped (1)",
        "  [m2301007135:374576] Failing at address: 0x55d64a257900",
        "  [m2301007135:374576] [ 0] /lib/x86_64-linux-gnu/libpthread.so.0(+0x14420)[0x7fcd5a700420]",
    ]
    assert [r.step for r in read(lines) if isinstance(r, StepRecord)] == [1524]
    crashes = reports(lines)  # epoch 2 of 924 steps, step 600
    assert [(r.rule, r.step) for r in crashes] == [("trainer_crash", 1524)]  # once for the handler's lines
    assert "Process received signal" in crashes[0].message


def test_cann_error_codes_and_shell_segfaults_are_crashes_and_a_log_of_them_is_read(tmp_path):
    # hiyouga/LlamaFactory issue #3779, description (torch_npu); Tencent/KsanaLLM issue #9, description
    lines = [
        "05/17/2024 01:30:26 - INFO - llmtuner.model.adapter - Fine-tuning method: LoRA",
        "[E OpParamMaker.cpp:273] call aclnnCast failed, detail:EZ9999: Inner Error!",
        "EZ9999: 2024-05-17-01:30:26.960.959  Op Cast does not has any binary.",
        "        TraceBack (most recent call last):",
    ]
    crash = reports(lines)
    assert [(r.rule, r.step) for r in crash] == [("trainer_crash", 0)] and "EZ9999: Inner Error!" in crash[0].message
    shell = reports(["[FATAL]  Acl return errort  .../KsanaLLM/3rdparty/LLM_kernels/csrc/kernels/ascend/attention/attention.cc:140, with ERROR 561103",  # noqa: E501
                  "", "Segmentation fault (core dumped)"])
    assert [r.rule for r in shell] == ["trainer_crash"]
    res = replay_file(_write(tmp_path, lines))
    assert [(e.rule, e.severity) for e in res.events] == [("trainer_crash", "critical")]


def test_what_is_no_crash():
    # glog severity prefixes (E0526 ...), warning-level CANN codes, HCCL timeouts (stalls), plain words
    lines = [
        "E0526 15:34:12.011717 140569525946176 basic_session_run_hooks.py:760] Saving checkpoints for 0",
        "W11001: 2024-05-21-11:57:54.167.645 Op [x] does not hit the high-priority operator information library",
        "step 1 loss 2.5 lr 0.1",
        "the SIGNAL handler was installed; segmentation of the data: faulty rows 0",
    ]
    assert reports(lines) == []
    # the CANN code line of a runtime timeout's error block (torch_npu, tests/test_replay_formats.py's EH9999)
    timeout = reports(["worker-1: EH9999: Inner Error!",
                       "worker-1:         rtDeviceSynchronize execute failed, reason=[task timeout][FUNC:FuncErrorReason][FILE:error_message_manage.cc][LINE:53]"])  # noqa: E501
    assert [r.rule for r in timeout] == ["stall"]
    hccl = reports(["EI0006: [PID: 176930] 2025-07-01-00:40:04.135.732 Getting socket times out. Reason: Remote Rank did not send the data in time."])  # noqa: E501
    assert [r.rule for r in hccl] == ["stall"]


def test_a_name_value_block_under_its_counter_line_is_at_that_count():
    # apoorvnandan/speech-recognition-primer issue #2 (tests/data/reallogs/tune/speech_primer_ctc_loss_nan_epoch8_2.log)
    res = replay_file("tests/data/reallogs/tune/speech_primer_ctc_loss_nan_epoch8_2.log")
    assert res.steps == 4 and [(e.rule, e.step) for e in res.events] == [("nan_inf", 8)]
    recs = read(["Epoch    :  5", "LOSS     :  24.569025", "", "called epoch end, epoch num:  5", "Epoch    :  6",
                 "LOSS     :  20.572273"])
    assert [(r.step, r.loss) for r in recs] == [(5, 24.569025), (6, 20.572273)]


def test_a_keras_bar_counts_the_batches_of_the_epoch_its_header_names():
    # keras-team/keras-tuner issue #442, description: Keras prints `Epoch 5/10`, then a bar line per batch
    lines = ["Epoch 5/10",
             "   1/1500 [..............................] - ETA: 0s - loss: 2.2759 - accuracy: 0.2188",
             "   2/1500 [..............................] - ETA: 46s - loss: nan - accuracy: 0.1719  ",
             "Epoch 6/10",
             "   1/1500 [..............................] - ETA: 0s - loss: 2.2759 - accuracy: 0.2188"]
    recs = [r for r in read(lines) if isinstance(r, StepRecord)]
    assert [r.step for r in recs] == [6001, 6002, 7501]  # (epoch - 1) x 1500 + the bar's count
    assert math.isnan(recs[1].loss)


def test_lightning_step_and_epoch_suffixed_losses_are_the_step_loss_and_its_average():
    # Lightning's self.log(..., on_step=True, on_epoch=True) names `<name>_step` and `<name>_epoch`
    # (Lightning-AI/pytorch-lightning issue #4143: `valid_loss_step/epoch`); IceClear/StableSR issue #161's header
    assert lookup("train/loss_step")[0] == "loss" and lookup("loss_epoch")[0] == "loss_average"
    assert lookup("train/loss_simple_step")[0] == "loss_other"
    assert lookup("loss at step") is None  # words apart: a phrase
    res = replay_file("tests/data/reallogs/tune/stablesr_lightning_csv_metrics_healthy_161.log")
    assert res.format == "csv" and res.steps == 13 and res.events == []
    assert text.detect("train_loss_step: 0.25 global_step: 49")


def test_bare_step_loss_pairs_are_read_only_in_a_log_of_them():
    # prajdabre/yanmtt issue #7, description (tests/data/reallogs/tune/yanmtt_bart_pretrain_bare_step_loss_nan_7.log)
    res = replay_file("tests/data/reallogs/tune/yanmtt_bart_pretrain_bare_step_loss_nan_7.log")
    assert res.steps == 9 and [(e.rule, e.step) for e in res.events][0] == ("nan_inf", 76980)
    recs = read(["...", "76930 2.6496577", "76940 2.59109", "Saving the model", "76980 nan"])
    assert [(r.step, r.loss) for r in recs if isinstance(r, StepRecord)][:2] == [(76930, 2.6496577), (76940, 2.59109)]
    # no such pair: two counts (an image size), a count that does not rise, anything more on the line, and any
    # bare pair in a log that names its steps
    assert [r for r in read(["640 480", "1000 0.5", "999 0.4", "12 0.5 0.7", "13 0.5 ms"]) if isinstance(r, StepRecord)
            ] == [StepRecord(1000, loss=0.5)]
    named = read(["step 1 loss 2.5", "step 2 loss 2.4", "   3 0.25", "   4 0.5"])
    assert [r.step for r in named] == [1, 2]
