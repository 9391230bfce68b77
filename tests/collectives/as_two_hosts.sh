#!/bin/sh
# Runs one rank as if the job spanned two hosts: the first half of the ranks
# on "simhost0", the rest on "simhost1" (RINGLET_HOSTNAME overrides the host
# name; the launcher's local-rank hints no longer apply, so they go). With
# AS_TWO_HOSTS=interleaved the even ranks are on "simhost0" and the odd ones
# on "simhost1", so that no host's ranks are consecutive.
if [ "${AS_TWO_HOSTS:-}" = interleaved ]; then
  RINGLET_HOSTNAME="simhost$(( RINGLET_RANK % 2 ))"
else
  RINGLET_HOSTNAME="simhost$(( RINGLET_RANK * 2 / RINGLET_SIZE ))"
fi
export RINGLET_HOSTNAME
unset RINGLET_LOCAL_RANK RINGLET_LOCAL_SIZE RINGLET_CROSS_RANK RINGLET_CROSS_SIZE
exec "$@"
