"""The benchmark report's goal arithmetic (no Spark): a ``time`` goal with
slack (Connect ≤ classic × 1.1 + 0.3 s) and the plain ratio goals."""
import pytest

from benchmarks.harness import Result, Timing


def test_time_goal_with_slack():
    ok = Result("op", Timing([1.4]), "classic", Timing([1.0]), "time", 1.1, slack=0.3)
    assert ok.passed is True and ok.status == "PASS" and ok.goal_text == "time ≤ 1.1× + 0.3 s"
    late = Result("op", Timing([1.41]), "classic", Timing([1.0]), "time", 1.1, slack=0.3)
    assert late.passed is False and late.status == "FAIL"
    assert Result("op", Timing([10.9]), "classic", Timing([10.0]), "time", 1.1, slack=0.3).passed is True
    assert Result("op", Timing([11.4]), "classic", Timing([10.0]), "time", 1.1, slack=0.3).passed is False


def test_ratio_goals_unchanged():
    assert Result("r", Timing([2.0]), "p", Timing([1.0]), "rate", 0.5).passed is True
    assert Result("t", Timing([2.1]), "p", Timing([1.0]), "time", 2.0).passed is False
    assert Result("t", Timing([2.1]), "p", Timing([1.0]), "time", 2.0).goal_text == "time ≤ 2×"
    with pytest.raises(ValueError):
        Result("r", Timing([1.0]), "p", Timing([1.0]), "rate", 0.5, slack=0.3)


def test_stage_counter_reads_progress_lines():
    """The empty-job comparison takes the task count from an operation's
    progress lines: the widest stage, counted once per stage id."""
    import logging

    from benchmarks.harness import StageCounter

    log = logging.getLogger("lance_ops.progress")
    counter = StageCounter()
    with counter:
        log.info("%s: stage %d done, %d/%d tasks in %.1fs", "delete t v1", 7, 4, 4, 0.3)
        log.info("%s: stage %d done, %d/%d tasks in %.1fs", "delete t v1", 8, 1, 1, 0.1)
        log.info("%s: evaluation arrow", "delete t v1")
    log.info("%s: stage %d done, %d/%d tasks in %.1fs", "later", 9, 40, 40, 1.0)  # outside: not counted
    assert counter.stages == {7: 4, 8: 1} and counter.max_tasks == 4
    assert counter.describe() == "2 stage(s), 5 task(s) in all, widest 4"
    with counter:
        pass
    assert counter.stages == {} and counter.max_tasks == 1
