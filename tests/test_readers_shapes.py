"""Step-line shapes of the generic text reader (monitor/replay/text.py, the alias table monitor/replay/fields.py),
each on lines copied exactly from public logs (the source above each): a MindSpore train cell's output tuple,
Keras progress lines, full-width punctuation and Chinese names, step records without a loss, and a record whose
loss is printed as named parts one per line."""
from __future__ import annotations

import math

import pytest

from test_replay_text import read
from training_monitor.record import StepRecord
from training_monitor.replay import ReplayError, replay_file, text
from training_monitor.replay.base import Report
from training_monitor.replay.fields import lookup


def _write(tmp_path, lines, name="run.log"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def _steps(lines):
    return [r for r in read(lines) if isinstance(r, StepRecord)]


# -- a MindSpore train cell's output tuple: TrainOneStepWithLossScaleCell.construct returns
# `loss, cond, scaling_sens` (mindspore/nn/wrap/loss_scale.py), which the model zoo's LossCallBack prints whole

def test_the_loss_scale_cells_output_tuple_is_loss_overflow_and_loss_scale():
    # mindspore-ai/models research/nlp/tinybert/README.md (general distill): no brackets, no `value=`
    recs = _steps([
        "epoch: 1, step: 100, outputs are (Tensor(shape=[1], dtype=Float32, 28.2093), Tensor(shape=[], dtype=Bool, False), Tensor(shape=[], dtype=Float32, 65536))",  # noqa: E501
        "epoch: 2, step: 200, outputs are (Tensor(shape=[1], dtype=Float32, 30.1724), Tensor(shape=[], dtype=Bool, False), Tensor(shape=[], dtype=Float32, 65536))",  # noqa: E501
    ])
    assert [(r.step, r.loss, r.overflow, r.loss_scale) for r in recs] == [(100, 28.2093, False, 65536.0),
                                                                         (200, 30.1724, False, 65536.0)]
    # mindspore-ai/models research/nlp/albert/README.md (distributed pre-training): a bracketed one-element loss
    recs = _steps(["epoch: 0.0, current epoch percent: 0.001, step: 100, outputs are (Tensor(shape=[1], dtype=Float32, [ 1.08209e+01]), Tensor(shape=[], dtype=Bool, False), Tensor(shape=[], dtype=Float32, 65536))"])  # noqa: E501
    assert [(r.step, r.loss, r.overflow, r.loss_scale) for r in recs] == [(100, 10.8209, False, 65536.0)]


def test_a_tuple_named_loss_with_value_reprs_and_a_falling_scale():
    # mindspore-ai/models research/cv/FaceRecognition/README.md (training log): `loss:(..)`, then the LR and fps
    recs = _steps([
        "epoch[0], iter[200], loss:(Tensor(shape=[], dtype=Float32, value= 49.3693), Tensor(shape=[], dtype=Bool, value= False), Tensor(shape=[], dtype=Float32, value= 32768)), cur_lr:0.001314, mean_fps:4426.42 imgs/sec",  # noqa: E501
        "epoch[0], iter[300], loss:(Tensor(shape=[], dtype=Float32, value= 48.7081), Tensor(shape=[], dtype=Bool, value= False), Tensor(shape=[], dtype=Float32, value= 16384)), cur_lr:0.001968, mean_fps:4428.09 imgs/sec",  # noqa: E501
    ])
    assert [(r.step, r.loss, r.overflow, r.loss_scale) for r in recs] == [(200, 49.3693, False, 32768.0),
                                                                         (300, 48.7081, False, 16384.0)]


def test_an_overflowed_step_and_a_scale_sense_parameter_printed_without_its_value():
    # mindspore-ai/models ALBERT README (Chinese, RACE fine-tuning on GPU): the third output is the Parameter
    recs = _steps(["epoch: 0, current epoch percent: 0.001, step: 1, outputs are (Tensor(shape=[], dtype=Float32, value= 1.37603), Tensor(shape=[], dtype=Bool, value= True), Parameter (name=scale_sense, shape=(), dtype=Float32, requires_grad=True))"])  # noqa: E501
    assert [(r.step, r.loss, r.overflow, r.loss_scale) for r in recs] == [(1, 1.37603, True, None)]


def test_a_loss_only_cells_output_is_the_loss():
    # a MindSpore Transformer lab report in a public repository (find_string `outputs are [9.748046]`): MindSpore 2.x
    # prints a one-element output as its values; prose naming several outputs is no loss
    recs = _steps(["epoch: 1, step: 1, outputs are [9.748046]", "epoch: 15, step: 8850, outputs are [5.0457044]"])
    assert [(r.step, r.loss) for r in recs] == [(1, 9.748046), (8850, 5.0457044)]
    assert _steps(["Driver_XOR: contains XOR test, expected outputs are [0, 1, 1, 0] and so far are sucessful."]) == []


def test_a_two_output_tuple_and_the_epoch_time_line_after_it(tmp_path):
    # mindspore-ai/models research/cv/centernet_resnet101/README.md (distributed training on Ascend)
    path = _write(tmp_path, [
        "epoch: 328, current epoch percent: 1.000, step: 150682, outputs are (Tensor(shape=[], dtype=Float32, value= 1.71943), Tensor(shape=[], dtype=Bool, value= False), Tensor(shape=[], dtype=Float32, value= 1024))",  # noqa: E501
        "epoch time: 236204.566 ms, per step time: 515.730 ms",
        "epoch: 329, current epoch percent: 1.000, step: 151140, outputs are (Tensor(shape=[], dtype=Float32, value= 1.53505), Tensor(shape=[], dtype=Bool, value= False), Tensor(shape=[], dtype=Float32, value= 1024))",  # noqa: E501
        "epoch time: 235430.151 ms, per step time: 514.040 ms",
    ])
    res = replay_file(path)
    assert res.steps == 2 and res.merged_lines == 2 and res.events == []
    recs = _steps(open(path, encoding="utf-8").read().splitlines())
    assert [(r.step, r.loss, r.loss_scale, round(r.step_time_s, 6)) for r in recs] == [
        (150682, 1.71943, 1024.0, 0.51573), (151140, 1.53505, 1024.0, 0.51404)]


# -- Keras: `Epoch e/E`, then a progress bar line per batch, ` - name: value` fields after the bar

def test_keras_bar_lines_are_steps_of_the_epoch_their_header_names_and_val_names_are_evaluations():
    # divamgupta/image-segmentation-keras issue #50, description
    items = read(["Epoch 1/1", "512/512 [==============================] - 127s 247ms/step - loss: nan - acc: nan - val_loss: nan - val_acc: nan"],  # noqa: E501
                 evaluations=True)
    assert [type(i).__name__ for i in items] == ["StepRecord", "Evaluation"]
    assert items[0].step == 1 and math.isnan(items[0].loss) and items[1].step == 1  # a finished bar: the epoch
    # matterport/Mask_RCNN issue #1997, turn 0: a log of finished bars, one per epoch: the epochs are the steps
    recs = _steps(["Epoch 2/100", "100/100 [==============================] - 126s 1s/step - loss: nan - rpn_class_loss: 0.6931 - rpn_bbox_loss: nan - mrcnn_class_loss: 0.6931 - mrcnn_bbox_loss: 0.0000e+00 - mrcnn_mask_loss: 0.0000e+00 - val_loss: nan - val_rpn_class_loss: 0.6931 - val_rpn_bbox_loss: nan - val_mrcnn_class_loss: 0.6931 - val_mrcnn_bbox_loss: 0.0000e+00 - val_mrcnn_mask_loss: 0.0000e+00",  # noqa: E501
                   "Epoch 3/100", "100/100 [==============================] - 127s 1s/step - loss: nan - rpn_class_loss: 0.6931 - rpn_bbox_loss: nan - mrcnn_class_loss: 0.6931 - mrcnn_bbox_loss: 0.0000e+00 - mrcnn_mask_loss: 0.0000e+00 - val_loss: nan - val_rpn_class_loss: 0.6931 - val_rpn_bbox_loss: nan - val_mrcnn_class_loss: 0.6931 - val_mrcnn_bbox_loss: 0.0000e+00 - val_mrcnn_mask_loss: 0.0000e+00"])  # noqa: E501
    assert [r.step for r in recs] == [2, 3] and all(math.isnan(r.loss) for r in recs)


def test_a_log_of_finished_epoch_bars_numbers_its_records_by_epoch_and_its_unfinished_bar_too():
    # tests/data/reallogs/tune/keras_traffic_sign_epochs_1_3_loss_0_22_to_5_18_spike_at_epoch_2_5.log (Keras 2)
    res = replay_file("tests/data/reallogs/tune/keras_traffic_sign_epochs_1_3_loss_0_22_to_5_18_spike_at_epoch_2_5.log")
    assert res.steps == 3 and [(e.rule, e.step) for e in res.events] == [("loss_spike", 2)]
    # a bar that starts unfinished counts the batches of its epoch (keras-team/keras-tuner issue #442)
    assert [r.step for r in _steps(["Epoch 5/10", "   1/1500 [....] - ETA: 0s - loss: 2.2759",
                                    "1500/1500 [====] - 46s - loss: 2.1", "Epoch 6/10",
                                    "   1/1500 [....] - ETA: 0s - loss: 2.0"])] == [1, 1500, 1501]


def test_keras_batch_lines_and_its_invalid_loss_termination():
    # manishsoni1908/Mobilenet-ssd-keras issue #21, description (TerminateOnNaN's message glued after the bar)
    items = read(["Epoch 1/10",
                  "  3/234 [..............................] - ETA: 33:37:24 - loss: 44.4110Batch 3: Invalid loss, terminating training",  # noqa: E501
                  "  4/234 [..............................] - ETA: 25:09:00 - loss: inf "])
    assert isinstance(items[0], Report) and (items[0].rule, items[0].step) == ("nan_inf", 3)
    assert (items[1].step, items[1].loss) == (4, math.inf)


# -- full-width punctuation and Chinese names

def test_full_width_punctuation_and_chinese_names(tmp_path):
    # tests/data/reallogs/tune/pytorch_tutorial_cifar_loss_chinese_rounds_healthy_1.log's lines
    items = read(["训练次数：100, Loss：1.9817659854888916", "整体测试集上的Loss: 262.62046909332275",
                  "整体测试集上的正确率: 0.3889999985694885", "训练次数：800, Loss：1.2562278509140015"], evaluations=True)
    assert [(type(i).__name__, i.step, i.loss) for i in items] == [
        ("StepRecord", 100, 1.9817659854888916), ("Evaluation", 100, 262.62046909332275),  # the test set's loss
        ("StepRecord", 800, 1.2562278509140015)]
    assert text.clean("Loss：１.５") == "Loss:1.5"
    assert lookup("训练次数") == lookup("迭代次数") == ("step", None) and lookup("轮次") == ("epoch", None)
    assert lookup("学习率") == ("lr", None) and lookup("训练损失")[0] == "loss" and lookup("平均损失")[0] == "loss_average"
    assert lookup("验证损失")[0] == lookup("整体测试集上的Loss")[0] == "eval"


def test_a_chinese_tutorial_run_with_full_width_commas_and_its_test_set_evaluations():
    # a PyTorch tutorial's notes in a public repository (find_string `训练次数：100`): its CIFAR-10 run's output
    items = read(["训练数据集的长度为：10000", "测试数据集的长度为：10000", "-------第1轮训练开始--------",
                  "训练次数：100，Loss：2.2933249473571777", "整体测试集上的loss：359.2919616699219",
                  "整体测试集上的正确率：0.12600000202655792", "-------第2轮训练开始--------",
                  "训练次数：200，Loss：2.269317626953125", "训练次数：300，Loss：2.2691822052001953",
                  "整体测试集上的loss：354.2793884277344"], evaluations=True)
    assert [(type(i).__name__, i.step, i.loss) for i in items] == [
        ("StepRecord", 100, 2.2933249473571777), ("Evaluation", 100, 359.2919616699219),
        ("StepRecord", 200, 2.269317626953125), ("StepRecord", 300, 2.2691822052001953),
        ("Evaluation", 300, 354.2793884277344)]


def test_chinese_loops_print_their_names_with_spaces_or_colons():
    # prints of loops in public repositories (find_string): `print(f'轮次 {epoch}, 批次 {batch_idx}, 损失: ..')` and
    # `print(f'第 {epoch + 1}/{epochs} 轮, 损失: {loss.item()}, 验证损失: {val_loss.item()}')`, with numbers filled in
    assert [(r.step, r.loss) for r in _steps(["轮次 0, 批次 10, 损失: 2.301", "轮次 0, 批次 20, 损失: 2.215"])] == [
        (10, 2.301), (20, 2.215)]
    assert [r.loss for r in _steps(["第 1/50 轮, 损失: 0.693, 验证损失: 0.701"])] == [0.693]


def test_only_a_line_that_is_not_ascii_is_normalised():
    assert text.clean("step 5 | loss 2.5") == "step 5 | loss 2.5"
    assert text.clean("step 5 | time 0.3 µs") == "step 5 | time 0.3 μs"  # NFKC: the micro sign is the Greek mu
    assert [(r.step, r.loss) for r in _steps(["step: 5, loss: 2.5, time: 300 µs"])] == [(5, 2.5)]
    assert _steps(["step: 5, loss: 2.5, time: 300 µs"])[0].step_time_s == 300e-6


# -- step records without a loss: a step time or a throughput is a step record

def test_step_time_and_samples_dicts_between_tqdm_bars_are_step_records(tmp_path):
    # microsoft/huggingface-transformers pull request #7, description ("Sample prints for each train step")
    lines = ["{'train_step_runtime': 0.6309, 'train_step_samples_per_second': 57.063, 'epoch': 0.98}", "",
             " 98%|█████████▊| 2086/2120 [26:01<00:22,  1.49it/s]", " 98%|█████████▊| 2087/2120 [26:02<00:22,  1.48it/s]",
             "                                                   ",
             "{'train_step_runtime': 0.641, 'train_step_samples_per_second': 56.162, 'epoch': 0.98}"]
    res = replay_file(_write(tmp_path, lines))
    assert res.steps == 2 and res.events == []
    recs = _steps(lines)
    assert [(r.step, r.step_time_s, r.samples) for r in recs] == [(1, 0.6309, 36), (2087, 0.641, 36)]
    assert lookup("train_step_runtime") == ("step_time_s", None) and lookup("train_runtime")[0] == "eval"
    assert lookup("train_step_samples_per_second")[0] == "sps"


def test_a_timing_line_without_a_bar_before_it_still_completes_its_record():
    recs = _steps(["{'loss': 2.5, 'epoch': 0.1}", "{'train_step_runtime': 0.6309, 'epoch': 0.1}"])
    assert [(r.step, r.loss, r.step_time_s) for r in recs] == [(1, 2.5, 0.6309)]
    assert _steps(["Total time: 3.2s"]) == []  # prose with a time, no dict and no bar: no record


# -- a record's loss printed as named parts, one per line

def test_named_losses_one_per_line_are_the_parts_of_the_records_loss(tmp_path):
    # tests/data/reallogs/tune/lightweight_pose_stage_losses_jump_iter3200_100.log (Daniil-Osokin/lightweight-human-
    # pose-estimation.pytorch's train.py prints `Iter: N` and then each stage's losses)
    lines = ["  1%|          | 4/516 [00:13<27:49,  3.26s/it]Iter: 3100", "stage1_pafs_loss:     5.463875732421875",
             "stage1_heatmaps_loss: 2.0516973876953126", "stage2_pafs_loss:     5.2807315063476565",
             "stage2_heatmaps_loss: **1.9725639724731445**",
             " 20%|██        | 104/516 [02:42<10:42,  1.56s/it]Iter: 3200", "stage1_pafs_loss:     131.51344520568847",
             "stage1_heatmaps_loss: 49.36172973632812", "stage2_pafs_loss:     127.09879386901855",
             "stage2_heatmaps_loss: nan"]
    recs = _steps(lines)
    assert [r.step for r in recs] == [3100, 3200]
    assert math.isclose(recs[0].loss, 5.463875732421875 + 2.0516973876953126 + 5.2807315063476565 + 1.9725639724731445)
    assert math.isnan(recs[1].loss)  # a NaN part is the sum's
    res = replay_file(_write(tmp_path, lines))
    assert [(e.rule, e.step) for e in res.events] == [("nan_inf", 3200)]


def test_a_loss_named_again_is_no_part_of_the_record_before():
    recs = _steps(["Iter: 100", "stage1_pafs_loss: 5.0", "stage1_pafs_loss: 6.0"])
    assert [(r.step, r.loss) for r in recs] == [(100, 5.0)]
    assert text.clean("loss_scale: 2**16") == "loss_scale: 2**16"  # an exponent is no Markdown bold


def test_a_loss_written_as_its_initials_is_a_loss_part_on_a_step_line_only():
    # dlyldxwl/fssd.pytorch issue #8, description (tests/data/reallogs/tune/fssd_voc2007_..._fssd8.log): `L` (loc),
    # `C` (conf) and `S` (their sum) are the line's only losses
    recs = _steps(["Epoch:1 || epochiter: 0/1034|| Totel iter 0 || L: 201.1674 C: 330.5661 S: 531.7335||Batch time: 12.2342 ||LR: 0.0010000",  # noqa: E501
                   "Epoch:1 || epochiter: 10/1034|| Totel iter 10 || L: nan C: nan S: nan||Batch time: 0.8318 ||LR: 0.0010000"])  # noqa: E501
    assert [r.step for r in recs] == [0, 10]
    assert math.isclose(recs[0].loss, 201.1674 + 330.5661 + 531.7335) and math.isnan(recs[1].loss)
    # YOLACT's legend after its leading counts (tests/data/reallogs/tune/yolact_iters_0_110_..._103.log): the parts
    # and their total `T` summed
    recs = _steps(["[  0]       0 || B: 7.666 | C: 7.013 | M: 4.458 | S: 1.997 | T: 21.134 || ETA: 0:00:00 || timer: 9.527",  # noqa: E501
                   "[  0]      10 || B: 6.981 | C: 6.276 | M: 5.049 | S: 1.818 | T: 20.124 || ETA: 2 days, 22:15:24 || timer: 0.290"])  # noqa: E501
    assert [r.step for r in recs] == [0, 10] and math.isclose(recs[0].loss, 2 * 21.134, abs_tol=1e-3)
    # no step on the line (MindFlow's error report after an evaluation, heldout12), or a name glued to its value
    # (ModelArts' `Rank table file (K8S generated)`, MindCV's `Auto mixed precision: O2`, heldout45): no loss
    assert _steps(["    l2_error, U:  0.3499122378307982 , V:  1.089610520680924 , P:  1.0590148771220198"]) == []
    assert _steps(["[ModelArts Service Log]2023-08-02 21:57:44,170 - INFO - Rank table file (K8S generated) is ready for read",  # noqa: E501
                   "Auto mixed precision: O2"]) == []
    assert lookup("LR") == ("lr", None) and lookup("TP") is None and lookup("cycle_A") is None


def test_it_is_the_step_and_a_loss_s_parts_in_braces_take_their_total():
    # tests/data/reallogs/tune/gluefactory_lightglue_megadepth_..._ethrora.log (glue-factory): `it` counts the
    # iterations, the braces list the loss's parts after their total; `E 1` (the epoch, a count) is no loss's initial
    recs = _steps(["[07/26/2025 15:40:03 gluefactory INFO] [E 1 | it 0] loss {total 1.515E+00, last 8.136E-01, assignment_nll 8.136E-01, nll_pos 1.302E+00, nll_neg 3.251E-01, num_matchable 4.367E+02, num_unmatchable 7.281E+02, confidence 2.409E-01, row_norm 7.986E-01}",  # noqa: E501
                   "[07/26/2025 15:46:02 gluefactory INFO] [E 1 | it 100] loss {total 1.247E+00, last 5.692E-01, assignment_nll 5.692E-01, nll_pos 7.758E-01, nll_neg 3.625E-01, num_matchable 4.049E+02, num_unmatchable 6.926E+02, confidence 2.212E-01, row_norm 8.580E-01}"])  # noqa: E501
    assert [(r.step, r.loss) for r in recs] == [(0, 1.515), (100, 1.247)]
    # tests/data/reallogs/tune/custom_ecg_ssl_pretrain_..._yuvaraj.log: `it a/b` and the initials `Lc`, `Ld`
    recs = _steps(["ep 0 it 250/1048 Lc 4.645 Ld 0.594 top1 0.719 157s", "ep 0 it 500/1048 Lc 3.718 Ld 1.060 top1 0.675 273s"])
    assert [(r.step, round(r.loss, 3)) for r in recs] == [(250, 5.239), (500, 4.778)]


# -- column tables: a header of names, then rows of values under it (monitor/replay/tables.py)

def test_yolo_epoch_table_rows_are_step_lines_and_their_losses_the_sum_of_the_parts():
    # WongKinYiu/yolov7 issue #251, description: a `total` column (the parts' sum: the row's loss) and a message after
    # a bar
    lines = ["     Epoch   gpu_mem       box       obj       cls     total    labels  img_size",
             "     0/299     18.5G    0.1126     2.552    0.4747     3.139       540       768:   0%|▎                                                           | 1/234 [00:04<18:28,  4.76s/it]Reducer buckets have been rebuilt in this iteration.",  # noqa: E501
             "     0/299     18.7G       nan     2.028       nan       nan       521       768:   6%|███▊                                                       | 15/234 [00:23<04:56,  1.36s/it]"]  # noqa: E501
    recs = _steps(lines)
    assert [r.step for r in recs] == [1, 15]  # epoch 0's batches (the bar's count)
    assert recs[0].loss == 3.139 and math.isclose(recs[0].loss, 0.1126 + 2.552 + 0.4747, abs_tol=1e-3)
    assert math.isnan(recs[1].loss)


def test_an_ultralytics_table_between_validation_tables(tmp_path):
    # ultralytics/ultralytics issue #1854, description (YOLOv8, 8 GPUs); the validation table's row is no row
    lines = ["      Epoch      GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size",
             "    261/300      2.95G     0.3137     0.3809     0.7961          3        640: 100%|██████████| 246/246 [02:17<00:00,  1.79it/s]",  # noqa: E501
             "                 Class     Images  Instances      Box(P          R      mAP50  mAP50-95): 100%|██████████| 983/983 [02:55<00:00,  5.60it/s]",  # noqa: E501
             "                   all       3932       1523       0.98      0.986      0.994      0.987"]
    recs = _steps(lines)
    assert [(r.step, round(r.loss, 4)) for r in recs] == [(246, round(0.3137 + 0.3809 + 0.7961, 4))]
    res = replay_file(_write(tmp_path, lines))
    assert res.steps == 1 and res.skipped["header"] == 1 and res.events == []


def test_a_markdown_table_of_a_notebook_trainer_run_with_its_validation_column(tmp_path):
    # m3hrdadfi/soxan issue #9, turn 0 (Hugging Face Trainer's notebook table, pasted as Markdown)
    lines = ["Step | Training Loss | Validation Loss | Accuracy", "-- | -- | -- | --",
             "10 | 0.698400 | 0.497485 | 0.813416", "20 | 0.394700 | 0.291701 | 0.913778",
             "30 | 0.225200 | 0.138921 | 0.951371"]
    items = read(lines, evaluations=True)
    assert [(type(i).__name__, i.step, i.loss) for i in items] == [
        ("StepRecord", 10, 0.6984), ("Evaluation", 10, 0.497485), ("StepRecord", 20, 0.3947),
        ("Evaluation", 20, 0.291701), ("StepRecord", 30, 0.2252), ("Evaluation", 30, 0.138921)]
    res = replay_file(_write(tmp_path, lines))
    assert res.steps == 3 and res.events == []  # (a step line naming an evaluation loss counts as a step)


def test_a_table_row_whose_bar_was_cut_short_is_a_row_at_its_epoch():
    # ultralytics/yolov5 issue #8421, description: each epoch's bar cut after `100%|███` (the count and timing lost);
    # tests/data/reallogs/tune/yolov5_transformer_tqdm_epochs_36_38_of_299_box_obj_cls_nan_map_zero_ultralytics8421.log
    lines = [" Epoch   gpu_mem       box       obj       cls    labels  img_size",
             "    36/299     11.7G       nan       nan       nan       180       640: 100%|███",
             "               Class     Images     Labels          P          R     mAP@.5 mAP@",
             "                 all         73          0          0          0          0          0"]
    recs = _steps(lines)
    assert [r.step for r in recs] == [36] and math.isnan(recs[0].loss)
    # in a `|`-separated table a cell's `50%|` is no bar
    from training_monitor.replay import tables
    columns = tables.header("Step | Training Loss | Accuracy")
    assert tables.row(columns, "10 | 0.6984 | 50%|") is None


def test_a_fastai_table_s_time_column_is_a_clock_and_its_rows_are_epochs():
    # n-waves/multifit @2cdf380 results/logs/new-runs/qrrn-ja.md lines 57-62 (fastai v1's `fit` table, twice)
    lines = ["epoch     train_loss  valid_loss  accuracy  time",
             "0         4.921511    4.071093    0.449957  02:49",
             "Total time: 02:49",
             "epoch     train_loss  valid_loss  accuracy  time",
             "0         4.078950    3.772346    0.490980  03:45",
             "1         3.727190    3.439734    0.550465  1:03:47"]
    items = read(lines, evaluations=True)
    assert [(type(i).__name__, i.loss) for i in items] == [
        ("StepRecord", 4.921511), ("Evaluation", 4.071093), ("StepRecord", 4.07895), ("Evaluation", 3.772346),
        ("StepRecord", 3.72719), ("Evaluation", 3.439734)]
    assert [i.step_time_s for i in items if isinstance(i, StepRecord)] == [169.0, 225.0, 3827.0]


def test_a_table_behind_a_logger_s_date_and_bare_pairs_counting_from_0():
    # scuShaker/jde (tests/data/reallogs/tune/jde_mot_epochs_0_3_..): header and rows behind `2021-01-25 05:58:59
    # [INFO]:`, whose digits made the header look like a row; the count within the epoch, `0/165`, is the step's
    lines = ["2021-01-25 05:58:00 [INFO]:    Epoch       Batch       box      conf        id     total  nTargets      time",
             "2021-01-25 05:58:59 [INFO]:     0/29       0/165     0.227      2.06        19       158        83      59.6",
             "2021-01-25 06:04:17 [INFO]:     0/29      40/165     0.172      1.99      18.7       149      81.4      7.12"]
    assert [(r.step, r.loss, r.step_time_s) for r in _steps(lines)] == [(0, 158.0, 59.6), (40, 149.0, 7.12)]
    # PoWeiChiao/CityScapes_Road_Car_Segmentation (tests/data/reallogs/tune/custom_cityscapes_..): bare `epoch loss`
    # pairs, the first at 0
    assert [(r.step, r.loss) for r in _steps(["0 0.345724", "1 0.253627"])] == [(0, 0.345724), (1, 0.253627)]


def test_a_table_behind_a_logger_s_prefix_and_rows_of_one_side_with_nan_placeholders():
    # Noble-Lab/casanovo issue #367 (tests/data/reallogs/tune/lightning_casanovo_..): a tab-separated table behind
    # a prefix the date reader leaves, on the header's line too; each row has the training's loss or the
    # validation's, the other cell `nan` (not computed on that row): no NaN of the run
    res = replay_file("tests/data/reallogs/tune/lightning_casanovo_log_history_steps_20000_140000_train_1p82_to_0p60_"
                      "valid_1p59_to_0p46_nan_placeholders_healthy_noblelab367.log")
    assert (res.steps, res.evaluations, res.events) == (7, 7, [])
    lines = ["2024-08-19 13:28:48,101 INFO [casanovo/MainProcess] model._log_history : Step\tTrain loss\tValid loss\t",
             "2024-08-19 13:28:48,101 INFO [casanovo/MainProcess] model._log_history : 20000\tnan\t1.594399",
             "2024-08-19 13:49:20,856 INFO [casanovo/MainProcess] model._log_history : 33440\t1.816622\tnan"]
    assert [(r.step, r.loss) for r in _steps(lines) if r.loss is not None] == [(33440, 1.816622)]
    # a row whose cells are all NaN is the run's NaN (YOLOv5's `nan nan nan` above)
    assert [(r.step, math.isnan(r.loss)) for r in _steps([lines[0], lines[1].replace("1.594399", "nan")])] == [
        (20000, True)]


def test_a_line_with_the_step_lines_two_fields_and_evaluation_values_is_a_step_line():
    # SunnyHaze/IML-ViT issue #35 (tests/data/reallogs/tune/custom_pytorch_iml_vit_..): one JSON line per epoch,
    # a test F1 on the epochs evaluated; epoch 4's NaN is the training's
    res = replay_file("tests/data/reallogs/tune/custom_pytorch_iml_vit_epoch_json_epochs_0_4_predict_loss_0p73_to_"
                      "0p18_then_nan_at_4_sunnyhaze35.log")
    assert res.steps == 5 and [(e.rule, e.step) for e in res.events] == [("nan_inf", 4)]


def test_a_header_needs_a_counter_and_a_loss_laid_out_in_columns():
    from training_monitor.replay import tables
    assert tables.header("      Epoch    GPU_mem   box_loss   cls_loss") is not None
    assert tables.header("               Class     Images     Labels          P          R") is None  # no loss
    assert tables.header("Epoch loss decreased") is None  # prose: no columns
    assert tables.header("      Epoch    loss      0.5") is None  # a number: a row, no header
    columns = tables.header("      Epoch    GPU_mem   box_loss   cls_loss")
    assert tables.row(columns, "      all       1049       1186      0.929") is None  # the counter counts nothing
    assert tables.row(columns, "      3/9      1.2G       0.5") is None  # a cell short


def test_a_training_split_word_alone_with_a_separator_is_the_lines_loss():
    # facebookresearch/demucs issue #198 (tests/data/reallogs/tune/demucs_v2_epochs_0_12_..): one line per epoch
    recs = _steps(["Epoch 000: train=0.17936380 valid=0.23429446 best=0.2343 ms=0.00MB cms=0.00MB duration=0.48 hrs",
                   "Epoch 001: train=0.16199168 valid=0.22592303 best=0.2259 ms=0.00MB cms=0.00MB duration=0.49 hrs"])
    assert [(r.step, r.loss) for r in recs] == [(0, 0.1793638), (1, 0.16199168)]
    # a heading, no separator (tests/data/reallogs/heldout3/custom_gaze_nan_from_step100_3.log)
    assert _steps(["[2019/06/24 16:19:45 __main__ INFO] - Train 1"]) == []


def test_rate_names_with_a_slash_are_rates_not_paths():
    # mlx-lm's `It/sec 0.015, Tokens/sec 1.425` (tests/data/reallogs/heldout/mlx_lora_slow_healthy_210.log),
    # MaxText's `Tokens/s/device`, TF Estimator's `global_step/sec` (tests/data/reallogs/tune/tf_estimator_..)
    assert lookup("Tokens/sec") == ("tps", None) and lookup("Tokens/s/device") == ("tps", None)
    assert lookup("It/sec") == ("step_rate", None) and lookup("global_step/sec") == ("step_rate", None)
    assert lookup("train/loss") == ("loss", None)  # a path: its last part
    recs = _steps(["Iter 10: Train loss 3.608, It/sec 0.015, Tokens/sec 1.425"])
    assert round(recs[0].step_time_s, 3) == 66.667 and round(recs[0].tokens / recs[0].step_time_s, 3) == 1.425


def test_an_evaluation_word_behind_a_loggers_prefix_starts_an_evaluation_line():
    # PaddlePaddle/PaddleNLP issue #3867 (tests/data/reallogs/tune/paddlenlp_ernie_loss_scaling_healthy_3867.log)
    items = read(["[2022-11-23 09:46:28,799] [    INFO] - global step 2000, loss: 8.075826, lm_loss: 7.379850, sop_loss: 0.695985, speed: 2.88 steps/s, ips: 92.20 seqs/s, learning rate: 5.00000e-06, loss_scaling: 131072.00, incr_count: 0.00, decr_count: 0.00",  # noqa: E501
                  "[2022-11-23 09:46:31,176] [    INFO] - valid step 2000, batch: 10, loss: 7.448310, lm_loss: 6.745527, sop_loss: 0.702782, ips: 135 seqs/s"],  # noqa: E501
                 evaluations=True)
    assert [(type(i).__name__, i.step, i.loss) for i in items] == [("StepRecord", 2000, 8.075826),
                                                                   ("Evaluation", 2000, 7.44831)]


def test_itr_and_cur_iter_name_the_step():
    # tests/data/reallogs/tune/hand4whole_speed_s_per_itr_data_split_healthy_31.log (`Epoch 0/7 itr 104/3489:`),
    # tests/data/reallogs/tune/dsvt_epoch14_norm_29_then_nccl_broadcast_timeout_1803000ms_39.log (OpenPCDet's
    # `epoch: 14/20, acc_iter=112400, cur_iter=4263/7724`)
    for path, steps in (("hand4whole_speed_s_per_itr_data_split_healthy_31.log", [104, 105, 106, 107, 108, 109]),
                        ("dsvt_epoch14_norm_29_then_nccl_broadcast_timeout_1803000ms_39.log", [4263, 4313, 4363])):
        lines = open(f"tests/data/reallogs/tune/{path}", encoding="utf-8").read().splitlines()
        assert [r.step for r in _steps(lines)] == steps


def test_a_pasted_carriage_return_rays_worker_prefix_and_a_path_ending_in_a_qualifier():
    tune = "tests/data/reallogs/tune/"
    # axolotl-ai-cloud/axolotl issue #967: a bar after a literal `^M`, the NCCL watchdog glued after it
    res = replay_file(tune + "axolotl_mixtral_tqdm_3004_of_23865_7s_it_nccl_allreduce_watchdog_1800055ms_967.log")
    assert res.steps == 1 and res.last.step == 3004 and ("stall", 3004) in [(e.rule, e.step) for e in res.events]
    # axolotl-ai-cloud/axolotl issue #1495: Ray's worker prefix before every line
    res = replay_file(tune + "axolotl_qwen_moe_ray_tqdm_4_of_1920_572s_it_nccl_allreduce_watchdog_1800221ms_1495.log")
    assert res.steps == 1 and res.last.step == 4 and res.events[0].rule == "stall"
    assert _steps(["(RayTrainWorker pid=1234) step 5 loss 2.0"])[0].loss == 2.0
    # llm-foundry's docs: Composer's `[batch=1/100]:` block, `Train loss/train/total: 10.9736`
    assert lookup("Train loss/train/total") == ("loss", None) and lookup("words/batch") is None
    res = replay_file(tune + "llmfoundry_composer_mpt125m_batches_1_4_loss_10_97_to_10_65_healthy.log")
    assert res.steps == 4 and res.events == []


def test_a_global_counter_is_the_step_among_phase_counters_and_tot_is_total():
    # microsoft/LMOps issue #130 (MiniLLM's PPO loop, tests/data/reallogs/heldout/lmops_wrapped_overflow_130.log):
    # the inner iteration and PPO epoch restart each phase; the global iteration numbers the run
    line = ("train | data_epochs  0/10 | inner iter:   1/  8 | ppo epoch:  3/ 4 | global iter:     14/  5000| "
            "tot_loss: 3.1123 | rl_loss: 0.1680 | pt_loss: 2.9443 | pg_loss: 0.1625 | reg_loss: 0.0055 | lr: 3.0e-07")
    (rec,) = _steps([line])
    assert (rec.step, rec.loss) == (14, 3.1123)
    # without the global counter the inner one is the step (the phase epoch, a first line's, places nothing yet)
    assert [(r.step, r.loss) for r in _steps([line.replace("global iter:     14/  5000| ", "")])] == [(1, 3.1123)]


def test_a_total_step_counts_the_run_and_no_epoch_places_it():
    # InsightFace_TF (tests/data/reallogs/tune/insightface_tf_total_step_..): `epoch 0, total_step 880, total loss
    # is 3.01 , ..`, the weight-decay loss exploding to 1.66e13 at total_step 920
    path = "tests/data/reallogs/tune/insightface_tf_total_step_880_940_weight_decay_loss_2_87_to_1_66e13_at_920_59.log"
    with open(path) as f:
        assert [r.step for r in _steps(f.read().splitlines())] == [880, 900, 920, 940]
    res = replay_file(path)
    assert [(e.rule, e.step) for e in res.events] == [("loss_spike", 920)]
    # the count runs on across an epoch (the same shape, the next epoch): never offset by the epochs before, and
    # a count within the epoch beside it gives way (MVSNet's format `epoch, %d, step %d, total_step %d, loss = ..`)
    lines = ["epoch 0, total_step 980, total loss is 3.01 , lr is 0.000300",
             "epoch 1, total_step 1000, total loss is 2.87 , lr is 0.000300"]
    assert [r.step for r in _steps(lines)] == [980, 1000]
    lines = ["epoch, 0, step 60, total_step 60, loss = 1.5000", "epoch, 0, step 120, total_step 120, loss = 1.4000",
             "epoch, 1, step 20, total_step 140, loss = 1.3000"]
    assert [r.step for r in _steps(lines)] == [60, 120, 140]
    # a total's plural is the run's end, no count
    assert lookup("total_step") == lookup("total iter") == ("step", None) and lookup("total_steps") is None


def test_one_step_reported_by_two_loggers_is_one_record_the_later_line_s_values_winning():
    # Megatron-DeepSpeed (tests/data/reallogs/tune/megatron_deepspeed_tp1pp4dp4_..): DeepSpeed's `steps: 10 loss:
    # 12.5049 iter time (s): 25.206 ..`, then Megatron's `iteration 10/ 50 | .. lm loss: 1.250494E+01 | ..` of the
    # same step, its loss to more digits
    path = ("tests/data/reallogs/tune/megatron_deepspeed_tp1pp4dp4_iters_10_40_grad_norm_1_9_to_31_6_at_19_and_51_5_"
            "at_31_lockclock.log")
    with open(path) as f:
        recs = _steps(f.read().splitlines())
    assert [r.step for r in recs] == list(range(10, 41))
    assert (recs[0].loss, recs[0].grad_norm, recs[0].loss_scale) == (12.50494, 1.889, 1.0)
    assert [(e.rule, e.step) for e in replay_file(path).events] == [("grad_norm_spike", 18)]
    # another loss at the same step is another record (a second run, another rank's line)
    assert [(r.step, r.loss) for r in _steps(["step 5 loss 2.5000", "step 5 loss 2.6000"])] == [(5, 2.5), (5, 2.6)]


def test_a_count_under_an_epoch_heading_that_starts_again_is_the_next_epoch_s():
    # UniMatch (tests/data/reallogs/tune/custom_pytorch_unimatch_..): `===========> Epoch: 52, LR: ..`, then
    # `Iters: 0, Total loss: ..` to `Iters: 868` every 124, each epoch the same counts
    path = ("tests/data/reallogs/tune/custom_pytorch_unimatch_semiseg_epochs_52_59_total_loss_0_03_flat_124_iters_59s_"
            "to_173s_throughput_drop_epoch56_liheyoung.log")
    with open(path) as f:
        steps = [r.step for r in _steps(f.read().splitlines())]
    assert steps[:9] == [0, 124, 248, 372, 496, 620, 744, 868, 869] and steps[-1] == 7 * 869 + 868
    assert replay_file(path).last.step == steps[-1]  # the compiled reader of plain lines counts the same
    # a count that runs on across the headings is the run's
    lines = ["Epoch 1", "step 10 loss 2.0", "step 20 loss 1.9", "Epoch 2", "step 30 loss 1.8"]
    assert [r.step for r in _steps(lines)] == [10, 20, 30]


def test_a_logger_s_module_and_line_in_parentheses_is_its_prefix_and_steps_alone_the_step():
    # ParallelWaveGAN's trainer (tests/data/reallogs/tune/parallelwavegan_style_multi_singer_..): `2022-05-12
    # 14:56:20,955 (train:487) INFO: (Steps: 1000) train/embed_loss = nan.`, one value per line
    path = "tests/data/reallogs/tune/parallelwavegan_style_multi_singer_steps_1000_all_losses_nan_rongjiehuang_8.log"
    res = replay_file(path)
    assert res.steps == 1 and [(e.rule, e.step) for e in res.events] == [("nan_inf", 1000)]
    assert text.clean("2022-05-12 14:56:20,955 (train:487) INFO: (Steps: 1000) x = 1.").strip() == \
        "(Steps: 1000) x = 1."
    # beside an epoch, `Steps` counts the epoch's steps: the epoch is the step
    assert [r.step for r in _steps(["Epoch: 3, Steps: 500 | Train Loss: 0.65"])] == [3]


def test_a_perplexity_alone_is_the_loss_of_a_log_that_names_no_step_and_no_loss():
    # punctuator2 (tests/data/reallogs/tune/theano_punctuator2_..): `PPL: 1.0010; Speed: 12549.65 sps` per report
    path = "tests/data/reallogs/tune/theano_punctuator2_epochs_46_47_train_ppl_1p0010_to_1p0015_val_ppl_6p61_overfit_ottokart_46.log"
    with open(path) as f:
        recs = _steps(f.read().splitlines())
    assert recs[0].step == 1 and recs[0].loss == pytest.approx(math.log(1.0010))
    # beside named losses a perplexity alone is an evaluation's (the Trainer's end-of-run `Perplexity: 1.00`)
    assert [r.loss for r in _steps(["{'loss': 1.2, 'epoch': 0.5}", "{'loss': 1.1, 'epoch': 1.0}",
                                    "Perplexity: 3.00"])] == [1.2, 1.1]


def test_a_value_whose_unit_is_a_rate_is_that_rate_whatever_its_name():
    # TF PSENet (tests/data/reallogs/heldout11/tensorflow_psenet_..), TF-Slim (tests/data/reallogs/tune/
    # tf_slim_duplicated_lines_healthy_2980.log), PaddleNLP (tests/data/reallogs/tune/paddlenlp_ernie_..)
    recs = _steps(["INFO:root:Step 000010, model loss 0.9581, total loss 0.9988, 92.09 seconds/step, 0.09 examples/second",  # noqa: E501
                   "INFO:tensorflow:global step 2: loss = 72.8609 (17.053 sec/step)",
                   "global step 3000, loss: 7.211366, speed: 2.87 steps/s, ips: 91.84 seqs/s",
                   # KittiSeg (tests/data/reallogs/heldout38/kittiseg_..): the rate in words, `per`
                   "2017-11-06 18:07:11,233 root INFO Step 100/100000: loss = 21.37; lr = 1.00e-05; 42.856 sec (per "
                   "Batch); 0.0 imgs/sec",
                   "step 4, loss 2.5, 0.5 sec per step, 12.5 samples per second"])
    assert [round(r.step_time_s, 4) for r in recs] == [92.09, 17.053, round(1 / 2.87, 4), 42.856, 0.5]
    assert recs[4].samples == 6  # 12.5 samples/s x 0.5 s
    # tqdm's own rate is smoothed: not a step time
    bar = _steps(["Epoch 0:  14%|█▍        | 100/704 [00:44<04:29,  2.24it/s, v_num=11, train_loss=4.600]"])
    assert bar[0].step_time_s is None


def test_asctime_stamps_tacotrons_train_loss_step_and_keras_epochs_of_equal_values():
    tune = "tests/data/reallogs/tune/"
    # Gene-Cheung's pytorch-deepglr issue #1: `Wed Apr  8 21:33:40 2020 [150] loss: 300453.795, time elapsed: ..`
    res = replay_file(tune + "custom_deepglr_epochs_145_160_loss_3k_9k_then_300453_at_150_5_7e9_at_151_1.log")
    assert [(e.rule, e.step) for e in res.events][0] == ("loss_spike", 150)
    # NVIDIA/tacotron2 issue #485: `Train loss 12001 0.166141 Grad Norm 0.372761 2.51s/it`
    recs = _steps(["Train loss 12001 0.166141 Grad Norm 0.372761 2.51s/it",
                   "Train loss 12002 4.972964 Grad Norm inf 1.78s/it"])
    assert [(r.step, r.loss, r.grad_norm) for r in recs] == [(12001, 0.166141, 0.372761), (12002, 4.972964, math.inf)]
    # keras-team/keras issue #2392: Keras draws a bar once (no tqdm double draw): equal values are epochs apart
    res = replay_file(tune + "keras_conv1d_adagrad_epochs_1_4_loss_frozen_5_7257_acc_0_6448_2392.log")
    assert res.steps == 4 and [(e.rule, e.step) for e in res.events] == [("loss_degenerate", 4)]


def test_data_names_the_data_time_and_an_epochs_first_step_is_known_slow():
    tune = "tests/data/reallogs/tune/"
    # NVIDIA/DALI issue #2608, the PyTorch ImageNet example's `Time 8.719 (0.361)	Data 8.597 (0.230)`: input-bound
    res = replay_file(tune + "pytorch_imagenet_dali_resnet50_iters_0_140_data_time_8_6s_from_iter_100_2608.log")
    assert [(e.rule, e.step, e.onset_step) for e in res.events] == [("throughput_drop", 120, 100)]
    recs = _steps(["Epoch: [1][100/5005]	Time 8.719 (0.361)	Data 8.597 (0.230)	Loss 1.2987 (1.2753)"])
    assert (round(recs[0].step_time_s, 3), recs[0].data_wait_s) == (0.122, 8.597)  # the time holds the data time
    assert _steps(["Epoch 1 step 3 loss 2.0 data 2/10"])[0].data_wait_s is None  # a count of a total: no time
    # timm's MetricLogger (MAE issue #49): epoch 25's first step waits for its loaders to start again, as the live
    # callback marks an epoch's end: known slow, not judged
    res = replay_file(tune + "mae_backtick_loss_scale_epoch_boundary_healthy_49.log")
    assert res.events == [] and res.last.slow_reason == "epoch"


def test_a_loss_functions_name_among_step_words_is_a_loss():
    # speechbrain/speechbrain issue #1170 (tests/data/reallogs/tune/speechbrain_sepformer_..): SI-SNR, the loss
    assert lookup("train si-snr") == ("loss_other", None) and lookup("valid si-snr") == ("eval", None)
    assert lookup("train_cross_entropy") == ("loss_other", None) and lookup("kl_coef") is None
    res = replay_file("tests/data/reallogs/tune/speechbrain_sepformer_epochs_1_10_train_si_snr_2_23_to_minus_2_33_healthy_1170.log")  # noqa: E501
    assert res.steps == 10 and res.events == []


def test_a_perplexity_alone_is_the_loss_by_its_log_and_a_tables_count_column_and_a_tutorials_count():
    tune = "tests/data/reallogs/tune/"
    # harvardnlp/data2text issue #9 (OpenNMT's Lua trainer): `PPL` is all a step line says of its loss
    recs = _steps(["Epoch 1 ; Iter 50/213 ; LR 1.0000 ; Target tokens/s 1265 ; PPL 8226.52 ;"])
    assert recs[0].step == 50 and math.isclose(recs[0].loss, math.log(8226.52))
    assert lookup("train_ppl") == ("loss_ppl", None) and lookup("Validation perplexity") == ("eval", None)
    res = replay_file(tune + "lua_seq2seq_data2text_epochs_1_3_ppl_8226_to_33_val_493_to_39_healthy_9.log")
    assert res.steps == 11 and res.events == []
    # a named loss wins (fairseq prints both); a block's perplexity line is no loss of its own (OLMo's
    # `train/Perplexity=195,153` under `train/CrossEntropyLoss=12.18`, tests/data/reallogs/tune/olmo_loss_zero_18.log)
    assert _steps(["| epoch 001 | loss 2.3 | ppl 4.92 | num_updates 100"])[0].loss == 2.3
    res = replay_file(tune + "olmo_loss_zero_18.log")
    assert (res.steps, res.merged_lines, res.last.loss) == (3, 13, 0.0)
    # explosion/spaCy issue #7083: spaCy's table, `#` its step column, a header whose names hold digits
    res = replay_file(tune + "spacy3_ner_en_lg_steps_0_1000_loss_ner_2163_to_1087_ents_f_0_93_healthy_7083.log")
    assert res.steps == 6 and res.last.step == 1000 and res.last.loss == 25.08 + 1343.08  # LOSS TOK2VEC + LOSS NER
    # pytorch/tutorials issue #847, the char-RNN classification tutorial: a count, its share of the run and the
    # time, then the loss
    res = replay_file(tune + "pytorch_tutorial_char_rnn_classification_iters_5000_50000_loss_2_4_then_nan_from_35000_847.log")  # noqa: E501
    assert res.steps == 10 and [(e.rule, e.step) for e in res.events][0] == ("nan_inf", 35000)
    # the generation tutorial's print, '%s (%d %d%%) %.4f' % (timeSince(start), iter, iter / n_iters * 100, loss)
    assert [(r.step, r.loss) for r in _steps(["0m 9s (5000 5%) 2.6479", "0m 18s (10000 10%) 2.5021"])] == [
        (5000, 2.6479), (10000, 2.5021)]


def test_a_running_train_time_a_units_name_a_range_of_steps_and_a_rate_named_after_a_value():
    tune = "tests/data/reallogs/tune/"
    # openai/parameter-golf PR #276 (modded-nanogpt): `train_time` is the training time so far, validation left
    # out; its difference over the steps since the line before is their step time
    recs = _steps(["step:370/500 train_loss:2.9611 train_time:190434ms step_avg:514.69ms",
                   "step:380/500 train_loss:3.0367 train_time:195637ms step_avg:514.83ms",
                   "step:390/500 train_loss:2.9037 train_time:253681ms step_avg:650.46ms"])
    assert [r.step_time_s for r in recs] == [None, pytest.approx(0.5203), pytest.approx(5.8044)]
    res = replay_file(tune + "modded_nanogpt_rtx4070_steps_10_471_step_avg_520ms_to_8s_from_390_wallclock_cap_pg276.log")
    # (the slow records from step 390 on pass `min_seconds`, 120 s of wall time, at step 400)
    assert [(e.rule, e.step, e.onset_step) for e in res.events] == [("throughput_drop", 400, 390)]
    # stark-sim/megatron-deepspeed-lock-clock: DeepSpeed's `iter time (s): 70.312 samples/sec: 0.114` (a unit in
    # parentheses after a time's name; `samples/sec:` names the next value); Zeus' summary of a range of steps
    # (`Steps 1-20: .. Time=1596.6 s`) is no time of the last step
    assert text.pairs(text.clean("steps: 20 loss: 10.3060 iter time (s): 70.312 samples/sec: 0.114"))[1:] == [
        ("loss", "10.3060", None, None), ("step_time_s", "70.312", None, "s"), ("sps", "0.114", None, None)]
    res = replay_file(tune + "megatron_deepspeed_qwen_dual8_eth_iters_1_20_iter_14_208s_vs_72s_lockclock.log")
    assert res.events == [] and res.last.step == 20 and res.last.step_time_s == 70.3208
    assert lookup("elapsed time per iteration (ms)") == ("step_time_s", "ms") and lookup("loss (s)") is None
    # facebookresearch/mmf issue #29: the unit glued to the name, `time(s): 195.1 s` (the time of the 100
    # iterations since the line before: 1371 s at iteration 9300 is a drop, judged against the one line before)
    assert text.pairs(text.clean("iter: 9300 train_loss: 1.1513  time(s): 1371.4 s"))[1:] == [
        ("loss", "1.1513", None, None), ("step_time_s", "1371.4", None, "s")]
    assert lookup("time(ms)") == ("step_time_s", "ms") and lookup("loss(s)") is None
    res = replay_file(tune + "mmf_pythia_save_a_report_iter_9300_time_1371s_vs_195s_29.log")
    assert [(e.rule, e.step, e.onset_step) for e in res.events] == [("throughput_drop", 9300, 9300)]
    # junyanz/pytorch-CycleGAN-and-pix2pix issue #510: `iters` names the step of a line with a time; mlx-lm's
    # trainer prints the run's total before training, print(f"Starting training..., iters: {args.iters}")
    (rec,) = _steps(["(epoch: 1, iters: 100, time: 0.507, data: 0.091) D_A: 0.201 G_A: 0.297 cycle_A: 4.741 "])
    assert (rec.step, rec.data_wait_s) == (100, 0.091) and rec.step_time_s == pytest.approx(0.416)
    assert _steps(["Starting training..., iters: 400"]) == []


def test_a_bracketed_range_after_a_counter_is_the_record_of_the_interval_it_closes():
    # MXNet's Speedometer (bigdevilTJJ/mxnet-cornernet's log): `Batch [a-b]` is the interval since the report before,
    # its values the interval's, so its record is batch b's; the counter restarts each epoch. Zeus' `Steps 51-100:`
    # (no brackets) is a summary of steps whose own lines the log holds (test above)
    tune = "tests/data/reallogs/tune/"
    name = "mxnet_module_cornernet_epochs_4_5_loss_flat_8p6_speed_6p2_drops_to_3p4_throughput_bigdeviltjj1.log"
    lines = open(tune + name).read().splitlines()
    recs = _steps(lines)
    assert len(recs) == 17 and [(r.step, r.loss) for r in recs[:2]] == [(620, 8.776213), (640, 8.809524)]
    assert [r.step for r in recs[5:8]] == [720, 740, 760]  # epoch 5's count placed after epoch 4's
    assert [r.step for r in _steps(lines[10:12])] == [20, 40]
    assert replay_file(tune + name).steps == 17


def test_argparse_s_namespace_of_a_script_s_arguments_is_a_header():
    # LPtrichor/PatchTST's Informer run: `print(args)` prints `Namespace(.., itr=2, .., learning_rate=0.0001, ..)`
    # before training; its values are settings (`itr` is no step), and the epoch lines after it, each with its
    # evaluation losses, are the run's step records
    tune = "tests/data/reallogs/tune/"
    name = "custom_pytorch_informer_etth1_epochs_1_38_train_loss_0p94_to_0p30_vali_1p16_to_1p59_healthy_lptrichor.log"
    lines = open(tune + name).read().splitlines()
    assert lines[2].startswith("Namespace(random_seed=2021, is_training=1,") and "itr=2" in lines[2]
    recs = _steps(lines)
    assert [(r.step, r.loss, r.lr) for r in recs[:2]] == [(1, 0.9394618, None), (2, 0.6037571, None)]
    res = replay_file(tune + name)
    assert (res.steps, res.evaluations, res.skipped["header"], res.events) == (38, 38, 1, [])


def test_a_number_glued_to_a_word_is_no_value_of_it():
    # `x2` (a count, `loss_spike x2`), `top5`, `fp16` name no value: a value follows its name after a separator or a
    # space (or a bracket, a quote); names that end in digits keep theirs
    assert text.pairs(text.clean("step 393: 2 event(s) (loss_spike x2)")) == [("step", "393", None, None)]
    assert text.pairs(text.clean("step 5 loss_spike 2.5")) == [("step", "5", None, None), ("loss", "2.5", None, None)]
    assert text.pairs(text.clean("iter 7 loss 2.5 fp16 top5 acc 0.9"))[:2] == [("step", "7", None, None),
                                                                              ("loss", "2.5", None, None)]
    assert text.pairs(text.clean("[E 1 | it 100] loss: 2")) == [("step", "100", None, None), ("loss", "2", None, None)]


def test_cost_by_its_unit_a_loss_prefix_a_count_after_a_hash_and_a_log_of_epoch_times(tmp_path):
    tune = "tests/data/reallogs/tune/"
    # marian-nmt/marian issue #480: `Up.` counts the updates, `Cost` without a unit is the loss, `L.r.` is no loss
    line = ("[2019-08-17 21:41:36] Ep. 2 : Up. 576000 : Sen. 66,397,147 : Cost 2.76825786 : Time 586.24s : "
            "16590.60 words/s : L.r. 5.0000e-05")
    assert text.pairs(text.clean(line)) == [("epoch", "2", None, None), ("step", "576000", None, None),
                                            ("loss", "2.76825786", None, None), ("step_time_s", "586.24", None, "s")]
    # a so-vits-svc fork (issue #563): `cost` with a time unit is a time; a log that shows no loss, only epochs and
    # their times, has a record per epoch (its slow first epoch has nothing before it: no event)
    res = replay_file(tune + "sovits_fork_epochs_6019_6025_epoch_6019_cost_53049s_then_14s_563.log")
    assert [(r.step, r.step_time_s) for r in [res.last]] == [(6025, 14.33)] and res.records == 7
    # ... not in a log of losses: there a line of an epoch and a time is an evaluation's or a summary's, no record,
    # and no part of the epoch's record either (tests/data/reallogs/heldout3/custom_mst_..: its step time stays)
    mst = _steps(["===> Epoch 191 Complete: Avg. Loss: 0.014257 time: 656.69",
                  "===> Epoch 191: testing psnr = 34.41, ssim = 0.940, time: 0.02",
                  "===> Epoch 192: testing psnr = 34.44, ssim = 0.939, time: 0.02"])
    assert [(r.step, r.step_time_s) for r in mst] == [(191, 656.69)]
    # ... nor in a log of per-epoch evaluations alone (`print(f"Epoch {e}: Validation Loss: {v}")`): each line its
    # epoch's evaluation, judged by the evaluation rules; a log of accuracies alone has no loss: no training log
    res = replay_file(_write(tmp_path, ["Epoch 1: Validation Loss: 2.31", "Epoch 2: Validation Loss: 2.10",
                                        "Epoch 3: Validation Loss: nan"]))
    assert res.evaluations == 3 and [(e.rule, e.step) for e in res.events] == [("eval_nan", 3)]
    with pytest.raises(ReplayError, match="no known training-log format"):
        replay_file(_write(tmp_path, ["Epoch 1: Validation Accuracy: 7.27%", "Epoch 2: Validation Accuracy: 8.1%"],
                           "acc.log"))
    # XPixelGroup BasicSR's `l_pix` (a loss named for its part), `l_all` (the total); `l_r` is none
    assert [(lookup(n) or (None,))[0] for n in ("l_pix", "l_g_gan", "l_all", "l_r")] == ["loss_other", "loss_other",
                                                                                       "loss", None]
    (rec,) = _steps(["2025-11-20 18:04:40,262 INFO: [SAFMN..][epoch:  0, iter:   1,400, lr:(1.000e-03,)] [eta: 8 days, "
                     "22:51:35, time (data): 0.776 (0.020)] l_pix: 3.0228e-02 f_pix: 2.5529e-01 "])
    assert (rec.step, rec.loss) == (1400, 0.030228)
    # `#` before a count (Anti-DreamBooth's `Step #1, loss: nan`; neural-enhance's `Epoch #1 at 209.2s`)
    assert text.pairs(text.clean("Step #1, loss: nan, prior_loss: nan"))[:2] == [("step", "1", None, None),
                                                                               ("loss", "nan", None, None)]
    assert text.pairs(text.clean("Epoch #1 at 209.2s, lr=1.00e-04"))[0] == ("epoch", "1", None, None)


def test_a_word_value_before_a_name_of_words_and_a_total_in_a_list_of_name_value_items():
    # tdrussell/diffusion-pipe issue #531: DeepSpeed's pipeline line, `loss: nan` before `iter time (s):` (the next
    # pair's name has words and a unit); prose after a word value stays no pair
    assert text.pairs(text.clean("steps: 18 loss: nan iter time (s): 3.235 samples/sec: 0.309"))[1:3] == [
        ("loss", "nan", None, None), ("step_time_s", "3.235", None, "s")]
    assert text.pairs(text.clean("loss is nan or inf")) == []
    # Bohao-Lee/CME issue #30: YOLOv2's region loss, `loss: x .., conf nan, .., total nan` (a total word and its
    # value, a comma-separated item: a pair; `Total 3` leading a line is a heading)
    line = ("80: nGT 40, recall 13, proposals 39993, loss: x 23.945053, y 22.210649, w 2029862.625000, h "
            "16542059.000000, conf nan, cls 111.281578, class_contrast 0.000000, total nan")
    assert [(r.step, r.loss) for r in _steps([line])][0][0] == 80 and math.isnan(_steps([line])[0].loss)
    assert text.pairs(text.clean("Total 3 loss: 2.5")) == [("loss", "2.5", None, None)]


def test_a_json_object_printed_over_several_lines_is_one_record():
    # a Hugging Face Trainer's trainer_state.json (log_history, indent 2, keys sorted: the step after the grad norm),
    # tests/data/reallogs/tune/hf_trainer_state_..: the grad norm 82.41 is step 22360's
    res = replay_file("tests/data/reallogs/tune/hf_trainer_state_acc_ploss_0_6_steps_22260_22440_grad_norm_4_5_to_82_4_"
                      "at_22360_loss_flat_star.log")
    assert [(e.rule, e.step) for e in res.events] == [("grad_norm_spike", 22360)] and res.steps == 10
    block = ["  {", '    "epoch": 1.76,', '    "grad_norm": 82.4,', '    "loss": 4.28,', '    "step": 22360', "  },"]
    (rec,) = _steps(block)
    assert (rec.step, rec.grad_norm, rec.loss) == (22360, 82.4, 4.28)
    # an object longer than OBJECT_LINES is no record's: its lines are read one by one from there
    long = ["{"] + [f'  "k{i}": {i},' for i in range(text.OBJECT_LINES)] + ["step 7 loss 2.5"]
    assert [(r.step, r.loss) for r in _steps(long)] == [(7, 2.5)]


def test_a_name_and_its_value_as_two_comma_separated_items_are_a_pair():
    # howdrox/MRI-Analysis's log.txt: `.., step 10, loss_train, 0.838` (a list of items, the name one, its value the
    # next); a count and a word before the comma (`105 samples, 105 ..`) and a tuple in a config are no pair
    path = ("tests/data/reallogs/tune/custom_unet_mri_epochs_1_4_steps_10_410_loss_0_84_to_0_21_val_loss_0_66_"
            "to_0_27_healthy_howdrox.log")
    assert replay_file(path).events == []
    with open(path) as f:
        recs = _steps(f.read().splitlines())
    assert [(r.step, r.loss) for r in recs if r.loss is not None][-1] == (410, 0.211)
    # each phase's heading counts the run's steps (`epoch 4, phase valid, total step 416`): a step, no loss
    assert (recs[-1].step, recs[-1].loss) == (416, None)
    assert text.pairs(text.clean("epoch 1, phase train, step 10, loss_train, 0.838"))[-1] == (
        "loss", "0.838", None, None)
    assert text.pairs(text.clean("Training summary: 105 samples, 105 batches/epoch, batch size 1")) == []
    assert text.pairs(text.clean("workflow: [('train', 1)], max: 100 epochs")) == []


def test_llm_c_s_and_trl_are_the_step_and_its_loss():
    # llm.c's log file (llmc/logger.h: `s:%d trl:%.4f lr:%.6f norm:%.2f`, `s:%d tel:%.4f`, `s:%d eval:%.4f`), the
    # step named `s` with a separator only and as printed (YOLACT's `S: 1.564` is a loss part, `5.2 s 100` a time)
    recs = _steps(["s:4998 trl:3.5912 lr:0.000526 norm:0.28", "s:4999 trl:3.5455 lr:0.000526 norm:0.27",
                   "s:5000 tel:3.5556", "s:5000 eval:0.2734", "s:5000 trl:3.6325 lr:0.000526 norm:0.26"])
    assert [(r.step, r.loss, r.grad_norm) for r in recs] == [(4998, 3.5912, 0.28), (4999, 3.5455, 0.27),
                                                            (5000, 3.6325, 0.26)]
    assert [f for f, *_ in text.pairs(text.clean("[  1]    1440 || B: 5.495 | S: 1.564 | T: 17.647"))] == ["loss"]
    assert text.pairs(text.clean("took 5.2 s 100 samples")) == []


def test_a_loops_index_i_is_its_step_with_a_separator():
    # `print(f"i: {i}, loss: {loss.item()}")`, the loop index of many custom loops: the step, printed lower case
    # with a separator; a loss that does not move is then no copy of the line before, and a relaunch goes back
    lines = [f"i: {i}, train_loss: 1.3862946033477783" for i in (0, 1, 2, 0, 1)]
    assert [(r.step, r.loss) for r in _steps(lines)] == [(0, 1.3862946033477783), (1, 1.3862946033477783),
                                                        (2, 1.3862946033477783), (0, 1.3862946033477783),
                                                        (1, 1.3862946033477783)]
    assert lookup("i") == ("step", None) and lookup("I") != ("step", None)
    assert text.pairs(text.clean("i 3 loss 2.0")) == [("loss", "2.0", None, None)]  # no separator: no step


def test_a_trainer_dict_glued_after_a_bar_at_zero_is_numbered_as_the_dicts_after_it():
    # MindNLP's Trainer (tune/mindnlp_albert_..): the bar's first draw, `0/4245 [00:00<?, ?it/s]`, then the first
    # logged step's dict on the same line, and dicts alone after it: each dict a record, numbered by position
    lines = ["  0%|                                   | 0/4245 [00:00<?, ?it/s]{'loss': 2.9946, 'learning_rate': "
             "1.995288574793875e-05, 'epoch': 0.01}",
             "{'loss': 2.9886, 'learning_rate': 1.9905771495877505e-05, 'epoch': 0.01}",
             "{'loss': 2.9802, 'learning_rate': 1.9858657243816254e-05, 'epoch': 0.02}"]
    assert [r.loss for r in _steps(lines)] == [2.9946, 2.9886, 2.9802]
    # a bar at 0 whose postfix has the values (diffusers' `loss=nan` at its first draw) numbers its line
    assert [r.step for r in _steps(["Steps:   0%|          | 0/100 [00:09<?, ?it/s, loss=nan, lr=1e-6]"])] == [0]


def test_a_whole_trainer_state_json_reads_the_objects_of_its_log_history():
    # a Hugging Face trainer_state.json from its first line: the file's own object holds log_history, a list of
    # objects each a record (tests/data/reallogs/tune/hf_trainer_state_raw_..: grad norm NaN from step 1)
    res = replay_file("tests/data/reallogs/tune/hf_trainer_state_raw_steps_1_6_grad_norm_nan_from_1_eval_loss_nan_loss_"
                      "0_0_at_3_5_versil91.log")
    assert ("nan_inf", 1) in [(e.rule, e.step) for e in res.events] and res.last.step == 5
    whole = ['{', '  "global_step": 20,', '  "log_history": [', '    {', '      "grad_norm": 1.5,', '      "loss": 2.5,',
             '      "step": 10', '    },', '    {', '      "grad_norm": 1.4,', '      "loss": 2.4,', '      "step": 20',
             '    }', '  ],', '  "max_steps": 100', '}']
    assert [(r.step, r.grad_norm, r.loss) for r in _steps(whole)] == [(10, 1.5, 2.5), (20, 1.4, 2.4)]


def test_a_count_whose_total_grows_while_it_stays_is_an_epoch_and_its_step_and_cv_lines_are_evaluations(tmp_path):
    # wenet-e2e/wenet issue #825, description (tests/data/reallogs/tune/wenet_asr_epoch0_..): `TRAIN Batch
    # epoch/batch`, one line every 100 batches; the first record, still pending, is renumbered
    lines = ["2021-11-30 17:25:35,809 DEBUG TRAIN Batch 0/4000 loss inf loss_att 78.135910 loss_ctc inf lr 0.00001905 rank 0",
             "2021-11-30 17:25:56,021 WARNING NaN or Inf found in input tensor.",
             "2021-11-30 17:26:33,053 DEBUG TRAIN Batch 0/4100 loss 156.104248 loss_att 146.877640 loss_ctc 177.633026 lr 0.00001953 rank 0",  # noqa: E501
             "2021-11-30 17:28:30,782 DEBUG TRAIN Batch 0/4200 loss 90.697769 loss_att 89.033356 loss_ctc 94.581398 lr 0.00002000 rank 0"]  # noqa: E501
    res = replay_file(_write(tmp_path, lines))
    assert res.steps == 3 and [(e.rule, e.step) for e in res.events] == [("nan_inf", 4000)]
    # a total that stays is a total (CosyVoice's `TRAIN Batch 7/100` on every rank: step 7); Kaldi's and WeNet's
    # `CV` lines are evaluations (wenet-e2e/wenet issue #941, turn 4)
    assert [r.step for r in _steps(["DEBUG TRAIN Batch 7/100 loss 2.5 rank 0", "DEBUG TRAIN Batch 7/100 loss 2.4 rank 0"])
            ] == [7, 7]
    items = read(["2023-01-30 18:47:07,107 DEBUG TRAIN Batch 4/203700 loss 12.646465 loss_att 10.921429 loss_ctc 16.671551 lr 0.00032621 rank 0",  # noqa: E501
                  "2023-01-30 18:49:20,438 DEBUG TRAIN Batch 4/203800 loss 25.618004 loss_att 20.509174 loss_ctc 37.538609 lr 0.00032619 rank 0",  # noqa: E501
                  "2023-01-30 18:49:56,046 DEBUG CV Batch 4/0 loss 28.402842 loss_att 24.164579 loss_ctc 38.292122 history loss 27.845923 rank 0"],  # noqa: E501
                 evaluations=True)
    assert [(type(i).__name__, i.step) for i in items if not isinstance(i, str) and i is not None] == [
        ("StepRecord", 203700), ("StepRecord", 203800), ("Evaluation", 203800)]


def test_a_key_value_table_between_lines_of_dashes_is_one_record_and_a_log2_scale_is_no_scale(tmp_path):
    # OpenAI's logger.dumpkvs, as improved-diffusion prints it (yangqy1110/MGDM issue #3, description:
    # tests/data/reallogs/tune/improved_diffusion_mgdm_step_1_09e4_..): two tables, then three overflows of its fp16
    # trainer, whose scale is logged as its base-2 logarithm (`lg_loss_scale`, no loss scale)
    lines = ['----------------------------',
             '| grad_norm     | 1.76     |',
             '| lg_loss_scale | 17.9     |',
             '| loss          | 0.423    |',
             '| loss_q0       | 0.817    |',
             '| loss_q1       | 0.48     |',
             '| loss_q2       | 0.00109  |',
             '| mse           | 0.23     |',
             '| mse_q0        | 0.342    |',
             '| mse_q1        | 0.465    |',
             '| mse_q2        | 0.00105  |',
             '| param_norm    | 333      |',
             '| samples       | 1.09e+04 |',
             '| step          | 1.09e+04 |',
             '| vb            | 0.193    |',
             '| vb_q0         | 0.475    |',
             '| vb_q1         | 0.0152   |',
             '| vb_q2         | 3.87e-05 |',
             '----------------------------',
             '----------------------------',
             '| grad_norm     | 1.67     |',
             '| lg_loss_scale | 17.9     |',
             '| loss          | 0.842    |',
             '| loss_q0       | 0.439    |',
             '| loss_q1       | 0.858    |',
             '| loss_q2       | 1.03     |',
             '| loss_q3       | 1.04     |',
             '| mse           | 0.789    |',
             '| mse_q0        | 0.369    |',
             '| mse_q1        | 0.829    |',
             '| mse_q2        | 0.988    |',
             '| mse_q3        | 0.993    |',
             '| param_norm    | 334      |',
             '| samples       | 1.09e+04 |',
             '| step          | 1.09e+04 |',
             '| vb            | 0.0534   |',
             '| vb_q0         | 0.0705   |',
             '| vb_q1         | 0.0294   |',
             '| vb_q2         | 0.0401   |',
             '| vb_q3         | 0.0507   |',
             '----------------------------',
             'Found NaN, decreased lg_loss_scale to 16.929000000013357',
             'Found NaN, decreased lg_loss_scale to 15.929000000013357',
             'Found NaN, decreased lg_loss_scale to 14.929000000013357']
    recs = _steps(lines)
    assert [(r.step, r.loss, r.grad_norm, r.loss_scale) for r in recs[:2]] == [(10900, 0.423, 1.76, None),
                                                                              (10900, 0.842, 1.67, None)]
    # each overflowed step at the scale it ran with, the one before the fall it names
    assert [(r.step, r.overflow, round(r.loss_scale)) for r in recs[2:]] == [
        (10901, True, round(2 ** 17.929000000013357)), (10902, True, round(2 ** 16.929000000013357)),
        (10903, True, round(2 ** 15.929000000013357))]
    res = replay_file(_write(tmp_path, lines))
    assert [(e.rule, e.step, e.onset_step) for e in res.events] == [("overflow_storm", 10903, 10901)]
    # Stable-Baselines3's table, rows under sections (rlberry-py/rlberry docs/basics/userguide/agent.md, PPO on
    # CartPole): `train/loss`, `train/learning_rate`
    sb3 = ['-----------------------------------------',
             '| rollout/                |             |',
             '|    ep_len_mean          | 28.1        |',
             '|    ep_rew_mean          | 28.1        |',
             '| time/                   |             |',
             '|    fps                  | 1842        |',
             '|    iterations           | 2           |',
             '|    time_elapsed         | 2           |',
             '|    total_timesteps      | 4096        |',
             '| train/                  |             |',
             '|    approx_kl            | 0.009214947 |',
             '|    clip_fraction        | 0.102       |',
             '|    clip_range           | 0.2         |',
             '|    entropy_loss         | -0.686      |',
             '|    explained_variance   | -0.00179    |',
             '|    learning_rate        | 0.0003      |',
             '|    loss                 | 8.42        |',
             '|    n_updates            | 10          |',
             '|    policy_gradient_loss | -0.0158     |',
             '|    value_loss           | 51.5        |',
             '-----------------------------------------']
    (rec,) = _steps(sb3)
    assert (rec.loss, rec.lr) == (8.42, 0.0003)
    # lines of dashes around anything else are read as they are (a rule under a heading)
    assert [r.loss for r in _steps(["-" * 40, "step 5 loss 2.5", "-" * 40, "| not | a | row |", "step 6 loss 2.4"])
            ] == [2.5, 2.4]


def test_a_logger_date_with_a_four_digit_year_and_slashes_is_its_prefix_whole():
    # PaddlePaddle's `[2025/06/14 22:43:50] ppcls INFO: ..` (tune/paddleclas_repvgg_..): the whole date-time is
    # the prefix, as `[09/13/23 09:33:10]` is, not its last 2-digit-year-shaped part with `[20` left before it
    line = "[2025/06/14 22:43:50] ppcls INFO: [Train][Epoch 1/1000][Iter: 0/148]CELoss: 2.44466, loss: 2.44466"
    assert text.clean(line).startswith(" " * 21 + " ppcls INFO:") and text._prefix_end(line) >= 21
