#!/bin/sh
# The remote shell of the namespaced-hosts tests (netns.py):
#
#   netns_rsh.sh HOST CMD [ARGS...]
#
# runs CMD on HOST, a network namespace that netns.Hosts made, as ssh would
# run it on another machine: in that namespace (where /etc/hosts is the
# hosts' own, from /etc/netns/HOST/hosts), with HOST as its host name (a UTS
# namespace of its own: `ip netns exec` alone keeps this machine's name, and
# Ringlet tells hosts apart by name). stdin, stdout, stderr, the environment
# and the exit status pass through, and CMD replaces this shell: there is no
# process in between to forward signals or to outlive it.
if [ $# -lt 2 ]; then
  echo "usage: netns_rsh.sh HOST CMD [ARGS...]" >&2
  exit 2
fi
host=$1
shift
exec ip netns exec "$host" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$host" "$@"
