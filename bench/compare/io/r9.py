#!/usr/bin/env python3
"""R9 / R9b of issue 43: weft's RESP server (examples/17_redis_server.cpp,
--serve) against a Go server of the same shape (bench/compare/io/resp_go),
with redis-server as a reference row (not a peer), all on 127.0.0.1, all
driven by redis-benchmark (Debian package redis-tools; redis-server from
redis-server).

Scenarios: --conns x --pipeline (default {50, 1,000} connections x -P {1,
16}), and in each the tests --tests (default ping_mbulk, set, get, incr).

Per repetition, scenario and server, a fresh server process pinned to CPU 0
(taskset -c 0): weft with --workers 1 and its default backend (--weft-io to
force one), Go with GOMAXPROCS=1, redis-server with `--port P --save ''
--appendonly no` and no configuration file. It first gets a functional
check over a socket (PING, SET / GET, and INCR of a non-integer, whose
error text must be Redis's), then an unrecorded warm-up
(redis-benchmark -t ping_mbulk, --warmup requests; none with --quick), then
one redis-benchmark run per test, each

    taskset -c 1 redis-benchmark -h 127.0.0.1 -p PORT -c C -P P -n N
                  -r KEYSPACE -t TEST --csv

pinned to CPU 1. Around every run the server's CPU time is read
(/proc/PID/stat utime + stime, all its threads): server CPU per request is
that difference over N; requests/s and p50 / p99 are redis-benchmark's.
redis-benchmark's own CPU (its rusage, from wait4) over its wall time is kept
as "client busy": near 100% the client set the pace (redis-benchmark runs one
thread), and CPU per request is then the figure that compares. Servers
alternate within every repetition (weft go redis weft go redis ...).

R9b (syscalls): per repetition and server, another fresh server and one
more run of -c 50 -P 1 ping_mbulk (--syscall-requests), with
`strace -c -f -p PID` attached to every thread of the server for the run
(strace slows the server down a lot, so this run gives no time figures):
system calls per request = strace's total call count over the requests. The
count includes what the server does besides answering (accepting the 50
connections, its timers, Go's sysmon); one io_uring_enter counts once,
however many operations it submits or reaps.

Targets (reported, never checked: the exit status does not depend on them):
  R9   weft's server CPU per request <= 0.7x Go's, in every scenario and test
       (median of the per-repetition ratios: each weft sample against the Go
       sample of the same repetition, scenario and test);
  R9b  weft's system calls per request <= Go's, -c 50 -P 1 PING (medians).

A weft server that does not start, fails its check, dies, makes
redis-benchmark fail (it exits at the first error reply) or does not exit
with status 0 within 10 s of SIGTERM fails the script (exit status 1); a
peer's or the reference's failure only marks its cells.

This script builds nothing: scripts/bench builds the binaries; the defaults
are where it puts them.

  python3 bench/compare/io/r9.py [--quick] [--reps N] [--requests N] [--out DIR]

Writes OUT/r9.md (the tables), OUT/r9.json (every sample) and appends the
servers' output, redis-benchmark's and strace's to --log.
"""

import argparse
import csv
import datetime
import importlib.util
import io
import json
import os
import platform
import re
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

_here = os.path.dirname(os.path.abspath(__file__))
# This directory holds http.py: off the module path, so that nothing imports
# it in place of the standard library's http package.
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != _here]
ROOT = os.path.normpath(os.path.join(_here, "..", "..", ".."))


def _load(name, file):
    spec = importlib.util.spec_from_file_location(name, os.path.join(_here, file))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# The /proc readings, the log line and the medians are R8's; the commit and
# version probes the HTTP row's (loaded by path, as http.py loads r8.py).
_r8 = _load("weft_r8", "r8.py")
log, proc_cpu, machine_state, med = _r8.log, _r8.proc_cpu, _r8.machine_state, _r8.med
_http = _load("weft_http_row", "http.py")
git_rev, first_line = _http.git_rev, _http.first_line

SERVERS = ("weft", "go", "redis")  # redis: the reference row, not a peer
TESTS = {"ping_mbulk": "PING_MBULK", "set": "SET", "get": "GET", "incr": "INCR"}
R9_LIMIT = 0.7
START_S = 10    # a server must be ready within this
STOP_S = 10     # and exit within this after SIGTERM
BENCH_SLACK_S = 60


def free_port():
    """A port the kernel calls free now (redis-server cannot take port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def raise_nofile(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = need if hard == resource.RLIM_INFINITY else min(max(need, soft), hard)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


class Server:
    """One server process on CPU 0. weft's and Go's print "listening on
    PORT"; redis-server gets a port chosen here and is ready when it answers
    PING. stdout and stderr go to files of their own (into the log at the end)."""

    def __init__(self, name, argv, env, logf, port=None):
        self.name, self.logf = name, logf
        self.out = tempfile.TemporaryFile()
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(["taskset", "-c", "0"] + argv, stdout=subprocess.PIPE if port is None
                                     else self.out, stderr=self.err, env=env, start_new_session=True)
        self.port = port
        self.lines = []
        deadline = time.monotonic() + START_S
        if port is None:
            # Raw reads of the pipe (weft prints two lines at once: a buffered
            # readline would keep the second where select cannot see it).
            fd, pending = self.proc.stdout.fileno(), b""
            while time.monotonic() < deadline:
                r, _, _ = select.select([fd], [], [], 0.2)
                if r:
                    chunk = os.read(fd, 4096)
                    if not chunk:
                        break
                    pending += chunk
                    *done, pending = pending.split(b"\n")
                    for line in done:
                        text = line.decode(errors="replace").strip()
                        self.lines.append(text)
                        if text.startswith("listening on ") and self.port is None:
                            self.port = int(text.split()[2])
                    if self.port is not None:
                        return
                elif self.proc.poll() is not None:
                    break
        else:
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    if exchange(port, b"PING\r\n", b"+PONG\r\n", timeout=1) == b"+PONG\r\n":
                        return
                except OSError:
                    pass
                time.sleep(0.05)
        exited = self.proc.poll()
        self.kill()
        why = (f"exited with status {exited} before it was ready" if exited is not None
               else f"not ready within {START_S} s; killed")
        raise RuntimeError(why + self.stderr_tail())

    def stderr_tail(self, n=4):
        self.err.seek(0)
        tail = self.err.read().decode(errors="replace").strip().splitlines()[-n:]
        return ("; stderr: " + " | ".join(tail)) if tail else ""

    def alive(self):
        return self.proc.poll() is None

    def threads(self):
        try:
            return sorted(int(t) for t in os.listdir(f"/proc/{self.proc.pid}/task"))
        except OSError:
            return []

    def stop(self):
        """SIGTERM, then up to STOP_S for the exit: None if it exited with
        status 0, else why not (then it is killed)."""
        if self.proc.poll() is not None:
            why = f"died (status {self.proc.returncode})"
        else:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_S)
                why = None if self.proc.returncode == 0 else f"exit status {self.proc.returncode} after SIGTERM"
            except subprocess.TimeoutExpired:
                why = f"still running {STOP_S} s after SIGTERM; killed"
        self.kill()
        return None if why is None else why + self.stderr_tail()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)  # by its PID: the process we started
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.stdout and not self.proc.stdout.closed:
            rest = b""
            try:
                while len(rest) < (1 << 16) and select.select([self.proc.stdout], [], [], 0)[0]:
                    chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
                    if not chunk:
                        break
                    rest += chunk
            except OSError:
                pass
            self.lines += rest.decode(errors="replace").strip().splitlines()
            self.proc.stdout.close()

    def close(self):
        self.logf.write(f"---- {self.name} (pid {self.proc.pid}, exit {self.proc.returncode}) output ----\n")
        self.out.seek(0)
        self.logf.write("\n".join(self.lines) + "\n" + self.out.read().decode(errors="replace")[-4000:])
        self.err.seek(0)
        data = self.err.read()
        if data:
            self.logf.write(f"---- {self.name} (pid {self.proc.pid}) stderr ----\n")
            self.logf.write(data.decode(errors="replace")[-4000:])
        self.out.close()
        self.err.close()
        self.logf.flush()


def exchange(port, request, want, timeout=5):
    """Writes request on a new connection, reads until len(want) bytes came
    (or the peer closed, or timeout); returns what was read."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(request)
        got = b""
        end = time.monotonic() + timeout
        while len(got) < len(want) and time.monotonic() < end:
            b = s.recv(4096)
            if not b:
                break
            got += b
        return got


CHECK = [  # (request, reply): the same bytes from weft, Go and Redis
    (b"*1\r\n$4\r\nPING\r\n", b"+PONG\r\n"),
    (b"*3\r\n$3\r\nSET\r\n$8\r\nr9:check\r\n$5\r\nhello\r\n", b"+OK\r\n"),
    (b"*2\r\n$3\r\nGET\r\n$8\r\nr9:check\r\n", b"$5\r\nhello\r\n"),
    (b"*2\r\n$4\r\nINCR\r\n$8\r\nr9:check\r\n", b"-ERR value is not an integer or out of range\r\n"),
    (b"*2\r\n$3\r\nDEL\r\n$8\r\nr9:check\r\n", b":1\r\n"),
]


def check(port):
    """None if the server answers CHECK exactly (pipelined, one write), else
    what was wrong."""
    request = b"".join(r for r, _ in CHECK)
    want = b"".join(w for _, w in CHECK)
    try:
        got = exchange(port, request, want)
    except OSError as e:
        return f"check: {e}"
    return None if got == want else f"check: got {got!r}, expected {want!r}"


def run_bench(args, port, conns, pipeline, requests, test, logf):
    """One redis-benchmark run on CPU 1: (result dict, error or None)."""
    cmd = ["taskset", "-c", "1", args.redis_benchmark, "-h", "127.0.0.1", "-p", str(port), "-c", str(conns),
           "-P", str(pipeline), "-n", str(requests), "-r", str(args.keyspace), "-t", test, "--csv"]
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
    limit = t0 + BENCH_SLACK_S + requests / 2000.0
    killed = False
    while True:  # wait4 for its rusage (taskset execs it), bounded
        pid, st, ru = os.wait4(p.pid, os.WNOHANG)
        if pid == p.pid:
            break
        if time.monotonic() > limit:
            p.kill()
            killed = True
            _, st, ru = os.wait4(p.pid, 0)
            break
        time.sleep(0.01)
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(st)
    out.seek(0)
    err.seek(0)
    text, etext = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    out.close()
    err.close()
    logf.write(f"---- {' '.join(cmd)} (exit {p.returncode}, {wall:.2f} s) ----\n{text}{etext[-2000:]}\n")
    logf.flush()
    res = {"bench_wall_s": wall, "bench_cpu_s": ru.ru_utime + ru.ru_stime, "bench_status": p.returncode}
    rows = {}
    for row in csv.reader(io.StringIO(text)):
        if len(row) >= 7 and row[0] != "test":
            rows[row[0]] = row
    row = rows.get(TESTS[test])
    if row:
        try:
            res.update({"rps": float(row[1]), "avg_ms": float(row[2]), "p50_ms": float(row[4]),
                        "p99_ms": float(row[6])})
        except ValueError:
            row = None
    last_err = etext.strip().splitlines()[-1:] if etext.strip() else []
    if killed:
        return res, f"redis-benchmark still running {limit - t0:.0f} s after its start: killed"
    if p.returncode != 0 or not row:
        return res, (f"redis-benchmark exit status {p.returncode}"
                     + (f": {last_err[0][:200]}" if last_err else "") + ("" if row else "; no CSV row"))
    return res, None


def run_strace(args, srv, logf):
    """R9b: strace -c -f attached to every thread of srv over one -c 50 -P 1
    ping_mbulk run. Returns (sample fields, error or None)."""
    outf = tempfile.NamedTemporaryFile(prefix="r9-strace-", suffix=".txt", delete=False)
    outf.close()
    errf = tempfile.TemporaryFile()
    cmd = [args.strace, "-c", "-f", "-p", str(srv.proc.pid), "-o", outf.name]
    st = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=errf, start_new_session=True)
    try:
        # Attached once strace has said so for every thread of the server.
        want = len(srv.threads())
        deadline = time.monotonic() + 10
        attached = 0
        while time.monotonic() < deadline and st.poll() is None:
            errf.seek(0)
            said = errf.read().decode(errors="replace")
            # "Process N attached" per thread, or once "... attached with K threads"
            attached = sum(int(k) if k else 1 for k in re.findall(r"attached(?: with (\d+) threads)?", said))
            if attached >= want:
                break
            time.sleep(0.05)
        if st.poll() is not None or attached < want:
            errf.seek(0)
            msg = errf.read().decode(errors="replace").strip().splitlines()[-2:]
            return {}, f"strace did not attach ({attached}/{want} threads): {' | '.join(msg)}"
        time.sleep(0.1)
        res, err = run_bench(args, srv.port, 50, 1, args.syscall_requests, "ping_mbulk", logf)
        st.send_signal(signal.SIGINT)  # detach: strace writes its summary
        try:
            st.wait(timeout=30)
        except subprocess.TimeoutExpired:
            st.kill()
            st.wait(timeout=10)
            return res, "strace did not exit 30 s after SIGINT: killed"
        if err:
            return res, err
        with open(outf.name) as f:
            text = f.read()
        logf.write(f"---- {' '.join(cmd)} ----\n{text}\n")
        logf.flush()
        calls, total = {}, None
        for line in text.splitlines():
            f = line.split()
            # % time, seconds, usecs/call, calls, [errors,] syscall
            if len(f) >= 5 and re.fullmatch(r"[0-9.]+", f[0]) and f[3].isdigit():
                if f[-1] == "total":
                    total = int(f[3])
                else:
                    calls[f[-1]] = int(f[3])
        if total is None:
            return res, f"no total line in strace's summary: {text.strip()[-200:]!r}"
        res.update({"syscalls": total, "syscalls_by_name": calls, "requests": args.syscall_requests,
                    "syscalls_per_req": total / args.syscall_requests})
        return res, None
    finally:
        if st.poll() is None:
            st.kill()
            st.wait(timeout=10)
        errf.close()
        os.unlink(outf.name)


def fmt(x, digits=0):
    return "-" if x is None else f"{x:,.{digits}f}"


def spread(xs, digits=0):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    return f"{fmt(med(xs), digits)} [{fmt(min(xs), digits)}, {fmt(max(xs), digits)}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weft", default=os.path.join(ROOT, "build/gcc-release/examples/weft_example_17_redis_server"))
    ap.add_argument("--weft-io", default=None, choices=("epoll", "io_uring", "automatic"),
                    help="weft's --io (default: the example's default, automatic)")
    ap.add_argument("--go", default=os.path.join(ROOT, "build/bench/weft_bench_resp_go"))
    ap.add_argument("--go-missing", default=None, help="why there is no Go server (scripts/bench)")
    ap.add_argument("--go-cmd", default=None, help="the go command that built the Go server (for `go version`)")
    ap.add_argument("--redis-server", default=shutil.which("redis-server") or "/usr/bin/redis-server")
    ap.add_argument("--redis-benchmark", default=shutil.which("redis-benchmark") or "/usr/bin/redis-benchmark")
    ap.add_argument("--strace", default=shutil.which("strace") or "/usr/bin/strace")
    ap.add_argument("--quick", action="store_true", help="1 repetition of a few thousand requests (CI)")
    ap.add_argument("--reps", type=int, default=None, help="repetitions (default 5, --quick 1)")
    ap.add_argument("--requests", default=None,
                    help="requests per run: N, or P1N,P16N for -P 1 and the larger -P "
                         "(default 200000,2000000; --quick 2000,10000)")
    ap.add_argument("--warmup", type=int, default=None,
                    help="unrecorded ping_mbulk requests first on every server process (default 20000, --quick 0)")
    ap.add_argument("--syscall-requests", type=int, default=None,
                    help="requests of the strace run (R9b; default 50000, --quick 2000; 0: no R9b)")
    ap.add_argument("--conns", default="50,1000")
    ap.add_argument("--pipeline", default="1,16")
    ap.add_argument("--tests", default=",".join(TESTS))
    ap.add_argument("--keyspace", type=int, default=100000, help="redis-benchmark -r")
    ap.add_argument("--servers", default=",".join(SERVERS))
    ap.add_argument("--out", default=None, help="default bench/results (--quick: build/bench/results)")
    ap.add_argument("--log", default=os.path.join(ROOT, "build/bench/r9-log.txt"))
    args = ap.parse_args()
    args.reps = args.reps or (1 if args.quick else 5)
    if args.requests is None:
        args.requests = "2000,10000" if args.quick else "200000,2000000"
    try:
        req = [int(x) for x in args.requests.split(",")]
    except ValueError:
        ap.error("--requests: N or N1,N2")
    req_p1, req_pn = (req[0], req[-1])
    args.warmup = args.warmup if args.warmup is not None else (0 if args.quick else 20000)
    if args.syscall_requests is None:
        args.syscall_requests = 2000 if args.quick else 50000
    args.out = args.out or os.path.join(ROOT, "build/bench/results" if args.quick else "bench/results")
    conns_list = [int(x) for x in args.conns.split(",") if x]
    pipes = [int(x) for x in args.pipeline.split(",") if x]
    tests = [t for t in args.tests.split(",") if t]
    for t in tests:
        if t not in TESTS:
            ap.error(f"unknown test {t!r} (known: {', '.join(TESTS)})")
    if not (1 <= args.reps <= 20 and all(1 <= c <= 10000 for c in conns_list) and all(1 <= p <= 1000 for p in pipes)
            and all(r >= 1 for r in req) and args.warmup >= 0 and args.syscall_requests >= 0):
        ap.error("--reps in [1, 20], --conns in [1, 10000], --pipeline in [1, 1000], counts positive")

    for tool in ("taskset", args.redis_benchmark):
        if shutil.which(tool) is None:
            log(f"r9: {tool} is missing (Debian packages util-linux, redis-tools): nothing measured")
            return 1

    servers, missing = {}, {}
    for name in [s for s in args.servers.split(",") if s]:
        if name not in SERVERS:
            ap.error(f"unknown server {name!r}")
        path = {"weft": args.weft, "go": args.go, "redis": args.redis_server}[name]
        if name == "go" and args.go_missing:
            missing[name] = args.go_missing
        elif os.access(path, os.X_OK):
            servers[name] = path
        else:
            missing[name] = (f"not built ({os.path.relpath(path, ROOT)} is missing)" if name != "redis"
                             else f"{path} is not installed (Debian package redis-server)")
        if name in missing:
            log(f"r9: {name}: {missing[name]}")
    if "weft" in missing:
        log("r9: weft's server is missing: nothing to compare")
        return 1
    strace_missing = None
    if args.syscall_requests == 0:
        strace_missing = "--syscall-requests 0"
    elif shutil.which(args.strace) is None:
        strace_missing = f"{args.strace} is not installed (Debian package strace)"
    nofile = raise_nofile(max(conns_list) * 2 + 256)

    versions = {
        "weft": f"examples/17_redis_server.cpp at {git_rev() or 'an unknown commit (no readable .git)'}",
        "redis_benchmark": first_line([args.redis_benchmark, "--version"]),
        "kernel": platform.release(),
    }
    if "go" in servers:
        versions["go_binary"] = first_line([servers["go"], "-version"])
        if args.go_cmd:
            versions["go_cmd"] = first_line([args.go_cmd, "version"])
    if "redis" in servers:
        versions["redis_server"] = first_line([servers["redis"], "--version"])
    if not strace_missing:
        versions["strace"] = first_line([args.strace, "-V"])

    os.makedirs(os.path.dirname(os.path.abspath(args.log)), exist_ok=True)
    logf = open(args.log, "a")
    logf.write(f"\n==== r9 {time.strftime('%Y-%m-%d %H:%M:%S')} ====\n")
    logf.flush()

    scenarios = [(c, p) for c in conns_list for p in pipes]
    per_run = {p: (req_p1 if p == 1 else req_pn) for p in pipes}
    bound = int(args.reps * len(scenarios) * len(tests) * len(servers) * 120) + 600

    def start(name):
        env = dict(os.environ)
        if name == "weft":
            argv = [servers[name], "--serve", "--port", "0", "--workers", "1"]
            if args.weft_io:
                argv += ["--io", args.weft_io]
            return Server(name, argv, env, logf)
        if name == "go":
            env["GOMAXPROCS"] = "1"
            return Server(name, [servers[name], "-port", "0", "-max-seconds", str(bound)], env, logf)
        port = free_port()
        return Server(name, [servers[name], "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--daemonize", "no", "--maxclients",
                             str(max(10000, max(conns_list) + 32))], env, logf, port=port)

    state0 = machine_state()
    date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    samples, sys_samples, failures = [], [], []
    backends = {}
    started = time.monotonic()

    def fail(entry, name, what):
        entry["error"] = what
        failures.append({"rep": entry["rep"], "server": name, "what": entry.get("what", ""), "error": what})
        log(f"r9: rep {entry['rep'] + 1} {entry.get('what', '')} {name}: FAILED: {what}")

    def finish(srv, entry, name):
        why = srv.stop()
        srv.close()
        for line in srv.lines:
            if line.startswith("io backend: "):
                backends[name] = line[len("io backend: "):]
        if why and "error" not in entry:
            fail(entry, name, f"stop: {why}")

    for rep in range(args.reps):
        for conns, pipe in scenarios:
            for name in servers:
                what = f"-c {conns} -P {pipe}"
                head = {"rep": rep, "server": name, "conns": conns, "pipeline": pipe, "what": what}
                try:
                    srv = start(name)
                except RuntimeError as e:
                    for t in tests:
                        samples.append(dict(head, test=t, error=f"did not start: {e}"))
                    fail(head, name, f"did not start: {e}")
                    continue
                try:
                    wrong = check(srv.port)
                    if wrong:
                        for t in tests:
                            samples.append(dict(head, test=t, error=wrong))
                        fail(head, name, wrong)
                        continue
                    if args.warmup:
                        _, err = run_bench(args, srv.port, conns, pipe, args.warmup, "ping_mbulk", logf)
                        if err:
                            fail(head, name, f"warm-up: {err}")
                            continue
                    for t in tests:
                        s = dict(head, test=t, what=f"{what} {t}", requests=per_run[pipe])
                        samples.append(s)
                        cpu0 = proc_cpu(srv.proc.pid)
                        res, err = run_bench(args, srv.port, conns, pipe, per_run[pipe], t, logf)
                        s.update(res)
                        if srv.alive():
                            s["server_cpu_s"] = proc_cpu(srv.proc.pid) - cpu0
                            s["cpu_us_per_req"] = s["server_cpu_s"] / per_run[pipe] * 1e6
                            s["server_busy"] = s["server_cpu_s"] / s["bench_wall_s"]
                            s["client_busy"] = s["bench_cpu_s"] / s["bench_wall_s"]
                        else:
                            err = f"server died during the run (status {srv.proc.returncode})" + (
                                f"; {err}" if err else "")
                        if err:
                            fail(s, name, err)
                            break
                        log(f"r9: rep {rep + 1} {what} {t:10} {name:5}: {s['rps']:>12,.0f} req/s  server "
                            f"{s['cpu_us_per_req']:6.2f} us/req  busy {100 * s['server_busy']:3.0f}%  client busy "
                            f"{100 * s['client_busy']:3.0f}%  ({time.monotonic() - started:.0f} s)")
                finally:
                    finish(srv, head, name)
        # R9b: a fresh server per repetition, strace attached
        if strace_missing or 50 not in conns_list or 1 not in pipes:
            continue
        for name in servers:
            s = {"rep": rep, "server": name, "what": "R9b -c 50 -P 1 ping_mbulk under strace"}
            sys_samples.append(s)
            try:
                srv = start(name)
            except RuntimeError as e:
                fail(s, name, f"did not start: {e}")
                continue
            try:
                wrong = check(srv.port)
                if wrong:
                    fail(s, name, wrong)
                    continue
                res, err = run_strace(args, srv, logf)
                s.update(res)
                if not srv.alive():
                    err = f"server died during the run (status {srv.proc.returncode})" + (f"; {err}" if err else "")
                if err:
                    fail(s, name, err)
                    continue
                top = sorted(s["syscalls_by_name"].items(), key=lambda kv: -kv[1])[:4]
                log(f"r9: rep {rep + 1} R9b {name:5}: {s['syscalls_per_req']:.3f} syscalls/req ("
                    + ", ".join(f"{k} {v:,}" for k, v in top) + ")")
            finally:
                finish(srv, s, name)
    logf.close()
    state1 = machine_state()

    # ---- summarise -------------------------------------------------------------
    def ok(name, conns, pipe, test, rep=None):
        return [s for s in samples if s["server"] == name and s["conns"] == conns and s["pipeline"] == pipe
                and s["test"] == test and "error" not in s and "cpu_us_per_req" in s
                and (rep is None or s["rep"] == rep)]

    summary = {}
    for conns, pipe in scenarios:
        for t in tests:
            for name in servers:
                xs = ok(name, conns, pipe, t)
                n_all = len([s for s in samples if s["server"] == name and s["conns"] == conns
                             and s["pipeline"] == pipe and s["test"] == t])
                c = {"n": len(xs), "failed": n_all - len(xs)}
                if xs:
                    for key in ("rps", "cpu_us_per_req", "p50_ms", "p99_ms", "server_busy", "client_busy"):
                        vals = [s[key] for s in xs]
                        c[key] = med(vals)
                        c[key + "_min"], c[key + "_max"] = min(vals), max(vals)
                summary[f"c{conns}/P{pipe}/{t}/{name}"] = c

    def paired(conns, pipe, t, peer):
        rs = []
        for rep in range(args.reps):
            a, b = ok("weft", conns, pipe, t, rep), ok(peer, conns, pipe, t, rep)
            if a and b and b[0]["cpu_us_per_req"] > 0:
                rs.append(a[0]["cpu_us_per_req"] / b[0]["cpu_us_per_req"])
        return {"median": med(rs), "min": min(rs), "max": max(rs), "n": len(rs)} if rs else None

    ratios, targets = {}, []
    for conns, pipe in scenarios:
        for t in tests:
            key = f"c{conns}/P{pipe}/{t}"
            ratios[key] = {p: paired(conns, pipe, t, p) for p in servers if p != "weft"}
            r = ratios[key].get("go")
            targets.append({"id": "R9", "scenario": key, "limit": R9_LIMIT, "ratio": r,
                            "met": None if r is None else r["median"] <= R9_LIMIT,
                            "why": None if r is not None else (missing.get("go") or "no repetition in which "
                                                               "weft and go both succeeded")})

    syscalls = {}
    for name in servers:
        xs = [s for s in sys_samples if s["server"] == name and "error" not in s and "syscalls_per_req" in s]
        if xs:
            by = {}
            for s in xs:
                for k, v in s["syscalls_by_name"].items():
                    by.setdefault(k, []).append(v / s["requests"])
            vals = [s["syscalls_per_req"] for s in xs]
            syscalls[name] = {"n": len(xs), "per_req": med(vals), "min": min(vals), "max": max(vals),
                              "by_name_per_req": {k: med(v + [0.0] * (len(xs) - len(v))) for k, v in by.items()}}
    if strace_missing or 50 not in conns_list or 1 not in pipes:
        r9b = {"met": None, "why": strace_missing or "-c 50 -P 1 is not among the scenarios"}
    elif "weft" in syscalls and "go" in syscalls:
        w, g = syscalls["weft"]["per_req"], syscalls["go"]["per_req"]
        r9b = {"met": w <= g, "weft": w, "go": g, "ratio": w / g if g else None}
    else:
        r9b = {"met": None, "why": missing.get("go") or "weft's or Go's strace run failed"}

    # ---- the report ------------------------------------------------------------
    lines = ["## R9: a RESP server under redis-benchmark (weft's example 17 against Go; redis-server for reference)",
             ""]
    backend = backends.get("weft", "?")
    lines.append(
        f"{'**Quick run (CI): the figures say nothing.** ' if args.quick else ''}"
        f"{args.reps} repetition(s); per repetition, scenario and server a fresh server process pinned to CPU 0: "
        f"weft `examples/17_redis_server --serve --workers 1` (io backend: {backend}), Go "
        "`bench/compare/io/resp_go` with GOMAXPROCS=1 (a goroutine per connection, the same commands and "
        "replies), redis-server 7 `--save '' --appendonly no` (a reference, not a peer: an event loop on one "
        "thread, no runtime underneath); servers interleaved. Per test one run of `taskset -c 1 redis-benchmark "
        f"-c C -P P -n N -r {args.keyspace:,} -t TEST --csv` (N = {req_p1:,} at -P 1, {req_pn:,} at larger -P"
        + (f"; first {args.warmup:,} unrecorded PING requests on each process" if args.warmup else "")
        + "). Server CPU per request: the server's user+sys (/proc/PID/stat, all threads) over the run, divided "
        "by N. Client busy: redis-benchmark's user+sys over its wall time; near 100% the client (one thread) set "
        "the pace, and CPU per request is then the figure that compares. Cells: median [min, max].")
    lines.append("")
    vers = [f"weft: {versions['weft']}"]
    if "go_binary" in versions:
        vers.append(f"Go server built with {versions['go_binary']}"
                    + (f" (`{versions['go_cmd']}`)" if versions.get("go_cmd") else ""))
    if "redis_server" in versions:
        vers.append(f"redis-server: {versions['redis_server']}")
    vers.append(f"redis-benchmark: {versions['redis_benchmark']}")
    vers.append(f"kernel {versions['kernel']}")
    lines.append("Versions: " + "; ".join(vers) + ".")
    lines.append("")
    lines.append(f"Machine at start: {state0}; at end: {state1}. RLIMIT_NOFILE {nofile}.")
    if missing:
        lines.append("")
        for name, why in missing.items():
            lines.append(f"- {name}: not measured: {why}")
    lines.append("")
    lines.append("| scenario | test | server | requests/s | server CPU us/request | p99 ms | server busy % "
                 "| client busy % |")
    lines.append("|---|---|---|---:|---:|---:|---:|---:|")
    for conns, pipe in scenarios:
        for t in tests:
            for name in list(servers) + list(missing):
                label = f"-c {conns:,} -P {pipe}"
                if name in missing:
                    lines.append(f"| {label} | {t} | {name} | not measured | - | - | - | - |")
                    continue
                xs = ok(name, conns, pipe, t)
                c = summary[f"c{conns}/P{pipe}/{t}/{name}"]
                if not xs:
                    lines.append(f"| {label} | {t} | {name} | failed | - | - | - | - |")
                    continue
                lines.append(
                    f"| {label} | {t} | {name}{' (reference)' if name == 'redis' else ''} "
                    f"| {spread([s['rps'] for s in xs])} | {spread([s['cpu_us_per_req'] for s in xs], 2)} "
                    f"| {fmt(c['p99_ms'], 3)} | {fmt(100 * c['server_busy'])} | {fmt(100 * c['client_busy'])} |")

    lines.append("")
    lines.append("### Targets (reported, not checked)")
    lines.append("")
    lines.append("| target | scenario | limit | measured: weft/Go, median [min, max] | met | weft/redis (reference) |")
    lines.append("|---|---|---|---|---|---|")

    def plain(r):
        return "-" if r is None else f"{r['median']:.2f}x [{r['min']:.2f}, {r['max']:.2f}]"
    for tg in targets:
        conns, pipe, t = tg["scenario"].split("/")
        label = f"-c {int(conns[1:]):,} -P {pipe[1:]} {t}"
        met = "-" if tg["met"] is None else ("yes" if tg["met"] else "no")
        measured = plain(tg["ratio"]) if tg["ratio"] else f"not measured: {tg['why']}"
        lines.append(f"| R9 server CPU per request | {label} | <= {R9_LIMIT}x Go | {measured} | {met} "
                     f"| {plain(ratios[tg['scenario']].get('redis'))} |")
    all_met = [tg["met"] for tg in targets]
    r9_met = None if None in all_met or not all_met else all(all_met)
    if r9b.get("met") is None:
        r9b_text, r9b_met = f"not measured: {r9b['why']}", "-"
    else:
        r9b_text = f"weft {r9b['weft']:.3f}, Go {r9b['go']:.3f} syscalls/request"
        r9b_met = "yes" if r9b["met"] else "no"
    lines.append(f"| R9b system calls per request | -c 50 -P 1 ping_mbulk | <= Go | {r9b_text} | {r9b_met} "
                 f"| {('redis ' + format(syscalls['redis']['per_req'], '.3f')) if 'redis' in syscalls else '-'} |")
    lines.append("")
    overall = "met" if r9_met else ("not decided (a row was not measured)" if r9_met is None else "not met")
    lines.append(f"R9 as a whole (every R9 row within its limit): {overall}. Ratios: each weft sample over the "
                 "other server's sample of the same repetition, scenario and test, median [min, max] over the "
                 "repetitions.")

    if syscalls or sys_samples:
        lines.append("")
        lines.append(f"### R9b: system calls per request (-c 50 -P 1 PING_MBULK, {args.syscall_requests:,} "
                     "requests, `strace -c -f -p PID` attached to every server thread)")
        lines.append("")
        lines.append("A separate run from the CPU runs (strace slows the server down), so it has no timings. "
                     "Everything the server process calls during the run counts (accepting the 50 connections, "
                     "timers, Go's sysmon); one io_uring_enter counts once however many operations it carries.")
        lines.append("")
        lines.append("| server | syscalls/request, median [min, max] | the most frequent, per request |")
        lines.append("|---|---:|---|")
        for name in servers:
            if name not in syscalls:
                lines.append(f"| {name} | failed | - |")
                continue
            y = syscalls[name]
            top = sorted(y["by_name_per_req"].items(), key=lambda kv: -kv[1])[:5]
            lines.append(f"| {name} | {y['per_req']:.3f} [{y['min']:.3f}, {y['max']:.3f}] | "
                         + ", ".join(f"{k} {v:.3f}" for k, v in top) + " |")

    if failures:
        lines.append("")
        lines.append("### Failures")
        lines.append("")
        for f in failures:
            lines.append(f"- rep {f['rep'] + 1} {f['what']} {f['server']}: {f['error']}")

    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "r9.md"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out, "r9.json"), "w") as f:
        json.dump({"meta": {"date": date, "quick": args.quick, "reps": args.reps, "requests_p1": req_p1,
                            "requests_pn": req_pn, "warmup": args.warmup, "syscall_requests": args.syscall_requests,
                            "keyspace": args.keyspace, "conns": conns_list, "pipeline": pipes, "tests": tests,
                            "versions": versions, "weft_backend": backends.get("weft"), "nofile": nofile,
                            "machine_start": state0, "machine_end": state1},
                   "args": vars(args), "missing": missing, "strace_missing": strace_missing,
                   "summary": summary, "ratios": ratios,
                   "targets": {"R9": {"limit": R9_LIMIT, "met": r9_met, "rows": targets}, "R9b": r9b},
                   "syscalls": syscalls, "failures": failures, "samples": samples, "syscall_samples": sys_samples},
                  f, indent=1)
    log(f"r9: wrote {os.path.join(args.out, 'r9.md')} and r9.json; servers' and redis-benchmark's output in "
        f"{args.log}")

    if any(f["server"] == "weft" for f in failures):
        log("r9: weft's server failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
