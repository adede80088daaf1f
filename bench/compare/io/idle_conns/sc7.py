#!/usr/bin/env python3
"""SC7 (issue 26) and SH6 (issue 42): idle loopback connections at the fd limit;
with --shape real, SC9 (issue 43): idle connections of a real server's shape.

As many idle loopback connections as one server process may open, each
served by one task (weft) or goroutine (Go) that reads with a 60 s read
deadline; then every connection echoes one message. Measured: the
server's memory per idle connection (VmRSS and VmPTE from
/proc/<pid>/status, after the connections are open and have been idle for
--settle seconds, minus the same before the first connection), and of the
echo round: messages lost, messages late, echo latency.

  target SC7: weft's RSS per connection <= 0.5x Go's (same count), 0 lost
  target SH6: the echo round (first write to last reply) <= 1.0x Go's

each at every worker count of --workers (default 1 and 2).

The servers (one fresh process per sample, pinned to CPU 0 with one worker
/ GOMAXPROCS=1, to CPUs 0 and 1 with two; default runtime options
otherwise, so weft runs the backend `automatic` picks for that count):

  weft  bench/compare/io/idle_conns/server_weft.cpp (weft_bench_idle_conns):
        one weft::spawn per connection, read_some(buf, ec, io::after(60 s)),
        write_all, again; the buffer on the task's stack.
  go    bench/compare/io/idle_conns/server_go: a goroutine per connection,
        SetReadDeadline(now + 60 s) before every Read, Write, again; the
        buffer make([]byte, --buf) per connection.

The clients (bench/compare/io/idle_conns/client, Go, GOMAXPROCS=1, pinned to
CPU 1) are separate processes, at most --per-client connections each (every
process has the same RLIMIT_NOFILE), each binding its connections to two
127.x.y.z source addresses of its own (new ones for every sample) so that
even 100,000 connections fit in the ephemeral ports. Loopback only.

Per sample: start the server, wait for "listening on <port>", read its
status (base); start the clients; wait until each has connected and the
server holds a descriptor for every connection (/proc/<pid>/fd); sleep
--settle (default 2 s; scripts/bench passes 65 s in full runs, past weft's
one-minute shrink_idle_after); read
its status (idle); every client sends one --size byte message on each of
its connections at once and checks each echo (late past --late-ms, lost if
not back and correct within --lost-ms); read the status again (after
echo); the clients close everything with SO_LINGER 0 (no TIME_WAIT left);
the server is killed. Servers alternate within each repetition, and the
one that goes first alternates between repetitions.

The default count is RLIMIT_NOFILE's hard limit minus 200 (the server needs
a few descriptors besides its connections); --count takes any count the
limit allows (e.g. 100,000 where the hard limit is above 100,200).

This script builds nothing (scripts/bench does):

  /usr/bin/python3 bench/compare/io/idle_conns/sc7.py \\
      --weft build/bench/bench/weft_bench_idle_conns \\
      --go build/bench/weft_bench_idle_conns_go \\
      --client build/bench/weft_bench_idle_conns_client \\
      [--count N] [--reps R] [--quick] [--out DIR]

--shape real (SC9) runs both servers with their `real` shape instead: a
buffered reader and writer of 16 KiB each per connection (weft:
io::buffered_reader / buffered_writer; Go: bufio.NewReaderSize /
NewWriterSize), the read deadline before every fill, and one pending idle
timer of 300 s per connection, re-armed on every request (weft: weft::timer;
Go: time.AfterFunc); --buf does not apply. Its target:

  target SC9: weft's RSS per connection <= 0.5x Go's same shape, 0 lost

(the issue's setting: --count 10000 --settle 10). The echo round is shown,
with no target. It writes OUT/sc9.md and OUT/sc9.json.

It prints the markdown table and writes OUT/sc7.md and OUT/sc7.json.
Exit status: 1 if weft's server failed in any way (did not start, died, did
not accept every connection, lost a message or was late with one), 2 on a
usage error, 0 otherwise; a peer's failure is reported, not fatal. The
memory figures are never checked.
"""

import argparse
import json
import math
import os
import resource
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", ".."))
TARGET_RSS_VS_GO = 0.5
TARGET_ECHO_VS_GO = 1.0  # SH6 (issue 42): the echo round after the idle time


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def proc_status(pid):
    """VmRSS, RssAnon, VmPTE, VmSize, Threads of a process, in bytes (Threads:
    a count)."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile", "VmPTE", "VmSize", "VmHWM"):
                out[key] = int(rest.split()[0]) * 1024
            elif key == "Threads":
                out[key] = int(rest.split()[0])
    return out


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def map_count(pid):
    with open(f"/proc/{pid}/maps") as f:
        return sum(1 for _ in f)


def machine_state():
    state = {}
    for key, path in (("loadavg", "/proc/loadavg"), ("cpu_pressure", "/proc/pressure/cpu")):
        try:
            with open(path) as f:
                state[key] = f.readline().strip()
        except OSError:
            pass
    return state


class Lines:
    """Lines of a child's stdout, read with os.read (select() on a buffered
    reader misses lines that are already in its buffer)."""

    def __init__(self, proc):
        self.proc = proc
        self.fd = proc.stdout.fileno()
        self.buf = b""
        self.eof = False

    def next(self, deadline, what):
        """The next line (without its newline) before deadline; raises
        RuntimeError on timeout or end of output."""
        while True:
            nl = self.buf.find(b"\n")
            if nl >= 0:
                line, self.buf = self.buf[:nl], self.buf[nl + 1:]
                return line.decode(errors="replace").strip()
            if self.eof:
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
                raise RuntimeError(f"{what}: output ended (exit status {self.proc.returncode})")
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"{what}: no answer in time")
            r, _, _ = select.select([self.fd], [], [], min(left, 0.5))
            if r:
                chunk = os.read(self.fd, 1 << 16)
                if chunk:
                    self.buf += chunk
                else:
                    self.eof = True


def read_json_line(proc, deadline, what):
    """The next stdout line of proc (a Proc) that is a JSON object."""
    while True:
        line = proc.lines.next(deadline, what)
        if line.startswith("{"):
            return json.loads(line)


class Proc:
    """A child in a session of its own; stop() kills that process group
    (this script's own child and its descendants only)."""

    def __init__(self, name, argv, env, logf, stdin=None):
        self.name = name
        self.logf = logf
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE, stderr=self.err, env=env,
                                     start_new_session=True)
        self.lines = Lines(self.proc)
        logf.write(f"{name}: pid {self.proc.pid}: {' '.join(argv)}\n")
        logf.flush()

    def alive(self):
        return self.proc.poll() is None

    def stderr_tail(self, n=3):
        self.err.seek(0)
        tail = self.err.read().decode(errors="replace").strip().splitlines()[-n:]
        return ("; stderr: " + " | ".join(tail)) if tail else ""

    def stop(self, grace=0.0):
        if self.proc.poll() is None and grace > 0:
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            log(f"sc7: {self.name} (pid {self.proc.pid}) did not exit after SIGKILL")
        for f in (self.proc.stdin, self.proc.stdout):
            if f:
                try:
                    f.close()
                except OSError:
                    pass
        if not self.err.closed:
            self.err.seek(0)
            data = self.err.read()
            if data:
                self.logf.write(f"---- {self.name} (pid {self.proc.pid}) stderr ----\n")
                self.logf.write(data.decode(errors="replace"))
            self.logf.flush()
            self.err.close()


def echo_round(clients, args):
    """Every client echoes one message on each of its connections at once;
    returns their reports (one JSON object per client)."""
    for c in clients:
        c.proc.stdin.write(b"echo\n")
        c.proc.stdin.flush()
    deadline = time.monotonic() + args.lost_ms / 1000 + 30
    return [read_json_line(c, deadline, c.name) for c in clients]


def run_sample(args, name, path, sample_no, logf, workers):
    """One fresh server with `workers` workers (GOMAXPROCS for Go), the
    clients, the echo round. Returns a dict; an 'error' key says what went
    wrong."""
    n = args.count
    s = {"server": name, "count": n, "workers": workers}
    env = dict(os.environ, GOMAXPROCS=str(workers))
    env.pop("GOGC", None)
    env.pop("GODEBUG", None)
    if name == "go":
        argv = [path, "-port", "0", "-buf", str(args.buf), "-read-timeout", str(args.read_timeout), "-max-seconds",
                str(args.sample_limit), "-shape", args.shape]
    else:
        argv = [path, "--port", "0", "--workers", str(workers), "--buf", str(args.buf), "--read-timeout", str(args.read_timeout),
                "--max-seconds", str(args.sample_limit), "--shape", args.shape]
    cpus = ",".join(str(c) for c in range(workers))
    server = Proc(name, ["taskset", "-c", cpus] + argv, env, logf)
    # The clients are Go processes with GOMAXPROCS=1 of their own.
    env = dict(env, GOMAXPROCS="1")
    clients = []
    t_start = time.monotonic()
    try:
        # listening
        deadline = time.monotonic() + 10
        port = None
        try:
            while port is None:
                text = server.lines.next(deadline, "server")
                if text.startswith("runtime "):
                    s["runtime"] = text[len("runtime "):]
                elif text.startswith("listening on "):
                    port = int(text.split()[2])
        except RuntimeError:
            pass
        if port is None:
            raise RuntimeError("server did not print 'listening on <port>' within 10 s"
                               + server.stderr_tail())
        time.sleep(0.3)
        pid = server.proc.pid
        s["base"] = proc_status(pid)
        base_fds = fd_count(pid)
        s["base_fds"] = base_fds

        # clients
        k = max(1, math.ceil(n / args.per_client))
        shares = [n // k + (1 if j < n % k else 0) for j in range(k)]
        a = 1 + sample_no % 250
        for j, share in enumerate(shares):
            naddr = max(2, math.ceil(share / 20000) + 1)
            srcs = ",".join(f"127.{a}.{j + 1}.{m + 1}" for m in range(naddr))
            cargv = ["taskset", "-c", "1", args.client, "-addr", f"127.0.0.1:{port}", "-count", str(share),
                     "-src", srcs, "-size", str(args.size), "-late-ms", str(args.late_ms),
                     "-lost-ms", str(args.lost_ms), "-max-seconds", str(args.sample_limit)]
            clients.append(Proc(f"{name}-client{j}", cargv, env, logf, stdin=subprocess.PIPE))
        connect_deadline = time.monotonic() + args.connect_limit
        connected = [read_json_line(c, connect_deadline, c.name) for c in clients]
        s["connected"] = sum(c["ok"] for c in connected)
        s["connect_failed"] = sum(c["failed"] for c in connected)
        s["connect_s"] = max(c["seconds"] for c in connected)
        if s["connect_failed"]:
            s["connect_error"] = next(c["first_error"] for c in connected if c["failed"])

        # the server holds every connection
        accepted = 0
        while time.monotonic() < connect_deadline:
            if not server.alive():
                raise RuntimeError(f"server died (exit status {server.proc.returncode}){server.stderr_tail()}")
            accepted = fd_count(pid) - base_fds
            if accepted >= s["connected"]:
                break
            time.sleep(0.1)
        s["accepted"] = accepted
        s["accept_s"] = time.monotonic() - t_start
        if accepted < s["connected"]:
            raise RuntimeError(f"server accepted {accepted} of {s['connected']} connections "
                               f"within {args.connect_limit} s")

        if args.shape == "real":
            # SC9: an idle connection of a real server has served requests.
            # Each one echoes one message first (its buffers used once),
            # then idles; what it held before that is kept for information.
            s["fresh"] = proc_status(pid)
            s["warm_lost"] = n - sum(e["ok"] for e in echo_round(clients, args))

        time.sleep(args.settle)
        if not server.alive():
            raise RuntimeError(f"server died (exit status {server.proc.returncode}){server.stderr_tail()}")
        s["idle"] = proc_status(pid)
        s["idle_maps"] = map_count(pid)

        echoes = echo_round(clients, args)
        if server.alive():
            s["after_echo"] = proc_status(pid)
        lat = sorted(x for e in echoes for x in (e.get("lat_us") or []))  # Go writes an empty list as null
        s["sent"] = sum(e["sent"] for e in echoes)
        s["echoed"] = sum(e["ok"] for e in echoes)
        s["late"] = sum(e["late"] for e in echoes)
        # lost: every message of the count that did not come back correct
        # (connections that never opened included)
        s["lost"] = n - s["echoed"]
        s["echo_s"] = max(e["seconds"] for e in echoes)
        errs = [e["first_error"] for e in echoes if e.get("first_error")]
        if errs:
            s["echo_error"] = errs[0]
        if lat:
            s["lat_p50_us"] = lat[len(lat) // 2]
            s["lat_p99_us"] = lat[min(len(lat) - 1, math.ceil(0.99 * len(lat)) - 1)]
            s["lat_max_us"] = lat[-1]

        for c in clients:
            c.proc.stdin.write(b"close\n")
            c.proc.stdin.flush()
        close_deadline = time.monotonic() + 30
        for c in clients:
            try:
                read_json_line(c, close_deadline, c.name)
            except RuntimeError as e:
                log(f"sc7: {e}")
        s["server_alive_at_end"] = server.alive()
        if not server.alive():
            raise RuntimeError(f"server died (exit status {server.proc.returncode}){server.stderr_tail()}")
        problems = []
        if s["connect_failed"]:
            problems.append(f"{s['connect_failed']} connects failed ({s.get('connect_error')})")
        if s["lost"]:
            problems.append(f"{s['lost']} messages lost ({s.get('echo_error')})")
        if s["late"]:
            problems.append(f"{s['late']} messages late (> {args.late_ms} ms)")
        if problems:
            s["error"] = "; ".join(problems)
    except (RuntimeError, OSError, ValueError, KeyError) as e:
        s["error"] = str(e)
    finally:
        for c in clients:
            c.stop(grace=5)
        server.stop()
    s["seconds"] = time.monotonic() - t_start
    if "idle" in s and "base" in s and s.get("connected") and s.get("accepted", 0) >= s["connected"]:
        # per connection the clients opened (the fd count may include a
        # descriptor or two the runtime opened lazily after the base reading)
        conns = s["connected"]
        s["rss_per_conn"] = (s["idle"]["VmRSS"] - s["base"]["VmRSS"]) / conns
        s["pte_per_conn"] = (s["idle"]["VmPTE"] - s["base"]["VmPTE"]) / conns
        if "after_echo" in s:
            s["rss_after_echo_per_conn"] = (s["after_echo"]["VmRSS"] - s["base"]["VmRSS"]) / conns
        if "fresh" in s:
            s["rss_fresh_per_conn"] = (s["fresh"]["VmRSS"] - s["base"]["VmRSS"]) / conns
    return s


def med(xs):
    return statistics.median(xs) if xs else None


def spread(xs, fmt):
    if not xs:
        return "-"
    return f"{fmt(med(xs))} [{fmt(min(xs))}-{fmt(max(xs))}]"


def kib(x):
    return f"{x / 1024:,.2f} KiB"


def byts(x):
    return f"{x:,.0f} B"


def ms(x):
    return f"{x / 1000:,.1f} ms"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weft", default=os.path.join(ROOT, "build/bench/bench/weft_bench_idle_conns"))
    ap.add_argument("--go", default=os.path.join(ROOT, "build/bench/weft_bench_idle_conns_go"))
    ap.add_argument("--client", default=os.path.join(ROOT, "build/bench/weft_bench_idle_conns_client"))
    ap.add_argument("--count", type=int, default=None,
                    help="connections (default: RLIMIT_NOFILE hard limit - 200; --quick 2,000)")
    ap.add_argument("--reps", type=int, default=None, help="repetitions (default 5, --quick 1)")
    ap.add_argument("--quick", action="store_true", help="2,000 connections, 1 repetition (CI)")
    ap.add_argument("--settle", type=float, default=2.0, help="idle seconds before the memory is read")
    ap.add_argument("--buf", type=int, default=4096, choices=(512, 4096, 16384),
                    help="each server's read buffer per connection")
    ap.add_argument("--size", type=int, default=64, help="echo message size, bytes")
    ap.add_argument("--late-ms", type=int, default=5000, help="an echo later than this is late")
    ap.add_argument("--lost-ms", type=int, default=20000, help="an echo not back within this is lost")
    ap.add_argument("--per-client", type=int, default=10000, help="connections per client process")
    ap.add_argument("--servers", default="weft,go")
    ap.add_argument("--workers", default="1,2",
                    help="the servers' worker counts (weft `workers`, Go GOMAXPROCS), each measured")
    ap.add_argument("--shape", default="bare", choices=("bare", "real"),
                    help="bare: SC7 / SH6's servers; real: SC9's (buffered streams and an idle timer each)")
    ap.add_argument("--out", default=None, help="default bench/results (--quick: build/bench/results)")
    ap.add_argument("--log", default=None, help="default build/bench/sc7-log.txt (--shape real: sc9-log.txt)")
    args = ap.parse_args()
    real = args.shape == "real"
    tag = "sc9" if real else "sc7"
    args.log = args.log or os.path.join(ROOT, f"build/bench/{tag}-log.txt")

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = hard if hard != resource.RLIM_INFINITY else 1 << 20
    args.reps = args.reps or (1 if args.quick else 5)
    if args.count is None:
        args.count = 2000 if args.quick else limit - 200
    args.out = args.out or os.path.join(ROOT, "build/bench/results" if args.quick else "bench/results")
    if not (1 <= args.reps <= 20):
        ap.error("--reps must be in [1, 20]")
    if not (1 <= args.count <= 200000):
        ap.error("--count must be in [1, 200000]")
    if args.count > limit - 50:
        ap.error(f"--count {args.count} does not fit: RLIMIT_NOFILE's hard limit is {limit} and the server "
                 "needs a few descriptors besides its connections")
    if not (1000 <= args.per_client <= limit - 100):
        ap.error(f"--per-client must be in [1000, {limit - 100}]")
    if not (0.2 <= args.settle <= 120) or not (16 <= args.size <= 65536):
        ap.error("--settle must be in [0.2, 120], --size in [16, 65536]")
    try:
        args.workers = [int(x) for x in str(args.workers).split(",") if x]
    except ValueError:
        ap.error("--workers takes worker counts separated by commas, e.g. 1,2")
    if not args.workers or any(not (1 <= w <= min(2, os.cpu_count() or 1)) for w in args.workers):
        ap.error(f"--workers: each count must be in [1, {min(2, os.cpu_count() or 1)}] (the servers use CPUs 0..W-1)")
    if not (1 <= args.late_ms <= args.lost_ms <= 120000):
        ap.error("need 1 <= --late-ms <= --lost-ms <= 120000")
    # The servers' read deadline: 60 s, or longer than the idle wait, which
    # must end before it (scripts/bench's full runs idle 65 s, past weft's
    # one-minute shrink threshold).
    args.read_timeout = max(60, int(math.ceil(args.settle)) + 60)
    # Bounds: connects at (pessimistically) 500 a second, plus slack.
    args.connect_limit = 60 + args.count // 500
    args.sample_limit = args.connect_limit + int(args.settle) + args.lost_ms // 1000 + 120
    if soft < limit:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))

    if shutil.which("taskset") is None:
        log("sc7: taskset is missing (util-linux)")
        return 1
    if not os.access(args.client, os.X_OK):
        log(f"sc7: no client at {args.client} (scripts/bench builds it with go build)")
        return 1
    servers, missing = {}, {}
    for name in [x for x in args.servers.split(",") if x]:
        path = getattr(args, name, None)
        if path and os.access(path, os.X_OK):
            servers[name] = path
        else:
            missing[name] = f"not built ({path} is missing)"
            log(f"sc7: {name}: {missing[name]}")
    if not servers:
        log("sc7: no server to measure")
        return 1

    os.makedirs(os.path.dirname(args.log), exist_ok=True)
    logf = open(args.log, "a")
    logf.write(f"\n==== sc7 {time.strftime('%Y-%m-%d %H:%M:%S')} count {args.count} ====\n")
    logf.flush()
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            max_map_count = int(f.read())
    except OSError:
        max_map_count = None

    state0 = machine_state()
    samples = []
    names = list(servers)
    total = args.reps * len(names) * len(args.workers)
    done = 0
    started = time.monotonic()
    for rep in range(args.reps):
        order = names if rep % 2 == 0 else names[::-1]
        for name, w in [(n_, w_) for w_ in args.workers for n_ in order]:
            s = run_sample(args, name, servers[name], done, logf, w)
            s["rep"] = rep
            done += 1
            samples.append(s)
            el = time.monotonic() - started
            if "rss_per_conn" in s:
                what = (f"RSS/conn {s['rss_per_conn']:,.0f} B, PTE/conn {s['pte_per_conn']:,.0f} B, "
                        f"lost {s.get('lost', '-')}, late {s.get('late', '-')}, "
                        f"echo max {s.get('lat_max_us', 0) / 1000:,.1f} ms")
            else:
                what = "no memory figure"
            log(f"sc7: [{done}/{total}] rep {rep + 1} {name} W={w} {args.count:,} conns: {what}"
                + (f"; FAILED: {s['error']}" if "error" in s else "") + f"  ({el:.0f} s)")
    logf.close()
    state1 = machine_state()

    # ---- summary ----------------------------------------------------------
    def summarize(w):
        summary = {}
        for name in names:
            mine = [s for s in samples if s["server"] == name and s["workers"] == w]
            good = [s for s in mine if "rss_per_conn" in s]
            summary[name] = {
                "samples": len(mine),
                "rss_per_conn": [s["rss_per_conn"] for s in good],
                "pte_per_conn": [s["pte_per_conn"] for s in good],
                "rss_after_echo_per_conn": [s["rss_after_echo_per_conn"] for s in good
                                            if "rss_after_echo_per_conn" in s],
                "rss_fresh_per_conn": [s["rss_fresh_per_conn"] for s in good if "rss_fresh_per_conn" in s],
                "idle_rss": [s["idle"]["VmRSS"] for s in good],
                "connected": [s.get("connected", 0) for s in mine],
                # over the samples that got to the echo round (the others are
                # failures, listed as such); SC9's warm-up echo counts too
                "lost": sum(s["lost"] + s.get("warm_lost", 0) for s in mine if "lost" in s),
                "late": sum(s["late"] for s in mine if "late" in s),
                "echo_rounds": sum(1 for s in mine if "lost" in s),
                "runtime": sorted({s["runtime"] for s in mine if "runtime" in s}),
                "lat_p99_us": [s["lat_p99_us"] for s in mine if "lat_p99_us" in s],
                "lat_max_us": [s["lat_max_us"] for s in mine if "lat_max_us" in s],
                # SH6: the whole echo round, first write to last reply, as the
                # slowest client process saw it; only rounds that lost nothing
                "echo_s": [s["echo_s"] for s in mine if "echo_s" in s and s.get("lost") == 0],
                "errors": [f"rep {s['rep'] + 1}: {s['error']}" for s in mine if "error" in s],
            }
        ratios = []
        for rep in range(args.reps):
            one = {n_: [s for s in samples if s["rep"] == rep and s["server"] == n_ and s["workers"] == w]
                   for n_ in ("weft", "go")}
            if not one["weft"] or not one["go"]:
                continue
            ws, gs = one["weft"][0], one["go"][0]
            r = {}
            if "rss_per_conn" in ws and "rss_per_conn" in gs and gs["rss_per_conn"] > 0:
                r["rss"] = ws["rss_per_conn"] / gs["rss_per_conn"]
                r["rss_pte"] = ((ws["rss_per_conn"] + ws["pte_per_conn"])
                                / (gs["rss_per_conn"] + gs["pte_per_conn"]))
            if ws.get("lost") == 0 and gs.get("lost") == 0 and gs.get("echo_s", 0) > 0:
                r["echo"] = ws["echo_s"] / gs["echo_s"]
            if r:
                ratios.append(r)
        return summary, ratios

    by_workers = {str(w): dict(zip(("summary", "ratios"), summarize(w))) for w in args.workers}

    lines = ["## SC9: idle connections of a real server's shape" if real else
             "## SC7 and SH6: idle loopback connections at the fd limit", ""]
    if real:
        lines.append(
            "Each connection is served the way a real server does: a buffered reader and a buffered writer of "
            "16 KiB each (weft: io::buffered_reader / buffered_writer, which hold no buffer while idle; Go: "
            "bufio.NewReaderSize / NewWriterSize, which allocate theirs at once), the read deadline before every "
            "fill, and one pending idle timer of 300 s, re-armed on every request (weft: weft::timer; Go: "
            "time.AfterFunc). An idle connection of a real server has served requests: each connection "
            "first echoes one message (a warm-up round, not timed), then idles; \"RSS per connection\" is "
            "read after that, and the target is on it. \"before its first request\" is read right after "
            "the connections were accepted, for information: Go's bufio buffers are allocated then but never "
            "touched, so not resident yet, and weft's lazy buffers are not allocated. "
            "The rest as SC7 below, but the read buffer.")
        lines.append("")
    lines.append(
        f"{args.count:,} connections to one server process (RLIMIT_NOFILE hard limit {limit:,}), "
        f"{args.reps} repetition(s), each sample a fresh server, servers interleaved (the first one "
        "alternating); median [min-max]. Server pinned to CPU 0 with one worker, or to CPUs 0 and 1 with "
        "two (weft: default runtime options but `workers`, so the backend `automatic` picks for that count; "
        "Go: GOMAXPROCS); one task / goroutine per connection, reading with a "
        + (f"{args.read_timeout} s read deadline, echoing through the buffered streams. " if real else
           f"{args.read_timeout} s read deadline, echoing, into a {args.buf:,} B buffer (weft: on the task's stack; Go: "
           "make per connection). ")
        + f"Clients: {math.ceil(args.count / args.per_client)} Go process(es) "
        "(GOMAXPROCS=1) on CPU 1, "
        "connections bound to two 127.x.y.z source addresses per process; at W=2 they share CPU 1 with "
        "one of the server's threads, for both servers alike. Memory: VmRSS and VmPTE from "
        f"/proc/<pid>/status after every connection was accepted and {args.settle:g} s idle, minus the same "
        "before the first connection, divided by the connections. Echo: every connection sends one "
        f"{args.size} B message at once; late: echo after {args.late_ms:,} ms; lost: not back and correct "
        f"within {args.lost_ms:,} ms (or never connected). Latency: write to last byte read, as the client "
        "sees it (all connections at once, so it includes the queue of the burst). Echo round (SH6): "
        "from the clients' first write to the last correct reply, as the slower client process saw it.")
    lines.append("")
    lines.append(f"Machine at start: {state0}; at end: {state1}. vm.max_map_count: {max_map_count}.")
    if missing:
        lines.append("")
        for name, why in missing.items():
            lines.append(f"- {name}: {why}")
    lines.append("")
    lines.append("| server | W | connections |" + (" RSS per connection before its first request |" if real else "")
                 + " RSS per connection | VmPTE per connection "
                 "| RSS per connection after echo | idle RSS total | lost | late | echo p99 | echo max "
                 "| echo round |")
    lines.append("|---|---:|---:|" + ("---:|" if real else "") + "---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for w in args.workers:
        summary = by_workers[str(w)]["summary"]
        for name in names:
            c = summary[name]
            conns = f"{med(c['connected']):,.0f}" if c["connected"] else "-"
            fresh = f" {spread(c['rss_fresh_per_conn'], kib)} |" if real else ""
            lines.append(
                f"| {name} | {w} | {conns} |{fresh} {spread(c['rss_per_conn'], kib)} | {spread(c['pte_per_conn'], byts)} "
                f"| {spread(c['rss_after_echo_per_conn'], kib)} "
                f"| {spread(c['idle_rss'], lambda x: f'{x / 2**20:,.1f} MiB')} "
                f"| {c['lost'] if c['echo_rounds'] else '-'} | {c['late'] if c['echo_rounds'] else '-'} "
                f"| {spread(c['lat_p99_us'], ms)} | {spread(c['lat_max_us'], ms)} "
                f"| {spread([x * 1e6 for x in c['echo_s']], ms)} |")
    lines.append("")
    for w in args.workers:
        summary = by_workers[str(w)]["summary"]
        for name in names:
            if summary[name]["runtime"]:
                lines.append(f"- {name} server, W={w}: {'; '.join(summary[name]['runtime'])}")
    lines.append("")
    lines.append("| target | want | weft / Go | verdict |")
    lines.append("|---|---|---|---|")
    label = "SC9" if real else "SC7"
    for w in args.workers:
        summary, ratios = by_workers[str(w)]["summary"], by_workers[str(w)]["ratios"]
        wl = summary.get("weft", {}).get("lost", 0)
        r = [x["rss"] for x in ratios if "rss" in x]
        if r:
            rp = [x["rss_pte"] for x in ratios if "rss_pte" in x]
            met = med(r) <= TARGET_RSS_VS_GO and wl == 0
            lines.append(f"| {label} W={w} | <= {TARGET_RSS_VS_GO}x Go | {med(r):.2f} [{min(r):.2f}-{max(r):.2f}] "
                         f"| {'met' if met else 'not met'}{'' if wl == 0 else f' ({wl} lost)'} |")
            lines.append(f"| (RSS + VmPTE, W={w}, for information) | - "
                         f"| {med(rp):.2f} [{min(rp):.2f}-{max(rp):.2f}] | - |")
        else:
            lines.append(f"| {label} W={w} | <= {TARGET_RSS_VS_GO}x Go | - | not measured (no pair of weft and Go samples) |")
        e = [x["echo"] for x in ratios if "echo" in x]
        if e and real:
            lines.append(f"| (echo round, W={w}, for information) | - | {med(e):.2f} [{min(e):.2f}-{max(e):.2f}] | - |")
        elif e:
            met = med(e) <= TARGET_ECHO_VS_GO and wl == 0
            lines.append(f"| SH6 echo round W={w} | <= {TARGET_ECHO_VS_GO}x Go | {med(e):.2f} [{min(e):.2f}-{max(e):.2f}] "
                         f"| {'met' if met else 'not met'} |")
        elif not real:
            lines.append(f"| SH6 echo round W={w} | <= {TARGET_ECHO_VS_GO}x Go | - "
                         "| not measured (no pair of weft and Go rounds that lost nothing) |")
    errs = [(n_, f"W={w}, {e}") for w in args.workers for n_ in names
            for e in by_workers[str(w)]["summary"][n_]["errors"]]
    if errs:
        lines.append("")
        lines.append("### Failures")
        lines.append("")
        for n_, e in errs:
            lines.append(f"- {n_} {e}")
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"{tag}.md"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out, f"{tag}.json"), "w") as f:
        json.dump({"args": vars(args), "nofile_hard": limit, "max_map_count": max_map_count,
                   "machine_start": state0, "machine_end": state1, "target_rss_vs_go": TARGET_RSS_VS_GO,
                   "target_echo_vs_go": TARGET_ECHO_VS_GO, "missing": missing, "by_workers": by_workers,
                   # W=1's, as before there were worker counts (older readers)
                   "summary": by_workers[str(args.workers[0])]["summary"],
                   "ratios": by_workers[str(args.workers[0])]["ratios"], "samples": samples}, f, indent=1)
    log(f"{tag}: wrote {os.path.join(args.out, tag + '.md')} and {tag}.json ({time.monotonic() - started:.0f} s)")
    weft_failed = "weft" in servers and any("error" in s for s in samples if s["server"] == "weft")
    return 1 if weft_failed else 0


if __name__ == "__main__":
    sys.exit(main())
