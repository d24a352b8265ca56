"""Overflows a trainer counts over several steps (a share, a skipped count) and overflows whose update was applied:
how the readers turn them into records (``StepRecord.overflows``, ``overflow_applied``) and how the loss-scale
rules judge them. Log lines are copied from their public sources, named at each."""
from pathlib import Path

from training_monitor.engine import Engine
from training_monitor.record import StepRecord
from training_monitor.replay import text
from training_monitor.replay.runner import replay_file
from training_monitor.ruleset import Rules
from training_monitor.sinks import EventList

TUNE = Path(__file__).resolve().parent / "data" / "reallogs" / "tune"


def events(records):
    """The loss-scale rules' events on ``records``: (rule, step, onset)."""
    kept = EventList()
    engine = Engine(Rules.load(), [kept])
    for rec in records:
        engine.observe(rec)
    return [(e.rule, e.step, e.onset_step) for e in kept.events if e.rule in ("overflow_storm", "loss_scale_collapse")]


def read(lines):
    p = text.Parser()
    return [r for r in map(p.feed, lines) if isinstance(r, StepRecord)]


# --- the rules ---

def test_overflows_counted_over_an_interval_count_the_fewest_some_window_of_it_holds():
    # after a clean start, 5 of the next 100 steps overflowed: some 50 of them hold at least 3, a storm
    clean = [StepRecord(100, loss=1.0, loss_scale=65536.0, overflows=0)]
    assert events(clean + [StepRecord(200, loss=1.0, loss_scale=4096.0, overflows=5)]) == \
        [("overflow_storm", 200, 200)]
    # 4 of 100 may be 2 and 2 in its two halves: no storm
    assert events(clean + [StepRecord(200, loss=1.0, loss_scale=4096.0, overflows=4)]) == []
    # 3 of 30 steps are within some 50 steps: a storm, as three flagged steps would be
    assert events(clean + [StepRecord(130, loss=1.0, overflows=3)]) == [("overflow_storm", 130, 130)]



def test_the_scale_a_message_says_the_trainer_set_next_is_judged_at_the_floor():
    # DeepSpeed's `Attempted loss scale: 2, reducing to 1` as the log's last overflow (FaithDiff's run, tune/
    # deepspeed_tqdm_noise_step_loss_nan_faithdiff34.log): the scale is at its floor of 1 though no record follows
    recs = [StepRecord(16, loss_scale=4.0, loss_scale_next=2.0, overflow=True),
            StepRecord(17, loss_scale=2.0, loss_scale_next=1.0, overflow=True)]
    assert events(recs) == [("loss_scale_collapse", 17, 17)]
    # the same record without the next scale: 2 is above the floor
    assert events([recs[0], StepRecord(17, loss_scale=2.0, overflow=True)]) == []
    # DeepSpeed's lines give both scales
    line = ("[2025-08-27 10:12:25,030] [INFO] [loss_scaler.py:184:update_scale] [deepspeed] OVERFLOW! Rank 0 "
            "Skipping step. Attempted loss scale: 2, reducing to 1")
    [rec] = read([line])
    assert (rec.loss_scale, rec.loss_scale_next, rec.overflow) == (2.0, 1.0, True)


def test_a_scaler_that_keeps_its_scale_of_1_on_an_overflow_is_at_its_minimum_at_any_step():
    # deepspeedai/DeepSpeedExamples issue #307 (DeepSpeed-Chat step 3, far from its start-up): `Reducing dynamic
    # loss scale from 1 to 1`, `Attempted loss scale: 1, reducing to 1`
    assert events([StepRecord(3721, loss_scale=1.0, loss_scale_next=1.0, overflow=True)]) == \
        [("loss_scale_collapse", 3721, 3721)]
    # a scale of 1 on an overflow, nothing said of the next one (bf16 prints 1), or kept at 1024 (hysteresis)
    assert events([StepRecord(3721, loss_scale=1.0, overflow=True)]) == []
    assert events([StepRecord(3721, loss_scale=1024.0, loss_scale_next=1024.0, overflow=True)]) == []
    res = replay_file(str(TUNE / "deepspeed_chat_step3_grad_overflow_scale_1_to_1_then_act_loss_nan_step_3721_"
                          "307.log"))
    assert [(e.rule, e.step) for e in res.events] == [("nan_inf", 3721), ("loss_scale_collapse", 3721)]

def test_a_count_reaching_into_the_start_up_steps_leaves_them_to_calibration():
    # Megatron-LM's healthy start: 16 of the first 100 iterations skipped while the scale fell from 2^32 to 2^17;
    # all 16 may be among the first 24 (calibration), and a clean one came among the 100: calibration is over
    start = StepRecord(100, loss=7.0, loss_scale=131072.0, overflows=16)
    later = [StepRecord(100 * i, loss=7.0 - 0.1 * i, loss_scale=131072.0, overflows=0) for i in range(2, 10)]
    assert events([start] + later) == []
    # past calibration the same count is judged: a storm
    assert events([start] + later + [StepRecord(1000, loss=6.0, loss_scale=8192.0, overflows=16)]) == \
        [("overflow_storm", 1000, 1000)]


def test_a_clean_step_before_an_overflowed_one_at_start_up_ends_calibration_with_that_overflow():
    # DeepSpeed's step=20, skipped=19 after the OVERFLOW! of step 20: a clean step came before it, so step 20's
    # overflow is no calibration; two more overflows then make three within 50 steps
    recs = [StepRecord(20, loss=2.38, loss_scale=16384.0, overflow=True, overflows=19),
            StepRecord(21, overflow=True, loss_scale=8192.0),
            StepRecord(30, loss=8.1, loss_scale=4096.0, overflow=True, overflows=1)]
    assert events(recs) == [("overflow_storm", 30, 20)]
    # without its own step's flag the 19 may all be calibration's: two overflows after it are no storm
    recs[0].overflow = None
    assert events(recs) == []


def test_an_overflow_whose_update_was_applied_fires_at_once_even_at_start_up():
    assert events([StepRecord(1, loss=3.0, overflow=True, loss_scale=65536.0, overflow_applied=True)]) == \
        [("overflow_storm", 1, 1)]
    assert events([StepRecord(1, loss=3.0, overflow=True, loss_scale=65536.0)]) == []


# --- the readers, on public logs ---

def test_an_overflow_printed_as_a_share_of_the_steps_since_the_last_print_is_their_count():
    """mindspore-ai/models @eab643f5 ``research/cv/faster_rcnn_ssod/README.md`` lines 499-502. Its ``train.py``
    prints ``overflow: %f`` of ``ValueInfo.avg()``, the mean of the steps' overflow flags since the last print
    (``avg`` resets), and ``scaling_sens`` (MindSpore's name of the loss scale) the same way."""
    log = TUNE / "mindspore_faster_rcnn_ssod_overflow_rate_scaling_sens_collapse.log"
    recs = read(log.open())
    assert [(r.step, r.overflow, r.overflows, r.loss_scale) for r in recs] == [
        (0, True, None, 8388608.0), (100, None, 11, 100024.32), (200, None, 5, 1066.24), (300, None, 5, 51.36)]
    # step 0 is start-up calibration; the 11 of steps 1-100 may be too (a clean step among them ends it); 5 of
    # each next 100 are at least 3 within some 50: a storm, again after its cooldown
    res = replay_file(str(log))
    assert [(e.rule, e.step, e.onset_step, e.value) for e in res.events] == [
        ("overflow_storm", 200, 200, 3.0), ("overflow_storm", 300, 300, 3.0)]


def test_a_flag_printed_as_a_float_in_a_log_that_prints_no_fraction_is_the_step_s_flag():
    """mindspore-ai/models ``research/cv/ssc_resnet50/README.md`` (the ``log.log`` of its training; its
    ``train.py`` prints ``overflow: %.5f`` of ``float(cond.asnumpy())``, the step's own flag)."""
    lines = [
        "INFO -  rank: 0, epoch:   0, step:    0, loss_x: 7.946, loss_u: 0.000, loss_contrast: 4.311, batch_time: "
        "230.31, data_time: 1.75, lr: 0.000028, overflow: 0.00000, scaling_sens: 65536.\n",
        "INFO -  rank: 0, epoch:   1, step:    0, loss_x: 6.758, loss_u: 0.000, loss_contrast: 7.450, batch_time: "
        "4.34, data_time: 3.82, lr: 0.010028, overflow: 0.00000, scaling_sens: 65536.\n",
    ]
    assert [(r.overflow, r.overflows, r.loss_scale) for r in read(lines)] == [(False, None, 65536.0)] * 2


def test_deepspeed_s_running_skipped_count_says_a_clean_step_came_and_feeds_the_overflow_count():
    """liucongg/ChatGLM-Finetuning issue #12 (comment by liucongg, 2023-04-11): DeepSpeed's ``step=20,
    skipped=19`` (``_report_progress`` after the 20th optimizer step: 19 of the 20 skipped), then two OVERFLOW!
    messages and ``step=30, skipped=21``: the scale 16384 -> 2048 after a clean step."""
    log = TUNE / "chatglm_finetuning_ds_overflow_16384_to_2048_loss_lines_12.log"
    recs = read(log.open())
    assert [(r.step, r.overflow, r.overflows) for r in recs] == [
        (1, True, None), (20, True, 19), (21, True, None), (22, True, None), (30, True, 1), (40, False, 0)]
    res = replay_file(str(log))
    assert ("overflow_storm", 30, 20) in [(e.rule, e.step, e.onset_step) for e in res.events]


def test_megatron_s_skipped_iterations_are_the_interval_s_overflow_count():
    """The shared sample of a healthy Megatron-LM run: ``number of skipped iterations:  16`` at iteration 100
    (calibration), then 0 in each interval; the excerpt leaves out iterations 200-900, so 0 at iteration 1000
    with the scale fallen since iteration 100 is no count of those 900 (unknown)."""
    recs = read((TUNE / "megatron_lm_gpt2_345m_normal_01.log").open())
    assert [(r.step, r.overflows) for r in recs[:3]] == [(100, 16), (1000, None), (1100, 0)]
    assert replay_file(str(TUNE / "megatron_lm_gpt2_345m_normal_01.log")).events == []


def test_mindyolo_s_overflow_with_its_update_applied_is_an_overflow_event():
    """MindYOLO's trainer (``mindyolo/utils/trainer_factory.py``, ``train_step``) prints ``overflow, still update,
    loss scale adjust to ..`` when ``overflow_still_update`` applies a non-finite gradient, and ``overflow, drop
    step, ..`` when it skips the step. mindspore-lab/mindyolo issue #440 (description by haexin) and issue #402
    (description by wenshuaishuai123)."""
    res = replay_file(str(TUNE / "mindyolo_gpu_overflow_loss_scale_1024_loss_nan_epoch1_440.log"))
    assert {(e.rule, e.step) for e in res.events} == {("nan_inf", 64), ("overflow_storm", 64)}
    lines = ["2024-12-25 09:58:34,125 [WARNING] overflow, still update, loss scale adjust to 1024.0\n",
             "2024-12-25 09:58:42,787 [INFO] Epoch 1/200, Step 100/3995, imgsize (640, 640), loss: 11.6707, lbox: "
             "3.6262, lcls: 5.5689, dfl: 2.4756, cur_lr: 0.09924906492233276\n"]
    (rec,) = read(lines)[-1:]
    assert (rec.step, rec.overflow, rec.overflow_applied, rec.loss_scale) == (100, True, True, 1024.0)
    dropped = read(["overflow, drop step, loss scale adjust to 512.0\n"] + lines[1:])[-1]
    assert (dropped.overflow, dropped.overflow_applied, dropped.loss_scale) == (True, None, 512.0)
    res = replay_file(str(TUNE / "mindyolo_loss_spike_402.log"))
    assert ("overflow_storm", 100) in [(e.rule, e.step) for e in res.events]
    # the earlier train steps' prints (``create_train_static_shape_fn``: ``print("overflow, still update.")``,
    # ``print("overflow, drop the step.")``)
    assert [(r.overflow, r.overflow_applied) for r in read(["overflow, still update.\n", "overflow, drop the step.\n"])] \
        == [(True, True), (True, None)]


def test_the_train_cell_s_overflow_flag_printed_every_n_steps_says_only_its_own_step():
    """MindSpore's ``TrainOneStepWithLossScaleCell`` outputs ``(loss, overflow cond, loss scale)``; the model zoo's
    BERT ``LossCallBack`` prints them every N steps (mindspore-ai/models @eab643f5 ``research/nlp/albert/README.md``
    lines 520-524: ``step: 100, outputs are (Tensor(.., [ 1.08209e+01]), Tensor(.., False), Tensor(.., 65536))``).
    Such records flag one step each: clean ones end calibration, and one flagged step per 100 is no storm."""
    clean = [StepRecord(100, loss=10.8209, overflow=False, loss_scale=65536.0),
             StepRecord(200, loss=10.7612, overflow=False, loss_scale=65536.0)]
    assert events(clean) == []
    flagged = [StepRecord(100 * i, loss=10.8 - 0.01 * i, overflow=True, loss_scale=65536.0 / 2 ** i)
               for i in range(1, 4)]
    assert events(flagged) == []
    # the same flags on consecutive steps, after a clean start, are a storm
    assert events(clean + [StepRecord(200 + i, loss=10.7, overflow=True, loss_scale=65536.0 / 2 ** i)
                           for i in range(1, 4)]) == [("overflow_storm", 203, 201)]
