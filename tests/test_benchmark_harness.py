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
