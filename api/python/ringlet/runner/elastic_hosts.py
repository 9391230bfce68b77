"""Which hosts an elastic job may use: a host leaves the job after it failed
``failures_allowed`` times (default 1, as Horovod blacklists a host on its
first failed worker). Without a cooldown range it stays out for the rest of
the job; with one, ``(lower, upper)`` seconds, it comes back once its
cooldown ends, Horovod's rule: its n-th exclusion lasts
``lower * 2**n + U(0, 1) * lower`` seconds, held within ``[lower, upper]``,
and its failure count starts again."""

import random
import time

# The bounds Horovod holds a cooldown range to.
LOWEST_COOLDOWN_SECONDS = 1
HIGHEST_COOLDOWN_SECONDS = 60 * 60


def check_cooldown_range(cooldown_range):
    """``cooldown_range`` as a (lower, upper) pair of seconds, or None; a
    ValueError naming the bound it breaks."""
    if cooldown_range is None:
        return None
    try:
        lower, upper = (float(v) for v in cooldown_range)
    except (TypeError, ValueError):
        raise ValueError(f"a cooldown range is two numbers of seconds (lower, upper), not "
                         f"{cooldown_range!r}") from None
    if lower < LOWEST_COOLDOWN_SECONDS:
        raise ValueError(f"the cooldown range's lower limit {lower:g} s is below "
                         f"{LOWEST_COOLDOWN_SECONDS} s")
    if upper > HIGHEST_COOLDOWN_SECONDS:
        raise ValueError(f"the cooldown range's upper limit {upper:g} s is above "
                         f"{HIGHEST_COOLDOWN_SECONDS} s")
    if lower > upper:
        raise ValueError(f"the cooldown range's lower limit {lower:g} s is above its upper "
                         f"limit {upper:g} s")
    return lower, upper


class HostBlacklist:
    def __init__(self, failures_allowed=1, cooldown_range=None, clock=time.monotonic):
        self.failures_allowed = failures_allowed
        self.cooldown_range = check_cooldown_range(cooldown_range)
        self.clock = clock
        self.failures = {}     # host -> failed workers since it last (re)joined
        self.exclusions = {}   # host -> times it was excluded
        self.until = {}        # excluded host -> when it may come back (inf: never)

    def __contains__(self, host):
        return host in self.until

    def record_failure(self, host):
        """Counts a failed worker of ``host``; True where that excludes it now."""
        if host in self.until:
            return False
        self.failures[host] = self.failures.get(host, 0) + 1
        if self.failures[host] < self.failures_allowed:
            return False
        self.exclusions[host] = self.exclusions.get(host, 0) + 1
        self.until[host] = self.clock() + self.cooldown(self.exclusions[host])
        return True

    def cooldown(self, exclusion):
        if self.cooldown_range is None:
            return float("inf")
        lower, upper = self.cooldown_range
        delay = lower * (1 << exclusion) + random.uniform(0, 1) * lower
        return max(lower, min(upper, delay))

    def seconds_left(self, host):
        return self.until[host] - self.clock()

    def readmit_cooled(self):
        """Takes back the hosts whose cooldown ended; returns them."""
        now = self.clock()
        back = [h for h, t in self.until.items() if t <= now]
        for host in back:
            del self.until[host]
            self.failures[host] = 0
        return back
