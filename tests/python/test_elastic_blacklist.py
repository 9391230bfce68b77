"""Which hosts an elastic job may use (ringlet.runner.elastic_hosts): a host
leaves after its allowed failures, for good without a cooldown range, and
with one comes back after Horovod's doubling cooldown, held in the range,
its failure count started again. Time is a clock the test moves."""

import pytest

from ringlet.runner.elastic_hosts import HostBlacklist, check_cooldown_range


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_a_host_leaves_after_its_allowed_failures_and_stays_out_without_a_cooldown():
    clock = Clock()
    hosts = HostBlacklist(failures_allowed=2, clock=clock)
    assert not hosts.record_failure("a")
    assert "a" not in hosts
    assert hosts.record_failure("a")
    assert "a" in hosts and "b" not in hosts
    assert not hosts.record_failure("a"), "an excluded host is not excluded again"
    clock.now += 10 ** 6
    assert hosts.readmit_cooled() == []
    assert "a" in hosts


@pytest.mark.parametrize("exclusion,lowest,highest", [(1, 20, 30), (2, 40, 50), (3, 80, 90)])
def test_the_cooldown_doubles_with_each_exclusion(exclusion, lowest, highest):
    hosts = HostBlacklist(cooldown_range=(10, 1000))
    for _ in range(50):
        assert lowest <= hosts.cooldown(exclusion) <= highest


def test_the_cooldown_is_held_within_the_range():
    hosts = HostBlacklist(cooldown_range=(10, 25))
    assert all(hosts.cooldown(n) <= 25 for n in range(1, 8))
    assert all(hosts.cooldown(n) >= 10 for n in range(1, 8))


def test_a_cooled_host_comes_back_with_its_failures_counted_anew():
    clock = Clock()
    hosts = HostBlacklist(failures_allowed=2, cooldown_range=(1, 3), clock=clock)
    hosts.record_failure("a")
    assert hosts.record_failure("a")
    left = hosts.seconds_left("a")
    assert 2 <= left <= 3  # 1 * 2**1 + U(0, 1), within [1, 3]
    clock.now += left - 0.01
    assert hosts.readmit_cooled() == []
    clock.now += 0.02
    assert hosts.readmit_cooled() == ["a"]
    assert "a" not in hosts
    assert not hosts.record_failure("a"), "one failure of two allowed after coming back"
    assert hosts.record_failure("a")
    assert hosts.seconds_left("a") == pytest.approx(3)  # 1 * 2**2 + U(0, 1) held to 3


@pytest.mark.parametrize("bad,says", [((0, 10), "below 1 s"), ((1, 3601), "above 3600 s"),
                                      ((10, 5), "above its upper"), (("x", 2), "two numbers"),
                                      ((1,), "two numbers")])
def test_a_bad_cooldown_range_is_refused_naming_the_bound(bad, says):
    with pytest.raises(ValueError, match=says):
        check_cooldown_range(bad)


def test_no_cooldown_range_is_none():
    assert check_cooldown_range(None) is None
    assert check_cooldown_range([1, 60]) == (1.0, 60.0)
