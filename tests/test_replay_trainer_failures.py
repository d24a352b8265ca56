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
    assert [r.step for r in read(lines) if isinstance(r, StepRecord)] == [600]  # as printed in the excerpt's epoch
    crashes = reports(lines)
    assert [(r.rule, r.step) for r in crashes] == [("trainer_crash", 600)]  # once for the handler's lines
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


# A MindSpore cluster node that stopped answering its heartbeat is a stall, at its rank: msrun's summary (candle-org/
# MindAct issue #1983, the corpus file msrun_deepseek_distill_910a_time_out_nodes_1983.log; msrun logs the list even
# when it is empty, mindspore/parallel/cluster/process_entity/_api.py `_analyze_log`), and the lines msrun reads it
# from, the scheduler's (meta_server_node.cc `UpdateTopoState`) and a worker's (compute_graph_node.cc `Heartbeat`).
# A worker exiting with an exception is a crash (MindAct issue #1893: `Worker process .. exit with exception.`),
# the timeout that follows its end.
def test_mindspore_cluster_timed_out_nodes_are_stalls_and_a_worker_exit_is_a_crash(tmp_path):
    msrun = [
        "[WARNING] ME(162078:281473590168608,MainProcess):2025-03-10-09:40:12.444.000 [mindspore/parallel/cluster/process_entity/_api.py:318] There's worker exits with exception, kill all other workers.",  # noqa: E501
        "[ERROR] ME(162078:281473590168608,MainProcess):2025-03-10-09:40:38.720.000 [mindspore/parallel/cluster/process_entity/_api.py:331] Scheduler process 162146 exit with exception.",  # noqa: E501
        "[ERROR] ME(162078:281473590168608,MainProcess):2025-03-10-09:40:38.722.000 [mindspore/parallel/cluster/process_entity/_api.py:431] Time out nodes are ['3']",  # noqa: E501
    ]
    assert [(r.rule, r.step, r.rank) for r in reports(msrun)] == [("stall", 0, 3)]  # the crash was the timeout's end
    res = replay_file(_write(tmp_path, msrun))  # a log of such lines only is read
    assert [(e.rule, e.rank) for e in res.events] == [("stall", 3)] and "node(s) 3 timed out" in res.events[0].message
    cluster = ["The node: 5 is timed out. It may exit with exception, please check this node's log.",
               "The total number of timed out node is 1. Timed out node list is: [5], worker 5 is the first one timed "
               "out, please check its log.",
               "The node: 5 is timed out.",
               "The state of the cluster is error, total nodes num: 8, abnormal nodes num: 1"]
    assert [(r.rule, r.rank) for r in reports(cluster)] == [("stall", 5), ("stall", 0)]  # once per rank and step
    # MindSpore 2.9 prints the list as its container ([const vector]{1}: a 2-rank msrun job on CPU whose rank 1 raised)
    (printed,) = reports(["RuntimeError: The total number of timed out node is 1. Timed out node list is: [const "
                          "vector]{1}, worker 1 is the first one timed out, please check its log."])
    assert (printed.rule, printed.rank) == ("stall", 1) and "node(s) 1 timed out" in printed.message
    worker = ["[ERROR] ME(130371:281473296949264,MainProcess):2024-12-26-14:22:26.839.923 [mindspore/parallel/cluster/process_entity/_api.py:268] Worker process 130673 exit with exception."]  # noqa: E501
    assert [r.rule for r in reports(worker)] == ["trainer_crash"]
    healthy = ["[ERROR] ME(1:2,MainProcess):2025-03-10-09:40:38.722.000 [mindspore/parallel/cluster/process_entity/"
               "_api.py:431] Time out nodes are []",
               "The state of the cluster is error, total nodes num: 8, abnormal nodes num: 0",
               "The total number of timed out node is 0"]
    assert reports(healthy) == []


# A non-finite value that only an aggregate shows: BEiT's MetricLogger prints each value with its global average
# in parentheses (microsoft/unilm issue #598: the grad norm's average is nan, the step's 0.3922 is finite), reported
# once until the average is finite again (an infinite grad-norm average is an overflowed step's, as in microsoft/
# Swin-Transformer issue #50, the corpus file swin_gradnorm_running_avg_inf_50.log); llama-recipes' epoch summary after finite step losses (meta-llama/
# llama-cookbook issue #300: `train_epoch_loss=nan`). A finite average is no value of its own for the rules.
def _items(lines):
    """The records and reports a parser makes of ``lines``, the reports after a record included."""
    parser, out = text.Parser(), []
    for line in lines:
        item = parser.feed(line)
        out += ([item] if item is not None else []) + [a for a in parser.after if isinstance(a, Report)]
        parser.after = []
    return out


def test_a_non_finite_running_average_or_epoch_summary_is_a_nan_report():
    beit = ["Epoch: [115]  [1298/1299]  eta: 0:00:00  lr: 0.001435  min_lr: 0.001435  mlm_acc: 0.0333 (0.0344)  loss: 6.5993 (6.5971)  loss_scale: 8192.0000 (8646.0600)  weight_decay: 0.0500 (0.0500)  **grad_norm: 0.3922 (nan)**  time: 0.4944  data: 0.0001  max mem: 19152",  # noqa: E501
            "",
            "Averaged stats: lr: 0.001435  min_lr: 0.001435  mlm_acc: 0.0333 (0.0345)  loss: 6.5993 (6.5925)  loss_scale: 8192.0000 (8646.0600)  weight_decay: 0.0500 (0.0500)  **grad_norm: 0.3922 (nan)**"]  # noqa: E501
    items = _items(beit)
    assert [(r.loss, r.grad_norm) for r in items if isinstance(r, StepRecord)] == [(6.5993, 0.3922)]
    assert [(r.rule, r.step) for r in items if isinstance(r, Report)] == [("nan_inf", 1298)]  # once
    finite = [line.replace("(nan)", "(0.4011)") for line in beit]
    assert [r for r in _items(finite) if isinstance(r, Report)] == []
    again = [beit[0], finite[0].replace("[1298/1299]", "[1299/1299]"), beit[0].replace("[115]", "[116]")]
    assert [(r.rule, r.step) for r in _items(again) if isinstance(r, Report)] == [("nan_inf", 1298),
                                                                                 ("nan_inf", 1299 + 1298)]
    cookbook = ["Training Epoch: 4/150, step 63/64 completed (loss: 0.19040994346141815): 100%|██████████| 64/64 [04:02<00:00,  3.78s/it]",  # noqa: E501
                " eval_ppl=tensor(nan, device='cuda:0') eval_epoch_loss=tensor(nan, device='cuda:0')",
                "Epoch 4: train_perplexity=nan, train_epoch_loss=nan, epoch time 242.3404811769724s"]
    items = _items(cookbook)
    assert [(r.step, r.loss) for r in items if isinstance(r, StepRecord)] == [(63, 0.19040994346141815)]
    assert [(r.rule, r.step) for r in items if isinstance(r, Report)] == [("nan_inf", 64)]  # after the bar's count, 64 of 64
    overflowed = [line.replace("(nan)", "(inf)") for line in beit]  # an overflowed step's norm, skipped by the scaler
    assert [r for r in _items(overflowed) if isinstance(r, Report)] == []
    healthy = cookbook[:1] + ["Epoch 4: train_perplexity=1.2097, train_epoch_loss=0.1904, epoch time 242.3404811769724s"]
    assert [r for r in _items(healthy) if isinstance(r, Report)] == []


# Caffe's `Iteration N, loss = X` is smoothed over the solver's `average_loss` iterations; the step's own loss is
# the sum of its weighted net outputs, `Train net output #k: name = v (* w = x loss)` (BVLC/caffe solver.cpp):
# jixing0415/caffe-mobilenet-v3 issue #1 (the corpus file caffe_mobilenet_v3_train_net_loss_6_90776_frozen_1.log),
# LCAD-UFES/carmen_lcad sharedlib/ENet/results/readme.md (an accuracy output before the loss). A Test net's
# outputs (Solver::Test, a Caffe log in a public GitHub file, stored index id 13967068700) are the evaluation's.
def test_caffe_net_outputs_are_the_steps_loss():
    mobilenet = [
        "I0515 11:05:51.320263 37636 solver.cpp:239] Iteration 20 (1.02848 iter/s, 19.4461s/20 iters), loss = 6.90501",
        "I0515 11:05:51.320302 37636 solver.cpp:258]     Train net output #0: loss = 6.90776 (* 1 = 6.90776 loss)",
        "I0515 11:05:51.320356 37636 sgd_solver.cpp:112] Iteration 20, lr = 0.01",
    ]
    assert [(r.step, r.loss, r.lr) for r in read(mobilenet)] == [(20, 6.90776, 0.01)]
    enet = [
        " I1215 19:08:36.788460 33879 solver.cpp:228] Iteration 8880, loss = 0.36872",
        " I1215 19:08:36.788607 33879 solver.cpp:244]     Train net output #0: accuracy = 0.822133",
        " I1215 19:08:36.788635 33879 solver.cpp:244]     Train net output #1: loss = 0.36872 (* 1 = 0.36872 loss)",
        " I1215 19:12:03.510736 33879 solver.cpp:228] Iteration 8900, loss = 0.367749",
    ]
    assert [(r.step, r.loss) for r in read(enet)] == [(8880, 0.36872), (8900, 0.367749)]
    tested = [
        "I0203 22:10:30.772714  3769 solver.cpp:337] Iteration 0, Testing net (#0)",
        "I0203 22:10:37.816495  3769 solver.cpp:404]     Test net output #0: accuracy = 0.526042",
        "I0203 22:10:37.818120  3769 solver.cpp:404]     Test net output #1: loss = 0.722712 (* 1 = 0.722712 loss)",
        "I0203 22:10:39.182849  3769 solver.cpp:228] Iteration 0, loss = 1.06601",
        "I0203 22:10:39.182965  3769 solver.cpp:244]     Train net output #0: accuracy = 0.34375",
        "I0203 22:10:39.183007  3769 solver.cpp:244]     Train net output #1: loss = 1.06601 (* 1 = 1.06601 loss)",
        "I0203 22:10:39.183043  3769 sgd_solver.cpp:106] Iteration 0, lr = 0.01",
        "I0203 22:11:11.826850  3769 solver.cpp:337] Iteration 24, Testing net (#0)",
        "I0203 22:11:19.271281  3769 solver.cpp:404]     Test net output #0: accuracy = 1",
        "I0203 22:11:19.271347  3769 solver.cpp:404]     Test net output #1: loss = 6.33019e-06 (* 1 = 6.33019e-06 loss)",
        "I0203 22:11:20.578449  3769 solver.cpp:228] Iteration 24, loss = 0.482432",
    ]
    # (the `Testing net` line's step, completed by its outputs, stays a record of its own, as the reader made it)
    recs = [(r.step, r.loss) for r in read(tested)]
    assert (0, 1.06601) in recs and recs[-1] == (24, 0.482432)
    diverged = tested[3:6] + [tested[9].replace("6.33019e-06", "nan")]  # a test net's nan: the evaluation's
    assert [r for r in _items(diverged) if isinstance(r, Report)] == []
    res = replay_file("tests/data/reallogs/tune/caffe_mobilenet_v3_train_net_loss_6_90776_frozen_1.log")
    assert [(e.rule, e.step, e.onset_step, e.value) for e in res.events] == [("loss_degenerate", 60, 20, 6.90776)]  # 3 records


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
    assert [r.step for r in recs] == [1, 2, 1501]  # (epoch - the first epoch shown) x 1500 + the bar's count
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
    # NVIDIA/waveglow issue #38: its train.py prints `"{}:\t{:.9f}".format(iteration, reduced_loss)`
    res = replay_file("tests/data/reallogs/tune/waveglow_steps_123873_123904_loss_40490_at_123892_then_higher_38.log")
    assert res.steps == 32 and [(e.rule, e.onset_step) for e in res.events][0] == ("loss_spike", 123892)


def test_a_column_tables_rows_without_their_header_are_step_lines_their_first_fraction_the_loss():
    # WongKinYiu/yolov7 issue #2139: rows of results.txt (epoch of total, GPU memory, losses, ..), losses NaN from 6
    path = "tests/data/reallogs/tune/yolov7_results_rows_epochs_0_7_of_149_all_losses_nan_from_epoch_6_wongkinyiu2139.log"
    res = replay_file(path)
    assert res.steps == 8 and [(e.rule, e.step) for e in res.events][0] == ("nan_inf", 6)
    rows = open(path, encoding="utf-8").read().splitlines()[1:3]
    assert [(r.step, r.loss) for r in read(rows)] == [(1, 0.02125), (2, 0.01919)]
    # a second count is the batch within the epoch (as YOLOv3's); counts of totals alone, or with no value that has a
    # fraction, are no row; nor is one in a log that names its steps
    assert [r.step for r in read(["   0/9   698/700   nan   0.25   116", "   0/9   699/700   0.5   0.25   119",
                                  "   1/9     0/700   0.4   0.25   120"])] == [698, 699, 700]
    assert not [r for r in read(["1/10 2/20", "3/10 640 480", "4/10 5 6"]) if isinstance(r, StepRecord)]
    assert [r.step for r in read(["step 1 loss 2.5", "step 2 loss 2.4", "3/10 0.5 0.25"])] == [1, 2]


def test_horovods_stall_inspector_is_a_stall_after_the_last_step():
    # dmlc/gluon-nlp via horovod/horovod issue #1442: the warning hard-wrapped over two lines, as stored
    res = replay_file("tests/data/reallogs/tune/gluonnlp_bert_horovod_step_20999_six_ranks_then_stall_inspector_"
                      "warning_1442.log")
    assert [(e.rule, e.step, e.value) for e in res.events] == [("stall", 20999, 60.0)]


def test_a_nan_check_naming_its_iteration_is_a_nan_at_that_iteration(tmp_path):
    # facebookresearch/detectron2 issue #838, description (tests/data/reallogs/tune/detectron2_floatingpointerror_..)
    lines = [
        "    self.iter, loss_dict",
        "FloatingPointError: Loss became infinite or NaN at iteration=2137!",
        "loss_dict = {'loss_cls': tensor(nan, device='cuda:0', grad_fn=<NllLossBackward>), 'loss_box_reg': tensor(nan, device='cuda:0', grad_fn=<DivBackward0>), 'loss_mask': tensor(1265158.6250, device='cuda:0',",  # noqa: E501
        "       grad_fn=<BinaryCrossEntropyWithLogitsBackward>),",
    ]
    items = read(lines)
    assert [(type(i).__name__, i.rule, i.step) for i in items] == [("Report", "nan_inf", 2137)]  # the losses: its
    res = replay_file(_write(tmp_path, lines))
    assert [(e.rule, e.step) for e in res.events] == [("nan_inf", 2137)] and res.steps == 0
    # facebookresearch/detectron2 issue #425, description; csuhan/opendet2 issue #29, description
    assert [(r.rule, r.step) for r in reports([
        "FloatingPointError: Loss became infinite or NaN at iteration=27!",
        "loss_dict = {'loss_cls': tensor(nan, device='cuda:1', grad_fn=<NllLossBackward>), 'loss_box_reg': tensor(0.2576, device='cuda:1', grad_fn=<DivBackward0>)}"])] == [("nan_inf", 27)]  # noqa: E501
    assert [(r.rule, r.step) for r in reports([
        "Runtime Error: floatingPointError: Loss became infinite or NaN at iteration=166!",
        "loss_dict = {'loss_cls_ce': nan, 'loss_box_reg': nan, 'loss_ins_con': 0.0, 'loss_cls_up': nan}"])] == [
        ("nan_inf", 166)]


def test_megatron_cores_rerun_state_machine_names_the_iteration_it_found_a_nan_in():
    # NVIDIA/Megatron-LM issue #5026, description (its log line)
    logged = reports(["ERROR:megatron.core.rerun_state_machine:Unexpected result nan on rank 3 at iteration #3 invocation #2 (message='found NaN in local grad norm for bucket #0 in backward pass before data-parallel communication collective')"])  # noqa: E501
    assert [(r.rule, r.step) for r in logged] == [("nan_inf", 3)]
    # NVIDIA-NeMo/Speech issue #14348, comment of 2025-08-13: the RuntimeError, told no iteration (-1)
    raised = reports(["i.pretrain/0 [default2]:[rank2]: RuntimeError: Rank 2, node dcfai-xe9680-01, device 2, iteration -1: Unexpected result nan (message='found NaN in local grad norm for bucket #0 in backward pass before data-parallel communication collective')"])  # noqa: E501
    assert [(r.rule, r.step) for r in raised] == [("nan_inf", 0)]  # after the last step done (none here)


def test_megatron_cores_grad_norm_nan_check_is_a_nan_report_after_the_last_step():
    # megatron/core/distributed/param_and_grad_buffer.py, start_grad_sync: its AssertionError, or the traceback's
    # failing statement when an excerpt ends before the message (tests/data/reallogs/tune/mindspeed_megatron070_..)
    steps = [" iteration      427/    5000 | lm loss: 8.567080E+00 | grad norm: 35.518 |",
             " iteration      428/    5000 | lm loss: 7.180392E+00 | grad norm: 36.838 |"]
    said = steps + ["AssertionError: Rank 0: found NaN in local grad norm in backward pass before data-parallel "
                    "communication collective. Device: 0, node: host-1"]
    shown = steps + ["Traceback (most recent call last):", '  File "param_and_grad_buffer.py", line 114, in start_grad_sync',
                     "    assert not norm.isnan(), ("]
    for lines in (said, shown):
        assert [(r.rule, r.step) for r in reports(lines)] == [("nan_inf", 428)]
    # an assert of anything else, or a NaN check's name in prose, is no report
    assert reports(steps + ["    assert step > 0, (", "we check isnan( on the loss"]) == []
    res = replay_file("tests/data/reallogs/tune/mindspeed_megatron070_iters_427_428_then_found_nan_in_local_grad_norm.log")
    assert [(e.rule, e.step) for e in res.events] == [("nan_inf", 428)]


def test_a_collective_that_failed_or_timed_out_is_a_stall_and_a_count_of_a_total_names_its_step():
    # PKU-YuanGroup/UniWorld issue #46: NCCL socket errors, then PyTorch takes the process down
    res = replay_file("tests/data/reallogs/tune/uniworld_accelerate_step_1_104s_it_nccl_socket_errors_operations_timed_"
                      "out_46.log")
    assert [(e.rule, e.step, e.rank) for e in res.events] == [("stall", 1, 6)]
    # modelscope/ms-swift issue #2436: `"global_step/max_steps": "8280/11043"` numbers the record
    res = replay_file("tests/data/reallogs/tune/msswift_json_global_steps_8270_8280_grad_norm_nan_at_8280_2436.log")
    assert [(e.rule, e.step) for e in res.events] == [("nan_inf", 8280)]


def test_a_report_glued_after_a_bar_alone_follows_the_bars_record():
    # microsoft/DeepSpeed issue #6705 (tests/data/reallogs/tune/deepspeed_bert_pretrain_tqdm_23054_..): tqdm's bar,
    # then the NCCL watchdog's message on the same physical line
    res = replay_file("tests/data/reallogs/tune/deepspeed_bert_pretrain_tqdm_23054_nccl_allreduce_watchdog_600083ms_6705.log")  # noqa: E501
    assert res.steps == 1 and res.last.step == 23054
    assert [(e.rule, e.step) for e in res.events] == [("stall", 23054)]
    # the line gave two items, the bar's record and the report: counted once among the lines read
    assert res.glued == 1 and res.lines == 6


def test_icefalls_small_grad_scale_warning_is_a_loss_scale_collapse():
    # k2-fsa/icefall issue #1946 (tests/data/reallogs/tune/icefall_zipformer_kws_batch_14300_..): the warning
    # before its step's line, at that step
    res = replay_file("tests/data/reallogs/tune/icefall_zipformer_kws_batch_14300_grad_scale_small_3e-05_then_scheduledfloat_1946.log")  # noqa: E501
    assert [(e.rule, e.step, e.value) for e in res.events] == [("loss_scale_collapse", 14300, 3.0517578125e-05)]


def test_pytorch_s_non_finite_norm_warning_is_a_nan_report_after_the_last_step():
    # megvii-research/PETR issue #175 (an mmdet record, then clip_grad_norm_'s FutureWarning); with
    # error_if_nonfinite=True the same check raises a RuntimeError
    lines = [
        "2026-04-01 16:18:01,524 - mmdet - INFO - Epoch [1][9100/28130]\tlr: 2.000e-04, eta: 4 days, 13:15:14, time: 0.586, data_time: 0.011, memory: 7496, loss_cls: 1.5314, loss_bbox: 1.4246, d0.loss_cls: 1.5302, d0.loss_bbox: 1.4339, d1.loss_cls: 1.5307, d1.loss_bbox: 1.4190, d2.loss_cls: 1.5305, d2.loss_bbox: 1.4277, d3.loss_cls: 1.5316, d3.loss_bbox: 1.4359, d4.loss_cls: 1.5296, d4.loss_bbox: 1.4229, loss: 17.7481, grad_norm: 74.8552",
        "/home/shrey/Documents/naveeen_amrita/my_env/lib/python3.8/site-packages/mmcv/runner/hooks/optimizer.py:31: FutureWarning: Non-finite norm encountered in torch.nn.utils.clip_grad_norm_; continuing anyway. Note that the default behavior will change in a future release to error out if a non-finite total norm is encountered. At that point, setting error_if_nonfinite=false will be required to retain the old behavior.",
        "  return clip_grad.clip_grad_norm_(params, **self.grad_clip)"
    ]
    (rep,) = reports(lines)
    assert (rep.rule, rep.step) == ("nan_inf", 9100) and "clip_grad_norm_" in rep.message
    raised = ("RuntimeError: The total norm of order 2.0 for gradients from `parameters` is non-finite, so it cannot "
              "be clipped. To disable this error and scale the gradients by the non-finite norm anyway, set "
              "`error_if_nonfinite=False`")
    assert [r.rule for r in reports(lines[:1] + [raised])] == ["nan_inf"]


def test_a_loop_s_own_check_of_its_gradients_is_a_nan_report_after_the_last_step():
    # AdityaAshvin/ScalingDown's T5 distillation loop (tests/data/reallogs/tune/custom_t5_distill_batches_6963_..):
    # `NaN detected in gradients of shared.weight. Skipping update.` after Global Batch 7013, no step on the line
    res = replay_file("tests/data/reallogs/tune/custom_t5_distill_batches_6963_7045_nan_grad_skip_after_7013_restart_"
                      "loss_8_77_at_7015_scalingdown.log")
    assert ("nan_inf", 7013) in [(e.rule, e.step) for e in res.events]
    step = ["step 10 | loss 2.5012 | lr 1e-4"]
    for said in ("Detected NaN in gradients, stopping", "WARNING: Inf found in the grads of layer 3"):
        assert [(r.rule, r.step) for r in reports(step + [said])] == [("nan_inf", 10)], said
    assert reports(step + ["clipping in gradient space found no NaN issues"]) == []


def test_a_loop_s_own_bare_nan_check_is_a_nan_report_after_the_last_step():
    # ryankiros/visual-semantic-embedding issue #10 (tests/data/reallogs/tune/custom_vse_updates_510_550_..): the loop
    # prints `NaN detected` alone after its last `Epoch 2 Update 550 Cost 25.91058` line and stops
    step = ["step 10 | loss 2.5012 | lr 1e-4"]
    for said in ("NaN detected", "2024-05-01 WARNING - NaN loss detected! Skipping batch.", "inf detected",
                 "NaN detected in the loss, stopping", "Inf loss detected at rank 3"):
        assert [(r.rule, r.step) for r in reports(step + [said])] == [("nan_inf", 10)], said
    # a check that found nothing, a line naming its value's finite number, TensorBoard's warning on a logged value
    for said in ("No NaN detected in the first 100 batches", "NaN detected in input data: dropping 3 samples",
                 "WARNING - Step 1557: detected nan/inf/spiky gradient (norm=2.196656942367)",
                 "Warning: NaN or Inf found in input tensor."):
        assert [r.rule for r in reports(step + [said]) if r.rule == "nan_inf"] == [], said


def test_paddleocr_s_nan_padded_to_its_width_is_a_nan():
    # PaddlePaddle/PaddleOCR issue #7057 (tests/data/reallogs/tune/paddleocr_pgnet_..): its logger formats values
    # `{:x<6f}`, a NaN as `nanxxx`
    res = replay_file("tests/data/reallogs/tune/paddleocr_pgnet_global_steps_160_190_loss_nanxxx_every_record_7057.log")
    assert [(e.rule, e.step) for e in res.events] == [("nan_inf", s) for s in (160, 170, 180, 190)]


def test_a_value_not_given_is_no_name():
    # THU-DA-6D-Pose-Group/GDR-Net issue #109: `total_grad_norm: N/A total_loss: 1.3978e+01 (..)  loss_coor_x: ..`
    # (the name pattern took `N/A total_loss` for a name, and the loss parts were summed)
    lines = [
        "20231023_095643|core.utils.my_writer@171: eta: 15:06:27 iter: 50699/102400[49.5%] time: 1.0520   lr: 1.0000e-04  max_mem: 3611M total_grad_norm: N/A total_loss: 1.3978e+01 (1.5329e+01)  loss_coor_x: 1.5648e-02 (3.0480e-02)  loss_coor_y: 1.4901e-02 (3.1228e-02)  loss_coor_z: 1.5298e-02 (2.9955e-02)  loss_mask: 1.5607e-02 (3.0423e-02)  loss_region: 1.3853e+01 (1.5046e+01)  loss_PM_R: 2.2228e-02 (5.8838e-02)  loss_centroid: 7.3131e-03 (1.6075e-02)  loss_z: 2.5838e-02 (8.6372e-02)",
        "20231023_095829|core.utils.my_writer@171: eta: 15:12:08 iter: 50799/102400[49.6%] time: 1.0606   lr: 1.0000e-04  max_mem: 3611M total_grad_norm: N/A total_loss: 1.4628e+01 (1.5328e+01)  loss_coor_x: 1.5359e-02 (3.0450e-02)  loss_coor_y: 1.5762e-02 (3.1197e-02)  loss_coor_z: 1.5910e-02 (2.9926e-02)  loss_mask: 1.6061e-02 (3.0395e-02)  loss_region: 1.4515e+01 (1.5045e+01)  loss_PM_R: 2.3028e-02 (5.8766e-02)  loss_centroid: 7.7087e-03 (1.6058e-02)  loss_z: 2.9443e-02 (8.6259e-02)"
    ]
    assert [(r.step, r.loss, r.grad_norm) for r in read(lines)] == [(50699, 13.978, None), (50799, 14.628, None)]


def test_the_shell_s_killed_and_aborted_job_status_is_a_crash(tmp_path):
    # the OOM killer's SIGKILL and an abort(), as bash reports the job (alone, or `<script>: line N: PID Killed`)
    for status in ("bash: line 1:  1068 Killed                  python train.py", "Killed",
                   "./run.sh: line 12: 40112 Aborted                 (core dumped) python train.py"):
        log = tmp_path / "train.log"
        log.write_text("".join(f"step {s} loss {3.0 - 0.01 * s:.4f}\n" for s in range(1, 31)) + status + "\n")
        assert [(e.rule, e.step) for e in replay_file(str(log)).events] == [("trainer_crash", 30)], status
    # a word in a sentence is none
    log.write_text("step 1 loss 2.0\nKilled 3 stale workers before training\nstep 2 loss 1.9\n")
    assert replay_file(str(log)).events == []


def test_a_log_ending_in_a_python_traceback_is_a_crash_after_its_last_step(tmp_path):
    steps = [f"epoch: 1 step: {s}, loss is {3.0 - 0.01 * s:.4f}" for s in range(1, 31)]
    frames = ["Traceback (most recent call last):", '  File "train.py", line 52, in <module>',
              "    model.train(epochs, dataset, callbacks=callbacks)", '  File "loader.py", line 9, in __next__',
              "    raise ValueError"]

    def events(*tail):
        return [(e.rule, e.step, e.message) for e in replay_file(_write(tmp_path, steps + list(tail))).events]

    said = "trainer: the log ends in a traceback: the process raised {} after step 30{}"
    assert events(*frames, "OSError: [Errno 28] No space left on device") == [
        ("trainer_crash", 30, said.format("OSError", ": [Errno 28] No space left on device"))]
    # chained: the last exception; behind torchrun's rank prefix; a qualified name with no message
    chained = [*frames, "ValueError", "", "During handling of the above exception, another exception occurred:", "",
               *frames, "[rank0]: torch.distributed.DistBackendError"]
    assert events(*chained) == [("trainer_crash", 30, said.format("torch.distributed.DistBackendError", ""))]
    # every line behind a launcher's prefix (torchrun's `[rank0]: `, Ray's worker prefix)
    for prefix in ("[rank0]: ", "(RayTrainWorker pid=1234) "):
        lines = [prefix + line for line in steps + frames + ["OSError: [Errno 28] No space left on device"]]
        assert [(e.rule, e.step) for e in replay_file(_write(tmp_path, lines)).events] == [("trainer_crash", 30)]
    assert events(*frames, "ValueError: bad row", *steps[:3]) == []  # training went on: the exception was caught
    assert events(*frames, "KeyboardInterrupt") == []  # the user's end
    assert events(*frames[:3], "    raise ValueError") == []  # no exception line: cut off
    # the trainer's own NaN check ends in its exception: that report, once
    nan = ("ValueError: In epoch: 1 step: 31, loss is NAN or INF, training process cannot continue, "
           "terminating training.")
    assert [r[:2] for r in events(*frames, nan)] == [("nan_inf", 31)]
