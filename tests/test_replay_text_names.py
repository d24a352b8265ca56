"""The generic text reader's names, counters and value order (monitor/replay/fields.py, monitor/replay/text.py): real
lines of the corpus (tests/data/reallogs) and of other public logs, each copied exactly, its source named."""
import math
from pathlib import Path

import pytest

from test_replay_text import read
from training_monitor.replay import csvlog, replay_file, text
from training_monitor.replay.fields import LOSS_AVERAGE, LOSS_OTHER, LOSS_PART, lookup, resolve

TUNE = Path(__file__).parent / "data" / "reallogs" / "tune"


def lines(name):
    return (TUNE / name).read_text(encoding="utf-8").splitlines(True)


def nan_or(v):
    return "nan" if isinstance(v, float) and math.isnan(v) else v


@pytest.mark.parametrize("name, field", [
    ("step_loss", "loss"), ("Training loss", "loss"), ("loss train (curr)", "loss"), ("Loss", "loss"),
    ("reduced_train_loss", LOSS_OTHER), ("loss_net", LOSS_OTHER), ("loss_cls", LOSS_OTHER),
    ("load_balancing_loss", LOSS_OTHER), ("average_loss", LOSS_AVERAGE), ("moving ave loss", LOSS_AVERAGE),
    ("epoch_loss", LOSS_AVERAGE), ("val_loss", "eval"), ("valid_nll_loss", "eval"), ("dynamic_loss_scale", "loss_scale"),
    ("current loss scale", "loss_scale"), ("loss at step", None), ("loss 2", None),
    ("norm", "grad_norm"), ("global norm", "grad_norm"), ("clipped grad norm", "grad_norm"), ("norm_average", None),
    ("weight norm", None), ("param_norm", None), ("iter time", "step_time_s"), ("Training Iteration", "step"),
    # loss functions' names, words apart or not (OpenNMT's `xent`, GluonCV's `CrossEntropy=`, `SmoothL1=`)
    ("xent", LOSS_OTHER), ("CrossEntropy", LOSS_OTHER), ("cross_entropy", LOSS_OTHER), ("SmoothL1", LOSS_OTHER),
    ("Smooth L1", LOSS_OTHER), ("entropy", None), ("policy_entropy", None), ("val_xent", "eval"),
    # `cur`, the step's value (CompressAI's custom loop: `avg_mse: 0.01 | cur_mse: 0.01`), as `curr`, `current`
    ("cur_mse", LOSS_OTHER), ("avg_mse", None), ("cur_loss", "loss"),
    ("losses", "loss"),  # (maskrcnn-benchmark loops' `losses = sum(loss for loss in loss_dict.values())`)
    # camelCase words apart; PyTorch's GradScaler scale
    ("LearningRate", "lr"), ("GlobalStep", "step"), ("valLoss", "eval"), ("TrainLoss", "loss"),
    ("lossScale", "loss_scale"), ("Fp16 Grad Scale", "loss_scale"), ("IoU", None), ("mAP", None),
    # settings of training, in configuration dumps (fairseq's hydra config `'loss_weights': [0.1, 10]`,
    # `'min_loss_scale': 0.0001`; MindYOLO's `loss.reg_max 16`; MindFormers' `loss_scale_window`; HF's `max_grad_norm`)
    ("loss_weights", None), ("min_loss_scale", None), ("loss.reg_max", None), ("loss_scale_window", None),
    ("max_grad_norm", None), ("init_loss_scale", None), ("bbox_loss_coef", None), ("clip_grad_norm", None),
    # a time's unit as an identifier's last part
    ("step_time_ms", "step_time_s"), ("time_ms", "step_time_s"), ("data_time_s", "data_wait_s"), ("loss_s", None),
    # `so far`, a running value (prednet-paddle's `avg loss so far is ..`); a loss function's name counts for no
    # qualifier (ESTRNN's `L1_Charbonnier_loss_color`); a phrase ending in a loss's identifier, `is` before its `:`
    # (CLOCs' `and the cls_loss is : ..`); four qualifiers are still too many (pytorch/examples' word_language_model
    # `Namespace(annealing_loss_improvement_pct=1.0, ..)`; OLMo's `grad_provenance/embedding_grad_l1_norm`)
    ("avg loss so far", LOSS_AVERAGE), ("L1_Charbonnier_loss_color", LOSS_OTHER), ("and the cls_loss is", LOSS_OTHER),
    ("loss is", "loss"), ("annealing_loss_improvement_pct", None), ("embedding_grad_l1_norm", None),
])
def test_a_loss_or_norm_name_is_read_by_its_qualifiers(name, field):
    hit = lookup(name)
    assert (hit[0] if hit else None) == field


def test_a_line_takes_its_step_loss_else_its_only_other_loss_else_its_average():
    assert resolve(["step", LOSS_AVERAGE, "loss", "lr"]) == ["step", LOSS_AVERAGE, "loss", "lr"]
    assert resolve(["step", LOSS_OTHER, "loss_scale"]) == ["step", "loss", "loss_scale"]
    assert resolve(["step", LOSS_OTHER, LOSS_OTHER]) == ["step", LOSS_PART, LOSS_PART]  # parts: their sum
    assert resolve(["step", LOSS_OTHER, LOSS_OTHER, LOSS_AVERAGE]) == ["step", LOSS_OTHER, LOSS_OTHER, "loss"]
    # DLLogger (NVIDIA DeepLearningExamples BERT pre-training, issue #543): the average first, the step's loss after it
    dll = read(lines("bert_dll_checkpoint_healthy_543.log"))
    assert [(r.step, r.loss, r.lr) for r in dll][:2] == [(1785, 1.6357421875, 0.003569364653091749),
                                                          (1885, 1.169921875, 0.0037693290594274214)]
    assert len(dll) == 5  # the `PARAMETER checkpoint_step : 1785` lines name no step
    # darkflow (thtrieu/darkflow issue #470, turn 1): the step loss, then its moving average
    assert [(r.step, r.loss) for r in read(["step 1476 - loss 82.30193328857422 - moving ave loss 82.68567209073576\n",
                                            "Checkpoint at step 1476\n",
                                            "step 1477 - loss 82.56144714355469 - moving ave loss 82.67324959601765\n"])] \
        == [(1476, 82.30193328857422), (1477, 82.56144714355469)]
    # mmdetection's logger (the line of test_replay_text): the total `loss` after a part `loss_cls`
    mmdet = read(["2021-08-18 19:36:00,257 - mmdet - INFO - Epoch [1][50/5808]\tlr: 1.000e-02, eta: 5:02:49, "
                  "time: 0.784, data_time: 0.085, memory: 8104, loss_cls: 0.8811, loss: 1.6522\n"])
    assert [(r.step, r.loss) for r in mmdet] == [(50, 1.6522)]
    # a custom loop's only loss, named for its net (MedicalDataAugmentationTool-VerSe issue #31), and `norm`
    verse = read(lines("custom_verse_nan_scale_31.log"))
    assert [(r.step, nan_or(r.loss), r.loss_scale, nan_or(r.grad_norm)) for r in verse] == \
        [(0, 0.9443, 32768.0, 21.8862), (100, "nan", 785.42, "nan"), (200, "nan", 1.0, "nan")]
    # NeMo's step line (NVIDIA-NeMo PR #10128, description): `reduced_train_loss` is its only loss
    nemo = read(["Training epoch 0, iteration 0/9 | lr: 0.0006 | consumed_samples: 32 | global_batch_size: 32 | "
                 "global_step: 0 | reduced_train_loss: 11.02\n",
                 "Training epoch 0, iteration 1/9 | lr: 0.0006 | consumed_samples: 64 | global_batch_size: 32 | "
                 "global_step: 1 | reduced_train_loss: 9.761\n"])
    assert [(r.step, r.loss, r.lr) for r in nemo] == [(0, 11.02, 0.0006), (1, 9.761, 0.0006)]
    # a CSV header chooses its loss column the same way
    parser = csvlog.Parser()
    parser.feed("step,average_loss,step_loss\n")
    assert parser.feed("7,1.49,1.64\n").loss == 1.64


def test_llm_c_norm_is_the_gradient_norm():
    # llm.c (anthonix/llm.c issue #2, turn 12): `norm` beside the loss, both NaN
    out = read(["step   10/74 | loss     nan (+nanz)| norm    nan (+nanz)| lr 3.00e-04 | 36.58 ms | 9.2% bf16 MFU | "
                "112241 tok/s\n"])
    assert [(r.step, nan_or(r.loss), nan_or(r.grad_norm), r.lr) for r in out] == [(10, "nan", "nan", 3e-4)]


def test_a_word_value_is_read_before_the_next_name_after_an_explicit_separator():
    # Learning-to-See-in-the-Dark (cchen156, issue #117): `epoch batch Loss=nan Time=..`, the counts unnamed
    lsid = read(lines("custom_lsid_unnamed_nan_117.log"))
    assert [r.step for r in lsid] == list(range(154, 162)) + [162, 163, 164]  # epoch 334 counts on from 161
    assert all(math.isnan(r.loss) for r in lsid) and lsid[0].step_time_s == 0.04
    # a word after a value with no separator is the name's next word: Megatron's `number of nan iterations: 0`
    megatron = read(lines("megatron_llm_bad_gradnorm_pr34.log"))
    assert [(r.step, r.overflow) for r in megatron][-1] == (3634, True)
    assert text.pairs("loss is nan or inf") == [] and text.pairs("number of nan iterations: 0")[0][:2] == \
        ("nan_iterations", "0")  # prose is no pair


def test_two_step_counters_number_the_line_by_the_first():
    # litgpt (Lightning-AI/litgpt PR #1055): the micro-batch iteration, then the optimizer step; a record per line
    lit = read(lines("litgpt_lora_healthy_1055.log"))
    assert [r.step for r in lit] == list(range(1, 10)) + [119, 120]
    assert (lit[0].loss, lit[0].step_time_s) == (1.657, pytest.approx(0.29827))
    # older litgpt shapes (Lightning-AI/litgpt issues #689 and #1042)
    old = read(["iter 76 step 38: loss 10.8259, iter time: 197.87ms\n",
                "iter 77 step 39: loss 10.8259, iter time: 214.40ms (optimizer.step)\n",
                "iter 1760 | step 220: loss 1.5947, iter time: 263.85 ms (optimizer.step)\n"])
    assert [(r.step, r.loss, r.step_time_s) for r in old] == \
        [(76, 10.8259, pytest.approx(0.19787)), (77, 10.8259, pytest.approx(0.2144)),
         (1760, 1.5947, pytest.approx(0.26385))]


def test_dllogger_lines_with_a_tqdm_bar_after_or_before_them():
    # NVIDIA DeepLearningExamples issue #1107: the bar after the fields (turn 1 as the corpus has it) ...
    after = read(lines("bert_dle_squad_tqdm_1107.log"))
    assert [(r.step, r.loss) for r in after] == [(1801, 0.8211057186126709), (1851, 2.275021553039551),
                                                 (1901, 0.6579757928848267)]
    # ... the bar before them (turn 1), and plain lines of epoch 1 (turn 0): the step is `Training Iteration`
    bar = "█" * 45 + " " * 147
    before = read([f"Iteration:  23%|{bar}| 650/2771 [01:23<04:25,  7.98it/s]DLL 2022-04-05 05:10:36.324733 - "
                   "Training Epoch: 0 Training Iteration: 651  step_loss : 2.0511345863342285  learning_rate : "
                   "2.9369138959931797e-05" + " " * 97 + "\n",
                   "DLL 2022-04-05 02:22:54.614486 - Training Epoch: 1 Training Iteration: 2872  step_loss : "
                   "0.6953772306442261  learning_rate : 1.5844598709048836e-05 \n"])
    assert [(r.step, r.loss) for r in before] == [(651, 2.0511345863342285), (2872, 0.6953772306442261)]


def test_a_line_of_value_first_fields_after_a_bare_count():
    # tinygrad's mlperf trainer (tinygrad/tinygrad PR #13803): `N value [unit] name, ...`
    res = replay_file(str(TUNE / "tinygrad_llama_warmup_flat_13803.log"))
    assert res.steps == 10 and res.events == []
    tiny = read(lines("tinygrad_llama_warmup_flat_13803.log"))
    assert [(r.step, r.loss, r.lr) for r in tiny][:3] == [(1, 11.875, 1e-12), (2, 11.875, 1e-12), (3, 11.875, 2e-12)]
    # darknet (AlexeyAB/darknet issue #2449, quoted there): `N: batch loss, avg loss, rate, seconds, images`; the batch
    # loss is unnamed, so the line's loss is its average
    darknet = read(["> 99: 469.803864, 848.945251 avg loss, 0.000000 rate, 20.457852 seconds, 6336 images\n",
                    "> Loaded: 0.000029 seconds\n",
                    "> 100: 443.011078, 808.351807 avg loss, 0.000000 rate, 20.684246 seconds, 6400 images\n"])
    assert [(r.step, r.loss) for r in darknet] == [(99, 848.945251), (100, 808.351807)]
    # a line not made of value-first fields is read name first: `2.5 loss` there is no pair
    assert [f[:2] for f in text.pairs("step 3, 2.5 loss, 0.1 lr")] == [("step", "3")]
    assert [f[:2] for f in text.pairs("step 3: loss 2.5, 4.32 s run")] == [("step", "3"), ("loss", "2.5")]


def test_a_record_hard_wrapped_before_its_step_is_at_that_step():
    # deepinsight/insightface issue #2262, description (tests/data/reallogs/tune/insightface_arcface_torch_fp16_..)
    res = replay_file(str(TUNE / "insightface_arcface_torch_fp16_grad_scale_0_loss_nan_steps_20_40_2262.log"))
    assert res.steps == 3 and res.merged_lines == 1
    assert [(e.rule, e.step) for e in res.events][:2] == [("nan_inf", 20), ("loss_scale_collapse", 20)]
    # a step line after a record whose step was named is its own record
    recs = read(["step 5 loss 2.5", "step 6 lr 0.1"])
    assert [(r.step, r.loss, r.lr) for r in recs] == [(5, 2.5, None), (6, None, 0.1)]


def test_pytorch_examples_count_and_a_line_naming_only_a_step_before_step_lines_with_evaluation_values():
    # MuggleWang/CosFace_pytorch issue #14, PyTorch's examples' `Train Epoch: 1 [51200/490871 (10%)]`: the count
    recs = read(lines("cosface_pytorch_epoch1_iters_100_900_loss_24_2_to_21_2_elapsed_per_100_iters_healthy_14.log"))
    assert [r.step for r in recs] == [51200 * i for i in range(1, 10)]
    # facebookresearch/mmf issue #29: `from [iteration 9200]` (prose naming a step alone) does not make the log's
    # step lines, which print their validation loss too, evaluation lines
    recs = read(lines("mmf_pythia_save_a_report_iter_9300_time_1371s_vs_195s_29.log"))
    assert [(r.step, r.loss) for r in recs] == [(9200, 1.1883), (9300, 1.1513), (9400, 1.1269)]


def test_a_dict_assigned_to_a_name_is_a_value_and_a_labelled_dict_the_record():
    # InternLM's metrics line (tests/data/reallogs/tune/internevo_30b_demo_rst_steps_0_5_loss_11_5_to_3_7_healthy.log)
    line = ("2023-09-06T10:30:38.216+08:00 INFO [training_internlm.py, line 413, in record_current_batch_training_"
            "metrics] - pid=15224 : tflops=40.00268401421643 step=0 loss=11.548227310180664 tgs (tokens/gpu/second)="
            "227.37 lr=9.779754323328192e-05 loss_scale=65536.0 grad_norm={'0_default': 61.5836932112004}")
    [rec] = read([line])
    assert (rec.step, rec.loss, rec.loss_scale) == (0, 11.548227310180664, 65536.0)
    # a dict after a label is the line's values: Hugging Face's `{'loss': ..}` behind a logger prefix
    [rec] = read(["[INFO|trainer.py:3420] 2024-05-01 10:00:00: {'loss': 2.5, 'learning_rate': 1e-05, 'epoch': 0.1}"])
    assert (rec.loss, rec.lr) == (2.5, 1e-05)


def test_a_configuration_dump_s_loss_and_norm_settings_are_no_values():
    # fairseq's wav2vec 2.0 fp16 pretraining (hydra_train.log): its first line, the config as a dict, holds
    # `'min_loss_scale': 0.0001` and the criterion's `'loss_weights': [0.1, 10]`, read as a record with a loss of
    # 0.1, against which the first logged loss (9.276 at update 200) was a spike
    name = "fairseq_wav2vec2_mandarin_pretrain_epochs_1_10_overflows_scale_256_to_8_healthy_kehanlu.log"
    recs = [r for r in read(lines(name)) if r.loss is not None]
    assert (recs[0].step, recs[0].loss, recs[0].loss_scale) == (200, 9.276, 128.0)
    assert replay_file(str(TUNE / name)).events == []


def test_a_time_s_unit_as_its_name_s_last_part_scales_it():
    [rec] = read(["step=7 loss=2.31 time_ms=10.2 data_time_ms=0.5"])
    assert (rec.step, rec.step_time_s, rec.data_wait_s) == (7, pytest.approx(0.0097), pytest.approx(0.0005))


def test_a_time_in_words_is_a_time_and_no_loss():
    # B777B2056-2/machine_translation_en2zh (tests/data/reallogs/tune): jieba's start-up line `Loading model cost
    # 0.644 seconds.` was read as a loss of 0.644 (`cost` without a time unit is a loss named for its objective),
    # and the epoch lines, which print a Val Loss too, then as evaluations of a log whose step lines print none
    log = lines("custom_transformer_mt_en2zh_epochs_0_51_loss_11_23_to_8_66_token_acc_frozen_0_066_seq_acc_0_"
                "profiler_lines_b777b2056.log")
    assert log[4] == "Loading model cost 0.644 seconds.\n"
    assert read(log[4:5]) == []
    recs = read(log[:24])
    assert [(r.step, r.loss) for r in recs] == [(0, 11.2338), (1, 10.8902)]
    [rec] = read(["epoch 3 loss 2.1 time 12.5 seconds"])
    assert rec.step_time_s == 12.5


def test_names_of_more_words_a_printed_tensor_and_a_block_under_its_epoch_line():
    # prednet-paddle, CLOCs issue #52 (tests/data/reallogs/tune): a loss named in four words; one in a phrase before
    # `is :` and a printed tensor
    prednet = read(lines("paddle_prednet_epochs_70_81_step_25_125_avg_loss_lr_drop_1e-3_to_1e-4_at_75_healthy_"
                         "icaruswizard.log")[:3])
    assert [(r.step, r.loss) for r in prednet] == [(25, 0.02149284817278385), (50, 0.022036563605070114)]
    clocs = read(lines("clocs_fusion_kitti_steps_50_450_cls_loss_tensor_3572_to_10_8_startup_descent_healthy_"
                       "clocs52.log")[:2])
    assert [(r.step, r.loss, r.lr) for r in clocs] == [(50, 3572.3164, 0.0003000725556911313),
                                                       (100, 1367.9292, 0.000300296159683897)]
    # ESTRNN issue #43: `[Epoch 8 / lr ..]` (an epoch and its LR, no loss), the epoch's times, then its loss
    estrnn = read(lines("estrnn_deblur_epochs_8_12_prev_loss_1016826_then_0_046_inf_at_epoch_10_then_0_045_"
                        "zzhtech43.log")[2:5])
    assert [(r.step, r.loss, r.lr, r.step_time_s) for r in estrnn] == [(8, 0.046, 0.0005, 9.08)]
