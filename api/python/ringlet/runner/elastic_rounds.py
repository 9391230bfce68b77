"""The rank order of an elastic job's next round, as Horovod's elastic
driver assigns ranks: a worker is its (host, slot), and its local rank is
its slot's place on the host, so that a worker keeps its local rank (and
the GPU a script chose by it) across rounds, and a worker started on a
freed slot takes that slot's local rank, not one a survivor's GPU holds.

Hosts keep the previous round's order (the order of their survivors'
ranks); hosts with no survivor follow, in the order their workers started.
Within a host, workers go by slot. Ringlet derives each rank's local rank
from the ranks of its host in rank order, so slot order within a host is
what makes local rank and slot agree (where a host's slots have no gap).

Rank 0 holds the state the others receive: it must be a survivor. Horovod
drops a host at its first failure, so a survivor always holds its first
host's lowest slot there; with --blacklist-failures above 1 a host stays
and a new worker may take its lowest slot. The first host whose lowest slot
a survivor holds then goes first; where there is none, that host's
survivor of the lowest previous rank goes first and the others follow by
slot (their local ranks then differ from their slots, which the driver
logs)."""


def round_order(workers):
    """``workers``: the next round's workers, in the order they started,
    each with ``host``, ``slot`` and ``last_rank`` (its rank in the last
    round it was in; None for a worker new to the job). Returns them in
    rank order."""
    if not workers:
        return []
    by_host = {}
    for w in workers:
        by_host.setdefault(w.host, []).append(w)
    for members in by_host.values():
        members.sort(key=lambda w: w.slot)

    def previous(host):
        ranks = [w.last_rank for w in by_host[host] if w.last_rank is not None]
        return min(ranks) if ranks else None

    # Dicts keep insertion order: hosts without survivors in start order.
    hosts = sorted(by_host, key=lambda h: (previous(h) is None, previous(h) or 0))
    if any(previous(h) is not None for h in hosts):
        leads = [h for h in hosts if by_host[h][0].last_rank is not None]
        if leads:
            hosts.remove(leads[0])
            hosts.insert(0, leads[0])
        else:
            first = by_host[hosts[0]]
            keeper = min((w for w in first if w.last_rank is not None),
                         key=lambda w: w.last_rank)
            first.remove(keeper)
            first.insert(0, keeper)
    return [w for h in hosts for w in by_host[h]]
