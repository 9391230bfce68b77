"""Which failure ended a job. When one rank fails, the others fail after it
(a lost peer, a wait past its deadline, a job shut down), and an engine that
reports whichever failure it saw first may show one of those instead of the
cause. These helpers tell them apart, so that the engines report the rank
that failed first-hand."""

import traceback

from ringlet.common.exceptions import (AbortedError, CollectiveTimeoutError, InitError,
                                       PeerLostError)

# InitError's codes for a rank that did not arrive (5) or died (4) during
# the rendezvous: like the collectives' failures, caused by another rank.
_INIT_CAUSED_BY_OTHERS = (4, 5)


def caused_by_another_rank(error):
    """True for a failure Ringlet raised because another rank failed or left."""
    if isinstance(error, (PeerLostError, CollectiveTimeoutError, AbortedError)):
        return True
    return isinstance(error, InitError) and getattr(error, "code", None) in _INIT_CAUSED_BY_OTHERS


class RankFailure(RuntimeError):
    """Rank ``rank`` of a job failed; the message holds its traceback."""

    def __init__(self, rank, message, second_hand=False):
        super().__init__(f"rank {rank} failed: {message}")
        self.rank = rank
        self.detail = message       # how it failed: its traceback
        self.second_hand = second_hand

    def __reduce__(self):
        # The engines pickle it across processes: keep its fields.
        return (_rebuild_rank_failure, (self.rank, str(self), self.second_hand, self.detail))

    def summary(self):
        """How it failed, in a line: the exception its function raised (its
        traceback's last line), or how its process ended."""
        lines = self.detail.strip().splitlines()
        if lines and lines[0].startswith("Traceback"):
            return f"its function raised {lines[-1].strip()[:300]}"
        return lines[0][:300] if lines else "it failed"


def _rebuild_rank_failure(rank, text, second_hand, detail=""):
    failure = RankFailure(rank, detail, second_hand)
    failure.args = (text,)
    return failure


def traceback_of(error):
    """``error``'s traceback as Python prints it."""
    return "".join(traceback.format_exception(type(error), error, error.__traceback__)).rstrip()


def failure_of(rank, error):
    """Rank ``rank``'s RankFailure for ``error``, an exception its function
    raised: its traceback, and whether another rank caused it."""
    return RankFailure(rank, traceback_of(error), caused_by_another_rank(error))


def first_cause(failures):
    """Of ``failures`` (RankFailure objects, one per failed rank), the one to
    report: the lowest rank that failed first-hand, else the lowest rank."""
    first_hand = [f for f in failures if not f.second_hand]
    return min(first_hand or failures, key=lambda f: f.rank)
