"""The rollback policy on its own: what ``decide`` returns step by step, and what it is told back."""
import math

from training_monitor.events import Event
from training_monitor.ledger import HEALTHY, QUARANTINED, Ledger
from training_monitor.policy import RollbackPolicy, RollbackSettings


def nan(step, onset=None, actions=("alert", "rollback")):
    return Event("nan_inf", step, step if onset is None else onset, math.nan, "critical", "loss is nan",
                 actions=list(actions))


def run(policy, steps, events=None, saved=None):
    """Decide ``steps`` in order, adding a checkpoint to the ledger when one is due; return the decisions."""
    out = []
    for step in steps:
        d = policy.decide(step, (events or {}).get(step, []))
        if d.save:
            policy.ledger.add(step, f"step {step}")
            if saved is not None:
                saved.append(step)
        out.append(d)
    return out


def test_clean_steps_save_every_n_and_promote_after_healthy_after():
    policy = RollbackPolicy(Ledger(None, 5), RollbackSettings(checkpoint_every=10, healthy_after=5))
    saved = []
    decisions = run(policy, range(1, 26), saved=saved)
    assert saved == [10, 20]
    assert [(d.step, [e.step for e in d.promoted]) for d in decisions if d.promoted] == [(15, [10]), (25, [20])]
    assert all(d.onset is None and not d.rollback and d.stop is None for d in decisions)
    assert policy.due == 30  # the next save (20 is healthy already)


def test_a_rollback_goes_to_the_newest_healthy_checkpoint_before_onset_minus_margin_and_compounds_the_lr():
    settings = RollbackSettings(checkpoint_every=10, healthy_after=5, rollback_margin=3, lr_factor=0.5)
    policy = RollbackPolicy(Ledger(None, 5), settings)
    run(policy, range(1, 33))  # 10, 20 healthy; 30 pending
    d = policy.decide(33, [nan(33, onset=22)])
    assert (d.onset, d.rollback, d.target.step, d.lr_multiplier, d.rules) == (22, True, 10, 0.5, ["nan_inf"])
    # 30 pending; 20 promoted at 25 on steps 21-25 that the excursion (onset 22) is among: neither proven
    assert [e.step for e in d.quarantined] == [20, 30]
    assert policy.rollbacks == []  # decided, not done: the caller reports it
    rb = policy.rolled_back(d, rewound=True, checkpoint="step 10")
    assert rb == {"at_step": 33, "onset_step": 22, "to_step": 10, "lr_multiplier": 0.5, "rules": ["nan_inf"],
                  "checkpoint": "step 10"}
    run(policy, range(11, 30))  # the run goes on from the checkpoint's step: 20 saved again, healthy at 25
    d = policy.decide(30, [nan(30)])
    assert (d.target.step, d.lr_multiplier) == (20, 0.25)


def test_the_budget_stops_the_run_and_then_nothing_is_decided():
    policy = RollbackPolicy(Ledger(None, 2), RollbackSettings(checkpoint_every=5, healthy_after=2, max_rollbacks=1))
    run(policy, range(1, 9))
    policy.rolled_back(policy.decide(9, [nan(9)]), rewound=True)
    policy.decide(6, [], went_back=True)
    d = policy.decide(7, [nan(7)])
    assert not d.rollback and d.stop.startswith("rollback budget exhausted: 1 rollbacks done (max_rollbacks=1)")
    assert policy.stop == {"at_step": 7, "reason": d.stop}
    later = policy.decide(10, [nan(10)])
    assert (later.save, later.onset, later.rollback, later.stop) == (False, None, False, None)


def test_the_budget_s_stop_names_the_rollbacks_before_and_an_anomaly_that_comes_back_where_it_was():
    # an LR schedule that surges at step 30 (or bad data there): each rollback replays the steps to it, on a lower
    # LR, and the anomaly comes back at the same step until the budget stops the run
    settings = RollbackSettings(checkpoint_every=10, healthy_after=5, max_rollbacks=2)
    policy = RollbackPolicy(Ledger(None, 3), settings)
    run(policy, range(1, 30))
    for _ in range(2):
        policy.rolled_back(policy.decide(30, [nan(30)]), rewound=True)
        policy.decide(21, [], went_back=True)
        run(policy, range(22, 30))
    d = policy.decide(30, [nan(30)])
    assert d.stop == ("rollback budget exhausted: 2 rollbacks done (max_rollbacks=2); anomaly at step 30 (nan_inf, "
                      "onset 30); the rollbacks before: onset 30 (nan_inf); onset 30 (nan_inf); the anomaly came "
                      "back at the same steps at each lower LR (now x0.25): it follows the run's path, its LR "
                      "schedule or the data at those steps, which a rollback replays")
    # anomalies far apart are named, with no such reading
    policy = RollbackPolicy(Ledger(None, 3), settings)
    run(policy, range(1, 30))
    policy.rolled_back(policy.decide(30, [nan(30)]), rewound=True)
    policy.decide(21, [], went_back=True)
    run(policy, range(22, 70))
    policy.rolled_back(policy.decide(70, [nan(70)]), rewound=True)
    policy.decide(61, [], went_back=True)
    run(policy, range(62, 90))
    d = policy.decide(90, [nan(90)])
    assert d.stop.endswith("anomaly at step 90 (nan_inf, onset 90); the rollbacks before: onset 30 (nan_inf); "
                           "onset 70 (nan_inf)")


def test_the_same_excursion_again_asks_for_no_second_rollback_until_the_run_goes_back():
    policy = RollbackPolicy(Ledger(None, 2), RollbackSettings(checkpoint_every=5, healthy_after=2))
    run(policy, range(1, 13))
    first = policy.decide(13, [nan(13)])
    policy.rolled_back(first)  # not rewound: a log of a run that did not roll back goes on
    again = policy.decide(14, [nan(14, onset=13)])
    assert again.onset == 13 and not again.rollback and not again.quarantined
    # a later onset within healthy_after (2) steps of the excursion's last event: it goes on (a loss still up
    # fires again after the rule's cooldown)
    same = policy.decide(16, [nan(16)])
    assert same.onset == 16 and not same.rollback
    run(policy, range(17, 20))
    new = policy.decide(20, [nan(20)])  # after healthy_after steps with no event: a new excursion
    assert new.rollback
    back = policy.decide(11, [nan(11, onset=9)], went_back=True)
    assert back.rollback and back.target.step == 5


def test_rollback_off_quarantines_and_decides_no_rollback():
    policy = RollbackPolicy(Ledger(None, 2), RollbackSettings(checkpoint_every=5, healthy_after=2), rollback=False)
    run(policy, range(1, 13))
    d = policy.decide(13, [nan(13, onset=8)])
    assert d.onset == 8 and not d.rollback and d.stop is None and d.target is None
    assert [e.status for e in policy.ledger.entries] == [HEALTHY, QUARANTINED]


def test_a_target_that_fails_to_load_gives_the_next_one_then_the_failure_stops_or_continues():
    for on_failed, stops in (("stop", True), ("continue", False)):
        policy = RollbackPolicy(Ledger(None, 2), RollbackSettings(checkpoint_every=5, healthy_after=2),
                                on_failed_rollback=on_failed)
        run(policy, range(1, 13))
        d = policy.decide(13, [nan(13)])
        assert d.target.step == 10
        assert policy.next_target(d, "failed to load: truncated").step == 5 and d.target.step == 5
        assert policy.next_target(d, "failed to load: truncated") is None
        assert [e.reason for e in policy.ledger.entries] == ["failed to load: truncated"] * 2
        assert policy.failed(d, "no loadable healthy checkpoint before step 13") is stops
        assert d.stop == ("rollback failed at step 13: no loadable healthy checkpoint before step 13" if stops
                          else None)
        assert policy.rollbacks == [] and (policy.stop is not None) is stops


def test_stop_and_skip_batches_actions_and_the_hook_before_a_target():
    calls = []
    policy = RollbackPolicy(Ledger(None, 2), RollbackSettings(), skip_extra={"nan_inf": 7},
                            before_target=lambda: calls.append(1))
    d = policy.decide(3, [nan(3, actions=("alert", "skip_batches"))])
    assert (d.skip, d.onset, d.stop, calls) == (7, None, None, [])
    d = policy.decide(4, [nan(4, actions=("alert", "rollback", "stop"))])
    assert d.rollback and d.target is None and calls == [1]
    assert d.stop == "rule nan_inf asks to stop at step 4"


def test_a_trainer_report_makes_no_step_clean():
    policy = RollbackPolicy(Ledger(None, 2), RollbackSettings(checkpoint_every=5, healthy_after=2))
    run(policy, range(1, 6))
    d = policy.decide(7, [nan(7, actions=("alert",))], judged=False)
    assert not d.promoted and not d.save and policy.last_step == 5


def test_bad_batches_in_a_row_after_a_rollback_do_not_walk_back_through_proven_checkpoints():
    # a checkpoint every 25 steps, healthy after 20 clean ones; bad batches at steps 120, 121, 122 (the data
    # iterator is not rewound: after each rollback to 75 the next batch is the next bad one)
    policy = RollbackPolicy(Ledger(None, 20), RollbackSettings(checkpoint_every=25, healthy_after=20))
    run(policy, range(1, 120))
    first = policy.decide(120, [nan(120)])
    assert first.rollback and first.target.step == 75
    policy.rolled_back(first, rewound=True)
    targets = []
    for _ in range(2):  # steps 76 again: the restored 75 was proven on 76-95 before the run went back
        d = policy.decide(76, [nan(76)], went_back=True)
        assert d.rollback and not [e for e in d.quarantined if e.step == 75]
        targets.append((d.target.step, d.batch))
        policy.rolled_back(d, rewound=True)
    assert [e.status for e in policy.ledger.entries if e.step <= 75] == [HEALTHY] * 3
    # step 76 ran on checkpoint 75's own weights: each bad batch after the first is undone with no more LR cut,
    # and counts against no budget
    assert targets == [(75, True), (75, True)] and policy.multiplier == 0.5 and policy.done == 1
    assert [rb.get("batch", False) for rb in policy.rollbacks] == [False, True, True]
    # ... up to max_rollbacks (3) such batches in a row: one more, and the data is bad: the run stops
    policy.rolled_back(policy.decide(76, [nan(76)], went_back=True), rewound=True)
    d = policy.decide(76, [nan(76)], went_back=True)
    assert not d.rollback and d.stop.startswith("4 batches in a row were anomalous on the weights of the healthy "
                                                "checkpoint of step 75: the data is bad (max_rollbacks=3)")
    # a clean step after the rollback ends the streak, and an anomaly later is the trajectory's again
    other = RollbackPolicy(Ledger(None, 20), RollbackSettings(checkpoint_every=25, healthy_after=20))
    run(other, range(1, 120))
    other.rolled_back(other.decide(120, [nan(120)]), rewound=True)
    other.decide(76, [], went_back=True)
    later = other.decide(77, [nan(77)])
    assert later.rollback and not later.batch and later.lr_multiplier == 0.25
