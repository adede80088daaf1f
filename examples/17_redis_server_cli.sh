#!/usr/bin/env bash
# 17_redis_server_cli.sh BINARY [SERVER OPTIONS...]: the Redis example in
# --serve mode, called over 127.0.0.1 by redis-cli and redis-benchmark (the
# Debian package redis-tools) and by raw bytes through bash's /dev/tcp, then
# stopped with SIGTERM. Every reply is compared exactly; every wait is
# bounded. CTest runs it once per IO backend (examples/CMakeLists.txt).
set -euo pipefail
bin=$1
shift
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

# start LOG ARGS...: runs the server, sets pid and port.
start() {
    local log=$1
    shift
    : >"$log"  # made here: the server's own redirection may come after the first look
    "$bin" --serve --port 0 "$@" >"$log" 2>&1 &
    pid=$!
    port=
    for _ in $(seq 100); do
        port=$(sed -n 's/^listening on \([0-9][0-9]*\)$/\1/p' "$log")
        [[ -n $port ]] && break
        sleep 0.1
    done
    [[ -n $port ]] || fail "the server did not say which port it listens on within 10 s"
}
# stop: SIGTERM, then the server must end by itself within 10 s, with 0.
stop() {
    kill -TERM "$pid"
    for _ in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && fail "the server did not end within 10 s of SIGTERM"
    local rc=0
    wait "$pid" || rc=$?
    pid=
    [[ $rc -eq 0 ]] || fail "the server exited with $rc"
}

start "$dir/log" --workers 2 "$@"
echo "server: $(head -1 "$dir/log")"
cli() { timeout 10 redis-cli -p "$port" "$@"; }
# expect WANT ARGS...: redis-cli ARGS must print exactly WANT.
expect() {
    local want=$1 got
    shift
    got=$(cli "$@" 2>&1) || fail "redis-cli $* failed: [$got]"
    [[ $got == "$want" ]] || fail "redis-cli $*: got [$got], want [$want]"
}
# raw BYTES: sends BYTES on a fresh connection, shuts nothing, and prints
# what comes back until the server closes the connection (within 5 s).
raw() {
    timeout 5 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"; printf "%b" "$2" >&3; cat <&3' _ "$port" "$1" ||
        fail "raw [$1]: no close within 5 s"
}

expect PONG ping
expect hello ping hello
expect "hi there" echo "hi there"
expect OK set greeting hello
expect hello get greeting
expect "" get missing
expect 1 incr counter
expect 2 incr counter
expect 2 get counter
expect "ERR value is not an integer or out of range" incr greeting
expect OK set a 1
expect OK set b 2
expect 2 del a b missing
expect 0 del a
expect -1 ttl greeting
expect -2 ttl missing
expect 1 expire greeting 100
ttl=$(cli ttl greeting)
[[ $ttl -ge 99 && $ttl -le 100 ]] || fail "TTL after EXPIRE 100 is $ttl"
expect 0 expire missing 10
expect OK set soon x px 100
expect x get soon
sleep 0.3
expect "" get soon
expect -2 ttl soon
expect OK set later x ex 100
ttl=$(cli ttl later)
[[ $ttl -ge 99 && $ttl -le 100 ]] || fail "TTL after SET EX 100 is $ttl"
expect "ERR unknown command 'frobnicate'" frobnicate
expect "ERR wrong number of arguments for 'get' command" get
expect "ERR syntax error" set k v nx

# Active expiry: 200 keys set with PX 100 through --pipe and never read
# again; the sweeper (every 100 ms) must erase them, DBSIZE shows it.
before=$(cli dbsize)
for i in $(seq 100 299); do
    printf '*5\r\n$3\r\nSET\r\n$6\r\nexp%d\r\n$1\r\nx\r\n$2\r\nPX\r\n$3\r\n100\r\n' "$i"
done >"$dir/pipe"
out=$(timeout 10 redis-cli -p "$port" --pipe <"$dir/pipe" 2>&1) || fail "redis-cli --pipe: [$out]"
[[ $out == *"errors: 0, replies: 200"* ]] || fail "redis-cli --pipe: [$out]"
[[ $(cli dbsize) -eq $((before + 200)) ]] || fail "DBSIZE after 200 SETs"
for _ in $(seq 20); do
    [[ $(cli dbsize) -eq $before ]] && break
    sleep 0.1
done
[[ $(cli dbsize) -eq $before ]] || fail "the sweeper did not erase 200 expired keys within 2 s"

# Pipelining: every command of one write is answered, in order; inline
# and array commands mixed; QUIT answers and closes.
got=$(raw 'PING\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$3\r\nabc\r\nSET p 7\r\nINCR p\r\n*2\r\n$3\r\nGET\r\n$1\r\np\r\nQUIT\r\nPING\r\n')
want=$'+PONG\r\n+PONG\r\n$3\r\nabc\r\n+OK\r\n:8\r\n$1\r\n8\r\n+OK\r'
[[ $got == "$want" ]] || fail "pipelined batch: got [$got]"
# Malformed frames: an error, then the connection is closed.
got=$(raw '*1\r\nPING\r\n')
[[ $got == $'-ERR Protocol error: expected \'$\', got \'P\'\r' ]] || fail "malformed frame: got [$got]"
got=$(raw '*x\r\n')
[[ $got == $'-ERR Protocol error: invalid multibulk length\r' ]] || fail "bad count: got [$got]"
got=$(raw '*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$999999999999\r\n')
[[ $got == $'-ERR Protocol error: invalid bulk length\r' ]] || fail "huge bulk: got [$got]"
got=$(raw '*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$104857600\r\n')
[[ $got == $'-ERR Protocol error: request larger than --max-bulk 67108864 bytes\r' ]] || fail "bulk over --max-bulk: got [$got]"
got=$(raw '*2\r\n$4\r\nECHO\r\n$3\r\nabcXY')
[[ $got == $'-ERR Protocol error: expected CRLF after a bulk string\r' ]] || fail "bulk without CRLF: got [$got]"

# Many clients at once on a shared counter: every INCR counts.
clients=()
for _ in $(seq 20); do
    (for _ in $(seq 10); do cli incr shared >/dev/null; done) &
    clients+=($!)
done
wait "${clients[@]}" || fail "a redis-cli incr failed"
expect 200 get shared
# redis-benchmark: 20 connections, then 50 with 16 commands per write.
for args in "-c 20" "-c 50 -P 16"; do
    # shellcheck disable=SC2086
    timeout 60 redis-benchmark -p "$port" -n 2000 $args -t ping,set,get,incr -q 2>&1 | tr '\r' '\n' >"$dir/bench" ||
        fail "redis-benchmark $args did not complete within 60 s: $(cat "$dir/bench")"
    for t in PING_INLINE PING_MBULK SET GET INCR; do
        grep -q "^$t: [0-9.]* requests per second" "$dir/bench" || fail "redis-benchmark $args: no $t result: $(cat "$dir/bench")"
    done
    echo "redis-benchmark $args: $(grep -c 'requests per second' "$dir/bench") tests, $(grep '^GET: [0-9.]* requests' "$dir/bench")"
done
expect PONG ping

# An idle connection must not hold the shutdown up.
exec 3<>"/dev/tcp/127.0.0.1/$port"
stop
exec 3>&-
grep -q '^shutdown: 0 tasks canceled' "$dir/log" || fail "the shutdown was not graceful"

# --idle-timeout: an idle connection is closed after 1 s.
start "$dir/log2" --workers 1 --idle-timeout 1 "$@"
SECONDS=0
timeout 5 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"; cat <&3' _ "$port" || fail "--idle-timeout 1 did not close within 5 s"
[[ $SECONDS -ge 1 ]] || fail "--idle-timeout 1 closed the connection at once"
stop

# --maxclients 1: with one client connected, the next is told so and closed,
# as redis-server does, and the first is still served.
start "$dir/log3" --workers 1 --maxclients 1 "$@"
exec 4<>"/dev/tcp/127.0.0.1/$port"
printf 'PING\r\n' >&4
read -r -t 10 first <&4 || fail "--maxclients 1: the first client got no reply"
[[ $first == $'+PONG\r' ]] || fail "--maxclients 1: the first client got [$first]"
got=$(timeout 10 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"; cat <&3' _ "$port") || fail "--maxclients 1: the second client was not closed within 10 s"
[[ $got == $'-ERR max number of clients reached\r' ]] || fail "--maxclients 1: the second client got [$got]"
printf 'PING\r\n' >&4
read -r -t 10 first <&4 || fail "--maxclients 1: the first client was not served after the second was turned away"
[[ $first == $'+PONG\r' ]] || fail "--maxclients 1: the first client then got [$first]"
exec 4>&-
stop
echo "ok: exact replies, expiry (lazy and swept), pipelining, protocol errors, concurrency, benchmark, SIGTERM, maxclients"
