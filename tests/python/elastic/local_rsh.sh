#!/bin/sh
# The remote shell of the elastic tests' pretend hosts: runs the command on
# this machine as host "$1" (RINGLET_HOSTNAME), as ssh would run it there.
host="$1"
shift
RINGLET_HOSTNAME="$host" exec "$@"
