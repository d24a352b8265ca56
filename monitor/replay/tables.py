"""Column tables in a text log: a header line of names, then rows of values aligned under them, one row per step
line (YOLOv5's and Ultralytics' epoch tables, each row a tqdm bar's description)::

          Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size
          21/55      9.95G    -0.2338       5.07      2.977         12        640: 100%|██████████| 787/787 [..]

A **header** is a line of at least three names laid out in columns (``|``- or tab-separated, as Hugging Face's
notebook table ``Step | Training Loss | Validation Loss``, else two spaces apart somewhere), none of them a number,
among them a counter (a name the alias table, :mod:`.fields`, reads as the step or the epoch) and a loss
(``box_loss``, YOLOv5's ``box``, ``obj``, ``cls``); it replaces the table before it. A **row** has as many cells as
its header has columns, its counter cell a count (``21/55``, ``3``) and every cell the header names a number
(``nan`` too; a time column's a clock, ``[h:]mm:ss``, as fastai's ``time`` column ``02:49``, in seconds); the other
cells (``9.95G``, ``640``) are left as they are. In a ``|``- or tab-separated table, text before the first cell
that the header's line has before its first name too is no part of the cell (a logger's prefix: casanovo's
``[casanovo/MainProcess] model._log_history : Step``, tabs, ``Train loss``, ``Valid loss``, then its rows
``.. : 20000``, ``nan``, ``1.594399``). A row whose loss cells are all ``nan`` while an evaluation cell is a
number is the evaluation's alone (its loss cells are placeholders), and the other way round. The row ends where
its bar starts, a whole one or one cut short
(``640: 100%|███``, the count and timing lost to a terminal's width or a poster's cut; in a table not
``|``-separated). Other lines, the validation tables between the rows (``Class Images Instances Box(P R mAP50
mAP50-95)``, whose rows count nothing), are no rows of it. A row's named values are the line's: its losses one
line's (:func:`.fields.resolve`: several named parts are summed, a NaN in any one is the sum's), its step found as
any step line's (:mod:`.text`: the epoch from the counter, the bar's count within it); its evaluation columns' loss
(``Validation Loss``) an evaluation at its step.
"""
from __future__ import annotations

import re

from .fields import COUNTERS, EVAL, LOSS_AVERAGE, LOSS_OTHER, NO_FIELD, lookup, resolve

_CELL = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?[KMGT]?%?|(?i:[-+]?nan|[-+]?inf)")
_COUNT = re.compile(r"(\d+)(?:/(\d+))?")
# a duration written as a clock, ``[h:]mm:ss`` (fastai's ``time`` column, ``00:21``, ``1:12:49``)
_CLOCK = re.compile(r"(?:(\d+):)?(\d{1,2}):(\d{2})")
_LOSSES = frozenset(("loss", LOSS_OTHER, LOSS_AVERAGE))
_APART = re.compile(r"\s{2,}")
# a tqdm bar cut short at the line's end, its count and timing lost (a terminal's width, a poster's cut):
# ``640: 100%|███``
_CUT_BAR = re.compile(r"\s*\d{1,3}%\|[^|]*$")


def _cells(line: str, sep: str | None) -> list[str]:
    """The cells of a table's line: ``sep``-separated (``|``, a tab; a Markdown row's outer bars dropped), else
    whitespace-separated."""
    if sep is None:
        return line.split()
    cells = [c.strip() for c in line.strip().split(sep)]
    return cells[1:-1] if sep == "|" and len(cells) > 2 and not cells[0] and not cells[-1] else cells


def header(line: str) -> tuple | None:
    """``(separator, columns, lead)`` of a table header, each column ``(name, (field, unit) or None)``, ``lead`` the
    text before its first name's last word in a separated table, else "" (see the module docstring), or None when
    ``line`` is no header of a table with a counter and a loss."""
    sep = "|" if "|" in line else "\t" if "\t" in line else None
    names = _cells(line, sep) if sep is not None else _APART.split(line.strip())
    if len(names) < 3 or sep is None and "  " not in line.strip() or any(_CELL.fullmatch(n) for n in names):
        return None
    columns = tuple((n, lookup(n.rstrip(":"))) for n in names)
    fields = {c[1][0] for c in columns if c[1] is not None}
    if not fields & COUNTERS or not fields & _LOSSES:
        return None
    lead = names[0].rsplit(None, 1)
    return sep, columns, lead[0] if sep is not None and len(lead) == 2 else ""


def row(table: tuple, line: str) -> tuple[list, dict] | None:
    """``(found, evaluations)`` of ``line`` when it is a row of ``table`` (:func:`header`'s), else None: ``found``
    the ``(field, value, total, unit)`` of each cell the table names, the line's loss chosen (as
    :func:`.text.pairs` gives a line's); ``evaluations`` the evaluation columns' values by name
    (``Validation Loss``)."""
    sep, columns, lead = table
    cells = _cells((line if sep == "|" else _CUT_BAR.sub("", line)).rstrip().rstrip(":"), sep)
    if len(cells) != len(columns):
        return None
    if lead and cells[0].startswith(lead):
        cells[0] = cells[0][len(lead):].lstrip()  # the text before the table the header's line has too
    found, evaluations = [], {}
    for (name, column), cell in zip(columns, cells):
        if column is None:
            continue
        field, unit = column
        if field in COUNTERS:
            m = _COUNT.fullmatch(cell)
            if m is None:
                return None
            found.append((field, m.group(1), m.group(2), unit))
        elif field == "step_time_s" and (clock := _CLOCK.fullmatch(cell)):
            found.append((field, str(int(clock[1] or 0) * 3600 + int(clock[2]) * 60 + int(clock[3])), None, "s"))
        elif not _CELL.fullmatch(cell):
            return None
        elif field == EVAL:
            evaluations[name] = cell
        else:
            found.append((field, cell, None, unit))
    losses = [f[1] for f in found if f[0] in _LOSSES]
    if losses and evaluations and (lost := _absent(losses)) != _absent(evaluations.values()):
        if lost:  # a row of the evaluation's alone: its loss cells are placeholders
            found = [f for f in found if f[0] not in _LOSSES]
        else:  # a row of the training's alone
            evaluations = {}
    names = resolve([f for f, *_ in found])
    return [(n, *rest) for n, (_, *rest) in zip(names, found) if n not in NO_FIELD], evaluations


def _absent(cells) -> bool:
    """Every cell of ``cells`` is ``nan``."""
    return all(c.lstrip("+-").lower() == "nan" for c in cells)
