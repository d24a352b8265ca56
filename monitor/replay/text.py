"""The generic step-line reader: any trainer's text log (Megatron, DeepSpeed, Hugging Face, fairseq, torchtitan,
OLMo, nanoGPT, Colossal-AI, MindSpore's callbacks and model suites, custom loops), with no per-trainer code.

Each physical line is read in four steps.

1. **Decorations off**: on a line that is not ASCII, full-width forms (Unicode NFKC: ``Loss：1.98`` is
   ``Loss:1.98``; a name there may start with any letter, ``训练次数:100``); ANSI colours, ``> `` quoting, a log
   viewer's line numbers (``[1763] ``), ``[rankN]:`` and ``[defaultN]:`` prefixes, date-times (``2024-08-06
   09:59:26.181``, ``[09/30/22 02:46:23]``, glog's ``I0307 06:40:10.569123 140245 train.py:88]``), file paths
   (a checkpoint's file name holds metrics: Lightning's ``..-val_loss=0.0000-epoch=0.ckpt``), a logger's
   prefix before the message (its date-time, level and source: loguru's ``.. | INFO | __main__:train:12 - ``,
   hydra's ``[..][__main__][INFO] - ``; ``train:12`` there is no value), a paste's Markdown bold around a value
   (``**1.97**``); a printed tensor becomes its value (``tensor(1.5, device='cuda:0')``, ``Tensor(shape=[], ...,
   value= 2.98)``,
   ``Tensor(shape=[1], dtype=Float32, [ 1.08e+01])``), and a MindSpore train cell's output tuple, a float, a bool
   and a float tensor (``TrainOneStepWithLossScaleCell``'s ``loss, cond, scaling_sens``), named values ``loss``,
   ``overflow``, ``loss_scale``, and a loss-only cell's one output (``outputs are [9.748046]``) ``loss``.
   Carriage-return segments are lines of their own already (:mod:`.sources`).
   A column table's header and rows (:mod:`.tables`) are read before the rest: a row is a step line. A JSON
   object printed over several lines (from a line that is ``{`` alone to the one closing it: a Hugging Face
   ``trainer_state.json``) is read as one line.
2. **Trainer messages** (:mod:`.messages`) anywhere in the line, or across a hard wrap (the line before and this
   one joined; a message begun up to two long lines before its mark is read whole): overflows mark their step,
   the others are reports. A message glued after a progress bar whose postfix holds a step line's values
   (``32040/500150 [.., loss=2.6, ..][E ProcessGroupNCCL.cpp:458] ..``) comes after that line's record
   (:attr:`.base.Parser.after`): a report, or an overflow, which is the next step's (DeepSpeed prints it
   during the optimizer step, then the bar counts the step).
3. **Named values**: ``name sep value`` pairs, the separator ``:``, ``=``, `` is ``, a space, ``#`` before a
   count (``Epoch #1``, ``Step #1,``) or a comma between two comma-separated items, a name and a number
   (``.., step 10, loss_train, 0.838``), in plain text,
   ``|``-separated fields, Python dicts and JSON (``loss: 2.3``, ``lm loss: 2.77E+00 |``, ``'loss': 0.92``,
   ``"train/loss": "nan"``, ``loss is 1.66``, ``loss=nan``, ``iter 2920: loss 3.98, time 1099.34ms``); a value
   may carry a total (``step: [100/1000]``, ``iteration 100/ 5000``) and a unit (``ms``, ``s``, ``min``,
   ``%``; a value printed without its unit takes the one the log last gave that field). A word value (``nan``,
   ``inf``, ``True``) followed by a word is a value only when that word starts the next pair: after an explicit
   separator the next ``name:``/``name=`` pair, its name of up to four words (``Loss=nan Time=0.040``, ``loss_net: nan
   loss_scale: 785.42``, DeepSpeed's ``loss: nan iter time (s): 3.235``),
   after a space a known name and its value (``step 2 loss nan lr 0.1``, ``loss nan time 0.31``); not ``loss is
   nan or inf``, ``found inf during ..``, ``number of nan iterations: 0``. A line made of comma-separated fields printed
   value first, ``value [unit] name``, after one or two bare counts (and an unnamed value), is read through those
   fields (tinygrad's ``    1 93.44 s run, 11.8750 loss, 0.000000000001 LR, 642.43 GB used``, darknet's ``99:
   469.803864, 848.945251 avg loss, 0.000000 rate, ..``). When the line holds
   a dict, only the dict is read (a note after it is not the record's). Names are read through the one alias
   table, :mod:`.fields`; a line shape (the line with its digits as 0s) is read once, and its later lines
   reuse that reading. A plain step line (a step and values its record takes as they are, a time with its
   unit) of a shape read before becomes its record through that shape's recipe, unless what the lines
   before left could change it (an overflow message since, a loss scale lower than the line before's, the
   step of the record before).
4. **The step**: a step name's value (``step``, ``iter``, ``iteration``, ``num_updates``, ``batch``, ...; of two, the
   first: litgpt's ``iter 8 | step 2: loss train (curr): ..`` numbers its lines by the micro-batch iteration, each
   line a micro-batch's loss and time, so each line is a record at its iteration, the steps rising line by line;
   the optimizer step it names is shared by the micro-batches it accumulates; in a bar's postfix, which tqdm
   prints to 3 significant digits, ``global_step=3.2e+4`` is the bar's count 32040); else the
   count of a tqdm bar on the line (``431/788222 [29:28<..., loss=nan]``, its postfix read as values) or of a Keras
   bar (``  3/234 [====>....] - ETA: 8s - loss: 2.3``, the fields after it), within the epoch a line naming only its
   epoch named before it (Keras' ``Epoch 51/100``); else an
   unnamed count ``(a/b)``, ``[a/b]`` or ``a / b``, spaces inside too (``Epoch:[0/19](100/24681)``, ``Epoch
   [1][50/5808]``, ``| epoch 010  2000 / 8223``, ``[  0/938]``, PyTorch's examples' ``Train Epoch: 1 [51200/490871
   (10%)]``: samples, as the trainer counts them; of two printed one after the other,
   ``[ 1/10][101/549]``, the first is the epoch); else one or two bare counts leading a line of named values
   (``[  1]    1440 || B: 5.495 | ..``, ``333 154 Loss=nan``, ``    1 93.44 s run, ..``, ``000 epoch, 02000 iter,
   ..``: the last is the step, one before it the epoch); else, in a log that has read no named step line, a line of
   nothing but a count (a colon after it or not) and a value with a fraction (or NaN/Inf), the count higher than the
   last record's (``76930 2.6496577``, ``76980 nan``: ``print(t, loss.item())``, as PyTorch's "Learning PyTorch with
   Examples" tutorial and the many loops copied from it print; WaveGlow's ``123873:\t-5.480178833``): the step and its
   loss (``640 480``, a count that does not rise, a line with anything else is no such pair); or a column table's row
   without its header (:func:`_row`: ``6/149  13.5G  nan  nan .. 640  0``, an epoch of its total, maybe the batch's
   count of its total, then numbers), its first value with a fraction the loss; else, when
   the log counts nothing finer, the epoch (one line per epoch). A step counted within its epoch is made global from the
   first epoch the log shows, so an excerpt's steps are the counts it prints (``Epoch [2][600/7004]`` first: step 600):
   ``(epoch - first epoch) x steps per epoch + step`` when the count has a total, else the steps of the epochs before
   are added when the count starts again in a new epoch, or in the same epoch from its start after that epoch's end
   was printed (its time, an evaluation: a script calling ``Model.train(1, ..)`` once an epoch, whose ``LossMonitor``
   prints ``epoch: 1 step: 1..`` each time; with no end between, a restart: the run went back). A count with a total
   on lines naming no epoch that starts again when its next print would have passed its total (MindSpore's and
   PyTorch's quick start, ``loss: 0.58  [  0/938]`` after ``[900/938]``) is the next epoch's: the totals before it
   are added. A line with a loss and no step (Hugging Face's dicts) is at the count of the training bar when a bar
   ran ahead of the last record, else at the step after it
   (the very values of the line before again: a copy, another node's, a ``duplicate step``); in a log whose lines number
   their steps, such a line is a summary. A line with a step time or a throughput and no loss is such a line too (a step
   record without a loss) when a bar ran ahead of the last record or, before any record, when it is a dict; otherwise it
   completes the record before it.

What a line becomes:

* a step line (a step, and a loss or other values): a record. Megatron-style interval fields are read for
  what they say: ``number of skipped iterations`` K of the interval's N steps (K >= N: nothing trained, no
  loss, overflowed; 0 < K < N: overflow unknown; K is the record's overflow count), ``number of nan
  iterations`` > 0 (a ``nan_inf`` report), a running ``skipped`` count (its rise is the overflow count) or a
  loss scale lower than the line before (overflows in the interval), an ``overflow`` printed as a fraction (the
  share of the steps since the line before);
  running token totals give the record's tokens; a printed TPS gives them with the step time (a printed
  samples/s its samples); a printed step time holds the data time printed with it, when not shorter (the
  record's step time is the rest); an epoch's line (epoch time and per-step time) stands for their ratio's steps;
  a step line printing no step time is timed by the line times (:meth:`Parser._timed`);
* a record holding nothing but its step (a line naming a step alone, ``Recording summary at step 0.``, a header's
  ``1 epoch = 330 batches``), when the next record has values: replaced by it (the line merged);
* a tqdm bar's line after the record's own (tqdm draws a postfix when it is set, then again when the bar counts
  the step): the same values at the next count are that record, now at that count (merged); other values at the
  record's count are the next step's;
* a step line naming the step of the record before it, with only values that record lacks (a step's time on a
  line after its loss, MindYOLO's ``Step 100/3995, step time: ..``): it completes that record;
* a line with a loss and no step after a line naming its epoch, a later one than the last record's, and no loss
  (a block ``Epoch    :  8`` then ``LOSS     :  nan``, one name and value per line; nnU-Net's ``Epoch 0``, then
  ``Current learning rate: 0.01``, then ``train_loss 0.3602``): read joined to it and to the lines between them
  that name no epoch and no loss (up to :data:`_BLOCK_CHARS`), a step line at that epoch when the log counts
  nothing finer;
* a line of a weighted loss term with no step, Caffe's ``Train net output #0: loss = 6.90776 (* 1 = 6.90776
  loss)`` (not a test net's): the last record's loss is the sum of its terms (its step line's ``loss =`` is
  smoothed over the solver's ``average_loss`` iterations);
* lines naming one loss each of their own, one after the other (``stage1_pafs_loss: 5.46``, then
  ``stage1_heatmaps_loss: 2.05``): the parts of one record's loss, summed; such a block before the log's first
  step line naming only its step is the end of a block whose step line the log does not hold: that step line's
  record replaces it;
* a line of values with no step (a timing line after its step line, a line of a multi-line metric block,
  the second half of a hard-wrapped step line): its values complete the record before it. Right after a
  record's own line the two lines are read joined (without a space when the first does not end in one: a
  wrap cut in the middle of a name or number), so that a name or number cut by the wrap is read whole;
* a line naming a step, with no loss and only values the record before lacks, right after that record's own
  line when the log had named no step (its step was its position): the second half of that record, hard-wrapped
  before its step (insightface's ``.. Loss nan   LearningRate 0.001000`` / ``Epoch: 0   Global Step: 20 ..``):
  the record, now at that step;
* a line with an evaluation value (``val loss``, ``eval_loss``, ``valid_loss``) or that begins with an
  evaluation word (or comes right after a line that only announces an evaluation: the quick start's ``Test: ``,
  then `` Accuracy: 91.5%, Avg loss: 0.281200 ``), once the log has had step lines without one (until then
  such lines are its step lines: some loops print the validation loss on every step line; their evaluation loss
  comes after their record, at their step): an :class:`~.base.Evaluation` when it names an evaluation loss
  (:meth:`Parser._evaluation`), which the runner hands to the engine's evaluation rules, else a summary; a bar
  with nothing else: a step record of its count while the log has shown no step line (:meth:`Parser._counted`),
  else a progress bar;
* a line that is not a step line, with a time, after a silence of step lines longer than the ``stall`` rule
  allows (:class:`.clock.Silence`, as the live watchdog judges the clock): a ``stall`` report after the last
  step;
* a line saying the trainer stopped on a NaN/Inf loss (``... loss is NAN or INF ... terminating training``):
  a ``nan_inf`` report at the line's step; a line with a loss and no step right after a trainer's NaN report
  (detectron2's ``loss_dict = {..}`` after ``Loss became infinite or NaN at iteration=2137!``): the losses the
  report is about (merged).

An overflow message after a record that covers an interval (Megatron-DeepSpeed) is counted into the next step
line; otherwise it is a record of its own at the step after the last one seen, which the next step line takes
over when it is of that step or a later one (a log printing a step line every N steps: the message is about
a step of the interval that line closes), unless a progress bar, not a step line, counted the steps before
the message. Once a log has printed an overflow message,
its step lines without one are clean steps (``overflow`` False). Trainer reports come after the last step known
done (a progress bar's count included).
"""
from __future__ import annotations

import math
import re
import unicodedata
from typing import Any

from ..record import StepRecord
from . import base, clock, messages, tables
from .base import BLANK, DUPLICATE, HEADER, MERGED, NO_LOSS, NO_STEP, NUMBER, PROGRESS, SUMMARY, Evaluation, Report
from .clock import Silence
from .fields import (
    COUNTERS,
    EVAL,
    FIELDS,
    LOSS_AVERAGE,
    LOSS_OTHER,
    LOSS_PART,
    LOSS_TOTAL,
    NO_FIELD,
    OTHER_LOSSES,
    PPL,
    TIME_UNITS,
    UNIT_AFTER,
    bare,
    by_unit,
    evaluation_loss,
    initials,
    log_ppl,
    lookup,
    resolve,
)

NAME = "text"

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# line decorations: `> ` quoting, a viewer's `[1763] ` line numbers, torchrun's `[rank3]:`, Ray's worker prefix
# `(RayTrainWorker pid=1234)`, `(name, pid=1234, ip=10.0.0.1)`
_LEAD = re.compile(r"(?:\s*>(?: |$)|\s*\[\d+\] |\[(?:rank|default)\d+\]:"
                   r"|\((?:[^()]*[ ,] ?)?pid=\d+(?:, ip=[\d.]+)?\) ?)+")
_STAMP = re.compile(r"\[?\d{4}-\d\d-\d\d[ T-]\d\d:\d\d:\d\d(?:[.,:]\d+)*\]?"
                    r"|\[?(?:\d\d)?\d\d/\d\d/\d\d(?:\d\d)? \d\d:\d\d:\d\d\]?"  # PaddlePaddle's `[2025/06/14 ..]` too
                    r"|(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ \d]\d "
                    r"\d\d:\d\d:\d\d(?: \d{4})?"  # C's asctime, Python's time.ctime()
                    r"|\d\d? (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d\d:\d\d(?::\d\d)?"  # `%d %b %H:%M`
                    r"|[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [\w.<>-]+:\d+\]")  # glog's, absl's: thread, source
# text with a slash that holds no value of the line: a file path, absolute or relative (`/`, `./`, `../` or `~/`
# and a second `/`; a checkpoint's file name holds metrics, Lightning's `..-val_loss=0.0000-epoch=0.ckpt`; a name
# with slashes, `loss/train/total`, a count, `50/99`, or a rate, `tokens/s`, starts with no slash), and a value not
# given, `total_grad_norm: N/A total_loss: 13.98` (a name may hold a slash: the next name was read as
# `N/A total_loss`), and a source file's path and line, `[mindspore/ccsrc/runtime/../collective_manager.cc:368]`
# (its folders are no names: `runtime`)
_NO_VALUE = re.compile(r"(?<![\w/.~-])(?:~|\.{1,2})?/[\w.+@-]+/\S*|(?<![\w/])[Nn]/[Aa](?![\w/])"
                       r"|(?<![\w/.~-])[\w.+@-]+/[\w.+@/-]*\.(?:py|pyx|cc|cpp|cxx|c|h|hpp|cu|cuh|java|go|rs):\d+")
_LEVELS = r"INFO|WARNING|WARN|DEBUG|ERROR|CRITICAL"  # a logger's level names
# where a logger says a message comes from, after its date-time or level: a module or file and a line (loguru's
# ``__main__:train:12 -``, YOLOX's ``yolox.core.trainer:259 -``, ``[mindformers/core/callback/callback.py:529]``,
# ESPnet's and ParallelWaveGAN's ``(train:487)`` before the level), a
# logger's name in brackets (hydra's ``[__main__]``); never a name and its value (``step:100``: no dotted or dunder
# module, no ``name:func:``)
_SOURCE = (r"\[?[A-Za-z_<][\w<>/-]*(?:\.[\w<>/-]+)+(?::[\w<>-]+)?:\d+\]?|__\w+__(?::[\w<>-]+)?(?::\d+)?"
           r"|[A-Za-z_]\w*:[A-Za-z_<][\w<>]*:\d+(?=\s+-\s)|\[[A-Za-z_<][\w.<>-]*\]"
           r"|\([A-Za-z_][\w.]*:\d+\)(?=\s+(?:" + _LEVELS + r")\b)")
# what a logger prints before a message: date-times (a time of day alone, ``[14:15:02]``, first), a level
# (``INFO:root:``, ``[INFO]``), its source (:data:`_SOURCE`), separators; bare counts leading the message (``333
# 154 Loss=nan``, ``76980 nan``) lead it behind such a prefix too. :func:`clean` blanks it.
_PREFIX = re.compile(r"(?:\s*\[?\d\d:\d\d:\d\d(?:[.,]\d+)?\]?(?=\s))?(?:\s*(?:" + _STAMP.pattern
                     + r"|\[?\s*(?:" + _LEVELS + r"|NOTICE)\]?(?::[\w.]*:)?|" + _SOURCE
                     + r"|[-|:]+(?=\s)))*")
_TENSOR = re.compile(r"[Tt]ensor\((?:shape=\[[^\]]*\], dtype=\w+, (?:value=)?\s*\[?\s*)?([^\s\]),]+)\s*\]?"
                     r"(?:, [^)]*)?\)")
# MindSpore's repr of a train cell's output tuple, ``(loss, overflow[, loss scale])``: TrainOneStepWithLossScaleCell
# returns ``loss, cond, scaling_sens`` (mindspore/nn/wrap/loss_scale.py), which the model zoo's LossCallBack prints
_MS_TENSOR = r"Tensor\(shape=\[[^\]]*\], dtype={}, (?:value=)?\s*\[?\s*(?P<{}>[^\s\]),]+)\s*\]?\)"
_OUTPUTS = re.compile(r"\(\s*" + _MS_TENSOR.format(r"B?Float\d+", "loss")
                      + r"(?:,\s*" + _MS_TENSOR.format("Bool", "cond") + r"(?:,\s*(?:"
                      + _MS_TENSOR.format(r"B?Float\d+", "scale") + r"|Parameter \((?:[^()]|\(\))*\)))?)?\s*,?\s*\)")
_BOLD = re.compile(r"(?<![\w*])\*\*([-+]?\.?\d[\w.+-]*)\*\*")  # a paste's Markdown bold around a value
_BAR = re.compile(r"(\d{1,3})%\s*(?:\|[^|]*\|)?\s*(\d+)/(\d+)\s*(?:\[([^\]]*)\]?)?")
# a tqdm bar's elapsed time, first in its brackets: ``[2:11:54<23:25:06, 13.45s/it]``, ``[00:57<..``
_BAR_ELAPSED = re.compile(r"\s*(?:(\d+):)?(\d+):(\d\d)(?=\s*[<,\]]|$)")
# a bar's elapsed and remaining time and its rate, before its postfix: ``00:44<04:29,  2.24it/s``, ``00:05<00:00,
# 200.00 examples/s`` (tqdm smooths the rate: no value of the line's)
_BAR_TIMING = re.compile(r"^\s*[\d:?]+(?:<[\d:?]+)?(?:,\s*[^,\]]*/[^,\]]*)?")
BAR_CLOCK = 10  # s: a bar's elapsed time (whole seconds) over at least this long says a step time within 10 %
# a word in a bar's description (``Fetching 11 files:``, ``Map:``, ``Loading ..:``); a unit glued to a number is
# none (YOLOv5's headerless row of values before its bar, ``0/99  21.5G  0.06958 .. 1280:``)
_LETTER = re.compile(r"(?<![\d.])[A-Za-z]")
_KERAS_BAR = re.compile(r"()(\d+)/(\d+) \[[=>.]*\]()(?= - )")  # Keras' ``  6/6 [=====] - 186s ..`` (groups as _BAR's)
_NUM = r"[-+]?(?:\d{1,3}(?:,\d{3})+(?![\d.])|\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
# a loss-only train cell's output (TrainOneStepCell's loss) as LossCallBack prints it: ``outputs are [9.748046]``
_NET_OUTPUT = re.compile(r"\boutputs are (?:\[\s*(" + _NUM + r")\s*\]|(" + _NUM + r"))(?=\s*(?:,|$))")
# a value's unit: no part of a name after it (`D_A: 0.066 G_A: 0.941`: `G_A` is a name, not giga)
_UNIT = r"(?:\s?(?P<unit>ms|us|µs|μs|seconds?|secs?|minutes|mins?|s|h|%|[KMGT]i?B|[KMGT])(?![A-Za-z_]))?"
# a name starts a word (not within one, `min-learning-rate`, nor a command-line option's, `--lr 3e-4`) and has at
# most 8 words of at most 64 characters (the first may end in a time unit in parentheses, `time(s)`): the search
# stays linear in the line; a word value ends before a capitalised word glued to it, the next line's start when a
# line break was lost (Keras' `loss: nanEpoch 1/1000`)
# leader dashes between a name's separator and its value (Wav2Lip's `averaged_loss is ---------- 1.16`; not dots:
# Megatron's arguments, `lr ....... 0.0003`, are no step's values)
_LEADER = r"(?:-{3,}\s+)?"
_PAIR_TEXT = (
    r"(?<![A-Za-z_])(?<!\w-)(?<!\s--)(?<!^--)(?P<item>(?<=, )|(?<=,)|(?<=\{)|^)?(?P<name>[A-Za-z_][\w./-]{0,63}(?:" + UNIT_AFTER + r")?(?: (?:[A-Za-z_][\w./-]{0,63}|\(\w+\))){0,7}?)['\"]?\}?\s*(?P<sep>[:=]|\bis\b|#(?=\d)|(?(item),(?= ?[-+]?\.?\d)|(?!)))?\s*(?(sep)" + _LEADER + r")(?P<br>\[)?\s*['\"]?(?(br)(?:\d+\s*[-–]\s*(?=\d+\s*\]))?)(?<![A-Za-z_])"  # noqa: E501
    r"(?P<val>" + _NUM + r"|(?i:[-+]?nan(?:x{1,3})?|[-+]?inf(?:inity|x{1,3})?|true|false)(?!(?![A-Z][a-z])\w|"
    r"(?!\s\s+[A-Za-z][\w./-]*(?: (?:[\w./-]+|\(\w+\))){0,3}\s*[:=])\s+[A-Za-z]"  # (a column's gap: the next name)
    r"(?(sep)(?![\w./-]*(?: (?:[\w./-]+|\(\w+\))){0,3}\s*[:=])"
    r"|(?![\w./-]*\s+(?:" + _NUM + r"|(?i:[-+]?nan|[-+]?inf))))))"
    r"(?:\s*/\s*(?P<tot>\d+)(?![\d.]))?"
    + _UNIT)
_PAIR = re.compile(_PAIR_TEXT)
# a value named by a phrase that places it at a count, ``Loss for Iter 1: 0.521861``, ``Training loss at step 20:
# 0.8``, ``loss in final step 20000 is 0.30`` (a word before the counter's name): the count's pair (its counter's
# name, the count) and the value's (the first words, the value)
_PLACE = r" (?:for|at|after|of|in) "
_PLACING = re.compile(_PLACE)
_PLACED_VALUE = r"(?:" + _NUM + r"|(?i:[-+]?nan|[-+]?inf))"
_PLACED_SEP = r"\s*(?:[:=]|\bis\b)\s*"
_COUNTER = r"(?:[A-Za-z_]\w* )?"  # (a word before a counter's name: ``final step``, ``global step``)
_PLACED = (re.compile(r"[A-Za-z_]\w*(?: [A-Za-z_]\w*)?" + _PLACE + _COUNTER + r"(?P<name>[A-Za-z_]\w*)(?P<sep>)\s+"
                      r"(?P<val>\d+)(?P<tot>(?!))?(?P<unit>(?!))?(?=" + _PLACED_SEP + _PLACED_VALUE + ")"),
           re.compile(r"(?P<name>[A-Za-z_]\w*(?: [A-Za-z_]\w*)?)(?P<sep>)" + _PLACE + _COUNTER + r"[A-Za-z_]\w*\s+\d+"
                      + _PLACED_SEP + r"(?P<val>" + _PLACED_VALUE + r")(?P<tot>(?!))?(?P<unit>(?!))?"))
# on a line that is not ASCII, a name may start with any letter (``训练次数:100, Loss:1.98``)
_WIDE_PAIR = re.compile(_PAIR_TEXT.replace("[A-Za-z_][", r"[^\W\d][").replace("(?<![A-Za-z_])", r"(?<![^\W\d])"))
# a field printed value first, ``11.8750 loss``, ``93.44 s run``; a line made of them, comma-separated, after one or
# two bare counts (the step), is read through them
_FIELD_TEXT = (r"(?P<val>" + _NUM + r"|(?i:[-+]?nan|[-+]?inf(?:inity)?))(?P<tot>(?!))?" + _UNIT
               + r"\s+(?P<name>[A-Za-z_][\w./-]{0,63}(?: [A-Za-z_][\w./-]{0,63})?)")
_FIELD = re.compile(_FIELD_TEXT + r"\s*(?:,|$)")
_ANY_FIELD = re.sub(r"\?P<\w+>", "?:", _FIELD_TEXT)
# a value whose unit is a rate says what it is, whatever its name: ``92.09 seconds/step``, ``(57.126 sec/step)``,
# ``speed: 1.749s / iter``, ``speed: 2.88 steps/s``, ``1290 samples/sec`` (not tqdm's ``it/s``, ``s/it``: smoothed)
_PER = r"(?:\s?/\s?|\s+\(?per\s+)"  # ``/``, `` per `` or `` (per ``: KittiSeg's ``42.856 sec (per Batch)``
_PER_TIME = _PER + r"(?:s|secs?|seconds?)\b"
_STEPS = r"(?i:steps?|iters?|iterations?|batch(?:es)?)"
_RATED = r"(?<![\w.])(?P<val>" + _NUM + r")(?P<tot>(?!))?\s?"
_NOT_NAMED = r"(?!\s*[:=])"  # a unit, not the name of the next value (``iter time (s): 70.3 samples/sec: 0.11``)
_RATE_UNITS = ((re.compile(_RATED + r"(?:(?P<unit>ms)|s|secs?|seconds?)" + _PER + _STEPS + r"\b" + _NOT_NAMED),
                "step_time_s"),
               (re.compile(_RATED + r"(?P<unit>(?!))?" + _STEPS + _PER_TIME + _NOT_NAMED), "step_rate"),
               (re.compile(_RATED + r"(?P<unit>(?!))?(?:tokens|tok)" + _PER_TIME + _NOT_NAMED), "tps"),
               (re.compile(_RATED + r"(?P<unit>(?!))?(?:samples|examples|images|imgs|seqs|sequences|sentences)"
                           + _PER_TIME + _NOT_NAMED), "sps"))
_UNNAMED = r"(?:" + _NUM + r"\s*,\s*)?"  # an unnamed value before the fields (darknet's batch loss)
_VALUE_FIRST = re.compile(r"\s*(?:\d+:?\s+){0,2}" + _UNNAMED + _ANY_FIELD + r"(?:\s*,\s*" + _ANY_FIELD
                          + r")+\s*,?\s*$")
_COUNTS = (re.compile(r"\(\s*(\d+)\s*/\s*(\d+)\s*\)"),
           re.compile(r"\[\s*(\d+)\s*/\s*(\d+)\s*(?:\(\s*\d+(?:\.\d+)?%\s*\)\s*)?\]"),
           re.compile(r"(?<![\d.])(\d+) / (\d+)(?![\d.])"))  # (a/b), [a/b] (PyTorch's examples: [a/b (p%)]), a / b
_OUTER = re.compile(r"\[\s*(\d+)\s*\]$")  # a bare bracketed count right before a count of a total: its outer count
# a line led by one or two bare counts, then named values (a name of up to three words): ``[  1]    1440 || B: 5.495
# | ..`` (epoch, step), ``[0 :  14000] loss G : 2.236 loss D : 2.203`` (scale, iteration); a count may name its
# counter after it (``000 epoch, 02000 iter, average time 0.6359, loss -403.4386``)
_AFTER = r"(?:\s*(?:epochs?|iter(?:ation)?s?|steps?|batch(?:es)?)\b)?"
_LEADING = re.compile(r"\s*[\[(]?\s*(\d+)" + _AFTER + r"\s*[\])]?(?:[\s,:|]+[\[(]?\s*(\d+)" + _AFTER
                      + r"\s*[\])]?)?[\s,:|]+"
                      r"(?=[A-Za-z_][\w./-]*(?: [A-Za-z_][\w./-]*){0,2}(?:\s*(?:[:=]|\bis\b)\s*" + _LEADER
                      + r"|\s+)[-+]?(?:\d|nan|inf)|"
                      + _UNNAMED + _ANY_FIELD + r"\s*,)", re.IGNORECASE)
_RANGE = re.compile(r"[-–]\d")  # after a step's value, a range of steps (``Steps 1-20:``): a summary's (a range in
# brackets, MXNet Speedometer's ``Batch [600-620]``, is the interval the line closes: :data:`_PAIR` reads its end)
_NAMESPACE = re.compile(r"(?<![\w.])Namespace\(\w+=")  # argparse's repr of a script's arguments, `print(args)`
_NUMERAL = re.compile(r"(?<![A-Za-z_])\d")  # a digit that is no part of a name (a header's ``LOSS TOK2VEC``)
_WORD_AFTER = re.compile(r"\s+[A-Za-z]")
_NOT_FINITE = re.compile(r"(?i)[-+]?(?:nan|inf)\w*")  # a value NaN or Inf as printed (``nan``, ``-inf``, ``nanxxx``)
# a line of a count (a colon after it or not) and a value with a fraction (or NaN/Inf), nothing else: ``76980 nan``,
# ``76930 2.6496577``, WaveGlow's ``123873:\t-5.480178833``
_FRACTION = r"[-+]?(?:\d*\.\d+(?:[eE][-+]?\d+)?|(?i:nan|inf))"  # a value with a fraction, or NaN/Inf
_BARE = re.compile(r"\s*(\d{1,15}):?\s+(" + _FRACTION + r")\s*$")
# a column table's row whose header is not in the log (an excerpt of YOLO's ``results.txt``): a count of a total (the
# epoch), maybe a second (the batch within it), then at least two numbers (``13.5G`` and ``640`` too), nothing else:
# ``     6/149     13.5G       nan       nan ...  3       640         0``
_ROW = re.compile(r"\s*(\d{1,9})/\d{1,9}(?:\s+(\d{1,9})/(\d{1,9}))?((?:\s+(?:[-+]?(?:\d+\.?\d*|\.\d+)"
                  r"(?:[eE][-+]?\d+)?[KMGT%]?|(?i:[-+]?nan|[-+]?inf))){2,})\s*$")
_ROW_LOSS = re.compile(_FRACTION)
# ... or a count with its share of the run, and the elapsed time (PyTorch's tutorials: ``5000 5% (0m 12s) 2.4177 Coelho
# / Portuguese ✓``, ``0m 9s (5000 5%) 2.6479``, ``1m 47s (- 25m 8s) (5000 6%) 2.8642``), words after the value
_BARE_SHARE = re.compile(r"\s*(?:\d+m \d+s\s+(?:\(-\s*\d+m \d+s\)\s+)?\()?(\d{1,15})\s+\d{1,3}%\)?(?:\s+\(\d+m \d+s\))?"
                         r"\s+([-+]?(?:\d*\.\d+(?:[eE][-+]?\d+)?|(?i:nan|inf)))(?:\s+\D*)?$")
# a weighted loss term: Caffe's `(* weight = weighted loss)` after a net output's value (its weighted value)
_WEIGHTED = re.compile(r"=\s*" + _NUM + r"\s*\(\*\s*" + _NUM + r"\s*=\s*(" + _NUM + r"|[-+]?(?i:nan|inf))\s+loss\)")
# the words that name an evaluation (cv: Kaldi's, ESPnet's and WeNet's cross-validation set)
_EVAL_NAMES = "eval|evaluation|validation|valid|val|test|cv"
_EVAL_WORD = re.compile(rf"\b(?:{_EVAL_NAMES})\b", re.IGNORECASE)  # (Caffe's `Test net`)
# a value printed with its running average in parentheses: ``loss: 6.5993 (6.5971)``, ``grad_norm: 0.3922 (nan)``
_AVERAGED = re.compile(r"(?<![\w.])([A-Za-z_][\w./-]*)\W{0,3}[:=]?\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*"
                       r"\(\s*(" + _NUM + r"|[-+]?(?i:nan|inf))\s*\)")
# (lookup's hits) judged by nan_inf
_AVERAGED_FIELDS = (("loss", None), ("grad_norm", None), (LOSS_AVERAGE, None), (LOSS_TOTAL, None))
_LOSSES = frozenset(("loss", LOSS_PART)) | OTHER_LOSSES  # a line's losses, the line's own or not
_EVAL_START = re.compile(rf"\s*(?:{_EVAL_NAMES})\b", re.IGNORECASE)
# an evaluation's tag before the line's first count (PaddleClas' ``[Eval][Epoch 1][Iter: 0/67]``, MMEngine's
# ``Epoch(val) [1][4/4]``, fairseq's ``[valid][INFO]``): its lines are no training steps
_EVAL_TAG = re.compile(rf"[\[(](?:{_EVAL_NAMES})[\])]", re.IGNORECASE)
_DIGIT = re.compile(r"\d")
# a line that only announces an evaluation, its values on the next line (the MindSpore quick start's ``Test: ``, then
# `` Accuracy: 91.5%, Avg loss: 0.281200 ``)
_EVAL_HEADING = re.compile(rf"\s*(?:{_EVAL_NAMES}|evaluating|validating|testing)(?: (?:set|results?|metrics))?"
                           r"\s*[:.]*\s*", re.IGNORECASE)
WRAPPED = 60  # characters of a line that may be the start of a hard-wrapped trainer message (see Parser._message)
# the step between a training loss's name and its value, as NVIDIA's Tacotron 2 and its kin print it (``Train loss
# 12001 0.166141``; their evaluation's is ``Validation loss 8416:  0.71``): read as ``step 12001 Train loss ..``
_TRAIN_LOSS_STEP = re.compile(r"\b((?:[Tt]rain|TRAIN)(?:ing|ING)? (?:[Ll]oss|LOSS)) (\d+):? +(?=[-+]?\d*\.\d)")
# an evaluation loss, and the iteration a Tacotron-style loop prints after the name (``Validation loss 8416:  0.71``)
_EVAL_LOSS = re.compile(r"\b(?:eval|val|valid|validation|test)[ _/]?loss\b['\"]?(?:\s+(?P<step>\d+)\s*:)?\s*[:=]?\s*"
                        r"(?P<val>[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?|nan|inf)(?![\d.])", re.IGNORECASE)
_TIMES = ("step_time_s", "data_wait_s")  # the fields in seconds, printed in any of TIME_UNITS
_COUNTED = frozenset(("skipped", "skipped_total", "nan_iterations", "tokens_total", "time_total"))  # counts, totals
_RECORDED = ("loss", "grad_norm", "loss_scale", "lr", "step_time_s", "data_wait_s", "mfu", "overflow", "tokens",
             "samples")
_RATES = (("tps", "tokens"), ("sps", "samples"))  # a printed rate per second -> the record's count (x step time)
_MEASURED = ("loss", "grad_norm", "step_time_s", "tokens", "samples", "mfu")  # what makes step records a training log
_THROUGHPUT = frozenset(("step_time_s", "tps", "sps", "step_rate", "mfu"))  # a step record without a loss holds one
_READ = frozenset(("loss", "grad_norm", "loss_scale", "lr", "step_time_s", "data_wait_s", "mfu", "overflow", "tokens",
                   "tps", "sps", "step_rate", "tokens_total", "time_total", "skipped", "skipped_total",
                   "nan_iterations"))  # what completes a record


def _averages(text: str) -> list[tuple[str, str, tuple]]:
    """``(name, average, lookup hit)`` of each loss or grad norm in ``text`` printed with its running average."""
    return [(m[1], m[2], hit) for m in _AVERAGED.finditer(text) if (hit := lookup(m[1])) in _AVERAGED_FIELDS]


def _measured(fields: dict) -> bool:
    """``fields`` (a record's) hold a loss, a grad norm, a step time or a throughput: a log of such records is a
    training log."""
    return any(fields.get(k) is not None for k in _MEASURED)


def _empty(rec: StepRecord) -> bool:
    """``rec`` holds nothing but its step."""
    return all(getattr(rec, k) is None for k in _RECORDED)


def _undecorated(line: str) -> str:
    """``line`` without its decorations but its date-times."""
    if not line.isascii():
        line = unicodedata.normalize("NFKC", line)  # full-width forms: ``Loss：1.98`` is ``Loss:1.98``
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    if "^M" in line:  # a carriage return as a paste of `cat -v` or `less` shows it: the text after, as a terminal
        line = line.rpartition("^M")[2]  # shows the line
    m = _LEAD.match(line)
    if m is not None:
        line = line[m.end():]
    if "**" in line:
        line = _BOLD.sub(r"\1", line)
    if "ensor(" in line:
        if "(Tensor(" in line:
            line = _OUTPUTS.sub(_outputs, line)
        line = _TENSOR.sub(r"\1", line)
    if "outputs are " in line:
        line = _NET_OUTPUT.sub(lambda m: f"loss: {m.group(1) or m.group(2)}", line)
    if "ain loss " in line:
        line = _TRAIN_LOSS_STEP.sub(r"step \2 \1 ", line)
    return line


def _outputs(m: re.Match) -> str:
    """A train cell's output tuple as named values (the name before it, ``outputs are`` or ``loss:``, names
    nothing then): ``loss``, and ``overflow`` and ``loss_scale`` when the tuple has them."""
    named = [(k, m.group(k)) for k in ("loss", "cond", "scale") if m.group(k) is not None]
    return ", " + ", ".join(f"{'overflow' if k == 'cond' else 'loss_scale' if k == 'scale' else k}: {v}"
                            for k, v in named)


def _count(text: str, epoch) -> tuple[str, str, str | None] | None:
    """An unnamed count ``(a, b, outer)`` in ``text`` (not the epoch's own ``[e/E]``; ``[  0/938]`` too): of two
    printed one after the other (``[ 1/10][101/549]``) the second, ``outer`` the first's count (the epoch's); after
    a bare bracketed count (OpenMMLab's ``[epoch][iter/total]``, MMEngine's ``Epoch(train) [2][10/15]``), ``outer``
    that count; else None."""
    for pattern in _COUNTS:
        for m in pattern.finditer(text):
            if epoch is None or int(m.group(1)) != epoch[0] or m.group(2) != epoch[1]:
                inner = pattern.match(text, m.end() + len(text[m.end():]) - len(text[m.end():].lstrip(" ")))
                if inner is not None:
                    return inner.group(1), inner.group(2), m.group(1)
                outer = _OUTER.search(text, 0, m.start())
                return m.group(1), m.group(2), None if outer is None else outer.group(1)
    return None


def _dict(text: str) -> str:
    """The Python or JSON dict in ``text`` when it has one (the values outside it are not the record's), else
    ``text``; a dict assigned to a name (InternLM's ``.. step=0 loss=11.548 .. grad_norm={'0_default': 61.58}``)
    or naming no loss after the line's loss (ROMP's ``.. Loss 617.70 | Losses {'reg': 567.27, ..}``, its breakdown)
    is no record: ``text`` (``eval result: {'Loss': 2.3}`` is its dict's, and so is a Keras bar's ``- loss: 9.4006``
    average followed by the batch's ``{'loss': 9.4530907, 'batch': 35, ..}``). A counter alone before a dict that
    names none is its record's (``Epoch 59: {'loss': 5.25}``): kept before it."""
    start = text.find("{'") if "{'" in text else text.find('{"')
    if start < 0 or text[:start].rstrip().endswith("="):
        return text
    end = text.rfind("}")
    found = text[start:end + 1] if end > start else text[start:]
    before = pairs(text[:start])
    if "loss" not in found.lower() and any(p[0] == "loss" for p in before):  # the loss's breakdown
        return text
    if before and all(p[0] in COUNTERS for p in before) and not any(p[0] in COUNTERS for p in pairs(found)):
        return text[:start] + found
    return found


def _prefix_end(text: str) -> int:
    """Where the text after ``text``'s logger prefix (:data:`_PREFIX`, which matches any text) begins."""
    m = _PREFIX.match(text)
    return 0 if m is None else m.end()


def _evaluating(text: str) -> bool:
    """``text`` is an evaluation's line by its start: an evaluation word after its logger prefix, or an evaluation's
    tag before its first count (:data:`_EVAL_TAG`)."""
    start = _prefix_end(text)
    if _EVAL_START.match(text, start) is not None:
        return True
    digit = _DIGIT.search(text, max(start, clock.stamp_end(text)))
    return _EVAL_TAG.search(text, 0, len(text) if digit is None else digit.start()) is not None


def _leading(text: str) -> re.Match | None:
    """The bare counts leading ``text`` behind its logger prefix (:data:`_LEADING`), else None."""
    return _LEADING.match(text, _prefix_end(text))


def _row(text: str) -> tuple[int, int | None, int | None, str] | None:
    """``text`` as a column table's row without its header behind its logger prefix (:data:`_ROW`): ``(epoch,
    batch count or None, its total or None, loss)``, the loss its first value with a fraction (or NaN/Inf) after
    the counts (the tables of YOLO's ``results.txt`` put the losses first, after the epoch and the GPU memory),
    else None."""
    m = _ROW.match(text, _prefix_end(text))
    if m is None:
        return None
    loss = next((c for c in m[4].split() if _ROW_LOSS.fullmatch(c)), None)
    if loss is None:
        return None
    return int(m[1]), None if m[2] is None else int(m[2]), None if m[3] is None else int(m[3]), loss


def _bare(text: str) -> re.Match | None:
    """``text`` as a bare count and value behind its logger prefix (:data:`_BARE`, :data:`_BARE_SHARE`), else
    None."""
    start = _prefix_end(text)
    return _BARE.match(text, start) or _BARE_SHARE.match(text, start)


def _postfix(bar: re.Match) -> str:
    """A progress bar's postfix: its bracket's text after the timing (``loss=2.6, lr=1e-6``), else ''."""
    return _BAR_TIMING.sub("", bar.group(4) or "", 1)


def _blank(m: re.Match) -> str:
    return " " * len(m.group())


def clean(line: str) -> str:
    """``line`` without its decorations (see the module docstring); date-times, a logger's prefix (:data:`_PREFIX`),
    file paths and ``N/A`` values (:data:`_NO_VALUE`) become as many spaces."""
    line = _undecorated(line)
    if "/" in line:
        line = _NO_VALUE.sub(_blank, line)
    if ":" not in line:
        return line
    end = _prefix_end(line)
    return _STAMP.sub(_blank, " " * end + line[end:] if end else line)


def _value(text: str) -> float | bool:
    """A value's text as a number: ``1,024`` is 1024, ``True`` True; a NaN or Inf padded with ``x`` to its
    width (PaddleOCR formats its values ``{:x<6f}``: ``nanxxx``) is NaN or Inf. ValueError: none of them."""
    try:
        return float(text)
    except ValueError:
        low = text.lower()
        return low == "true" if low in ("true", "false") else float(low.rstrip("x").replace(",", ""))


def _name(m: re.Match) -> str:
    """The name of the pair ``m``; a name ``X/Y`` printed with a count of a total (ms-swift's
    ``"global_step/max_steps": "8270/11043"``) names the count, ``X``."""
    name = m.group("name")
    return name.partition("/")[0] if m.group("tot") and "/" in name else name


def _pairs(text: str, since: int = 0) -> list[tuple]:
    """``(field, unit, match)`` of each known name in ``text`` ending after ``since``, the line's loss chosen
    (:func:`.fields.resolve`), the other losses left out."""
    found = []
    pending = None  # a word value with no separator before a word: a value when that word names the next pair
    pattern = _FIELD if _VALUE_FIRST.match(text) else _PAIR if text.isascii() else _WIDE_PAIR
    for m in pattern.finditer(text):
        if pending is not None:
            if text[pending[1].end():m.start()].isspace() and lookup(m.group("name")) is not None:
                found.append(pending)
            pending = None
        of_total = m.group("tot") is not None and m.group("val").isdigit()  # a count of a total
        named = lookup(_name(m)) if m.end() > since else None
        if named is None and m.end() > since and _PLACING.search(m.group("name")):
            count, value = (r.match(text, m.start()) for r in _PLACED)
            counter = lookup(count.group("name")) if count else None
            what = lookup(value.group("name")) if value else None
            if count and value and counter is not None and counter[0] in COUNTERS and what is not None:
                found += [(counter, count), (what, value)]
        elif named is not None and (
                not bare(_name(m)) or of_total or pattern is not _FIELD and (
                    m.group("sep") is not None or text.endswith((", ", "{"), 0, m.start()))):
            hit = (by_unit(named[0], m.group("unit")), named[1])
            if of_total and hit[0] in _LOSSES:
                hit = ("step", None)  # a count of a total is no loss: the phase's counter, `[Train 10/1882]`
            if (pattern is not _FIELD and m.group("sep") is None and m.group("val")[-1:].isalpha()
                    and _WORD_AFTER.match(text, m.end())):
                pending = (hit, m)
            else:
                found.append((hit, m))
    marked = [initials(_name(m)) for _, m in found]
    if any(marked):  # a loss's initials: on a step line, apart from a value that is no count (`[E 1 | it 0]`)
        counted = (any(hit[0] in COUNTERS for hit, _ in found) or _LEADING.match(text) is not None
                   or any(count.search(text) for count in _COUNTS))
        found = [(hit, m) for (hit, m), mark in zip(found, marked) if not mark or counted
                 and m.start("val") > m.end("name") and not m.group("val").lstrip("+-").isdigit()]
    if "/" in text or "per " in text:
        have = {hit[0] for hit, _ in found}
        for rate, field in _RATE_UNITS:
            for m in rate.finditer(text):
                if m.end() > since and field not in have:
                    # a named value printed with a rate's unit is that rate (`time 124.273 samples/sec`: no time)
                    found = [p for p in found if p[1].span("val") != m.span("val") or p[0][0] not in _TIMES]
                    found.append(((field, None), m))
                    have.add(field)
    names = resolve([hit[0] for hit, _ in found])
    if "loss" in names and LOSS_OTHER in names:  # a loss part not finite: so is the objective summing it
        bad = [m for field, (_, m) in zip(names, found) if field == LOSS_OTHER and _NOT_FINITE.fullmatch(m["val"])]
        hit, m = found[at := names.index("loss")]
        if bad and not _NOT_FINITE.fullmatch(m["val"]):
            found[at] = (hit, bad[0])
    out = [(EVAL if (field == "step" or field == "steps") and _RANGE.match(text, m.end()) else field, hit[1], m)
           for field, (hit, m) in zip(names, found) if field not in NO_FIELD]
    if any(f == "step" and _global(m) for f, _, m in out):
        # a counter of the whole run (LMOps' `inner iter: 7/ 8 | ppo epoch: 2/ 4 | global iter: 13`, MVSNet's
        # `epoch, 3, step 120, total_step 9120`): the other steps count within an epoch or a phase, and the
        # global one needs no epoch to place it (InsightFace_TF's `epoch 0, total_step 880`: its unit RUN)
        out = [(f, RUN if f == "step" else u, m) for f, u, m in out if f != "step" or _global(m)]
    return out


RUN = "run"  # the unit of a step counting the whole run, by its name (:func:`_global`): no epoch places it


def _printed_alike(a, b) -> bool:
    """Losses ``a`` and ``b`` are one value printed to two precisions (``7.7908``, ``7.790812``), or both NaN."""
    if b is None or a.__class__ is not float:
        return False
    if a != a or b != b:
        return a != a and b != b
    digits = min(len(repr(v).partition(".")[2]) if "e" not in repr(v) else 15 for v in (a, b))
    return round(a, digits) == round(b, digits) or math.isclose(a, b, rel_tol=1e-9)


def _global(m) -> bool:
    """A counter's name in ``m`` says it counts the whole run (``global iter``, ``total_step``)."""
    name = _name(m).lower()
    return "global" in name or "total" in name


def _named_loss(text: str) -> str | None:
    """The name of the one loss ``text`` names when it is a loss named for its objective or part
    (:data:`.fields.LOSS_OTHER`: ``stage1_pafs_loss: 5.46``), else None."""
    text = clean(text)
    names = [m.group("name") for m in (_PAIR if text.isascii() else _WIDE_PAIR).finditer(text)
             if (hit := lookup(m.group("name"))) is not None and hit[0] in _LOSSES]
    return names[0].lower() if len(names) == 1 and lookup(names[0]) == (LOSS_OTHER, None) else None


def _heads(heads: list, text: str, joiner: str) -> list:
    """The lines kept after ``text`` (a line holding no trainer message, ``joiner`` before it when it continues
    a wrap) for a message hard-wrapped into the next ones (see :meth:`Parser._message`): with ``heads``, those
    kept before it, the last of them and ``text`` when ``text`` is at least :data:`WRAPPED` long, else none."""
    return [*heads[-1:], (joiner if heads else "") + text] if len(text) >= WRAPPED else []


def _summed(found: list, alone: bool = False) -> list:
    """``found`` (``(field, value, total, unit)`` pairs) with the line's named losses (:data:`.fields.LOSS_PART`)
    summed into one ``loss`` pair at the first one's place, or its chosen perplexity (:data:`.fields.PPL`) a
    ``loss`` pair of its log (its unit PPL) when the line names its step or epoch, or in a log that numbers no
    step and has named no loss (``alone``: punctuator2's ``PPL: 1.0010; Speed: 12549.65 sps``, records by their
    position; a perplexity printed alone beside named losses is an evaluation's); else none."""
    places = [i for i, p in enumerate(found) if p[0] == LOSS_PART or p[0] == PPL]
    if not places:
        return found
    if found[places[0]][0] == PPL:  # (a line with a perplexity chosen has no named losses)
        if not alone and not any(p[0] == "step" or p[0] == "epoch" for p in found):
            return [p for p in found if p[0] != PPL]  # a block's line of its record (OLMo's), or an evaluation's
        try:
            x = repr(log_ppl(_value(found[places[0]][1])))
        except ValueError:
            x = "x"  # the line's NUMBER
        return [("loss", x, None, PPL) if i == places[0] else p for i, p in enumerate(found)]  # (its unit: PPL)
    try:
        total = repr(sum(_value(found[i][1]) for i in places))
    except ValueError:
        total = "x"  # a value float() does not read: the line's NUMBER
    return [("loss", total, None, None) if i == places[0] else p for i, p in enumerate(found)
            if i == places[0] or p[0] != LOSS_PART]


def pairs(text: str, since: int = 0) -> list[tuple]:
    """``(field, value, total, unit)`` of each known name in ``text`` (decorations off) ending after ``since``."""
    return _summed([(field, m.group("val"), m.group("tot"), m.group("unit") or unit)
                    for field, unit, m in _pairs(text, since)])


# A log prints the same line shape at every step, only its numbers change. A line is read in full once per
# shape, the shape being the line with its digits as 0s (its numbers keep their widths, so every reading rule,
# date-times included, falls the same way on it); the next lines of that shape have their values sliced out at
# the same places. The shapes are the process's (every log it reads): at MAX_SHAPES they are all forgotten, and the
# lines read next learn theirs again.
_ZEROS = str.maketrans("123456789", "000000000")
_SHAPES: dict[str, tuple] = {}
MAX_SHAPES = 4096
OBJECT_LINES = 256  # the most lines of a JSON object printed over several lines read as one (Parser._object)
_RULE = re.compile(r"\s*-{8,}\s*")  # a line of dashes: the top or bottom of a key-value table (Parser._table_block)
_BLOCK_CHARS = 2000  # the lines of a block under its epoch line read joined, up to its loss's line: at most this long
_KV_ROW = re.compile(r"\s*\|\s*([^|]*?)\s*\|\s*([^|]*?)\s*\|\s*")  # ... and one of its rows, `| loss | 0.423 |`
_PLAIN = frozenset(("step", "loss", "grad_norm", "loss_scale", "lr") + _TIMES)  # what a plain step line holds


def _reading(text: str) -> tuple[bool, list, tuple]:
    """``(summary, pairs, shape)`` of a line read in full: the shape holds, for each pair, the places of its
    value and total in the line (a word value, ``nan`` or ``True``, is part of the shape: itself)."""
    cleaned = clean(text)
    summary = _evaluating(cleaned) or _evaluating(text)  # (clean blanks a prefix's tags: `[Evaluation][1000]loss:`)
    found, shape = [], []
    for field, unit, m in _pairs(cleaned):
        summary = summary or field == EVAL
        unit, val, tot = m.group("unit") or unit, m.group("val"), m.group("tot")
        found.append((field, val, tot, unit))
        shape.append((field, val if val[-1:].isalpha() else m.span("val"), m.span("tot") if tot else None, unit))
    return summary, found, tuple(shape)


def _recipe(key: str, summary: bool, shape: tuple) -> tuple | None:
    """How a line of the shape ``key`` (read as ``summary`` and ``shape``, see :func:`_reading`) becomes its
    record when it is a plain step line: a step and values the record takes as they are (a time in its printed
    unit), no word values but NaN and Inf, no field twice, not both a step time and a data time (the one holds
    the other: :meth:`Parser._fields`), nothing read against other lines (no epoch, no running totals, no
    tokens or MFU); ``(slots, units)``, each slot ``(field, value slice or None, the word
    value's float, total slice or None, unit, seconds per unit or None)``, ``units`` the time units the line
    prints. None for any other shape."""
    fields = [f for f, *_ in shape]
    if (summary or "step" not in fields or len(fields) < 2 or len(set(fields)) < len(fields)
            or not _PLAIN.issuperset(fields) or all(t in fields for t in _TIMES)
            or "%" in key or "erminat" in key or "{'" in key or '{"' in key or "(" in key and _averages(key)):
        return None
    slots, units = [], {}
    for field, val, tot, unit in shape:
        if val.__class__ is str and (field == "step" or val.lower() in ("true", "false")):
            return None
        factor = None
        if field in _TIMES:
            if unit not in TIME_UNITS:
                return None  # a time without its unit is in the unit the log gave it last: read in full
            factor, units[field] = TIME_UNITS[unit], unit
        place = slice(*val) if val.__class__ is tuple else None
        slots.append((field, place, None if place else float(val), slice(*tot) if tot else None, unit, factor))
    return tuple(slots), units


class Parser(base.Parser):
    name = NAME
    stall: Any = None  # the stall rule's settings (RuleConfig, set by the runner): a hang seen in the line times
    fast = True  # plain step lines read through their shape's recipe (set by the runner: ReplayOptions.fast)

    def __init__(self, rank: int = 0, times: bool = True):
        super().__init__(rank, times)
        self.bar = 0                         # the training bar's count...
        self.bar_total: int | None = None    # ... and total
        self.numbered = False                # the log's lines number their steps
        self.named_loss = False              # ... or name a loss (not a perplexity)
        self.leading: bool | None = None     # ... by bare counts leading them (None: not known yet)
        self.by_epoch = False                # ... by their epoch (one line per epoch, nothing finer counted)
        self.counted_epoch: int | None = None  # the epoch of the last step line counting a step within its epoch
        self.epoch_start = False             # ... that line's step is its epoch's first (a later epoch than before)
        self.finished: bool | None = None    # ... by their epoch, each line its epoch's finished count (None: not
                                             # known until the first numbered line)
        self.plain = False                   # a step line without evaluation values was read
        self.plain_fields: frozenset = frozenset()  # ... the fields of the last one with a loss
        self.carried: float | None = None  # the evaluation loss the last step line carrying one carried
        self.overflow_seen = False           # a trainer overflow message was read
        self.epoch: Any = None               # epoch of the last step line
        self.base: int | None = None         # the epoch of the first step line that named one
        self.counts: tuple[int, int, int] | None = None  # (epoch, count, total) of the last line counting a count
        self.run_count = False                # ... which ran on across an epoch: the count is the run's
        self.stride = 0                       # ... the most it rose between two lines of one epoch
        self.offset, self.top, self.low = 0, 0, 0  # steps of the epochs before; this epoch's highest, lowest
        self.ended = False                   # an epoch's end (its time, an evaluation) was read after the last record
        self.drawn: Any = None               # (the last record, moved) when a tqdm bar counted its step
        self.restarts: tuple = (None, 0, 0, 0, 0)  # a count of a total, no epoch: total, first, two last, steps before
        self.epoch_counts = False            # its "total" moves while its count stays: an epoch and its step
        self.prev, self.prev_space = "", False  # the line before (or the record's joined text); it ends in a space
        self.prev_part = False               # the line before is part of the last record
        self.prev_message = False
        self.nan_reported = False            # the line before is a trainer's NaN report...
        self.payload = False                 # ... (for the line being read): its losses may follow it
        self.taken_over = False              # the last record is an overflow message's; a step line may take it over
        self.counted = False                 # ... and a progress bar, not a step line, gave the step before it
        self.guessed = False                 # ... and its step was a guess (no step known)
        self.line_step = 0                   # step of the last step line
        # of the last step line
        self.scale: float | None = None
        self.skipped_total: int | None = None
        self.skipped_step = 0                # the step of the line that gave skipped_total
        self.overflow_records = 0            # overflow messages' records since the last step line
        self.shares = False                  # the log prints its overflow as a share of the steps (a fraction)
        self.tokens_total: int | None = None
        self.time_total: float | None = None  # the last running total of training time (s)
        self.found = False                   # a loss or a trainer message was read
        self.losses = False                  # a line with a loss was read
        self.units: dict[str, str] = {}       # field -> the unit the log last printed with it
        self.line: list | None = None         # the last step line's reading (see _derive), to complete on a wrap
        self.line_named = False               # ... which named its step
        self.mentioned = False                # the line before may hold a trainer message that it did not complete
        self.heads: list[str] = []            # the (up to 2) lines before, hard-wrapped and holding no message
        self.silence: Silence | None = None    # the line times since the last step record (with stall)
        self.table: tuple | None = None        # the columns of the last column table's header (see .tables)
        self.block: tuple | None = None        # (the record, the names) of lines naming one loss each, summed
        # (the lines, the count, the last line) of a block under a line naming its epoch and no loss, up to its loss
        self.counter: tuple[str, int, str] | None = None
        self.nonfinite: set[str] = set()       # the names whose running average the log printed non-finite last
        self.terms = -1                         # the step whose loss terms (Caffe's net outputs) the lines summed
        self.clocked: tuple[int, int] | None = None  # (count, elapsed s) of the bar alone that last gave a time
        self.bar_epoch: int | None = None     # ... the last such count (Keras' ``Epoch 51/100``, then its bars)
        self.count_epoch: int | None = None   # bar_epoch at the last line of a count of a total (_restarted)
        self.members: list[str] | None = None  # the lines so far of a JSON object printed over several lines
        self.rows: list[str] | None = None  # ... of a key-value table between lines of dashes (after its top one)
        self.section = ""                   # ... and the section its rows are in
        self.depth = 0                         # ... and its braces still open
        self.trained = 0                       # the lines that gave or completed a step record
        self.evaluated = -1                    # ... as many as when the last evaluation was read
        self.fraction: float | None = None     # the epoch with a fraction of the line being read (its progress)
        self.progress: tuple[int, float] | None = None  # (step, fraction) of the last step line giving both
        self.stamp: tuple[int, str] | None = None  # (step, line) of the last step line (its time: _timed)
        self.paused = False                    # ... and a checkpoint save or an evaluation line came since

    @property
    def done(self) -> int:
        """The last step done: a progress bar's count says its steps are done, unless it runs ahead of the lines
        that number their steps (with values) by more than their stride (a bar of micro-batches: DeepSpeed's
        ``step=16, skipped=16, lr=[0.0001]`` under a bar at 67, gradient accumulation 4)."""
        line = self.line
        if (self.line_named and line is not None and self.bar - self.step > max(line[2], 1)
                and not _READ.isdisjoint(line[1])):
            return self.step
        return max(self.bar, self.step)

    def next_step(self) -> int:
        return self.done + 1

    def overflowed(self, attempted, new, iteration=None, applied=False):
        repeat = self.repeats(iteration, attempted if attempted is not None else new)
        if repeat is not None:
            return repeat
        self.found = self.overflow_seen = True
        last = self.last
        if last is not None and last.steps > 1 and not self.taken_over:
            self.overflow_lines += 1  # within an interval: the next step line's
            self._named = (iteration, last)
            return MERGED
        self.guessed = last is None and not self.bar
        self.counted = self.bar > self.step  # a progress bar counted the step before
        rec = super().overflowed(attempted, new, iteration, applied)
        self.taken_over = True
        self.overflow_records += 1
        return rec

    def feed(self, line):
        item = super().feed(line)
        cls = item.__class__
        if cls is StepRecord or item is None and self.reason == MERGED:
            self.trained += 1
        if cls is StepRecord or cls is Report:
            self.ended = False
        elif cls is Evaluation or item is None and self.reason == SUMMARY:
            self.ended = True
        if line.__class__ is not str:
            return item
        if cls is StepRecord:
            if item is not self.said:  # a message's record: the steps since the last step line are not known
                self._timed(item, line)
            self.deferred = None
            if self.stall is not None:
                (self.silence or self._silence()).record(item.step, line)
            return item
        saving = clock.SAVING.search(line) is not None
        evaluating = not saving and (cls is Evaluation or item is None and clock.EVALUATING.search(line) is not None)
        self.paused = self.paused or saving or evaluating
        if self.stall is not None:
            silence = self.silence or self._silence()
            if saving:
                silence.busy()
            elif item is None or cls is Evaluation:
                if item is not None:
                    silence.busy()  # an evaluation's result: the silence before it was the evaluation running
                if (idle := silence.idle(line)) is not None:
                    report = Report("stall", self.done, idle, f"no step line for {idle:.0f} s after step {self.done} "
                                    f"(line times; {silence.allowed:.0f} s allowed)", self.rank)
                    if silence.hidden:  # an evaluation with no line times ran in it: a stall unless steps follow
                        self.deferred = report
                        return item
                    if item is not None:  # (a skipped or merged line, or an evaluation: handed on after the report)
                        self.after.append(item)
                    return report
                if item is None and evaluating:
                    silence.busy()  # an evaluation runs: as long as a save may take
            if evaluating and not clock.stamped(line):
                silence.unseen()
        return item

    def _timed(self, rec: StepRecord, line: str) -> None:
        """The pace of ``rec``, a step line's record, by the line times (its lines print no step time): the time
        since the step line before, over the steps since it, when both lines have a time and no checkpoint save or
        evaluation line came between them (``rec``'s time is then not all training). Its step time when it is
        judged, unless its lines gave one its wall time allows (:meth:`~.base.Parser.paced`)."""
        before, self.stamp = self.stamp, (rec.step, line)
        paused, self.paused = self.paused, False
        if before is None or paused or rec.step_time_s is not None or rec.step <= before[0]:
            return
        then, now = clock.line_time(before[1]), clock.line_time(line)
        if then is not None and now is not None and now > then:
            if len(self.paces) >= 64:  # the oldest half: records never judged (absorbed, merged), not the pending one
                for key in list(self.paces)[:32]:
                    del self.paces[key]
            self.paces[id(rec)] = (rec, now - then, rec.step - before[0])

    def _silence(self) -> Silence:
        self.silence = Silence(self.stall.params)
        return self.silence

    def parse(self, line):
        text = _undecorated(line).rstrip("\r\n")
        if self.members is not None or text.endswith("{") and text.strip() == "{":
            joined = self._object(text)
            if joined is None:
                return MERGED
            text = joined
        elif self.rows is not None or text.endswith("--") and _RULE.fullmatch(text) is not None:
            joined = self._table_block(text)
            if joined is MERGED:
                return MERGED
            text = joined or text
        prev, prev_space, prev_part, prev_message = self.prev, self.prev_space, self.prev_part, self.prev_message
        self.prev, self.prev_space, self.prev_part, self.prev_message = text, text[-1:].isspace(), False, False
        self.payload, self.nan_reported = self.nan_reported, False
        if not text.strip():
            self.heads = []
            return BLANK
        bar = _BAR.search(text) if "%" in text else _KERAS_BAR.search(text) if "] - " in text else None
        joiner = " " if prev_space else ""
        if self.table is not None or _NUMERAL.search(text) is None:  # (a header behind a date: see _values)
            item = self._table(text if bar is None else text[:bar.start()], bar)
            if item is not None:
                return item
        glued = valued = False  # a trainer message glued after a bar; the bar has values
        if bar is not None:
            n, total = int(bar.group(2)), int(bar.group(3))
            if self.paused and self.last is not None and n < self.last.step and "loss" not in text.lower():
                return SUMMARY  # a bar with no loss, behind the step, after an evaluation's line: the evaluation's
                # progress (PaddleSeg's `Start evaluating ..`, then `1/500 [....] - ETA: 1:59 - batch_cost: ..`)
            if self.bar_total is None or total != self.bar_total and self.bar >= self.bar_total and not self.plain:
                self.bar_total = total  # the first bar, or, before any step line, one after the last finished
            if total == self.bar_total and not self.finished:  # (checkpoint shards, a dataset's map, then training);
                self.bar = n  # else evaluation bars, or a bar counting within its epoch in a log of epochs
            tail, postfix = text[bar.end():], _postfix(bar)
            text = text[:bar.start()] + ", " + postfix + ", " + tail
            head = text[:bar.start()] + ", " + postfix
            glued = bool(bar.group(4)) and messages.mentioned(tail)
            valued = glued and bool(self._read(clean(head), False)[1])
            if valued:  # a message glued after a bar with values (after a bar alone: the message's line, below)
                rec = self._line(head, bar, prev, joiner, prev_part)
                if rec.__class__ is StepRecord:  # the postfix values: the record of the bar's count, then the message's
                    self.last, self.named = rec, True
                    item = self._message(tail, "", "")
                    if item is not None:
                        self.prev_message = self.found = True
                        if item.__class__ is not str:  # (a repeated message, or one merged into the bar's record)
                            self.after.append(item)
                    return rec
        item = self._message(text, prev if not prev_message else "", joiner)
        if item is not None:
            self.prev_message = self.found = True
            self.nan_reported = item.__class__ is Report and item.rule == "nan_inf"
            if item.__class__ is Report and glued and not valued and bar is not None:
                rec = self._counted(bar)  # a report glued after a bar alone: the bar's record (a step record while
                if rec.__class__ is StepRecord:  # bars are all the log shows), then the report
                    self.after.append(item)
                    return rec
            return item
        item = self._line(text, bar, prev, joiner, prev_part)
        return self._averaged(item, text) if "(" in text else item

    def _object(self, text: str) -> str | None:
        """A JSON object printed over several lines (``json.dumps(.., indent=2)``: a Hugging Face Trainer's
        ``trainer_state.json``, its ``log_history`` entries keys sorted, the step after the loss and grad norm),
        from a line that is ``{`` alone to the line that closes it: its lines joined into one, read as a line of
        its own (None until then; the lines before count as merged into it). A line ``{`` alone inside an
        object starts an object of its own, the one read: the lines before it are the enclosing object's (the
        whole ``trainer_state.json``, its ``log_history`` a list of objects), no record's, and the enclosing
        object's lines after the inner ones close are read one by one. An object of more than
        :data:`OBJECT_LINES` lines is no record's: its lines are read one by one from there. An object the log
        ends inside (cut off) is not read."""
        stripped = text.strip()
        if self.members is None or stripped == "{":
            self.members, self.depth = [], 0
        self.members.append(stripped)
        self.depth += stripped.count("{") - stripped.count("}")
        if self.depth > 0 and len(self.members) < OBJECT_LINES:
            return None
        joined, self.members = " ".join(self.members), None
        return joined if self.depth <= 0 else text

    def _table_block(self, text: str):
        """A key-value table between lines of dashes, a row a value (OpenAI's ``logger.dumpkvs``: guided-diffusion's
        and improved-diffusion's trainers, Stable-Baselines3, and the loops that copied them)::

            ----------------------------
            | grad_norm     | 1.76     |
            | loss          | 0.423    |
            | step          | 1.09e+04 |
            ----------------------------

        one record: its rows joined into one line of ``name: value`` pairs (``grad_norm: 1.76, loss: 0.423, ..``),
        read at the bottom line (a row with no value names the section of the rows under it, Stable-Baselines3's
        ``| rollout/ |`` then ``|    ep_len_mean | 200 |``: ``rollout/ep_len_mean``). Returns that line, MERGED for a
        row (taken into the table), or None for a line that is no part of one (read as it is)."""
        if _RULE.fullmatch(text) is not None:
            rows, self.rows, self.section = self.rows, None, ""
            if rows:
                return ", ".join(rows)
            self.rows = []  # the top line: the rows follow
            return None
        m = _KV_ROW.fullmatch(text)
        if m is None or self.rows is None:
            self.rows, self.section = None, ""
            return None
        name, value = m.groups()
        if not value:
            self.section = name
        elif len(self.rows) < OBJECT_LINES:
            self.rows.append(f"{self.section}{name}: {value}")
        return MERGED

    def _averaged(self, item, text: str):
        """``item``, the reading of ``text``, or a ``nan_inf`` report when ``text`` prints a loss's or grad norm's
        running average, in parentheses after its value, that has turned non-finite (``grad_norm: 0.3922 (nan)``,
        timm's and BEiT's ``MetricLogger``: a step of the average's window had a non-finite value; reported once
        until the average is finite again): after the line's record when it is one, else in the line's place. A
        grad norm's average that is infinite, not NaN, is an overflowed step's norm (fp16 scalers skip that step),
        no report."""
        report = None
        for name, value, hit in _averages(text):
            if hit[0] == "grad_norm" and "inf" in value.lower():
                continue
            if math.isfinite(_value(value)):
                self.nonfinite.discard(name)
            elif name not in self.nonfinite:
                self.nonfinite.add(name)
                step = item.step if item.__class__ is StepRecord else self.done
                report = Report("nan_inf", step, math.nan, f"trainer: the running average of {name} is {value} at step "
                                f"{step} (a step of its window had a non-finite {name})", self.rank)
        if report is None:
            return item
        self.found = True
        if item.__class__ is StepRecord:
            self.after.append(report)
            return item
        return report if item is None or item.__class__ is str else item

    def _table(self, text: str, bar):
        """A column table's header (:data:`~.base.HEADER`) or row (a step line, at the count of its bar, when
        it has one), else None (see :mod:`.tables`)."""
        body = text[_prefix_end(text):]  # the table's cells: after a logger's prefix (JDE's `2021-01-25 05:58:59
        columns = tables.header(body) if _NUMERAL.search(body) is None else None  # [INFO]:`), as its header
        if columns is not None:
            self.table = columns
            return HEADER
        got = tables.row(self.table, body) if self.table is not None else None
        if got is None:
            return None
        found, evaluations = got
        if bar is not None and not any(f[0] == "step" for f in found):
            found.append(("step", bar.group(2), bar.group(3), None))  # the bar counts the row's steps of its epoch
        self.prev_part = False
        item = self._values(text, bar, "", "", False, False, _summed(found))
        if evaluations and item.__class__ is StepRecord and (x := evaluation_loss(evaluations)) is not None:
            self.after.append(Evaluation(item.step, x, self.rank, item.step))
        return item

    def _line(self, text: str, bar, prev: str, joiner: str, prev_part: bool):
        """What ``text`` (the line, a bar's count read and the bar replaced by its postfix) is, when it holds no
        trainer message: a record, a report or a skip reason (see the module docstring)."""
        if bar is None and self.fast:
            shape = _SHAPES.get(text.translate(_ZEROS))
            if shape is not None and shape[2] is not None:
                rec = self._plain(shape[2], text)
                if rec is not None:
                    return rec
        if "Namespace(" in text and _NAMESPACE.search(text) is not None:
            return HEADER  # the run's arguments, as argparse prints them: settings, no step's values
        summary, found = self._read(_dict(text), bar is None, not self.numbered and not self.named_loss)
        self.named_loss = self.named_loss or any(p[0] == "loss" and p[3] != PPL for p in found)
        evaluation = self._evaluation(text) if summary or _evaluating(text) else None
        if evaluation is None:
            return self._values(text, bar, prev, joiner, prev_part, summary, found)
        carries = self._carries(found, text)
        if self.plain and not carries:
            return self._values(text, bar, prev, joiner, prev_part, summary, found) if self._again() else evaluation
        item = self._values(text, bar, prev, joiner, prev_part, summary, found)
        if item.__class__ is not StepRecord:
            return item if self._again() else evaluation
        if carries:  # the last evaluation's loss, printed on each step line since (Lightning's progress metrics)
            if self.carried == evaluation.loss:
                return item
            self.carried = evaluation.loss
        elif evaluation.named is None:  # the evaluation of the step line's own step
            evaluation = evaluation._replace(step=item.step)
        self.evaluated = self.trained + 1  # (this line's record counts once it is handed on)
        self.after.append(evaluation)
        self.found = True  # a loss at a step, if only an evaluation's: a log of evaluation lines is a training log
        return item

    def _carries(self, found: list, text: str) -> bool:
        """The line ``text`` of named values ``found`` is a step line of this log that carries evaluation values:
        its other fields are those of the last step line without any, a training loss and more than a counter
        beside it (NeMo's and Lightning's step lines print the last validation's ``val_loss`` from the first
        validation on), or a loss and a counter alone when no evaluation value is a loss (IML-ViT's per-epoch
        ``{"train_predict_loss": .., "test_average_f1": .., "epoch": 4}`` on the epochs it evaluated). A counter,
        a training loss and an evaluation loss, ``step 500: train loss 2.1, val loss 2.3``, is an evaluation
        (nanoGPT's estimate over both splits)."""
        fields = self.plain_fields
        return ("loss" in fields and frozenset(f[0] for f in found if f[0] != EVAL) == fields
                and (len(fields) > 2 or len(fields) == 2 and _EVAL_LOSS.search(text) is None))

    def _again(self) -> bool:
        """An evaluation line read now repeats the evaluation read last: no step line came between them (in a log
        that has step lines; a log of evaluations alone has each once). One
        evaluation printed twice, the first line's kept: MindSpore's ``LossMonitor`` prints ``Model.fit``'s metrics
        (``Eval result: epoch 4, metrics: {'Loss': ..}``) and scripts print the results themselves, with the
        ``eval_loss``; two sets evaluated at once (Megatron's val and test data at the end) are no one series
        either."""
        again, self.evaluated = self.trained > 0 and self.evaluated == self.trained, self.trained
        return again

    def _values(self, text: str, bar, prev: str, joiner: str, prev_part: bool, summary: bool, found: list):
        """What the line of named values ``found`` is (see :meth:`_line`; ``summary``: it has evaluation
        values): a record, a report or a skip reason."""
        if not found:
            if self.table is None and bar is None and self._table(text, None) is HEADER:
                return HEADER  # behind a logger's date, whose digits are no row's
            if bar is None and not self.plain and (m := _bare(text)) is not None and (
                    int(m[1]) > self.step or self.last is None):  # (the first may count from 0)
                self.numbered = self.found = True  # a log of bare (step, loss) pairs
                return self._step_line(int(m[1]), {"loss": (_value(m[2]), None, None)})
            if bar is None and not self.plain and (row := _row(text)) is not None:
                epoch, within, total, loss = row  # the epoch, and the batch's count within it
                self.numbered = self.found = True
                at = epoch if within is None else self._global(epoch, within, total)
                return self._step_line(at, {"loss": (_value(loss), None, None)})
            if self.plain and _evaluating(text):
                return SUMMARY
            if bar is not None:
                return self._counted(bar)
            if ("/" not in text or not self.numbered or _count(text, None) is None) and (
                    bar is not None or self.leading is False or _leading(text) is None):
                return self._complete(prev, joiner, text) if prev_part else NO_STEP
        if summary and self.plain and not self._carries(found, text):
            return SUMMARY  # evaluation values, in a log whose step lines have none
        names = {f[0] for f in found}
        if not summary and not names <= {"epoch", "step"} and names & {"epoch", "step", "loss"}:  # (a counter or
            self.plain = True  # a time alone: none; `Loading model cost 0.644 seconds.`)
            if any(f[0] == "loss" for f in found):
                self.plain_fields = frozenset(f[0] for f in found)
        values, self.fraction = {}, None
        try:
            for field, val, tot, unit in found:
                if field not in values and (field != "epoch" or val.isdigit()):  # 'epoch': 0.28 counts no epoch
                    values[field] = (_value(val), tot, unit)
                elif field == "epoch" and self.fraction is None:
                    self.fraction = _value(val)  # ... it is the run's progress in epochs
        except ValueError:
            return NUMBER
        leading = self.leading
        self.losses = self.losses or "loss" in values
        step = self._step(values, text, bar)
        if step is not None and self.fraction is not None and self.fraction > 0:
            self.progress = (step, self.fraction)
        if summary and leading is None:
            self.leading = None  # an evaluation line naming its step says nothing of how the step lines number theirs
        counter, self.counter = self.counter, None
        if step is None and counter is not None and counter[2] == prev and (
                self.last is None or counter[1] > self.last.step):
            if "loss" in values:
                return self._line(counter[0] + " " + text, bar, prev, joiner, prev_part)  # a block under its counter
            if "epoch" not in values and len(counter[0]) < _BLOCK_CHARS:  # a line before its loss's (the time)
                self.counter = (counter[0] + " " + text, counter[1], text)
                return MERGED
        if step is None and "loss" in values and _EVAL_HEADING.fullmatch(prev, _prefix_end(prev)) and (
                not _EVAL_START.match(text, _prefix_end(text))):
            return self._line(prev.rstrip() + " " + text.lstrip(), bar, prev, joiner, prev_part)  # under its heading
        if step is None and "span_s" in values:
            self.ended = True  # an epoch's time
        if step is None and "epoch" in values and "loss" not in values:
            self.counter = (text, int(values["epoch"][0]), text)
            self.bar_epoch = self.counter[1]
        low = text.lower() if "erminat" in text else ""
        if "terminat" in low and ("nan" in low or "inf" in low or "invalid loss" in low):
            self.found = True
            at = self.step if step is None else step
            return Report("nan_inf", at, math.nan, f"trainer: loss is NaN or Inf at step {at}, training terminated",
                          self.rank)
        if step is None and self.payload and "loss" in values:
            return MERGED  # the losses a NaN report prints after it (detectron2's `loss_dict = {..}`): the report's
        if step is None:
            return self._unnumbered(values, prev, joiner, text, prev_part)
        if bar is not None and "step" not in values and bar.re is _BAR:  # (tqdm's; Keras' bar draws once)
            return self._drawn(step, values, prev_part)
        self.drawn = None
        last = self.last
        if (prev_part and not self.named and last is not None and step > last.step and "loss" not in values
                and self._completes(values, step)):
            last.step, self.named = step, True  # the line before, numbered by its position: this step's record,
            return self._fill(values)           # cut before its step (insightface's `Loss nan ..` / `Global Step: 20`)
        return self._step_line(step, values)

    def _completes(self, values: dict, step: int) -> bool:
        """``values`` hold record fields, and only ones the last record lacks: a later line of that record."""
        fields = self._fields(values, step)
        return bool(fields) and all(getattr(self.last, k) is None for k in fields if k != "rank")

    def _counted(self, bar: re.Match):
        """A training bar with nothing after it (no postfix) and no words before it (the Hugging Face Trainer's;
        YOLOv5's, after a row of values without its header; a described one, ``Fetching 11 files:``, ``Loading
        checkpoint shards:``, ``Map:``, counts other things), in a log that has shown no step line so far (bars
        pasted alone: the run's progress is all they say): a step record at its count; else a progress bar.

        Its step time is the mean over the steps since the last bar that gave one, from the bars' elapsed times,
        once they differ by :data:`BAR_CLOCK` seconds or more (tqdm prints whole seconds); the records between
        have none. Not the bar's rate: tqdm smooths it (an exponential moving average), so one long pause (an
        evaluation, a checkpoint save) would show as a long slow stretch after it. A bar with no elapsed time, at
        0, or not past the last record's count, is a progress bar."""
        clock = _BAR_ELAPSED.match(bar.group(4) or "")
        if (self.plain or clock is None or int(bar.group(3)) != self.bar_total or bar.group(2) == "0"
                or _LETTER.search(bar.string, 0, bar.start()) is not None):
            return PROGRESS
        step = self._restarted(int(bar.group(2)), bar.group(3))
        if self.last is not None and step <= self.last.step:
            return PROGRESS
        elapsed = int(clock[1] or 0) * 3600 + int(clock[2]) * 60 + int(clock[3])
        values = {}
        since = self.clocked
        if since is None or elapsed < since[1] or step < since[0]:  # the first bar, or a new bar (an epoch's)
            self.clocked = (step, elapsed)
        elif elapsed - since[1] >= BAR_CLOCK:
            values["step_time_s"] = ((elapsed - since[1]) / (step - since[0]), None, "s")
            self.clocked = (step, elapsed)
        self.found = True
        return self._step_line(step, values)

    def _drawn(self, step: int, values: dict, prev_part: bool):
        """A step line counted by a tqdm bar, its postfix the values. tqdm draws a postfix twice, when it is set and
        when the bar then counts the step: after the record's own line, the same values at the next count are
        that record, drawn as the bar counted it (its step becomes the count; merged), and other values at the
        record's count are the next step's (set before the bar counted it)."""
        last, drawn = self.last, self.drawn
        if drawn is not None and last is drawn[0] and prev_part and self.line is not None:
            same = values == self.line[1] or repr(values) == repr(self.line[1])  # (a NaN is not equal to itself)
            if same and (step == last.step or step == last.step + 1 and not drawn[1]):
                if step != last.step:
                    last.step = self.line[0] = self.line_step = step
                    self.drawn = (last, True)
                self.prev_part = True
                return MERGED
            if not same and step == last.step:
                step += 1
        item = self._step_line(step, values)
        self.drawn = (item, False) if item.__class__ is StepRecord else None
        return item

    @staticmethod
    def _read(text: str, reuse: bool, alone: bool = False) -> tuple[bool, list]:
        """``(summary, pairs)`` of a line, through its shape when ``reuse``; ``alone``: see :func:`_summed`."""
        if not reuse:
            summary, found, _ = _reading(text)
            return summary, _summed(found, alone)
        key = text.translate(_ZEROS)
        shape = _SHAPES.get(key)
        if shape is None:
            summary, found, places = _reading(text)
            if len(_SHAPES) >= MAX_SHAPES:  # (shared by every log read in the process: the shapes of the logs
                _SHAPES.clear()               # read before give way to the next log's)
            _SHAPES[key] = (summary, places, _recipe(key, summary, places))
            return summary, _summed(found, alone)
        return shape[0], _summed([(f, v if v.__class__ is str else text[v[0]:v[1]], text[t[0]:t[1]] if t else None, u)
                                  for f, v, t, u in shape[1]], alone)

    def _plain(self, recipe: tuple, text: str) -> StepRecord | None:
        """The record of the step line ``text`` through its shape's ``recipe`` (see :func:`_recipe`), as
        :meth:`_step_line` makes it, when nothing read against the lines before could change it: a record before
        it, of another step, no overflow message since, the loss scale not lower than the line before's; else
        None (the line is read in full)."""
        if not self.batchable():
            return None
        slots, units = recipe
        values, fields = {}, {}
        try:
            for field, place, word, tot, unit, factor in slots:
                v = word if place is None else float(text[place])
                values[field] = (v, text[tot] if tot else None, unit)
                fields[field] = v if factor is None else v * factor
        except ValueError:
            return None  # a number float() does not read (1,234): read in full
        v, total = fields.pop("step"), values["step"][1]
        step = int(v) if v.is_integer() and 0 <= v < 1e15 else -1
        if total is not None and step >= 0:
            step = self._restarted(step, total)
        elif self.bar_epoch is not None:
            if step <= self.step:
                return None  # a count starting again under an `Epoch N` heading: the next epoch's (:meth:`_step`)
            self._global(self.bar_epoch, step, None)  # (no offset is in force: :meth:`batchable`)
        scale = fields.get("loss_scale")
        if step < 0 or step == self.step or scale is not None and self.scale is not None and scale < self.scale:
            return None
        self.numbered, self.leading, self.plain, self.prev_part = True, self.leading is True, True, True
        self.units.update(units)
        gap = step - self.line_step if step > self.line_step else 0
        self.line_step = step
        self.line_named = True
        self.line = [step, values, gap, 0, self.scale, self.skipped_total, self.tokens_total, 0, None,
                     self.time_total]
        if scale is not None:
            self.scale = scale
        if self.overflow_seen:
            fields["overflow"] = False
        self.found = self.found or _measured(fields)
        return self.record(step, **fields)

    # The compiled reader of plain step lines (scan.TextBatch) reads them through their recipes with these.

    def batchable(self) -> bool:
        """Plain step lines may be read through their shape's recipe now (see :meth:`_plain`): a record before
        them that holds more than its step (one that does is replaced by the next record), no overflow message
        pending, and no epoch of a restarted count (:meth:`_restarted`, :meth:`_global`) in force."""
        last = self.last
        return (self.fast and last is not None and not self.taken_over and not self.overflow_lines
                and not (last.loss is None and _empty(last)) and not self.restarts[4] and not self.offset)

    @staticmethod
    def recipe_of(key: str) -> tuple | None:
        """``(lead, shape, recipe)`` of the lines of the raw shape ``key`` (a line as read, without its line end,
        its digits 1-9 as 0s) when such a line, once its first ``lead`` characters (decorations) are off, is of
        the shape ``shape`` read before and ``recipe`` (see :func:`_recipe`) reads it; None when no recipe reads
        such lines, or decorations within them, or a trainer message's mark, would make :meth:`parse` read
        them another way, or they print no step time but a line time (their time: :meth:`_timed`)."""
        if "\x1b" in key or "ensor(" in key:
            return None
        text = _undecorated(key)
        shape = _SHAPES.get(text)
        if shape is None or shape[2] is None or messages.mentioned(text):
            return None
        if all(slot[0] != "step_time_s" for slot in shape[2][0]) and clock.stamped(key):
            return None  # a step line with no step time and a line time: timed by it (_timed), read in full
        return len(key) - len(text), text, shape[2]

    def wraps(self, shape: str) -> bool:
        """A trainer message may run across a hard wrap from the line before into a line of ``shape`` (see
        :meth:`_message`)."""
        prev = "" if self.prev_message else self.prev
        return bool(prev) and (self.mentioned or self.wrapped(prev, shape))

    @staticmethod
    def wrapped(prev: str, shape: str) -> bool:
        """A trainer message's mark may be cut by a hard wrap between the line (or shape) ``prev`` and a line of
        ``shape``, whatever their digits."""
        joined = prev.rstrip()[-24:] + (" " if prev[-1:].isspace() else "") + shape.lstrip()[:24]
        return messages.mentioned(joined.translate(_ZEROS))

    def took(self, count: int, step: int, scale: float | None, recipes: list, line) -> None:
        """Be in the state :meth:`_plain` leaves after ``count`` plain step lines in a row that the compiled reader
        (:class:`.scan.TextBatch`) read through ``recipes`` (in the order of their last use): the last record at
        ``step``, the loss scale ``scale``; ``line(i)``: the i-th line. The next line is one :meth:`_plain` reads
        (which sets :attr:`line`)."""
        self.numbered, self.leading, self.plain, self.prev_part = True, self.leading is True, True, True
        for slots, units in recipes:
            self.units.update(units)
            self.found = self.found or any(slot[0] in _MEASURED for slot in slots)
        self.line_step, self.scale = step, scale
        total, first, _, _, offset = self.restarts
        self.restarts = (total, first, 0, step, offset)  # the count's last value (its stride is the next line's)
        if self.bar_epoch is not None:
            self._global(self.bar_epoch, step, None)  # (the count's highest under its heading's epoch)
        first = max(0, count - 3)  # the heads after the last line depend on its two lines before, no more
        text = self.prev if first == 0 else _undecorated(line(first - 1)).rstrip("\r\n")
        heads = self.heads if first == 0 else _heads([], text, "")
        for i in range(first, count):
            before, text = text, _undecorated(line(i)).rstrip("\r\n")
            heads = _heads(heads, text, " " if before[-1:].isspace() else "")
        self.heads = heads
        self.prev, self.prev_space, self.prev_message, self.mentioned = text, text[-1:].isspace(), False, False
        self.nan_reported = False
        self.stamp, self.paused = (step, line(count - 1)), False  # (as _timed leaves them: these print step times)
        self.deferred = None
        if self.stall is not None:
            (self.silence or self._silence()).took(count, step, line)

    def _evaluation(self, text: str) -> Evaluation | None:
        """The evaluation an evaluation line (a summary) logs: its loss named as an evaluation loss (``val loss
        2.31``, ``'eval_loss': 2.31``, ``Validation loss 8416:  0.711720``: at iteration 8416), else, on a line
        that begins with an evaluation word, the first value it names as a loss (Megatron's ``validation loss at
        iteration 1000 | lm loss value: 6.439325E+00 | lm loss PPL: ..``); at the iteration the name gives,
        else after the last step done. None: no evaluation loss. Judged by the engine (``Engine.evaluate``)."""
        cleaned = clean(text)
        m = _EVAL_LOSS.search(cleaned)
        if m is not None:
            x, named = m.group("val"), m.group("step")
        elif _evaluating(cleaned) or _evaluating(text):
            _, found, _ = _reading(_dict(text))
            x, named = next((v for f, v, *_ in found if f in _LOSSES), None), None
            if x is None:
                return None
        elif not cleaned.isascii():  # evaluation words the patterns do not know (``整体测试集上的Loss: 262.6``)
            x = evaluation_loss({m.group("name"): m.group("val") for m in _WIDE_PAIR.finditer(cleaned)
                                 if lookup(m.group("name")) == (EVAL, None)})
            if x is None:
                return None
            named = None
        else:
            return None
        try:
            loss = float(x)
        except ValueError:
            return None
        named = int(named) if named else None
        return Evaluation(self.done if named is None else named, loss, self.rank, named)

    def _message(self, text: str, prev: str, joiner: str):
        """The trainer message in ``text``, or across the wrap from ``prev`` (the line before, when it held none).
        A message that begins up to two lines before this one, each of them at least :data:`WRAPPED` characters
        long (a paste hard-wrapped at a fixed column), is read whole: the line before may hold the start of
        its message (the rank in ``[..] [Rank 6] ProcessGroupNCCL'`` + ``s watchdog got stuck for 480
        seconds``)."""
        mentioned, self.mentioned = self.mentioned, messages.mentioned(text)
        heads, self.heads = self.heads, []
        item = None
        if self.mentioned:
            if heads:
                item = messages.match("".join(heads) + joiner + text.lstrip(), self)
            if item is None:
                item = messages.match(text, self)
        if item is None and prev:
            head, tail = prev.rstrip(), text.lstrip()
            if mentioned or messages.mentioned(head[-24:] + joiner + tail[:24]):  # a mark cut by the wrap
                item = messages.match(head + joiner + tail, self)
        if item is None:
            self.heads = _heads(heads, text, joiner)
        return item

    def _epoch_record(self, epoch, values: dict) -> bool:
        """``values`` are an epoch's and its time or its evaluation, in a log that has shown no loss: a log of
        epoch times (so-vits-svc's ``====> Epoch: 6020, cost 14.01 s``) or of per-epoch evaluations
        (``Epoch 4: Validation Loss: 0.45``), each line its epoch's record. In a log of losses such a line is an
        evaluation's or a summary's (``Epoch 191: testing psnr = 34.41, .., time: 0.02``)."""
        return epoch is not None and ("step_time_s" in values or EVAL in values) and not self.losses

    def _step(self, values: dict, text: str, bar) -> int | None:
        """The global step of a line, or None when it numbers none. A progress bar at 0 with no postfix values
        numbers no line: values glued after it (a Trainer's ``{'loss': ..}`` printed after the bar's first
        draw, ``0/4245 [00:00<?, ?it/s]{'loss': 2.99, ..}``) are the first logged step's, read as the lines of
        values after it are."""
        epoch, self.epoch_start = values.get("epoch"), False
        run = False
        if "step" in values:
            v, tot, unit = values["step"]
            run = unit is RUN
            if bar is not None and (n := int(bar.group(2))) != v and float(f"{n:.3g}") == v:
                v = float(n)  # a bar's postfix rounds its numbers to 3 digits (tqdm): the bar's count is exact
        elif bar is None and self.leading is not False and (m := _leading(text)) is not None:
            v, tot = float(m[2] or m[1]), None
            epoch = (float(m[1]), None, None) if m[2] else epoch
            self.leading = True
        elif not self.numbered and "loss" not in values and not self._epoch_record(epoch, values):
            return None
        elif bar is not None and (bar.group(2) != "0" or _postfix(bar).strip(" ,")):
            v, tot = float(bar.group(2)), bar.group(3)
            if int(tot) != self.bar_total:
                return None
            if epoch is None and self.bar_epoch is not None:
                epoch = (float(self.bar_epoch), None, None)  # the bar counts the epoch a line named before it
        elif "/" in text and (count := _count(text, epoch)) is not None:
            v, tot = float(count[0]), count[1]
            epoch = (float(count[2]), None, None) if count[2] is not None else epoch
        elif epoch is not None and (self.by_epoch or not self.numbered) and (
                "loss" in values or self._epoch_record(epoch, values)):
            self.by_epoch = True  # nothing finer is counted: the epochs are the steps
            return int(epoch[0]) if epoch[0] < 1e15 else None
        else:
            return None
        if isinstance(v, bool) or not float(v).is_integer() or not 0 <= v < 1e15:  # no step counts that far
            return None
        if self.finished is None:
            self.finished = bar is not None and "step" not in values and epoch is not None and int(tot) == v
            self.bar = 0 if self.finished else self.bar
        if self.finished and epoch is not None:  # one line per epoch, at its finished count (Keras' `9595/9595
            self.by_epoch = self.numbered = True  # [====]` after `Epoch 2/10`): the epochs are the steps
            return int(epoch[0]) if epoch[0] < 1e15 else None
        self.numbered, self.leading = True, self.leading is True
        step = int(v)
        if epoch is not None:
            before, self.counted_epoch = self.counted_epoch, int(epoch[0])
            self.epoch_start = before is not None and self.counted_epoch > before  # (its record: slow_reason "epoch")
            if not run:
                step = self._global(int(epoch[0]), step, int(tot) if tot else None)
                return step if step < 1e15 else None
            if self.base is None:  # (the first epoch seen is still the one later counts within an epoch start from)
                self.base = int(epoch[0])
        elif not tot and not run and self.bar_epoch is not None:
            return self._global(self.bar_epoch, step, None)  # under an `Epoch N` heading (UniMatch's `Iters: 124`)
        return self._restarted(step, tot) if tot else step

    def _restarted(self, step: int, total: str) -> int:
        """The global step of a count ``step`` of ``total`` on a line naming no epoch. A count that starts again
        (back to its first value or below) when its next print would have passed its total is the next epoch's,
        the epochs before it added: MindSpore's and PyTorch's quick start ``loss: 0.58  [  0/938]``, one line every
        100 batches, after ``[900/938]``; so is one not above its first value under a later ``Epoch N`` heading
        than the count's line before (the quick start printing once an epoch: ``[  0/ 60]`` under each), the
        epochs between added. A count falling back anywhere else (a run resumed from a checkpoint)
        is taken as it is. A "total" that grows while the count stays is no total: the pair is an epoch and the
        step within it (WeNet's and CosyVoice's ``TRAIN Batch 0/4000`` then ``0/4100``: epoch 0, batches 4000 and
        4100), from then on; the record before, still to be judged, is renumbered."""
        before, first, prev, last, offset = self.restarts
        if self.epoch_counts:
            return self._global(step, int(total), None)
        if before is not None and total != before and step == last and int(total) > int(before):
            self.epoch_counts = True
            rec = self.last
            if rec is not None and self.line is not None and rec.step == self.line[0] == offset + last:
                rec.step = self.line[0] = self.line_step = self._global(last, int(before), None)
            return self._global(step, int(total), None)
        headed, self.count_epoch = self.count_epoch, self.bar_epoch  # (the heading's epoch at the count's last line)
        if total != before:
            first = prev = last = step
            offset = 0
        elif step <= first and step < last and last + (last - prev) >= int(total):
            offset += int(total)
        elif step <= first and headed is not None and self.bar_epoch is not None and self.bar_epoch > headed:
            offset += int(total) * (self.bar_epoch - headed)
        self.restarts = (total, first, last, step, offset)
        return offset + step

    def _global(self, epoch: int, step: int, per_epoch: int | None) -> int:
        """The global step of the count ``step`` printed with ``epoch`` (of ``per_epoch`` when the count is of a
        total): the epochs since the first one seen times ``per_epoch`` added, unless the count ran on across an
        epoch (higher under the next epoch than under the one before, by no more than it rose between two lines of
        one epoch, or than half of itself before any did: a count of the run's steps, its total the run's; a count
        rising more may be an excerpt's gap, CycleGAN's `step:[ 320/1019]` then `...` then the next epoch's
        `[ 960/1019]`, or a count within each epoch, mmdetection's `Epoch [1][50/5808]` then `Epoch [2][100/5808]`);
        with no total, the epochs' counts seen so far added when the count starts again."""
        if self.base is None:
            self.base = epoch
        if per_epoch:
            before, self.counts = self.counts, (epoch, step, per_epoch)
            if before is None or before[2] != per_epoch:
                pass  # another count (an evaluation's: MMEngine's `Epoch(val) [1][4/4]`), or the first
            elif epoch == before[0] and step > before[1]:
                self.stride = max(self.stride, step - before[1])
            elif epoch < before[0]:
                self.run_count = False  # a new run in the same log
            elif epoch > before[0] and before[1] < step <= before[1] + (self.stride or before[1] // 2):
                self.run_count = True  # (PaddleSeg's `epoch: 81, iter: 39610/120000` after `epoch: 80, iter: 39600`)
            return step if self.run_count else max(0, epoch - self.base) * per_epoch + step
        if self.epoch is None or epoch < self.epoch:  # the first step line, or a new run in the same log
            self.epoch, self.offset, self.top, self.low = epoch, 0, step, step
        elif epoch > self.epoch:
            if step <= self.top:  # counted within the epoch: add the epochs before
                self.offset += (epoch - self.epoch) * (self.top + (1 if self.low == 0 else 0))
            self.epoch, self.top, self.low = epoch, step, step
        elif self.ended and step <= self.low < self.top - step:  # the same epoch again from its start, after its
            self.offset += self.top + (1 if self.low == 0 else 0)  # end: a script's next `Model.train(1, ..)`
            self.top = self.low = step
        self.top, self.low = max(self.top, step), min(self.low, step)
        return self.offset + step

    def _unnumbered(self, values: dict, prev: str, joiner: str, text: str, prev_part: bool):
        """A line of values with no step. Lines each naming one loss of their own (``stage1_pafs_loss: 5.46``, then
        ``stage1_heatmaps_loss: 2.05``), one after the other, are the parts of one record's loss: their sum (as the
        named losses of one line are, :func:`.fields.resolve`)."""
        name = _named_loss(text) if "loss" in values else None
        block, last = self.block, self.last
        if name is not None and block is not None and last is not None and block[0] is last and name not in block[1]:
            block[1].add(name)
            last.loss = (last.loss or 0.0) + values["loss"][0]
            self.prev_part = True
            return MERGED
        item = self._valued(values, prev, joiner, text, prev_part)
        if name is not None:
            rec = item if item.__class__ is StepRecord else last if item == MERGED and last is not None else None
            self.block = (rec, {name}) if rec is not None else None
        return item

    def _valued(self, values: dict, prev: str, joiner: str, text: str, prev_part: bool):
        """What the line of values with no step is (see :meth:`_unnumbered`)."""
        last = self.last
        timed = "loss" not in values and not _THROUGHPUT.isdisjoint(values) and (  # a step's time or rate, no loss
            self.bar > self.step or last is None and ("{'" in text or '{"' in text))
        if ("loss" in values or timed) and not self.numbered:
            self.found = True
            if last is not None and self.bar and self.bar == last.step and last.loss is None:
                return self._fill(values)
            if self.line is not None and values == self.line[1] and last is not None and last.step == self.line[0]:
                return DUPLICATE  # the line before again, no step named: a copy (another node's), not a step
            rec = self._step_line(self.bar if self.bar > self.step else self.step + 1, values)
            if not self.named and self.bar <= self.step:
                self.placing = rec  # numbered by its position: the log names no step
            return rec
        if last is None:
            return NO_STEP
        if "(*" in text and (m := _WEIGHTED.search(text)) is not None and not _EVAL_WORD.search(text, 0, m.start()):
            return self._term(float(m[1]))
        if (self.progress is not None and self.fraction is not None and "loss" in values and self.line is not None
                and values.keys() == self.line[1].keys()):
            step, fraction = self.progress  # a step line but for its step (a bar drawn over, the Trainer's dict
            at = round(self.fraction * step / fraction)  # left): at its progress, in the steps per epoch seen
            if at > last.step:
                return self._step_line(at, values)
        if "loss" in values and last.loss is not None:  # a second loss for the step: an average, a summary
            v = values["loss"][0]
            # not finite: an average over steps one of which had a non-finite loss (a test net's is the evaluation's)
            if v.__class__ is float and v - v != 0 and not _EVAL_WORD.search(text):
                self.found = True
                return self.once(Report("nan_inf", self.done, v, f"trainer: a summary's loss is {v} after step "
                                        f"{self.done} (a step it averages had a non-finite loss)", self.rank))
            return SUMMARY
        if prev_part:
            return self._complete(prev, joiner, text)
        return self._fill(values)

    def _term(self, x: float) -> str:
        """A loss term of the last step, Caffe's weighted net output (``Train net output #0: loss = 6.90776 (* 1 =
        6.90776 loss)``, ``solver.cpp``): the step's loss is the sum of its terms, which replaces the loss its step
        line printed (Caffe's ``Iteration N .., loss = X`` is smoothed over the solver's ``average_loss``
        iterations)."""
        last = self.last
        assert last is not None  # (a line of values with no step comes after a record)
        last.loss = x if self.terms != last.step or last.loss is None else last.loss + x
        self.terms, self.found = last.step, True
        return MERGED

    def _complete(self, prev: str, joiner: str, text: str):
        """A line after a record's own line: read it joined to the lines before (a hard wrap). Joined with no
        space and with one, the reading that names more fields wins (a wrap cut in a word or number, or at a
        space that was lost); on a tie, without a space unless the line before ends in one. A line's logger
        prefix (:data:`_PREFIX`: a line of a record printed over several log calls) is left out. A line that names
        its own step or epoch and a value the step line gave already is a line of its own (an evaluation's, an
        epoch's summary: ``Epoch 191: testing psnr = 34.41, .., time: 0.02``), no part of the record."""
        if self.last is None:
            return NO_STEP
        head, tail = prev.rstrip(), text[_prefix_end(text):].lstrip()
        best: tuple[str, list] | None = None
        for sep in (joiner, " " if joiner == "" else ""):
            found = pairs(clean(head + sep + tail), len(head))
            if best is None or len(found) > len(best[1]):
                best = (sep, found)
        assert best is not None  # the loop ran
        joined = head + best[0] + tail
        self.prev, self.prev_part = joined[-400:], True  # the record's text goes on
        values = {}
        try:
            for field, val, tot, unit in best[1]:
                if field in _READ or field == "span_s":  # (an epoch's time: the steps of its record, _derive)
                    values[field] = (_value(val), tot, unit)
        except ValueError:
            return NUMBER
        if not values:
            return NO_STEP
        if self.line is None or self.line[0] != self.last.step:
            return self._fill(values)
        if not self.line[1].keys().isdisjoint(values) and any(p[0] in COUNTERS for p in best[1]):
            return NO_STEP
        self.line[1] = {**self.line[1], **values}  # the step line's values, completed: read again
        derived = self._derive(*self.line)
        if derived.__class__ is Report:
            return derived
        fields, self.last.steps = derived
        for key, value in fields.items():
            setattr(self.last, key, value)
        return MERGED

    def _fill(self, values: dict) -> str:
        """Add ``values`` to the last record (a later line says more: its values win); the line counts as merged."""
        assert self.last is not None  # a line completes a record only after one
        fields = self._fields(values, self.last.step)
        if not fields:
            return NO_STEP
        fields.pop("rank", None)  # a line completing a record does not move it to another rank
        self.merge(**fields)
        self.found = self.found or _measured(fields)
        self.prev_part = True
        return MERGED

    def _fields(self, values: dict, step: int) -> dict:
        """StepRecord fields from a line's values."""
        out: dict = {}
        for key in _RECORDED:
            if key not in values:
                continue
            v, total, unit = values[key]
            if key == "overflow":
                out[key] = bool(v)
                continue
            if isinstance(v, bool):
                continue
            if key in _TIMES:
                if total is not None:
                    continue  # a count of a total (`data 2/10`) is no time
                if unit in TIME_UNITS:
                    self.units[key] = unit
                unit = unit or self.units.get(key, "s")  # printed without its unit: the one the log gave it
                v = v * TIME_UNITS[unit] if unit in TIME_UNITS else None
            elif key == "mfu":
                v = v / 100.0 if unit == "%" or v > 1 else v
                v = v if v >= 0 else None  # nanoGPT prints -100% until it has measured
            elif key in ("tokens", "samples"):
                v = int(v) if 0 <= v < math.inf else None
            out[key] = v
        rate = values.get("step_rate", (None,))[0]
        if "step_time_s" not in out and rate.__class__ is float and 0 < rate < math.inf:
            out["step_time_s"] = 1.0 / rate  # steps/s: the steps' mean time
        span, _, unit = values.get("span_s", (None, None, None))
        if "step_time_s" not in out and self.by_epoch and span.__class__ is float and 0 <= span < math.inf:
            out["step_time_s"] = span * TIME_UNITS.get(unit or "s", 1.0)  # one record an epoch: its time is the step's
        rank = values.get("rank", (None,))[0]
        if rank.__class__ is float and rank.is_integer() and 0 <= rank < 1e9:
            out["rank"] = int(rank)  # the line names its rank (a JSONL log of every rank): the record is that rank's
        time = out.get("step_time_s", self.last.step_time_s if self.last is not None and
                       self.last.step == step else None)
        for rate, count in _RATES:
            if rate in values and not isinstance(values[rate][0], bool):
                n = values[rate][0] * time if time else math.nan
                if 0 <= n < math.inf:
                    out[count] = round(n)  # (the printed rate is rounded: 288.92134 samples/s x 5.39939 s)
        wait = out.get("data_wait_s")
        if "step_time_s" in values and wait is not None and time is not None and 0 <= wait <= time:
            out["step_time_s"] = time - wait  # the printed step time includes its data time (see .fields)
        return out

    def _step_line(self, step: int, values: dict):
        last = self.last
        if _READ.isdisjoint(values):
            if last is not None and step <= last.step:
                return NO_LOSS  # a step named again ("saving checkpoint at iteration 5000")
        if (last is not None and step == last.step and not self.taken_over and self.line is not None
                and self.line[0] == step and self._completes(values, step)):
            return self._fill(values)  # a second line of the step (its time after its loss): completes it
        twin = (last is not None and step == last.step and self.line is not None and self.line[0] == step
                and "loss" in values and _printed_alike(values["loss"][0], last.loss))
        gap = step - self.line_step if step > self.line_step else 0
        self.line_step = step
        takes = self.taken_over and last is not None and (self.guessed or last.step == step
                                                          or last.step < step and not self.counted)
        overflows, self.overflow_lines = self.overflow_lines, 0
        separate, self.overflow_records = self.overflow_records - takes, 0  # records of their own (not taken over)
        announced = None  # the scale the overflow message taken over announced
        if takes and last is not None:
            announced = last.loss_scale_next if last.loss_scale_next is not None else last.loss_scale
        self.line_named = self.numbered
        self.line = [step, values, gap, overflows, self.scale, self.skipped_total, self.tokens_total, separate,
                     announced, self.time_total]
        derived = self._derive(*self.line)
        if derived.__class__ is Report:
            return derived
        fields, steps = derived
        rank = fields.pop("rank", None)
        rec = self.record(step, steps=steps, **fields)
        if self.epoch_start:  # the first step of an epoch counted within its epoch waits for the epoch's end and
            rec.slow_reason, self.epoch_start = "epoch", False  # its loader's restart, as the live callback marks
        if rank is not None:
            rec.rank = rank
        if takes:
            assert last is not None
            rec.overflow = rec.overflow if "overflow" in values else True
            if rec.loss_scale is None:
                rec.loss_scale, rec.loss_scale_next = last.loss_scale, last.loss_scale_next
            rec.overflow_applied = last.overflow_applied
            self.absorbs = True
        if last is not None and _empty(last) and not _empty(rec):
            self.absorbs = True  # the step named alone ('Recording summary at step 0', a header's '1 epoch = ..')
        elif _empty(rec) and not self.named and self.block is not None and self.block[0] is last and len(
                self.block[1]) > 1:
            self.absorbs = True  # a block's parts before the first block's step line: the end of a block cut off
        self.taken_over = self.guessed = False
        self.prev_part = True
        if twin and last is not None and rec.rank == last.rank:
            # the step reported again by another logger (DeepSpeed's `steps: 95 loss: 7.7908`, then Megatron's
            # `iteration 95 | .. lm loss: 7.790812E+00`): one record, the later line's values winning
            return self.merge(**{key: getattr(rec, key) for key in FIELDS if key != "step"})
        return rec

    def _derive(self, step, values, gap, overflows, scale_before, skipped_before, tokens_before, separate=0,
                announced=None, time_before=None):
        """``(record fields, steps)`` of a step line's ``values`` (or a ``nan_inf`` report), given the line before
        (its step ``gap`` ago, its loss scale, running skipped, token and time totals), the overflow messages since and
        how many of them are records of their own (``separate``); keeps those totals for the next line. The scale
        an overflow message taken into this record ``announced`` (apex's ``reducing loss scale to 65536.0``) is
        the one the next line is compared with, when lower than the printed one: a fall to it is that
        overflow's halving, not another overflow. A count
        that is not a finite number >= 0 is left out. The steps that overflowed since the record before
        (``overflows``) are counted from Megatron's skipped iterations of the interval, DeepSpeed's running
        ``skipped`` (since the line before that gave it, or the run's start; less the messages' own records) or an
        ``overflow`` printed as a share of the steps since the line before (a log that prints a fraction there:
        its 0 and 1 are shares too)."""
        values = {k: v for k, v in values.items()
                  if k not in _COUNTED or v[0].__class__ is float and 0 <= v[0] < math.inf}
        fields = self._fields(values, step)
        scale = fields.get("loss_scale")
        fell = scale is not None and scale_before is not None and scale < scale_before
        self.scale = scale if scale is not None else scale_before
        if announced is not None and self.scale is not None and announced < self.scale:
            self.scale = announced
        steps = 1
        span, time = values.get("span_s"), fields.get("step_time_s")
        if self.by_epoch and span is not None and span[2] in TIME_UNITS and time and span[0].__class__ is float:
            steps = max(1, round(span[0] * TIME_UNITS[span[2]] / time))  # an epoch's line: its time / the per-step time
        if "skipped" in values or "nan_iterations" in values:  # the line stands for its interval
            steps = gap or 1
            nan = values.get("nan_iterations", (0,))[0]
            if nan:
                self.found = True
                return Report("nan_inf", step, math.nan, f"trainer: {int(nan)} iteration(s) with a NaN/Inf loss "
                                                         f"among the {gap or '?'} up to iteration {step} (skipped)",
                              self.rank)
            skipped = int(values.get("skipped", (0,))[0])
            if "skipped" in values and gap and (skipped or not (fell or overflows)):  # (Megatron-DeepSpeed: 0,
                fields["overflows"] = min(skipped, gap)  # DeepSpeed skips, its messages and the scale tell)
            if skipped > 0 and (gap == 0 or skipped >= gap):
                fields["loss"], fields["overflow"] = None, True  # the printed loss is 0: nothing trained
            else:
                if "loss" not in fields and "nan_iterations" in values:
                    fields["loss"] = math.nan  # Megatron leaves out an average that is NaN
                if "overflow" not in fields:
                    fields["overflow"] = None if skipped or fell or overflows or "skipped" not in values else False
        elif "skipped_total" in values:
            total = int(values["skipped_total"][0])
            if "overflow" not in fields:
                # (a count at step 0, DeepSpeed's `step=0, skipped=0` before its first step, counts no step done)
                fields["overflow"] = None if total != (skipped_before or 0) or fell or not step else False
            if gap and (self.skipped_step == step - gap if skipped_before is not None else gap == step) and (
                    total != (skipped_before or 0) or not fell):
                fields["overflows"] = max(0, min(total - (skipped_before or 0) - separate, gap))
            self.skipped_total, self.skipped_step = total, step
        elif (share := values.get("overflow", (None,))[0]).__class__ is float and 0 <= share <= 1 and (
                self.shares or 0 < share < 1):
            self.shares = True  # a share of the steps since the line before (an average of the step's flags)
            fields["overflow"] = share == 1 if share in (0, 1) and not (share == 0 and fell) else None
            if gap and (share or not fell):
                fields["overflows"] = round(share * gap)
        elif fell and "overflow" not in fields:
            fields["overflow"] = None
        elif self.overflow_seen and "overflow" not in fields and not overflows:
            fields["overflow"] = False  # the log prints its overflows (a message each): a step without one is clean
        if "tokens_total" in values:
            total = values["tokens_total"][0]
            if tokens_before is not None and total > tokens_before and gap:  # exact, where a rate x time is
                fields["tokens"] = int((total - tokens_before) / gap)        # rounded (and may be per device)
            self.tokens_total = total
        if "time_total" in values:
            v, _, unit = values["time_total"]
            total = v * TIME_UNITS.get(unit or "s", 1.0)
            if time_before is not None and total > time_before and gap and "step_time_s" not in fields:
                fields["step_time_s"] = (total - time_before) / gap
            self.time_total = total
        self.found = self.found or _measured(fields)
        return fields, steps


def detect(line: str) -> bool:
    """True when ``line`` names a step and a loss."""
    return "loss" in line.lower() and {"step", "loss"} <= {f[0] for f in Parser._read(_undecorated(line), True)[1]}
