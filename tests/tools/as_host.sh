#!/bin/sh
# A remote shell for the launcher's tests: runs the command on this machine
# as if it ran on the host named first (RINGLET_HOSTNAME is the name Ringlet
# takes for gethostname()'s). With AS_HOST_DETACHED=1 the command runs in a
# session of its own that the remote shell does not wait for in its stead, as
# ssh leaves a remote command when its connection drops.
host="$1"
shift
export RINGLET_HOSTNAME="$host"
if [ "${AS_HOST_DETACHED:-0}" = 1 ]; then
  # Through fd 3: a background command's own stdin would be /dev/null.
  exec 3<&0
  setsid "$@" 0<&3 3<&- &
  wait $!
  exit $?
fi
exec "$@"
