"""The elastic driver's rounds, as Horovod's driver assigns places: a worker
is its (host, slot) and its local rank is its slot's, across rounds and for
a worker started on a freed slot; hosts keep the last round's order; rank 0
is always a worker that held the state. Driven through the driver's own
methods (grow, reap, try_form_round) with workers that are stand-ins for
processes, and through the ordering function alone. Run by pytest alone."""

import types

from ringlet.runner import elastic_driver, elastic_rounds


class Process:
    """A worker's process as the driver watches it, ended at the test's word."""

    def __init__(self):
        self.returncode = None

    def poll(self):
        return self.returncode

    def terminate(self):
        self.returncode = -15

    kill = terminate


class Launcher:
    def start(self, name, host, slot, elastic_env):
        return Process()


def driver_on(hosts, np, blacklist_failures=2):
    settings = elastic_driver.Settings(np=np, min_np=1, max_np=np,
                                       blacklist_failures=blacklist_failures)
    driver = elastic_driver.Driver(settings, discover=lambda: None, launcher=Launcher(),
                                   key=bytes(32))
    driver.driver_address = "127.0.0.1:1"  # what the workers' environment names
    driver.hosts = dict(hosts)
    with driver.lock:
        driver.grow(np)
    return driver


def next_round(driver):
    """Every live worker asks for the next round; returns {worker name:
    (rank, local rank, local size)} of the round that formed."""
    number = driver.round.number
    with driver.lock:  # the driver's methods run under its lock
        for w in driver.live():
            w.joined_after = number
        driver.try_form_round()
    assert driver.round.number == number + 1, "no round formed"
    return {w.name: (p.rank, p.local_rank, p.local_size)
            for w, p in driver.round.members.items()}


def kill(driver, name):
    """The worker ``name`` dies; the driver notices, as its loop does, and
    starts workers on the freed slots of hosts still in the job."""
    worker = next(w for w in driver.live() if w.name == name)
    worker.process.returncode = -9
    with driver.lock:
        failed = driver.reap()
        assert failed == 1
        driver.grow(len(driver.live()) + failed)


def held_state(driver, rank):
    """The worker of ``rank`` in the round that just formed was in an earlier one."""
    return next(w for w, p in driver.round.members.items() if p.rank == rank)


def test_a_worker_started_on_a_freed_slot_takes_that_slots_local_rank(capfd):
    driver = driver_on({"a": 2, "b": 2}, np=4)
    assert next_round(driver) == {"a:0": (0, 0, 2), "a:1": (1, 1, 2),
                                  "b:0": (2, 0, 2), "b:1": (3, 1, 2)}
    kill(driver, "b:0")
    newcomer = next(w for w in driver.live() if w.name == "b:0")
    assert newcomer.last_rank is None, "a new worker should have started on b:0"
    # b:1 keeps local rank 1 (the GPU it set by it); the new b:0 takes 0, the
    # dead one's, not a survivor's.
    assert next_round(driver) == {"a:0": (0, 0, 2), "a:1": (1, 1, 2),
                                  "b:0": (2, 0, 2), "b:1": (3, 1, 2)}
    assert "not its slot's" not in capfd.readouterr().err


def test_rank_0_stays_with_a_worker_that_held_the_state():
    driver = driver_on({"a": 2, "b": 2}, np=4)
    next_round(driver)
    survivors = {w.name for w in driver.live()}
    # Rank 0 dies and a new worker takes its slot, the lowest of the first
    # host: host b, whose lowest slot a survivor holds, goes first; every
    # local rank stays its slot's.
    kill(driver, "a:0")
    places = next_round(driver)
    assert places == {"b:0": (0, 0, 2), "b:1": (1, 1, 2), "a:0": (2, 0, 2), "a:1": (3, 1, 2)}
    assert held_state(driver, 0).name in survivors


def test_where_no_host_has_a_survivor_first_the_survivor_is_rank_0_and_the_driver_says_so(
        capfd):
    driver = driver_on({"a": 2}, np=2)
    next_round(driver)
    kill(driver, "a:0")
    places = next_round(driver)
    assert places == {"a:1": (0, 0, 2), "a:0": (1, 1, 2)}
    said = capfd.readouterr().err
    assert ("worker a:1 has local rank 0 in round 2, not its slot's 1: a survivor goes "
            "first on its host, to hold the state as rank 0") in said, said
    assert "worker a:0 has local rank 1 in round 2, not its slot's 0" in said, said


def test_a_host_that_fails_at_its_limit_leaves_and_the_others_keep_their_places():
    driver = driver_on({"a": 2, "b": 2, "c": 1}, np=5, blacklist_failures=1)
    next_round(driver)
    kill(driver, "b:1")  # b leaves the job, its other worker stopped with it
    assert next_round(driver) == {"a:0": (0, 0, 2), "a:1": (1, 1, 2), "c:0": (2, 0, 1)}


def worker(host, slot, last_rank=None):
    return types.SimpleNamespace(host=host, slot=slot, last_rank=last_rank,
                                 name=f"{host}:{slot}")


def test_hosts_keep_the_last_rounds_order_and_new_hosts_follow_in_start_order():
    # c was rank 0's host, a came after it; z and d are new (z started first).
    workers = [worker("a", 1, 3), worker("z", 0), worker("c", 0, 0), worker("a", 0, 2),
               worker("c", 1, 1), worker("d", 0), worker("c", 2)]
    order = [w.name for w in elastic_rounds.round_order(workers)]
    assert order == ["c:0", "c:1", "c:2", "a:0", "a:1", "z:0", "d:0"]


def test_the_first_round_goes_by_start_order_and_slot():
    workers = [worker("b", 1), worker("a", 0), worker("b", 0)]
    assert [w.name for w in elastic_rounds.round_order(workers)] == ["b:0", "b:1", "a:0"]
    assert elastic_rounds.round_order([]) == []
