"""The generic text reader's step counters, component losses, word values and record boundaries
(monitor/replay/text.py, monitor/replay/fields.py): corpus lines (tests/data/reallogs/tune), logs a new user replayed
(tests/data/usertrial, sources in its SOURCES.md) and other public lines, each copied exactly, its source named."""
import math
from pathlib import Path

import pytest

from test_replay_text import read
from training_monitor.replay import csvlog, replay_file, text
from training_monitor.replay.fields import LOSS_OTHER, lookup

DATA = Path(__file__).parent / "data"
TUNE = DATA / "reallogs" / "tune"
USER = DATA / "usertrial"


def lines(path):
    return path.read_text(encoding="utf-8").splitlines(True)


def test_a_count_restarting_each_epoch_counts_on():
    # MindSpore's quick start (mindspore-ai/docs tutorials/source_en/beginner/quick_start.md): `[  0/938]` each epoch
    quick = read(lines(TUNE / "mindspore_quickstart_bracket_batches_healthy.log"))
    assert [r.step for r in quick] == [e * 938 + b for e in range(3) for b in range(0, 1000, 100)]
    assert replay_file(str(TUNE / "mindspore_quickstart_bracket_batches_healthy.log")).events == []
    # PyTorch's quick-start tutorial output, as a user's script (a public GitHub file) records it: samples counted
    pytorch = read(["loss: 2.219879  [51200/60000]\n", "loss: 2.193057  [57600/60000]\n", "Test Error: \n",
                    " Accuracy: 39.4%, Avg loss: 2.204182 \n", "\n", "epoch 2\n", "-------------------------------\n",
                    "loss: 2.202354  [    0/60000]\n", "loss: 2.191863  [ 6400/60000]\n"])
    assert [r.step for r in pytorch] == [51200, 57600, 60000, 66400]
    # a named count the same way, through a line shape's recipe or read in full
    loop = [f"Step {b}/938 | loss {2 - b / 1000:.4f} | lr 1e-3\n" for _ in range(2) for b in range(0, 1000, 300)]
    full = text.Parser()
    full.fast = False
    assert [r.step for r in read(loop)] == [r.step for r in read(loop, full)] == [0, 300, 600, 900, 938, 1238, 1538,
                                                                                  1838]
    # a count falling back short of its total is taken as it is (a run resumed from a checkpoint)
    resumed = read(["step 5000/10000 loss 2.5\n", "step 5010/10000 loss 2.4\n", "step 5000/10000 loss 2.5\n"])
    assert [r.step for r in resumed] == [5000, 5010, 5000]


def test_two_counts_in_a_row_are_the_epoch_and_the_step():
    # MindSpore's DCGAN tutorial (mindspore-ai/docs tutorials/source_en/generative/dcgan.md): `[ 1/10][101/549]`
    dcgan = read(lines(TUNE / "mindspore_dcgan_bracket_loss_d_g_healthy.log"))
    assert [r.step for r in dcgan] == [1, 101, 201, 401, 501, 549, 9 * 549 + 501, 10 * 549]
    # MAE's MetricLogger (pengzhiliang/MAE-pytorch issue #49): `[   0/1251]` at the epoch boundary is a count;
    # the excerpt starts in epoch 24, from which its steps are counted (its first ones are the printed counts)
    mae = read(lines(TUNE / "mae_backtick_loss_scale_epoch_boundary_healthy_49.log"))
    assert [r.step for r in mae] == [1230, 1240, 1250, 1251]


def test_a_line_of_several_named_losses_has_their_sum_as_its_loss():
    assert [lookup(n)[0] for n in ("Dloss", "Gloss", "MultiLogisticLoss", "Loss_D", "wide_loss")] == [LOSS_OTHER] * 5
    assert lookup("layernorm time") == ("step_time_s", None)  # only `loss` words are split
    # DCGAN's two nets, as the PyTorch DCGAN example prints them (csinva/gan-vae-pretrained-pytorch issue #4)
    gan = read(["[781/782] Loss_D: 0.0267 Loss_G: 8.2782 D(x): 0.9833 D(G(z)): 0.0072 / 0.0008\n"])
    assert [(r.step, r.loss) for r in gan] == [(781, pytest.approx(8.3049))]
    # pix2pix (mindspore-ai/docs tutorials/source_en/generative/pix2pix.md) and wide&deep's two towers
    pix = read(lines(TUNE / "mindspore_pix2pix_gan_dloss_gloss_healthy.log"))  # `ms per step:532.31` is no step
    assert [r.step for r in pix] == [0, 2, 4, 6, 8, 2491, 2493, 2495, 2497, 2499]
    assert pix[0].loss == pytest.approx(0.6940 + 38.1245)
    wide = read(lines(TUNE / "mindspore_wide_deep_two_losses_healthy.log"))
    assert [r.step for r in wide] == list(range(1, 12)) and wide[0].loss == pytest.approx(0.66100323 + 0.72502613)
    # a NaN in one part is the line's: the SRGAN loop of leftthomas/SRGAN issue #54, its D loss made NaN
    assert math.isnan(read(["[12/100] Loss_D: nan Loss_G: 0.0071 D(x): 1.0000 D(G(z)): 1.0000:\n"])[0].loss)
    # MXNet's Speedometer (ascust/SEC-MXNet issue #8): one loss named for its objective
    mx = read(lines(TUNE / "mxnet_multilogistic_loss_zero_sec8.log"))
    assert [(r.step, r.loss) for r in mx][:2] == [(10, 0.100427), (20, 0.0)]
    assert [e.rule for e in replay_file(str(TUNE / "mxnet_multilogistic_loss_zero_sec8.log")).events][:1] == \
        ["loss_degenerate"]
    # a CSV header of two named losses: the row's loss is their sum
    parser = csvlog.Parser()
    parser.feed("step,d_loss,g_loss\n")
    assert parser.feed("3,0.5,1.25\n").loss == 1.75


def test_a_nan_before_a_known_name_after_a_space_is_the_value():
    # the new user's shapes (space-separated pairs, a nan/inf then the next name)
    out = read(["step 1 loss 2.30 lr 0.1\n", "step 2 loss nan lr 0.1\n", "step 3 loss inf time 0.31\n",
                "step 4 loss: inf lr: 0.1\n"])
    assert [(r.step, str(r.loss)) for r in out] == [(1, "2.3"), (2, "nan"), (3, "inf"), (4, "inf")]
    # darkflow's `step N - loss nan - moving ave loss nan` (MahmudulAlam/Automatic-Identification-and-Counting-of-
    # Blood-Cells issue #15)
    assert math.isnan(read(["step 1655 - loss        nan - moving ave loss        nan\n"])[0].loss)
    # epos (thodan/epos issue #9): `total_loss: nan obj_cls: nan ..`, found at step 100
    epos = replay_file(str(USER / "epos_tf_nan_9.log"))
    assert (epos.events[0].rule, epos.events[0].step) == ("nan_inf", 100)
    # English prose names no value
    for prose in ("found inf during ShardedOptimV2 step", "loss is nan or inf", "Loss nan or inf detected"):
        assert [f[0] for f in text.pairs(prose)] == [], prose


def test_a_step_named_alone_is_replaced_by_the_next_record():
    # a header `1 epoch = 330 batches` (aakashvardhan/s21-gpt2 log.md) and TF-Slim's `Recording summary at step 0.`
    s21 = replay_file(str(USER / "s21_gpt2_tokens_sec_healthy.log"))
    assert (s21.steps, s21.events) == (50, [])
    assert [r.step for r in read(lines(USER / "s21_gpt2_tokens_sec_healthy.log"))][:3] == [0, 1, 2]
    tf = read(lines(USER / "tf_models_global_step_healthy_2980.log"))
    # each line printed twice: its second print is the same step again, merged into its record
    assert [(r.step, r.loss) for r in tf][:2] == [(1, 79.3501), (2, 72.8609)]
    assert replay_file(str(USER / "tf_models_global_step_healthy_2980.log")).steps == 8
    # a step line whose values follow on the next lines still gets them (OLMo's metric blocks)
    block = read(["[step=1/739328]\n", "    train/CrossEntropyLoss=11.07\n", "[step=2/739328]\n",
                  "    train/CrossEntropyLoss=10.98\n"])
    assert [(r.step, r.loss) for r in block] == [(1, 11.07), (2, 10.98)]


def test_a_tqdm_bar_drawing_a_postfix_twice_is_one_record():
    # VeOmni (ByteDance-Seed/VeOmni PR #269): each postfix drawn when set, at the old count, then at the new one
    veomni = read(lines(USER / "veomni_npu_tqdm_healthy_269.log"))
    assert [(r.step, r.lr) for r in veomni] == [(1, 1.12e-08), (2, 2.24e-08), (3, 3.36e-08), (4, 4.48e-08),
                                                (5, 5.6e-08), (6, 6.72e-08)]
    res = replay_file(str(USER / "veomni_npu_tqdm_healthy_269.log"))
    assert (res.steps, res.merged_lines, res.events) == (6, 6, [])


def test_llamafactory_current_steps_is_the_step():
    # LlamaFactory's trainer_log.jsonl (hiyouga/LlamaFactory issue #506)
    lf = read(lines(TUNE / "llamafactory_json_loss_to_zero_506.log"))
    assert [(r.step, r.loss) for r in lf] == [(4440, 2.7044), (4450, 0.0)]


def test_a_postfix_drawn_twice_with_a_nan_is_one_record():
    # real tqdm output: `set_postfix(loss=..)` then `update()`, each a draw; a NaN drawn twice is one step's
    import io

    from tqdm import tqdm
    out = io.StringIO()
    bar = tqdm(total=4, file=out, mininterval=0, ascii=True)
    for loss in (2.5, 2.4, float("nan"), 2.3):
        bar.set_postfix(loss=loss)
        bar.update()
    bar.close()
    recs = read(out.getvalue().replace("\r", "\n").splitlines(True))
    assert [(r.step, "nan" if math.isnan(r.loss) else r.loss) for r in recs] == [(1, 2.5), (2, 2.4), (3, "nan"), (4, 2.3)]


def test_a_step_s_values_printed_again_at_another_precision_are_one_record(tmp_path):
    # a loop printing each step for people and as a JSON line: one record a step (its values agree as printed),
    # while a value that disagrees is another record of that step (judged again, as before)
    log = tmp_path / "train.log"
    log.write_text('[step 1/200] loss=2.0346 acc=0.500\n{"iter": 1, "train/loss": 2.0345585346221924}\n'
                   '[step 2/200] loss=2.0822 acc=0.500\n{"iter": 2, "train/loss": 2.0821619033813477, "lr": 0.01}\n'
                   '[step 3/200] loss=2.0100 acc=0.500\n{"iter": 3, "train/loss": 2.5}\n')
    res = replay_file(str(log))
    assert (res.steps, res.merged_lines) == (4, 2)


def test_a_source_files_path_and_line_is_no_value_and_ends_no_epoch():
    # MindSpore's warnings name their C++ source, `[mindspore/ccsrc/runtime/device/../kernel_select_ascend.cc:284]`:
    # its folder `runtime` is no evaluation's name (Hugging Face's `eval_runtime`), 284 no value
    r2 = lines(TUNE / "mindspore_r2plus1d_loss_monitor_warnings_eval_epochs_20_21.log")
    warning = r2[22]
    assert "kernel_select_ascend.cc:284]" in warning and text.pairs(text.clean(warning)) == []
    # so it is not the epoch's end: LossMonitor's count going back after it, in the same epoch, is a restart
    epoch = [line for line in r2 if line.lstrip().startswith("epoch: 21 step:")]
    assert [r.step for r in read(epoch[:5] + [warning] + epoch[:2])] == [10, 20, 30, 40, 50, 10, 20]


def test_a_counter_alone_before_a_dict_is_its_record_s():
    # a custom loop's `logger.info(f"Epoch {epoch}: {metrics}")` (wolverinex24/titans-architecture outputs/train.log):
    # the dict names no counter, the epoch before it is the record's (not the line's position)
    titans = lines(TUNE / "custom_titans_lm_small_first_run_epochs_0_99_loss_1_12_to_5_25_at_59_and_3_48_at_95_"
                          "wolverinex24.log")
    records = read(titans)
    assert [r.step for r in records] == list(range(100)) and records[59].loss == pytest.approx(5.252811431884766)
    assert [(e.rule, e.step) for e in replay_file(str(TUNE / "custom_titans_lm_small_first_run_epochs_0_99_loss_1_12_"
                                                          "to_5_25_at_59_and_3_48_at_95_wolverinex24.log")).events] \
        == [("loss_spike", 59), ("loss_spike", 95)]


def test_a_unit_letter_that_starts_a_name_is_the_name_s():
    # CycleGAN's loss_log.txt (Arnaud58/Ganilla-Witness-Style): `D_A: 0.066 G_A: 0.941`, G_A no giga unit of 0.066
    ganilla = lines(TUNE / "cyclegan_ganilla_epochs_1_17_cycle_a_0_93_to_9_4_14_sustained_jump_at_epoch4_iters_3040_"
                           "arnaud58.log")
    assert "D_A: 0.066 G_A: 0.941 " in ganilla[1]
    assert read(ganilla[1:2])[0].loss == pytest.approx(0.066 + 0.941 + 0.045 + 0.800)  # D_A, G_A, D_B, G_B


def test_counts_before_a_name_of_words_and_a_count_after_a_loss_s_name_are_steps():
    # a progressive GAN on PaddlePaddle (AIforMS/PGAN-Paddle logs/train_log.txt): `[scale : iteration]` before a
    # name of two words
    pgan = lines(TUNE / "pgan_paddle_celeba_scale0_iters_14000_20000_resume_at_16000_loss_d_0_5_to_1_03e6_spike_decays_"
                        "aiforms.log")
    assert pgan[0] == "[0 :  14000] loss G : 2.236 loss D : 2.203\n"
    assert [(r.step, r.loss) for r in read(pgan[:2])] == [(14000, pytest.approx(2.236 + 2.203)),
                                                          (14100, pytest.approx(1.892 + 6.663))]
    # JAX-CFD's absl lines (ML4HPC/JAX-CFD logs/train_log.txt): `Train` names a loss, but a count of a total after
    # it is the phase's counter, kept before the dict
    jax = lines(TUNE / "jaxcfd_absl_learned_interp_kolmogorov_train_10_1180_loss_7_7e-3_to_3_8e-4_grads_finite_1_ckpt_"
                       "1000_healthy_ml4hpc.log")
    assert "[Train 10/1882] {'grads_finite': 1.0, 'loss_scale': 1.0, 'train_loss': 0.0077463057823479176}" in jax[2]
    assert [(r.step, r.loss) for r in read(jax[2:4])] == [(10, pytest.approx(0.0077463057823479176)),
                                                          (20, pytest.approx(0.005701407790184021))]


def test_a_count_running_on_across_an_epoch_is_the_run_s_and_an_evaluation_s_bar_is_no_step():
    # PaddleSeg's shape (synthetic lines): `iter: a/b` counts the run's iterations, its epoch changing under it;
    # after `Start evaluating ..` the evaluation's Keras-style bar, no loss, counts its own batches (no steps)
    train = "[TRAIN] epoch: {}, iter: {}/120000, loss: 0.5{}, lr: 0.000500, batch_cost: 0.9, reader_cost: 0.7\n".format
    seg = read([train(80, 39600, 4), train(81, 39610, 5), train(81, 39620, 6),
                "Start evaluating (total_samples: 500, total_iters: 500)...\n",
                "  1/500 [..............................] - ETA: 1:59 - batch_cost: 0.2390 - reader cost: 0.1883\n",
                "500/500 [==============================] - 20s 40ms/step - batch_cost: 0.04 - reader cost: 0.12\n",
                train(81, 39630, 7)])
    assert [(r.step, r.loss) for r in seg] == [(39600, 0.54), (39610, 0.55), (39620, 0.56), (39630, 0.57)]
    # a count of the epoch's batches rising by more than its stride under the next epoch is an excerpt's gap
    # (MindSpore's CycleGAN, heldout4: `step:[ 320/1019]`, `...`, then the next epoch's `[ 960/1019]`)
    gap = read([f"Epoch:[{e}/ 7], step:[{b:4d}/1019], time:0.9s, loss_g:3.5\n" for e, b in ((1, 240), (1, 320),
                                                                                          (2, 960), (3, 0))])
    assert [r.step for r in gap] == [240, 320, 1019 + 960, 2 * 1019]


def test_a_bare_bracketed_count_before_a_count_of_a_total_is_its_epoch():
    # MMEngine's `Epoch(train)  [17][ 50/290]` (tune/mmengine_yolo_world_..yw276.log), and a log of one line at
    # each epoch's end (synthetic, as heldout38's mmaction2 run prints them): `[2][15/15]` is epoch 2's
    yolo = read(lines(TUNE / "mmengine_yolo_world_prompt_tuning_epochs_16_17_grad_norm_0_and_nan_at_17_50_loss_dfl_"
                             "frozen_yw276.log"))
    assert [r.step for r in yolo] == [200, 250, 340, 390]
    ends = read([f"Epoch(train)  [{e}][15/15]  lr: 1.0000e-02  time: 0.1925  loss: {3 - e / 10}\n" for e in (1, 2, 3)])
    assert [r.step for r in ends] == [15, 30, 45]
