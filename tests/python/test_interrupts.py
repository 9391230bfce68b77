"""A rank waiting for peers that never come still serves Python's signals:
Ctrl-C (KeyboardInterrupt) and a SIGALRM handler's exception reach it within
a second, from synchronize(), barrier(), join() and init()'s rendezvous,
instead of after the stall timeout. The job stays usable afterwards: the
interrupted handle can be synchronized again, an interrupted synchronous
collective, DistributedOptimizer.synchronize(), barrier or join is resumed
by the next call, a failed collective leaves the next one working,
and a rank that leaves after the interrupt fails the others' pending
collectives with an error naming it.

Every rank runs the same tests in the same order; rank 0 is the late one,
and the others are interrupted while they wait for it."""

import contextlib
import gc
import os
import signal
import threading
import time
import weakref

import numpy as np
import pytest

import ringlet.numpy as hvd
from ringlet import _ringlet
from ringlet.common import exceptions

# How soon a handler must run once its signal arrived (the waits serve
# signals every 50 ms; the rest is this machine's noise).
LATENCY_BOUND = 1.0
# When the signal comes, after the wait began.
SIGNAL_AFTER = 0.3


class Alarm(Exception):
    """What this suite's SIGALRM handler raises."""


@contextlib.contextmanager
def sigint_after(seconds):
    """Sends this process SIGINT after `seconds`; yields a list that then holds
    the monotonic time it was sent."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    sent = []

    def send():
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(seconds, send)
    timer.start()
    try:
        yield sent
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def alarm_after(seconds):
    """Arms SIGALRM with a handler that raises Alarm; yields a list that then
    holds the monotonic time the handler ran."""
    ran = []

    def handler(signum, frame):
        ran.append(time.monotonic())
        raise Alarm()

    previous = signal.signal(signal.SIGALRM, handler)
    fires_at = time.monotonic() + seconds
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield fires_at, ran
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def let_rank_zero_close_its_store():
    """Before an init that must not meet rank 0: the previous test's rank 0
    may still be closing its store, which a client reaching it in time would
    take for the new one (and then wait for with its own calls' deadline)."""
    time.sleep(0.5)


@pytest.fixture
def job():
    hvd.init()
    yield
    if hvd.is_initialized():
        hvd.barrier()
        hvd.shutdown()


def rank_values(rank):
    return np.arange(4, dtype=np.float64) + 10 * rank


def sum_of_ranks(size):
    return sum(rank_values(r) for r in range(size))


def test_sigint_wakes_synchronize_and_the_handle_completes_later(job):
    late = hvd.rank() == 0
    x = rank_values(hvd.rank())
    if not late:
        h = hvd.allreduce_async(x, name="late", op=hvd.Sum)
        with sigint_after(SIGNAL_AFTER) as sent:
            with pytest.raises(KeyboardInterrupt):
                hvd.synchronize(h)
            woke = time.monotonic()
        assert sent and woke - sent[0] < LATENCY_BOUND, f"woke {woke - sent[0]:.3f} s late"
    # Once the others were interrupted, rank 0 comes: the handle completes.
    assert hvd.allreduce(np.ones(1), name="interrupted", op=hvd.Sum)[0] == hvd.size()
    if late:
        got = hvd.allreduce(x, name="late", op=hvd.Sum)
    else:
        got = hvd.synchronize(h)
    assert np.array_equal(got, sum_of_ranks(hvd.size()))
    # A failed collective, then a good one, in the same processes.
    with pytest.raises(exceptions.HorovodInternalError):
        hvd.allreduce(np.ones(2 + hvd.rank()), name="shapes")
    assert np.array_equal(hvd.allreduce(x, name="after", op=hvd.Sum), sum_of_ranks(hvd.size()))


def test_an_interrupted_collective_keeps_its_buffers_until_it_completes(job):
    # Straight through the bindings, which must not count on the caller to
    # keep the arrays alive: the collective writes into them when it ends.
    late = hvd.rank() == 0
    x = rank_values(hvd.rank())
    if not late:
        out = np.zeros_like(x)
        written = weakref.ref(out)
        h = _ringlet.allreduce_async("allreduce.held", x, out, _ringlet.OP_SUM, 1.0, 1.0, 0)
        del out
        with sigint_after(SIGNAL_AFTER):
            with pytest.raises(KeyboardInterrupt):
                _ringlet.synchronize(h)
        gc.collect()
        assert written() is not None, "the bindings let go of an array still in use"
    hvd.allreduce(np.ones(1), name="interrupted")
    if late:
        got = hvd.allreduce(x, name="held", op=hvd.Sum)
        assert np.array_equal(got, sum_of_ranks(hvd.size()))
        return
    out = written()
    _ringlet.synchronize(h)
    assert np.array_equal(out, sum_of_ranks(hvd.size()))
    del out
    gc.collect()
    assert written() is None, "the bindings hold an array after its collective ended"


def test_an_interrupted_grouped_handle_completes_later(job):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    import ringlet.torch as hvd_torch
    late = hvd.rank() == 0
    xs = [torch.tensor(rank_values(hvd.rank())),
          torch.full((3,), float(hvd.rank() + 1), dtype=torch.float64)]
    if not late:
        h = hvd_torch.grouped_allreduce_async(xs, name="group", op=hvd_torch.Sum)
        with sigint_after(SIGNAL_AFTER):
            with pytest.raises(KeyboardInterrupt):
                hvd_torch.synchronize(h)
    hvd.allreduce(np.ones(1), name="interrupted")
    if late:
        h = hvd_torch.grouped_allreduce_async(xs, name="group", op=hvd_torch.Sum)
    outs = hvd_torch.synchronize(h)
    n = hvd.size()
    assert np.array_equal(outs[0].numpy(), sum_of_ranks(n))
    assert outs[1].tolist() == [float(sum(range(1, n + 1)))] * 3


def test_a_group_interrupted_after_a_member_completed_polls_and_completes(job):
    # The first member ends before the interrupt, the second after it: poll()
    # says the group is not done (without asking about the member already
    # released), and synchronize() then gives both results.
    torch = pytest.importorskip("torch", reason="torch is not installed")
    import ringlet.torch as hvd_torch
    late, n = hvd.rank() == 0, hvd.size()
    xs = [torch.full((2,), float(hvd.rank())), torch.full((1,), float(hvd.rank() + 1))]
    if late:
        hvd_torch.allgather(xs[0], name="grouped.partly.0")
    else:
        h = hvd_torch.grouped_allgather_async(xs, name="partly")
    hvd.allreduce(np.ones(1), name="first_done")
    if not late:
        with sigint_after(SIGNAL_AFTER):
            with pytest.raises(KeyboardInterrupt):
                hvd_torch.synchronize(h)
        try:
            polled = hvd_torch.poll(h)
        except Exception as e:  # asserted once rank 0 no longer waits for this one
            polled = e
    hvd.allreduce(np.ones(1), name="interrupted")
    if late:
        hvd_torch.allgather(xs[1], name="grouped.partly.1")
        return
    assert polled is False, polled
    first, second = hvd_torch.synchronize(h)
    assert first.tolist() == [float(r) for r in range(n) for _ in range(2)]
    assert second.tolist() == [float(r + 1) for r in range(n)]


def test_an_interrupted_synchronous_collective_is_resumed_by_its_retry(job):
    # The retry waits for the collective still in flight instead of
    # submitting it again, which rank 0 (that submits it once) would never
    # meet: named, unnamed, and in place into a tensor the retry allocated.
    torch = pytest.importorskip("torch", reason="torch is not installed")
    import ringlet.torch as hvd_torch
    late, n = hvd.rank() == 0, hvd.size()
    x = torch.tensor(rank_values(hvd.rank()))

    def broadcast_into_new_tensor():
        out = x.clone() if late else torch.zeros(4, dtype=torch.float64)
        return hvd_torch.broadcast_(out, root_rank=0, name="in_place")

    calls = [lambda: hvd_torch.allreduce(x, name="named", op=hvd_torch.Sum),
             lambda: hvd_torch.allgather(x),
             broadcast_into_new_tensor]
    if not late:
        for call in calls:
            with alarm_after(SIGNAL_AFTER):
                with pytest.raises(Alarm):
                    call()
    hvd.allreduce(np.ones(1), name="interrupted")
    results = []
    for call in calls:
        try:
            results.append(call())
        except ValueError as e:  # "already in flight": asserted once every rank is through
            results.append(e)
    hvd.allreduce(np.ones(1), name="retried")
    summed, gathered, broadcast = results
    assert isinstance(summed, torch.Tensor), summed
    assert np.array_equal(summed.numpy(), sum_of_ranks(n))
    assert np.array_equal(gathered.numpy(), np.concatenate([rank_values(r) for r in range(n)]))
    assert np.array_equal(broadcast.numpy(), rank_values(0))


def test_an_interrupted_optimizer_synchronize_resumes_without_reducing_twice(job):
    # a's allreduce (started by its hook) completes before the alarm, b's
    # after it: synchronize() again writes b's without reducing a's again
    # (op=Sum would double it) or failing on a's handle, synchronized already.
    torch = pytest.importorskip("torch", reason="torch is not installed")
    import ringlet.torch as hvd_torch
    late, n = hvd.rank() == 0, hvd.size()

    def gradients(rank):
        return (torch.full((2,), rank + 1.0, dtype=torch.float64),
                torch.arange(3, dtype=torch.float64) * (rank + 1))

    grad_a, grad_b = gradients(hvd.rank())
    if late:
        # Rank 0 submits the optimizer's two allreduces itself, b's once the
        # others were interrupted waiting for it.
        hvd_torch.allreduce_(grad_a.clone(), name="a", op=hvd_torch.Sum)
        hvd.allreduce(np.ones(1), name="a_done")
        hvd.allreduce(np.ones(1), name="interrupted")
        hvd_torch.allreduce_(grad_b.clone(), name="b", op=hvd_torch.Sum)
        return
    a = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    b = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    opt = hvd_torch.DistributedOptimizer(torch.optim.SGD([a, b], lr=1.0), op=hvd_torch.Sum,
                                         named_parameters=[("a", a), ("b", b)])
    (a * grad_a).sum().backward()  # a's hook starts its allreduce
    hvd.allreduce(np.ones(1), name="a_done")
    b.grad = grad_b.clone()  # synchronize() starts b's
    with alarm_after(SIGNAL_AFTER):
        with pytest.raises(Alarm):
            opt.synchronize()
    hvd.allreduce(np.ones(1), name="interrupted")
    opt.synchronize()
    assert torch.equal(a.grad, sum(gradients(r)[0] for r in range(n)))
    assert torch.equal(b.grad, sum(gradients(r)[1] for r in range(n)))


def test_sigalrm_handler_interrupts_a_barrier_that_the_next_call_resumes(job):
    late = hvd.rank() == 0
    if not late:
        with alarm_after(SIGNAL_AFTER) as (fires_at, ran):
            with pytest.raises(Alarm):
                hvd.barrier()
            woke = time.monotonic()
        assert ran and woke - fires_at < LATENCY_BOUND, f"woke {woke - fires_at:.3f} s late"
    hvd.allreduce(np.ones(1), name="alarmed")
    # One barrier on every rank: the interrupted ones resume theirs.
    hvd.barrier()
    assert np.array_equal(hvd.allreduce(rank_values(hvd.rank()), name="after", op=hvd.Sum),
                          sum_of_ranks(hvd.size()))


def test_sigalrm_handler_interrupts_a_join_that_the_next_call_resumes(job):
    late = hvd.rank() == 0
    if late:
        # The others join first and are interrupted waiting for this rank
        # (joined, they can submit nothing that would tell it so).
        time.sleep(SIGNAL_AFTER + 1.5)
        assert hvd.join() == 0
    else:
        with alarm_after(SIGNAL_AFTER) as (fires_at, ran):
            with pytest.raises(Alarm):
                hvd.join()
            woke = time.monotonic()
        assert ran and woke - fires_at < LATENCY_BOUND, f"woke {woke - fires_at:.3f} s late"
        assert hvd.join() == 0  # rank 0 joined last
    assert np.array_equal(hvd.allreduce(rank_values(hvd.rank()), name="after", op=hvd.Sum),
                          sum_of_ranks(hvd.size()))


def test_sigint_wakes_init_waiting_for_a_rank_that_has_not_come():
    late = os.environ["RINGLET_RANK"] == "0"
    if late:
        time.sleep(SIGNAL_AFTER + 2.0)
    else:
        let_rank_zero_close_its_store()
        with sigint_after(SIGNAL_AFTER) as sent:
            with pytest.raises(KeyboardInterrupt):
                hvd.init()
            woke = time.monotonic()
        assert sent and woke - sent[0] < LATENCY_BOUND, f"woke {woke - sent[0]:.3f} s late"
        assert not hvd.is_initialized()
    # The interrupted init started nothing: init again meets rank 0.
    hvd.init()
    try:
        assert np.array_equal(hvd.allreduce(rank_values(hvd.rank()), name="met", op=hvd.Sum),
                              sum_of_ranks(hvd.size()))
        hvd.barrier()
    finally:
        hvd.shutdown()


def test_a_handler_that_shuts_down_during_init_ends_that_init():
    late = os.environ["RINGLET_RANK"] == "0"
    if late:
        time.sleep(SIGNAL_AFTER + 2.0)
    else:
        let_rank_zero_close_its_store()
        with sigterm_shuts_down_after(SIGNAL_AFTER) as ran:
            with pytest.raises(exceptions.InitError) as failed:
                hvd.init()
            woke = time.monotonic()
        assert ran and woke - ran[0] < LATENCY_BOUND, f"woke {woke - ran[0]:.3f} s late"
        assert failed.value.code == 8, failed.value
        assert "shutdown() was called while init was meeting the other ranks" in str(
            failed.value), failed.value
        assert not hvd.is_initialized()
    # It had not reached rank 0's store: init again meets it.
    hvd.init()
    try:
        assert hvd.allreduce(np.ones(1), name="met", op=hvd.Sum)[0] == hvd.size()
        hvd.barrier()
    finally:
        hvd.shutdown()


def test_init_that_times_out_is_a_value_error_naming_the_cause(monkeypatch):
    late = os.environ["RINGLET_RANK"] == "0"
    if late:
        time.sleep(3.0)
    else:
        let_rank_zero_close_its_store()
        monkeypatch.setenv("RINGLET_START_TIMEOUT_SECONDS", "1")
        with pytest.raises(ValueError) as failed:
            hvd.init()
        # Horovod's init() raises ValueError when it fails; the code says why.
        assert isinstance(failed.value, exceptions.InitError), type(failed.value)
        assert failed.value.code == 5, failed.value
        assert "rank 0" in str(failed.value), failed.value
        assert not hvd.is_initialized()
        monkeypatch.delenv("RINGLET_START_TIMEOUT_SECONDS")
    hvd.init()
    try:
        assert hvd.allreduce(np.ones(1), name="met", op=hvd.Sum)[0] == hvd.size()
        hvd.barrier()
    finally:
        hvd.shutdown()


@contextlib.contextmanager
def sigterm_shuts_down_after(seconds):
    """Sends this process SIGTERM after `seconds`, whose handler calls
    hvd.shutdown() and returns; yields a list that then holds the monotonic
    time the handler ran."""
    ran = []

    def handler(signum, frame):
        ran.append(time.monotonic())
        hvd.shutdown()

    previous = signal.signal(signal.SIGTERM, handler)
    timer = threading.Timer(seconds, lambda: os.kill(os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        yield ran
    finally:
        timer.cancel()
        signal.signal(signal.SIGTERM, previous)


def test_a_handler_that_shuts_down_ends_the_wait_as_aborted():
    # A SIGTERM handler that shuts Ringlet down while the main thread waits
    # in synchronize(): the wait ends with the handle's failure, aborted by
    # the shutdown, not as a call made before init().
    hvd.init()
    late = hvd.rank() == 0
    if late:
        # The others shut down while they wait for this rank, which stops
        # the runtime here too.
        time.sleep(SIGNAL_AFTER + 1.5)
    else:
        h = hvd.allreduce_async(np.ones(2), name="shut")
        with sigterm_shuts_down_after(SIGNAL_AFTER) as ran:
            with pytest.raises(exceptions.HorovodInternalError) as failed:
                hvd.synchronize(h)
            woke = time.monotonic()
        assert ran and woke - ran[0] < LATENCY_BOUND, f"woke {woke - ran[0]:.3f} s late"
        assert isinstance(failed.value, exceptions.AbortedError), repr(failed.value)
        assert failed.value.code == 8, failed.value
        message = str(failed.value)
        assert "'allreduce.shut'" in message and "shut down" in message, message
        assert not hvd.is_initialized()
    hvd.shutdown()
    # Nothing of that session lingers: the job starts again.
    if not late:
        let_rank_zero_close_its_store()
    hvd.init()
    try:
        assert np.array_equal(hvd.allreduce(rank_values(hvd.rank()), name="again", op=hvd.Sum),
                              sum_of_ranks(hvd.size()))
        hvd.barrier()
    finally:
        hvd.shutdown()


def test_a_barrier_left_by_a_handler_that_shut_down_is_not_resumed_in_the_next_session():
    # The handler shuts Ringlet down and then raises while the main thread
    # waits in barrier(): that barrier belonged to the session that ended,
    # and the next session (whose handles are numbered afresh) must start
    # its own barrier rather than resume the old one's handle.
    # One rank's handler shuts down: with more than one, the first shutdown
    # would end the other handler's barrier before its own signal came.
    hvd.init()
    late = hvd.rank() == 0
    handling = hvd.rank() == 1
    if late:
        time.sleep(SIGNAL_AFTER + 1.5)
    elif not handling:
        with pytest.raises(exceptions.HorovodInternalError) as failed:
            hvd.barrier()
        assert "requested by rank 1" in str(failed.value), failed.value
        hvd.shutdown()
    else:
        def handler(signum, frame):
            hvd.shutdown()
            raise Alarm()

        previous = signal.signal(signal.SIGALRM, handler)
        signal.setitimer(signal.ITIMER_REAL, SIGNAL_AFTER)
        try:
            with pytest.raises(Alarm):
                hvd.barrier()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        assert not hvd.is_initialized()
    # The handler's shutdown() was this session's last word on the others.
    if late:
        hvd.shutdown()
    else:
        let_rank_zero_close_its_store()
    hvd.init()
    try:
        hvd.barrier()
        assert np.array_equal(hvd.allreduce(rank_values(hvd.rank()), name="next", op=hvd.Sum),
                              sum_of_ranks(hvd.size()))
        hvd.barrier()
    finally:
        hvd.shutdown()


def test_a_rank_that_leaves_after_an_interrupt_fails_the_others_naming_it():
    # Last: rank 1 leaves the job as a script ended by Ctrl-C does (its
    # shutdown runs at exit), while the others wait for a collective it
    # never submits.
    hvd.init()
    leaving = hvd.rank() == 1
    if leaving:
        h = hvd.allreduce_async(np.ones(2), name="never")
        with sigint_after(SIGNAL_AFTER) as sent:
            with pytest.raises(KeyboardInterrupt):
                hvd.synchronize(h)
            woke = time.monotonic()
        assert sent and woke - sent[0] < LATENCY_BOUND, f"woke {woke - sent[0]:.3f} s late"
        started = time.monotonic()
        hvd.shutdown()
        assert time.monotonic() - started < 30, "shutdown hung"
        return
    h = hvd.allreduce_async(np.ones(2), name="other")
    with pytest.raises(exceptions.HorovodInternalError) as failed:
        hvd.synchronize(h)
    assert isinstance(failed.value, RuntimeError)
    assert isinstance(failed.value, exceptions.AbortedError), type(failed.value)
    message = str(failed.value)
    assert "requested by rank 1" in message and "'allreduce.other'" in message, message
    hvd.shutdown()
