"""Throughput in logs that give no tokens (samples/s, steps/s), data times inside step times, epoch lines, and
losses named by their function: real lines of public logs, each copied exactly, its source named, replayed
through the text reader and the shipped rules."""
from pathlib import Path

import pytest

from test_replay_text import read
from training_monitor.record import StepRecord
from training_monitor.replay import replay_file, text
from training_monitor.replay.fields import LOSS_OTHER, lookup

TUNE = Path(__file__).parent / "data" / "reallogs" / "tune"

# PaddleSeg (PaddlePaddle/PaddleSeg pull request #928, description): `batch_cost` includes `reader_cost`
PADDLESEG = [
    "2021-03-30 06:55:57 [INFO]\t[TRAIN] epoch: 1, iter: 20/500, loss: 2.0859, lr: 0.009657, batch_cost: 0.5344, "
    "reader_cost: 0.07273, ips: 3.7425 samples/sec | ETA 00:04:16\n",
    "2021-03-30 06:56:04 [INFO]\t[TRAIN] epoch: 1, iter: 40/500, loss: 1.8769, lr: 0.009295, batch_cost: 0.3483, "
    "reader_cost: 0.00205, ips: 5.7421 samples/sec | ETA 00:02:40\n",
    "2021-03-30 06:56:11 [INFO]\t[TRAIN] epoch: 1, iter: 60/500, loss: 1.7455, lr: 0.008931, batch_cost: 0.3532, "
    "reader_cost: 0.00204, ips: 5.6622 samples/sec | ETA 00:02:35\n",
    "2021-03-30 06:56:18 [INFO]\t[TRAIN] epoch: 1, iter: 80/500, loss: 1.7786, lr: 0.008566, batch_cost: 0.3501, "
    "reader_cost: 0.00193, ips: 5.7133 samples/sec | ETA 00:02:27\n",
]
# PaddleDetection (PaddlePaddle/PaddleX issue #2884, comment by juni3227): `data_cost`, `ips: .. images/s`; the
# last step 2.7x slower, two thirds of it waiting for data
PPDET = [
    "[02/04 22:46:24] ppdet.engine.callbacks INFO: Epoch: [0] [2087/7312] learning_rate: 0.000029 loss: 4.504654 "
    "loss_cls: 1.374781 loss_iou: 0.142509 loss_dfl: 0.800746 loss_mask: 0.949291 loss_l1: 0.369396 eta: 67 days, "
    "10:28:48 batch_cost: 0.1664 data_cost: 0.0034 ips: 96.1758 images/s, max_mem_reserved: 42653 MB, "
    "max_mem_allocated: 31490 MB\n",
    "[02/04 22:46:24] ppdet.engine.callbacks INFO: Epoch: [0] [2088/7312] learning_rate: 0.000029 loss: 5.154541 "
    "loss_cls: 1.369879 loss_iou: 0.167398 loss_dfl: 0.882983 loss_mask: 1.169871 loss_l1: 0.431591 eta: 67 days, "
    "9:53:14 batch_cost: 0.1876 data_cost: 0.0049 ips: 85.2884 images/s, max_mem_reserved: 42653 MB, "
    "max_mem_allocated: 31490 MB\n",
    "[02/04 22:46:24] ppdet.engine.callbacks INFO: Epoch: [0] [2089/7312] learning_rate: 0.000029 loss: 6.694592 "
    "loss_cls: 1.626675 loss_iou: 0.203672 loss_dfl: 0.967037 loss_mask: 1.630088 loss_l1: 0.576798 eta: 67 days, "
    "9:18:02 batch_cost: 0.1930 data_cost: 0.0042 ips: 82.8919 images/s, max_mem_reserved: 42653 MB, "
    "max_mem_allocated: 31490 MB\n",
]
# SimpleBEV-style PIPs loop lines are in the corpus (tune/pips_rtime_210s_data_stall_step32_17.log); mmdetection's
# (open-mmlab/mmdetection issue #64, description): `time` includes `data_time`
MMDET = ["2018-10-23 10:51:07,015 - INFO - Epoch [3][50/2500]     lr: 0.02000, time: 1.090, data_time: 0.015, "
         "loss_reg: 0.0096, acc: 99.0479, loss_cls: 0.0230, loss_rpn_cls: 0.0012, loss_rpn_reg: 0.0055, loss: 0.0394\n"]
# MindSpore's ResNet-50 transfer-learning tutorial (mindspore-ai/docs, tutorials/source_en/cv/transfer_learning.md):
# one line per epoch and its TimeMonitor-style line
RESNET_EPOCHS = [
    "Epoch: [  1/ 10], Average Train Loss: [0.582], Accuracy: [1.000]\n",
    "epoch time: 201648.793 ms, per step time: 14403.485 ms\n",
    "Epoch: [  2/ 10], Average Train Loss: [0.290], Accuracy: [0.967]\n",
    "epoch time: 171260.342 ms, per step time: 12232.882 ms\n",
]
# TensorLayer SRGAN (tensorlayer/SRGAN issue #224, description): `mse` inside the generator's loss, beside `d_loss`
SRGAN_GAN = ["Epoch: [47/100] step: [79/250] time: 2.377s, g_loss(mse:0.000, vgg:0.000, adv:0.001) d_loss: 1.387\n"]


def replay_lines(tmp_path, lines):
    path = tmp_path / "excerpt.log"
    path.write_text("".join(lines), encoding="utf-8")
    return replay_file(str(path))


def test_paddlepaddle_costs_are_step_time_and_data_wait_and_ips_counts_samples(tmp_path):
    seg = read(PADDLESEG)
    assert [(r.step, r.step_time_s, r.data_wait_s, r.samples) for r in seg][0] == \
        (20, pytest.approx(0.5344 - 0.07273), 0.07273, 2)  # ips x batch_cost: 2 samples a step
    assert [r.samples for r in seg] == [2, 2, 2, 2] and all(r.tokens is None for r in seg)
    det = read(PPDET)
    assert [(r.step, r.data_wait_s, r.samples) for r in det] == [(2087, 0.0034, 16), (2088, 0.0049, 16),
                                                                 (2089, 0.0042, 16)]
    assert [e.rule for e in replay_lines(tmp_path, PADDLESEG).events] == []
    assert [e.rule for e in replay_lines(tmp_path, PPDET).events] == []


def test_a_step_under_several_times_slower_is_no_drop_in_an_excerpt(tmp_path):
    # ppdet's step 2090 (`batch_cost: 0.4535 data_cost: 0.2961 ips: 35.2787 images/s`, the same comment) is 2.7x
    # slower than the steps before: under the short-excerpt test's excursion_ratio (3), so nothing is reported
    slow = PPDET[2].replace("2089/7312", "2090/7312").replace("0.1930 data_cost: 0.0042 ips: 82.8919",
                                                               "0.4535 data_cost: 0.2961 ips: 35.2787")
    assert [e.rule for e in replay_lines(tmp_path, PPDET + [slow]).events] == []


def test_a_printed_step_time_includes_its_data_time():
    (rec,) = read(MMDET)
    assert (rec.step_time_s, rec.data_wait_s) == (pytest.approx(1.075), 0.015)
    # a data time longer than the step time cannot be inside it: both as printed
    (other,) = read([MMDET[0].replace("data_time: 0.015", "data_time: 2.500")])
    assert (other.step_time_s, other.data_wait_s) == (1.09, 2.5)


def test_an_epoch_line_stands_for_its_steps():
    recs = read(RESNET_EPOCHS)
    assert [(r.step, r.steps) for r in recs] == [(1, 14), (2, 14)]  # 201648.793 / 14403.485, 171260.342 / 12232.882
    assert recs[0].step_time_s == pytest.approx(14.403485)


@pytest.mark.parametrize("name, field", [
    ("mse", LOSS_OTHER), ("MSE", LOSS_OTHER), ("train_mse", LOSS_OTHER), ("kld", LOSS_OTHER), ("nll", LOSS_OTHER),
    ("kl_weight", None), ("kl_coef", None), ("val_mse", "eval"), ("mse_loss", LOSS_OTHER),
])
def test_a_loss_function_name_is_a_named_loss(name, field):
    hit = lookup(name)
    assert (hit[0] if hit else None) == field


def test_a_loss_named_by_its_function_is_the_lines_loss_when_it_names_no_other():
    srgan = read((TUNE / "srgan_tensorlayer_step_time_mse_healthy_185.log").read_text().splitlines(True))
    assert [(r.step, r.loss) for r in srgan][:2] == [(0, 0.587), (1, 0.473)]  # `time: 41.505s, mse: 0.587`
    # SRGAN's GAN lines: the `mse` inside `g_loss(..)` is no pair; `d_loss`, the only named loss, is the line's
    assert [(r.step, r.loss, r.step_time_s) for r in read(SRGAN_GAN)] == [(79, 1.387, 2.377)]


def test_a_record_log_with_samples_is_judged_in_samples_per_second(tmp_path):
    rows = [f"{1000 + i},3.0,{2.0 + 0.1 * (i % 3):.1f},{210.0 if i == 8 else 0.05},64" for i in range(12)]
    path = tmp_path / "records.csv"
    path.write_text("step,loss,step_time_s,data_wait_s,samples\n" + "\n".join(rows) + "\n")
    (ev,) = replay_file(str(path)).events
    assert (ev.rule, ev.step, ev.onset_step) == ("throughput_drop", 1008, 1008)
    assert ev.message.startswith("samples_per_second 0.3") and "waiting for data" in ev.message


def test_a_slow_stretch_after_one_faster_record_is_a_drop(tmp_path):
    # tensorflow_PSENet (MichaelHL-ai/tensorflow_PSENet issue #16): 5.59 s a step at step 0, then 92 s a step
    psenet = (TUNE / "tensorflow_psenet_steps_0_20_5_59s_to_92s_per_step_16.log").read_text().splitlines(True)
    (ev,) = replay_lines(tmp_path, psenet).events
    assert (ev.rule, ev.step, ev.onset_step) == ("throughput_drop", 20, 10)
    assert "each record since step 10 as slow, for 1840 s" in ev.message  # 2 records x 10 steps x 92 s
    # one slow record after the fast one is no stretch, nor is one fast record before records 3.5x slower: the
    # second of them is judged against the median of the two before it (their mean), which it is not 3x below
    assert replay_lines(tmp_path, psenet[:2]).events == []
    slower = [line.replace("92.09 seconds/step", "19.57 seconds/step").replace("91.93 seconds/step", "19.56 seconds/step")
              .replace("0.09 examples/second", "0.41 examples/second") for line in psenet]
    assert replay_lines(tmp_path, slower).events == []


def test_step_lines_printing_no_step_time_are_timed_by_their_line_times():
    # the time since the step line before over the steps since it; not across an evaluation or a checkpoint
    # save's line (that time is not all training); a printed time the wall time rules out (an elapsed total
    # completing the step, over twice the time since the line before) gives way to it; a printed one that fits stays
    stamp = "2024-01-01 00:{} INFO Train epoch: 1 [{}/1000] Loss: 2.5{}\n".format
    lines = [stamp("00:00", 100, ""), stamp("01:00", 200, ""), "2024-01-01 00:01:30 INFO Evaluating\n",
             stamp("31:00", 300, ""), stamp("32:00", 400, ""), stamp("34:00", 500, ""),
             "2024-01-01 00:34:00 INFO Time: 33534.01\n", stamp("35:00", 600, " time: 7.5")]
    parser = text.Parser()
    recs = [item for item in map(parser.feed, lines) if isinstance(item, StepRecord)]
    assert [r.step_time_s for r in recs] == [None, None, None, None, 33534.01, 7.5]  # as the lines print them
    for rec in recs:
        parser.paced(rec)  # as the runner does before judging each
    assert [(r.step, r.step_time_s) for r in recs] == [(100, None), (200, 0.6), (300, None), (400, 0.6),
                                                       (500, 1.2), (600, 7.5)]


def test_a_slowdown_shown_by_the_line_times_alone_is_a_drop(tmp_path):
    # a timm-style distillation loop (tune/timm_style_kd_..._becai.log): `Train: 37 [ 200/390 ( 51%)]  Loss: ..`
    # lines with no time of their own, 104 s apart for 200 batches in epochs 35-36, then 302 s, 810 s, 1351 s
    kd = (TUNE / "timm_style_kd_resnet18_epochs_35_41_per_200_batches_104s_to_1752s_throughput_drop_from_epoch37_"
                 "becai.log").read_text().splitlines(True)
    drops = [e for e in replay_lines(tmp_path, kd).events if e.rule == "throughput_drop"]
    assert (drops[0].step, drops[0].onset_step) == (1370, 1169)  # epoch 38's 4.05 s a batch, 7.8x the 0.52 s
    assert "each record since step 1169 as slow" in drops[0].message
