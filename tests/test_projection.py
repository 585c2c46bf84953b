"""bench/projection.py: the epoch model (compute + bytes / bandwidth + rounds x latency, stages in turn)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # bench/ is no package
from projection import WIRE_OVERHEAD, Link, Profile, crossover

GBIT = 1e9


def report(seconds, sent, received, rounds, steps=10):
    """A training report (``--report``'s shape) of one epoch; one entry per rank in each list."""
    ranks = [
        {"seconds": s, "sent_per_step": t, "received_per_step": r, "rounds_per_step": k}
        for s, t, r, k in zip(seconds, sent, received, rounds)
    ]
    return {"epochs": [{"steps": steps, "ranks": ranks}]}


def test_wire_time_is_the_busiest_link_plus_latency_per_round():
    profile = Profile(
        steps=1,
        compute=[{}, {}],
        sent=[{"forward": 1e6}, {"forward": 3e6}],
        received=[{"forward": 2e6}, {"forward": 0.5e6}],
        rounds={"forward": 4},
    )
    wire = profile.wire_per_step(Link(1 * GBIT, latency_s=1e-4))
    # rank 1 sends the most (3 MB): 24 Mbit over 1 Gbit/s, with headers, plus 4 latencies
    assert wire["forward"] == pytest.approx(3e6 * 8 * WIRE_OVERHEAD / 1e9 + 4e-4)


def test_compute_is_measured_once_and_the_prediction_moves_with_the_link():
    rep = report(
        seconds=[{"sample": 2.0, "forward": 3.0}, {"sample": 1.5, "forward": 3.5}],
        sent=[{"sample": 0.0, "forward": 1e6}, {"sample": 0.0, "forward": 1e6}],
        received=[{"sample": 0.0, "forward": 1e6}, {"sample": 0.0, "forward": 1e6}],
        rounds=[{"forward": 2}, {"forward": 2}],
    )
    fast = Link(10 * GBIT)
    profile = Profile.from_report(rep, fast)
    wire_fast = 10 * 1e6 * 8 * WIRE_OVERHEAD / 10e9
    assert profile.compute[0]["forward"] == pytest.approx(3.0 - wire_fast)
    # the link it was measured on gives back the measured epoch (the slowest rank: 5 s)
    assert profile.predict(fast) == pytest.approx(5.0)
    slow = Link(0.1 * GBIT, latency_s=1e-3)
    wire_slow = 10 * (1e6 * 8 * WIRE_OVERHEAD / 0.1e9 + 2e-3)
    assert profile.predict(slow) == pytest.approx(5.0 - wire_fast + wire_slow)
    stages = profile.stage_seconds(slow)
    assert stages["sample"] == pytest.approx(2.0) and stages["forward"] == pytest.approx(3.5 - wire_fast + wire_slow)


def test_dilation_scales_bandwidth_down_and_latency_up_and_compute_scaling_divides():
    assert Link(10 * GBIT, 2e-5).dilated(4) == Link(2.5 * GBIT, 8e-5)
    profile = Profile(2, [{"forward": 8.0}], [{"forward": 0.0}], [{"forward": 0.0}], {})
    assert profile.scaled(4).predict(Link(GBIT)) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="factor must be positive"):
        Link(GBIT).dilated(0)
    with pytest.raises(ValueError, match="bandwidth must be positive"):
        Link(0)


def test_crossover_interpolates_where_the_ratio_reaches_two():
    assert crossover(lambda d: 1.0 + d / 10, [1, 5, 10, 20]) == pytest.approx(10.0)
    assert crossover(lambda d: 1.0 + d / 10, [1, 5, 15, 20]) == pytest.approx(10.0)
    assert crossover(lambda d: 3.0, [1, 2]) == 1
    assert crossover(lambda d: 1.5, [1, 100]) is None


def test_cpu_clock_takes_the_stages_cpu_seconds_as_compute():
    rep = report(
        seconds=[{"forward": 9.0}],
        sent=[{"forward": 1e6}],
        received=[{"forward": 1e6}],
        rounds=[{"forward": 1}],
        steps=2,
    )
    rep["epochs"][0]["ranks"][0]["cpu_seconds"] = {"forward": 4.0}
    profile = Profile.from_report(rep, Link(GBIT), clock="cpu")
    assert profile.compute == [{"forward": 4.0}]
    assert profile.predict(Link(GBIT)) == pytest.approx(4.0 + 2 * (8e6 * WIRE_OVERHEAD / 1e9 + 0.0))
    with pytest.raises(ValueError, match="clock must be"):
        Profile.from_report(rep, Link(GBIT), clock="gpu")


def test_another_machine_count_keeps_the_compute_per_step_with_its_own_traffic():
    measured = Profile(4, [{"forward": 8.0}, {"forward": 6.0}], [{}, {}], [{}, {}], {})
    rep = report(
        seconds=[{}] * 3, sent=[{"forward": 5e5}] * 3, received=[{"forward": 2e5}] * 3, rounds=[{"forward": 8}] * 3
    )
    other = measured.with_traffic(rep)
    assert other.steps == 10 and other.compute == [{"forward": 20.0}]  # 2 s per step (the slowest rank), 10 steps
    assert other.rounds == {"forward": 8} and len(other.sent) == 3
