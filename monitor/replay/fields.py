"""Named values -> :class:`StepRecord` fields: the one alias table of every replay reader (text, CSV, TensorBoard).

A name is normalised (camelCase words apart, lower case, quotes dropped, ``-`` and spaces read as ``_``; of a
path such as ``train/loss`` or ``optim/total_grad_norm`` the last part, all its parts when the last is a qualifier,
Composer's ``loss/train/total``; a last word ``is`` dropped, the separator's before a sign, ``cls_loss is : 3572``)
and looked up in :data:`NAMES`. When the
whole name is not there:

* a name with the word ``loss`` (or ``losses``) in it (words split at anything but letters and digits: ``step_loss``,
  ``loss train (curr)``, ``s0.loss_cls``) and at most two other words, its qualifiers, none a number (``loss is
  nan or`` is a phrase, ``loss 2.3`` a name and its value; a loss function's name counts for none,
  ``l1_charbonnier_loss_color``, and ``so far`` after it for one, a running value, ``avg loss so far``; a longer
  phrase ending in a loss's identifier names that identifier, ``and the cls_loss``), is a loss, by its qualifiers:
  - with a setting word (``weight``, ``weights``, ``coef``, ``coeff``, ``coefficient``, ``min``, ``max``, ``init``,
    ``initial``, ``window``, ``threshold``, ``clip``, ``factor``, ``tolerance``): a setting of training, printed
    in a configuration dump, no value (fairseq's ``'loss_weights': [0.1, 10]`` and ``'min_loss_scale': 0.0001``,
    MindFormers' ``loss_scale_window``, MindYOLO's ``loss.reg_max``; so is a norm name with one, ``max_grad_norm``);

  - with ``scale``, ``scaler`` or ``scaling``: the loss scale (``dynamic_loss_scale``);
  - with a known name after ``loss`` in words apart (``loss at step 500``): a phrase, no name (in one
    identifier, Lightning's ``train/loss_step``, the suffix is a qualifier: ``step`` the step's value,
    ``epoch`` its epoch average);
  - with an average word (``avg``, ``ave``, ``average``, ``mean``, ``running``, ``moving``, ``smoothed``,
    ``smooth``, ``ema``, ``epoch``): an average loss, :data:`LOSS_AVERAGE` (DLLogger's ``average_loss``,
    darkflow's ``moving ave loss``);
  - with none but step words (``train``, ``training``, ``step``, ``cur``, ``curr``, ``current``, ``total``, ``tot``,
    ``all``, ``overall``, ``lm``, ``iter``, ``iteration``, ``batch``): the step's loss (``step_loss``, ``Training
    loss``, litgpt's ``loss train (curr)``, LMOps' ``tot_loss``);
  - with any other word: a loss named for its objective or part, :data:`LOSS_OTHER` (``loss_net``,
    ``nll_loss``, mmdet's ``loss_cls``, Megatron's ``load_balancing_loss``).

  An identifier ``l_<part>`` (BasicSR and the restoration trainers built on it: ``l_pix``, ``l_percep``,
  ``l_g_gan``; ``l_all`` their total) is ``loss_<part>``; ``l_r`` (one letter) is none. Initials, a capital and
  at most one small letter or two such joined by ``_`` (FSSD's ``L: .. C: .. S: ..``, YOLACT's ``B: .. | C: .. |
  T: ..``, CycleGAN's ``D_A``), are a loss named for its part, :data:`LOSS_OTHER` (:func:`initials`: the text
  reader takes them only on a line that names its step, apart from their value); ``LR`` is the learning rate,
  ``TP`` or ``GB``, all capitals, no loss.
  A word ending in ``loss`` is ``loss`` and its first part a qualifier (pix2pix's ``Dloss``/``Gloss``, MXNet's
  ``MultiLogisticLoss``: named losses), and so are the parts YOLO's epoch tables name ``box``, ``obj``, ``cls``
  (YOLOv5), ``giou`` (YOLOv3), ``dfl`` (YOLOv8). A line (a CSV header) takes one loss, :func:`resolve`: its step loss
  when it names one (the others are averages or parts), else its total, :data:`LOSS_TOTAL` (a name of a total word
  alone, ``total``, ``all``, ``overall``, printed with a separator, libfacedetection's ``L: 0.58(0.57) IOU: .. C:
  2.30(2.46) All: 3.02(3.20)`` after its loss parts, or as an item of a comma-separated list, YOLOv2's region loss
  ``loss: x 23.9, .., cls 111.3, total nan``), else its only other loss (``loss_net: 0.94`` alone is the
  line's loss), else its first average, else the sum of its named losses, :data:`LOSS_PART` (a GAN's ``Loss_D`` and
  ``Loss_G``, a two-tower model's ``wide_loss`` and ``deep_loss``, YOLO's ``box_loss`` and ``cls_loss``: a NaN or Inf
  in any one is the sum's, a spike of one moves the sum by as much, and the sum is 0 only when every part is).
  TensorBoard tags are read one by one: only a step loss name there is the loss;
* a name made of a loss function's name and at most step words (:data:`LOSS_FUNCTIONS`: ``mse``, ``mae``,
  ``rmse``, ``nll``, ``bce``, ``ce``, ``kl``, ``kld``, ``l1``, ``huber``, ``ctc``, ``xent`` and ``crossentropy``
  (cross-entropy), ``smoothl1``, ``sisnr`` (speech separation's SI-SNR); its words may be apart, with step words
  around them, ``cross_entropy``, ``Smooth L1``, SpeechBrain's ``train si-snr``; TensorLayer's SRGAN
  prints ``time: 41.505s, mse: 0.587``, OpenNMT ``xent: 2.13``, GluonCV's SSD ``CrossEntropy=19.05,
  SmoothL1=3.60``) is a loss named for its objective, as ``mse_loss`` is (:data:`LOSS_OTHER`): the line's loss
  when it names no other. With any other word it is no loss (``kl_coef``, ``kl_weight``: settings);
* a perplexity (``ppl``, ``perplexity``, with at most step words: ``train_ppl``, OpenNMT's Lua ``PPL 8226.52``),
  the exponential of the cross-entropy loss, :data:`LOSS_PPL`: a line that names no loss at all has its natural
  logarithm for its loss (:data:`PPL`; a NaN or Inf perplexity is a NaN or Inf loss, a spike of the loss a
  spike of its log);
* a name with the word ``norm`` (and at most two other words) is the gradient norm when it has a gradient word
  (``grad``, ``grads``, ``gradient``, ``gradients``: ``clipped grad norm``) or no qualifier but ``global``,
  ``total``, ``l2`` (``norm``, as llm.c and custom loops print it), and no average word (``norm_average``); ``weight
  norm``, ``param_norm`` are other tensors' norms: no name;
* else its leading words are dropped one by one (``Train epoch`` -> ``epoch``, ``Dumping profiler traces at
  step`` -> ``step``) as long as the dropped word is not itself a known name (``Train epoch time`` is no step
  time) nor ``per`` (``ms per step`` is a rate, no step) nor ``total`` (``Start-to-End total training time`` is
  the run's).

A name that is not ASCII has its Chinese words read as English ones (:data:`_CJK_WORDS`: ``损失`` loss, ``学习率``
lr, ``训练`` train, ``验证``/``测试``/``评估`` evaluation words, ``平均`` avg: ``训练损失`` is the step loss,
``整体测试集上的Loss`` an evaluation value). An identifier ``<scope>_step_<name>`` whose ``<name>`` is a time or rate
is that value of the step (``train_step_samples_per_second``: samples/s), ``train_step_runtime`` its step time;
``interval_<name>`` (PaddleNLP's ``Trainer``, over the steps since the last logged line) is that rate of the steps
(``interval_steps_per_second``, ``interval_samples_per_second``), ``interval_runtime`` the interval's time
(``span_s``), no summary.

A training-split word alone (``train``, ``training``) printed with a separator names that split's objective,
:data:`LOSS_OTHER` (demucs' and svoice's ``train=0.1794 valid=0.2343``: the line's loss when it names no other;
``Train 1`` is a heading, as is ``Total 3``: :func:`bare`).

A name with an evaluation word (``eval``, ``val``, ``valid``, ``validation``, ``test``) in it (``val_loss``,
``eval/loss``, ``valid_nll_loss``), or ``runtime`` (Hugging Face's end-of-run ``train_runtime``), is an evaluation
or summary value, never a training one.

:data:`NAMES`: name -> (field, unit). The fields are StepRecord's, plus what a reader turns into them:

=====================  ==============================================================================
field                  names
=====================  ==============================================================================
``step``               step, iter, iteration, iter_num, global_step, num_updates, updates, batch, itr, cur_iter,
                       current_steps, total_step, total_iter (a total's plural, ``total_steps``, is the run's
                       end), ``#`` (a table's count column, spaCy's ``E    #       LOSS TOK2VEC``), up.
                       (Marian's ``Ep. 2 : Up. 576000 : ..``);
                       ``iters`` on a line naming no other step and a loss or a time (CycleGAN's ``(epoch: 1,
                       iters: 100, time: 0.507, data: 0.091)``; alone it is the run's total, mlx-lm's
                       ``Starting training..., iters: 400``)
                       (LlamaFactory's ``trainer_log.jsonl``) (...); 训练次数, 迭代次数, 迭代, 训练步数, 步数, 步, 批次
``epoch``              epoch, ep. (a step counted within its epoch is made global with it, see :mod:`.text`); 轮次, 轮,
                       训练轮次, 周期
``loss``               loss, train_loss, lm_loss, total_loss, crossentropyloss, cross_entropy_loss (and the
                       qualified names above); cost without a time unit (:func:`by_unit`: Marian's ``Cost
                       2.768``, a loss named for its objective), with one the step's time (so-vits-svc's ``cost
                       14.01 s``)
``grad_norm``          grad_norm, gnorm, global_norm, total_grad_norm, gradient_norm, grad_l2_norm (and the
                       ``norm`` names above)
``loss_scale``         loss_scale, loss_scaler, cur_scale, scaling_sens, grad_scale (PyTorch's ``GradScaler``)
``lr``                 lr, learning_rate, cur_lr (MindYOLO)
``step_time_s``        time, step_time, step_took (``step took 6.497``, and of iter, iteration, batch), per_step_time,
                       iteration_time, elapsed_time_per_iteration, batch_time, time_per_step, iter_time, dt,
                       batch_cost and avg_batch_cost (PaddlePaddle's suites), itime (PIPs and the trackers built on
                       its loop) (unit from the value: ``ms``, ``s``, ``min``; seconds when it has none; or from
                       the name's end, ``(ms)``, ``(s)``: Megatron's ``elapsed time per iteration (ms)``,
                       DeepSpeed's ``iter time (s)``; or an identifier's last part, ``step_time_ms``, ``time_ms``)
``data_wait_s``        data_time, data_wait, data_load_time, reader_cost and avg_reader_cost (PaddleOCR, PaddleSeg,
                       PaddleNLP), data_cost (PaddleDetection), rtime (PIPs). A step time printed with a data time
                       includes it (mmcv/mmengine's ``time`` and ``data_time``, PaddlePaddle's ``batch_cost`` and
                       ``reader_cost``, PIPs' ``itime`` and ``rtime``): when the data time is not longer, the
                       record's step time is the difference
``span_s``             epoch_time, epoch_took (nnU-Net's ``This epoch took 257.184862 s``; MindSpore's
                       ``TimeMonitor``: ``epoch time: 201648.793 ms, per step time: 14403.485 ms``): in a log of one
                       record per epoch, the record stands for ``epoch time / per step time`` steps (its ``steps``),
                       and without a per-step time the epoch's time is the record's step time
``mfu``                mfu (``15.3%`` -> 0.153; negative: not measured yet)
``tps``                tps, tokens_per_second, tokens_per_sec, tokens/s, tokens/sec, tok/s, tok/sec; per device
                       tokens/s/device (MaxText), tokens/sec/gpu, tokens/gpu/sec, tgs (InternEvo); wps (fairseq's
                       words, its target tokens, per second) (tokens = TPS x step time; a name ending in a rate's
                       ``/s``, ``/sec``, ``/device``, ``/gpu`` is no path)
``sps``                ips (PaddlePaddle's ``ips: 288.9 samples/s``, ``images/s``; read as samples whatever its
                       unit), samples_per_second, samples_per_sec, samples/s, samples/sec (samples = samples/s x
                       step time)
``step_rate``          steps_per_second, steps_per_sec, steps/s, steps/sec, it/s, it/sec (mlx-lm),
                       global_step/sec (TF Estimator), batches_per_second (OLMo), ups (fairseq's updates per
                       second): the record's step time is 1 / rate when the line
                       prints none (PaddleNLP's benchmark callback: ``avg_batch_cost = 1 /
                       interval_steps_per_second``)
``tokens_total``       total_tokens, consumed_tokens (a running total: the record gets the difference)
``time_total``         train_time (modded-nanogpt's ``train_time:185231ms``, the training time so far, validation
                       left out: the record's step time is its difference over the steps since the line before,
                       when the line prints none); ``train time`` in words apart is the step's time (a custom
                       loop's ``train time: 4.319s``)
``overflow``           overflow, overflow_cond, is_overflow (``True``/``False``, 1/0)
``skipped``            number_of_skipped_iterations (skipped steps in the logged interval, Megatron)
``skipped_total``      skipped (skipped steps so far, DeepSpeed's progress line)
``nan_iterations``     number_of_nan_iterations (NaN steps in the logged interval, Megatron)
=====================  ==============================================================================

Names that are StepRecord fields themselves (``step_time_s``, ``data_wait_s``, ``tokens``, ``rank``,
``timestamp``, ``steps``, ...) map to themselves (the monitor's own record log); any other name is ignored.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable

from ..record import StepRecord
from .base import NO_LOSS, NO_STEP, NUMBER

FIELDS = frozenset(StepRecord.__dataclass_fields__)
_S, _MS = None, "ms"  # None: seconds, unless the value or the log says otherwise
NAMES: dict[str, tuple[str, str | None]] = {
    **{n: (n, None) for n in FIELDS},
    **{n: ("step", None) for n in ("step", "iter", "iteration", "iter_num", "global_step", "_step", "num_updates",
                                   "updates", "batch", "train_step", "step_idx", "current_step", "current_steps",
                                   "itr", "it", "cur_iter", "cur_step", "#", "up.")},
    "iters": ("iters", None),  # the step only on a step line (resolve)
    "epoch": ("epoch", None), "ep.": ("epoch", None),
    **{n: ("loss", None) for n in ("loss", "train_loss", "lm_loss", "total_loss", "crossentropyloss",
                                   "cross_entropy_loss", "trl")},
    **{n: ("grad_norm", None) for n in ("grad_norm", "gnorm", "global_norm", "total_grad_norm", "gradient_norm",
                                        "grad_l2_norm")},
    **{n: ("loss_scale", None) for n in ("loss_scale", "loss_scaler", "cur_scale", "scaling_sens", "grad_scale")},
    "lr": ("lr", None), "learning_rate": ("lr", None), "cur_lr": ("lr", None),
    **{n: ("step_time_s", _S) for n in ("time", "timing", "step_time", "per_step_time", "iteration_time", "batch_time",
                                        "time_per_step", "time_per_iteration", "iter_time", "dt",
                                        "elapsed_time_per_iteration", "batch_cost",
                                        "avg_batch_cost", "itime")},
    **{n: ("data_wait_s", _S) for n in ("data_time", "data_wait", "data_load_time", "reader_cost", "avg_reader_cost",
                                        "data_cost", "rtime", "data")},
    "epoch_time": ("span_s", _S), "epoch_took": ("span_s", _S),
    **{n: ("step_time_s", _S) for n in ("step_took", "iter_took", "iteration_took", "batch_took")},
    "mfu": ("mfu", None),
    **{n: ("tps", None) for n in ("tps", "tokens_per_second", "tokens_per_sec", "tokens/s", "tokens/sec", "tok/s",
                                  "tok/sec", "tokens/s/device", "tokens/sec/gpu", "tokens/gpu/sec", "tgs", "wps")},
    **{n: ("sps", None) for n in ("ips", "samples_per_second", "samples_per_sec", "samples/s", "samples/sec")},
    **{n: ("step_rate", None) for n in ("steps_per_second", "steps_per_sec", "steps/s", "steps/sec", "it/s",
                                        "it/sec", "global_step/sec", "batches_per_second", "ups")},
    "total_tokens": ("tokens_total", None), "consumed_tokens": ("tokens_total", None),
    "cost": ("cost", None),  # a time or a loss, by its value's unit (by_unit)
    **{n: ("overflow", None) for n in ("overflow", "overflow_cond", "is_overflow")},
    "number_of_skipped_iterations": ("skipped", None),
    "skipped": ("skipped_total", None),
    "number_of_nan_iterations": ("nan_iterations", None),
    # the loss parts of YOLO's epoch tables (YOLOv5's `box obj cls`, YOLOv3's `GIoU`, YOLOv8's `dfl`): named losses
    **{n: ("loss_other", None) for n in ("box", "obj", "cls", "giou", "dfl")},
    # Chinese names (the step's count, 训练次数 / 迭代次数; the epoch, 轮次 / 轮; a batch, 批次)
    **{n: ("step", None) for n in ("训练次数", "迭代次数", "迭代", "训练步数", "步数", "步", "批次")},
    **{n: ("epoch", None) for n in ("轮次", "轮", "训练轮次", "周期")},
}
# Chinese words of names, read as these English words (``训练损失`` is ``train loss``, ``验证损失`` ``val loss``,
# ``整体测试集上的Loss`` has ``test``, ``平均损失`` is ``avg loss``)
_CJK_WORDS = {"损失值": "loss", "损失": "loss", "学习率": "lr", "训练": "train", "验证": "val", "测试": "test",
              "评估": "eval", "平均": "avg", "梯度范数": "grad_norm", "耗时": "time", "用时": "time"}
_CJK = re.compile("|".join(_CJK_WORDS))
# names read only as one identifier, as printed: modded-nanogpt's running total ``train_time``, where a custom loop's
# ``train time: 4.319s``, words apart, is the step's time
_IDENTIFIERS = {"train_time": ("time_total", None)}
# names read only as printed, case and all: llm.c's step ``s:4860`` (YOLACT's ``S:`` is a loss part), a custom loop's
# loop index ``i: 0, train_loss: ..`` (``print(f"i: {i}, loss: {loss}")``)
_EXACT = {"s": ("step", None), "i": ("step", None)}
EVAL = "eval"  # the field of an evaluation (or end-of-run summary) value
LOSS_AVERAGE = "loss_average"  # an average or smoothed loss: the line's loss only when it names no other
LOSS_OTHER = "loss_other"      # a loss named for its objective or part: the line's loss when it is its only one
LOSS_PART = "loss_part"        # one of a line's named losses, summed into its loss (resolve)
LOSS_TOTAL = "loss_total"      # the total of a line's losses: the line's loss when it names no step loss
LOSS_PPL = "loss_ppl"          # a perplexity, exp(loss): the line's loss, as its log, when it names no loss at all
PPL = "ppl"                    # the perplexity resolve chose: the line's loss is its natural logarithm
OTHER_LOSSES = frozenset((LOSS_OTHER, LOSS_AVERAGE, LOSS_TOTAL, LOSS_PPL))  # no loss of the line's unless chosen
NO_FIELD = OTHER_LOSSES | {"iters"}  # what resolve may leave that is no record field (a reader leaves it out)
COUNTERS = frozenset(("step", "epoch"))  # the fields that count a record's place in the run
_LOSS_FIELDS = frozenset(("loss", LOSS_OTHER, LOSS_AVERAGE, LOSS_TOTAL))  # a name read as a loss (a perplexity: no)
_STEP_WORDS = frozenset(("train", "training", "step", "cur", "curr", "current", "total", "tot", "all", "overall",
                         "lm", "iter", "iteration", "batch"))
_AVERAGE_WORDS = frozenset(("avg", "ave", "average", "mean", "running", "moving", "smoothed", "smooth", "ema",
                            "epoch"))
_TOTAL_WORDS = frozenset(("total", "all", "overall"))  # a name of them alone: the total of the line's losses
_TRAIN_WORDS = frozenset(("train", "training"))  # a name of one alone: the training split's objective, a loss
_BARE_WORDS = _TOTAL_WORDS | _TRAIN_WORDS | {"s", "i"}  # steps (_EXACT), read with a separator (``5.2 s 100``: a unit)
_SCALE_WORDS = frozenset(("scale", "scaler", "scaling"))
# a qualifier that makes a loss or norm name a setting of training, no value of a step (a configuration dump)
_SETTING_WORDS = frozenset(("weight", "weights", "coef", "coeff", "coefficient", "min", "max", "init", "initial",
                            "window", "threshold", "clip", "factor", "tolerance"))
_LOG_WORDS = frozenset(("lg", "ln", "log2", "log10"))  # its logarithm (guided-diffusion's `lg_loss_scale`)
_GRAD_WORDS = frozenset(("grad", "grads", "gradient", "gradients"))
_GLOBAL_WORDS = frozenset(("global", "total", "l2"))
_RUN_COUNTS = frozenset(f"total_{n}" for n in ("step", "iter", "iteration"))  # a total's singular: the run's count
LOSS_FUNCTIONS = frozenset(("mse", "mae", "rmse", "nll", "bce", "ce", "kl", "kld", "l1", "huber", "ctc", "xent",
                            "crossentropy", "smoothl1", "sisnr"))
_PPL_WORDS = frozenset(("ppl", "perplexity"))
_UNIT_AFTER = {"(s)": "s", "(sec)": "s", "(ms)": "ms", "(min)": "min"}  # a unit in parentheses after a time's name
UNIT_AFTER = "|".join(map(re.escape, _UNIT_AFTER))  # (a pattern of them)
_GLUED_UNIT = re.compile(rf"(?<=[a-z])(?:{UNIT_AFTER})$")  # ... glued to it: 'time(s)'
_UNIT_SUFFIX = re.compile(r"[_.](ms|s|sec|secs|us|min)$")  # ... as an identifier's last part: 'step_time_ms'
_TIME_FIELDS = frozenset(("step_time_s", "data_wait_s", "span_s"))
# what a step line names beside its step
_STEP_LINE = frozenset(("loss", "step_time_s", "data_wait_s", "tps", "sps", "step_rate")) | OTHER_LOSSES
_TOKENS = re.compile(r"[^a-z0-9]+")
# a capital and at most one small letter, or two such joined by `_`: a loss written as its initials (FSSD's `L`,
# `C`, `S`; `Lc`, `Le`; CycleGAN's `D_A`), no unit or setting (`LR` is the learning rate, `GB`, `TP` all capitals)
_INITIALS = re.compile(r"[A-Z][a-z]?(?:_[A-Z][a-z]?)?")
_LOSS_PREFIX = re.compile(r"l_[a-z](?:_?[a-z])+$")  # `l_` and a loss's part of two letters or more: not `l_r`
_EVAL_WORDS = frozenset(("eval", "val", "valid", "validation", "test", "evaluation", "runtime", "tel", "cv"))
_PER_STEP = frozenset(("step_time_s", "sps", "tps", "step_rate"))  # what ``<..>_step_<name>`` (the step's) may be
_INTERVAL = frozenset(("sps", "tps", "step_rate", "span_s"))  # ... and ``interval_<name>`` (the interval's: no time)
# a name they begin is a point of the run, no value of a step: a clock's reading (NeMo's checkpoint save's `Start
# time: 1750290740.432s`), a setting (`Start step: 0`)
_CLOCK_WORDS = frozenset(("start", "end", "begin", "finish", "stop"))
_WORDS = re.compile(r"[\s_]+")
_PER = re.compile(r"/(?:s|sec|device|gpu)$")  # a rate's name, ``tokens/sec``, ``tokens/s/device``: no path
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z][a-z])")  # camelCase words apart: ``LearningRate`` is ``learning_rate``
_cache: dict[str, tuple[str, str | None] | None] = {}


def _words(name: str) -> list[str]:
    n = _CAMEL.sub("_", name.strip().strip("'\"")).lower().replace("-", "_")
    return [_part(w) for w in n.split()] if n else []


def _part(word: str) -> str:
    """A word of a name: of a path its last part, or its parts as words when the last is a qualifier (Composer's
    ``loss/train/total``); a rate (``tokens/sec``) whole."""
    if "/" not in word or _PER.search(word):
        return word
    last = word.rpartition("/")[2]
    return word.replace("/", "_") if last in _STEP_WORDS else last  # (the total and split words among them)


def _named(tokens: list[str]) -> bool:
    """A word of ``tokens`` is ``norm`` or ends in ``loss``."""
    return any(t.endswith("loss") or t in ("losses", "norm") for t in tokens)


def _qualified(tokens: list[str], phrase: bool) -> tuple[str, str | None] | None:
    """``(field, unit)`` of a name made of ``loss`` or ``norm`` and qualifiers (see the module docstring);
    ``phrase``: the name has words apart (an identifier, ``loss_step``, is never a phrase)."""
    tokens = list(dict.fromkeys(p for t in tokens for p in ((t[:-4], "loss") if t.endswith("loss") and t[:-4].isalpha()
                                                            else ("loss",) if t == "losses" else (t,))))
    if tokens[-2:] == ["so", "far"]:
        tokens[-2:] = ["running"]  # 'avg loss so far': over the steps so far, a running value
    named = [t for t in tokens if t not in LOSS_FUNCTIONS] if "loss" in tokens else tokens  # ('l1_loss': one word)
    if len(named) > 3 or any(t.isdigit() for t in tokens):
        return None  # a phrase ('loss is nan or inf'), or a name and its value ('loss 2.3')
    if _SETTING_WORDS.intersection(tokens):
        return None  # a setting: 'loss_weights', 'min_loss_scale', 'loss_scale_window', 'max_grad_norm'
    if _LOG_WORDS.intersection(tokens):
        return None  # the quantity's logarithm, not the quantity ('lg_loss_scale': log2 of the scale)
    if "loss" in tokens:
        i = tokens.index("loss")
        qualifiers = tokens[:i] + tokens[i + 1:]
        if _SCALE_WORDS.intersection(qualifiers):
            return "loss_scale", None
        if phrase and any(t in NAMES for t in tokens[i + 1:]):
            return None  # 'loss at step': a phrase, not a name
        if _AVERAGE_WORDS.intersection(qualifiers):
            return LOSS_AVERAGE, None
        return ("loss" if _STEP_WORDS.issuperset(qualifiers) else LOSS_OTHER), None
    qualifiers = [t for t in tokens if t != "norm"]
    if not _AVERAGE_WORDS.intersection(qualifiers) and (
            _GRAD_WORDS.intersection(qualifiers) or _GLOBAL_WORDS.issuperset(qualifiers)):
        return "grad_norm", None
    return None


def lookup(name: str) -> tuple[str, str | None] | None:
    """``(field, unit)`` of ``name`` (field :data:`EVAL` for an evaluation value, :data:`LOSS_AVERAGE` or
    :data:`LOSS_OTHER` for a loss that is the line's only when :func:`resolve` says so), None when it names none."""
    try:
        return _cache[name]
    except KeyError:
        pass
    raw = _CAMEL.sub("_", name).lower()
    words = _words(name)
    if words and (glued := _GLUED_UNIT.search(words[-1])) is not None:  # 'time(s)': 'time (s)'
        words[-1:] = [words[-1][:glued.start()], glued.group()]
    hit: tuple[str, str | None] | None = None
    if len(words) > 1 and words[-1] == "is":
        hit = lookup(" ".join(words[:-1]))  # 'cls_loss is : 3572.3': the separator's word, then its sign
    elif name in _EXACT:
        hit = _EXACT[name]
    elif name.lower() in _IDENTIFIERS:
        hit = _IDENTIFIERS[name.lower()]
    elif len(words) > 1 and (unit := _UNIT_AFTER.get(words[-1])) is not None:
        hit = lookup(" ".join(words[:-1]))  # a time's name and its unit: 'iter time (s)', Megatron's '.. (ms)'
        hit = (hit[0], unit) if hit is not None and hit[0] in _TIME_FIELDS else None
    elif len(words) > 2 and words[-2] == "in" and words[-1] in TIME_UNITS:
        hit = lookup(" ".join(words[:-2]))  # NeMo's 'train_step_timing in s'
        hit = (hit[0], words[-1]) if hit is not None and hit[0] in _TIME_FIELDS else None
    elif (suffix := _UNIT_SUFFIX.search(raw)) is not None and (hit := lookup(raw[:suffix.start()])) is not None:
        unit = {"sec": "s", "secs": "s"}.get(suffix.group(1), suffix.group(1))
        hit = (hit[0], unit) if hit[0] in _TIME_FIELDS else None  # 'step_time_ms', 'time_ms', 'data_time_s'
    elif not raw.isascii() and "_".join(words) not in NAMES and _CJK.search(raw):
        hit = lookup(_CJK.sub(lambda m: f" {_CJK_WORDS[m.group()]} ", raw))
    elif (per := _per_step("_".join(words))) is not None:
        hit = per
    elif any(w in _EVAL_WORDS for w in _WORDS.split(raw.replace("/", " ").replace("-", " "))):
        hit = (EVAL, None)
    elif "_".join(words) in NAMES:
        hit = NAMES["_".join(words)]
    elif "_".join(words) in _RUN_COUNTS:
        hit = ("step", None)  # 'total_step': the run's count (InsightFace_TF, MVSNet); 'total_steps': its end
    elif "_".join(words) in _TOTAL_WORDS:
        hit = (LOSS_TOTAL, None)  # libfacedetection's `All: 3.02(3.20)` after its loss parts
    elif "_".join(words) in _TRAIN_WORDS:
        hit = (LOSS_OTHER, None)  # demucs' `train=0.1794 valid=0.2343`: the split's objective
    elif ("loss" in raw or "norm" in raw) and _named(tokens := [t for t in _TOKENS.split(" ".join(words)) if t]):
        hit = _qualified(tokens, len(words) > 1)
        if hit is None and len(tokens) > 3 and len(words) > 1 and "loss" in words[-1] and words[-1] != "loss":
            hit = lookup(words[-1])  # a phrase ending in a loss's identifier: 'and the cls_loss'
    elif _LOSS_PREFIX.match(raw):
        hit = _qualified(["loss", *_TOKENS.split(raw)[1:]], False)  # BasicSR's `l_pix`, `l_g_gan`: 'l' is the loss
    elif (parts := {t for t in _TOKENS.split(" ".join(words)) if t}) & LOSS_FUNCTIONS and (
            parts <= LOSS_FUNCTIONS | _STEP_WORDS) or "".join(
            t for t in _TOKENS.split(" ".join(words)) if t not in _STEP_WORDS) in LOSS_FUNCTIONS:
        hit = (LOSS_OTHER, None)  # 'mse', 'train_mse': a loss named for its function
    elif parts & _PPL_WORDS and parts <= _PPL_WORDS | _STEP_WORDS:
        hit = (LOSS_PPL, None)  # 'ppl', 'train_ppl': a perplexity
    else:
        for i in range(len(words)):
            key = "_".join(words[i:])
            if key in NAMES:
                hit = NAMES[key]
                break
            if words[i] in NAMES or words[i] in ("per", "total") or words[i] in _CLOCK_WORDS:
                break  # "ms per step" is a rate, "total .. time" a total, "start time" a clock's
    if hit is None and initials(name):
        hit = (LOSS_OTHER, None)  # FSSD's `L: .. C: .. S: ..`, CycleGAN's `D_A`, `G_A`: losses by their initials
    if len(_cache) < 4096:
        _cache[name] = hit
    return hit


TIME_UNITS = {"ms": 1e-3, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "s": 1.0, "min": 60.0, "h": 3600.0,  # unit: seconds
              **dict.fromkeys(("sec", "secs", "second", "seconds"), 1.0), **dict.fromkeys(("mins", "minutes"), 60.0)}


def by_unit(field: str, unit: str | None) -> str:
    """``field`` (a :func:`lookup` hit's) as its value's ``unit`` says: a cost (``cost``) printed with a time unit is
    the step's time (so-vits-svc's ``cost 53049.93 s``), without one a loss named for its objective (Marian's
    ``Cost 2.76825786``, TensorFlow's and PaddlePaddle's early examples' ``cost``, :data:`LOSS_OTHER`)."""
    if field != "cost":
        return field
    return "step_time_s" if unit in TIME_UNITS else LOSS_OTHER


def bare(name: str) -> bool:
    """``name`` is a total word or a training-split word alone (:func:`lookup`), a loss only when printed with a
    separator (``All: 3.02``, ``train=0.179``; ``Train 1`` is a heading), llm.c's step ``s`` (``s:4860``) or a loop's
    index ``i`` (``i: 0``)."""
    return "_".join(_words(name)) in _BARE_WORDS


def initials(name: str) -> bool:
    """``name`` is a loss written as its initials (:func:`lookup`: ``L``, ``Lc``, ``D_A``), a loss only on a step
    line and apart from its value (``O2``, ``K8S`` are words)."""
    return _INITIALS.fullmatch(name) is not None


def _per_step(key: str) -> tuple[str, str | None] | None:
    """``(field, unit)`` of an identifier naming a value of the step, ``<scope>_step_<name>``, when ``<name>`` is a
    time or a rate (``train_step_samples_per_second``: samples/s) or ``runtime`` (``train_step_runtime``: the step
    time, where ``train_runtime`` alone is a run's); None otherwise (``<scope>`` has no evaluation word). A rate of
    the logged interval, ``interval_<name>`` (PaddleNLP's ``Trainer``: ``speed_metrics("interval", ..)`` over the
    steps since the last log), is that rate of its steps; ``interval_runtime``, the interval's time, is its span."""
    if key.startswith("interval_"):
        hit = ("span_s", _S) if key == "interval_runtime" else NAMES.get(key[9:])
        return hit if hit is not None and hit[0] in _INTERVAL else None
    head, sep, name = key.partition("_step_")
    if not sep or any(w in _EVAL_WORDS for w in head.split("_")):
        return None
    hit = NAMES.get("time" if name == "runtime" else name)
    return hit if hit is not None and hit[0] in _PER_STEP else None


def resolve(fields: list[str]) -> list[str]:
    """The fields of one line's (or one header's) names in order, with the line's loss chosen: a step loss
    name's; else its first :data:`LOSS_TOTAL`; else its only :data:`LOSS_OTHER`; else its first
    :data:`LOSS_AVERAGE`; else the sum of its :data:`LOSS_OTHER` (each becomes :data:`LOSS_PART`); else its first
    perplexity, which becomes :data:`PPL` (its log is the loss). The chosen one becomes ``loss``; the other
    losses keep their pseudo-fields (no record field). ``iters`` is the step on a line naming no other step and
    a loss or a time (else no field); so is ``steps`` on such a line naming no epoch either (beside an epoch it
    counts the epoch's steps, TimeMixer's ``Epoch: 2, Steps: 281 | Train Loss: ..``)."""
    if "iters" in fields:
        step = "step" not in fields and not _STEP_LINE.isdisjoint(fields)
        fields = ["step" if f == "iters" and step else f for f in fields]
    if "steps" in fields and "step" not in fields and "epoch" not in fields and not _STEP_LINE.isdisjoint(fields):
        fields = ["step" if f == "steps" else f for f in fields]  # ParallelWaveGAN's `(Steps: 1000) train/.. = ..`
    if "loss" in fields or OTHER_LOSSES.isdisjoint(fields):
        return fields
    pick = (LOSS_TOTAL if LOSS_TOTAL in fields else LOSS_OTHER if fields.count(LOSS_OTHER) == 1
            else LOSS_AVERAGE if LOSS_AVERAGE in fields else None)
    if pick is None and LOSS_OTHER in fields:
        return [LOSS_PART if f == LOSS_OTHER else f for f in fields]
    i = fields.index(pick or LOSS_PPL)
    return [*fields[:i], "loss" if pick else PPL, *fields[i + 1:]]


def log_ppl(value) -> float:
    """The loss of a perplexity ``value`` (a number or its text), its natural logarithm: ``nan`` for NaN, ``inf``
    for Inf. ValueError: not a number, or not positive."""
    return math.log(float(value))


def canonical(name: str) -> str:
    """The field ``name`` stands for (or ``name`` normalised, when it stands for none)."""
    hit = lookup(name)
    return hit[0] if hit is not None else "_".join(_words(name))


def _truth(v) -> bool:
    return v if isinstance(v, bool) else str(v).strip().lower() in ("true", "1", "1.0")


def _integer(v) -> int:
    f = float(v)
    if not f.is_integer():
        raise ValueError(f"not an integer: {v!r}")
    return int(f)


KINDS: dict[str, Callable] = {"step": _integer, "rank": _integer, "steps": _integer, "tokens": _integer,
                              "samples": _integer, "overflow": _truth, "slow_reason": str, "overflows": _integer,
                              "overflow_applied": _truth, "trainer_step": _integer}


def record(pairs, rank: int = 0, need_loss: bool = True) -> StepRecord | str:
    """A StepRecord from ``(name, value)`` pairs whose names are canonical, or the reason there is none.

    Values may be numbers, booleans or text (``"nan"`` included); None and empty text mean unknown. With
    ``need_loss`` a row without a loss is not a record (it holds some other metric).
    """
    fields = {}
    try:
        for name, value in pairs:
            if value is None or value == "" or value == "None":
                continue
            if name in FIELDS:
                fields[name] = KINDS.get(name, float)(value)
            elif name == LOSS_PART:  # one of the losses the row's loss is the sum of
                fields["loss"] = fields.get("loss", 0.0) + float(value)
            elif name == PPL:
                fields["loss"] = log_ppl(value)
    except (ValueError, TypeError, OverflowError):
        return NUMBER
    if "step" not in fields:
        return NO_STEP
    if need_loss and "loss" not in fields:
        return NO_LOSS
    fields.setdefault("rank", rank)
    return StepRecord(**fields)


def evaluation_loss(results: dict) -> float | None:
    """The evaluation loss of an evaluation's named results (metric name -> value: MindSpore's
    ``cb_params.eval_results``, MindFormers' evaluation output; a metric's own dict of results is read the same
    way, ``{"PerplexityMetric": {"loss": .., "PPL": ..}}``), as the text reader reads an evaluation line: a name
    with an evaluation word that this table reads as a loss with that word left out (``eval_loss``,
    ``val_nll_loss``), else the first name it reads as a loss (``Loss``; not ``PPL`` nor ``Accuracy``). Its value
    as a float; None when no name is a loss or its value is not a number."""
    losses = [(evaluation, value) for evaluation, loss, value in _flat(results) if loss]
    for _, value in sorted(losses, key=lambda p: not p[0]):  # (a stable sort: in order within each)
        try:
            return float(value)
        except (TypeError, ValueError):
            return None
    return None


def _flat(results: dict):
    """``(has an evaluation word, is a loss, value)`` of each name of ``results`` (nested dicts too)."""
    for name, value in results.items():
        if isinstance(value, dict):
            yield from _flat(value)
            continue
        raw = str(name).lower()
        raw = raw if raw.isascii() else _CJK.sub(lambda m: f" {_CJK_WORDS[m.group()]} ", raw)
        words = [w for w in _WORDS.split(raw.replace("/", " ").replace("-", " ")) if w]
        hit = lookup(" ".join(w for w in words if w not in _EVAL_WORDS))
        yield any(w in _EVAL_WORDS for w in words), hit is not None and hit[0] in _LOSS_FIELDS, value
