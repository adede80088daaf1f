#!/usr/bin/env bash
# 16_http_server_curl.sh BINARY: the HTTP example in --serve mode, called by
# curl (the Debian package) over 127.0.0.1 as a user would, then stopped with
# SIGTERM; it must answer every route, keep a connection alive across
# requests, lose only its own connection when a handler throws (/crash),
# end by itself, and report that its graceful shutdown canceled
# nothing. CTest runs it (examples/CMakeLists.txt). Every wait is bounded.
set -euo pipefail
bin=$1
dir=$(mktemp -d)
pid=
cleanup() {
    [[ -n $pid ]] && kill -KILL "$pid" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT
fail() {
    echo "FAILED: $*"
    echo "--- server output:"
    cat "$dir/log" || true
    exit 1
}

"$bin" --serve --port 0 --workers 2 >"$dir/log" 2>&1 &
pid=$!
port=
for _ in $(seq 100); do
    port=$(sed -n 's/^listening on \([0-9][0-9]*\)$/\1/p' "$dir/log")
    [[ -n $port ]] && break
    sleep 0.1
done
[[ -n $port ]] || fail "the server did not say which port it listens on within 10 s"
url=http://127.0.0.1:$port

get() { curl -sS --max-time 10 "$@"; }
[[ $(get "$url/") == "hello from weft" ]] || fail "GET /"
[[ $(get "$url/sleep") == "slept 50 ms" ]] || fail "GET /sleep"
[[ $(get "$url/fanout") == "fanout sum 4999950000" ]] || fail "GET /fanout"
[[ $(get "$url/backend") == "backend said PING" ]] || fail "GET /backend"
[[ $(get -o /dev/null -w '%{http_code}' "$url/nope") == 404 ]] || fail "GET /nope is not 404"
[[ $(get -o /dev/null -w '%{http_code}' -X POST --data 'a=1&b=2' "$url/") == 200 ]] || fail "POST / with a body"
# Two URLs in one curl call share one connection when the server keeps it alive.
both=$(get -w '%{num_connects}\n' "$url/" "$url/sleep")
[[ $both == $'hello from weft\n1\nslept 50 ms\n0' ]] || fail "keep-alive: got [$both]"
# A handler that throws costs its own connection only (curl: empty reply,
# exit 52), is named on stderr, and the server goes on serving.
crash_rc=0
get -o /dev/null "$url/crash" 2>/dev/null || crash_rc=$?
[[ $crash_rc -eq 52 ]] || fail "GET /crash: curl exit $crash_rc, not 52 (empty reply)"
[[ $(get "$url/") == "hello from weft" ]] || fail "GET / after /crash"
grep -q "^server: task 'conn 127.0.0.1:[0-9]*' (id [0-9]*) failed: the /crash route always throws$" "$dir/log" ||
    fail "the failed connection was not reported by name"
# An idle keep-alive connection must not hold the shutdown up: one left open.
exec 3<>"/dev/tcp/127.0.0.1/$port"

kill -TERM "$pid"
rc=0
for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
kill -0 "$pid" 2>/dev/null && fail "the server did not end within 10 s of SIGTERM"
wait "$pid" || rc=$?
pid=
exec 3>&-
[[ $rc -eq 0 ]] || fail "the server exited with $rc"
grep -q '^shutdown: 0 tasks canceled' "$dir/log" || fail "the shutdown was not graceful"
grep -q ', 1 connections failed$' "$dir/log" || fail "the supervisor did not count the one failed connection"
echo "ok: every route answered; keep-alive; a throwing handler cost one connection; SIGTERM ended it gracefully"
