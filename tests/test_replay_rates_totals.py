"""Step-line names of the generic text reader (monitor/replay/fields.py, monitor/replay/text.py), each on lines
copied exactly from public logs (the source above each): a rate of steps (PaddleNLP's ``interval_*`` metrics)
giving the step time, and a total word alone (``All:``, a table's ``total`` column) giving the line's loss."""
from __future__ import annotations

import math

from test_readers_shapes import _steps, _write
from training_monitor.replay import replay_file, text
from training_monitor.replay.fields import LOSS_TOTAL, lookup

# -- a rate of steps: PaddleNLP's Trainer logs speed_metrics("interval", ..) over the steps since the last log

# PaddlePaddle/PaddleNLP issue #4949, comment of 2023-02-23 (tests/data/reallogs/tune/paddlenlp_ernie1_pretrain_..)
ERNIE = [
    "[2023-02-23 09:46:24,800] [    INFO] -   Total optimization steps = 1000000",
    "[2023-02-23 09:46:27,311] [    INFO] - loss: 10.70859375, learning_rate: 2e-07, global_step: 20, interval_runtime: 2.5065, interval_samples_per_second: 7.979, interval_steps_per_second: 7.979, epoch: 0.0",  # noqa: E501
    "[2023-02-23 09:46:28,399] [    INFO] - loss: 10.84414062, learning_rate: 4e-07, global_step: 40, interval_runtime: 1.0883, interval_samples_per_second: 18.378, interval_steps_per_second: 18.378, epoch: 0.0",  # noqa: E501
]

# LemonNoel/PaddleNLP@12ebe6ef7210326ce88aa40058695f90fbc66d32 examples/benchmark/fewclue/results/a9/ocnli.a9.ft.b
# (global steps 90-120: an evaluation and a checkpoint save between steps 100 and 110)
FEWCLUE = [
    "[2022-08-31 15:21:48,891] [    INFO] - loss: 0.60147681, learning_rate: 2.73e-06, global_step: 90, interval_runtime: 0.9499, interval_samples_per_second: 8.422, interval_steps_per_second: 10.527, epoch: 4.5",  # noqa: E501
    "[2022-08-31 15:21:49,786] [    INFO] - loss: 0.50334263, learning_rate: 2.7e-06, global_step: 100, interval_runtime: 0.8952, interval_samples_per_second: 8.937, interval_steps_per_second: 11.171, epoch: 5.0",  # noqa: E501
    "[2022-08-31 15:21:49,787] [    INFO] - ***** Running Evaluation *****",
    "[2022-08-31 15:21:49,787] [    INFO] -   Num examples = 160",
    "[2022-08-31 15:21:49,787] [    INFO] -   Pre device batch size = 64",
    "[2022-08-31 15:21:49,787] [    INFO] -   Total Batch size = 64",
    "[2022-08-31 15:21:49,787] [    INFO] -   Total prediction steps = 3",
    "[2022-08-31 15:21:50,490] [    INFO] - eval_loss: 0.7092321515083313, eval_accuracy: 0.71875, eval_runtime: 0.702, eval_samples_per_second: 227.93, eval_steps_per_second: 4.274, epoch: 5.0",  # noqa: E501
    "[2022-08-31 15:21:50,491] [    INFO] - Saving model checkpoint to ./checkpoints/checkpoint-100",
    "[2022-08-31 15:21:50,491] [    INFO] - Trainer.model is not a `PretrainedModel`, only saving its state dict.",
    "[2022-08-31 15:21:53,688] [    INFO] - tokenizer config file saved in ./checkpoints/checkpoint-100/tokenizer_config.json",  # noqa: E501
    "[2022-08-31 15:21:53,688] [    INFO] - Special tokens file saved in ./checkpoints/checkpoint-100/special_tokens_map.json",  # noqa: E501
    "[2022-08-31 15:22:00,347] [    INFO] - loss: 0.62328148, learning_rate: 2.6700000000000003e-06, global_step: 110, interval_runtime: 10.5601, interval_samples_per_second: 0.758, interval_steps_per_second: 0.947, epoch: 5.5",  # noqa: E501
    "[2022-08-31 15:22:01,231] [    INFO] - loss: 0.37664752, learning_rate: 2.64e-06, global_step: 120, interval_runtime: 0.8843, interval_samples_per_second: 9.047, interval_steps_per_second: 11.309, epoch: 6.0",  # noqa: E501
]


def test_paddlenlp_interval_metrics_are_the_steps_rates_not_a_summary(tmp_path):
    recs = _steps(ERNIE)
    assert [(r.step, r.loss, r.lr) for r in recs] == [(20, 10.70859375, 2e-07), (40, 10.84414062, 4e-07)]
    # the step time is 1 / interval_steps_per_second (PaddleNLP's own benchmark callback: avg_batch_cost = 1 / it)
    assert [r.step_time_s for r in recs] == [1 / 7.979, 1 / 18.378]
    assert [r.samples for r in recs] == [1, 1]  # samples/s x step time: a batch of 1 per step
    res = replay_file(_write(tmp_path, ERNIE))
    assert (res.steps, res.events) == (2, [])
    assert lookup("interval_runtime")[0] == "span_s" and lookup("interval_steps_per_second")[0] == "step_rate"
    assert lookup("interval_samples_per_second")[0] == "sps" and lookup("steps/s")[0] == "step_rate"
    assert lookup("interval_time") is None  # a time of the interval is no step's time
    # an end-of-run summary and an evaluation's rates stay what they were
    assert lookup("train_runtime")[0] == "eval" and lookup("eval_steps_per_second")[0] == "eval"


def test_a_paddlenlp_run_with_evaluations_between_its_intervals(tmp_path):
    recs = _steps(FEWCLUE)
    assert [r.step for r in recs] == [90, 100, 110, 120]
    assert [round(r.step_time_s, 4) for r in recs] == [0.095, 0.0895, 1.056, 0.0884]
    res = replay_file(_write(tmp_path, FEWCLUE))
    # the interval after the evaluation and the save is 12x slower, all of it the evaluation's: no event
    assert (res.steps, res.evaluations, res.events) == (4, 1, [])


# -- a total word alone: the total of the line's losses

# ShiqiYu/libfacedetection.train issue #24, description (tests/data/reallogs/tune/libfacedetection_epoch0_iter_..)
LIBFACE = [
    "LM:False || Epoch:0/500 || iter: 800/803 || L: 0.58(0.57) IOU: 0.13(0.17) LM: 277.46(232.85) C: 2.30(2.46) All: 3.02(3.20) || LR: 0.01000000",  # noqa: E501
    "LM:False || Epoch:0/500 || iter: 802/803 || L: 0.57(0.57) IOU: 0.12(0.17) LM: 64.95(232.43) C: 2.30(2.46) All: 2.99(3.20) || LR: 0.01000000",  # noqa: E501
    "Epoch time: 11.31 minutes; Time left: 94.09 hours",
]


def test_a_total_named_all_after_the_loss_parts_is_the_lines_loss(tmp_path):
    recs = _steps(LIBFACE)
    assert [(r.step, r.loss, r.lr) for r in recs] == [(800, 3.02, 0.01), (802, 2.99, 0.01)]
    res = replay_file(_write(tmp_path, LIBFACE))
    assert (res.steps, res.events) == (2, [])
    assert lookup("All") == lookup("total") == (LOSS_TOTAL, None)
    assert lookup("all_loss") == lookup("overall_loss") == ("loss", None)
    assert lookup("Total time") is None  # a total word before a name is no total loss, nor a step's time (a run's)


def test_a_total_word_is_a_loss_only_with_a_separator_and_never_before_a_step_loss():
    assert _steps(["Using all 8 GPUs"]) == [] and [r.loss for r in _steps(["step 3 of total 100"])] == [None]
    assert [(r.step, r.loss) for r in _steps(["iter: 5 || loss: 1.5 total: 9.0"])] == [(5, 1.5)]


def test_a_tables_total_column_is_its_loss_with_parts_the_alias_table_does_not_name():
    # deepcam-cn/yolov5-face issue #10, description: `landmark` is a loss part no name of the table reads
    lines = ["Epoch   gpu_mem       box         obj       cls  landmark     total      targets   img_size",
             "2/249     5.01G         0.06629   0.02983    0   0.04542       0.1415         1          800"]
    recs = _steps(lines)
    assert [(r.step, r.loss) for r in recs] == [(2, 0.1415)]
    assert not math.isclose(recs[0].loss, 0.06629 + 0.02983)  # (the parts it names would miss the landmarks')
    assert text.clean(lines[1]) == lines[1]
