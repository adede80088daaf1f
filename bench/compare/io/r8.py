#!/usr/bin/env python3
"""R8 (echo) of the peer report's IO section: weft's echo server against a Go
server (goroutine per connection, net package), a Boost.Asio server (Boost
1.74, C++20 co_spawn / use_awaitable), a Tokio server (task per connection;
bench/compare/tokio-runtime/src/echo.rs) and a monoio server (io_uring,
thread per core; bench/compare/io/echo_monoio), all on 127.0.0.1, all driven
by the same load generator (bench/compare/io/loadgen, Go, standard library).
weft_epoll and weft_uring (--servers) are weft's binary with its backend
forced (--io epoll / io_uring); weft itself runs with --io auto. A peer that
is not built is left out with the reason (--missing).

Every server does the same thing: a task (goroutine, coroutine) per
connection reading whatever has arrived into a 16 KiB buffer and writing it
all back, TCP_NODELAY on. None of them knows the message size, so a 64 KiB
message is at least four reads and four writes on every server, and with
several messages in flight one read may take several of them at once.

Scenarios: --rows x --conns x --sizes x --pipeline, by default {50, 1,000}
connections x {64 B, 4 KiB} messages x ping-pong, in two rows:

  1core     the server pinned to CPU 0 (one worker / thread / GOMAXPROCS=1),
            the load generator pinned to CPU 1 (GOMAXPROCS=1);
  2workers  the server on CPUs 0 and 1 with two workers (GOMAXPROCS=2, two
            threads running one io_context, weft --workers 2), the load
            generator still on CPU 1: this machine has two cores, so in this
            row the server shares a core with its client.

  --sizes 64,4096,65536   bulk messages (1 B .. 1 MiB); for sizes of 4 KiB
            and more the table adds the server's CPU per MiB.
  --pipeline 1,16         requests in flight per connection (the table's
            "inflight"): 1 is ping-pong (each connection writes a message,
            reads it back, checks it, again); N keeps N messages written and
            not yet echoed on every connection (a writer and a reader
            goroutine per connection; each message is its own write, the
            reader checks every echo in order by its sequence number).

A scenario is (row, conns, size, inflight); its key in r8.json's summary is
row/conns/size/server for ping-pong (as before pipelining existed; that is
what bench/compare/summary.py reads) and row/conns/size/pN/server for N in
flight.

Each sample is a fresh server process; servers alternate within every
repetition (weft go asio weft go asio ...). Per sample, from the load
generator: requests per second (replies completed inside the measured
window, per second) and p50 / p99 latency (a message's write to its echo's
last byte, over the requests that started and ended inside the window; with
N in flight that includes waiting behind the N-1 before it, so it grows with
N by Little's law). The server's CPU time over the window (/proc/<pid>/stat
utime + stime of all its threads, sampled when the load generator prints
measure-start and measure-end) is reported per 100,000 requests ("server
CPU s/100k req"), per MiB the server received (= echoed; "server CPU
ms/MiB", sizes >= 4 KiB), and as "busy" (CPU s / window s). The load
generator's own CPU over the window (getrusage) is reported the same two
ways: "client CPU s/100k req" and "client busy" (near 1.00 on one core means
the client, not the server, set the pace; the server's CPU per request still
compares). "other busy": all CPUs' busy time minus server and client
(loopback softirq work charged to no one, plus any other process).

Ratio tables (median [min, max] of per-repetition ratios: each weft sample
against the peer's sample of the same repetition, run next to it):

  Targets   weft against go (rps, p99) and asio (rps), and weft's CPU per
            request against every other server, per scenario.
  IOF       the IO targets, for the weft server chosen by --iof-weft
            (default weft, the default backend; e.g. --iof-weft weft_uring).
            "best peer" is the best of go, tokio and asio in the same
            repetition (lowest CPU or p99, highest rps), chosen anew in
            each repetition; monoio has rows of its own. All ping-pong:
              IOF1   server CPU per request, 64 B, 50 conns, 1core  <= 0.8x best peer
              IOF2   the same at 1,000 conns                        <= 0.8x best peer
              IOF3   p99, 64 B, 1,000 conns, 1core                  <= 0.8x best peer
              IOF4   server CPU per MiB, 64 KiB, 50 conns, 1core    <= 0.8x best peer
                     (needs --sizes with 65536: not in the defaults)
              IOF5   rps, 64 B, 1,000 conns, 2workers               >= 1.1x best peer
                     (the cell shows the client busy with each)
              IOF6a  server CPU per request, 64 B, 50 conns, 1core  <= 1.0x monoio
              IOF6b  the same at 1,000 conns                        <= 1.0x monoio
            A row whose scenario, candidate or peers were not run says
            "not measured (scenario not run)" and why; a row with some of
            its best-peer candidates missing says which. The table is in
            r8.md and, with every repetition's pairing, under "iof" in
            r8.json.

What in this harness could favour a candidate:
  - The load generator is Go, on one core (GOMAXPROCS=1): in the 1core row
    it usually sets the pace (client busy near 1.00), so requests per second
    say more about the client than about the server; CPU per request and
    per MiB are the server-side comparison. In the 2workers row the client
    shares CPU 1 with the server, so a server that burns less CPU leaves
    more to its client and gets more requests per second.
  - Pipelining lets a server batch: with N messages in flight one read can
    return several of them and one write send them all back, so servers
    that read greedily (all read into a 16 KiB buffer here) and runtimes
    that do fewer wake-ups per byte gain; io_uring servers (monoio,
    weft_uring) save submissions and completions the same way. Ping-pong
    never batches: every request is a read and a write on every server.
  - With N in flight the Go client's scheduling order decides which
    connection is served next; the reader waits only on its socket (see
    loadgen/main.go) so that one connection cannot run ahead of the rest,
    but latency percentiles at high N x conns still partly measure the
    client's queue.
  - Kernel work is charged to whoever runs it: loopback delivery of a write
    mostly runs inside the writer's system call, so it lands in the
    writer's system time (a server's CPU includes delivering its echoes into
    the client's socket, the same for every server) or, where the kernel
    accounts softirq time apart, in no process's time ("other busy"). A
    server whose kernel work runs in io_uring's worker threads (iou-wrk,
    threads of the server process) is charged for it too.
  - The machine has two cores and may be shared: "other busy" and the
    machine state line (load average, CPU pressure) say how quiet it was;
    servers alternate within each repetition so a disturbance hits
    neighbours alike, and ratios are taken per repetition.

This script builds nothing: scripts/bench builds the binaries; the defaults
are where it puts them.

  /usr/bin/python3 bench/compare/io/r8.py [--quick] [--reps N] [--out DIR]
      [--rows 1core,2workers] [--conns 50,1000] [--sizes 64,4096,65536]
      [--pipeline 1,16] [--servers weft,weft_uring,go,asio,tokio,monoio]
      [--iof-weft weft|weft_epoll|weft_uring]

Exit status: 1 if weft's server failed (did not start, died, or the load
generator saw errors against it: a wrong, short or out-of-order echo), or a
peer crashed; 0 otherwise. Timings are never checked.
"""

import argparse
import json
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

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))

TARGETS = {
    "rps_vs_go": 1.3,     # weft rps >= 1.3x Go's
    "rps_vs_asio": 1.1,   # weft rps >= 1.1x Boost.Asio's
    "p99_vs_go": 0.7,     # weft p99 <= 0.7x Go's
}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def clk_tck():
    return os.sysconf(os.sysconf_names["SC_CLK_TCK"])


def proc_cpu(pid):
    """utime + stime of a process (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        s = f.read()
    fields = s[s.rindex(")") + 2:].split()
    # fields[0] is field 3 (state); utime is field 14, stime field 15
    return (int(fields[11]) + int(fields[12])) / clk_tck()


def system_busy():
    """Busy seconds of all CPUs together (/proc/stat: everything but idle
    and iowait)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    total = sum(v[:8])  # user nice system idle iowait irq softirq steal
    return (total - v[3] - v[4]) / clk_tck()


def machine_state():
    state = {}
    try:
        with open("/proc/loadavg") as f:
            state["loadavg"] = f.read().split()[:3]
    except OSError:
        pass
    try:
        with open("/proc/pressure/cpu") as f:
            state["cpu_pressure"] = f.readline().strip()
    except OSError:
        pass
    return state


def raise_nofile(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else max(need, soft)
    if hard != resource.RLIM_INFINITY and hard < need:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (need, need))
            return need
        except (ValueError, OSError):
            log(f"r8: RLIMIT_NOFILE hard limit is {hard} (< {need}) and cannot be raised; "
                "the 1,000-connection scenarios may fail")
            want = hard
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


class Server:
    def __init__(self, name, argv, env, cpus, logf):
        self.name = name
        self.logf = logf
        # The server's stderr goes to a file of its own first (its tail goes
        # into a failure's message), then into the log.
        self.err = tempfile.TemporaryFile()
        cmd = ["taskset", "-c", cpus] + argv
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.err, env=env,
                                     start_new_session=True)
        self.port = None
        deadline = time.monotonic() + 10
        line = b""
        while time.monotonic() < deadline:
            r, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if r:
                line = self.proc.stdout.readline()
                if not line:
                    break
                text = line.decode(errors="replace").strip()
                if text.startswith("listening on "):
                    self.port = int(text.split()[2])
                    return
            elif self.proc.poll() is not None:
                break
        exited = self.proc.poll()
        self.stop()
        if exited is not None:
            why = f"exited with status {exited} before printing 'listening on <port>'"
        else:
            why = f"no 'listening on <port>' within 10 s (last line {line!r}); killed"
        raise RuntimeError(f"{name}: {why}{self.stderr_tail()}")

    def stderr_tail(self, n=4):
        self.err.seek(0)
        tail = self.err.read().decode(errors="replace").strip().splitlines()[-n:]
        return ("; stderr: " + " | ".join(tail)) if tail else ""

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        if self.proc.stdout:
            self.proc.stdout.close()
        if not self.err.closed:
            self.err.seek(0)
            data = self.err.read()
            if data:
                self.logf.write(f"---- {self.name} (pid {self.proc.pid}) stderr ----\n")
                self.logf.write(data.decode(errors="replace"))
                self.logf.flush()

    def close(self):
        self.err.close()


def run_loadgen(args, server, conns, size, pipeline, logf):
    """Runs the load generator against server; returns its JSON plus the
    server's CPU seconds over the measured window."""
    env = dict(os.environ, GOMAXPROCS="1")
    cmd = ["taskset", "-c", "1", args.loadgen, "-addr", f"127.0.0.1:{server.port}",
           "-conns", str(conns), "-size", str(size), "-pipeline", str(pipeline),
           "-duration", f"{args.duration}s", "-warmup", f"{args.warmup}s",
           "-max-requests", str(args.max_requests)]
    limit = args.duration + args.warmup + 40
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=logf, env=env)
    cpu0 = cpu1 = sys0 = sys1 = None
    result = None
    deadline = time.monotonic() + limit
    try:
        while time.monotonic() < deadline:
            r, _, _ = select.select([p.stdout], [], [], 0.5)
            if not r:
                if p.poll() is not None:
                    break
                continue
            line = p.stdout.readline()
            if not line:
                break
            text = line.decode(errors="replace").strip()
            if text == "measure-start":
                cpu0 = proc_cpu(server.proc.pid) if server.alive() else None
                sys0 = system_busy()
            elif text == "measure-end":
                cpu1 = proc_cpu(server.proc.pid) if server.alive() else None
                sys1 = system_busy()
            elif text.startswith("{"):
                result = json.loads(text)
        else:
            log(f"r8: load generator still running after {limit} s: killed")
            p.kill()
    finally:
        if p.poll() is None:
            try:
                p.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        p.stdout.close()
    if result is None:
        result = {"errors": -1, "first_error": f"no result (load generator exit status {p.returncode})"}
    result["loadgen_status"] = p.returncode
    result["server_alive"] = server.alive()
    if cpu0 is not None and cpu1 is not None:
        result["server_cpu_s"] = cpu1 - cpu0
    if sys0 is not None and sys1 is not None:
        result["system_busy_s"] = sys1 - sys0
    return result


def fmt_num(x, digits=0):
    if x is None:
        return "-"
    if digits == 0:
        return f"{x:,.0f}"
    return f"{x:,.{digits}f}"


def med(xs):
    return statistics.median(xs) if xs else None


MIB = float(1 << 20)
# The IOF targets' peer set: "best peer" is the best of these three in each
# repetition; monoio has rows of its own (IOF6a / IOF6b).
BEST_PEERS = ("go", "tokio", "asio")


def skey(row, conns, size, pipe, name=None):
    """The summary's key of a scenario (and server): row/conns/size for
    ping-pong, as it always was (bench/compare/summary.py reads it), and
    row/conns/size/pN for N requests in flight per connection."""
    base = f"{row}/{conns}/{size}" if pipe == 1 else f"{row}/{conns}/{size}/p{pipe}"
    return base if name is None else f"{base}/{name}"


def scen_label(row, conns, size, pipe):
    return f"{row} {conns}c {size}B" + (f" x{pipe}" if pipe != 1 else "")


def replies(s):
    """Replies completed inside the window (older load generators: the
    requests that started and ended inside it)."""
    return s.get("completed") or s.get("requests") or 0


def metric(s, what):
    """One sample's value of a measure, or None.
      rps, p99_us, p50_us                 from the load generator
      cpu_us / client_cpu_us              CPU microseconds per request
      cpu_ms_mib / client_cpu_ms_mib      CPU milliseconds per MiB received
                                          by the server (= MiB echoed)
      busy / client_busy                  CPU seconds per window second"""
    n = replies(s)
    size = s.get("size", 0)
    if what in ("rps", "p50_us", "p99_us"):
        return s.get(what)
    who = "client_cpu_s" if what.startswith("client_") else "server_cpu_s"
    if who not in s:
        return None
    cpu = s[who]
    base = what[len("client_"):] if what.startswith("client_") else what
    if base == "cpu_us":
        return cpu / n * 1e6 if n else None
    if base == "cpu_ms_mib":
        return cpu * 1e3 / (n * size / MIB) if n and size else None
    if base == "busy":
        return cpu / s["window_s"] if s.get("window_s") else None
    raise KeyError(what)


def draw_chart(path_base, scenarios, servers, summary):
    """Two panels (rps, p99) of grouped bars, one group per scenario; the
    whiskers are min and max over the repetitions. Returns a note."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as ex:  # noqa: BLE001
        return f"chart: matplotlib is not available ({ex}); no chart drawn."
    labels = [f"{row}\n{c}c {s}B" + (f" x{p}" if p != 1 else "") for row, c, s, p in scenarios]
    fig, axes = plt.subplots(2, 1, figsize=(max(8, 1.3 * len(scenarios)), 7.5))
    width = 0.8 / max(1, len(servers))
    for panel, (key, lo, hi, title) in enumerate([("rps", "rps_min", "rps_max", "requests per second (higher is better)"),
                                                 ("p99_us", "p99_min", "p99_max", "p99 latency, us (lower is better)")]):
        ax = axes[panel]
        for k, name in enumerate(servers):
            xs, ys, err = [], [], [[], []]
            for i, (row, c, s, p) in enumerate(scenarios):
                cell = summary.get(skey(row, c, s, p, name))
                if not cell:
                    continue
                xs.append(i + (k - (len(servers) - 1) / 2) * width)
                ys.append(cell[key])
                err[0].append(cell[key] - cell[lo])
                err[1].append(cell[hi] - cell[key])
            ax.bar(xs, ys, width, yerr=err, capsize=2, label=name)
        ax.set_xticks(range(len(scenarios)))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_title(title, fontsize=10)
        if key == "p99_us":
            ax.set_yscale("log")
        ax.legend(fontsize=8)
    fig.suptitle("R8 echo over 127.0.0.1 (median, whiskers min-max; xN: N requests in flight per connection)",
                 fontsize=11)
    fig.tight_layout()
    for ext in ("svg", "png"):
        fig.savefig(f"{path_base}.{ext}")
    plt.close(fig)
    return f"chart: {path_base}.svg / .png"


# The IOF targets: (id, what, scenario (row, conns, size, inflight), measure,
# peers ("best": the best of BEST_PEERS per repetition, or a list), limit,
# "le" (candidate / peer <= limit) or "ge" (>= limit)).
IOF = [
    ("IOF1", "server CPU per request, 64 B, 50 connections, 1core, ping-pong",
     ("1core", 50, 64, 1), "cpu_us", "best", 0.8, "le"),
    ("IOF2", "server CPU per request, 64 B, 1,000 connections, 1core, ping-pong",
     ("1core", 1000, 64, 1), "cpu_us", "best", 0.8, "le"),
    ("IOF3", "p99 latency, 64 B, 1,000 connections, 1core, ping-pong",
     ("1core", 1000, 64, 1), "p99_us", "best", 0.8, "le"),
    ("IOF4", "server CPU per byte (per MiB received), 64 KiB messages, 50 connections, 1core, ping-pong",
     ("1core", 50, 65536, 1), "cpu_ms_mib", "best", 0.8, "le"),
    ("IOF5", "requests/s, 64 B, 1,000 connections, 2workers, ping-pong",
     ("2workers", 1000, 64, 1), "rps", "best", 1.1, "ge"),
    ("IOF6a", "server CPU per request, 64 B, 50 connections, 1core, ping-pong",
     ("1core", 50, 64, 1), "cpu_us", ["monoio"], 1.0, "le"),
    ("IOF6b", "server CPU per request, 64 B, 1,000 connections, 1core, ping-pong",
     ("1core", 1000, 64, 1), "cpu_us", ["monoio"], 1.0, "le"),
]
UNITS = {"cpu_us": ("us", 2), "p99_us": ("us", 0), "cpu_ms_mib": ("ms/MiB", 3), "rps": ("rps", 0)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weft", default=os.path.join(ROOT, "build/bench/bench/weft_bench_echo"))
    # weft_epoll / weft_uring: the same binary as weft with its backend forced
    # (--io epoll / io_uring); weft itself runs with --io auto.
    ap.add_argument("--weft_epoll", default=None)
    ap.add_argument("--weft_uring", default=None)
    ap.add_argument("--go", default=os.path.join(ROOT, "build/bench/weft_bench_echo_go"))
    ap.add_argument("--asio", default=os.path.join(ROOT, "build/bench/bench/weft_bench_echo_asio"))
    ap.add_argument("--tokio", default=os.path.join(ROOT, "build/bench/cargo-target/release/weft_bench_echo_tokio"))
    ap.add_argument("--monoio", default=os.path.join(ROOT, "build/bench/cargo-monoio/release/weft_bench_echo_monoio"))
    ap.add_argument("--missing", action="append", default=[], metavar="NAME=WHY",
                    help="a server that is not available, and why (the report says so)")
    ap.add_argument("--loadgen", default=os.path.join(ROOT, "build/bench/weft_bench_loadgen"))
    ap.add_argument("--quick", action="store_true", help="1 repetition, 0.5 s windows (CI)")
    ap.add_argument("--reps", type=int, default=None, help="repetitions (default 5, --quick 1)")
    ap.add_argument("--duration", type=float, default=None, help="measured seconds per sample (default 3, --quick 0.5)")
    ap.add_argument("--warmup", type=float, default=None, help="unrecorded seconds first (default 0.5, --quick 0.2)")
    ap.add_argument("--max-requests", type=int, default=50_000_000)
    ap.add_argument("--rows", default="1core,2workers")
    ap.add_argument("--conns", default="50,1000")
    ap.add_argument("--sizes", default="64,4096", help="message sizes in bytes (1..1048576), e.g. 64,4096,65536")
    ap.add_argument("--pipeline", default="1",
                    help="requests in flight per connection, a list (1: ping-pong), e.g. 1,16")
    ap.add_argument("--extra", default=None,
                    help="scenarios run besides the --rows x --conns x --sizes x --pipeline product, as "
                         "ROW/CONNS/SIZE/INFLIGHT items, comma-separated (default, full runs: the IOF4 bulk "
                         "case 1core/50/65536/1 and the pipelined 1core/50/64/16, 1core/1000/64/16; "
                         "--quick: none)")
    ap.add_argument("--servers", default="weft,weft_epoll,weft_uring,go,asio,tokio,monoio",
                    help="weft (the default backend: io_uring's owner ring on one worker, epoll on two), "
                         "weft_epoll / weft_uring (the same binary, backend forced: weft_uring is the owner ring on "
                         "one worker and a ring per worker on two), go, asio, tokio, monoio")
    ap.add_argument("--iof-weft", default="weft", choices=["weft", "weft_epoll", "weft_uring"],
                    help="the weft server the IOF table measures (default weft, the default backend)")
    ap.add_argument("--out", default=None, help="default bench/results (--quick: build/bench/results)")
    ap.add_argument("--log", default=os.path.join(ROOT, "build/bench/r8-log.txt"))
    args = ap.parse_args()
    args.reps = args.reps or (1 if args.quick else 5)
    args.duration = args.duration or (0.5 if args.quick else 3.0)
    args.warmup = args.warmup if args.warmup is not None else (0.2 if args.quick else 0.5)
    args.out = args.out or os.path.join(ROOT, "build/bench/results" if args.quick else "bench/results")
    if not (0 < args.duration <= 60 and 0 <= args.warmup <= 10 and 1 <= args.reps <= 50):
        ap.error("--duration must be in (0, 60], --warmup in [0, 10], --reps in [1, 50]")

    try:
        rows = [r for r in args.rows.split(",") if r]
        conns_list = [int(c) for c in args.conns.split(",") if c]
        sizes = [int(s) for s in args.sizes.split(",") if s]
        pipes = [int(p) for p in args.pipeline.split(",") if p]
    except ValueError as e:
        ap.error(f"--conns, --sizes and --pipeline want comma-separated integers ({e})")
    if any(r not in ("1core", "2workers") for r in rows):
        ap.error("--rows: 1core and / or 2workers")
    if not (rows and conns_list and sizes and pipes):
        ap.error("--rows, --conns, --sizes and --pipeline must not be empty")
    if (any(not 1 <= c <= 100000 for c in conns_list) or any(not 1 <= s <= 1 << 20 for s in sizes)
            or any(not 1 <= p <= 1024 for p in pipes)):
        ap.error("--conns must be in 1..100000, --sizes in 1..1048576, --pipeline in 1..1024")

    for tool in ("taskset",):
        if shutil.which(tool) is None:
            log(f"r8: {tool} is missing (util-linux)")
            return 1
    if not os.access(args.loadgen, os.X_OK):
        log(f"r8: no load generator at {args.loadgen} (scripts/bench builds it with go build)")
        return 1

    nofile = raise_nofile(max(conns_list) * 2 + 256)

    servers = {}
    missing = {}
    told = {}
    for m in args.missing:
        name, sep, why = m.partition("=")
        if not sep:
            ap.error(f"--missing wants NAME=WHY, got {m!r}")
        told[name] = why
    args.weft_epoll = args.weft_epoll or args.weft
    args.weft_uring = args.weft_uring or args.weft
    for name in [s for s in args.servers.split(",") if s]:
        path = getattr(args, name, None)
        if path is None:
            ap.error(f"--servers: unknown server {name!r}")
        if name in told:
            missing[name] = told[name]
            log(f"r8: {name}: {missing[name]}")
        elif os.access(path, os.X_OK):
            servers[name] = path
        else:
            missing[name] = f"not built ({os.path.relpath(path, ROOT)} is missing)"
            log(f"r8: {name}: {missing[name]}")
    if not servers:
        log("r8: no server to measure")
        return 1

    os.makedirs(os.path.dirname(args.log), exist_ok=True)
    logf = open(args.log, "a")
    logf.write(f"\n==== r8 {time.strftime('%Y-%m-%d %H:%M:%S')} ====\n")
    logf.flush()

    max_seconds = int(args.reps * len(rows) * len(conns_list) * len(sizes) * len(pipes) * len(servers)
                      * (args.duration + args.warmup + 40)) + 60

    def server_argv(name, row):
        workers = 1 if row == "1core" else 2
        env = dict(os.environ)
        if name == "go":
            env["GOMAXPROCS"] = str(workers)
            return [servers[name], "-port", "0", "-max-seconds", str(max_seconds)], env
        flag = "--threads" if name == "asio" else "--workers"  # weft, tokio, monoio: --workers
        extra = {"weft_epoll": ["--io", "epoll"], "weft_uring": ["--io", "io_uring"]}.get(name, [])
        return [servers[name], "--port", "0", flag, str(workers), "--max-seconds", str(max_seconds)] + extra, env

    scenarios = [(row, c, s, p) for row in rows for c in conns_list for s in sizes for p in pipes]
    if args.extra is None:
        args.extra = "" if args.quick else "1core/50/65536/1,1core/50/64/16,1core/1000/64/16"
    for item in [x for x in args.extra.split(",") if x]:
        parts = item.split("/")
        if len(parts) != 4 or parts[0] not in ("1core", "2workers") or not all(p.isdigit() for p in parts[1:]):
            ap.error(f"--extra wants ROW/CONNS/SIZE/INFLIGHT items, got {item!r}")
        sc = (parts[0], int(parts[1]), int(parts[2]), int(parts[3]))
        if sc not in scenarios:
            scenarios.append(sc)
    state0 = machine_state()
    samples = []  # dicts
    failures = []
    total = args.reps * len(scenarios) * len(servers)
    done = 0
    started = time.monotonic()
    for rep in range(args.reps):
        for row, conns, size, pipe in scenarios:
            label = scen_label(row, conns, size, pipe)
            for name in servers:
                done += 1
                cpus = "0" if row == "1core" else "0,1"
                sample = {"rep": rep, "row": row, "conns": conns, "size": size, "pipeline": pipe, "server": name}
                argv, env = server_argv(name, row)
                try:
                    srv = Server(name, argv, env, cpus, logf)
                except RuntimeError as e:
                    sample["error"] = str(e)
                    failures.append(sample)
                    samples.append(sample)
                    log(f"r8: [{done}/{total}] rep {rep + 1} {label} {name}: FAILED: {e}")
                    continue
                try:
                    res = run_loadgen(args, srv, conns, size, pipe, logf)
                finally:
                    alive = srv.alive()
                    srv.stop()
                sample.update(res)
                bad = res.get("errors", 0) != 0 or not alive or res.get("loadgen_status") != 0
                if bad:
                    why = res.get("first_error") or ("server died" if not alive else
                                                     f"load generator exit {res.get('loadgen_status')}")
                    if not alive:
                        why += f" (server exit status {srv.proc.returncode}){srv.stderr_tail()}"
                    sample["error"] = why
                    failures.append(sample)
                srv.close()
                samples.append(sample)
                el = time.monotonic() - started
                log(f"r8: [{done}/{total}] rep {rep + 1} {label} {name}: "
                    + (f"FAILED: {sample['error']}" if bad else
                       f"{res['rps']:,.0f} rps p50 {res['p50_us']:.0f} us p99 {res['p99_us']:.0f} us "
                       f"server cpu {res.get('server_cpu_s', float('nan')):.2f} s "
                       f"client cpu {res.get('client_cpu_s', float('nan')):.2f} s")
                    + f"  ({el:.0f} s)")
    logf.close()
    state1 = machine_state()

    # ---- summarise ---------------------------------------------------------
    def ok_samples(scen, name, rep=None):
        row, conns, size, pipe = scen
        return [s for s in samples if s["row"] == row and s["conns"] == conns and s["size"] == size
                and s.get("pipeline", 1) == pipe and s["server"] == name and "error" not in s
                and (rep is None or s["rep"] == rep)]

    def rep_value(scen, name, rep, what):
        """The measure of name's sample in repetition rep, or None."""
        ok = ok_samples(scen, name, rep)
        return metric(ok[0], what) if ok else None

    def cell(scen, name):
        ok = ok_samples(scen, name)
        if not ok:
            return None

        def stats(what):
            xs = [v for v in (metric(s, what) for s in ok) if v is not None]
            return (med(xs), min(xs), max(xs)) if xs else (None, None, None)
        rps, cpu, mib = stats("rps"), stats("cpu_us"), stats("cpu_ms_mib")
        ccpu, cmib = stats("client_cpu_us"), stats("client_cpu_ms_mib")
        other = [(s["system_busy_s"] - s["server_cpu_s"] - s["client_cpu_s"]) / s["window_s"]
                 for s in ok if "system_busy_s" in s and "server_cpu_s" in s]
        per100k = lambda x: None if x is None else x * 1e5 / 1e6  # us per request -> s per 100k
        return {
            "n": len(ok), "pipeline": scen[3], "rps": rps[0], "rps_min": rps[1], "rps_max": rps[2],
            "completed": med([replies(s) for s in ok]),
            "p50_us": med([s["p50_us"] for s in ok]), "p99_us": med([s["p99_us"] for s in ok]),
            "p99_min": min(s["p99_us"] for s in ok), "p99_max": max(s["p99_us"] for s in ok),
            "cpu_per_100k": per100k(cpu[0]), "cpu_per_100k_min": per100k(cpu[1]),
            "cpu_per_100k_max": per100k(cpu[2]),
            "client_cpu_per_100k": per100k(ccpu[0]),
            "cpu_ms_per_mib": mib[0], "cpu_ms_per_mib_min": mib[1], "cpu_ms_per_mib_max": mib[2],
            "client_cpu_ms_per_mib": cmib[0],
            "server_busy": stats("busy")[0], "client_busy": stats("client_busy")[0],
            "other_busy": med(other),
        }

    def paired(scen, cand, peers, what, best="low"):
        """Per-repetition ratios of cand's sample over a peer's sample of the
        same repetition; with several peers, over the best of them in that
        repetition (lowest for best="low", highest for "high"). Returns
        None or a dict: ratio (median, min, max), cand and peer (medians of
        the per-repetition values), best (peer: repetitions it was best
        in), reps (the repetitions' details)."""
        ratios, cv, pv, best_n, reps = [], [], [], {}, []
        for rep in range(args.reps):
            w = rep_value(scen, cand, rep, what)
            ps = {p: rep_value(scen, p, rep, what) for p in peers}
            ps = {p: v for p, v in ps.items() if v is not None and v > 0}
            if w is None or not ps:
                continue
            b = (min if best == "low" else max)(ps, key=ps.get)
            ratios.append(w / ps[b])
            cv.append(w)
            pv.append(ps[b])
            best_n[b] = best_n.get(b, 0) + 1
            reps.append({"rep": rep, "cand": w, "peer": b, "peer_value": ps[b], "ratio": w / ps[b]})
        if not ratios:
            return None
        return {"ratio": (med(ratios), min(ratios), max(ratios)), "cand": med(cv), "peer": med(pv),
                "best": best_n, "reps": reps}

    summary = {}
    lines = []
    lines.append("## R8: echo server (ping-pong and pipelined over 127.0.0.1)")
    lines.append("")
    lines.append(f"{args.reps} repetition(s), each sample a fresh server, servers interleaved; "
                 f"{args.duration:g} s measured after {args.warmup:g} s of warm-up; median [min, max]. "
                 "Load generator: bench/compare/io/loadgen (Go, GOMAXPROCS=1, pinned to CPU 1). "
                 "Row 1core: server pinned to CPU 0, one worker. Row 2workers: server on CPUs 0-1 "
                 "with two workers, sharing CPU 1 with the load generator (this machine has 2 cores). "
                 "inflight: requests in flight per connection (1: ping-pong; N: the load generator keeps N "
                 "messages written and not yet echoed on each connection, so a server may read and write "
                 "several at once). rps: replies completed in the window per second; p50 / p99: latency "
                 "from a message's write to its echo's last byte (with inflight N, including its wait "
                 "behind the N-1 before it). CPU s/100k: user+sys seconds per 100,000 requests over the "
                 "window (server: /proc/PID/stat; client: the load generator's getrusage); server CPU "
                 "ms/MiB: the server's CPU milliseconds per MiB it received (and echoed), shown for "
                 "messages of 4 KiB and more. busy: CPU seconds per window second (server; client: near "
                 "1.00 means the load generator set the pace; other: all CPUs' busy time minus server "
                 "and client, i.e. loopback softirq work charged to no one plus any other process on "
                 "the machine). Ratios: median [min, max] of the per-repetition ratios (each weft "
                 "sample against the peer's sample of the same repetition, run next to it).")
    lines.append("")
    lines.append(f"Machine at start: {state0}; at end: {state1}.")
    if missing:
        lines.append("")
        for name, why in missing.items():
            lines.append(f"- {name}: {why}")
    lines.append("")
    lines.append("| row | conns | size | inflight | server | rps | p50 us | p99 us | server CPU s/100k req "
                 "| client CPU s/100k req | server CPU ms/MiB | server busy | client busy | other busy |")
    lines.append("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for scen in scenarios:
        row, conns, size, pipe = scen
        for name in servers:
            c = cell(scen, name)
            summary[skey(row, conns, size, pipe, name)] = c
            if c is None:
                errs = [s.get("error", "") for s in samples if s["row"] == row and s["conns"] == conns
                        and s["size"] == size and s.get("pipeline", 1) == pipe and s["server"] == name]
                lines.append(f"| {row} | {conns:,} | {size:,} | {pipe} | {name} | failed: "
                             f"{errs[0] if errs else '?'} | - | - | - | - | - | - | - | - |")
                continue
            mib = (f"{fmt_num(c['cpu_ms_per_mib'], 3)} [{fmt_num(c['cpu_ms_per_mib_min'], 3)}, "
                   f"{fmt_num(c['cpu_ms_per_mib_max'], 3)}]") if size >= 4096 else "-"
            lines.append(
                f"| {row} | {conns:,} | {size:,} | {pipe} | {name} | {fmt_num(c['rps'])} [{fmt_num(c['rps_min'])}, "
                f"{fmt_num(c['rps_max'])}] | {fmt_num(c['p50_us'])} | {fmt_num(c['p99_us'])} "
                f"[{fmt_num(c['p99_min'])}, {fmt_num(c['p99_max'])}] | {fmt_num(c['cpu_per_100k'], 2)} "
                f"| {fmt_num(c['client_cpu_per_100k'], 2)} | {mib} "
                f"| {fmt_num(c['server_busy'], 2)} | {fmt_num(c['client_busy'], 2)} | {fmt_num(c['other_busy'], 2)} |")

    def ratio3(r):
        return None if r is None else r["ratio"]

    targets = []
    if "weft" in servers:
        lines.append("")
        lines.append("### Targets (per-repetition ratios, median [min, max])")
        lines.append("")
        cpu_peers = [n for n in servers if n != "weft"]
        lines.append("| row | conns | size | inflight | weft/go rps (>= 1.3) | weft/asio rps (>= 1.1) "
                     "| weft/go p99 (<= 0.7) | "
                     + " | ".join(f"weft/{n} CPU per req" for n in cpu_peers) + " |")
        lines.append("|---|---:|---:|---:|---|---|---|" + "---:|" * len(cpu_peers))

        def verdict(r, want, le=False):
            if r is None:
                return "-"
            met = r[0] <= want if le else r[0] >= want
            return f"{r[0]:.2f} [{r[1]:.2f}, {r[2]:.2f}] {'met' if met else 'not met'}"

        def plain(r):
            return "-" if r is None else f"{r[0]:.2f} [{r[1]:.2f}, {r[2]:.2f}]"

        for scen in scenarios:
            row, conns, size, pipe = scen
            t = {"row": row, "conns": conns, "size": size, "pipeline": pipe,
                 "rps_vs_go": ratio3(paired(scen, "weft", ["go"], "rps")),
                 "rps_vs_asio": ratio3(paired(scen, "weft", ["asio"], "rps")),
                 "p99_vs_go": ratio3(paired(scen, "weft", ["go"], "p99_us")),
                 **{f"cpu_vs_{n}": ratio3(paired(scen, "weft", [n], "cpu_us")) for n in cpu_peers}}
            targets.append(t)
            lines.append(f"| {row} | {conns:,} | {size:,} | {pipe} | {verdict(t['rps_vs_go'], TARGETS['rps_vs_go'])} "
                         f"| {verdict(t['rps_vs_asio'], TARGETS['rps_vs_asio'])} "
                         f"| {verdict(t['p99_vs_go'], TARGETS['p99_vs_go'], le=True)} | "
                         + " | ".join(plain(t[f"cpu_vs_{n}"]) for n in cpu_peers) + " |")

    # ---- the IOF table ------------------------------------------------------
    cand = args.iof_weft
    iof_rows = []
    lines.append("")
    lines.append(f"### IOF targets ({cand} against its peers)")
    lines.append("")
    lines.append("| target | limit | measured | met |")
    lines.append("|---|---|---|---|")
    for iid, what, scen, measure, peer_spec, limit, op in IOF:
        peers = list(BEST_PEERS) if peer_spec == "best" else list(peer_spec)
        against = "the best of " + ", ".join(peers) if peer_spec == "best" else ", ".join(peers)
        best = "high" if op == "ge" else "low"
        unit, digits = UNITS[measure]
        target = f"{iid} {what}: {cand} against {against}"
        limit_text = f"{'<=' if op == 'le' else '>='} {limit:.1f}x"
        entry = {"id": iid, "target": target, "limit": limit, "op": op, "measure": measure, "unit": unit,
                 "scenario": {"row": scen[0], "conns": scen[1], "size": scen[2], "pipeline": scen[3]},
                 "candidate": cand, "peers": peers, "met": None}
        run_peers = [p for p in peers if p in servers]
        not_run = [p for p in peers if p not in servers]
        why = []
        if scen not in scenarios:
            why.append(f"{scen_label(*scen)} not in --rows / --conns / --sizes / --pipeline")
        if cand not in servers:
            why.append(f"{cand} not run")
        if not run_peers:
            why.append(", ".join(peers) + " not run")
        r = None if why else paired(scen, cand, run_peers, measure, best)
        if why:
            measured, met = "not measured (scenario not run): " + "; ".join(why), "-"
        elif r is None:
            measured, met = (f"not measured: no repetition in which {cand} and "
                             f"{'one of ' if len(run_peers) > 1 else ''}{', '.join(run_peers)} succeeded"), "-"
        else:
            rm, rlo, rhi = r["ratio"]
            ok = rm <= limit if op == "le" else rm >= limit
            n_reps = sum(r["best"].values())
            names = sorted(r["best"], key=lambda p: (-r["best"][p], p))
            if peer_spec != "best":
                peer_text = f"{names[0]} {fmt_num(r['peer'], digits)} {unit}"
            elif len(names) == 1:
                peer_text = f"best peer {names[0]} {fmt_num(r['peer'], digits)} {unit}"
            else:
                peer_text = (f"best peer {fmt_num(r['peer'], digits)} {unit}: "
                             + ", ".join(f"{p} in {r['best'][p]}/{n_reps}" for p in names) + " repetitions")
            measured = (f"{rm:.2f}x [{rlo:.2f}, {rhi:.2f}] ({cand} {fmt_num(r['cand'], digits)} {unit}, "
                        f"{peer_text})")
            if measure == "rps":
                # Who set the pace: the load generator's busy next to each.
                cb = med([metric(s, "client_busy") for s in ok_samples(scen, cand)
                          if metric(s, "client_busy") is not None])
                pb = []
                for d in r["reps"]:
                    pb += [metric(s, "client_busy") for s in ok_samples(scen, d["peer"], d["rep"])]
                pb = med([x for x in pb if x is not None])
                measured += f"; client busy: with {cand} {fmt_num(cb, 2)}, with the best peer {fmt_num(pb, 2)}"
            if not_run:
                measured += f"; not run: {', '.join(not_run)}"
            failed = [q for q in run_peers if not ok_samples(scen, q)]
            if failed:
                measured += f"; failed: {', '.join(failed)}"
            if n_reps < args.reps:
                measured += f"; {n_reps} of {args.reps} repetitions"
            met = "yes" if ok else "no"
            entry.update({"met": ok, "ratio": {"median": rm, "min": rlo, "max": rhi},
                          "candidate_median": r["cand"], "peer_median": r["peer"], "best_peer": r["best"],
                          "reps": r["reps"]})
        entry["measured"] = measured
        iof_rows.append(entry)
        lines.append(f"| {target} | {limit_text} | {measured} | {met} |")
    iof_note = (f"measured: {cand}'s value over the peer's, per repetition (each sample against the peer "
                "samples of the same repetition, run next to it), median [min, max] over the repetitions; "
                "then the medians of the two per-repetition values. The best peer is chosen per repetition: "
                "the lowest (CPU, latency) or highest (requests/s) of " + ", ".join(BEST_PEERS)
                + " in that repetition, so the ratio may set a repetition's weft against tokio and the next "
                "one's against go (the cell counts how often each was best). CPU per request: server user+sys "
                "us per reply completed in the window; per byte: server CPU ms per MiB received. "
                f"Candidate: {cand} (--iof-weft).")
    lines.append("")
    lines.append("Best peer: chosen per repetition, not from the medians; " + iof_note)
    iof = {"candidate": cand, "best_of": list(BEST_PEERS), "note": iof_note, "rows": iof_rows}

    if failures:
        lines.append("")
        lines.append("### Failures")
        lines.append("")
        for f in failures:
            lines.append(f"- rep {f['rep'] + 1} {scen_label(f['row'], f['conns'], f['size'], f.get('pipeline', 1))} "
                         f"{f['server']}: {f['error']}")

    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "r8.md"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out, "r8.json"), "w") as f:
        json.dump({"args": {k: v for k, v in vars(args).items()}, "nofile": nofile,
                   "machine_start": state0, "machine_end": state1, "targets": TARGETS,
                   "missing": missing, "summary": summary, "ratios": targets, "iof": iof,
                   "samples": samples},
                  f, indent=1)
    log(f"r8: wrote {os.path.join(args.out, 'r8.md')} and r8.json")
    log("r8: " + draw_chart(os.path.join(args.out, "r8"), scenarios, list(servers), summary))

    weft_failed = any(f["server"] == "weft" for f in failures)
    peer_crashed = any(f["server"] != "weft" and "server died" in f.get("error", "") for f in failures)
    return 1 if (weft_failed or peer_crashed) else 0


if __name__ == "__main__":
    sys.exit(main())
