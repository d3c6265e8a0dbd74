#!/usr/bin/env bash
# `make test`: the classic pass (every tier, on TEST_WORKERS pytest-xdist
# workers) and the Spark Connect pass (CONNECT_SUITES through a Connect server)
# run side by side. The Connect pass alone keeps about one core busy -- its
# client waits on the server -- so it runs in the gaps of the classic pass
# instead of after it. Its output is kept in a log and printed when both have
# ended; the exit status is the classic pass's, else the Connect pass's.
#
# usage: scripts/test_passes.sh PYTHON "XDIST ARGS" CONNECT_SUITES...
set -u
py="$1"; xdist="$2"; shift 2
tmp="$(mktemp -d "${TMPDIR:-/tmp}/lance_ops-connect-pass.XXXXXX")"
log="$tmp/connect-pass.log"

LANCE_OPS_TEST_CONNECT=1 "$py" -m pytest -q -m "connect and not slow" --basetemp "$tmp/basetemp" \
    -p no:cacheprovider "$@" >"$log" 2>&1 &
connect_pid=$!
trap 'kill "$connect_pid" 2>/dev/null' INT TERM

start=$(date +%s)
# shellcheck disable=SC2086
"$py" -m pytest -q tests $xdist --durations=25
classic=$?
echo "classic pass: exit $classic after $(( $(date +%s) - start )) s"

wait "$connect_pid"
connect=$?
echo "---- Spark Connect pass (run alongside the classic pass): $*"
cat "$log"
echo "Spark Connect pass: exit $connect after $(( $(date +%s) - start )) s in all"
rm -rf "$tmp"
[ "$classic" -ne 0 ] && exit "$classic"
exit "$connect"
