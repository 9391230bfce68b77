#!/bin/sh
# Runs one rank as if the job spanned two hosts: the first half of the ranks
# on "simhost0", the rest on "simhost1" (RINGLET_HOSTNAME overrides the host
# name; the launcher's local-rank hints no longer apply, so they go).
RINGLET_HOSTNAME="simhost$(( RINGLET_RANK * 2 / RINGLET_SIZE ))"
export RINGLET_HOSTNAME
unset RINGLET_LOCAL_RANK RINGLET_LOCAL_SIZE RINGLET_CROSS_RANK RINGLET_CROSS_SIZE
exec "$@"
