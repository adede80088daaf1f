#!/usr/bin/env bash
# 18_metrics_curl.sh BINARY: the metrics example in --serve mode, called by
# curl over 127.0.0.1 as a Prometheus scrape would be, and traced from
# outside with `kill -USR2`, while it runs. CTest runs it
# (examples/CMakeLists.txt). Every wait is bounded.
set -euo pipefail
bin=$1
dir=$(mktemp -d)
pid=
cleanup() {
    if [[ -n $pid ]]; then
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    rm -rf "$dir"
}
trap cleanup EXIT
fail() {
    echo "FAILED: $*"
    echo "--- server output:"
    cat "$dir/log" || true
    exit 1
}

TMPDIR=$dir "$bin" --serve 20 >"$dir/log" 2>&1 &
pid=$!
port=
for _ in $(seq 100); do
    port=$(sed -n 's/^listening on \([0-9][0-9]*\)$/\1/p' "$dir/log")
    [[ -n $port ]] && break
    sleep 0.1
done
[[ -n $port ]] || fail "the server did not say which port it listens on within 10 s"
signal_file=$(sed -n 's/^trace signal writes //p' "$dir/log")
url=http://127.0.0.1:$port

curl -sS --max-time 10 -D "$dir/headers" -o "$dir/metrics" "$url/metrics" || fail "GET /metrics"
grep -qi '^content-type: text/plain; version=0.0.4' "$dir/headers" || fail "the content type"
grep -q '^# TYPE weft_worker_switches_total counter$' "$dir/metrics" || fail "no switches counter"
grep -q '^weft_schedule_delay_seconds_bucket{worker="0",le="+Inf"} [0-9][0-9]*$' "$dir/metrics" || fail "no histogram"
# Every sample line is `name{labels} value`.
if grep -v '^#' "$dir/metrics" | grep -qvE '^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? [-+0-9.eE]+$'; then
    fail "a line that is not a sample: $(grep -v '^#' "$dir/metrics" | grep -vE '^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? [-+0-9.eE]+$' | head -1)"
fi
[[ $(curl -sS --max-time 10 "$url/trace") == "wrote "* ]] || fail "GET /trace"

kill -USR2 "$pid"
for _ in $(seq 100); do
    [[ -s $signal_file ]] && break
    sleep 0.1
done
[[ -s $signal_file ]] || fail "SIGUSR2 wrote no trace to $signal_file within 10 s"
grep -q '"name":"ticker"' "$signal_file" || fail "the signal's trace has no ticker"
# The live trace has the stop-time trace's format: the same checker passes it.
checker=$(dirname "$0")/../tests/trace/check_trace.py
/usr/bin/env python3 "$checker" --trace "$signal_file" --workers 2 --expect-task ticker --expect task \
    >"$dir/check" 2>&1 || { cat "$dir/check"; fail "check_trace.py refused the live trace"; }
kill -0 "$pid" 2>/dev/null || fail "the server did not survive the signal"
echo "ok: /metrics scraped, /trace and SIGUSR2 wrote live traces"
