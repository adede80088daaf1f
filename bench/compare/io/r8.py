#!/usr/bin/env python3
"""R8 (echo) of the peer report's IO section: weft's echo server against a Go
server (goroutine per connection, net package), a Boost.Asio server (Boost
1.74, C++20 co_spawn / use_awaitable), a Tokio server (task per connection;
bench/compare/tokio-runtime/src/echo.rs) and a monoio server (io_uring,
thread per core; bench/compare/io/echo_monoio), all on 127.0.0.1, all driven
by the same load generator (bench/compare/io/loadgen, Go, standard library).
A peer that is not built is left out with the reason (--missing).

Scenarios: {50, 1,000} connections x {64 B, 4 KiB} messages, ping-pong (each
connection writes a message, reads it back, checks it, again), in two rows:

  1core     the server pinned to CPU 0 (one worker / thread / GOMAXPROCS=1),
            the load generator pinned to CPU 1 (GOMAXPROCS=1);
  2workers  the server on CPUs 0 and 1 with two workers (GOMAXPROCS=2, two
            threads running one io_context, weft --workers 2), the load
            generator still on CPU 1: this machine has two cores, so in this
            row the server shares a core with its client.

Each sample is a fresh server process; servers alternate within every
repetition (weft go asio weft go asio ...). Per sample: requests per second
and p50 / p99 latency (from the load generator), the server's CPU time over
the measured window (/proc/<pid>/stat utime + stime, sampled when the load
generator prints measure-start and measure-end), reported per 100,000
requests and as "busy" (CPU s / window s), and the load generator's own CPU
over the window ("client busy": near 1.00 on one core means the client, not
the server, set the pace; the server's CPU per request still compares).

This script builds nothing: scripts/bench builds the binaries; the defaults
are where it puts them.

  /usr/bin/python3 bench/compare/io/r8.py [--quick] [--reps N] [--out DIR]

Exit status: 1 if weft's server failed (did not start, died, or the load
generator saw errors against it), or a peer crashed; 0 otherwise. Timings
are never checked.
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


def run_loadgen(args, server, conns, size, logf):
    """Runs the load generator against server; returns its JSON plus the
    server's CPU seconds over the measured window."""
    env = dict(os.environ, GOMAXPROCS="1")
    cmd = ["taskset", "-c", "1", args.loadgen, "-addr", f"127.0.0.1:{server.port}",
           "-conns", str(conns), "-size", str(size),
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


def draw_chart(path_base, scenarios, servers, summary):
    """Two panels (rps, p99) of grouped bars, one group per scenario; the
    whiskers are min and max over the repetitions. Returns a note."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as ex:  # noqa: BLE001
        return f"chart: matplotlib is not available ({ex}); no chart drawn."
    labels = [f"{row}\n{c}c {s}B" for row, c, s in scenarios]
    fig, axes = plt.subplots(2, 1, figsize=(max(8, 1.3 * len(scenarios)), 7.5))
    width = 0.8 / max(1, len(servers))
    for panel, (key, lo, hi, title) in enumerate([("rps", "rps_min", "rps_max", "requests per second (higher is better)"),
                                                 ("p99_us", "p99_min", "p99_max", "p99 latency, us (lower is better)")]):
        ax = axes[panel]
        for k, name in enumerate(servers):
            xs, ys, err = [], [], [[], []]
            for i, (row, c, s) in enumerate(scenarios):
                cell = summary.get(f"{row}/{c}/{s}/{name}")
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
    fig.suptitle("R8 echo over 127.0.0.1 (median, whiskers min-max)", fontsize=11)
    fig.tight_layout()
    for ext in ("svg", "png"):
        fig.savefig(f"{path_base}.{ext}")
    plt.close(fig)
    return f"chart: {path_base}.svg / .png"


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
    ap.add_argument("--sizes", default="64,4096")
    ap.add_argument("--servers", default="weft,go,asio,tokio,monoio")
    ap.add_argument("--out", default=None, help="default bench/results (--quick: build/bench/results)")
    ap.add_argument("--log", default=os.path.join(ROOT, "build/bench/r8-log.txt"))
    args = ap.parse_args()
    args.reps = args.reps or (1 if args.quick else 5)
    args.duration = args.duration or (0.5 if args.quick else 3.0)
    args.warmup = args.warmup if args.warmup is not None else (0.2 if args.quick else 0.5)
    args.out = args.out or os.path.join(ROOT, "build/bench/results" if args.quick else "bench/results")
    if not (0 < args.duration <= 60 and 0 <= args.warmup <= 10 and 1 <= args.reps <= 50):
        ap.error("--duration must be in (0, 60], --warmup in [0, 10], --reps in [1, 50]")

    for tool in ("taskset",):
        if shutil.which(tool) is None:
            log(f"r8: {tool} is missing (util-linux)")
            return 1
    if not os.access(args.loadgen, os.X_OK):
        log(f"r8: no load generator at {args.loadgen} (scripts/bench builds it with go build)")
        return 1

    rows = [r for r in args.rows.split(",") if r]
    conns_list = [int(c) for c in args.conns.split(",") if c]
    sizes = [int(s) for s in args.sizes.split(",") if s]
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

    max_seconds = int(args.reps * len(rows) * len(conns_list) * len(sizes) * len(servers)
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

    scenarios = [(row, c, s) for row in rows for c in conns_list for s in sizes]
    state0 = machine_state()
    samples = []  # dicts
    failures = []
    total = args.reps * len(scenarios) * len(servers)
    done = 0
    started = time.monotonic()
    for rep in range(args.reps):
        for row, conns, size in scenarios:
            for name in servers:
                done += 1
                cpus = "0" if row == "1core" else "0,1"
                sample = {"rep": rep, "row": row, "conns": conns, "size": size, "server": name}
                argv, env = server_argv(name, row)
                try:
                    srv = Server(name, argv, env, cpus, logf)
                except RuntimeError as e:
                    sample["error"] = str(e)
                    failures.append(sample)
                    samples.append(sample)
                    log(f"r8: [{done}/{total}] {row} {conns}c {size}B {name}: FAILED: {e}")
                    continue
                try:
                    res = run_loadgen(args, srv, conns, size, logf)
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
                log(f"r8: [{done}/{total}] rep {rep + 1} {row} {conns}c {size}B {name}: "
                    + (f"FAILED: {sample['error']}" if bad else
                       f"{res['rps']:,.0f} rps p50 {res['p50_us']:.0f} us p99 {res['p99_us']:.0f} us "
                       f"server cpu {res.get('server_cpu_s', float('nan')):.2f} s "
                       f"client cpu {res.get('client_cpu_s', float('nan')):.2f} s")
                    + f"  ({el:.0f} s)")
    logf.close()
    state1 = machine_state()

    # ---- summarise ---------------------------------------------------------
    def cell(row, conns, size, name):
        ok = [s for s in samples if s["row"] == row and s["conns"] == conns and s["size"] == size
              and s["server"] == name and "error" not in s]
        if not ok:
            return None
        rps = [s["rps"] for s in ok]
        cpu100k = [s["server_cpu_s"] / s["requests"] * 1e5 for s in ok if "server_cpu_s" in s and s["requests"]]
        busy = [s["server_cpu_s"] / s["window_s"] for s in ok if "server_cpu_s" in s]
        cbusy = [s["client_cpu_s"] / s["window_s"] for s in ok]
        other = [(s["system_busy_s"] - s["server_cpu_s"] - s["client_cpu_s"]) / s["window_s"]
                 for s in ok if "system_busy_s" in s and "server_cpu_s" in s]
        return {
            "n": len(ok), "rps": med(rps), "rps_min": min(rps), "rps_max": max(rps),
            "p50_us": med([s["p50_us"] for s in ok]), "p99_us": med([s["p99_us"] for s in ok]),
            "p99_min": min(s["p99_us"] for s in ok), "p99_max": max(s["p99_us"] for s in ok),
            "cpu_per_100k": med(cpu100k), "server_busy": med(busy), "client_busy": med(cbusy),
            "other_busy": med(other),
        }

    summary = {}
    lines = []
    lines.append("## R8: echo server (ping-pong over 127.0.0.1)")
    lines.append("")
    lines.append(f"{args.reps} repetition(s), each sample a fresh server, servers interleaved; "
                 f"{args.duration:g} s measured after {args.warmup:g} s of warm-up; median [min, max]. "
                 "Load generator: bench/compare/io/loadgen (Go, GOMAXPROCS=1, pinned to CPU 1). "
                 "Row 1core: server pinned to CPU 0, one worker. Row 2workers: server on CPUs 0-1 "
                 "with two workers, sharing CPU 1 with the load generator (this machine has 2 cores). "
                 "CPU/100k: the server's user+sys seconds per 100,000 requests over the window; "
                 "busy: CPU seconds per window second (server; client: near 1.00 means the load "
                 "generator set the pace; other: all CPUs' busy time minus server and client, i.e. "
                 "loopback softirq work charged to no one plus any other process on the machine). "
                 "Ratios: median [min, max] of the per-repetition ratios (each weft sample against "
                 "the peer's sample of the same repetition, run next to it).")
    lines.append("")
    lines.append(f"Machine at start: {state0}; at end: {state1}.")
    if missing:
        lines.append("")
        for name, why in missing.items():
            lines.append(f"- {name}: {why}")
    lines.append("")
    lines.append("| row | conns | size | server | rps | p50 us | p99 us | CPU s/100k req | server busy "
                 "| client busy | other busy |")
    lines.append("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for row, conns, size in scenarios:
        for name in servers:
            c = cell(row, conns, size, name)
            summary[f"{row}/{conns}/{size}/{name}"] = c
            if c is None:
                errs = [s.get("error", "") for s in samples if s["row"] == row and s["conns"] == conns
                        and s["size"] == size and s["server"] == name]
                lines.append(f"| {row} | {conns} | {size} | {name} | failed: {errs[0] if errs else '?'} "
                             "| - | - | - | - | - | - |")
                continue
            lines.append(
                f"| {row} | {conns:,} | {size:,} | {name} | {fmt_num(c['rps'])} [{fmt_num(c['rps_min'])}, "
                f"{fmt_num(c['rps_max'])}] | {fmt_num(c['p50_us'])} | {fmt_num(c['p99_us'])} "
                f"[{fmt_num(c['p99_min'])}, {fmt_num(c['p99_max'])}] | {fmt_num(c['cpu_per_100k'], 2)} "
                f"| {fmt_num(c['server_busy'], 2)} | {fmt_num(c['client_busy'], 2)} | {fmt_num(c['other_busy'], 2)} |")

    targets = []
    if "weft" in servers:
        lines.append("")
        lines.append("### Targets (per-repetition ratios, median [min, max])")
        lines.append("")
        cpu_peers = [n for n in servers if n != "weft"]
        lines.append("| row | conns | size | weft/go rps (>= 1.3) | weft/asio rps (>= 1.1) | weft/go p99 (<= 0.7) | "
                     + " | ".join(f"weft/{n} CPU per req" for n in cpu_peers) + " |")
        lines.append("|---|---:|---:|---|---|---|" + "---:|" * len(cpu_peers))

        def verdict(r, want, le=False):
            if r is None:
                return "-"
            met = r[0] <= want if le else r[0] >= want
            return f"{r[0]:.2f} [{r[1]:.2f}, {r[2]:.2f}] {'met' if met else 'not met'}"

        def plain(r):
            return "-" if r is None else f"{r[0]:.2f} [{r[1]:.2f}, {r[2]:.2f}]"

        for row, conns, size in scenarios:
            w = summary.get(f"{row}/{conns}/{size}/weft")
            g = summary.get(f"{row}/{conns}/{size}/go")
            a = summary.get(f"{row}/{conns}/{size}/asio")
            def paired(peer, key):
                """Per-repetition ratios weft/peer: median, min, max."""
                rs = []
                for rep in range(args.reps):
                    pick = {}
                    for s in samples:
                        if (s["rep"] == rep and s["row"] == row and s["conns"] == conns and s["size"] == size
                                and s["server"] in ("weft", peer) and "error" not in s):
                            if key == "cpu":
                                if "server_cpu_s" in s and s["requests"]:
                                    pick[s["server"]] = s["server_cpu_s"] / s["requests"]
                            else:
                                pick[s["server"]] = s[key]
                    if "weft" in pick and peer in pick and pick[peer]:
                        rs.append(pick["weft"] / pick[peer])
                return (med(rs), min(rs), max(rs)) if rs else None

            t = {"row": row, "conns": conns, "size": size,
                 "rps_vs_go": paired("go", "rps"), "rps_vs_asio": paired("asio", "rps"),
                 "p99_vs_go": paired("go", "p99_us"),
                 **{f"cpu_vs_{n}": paired(n, "cpu") for n in cpu_peers}}
            targets.append(t)
            lines.append(f"| {row} | {conns:,} | {size:,} | {verdict(t['rps_vs_go'], TARGETS['rps_vs_go'])} "
                         f"| {verdict(t['rps_vs_asio'], TARGETS['rps_vs_asio'])} "
                         f"| {verdict(t['p99_vs_go'], TARGETS['p99_vs_go'], le=True)} | "
                         + " | ".join(plain(t[f"cpu_vs_{n}"]) for n in cpu_peers) + " |")
    if failures:
        lines.append("")
        lines.append("### Failures")
        lines.append("")
        for f in failures:
            lines.append(f"- rep {f['rep'] + 1} {f['row']} {f['conns']}c {f['size']}B {f['server']}: {f['error']}")

    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "r8.md"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out, "r8.json"), "w") as f:
        json.dump({"args": {k: v for k, v in vars(args).items()}, "nofile": nofile,
                   "machine_start": state0, "machine_end": state1, "targets": TARGETS,
                   "missing": missing, "summary": summary, "ratios": targets, "samples": samples},
                  f, indent=1)
    log(f"r8: wrote {os.path.join(args.out, 'r8.md')} and r8.json")
    log("r8: " + draw_chart(os.path.join(args.out, "r8"), scenarios, list(servers), summary))

    weft_failed = any(f["server"] == "weft" for f in failures)
    peer_crashed = any(f["server"] != "weft" and "server died" in f.get("error", "") for f in failures)
    return 1 if (weft_failed or peer_crashed) else 0


if __name__ == "__main__":
    sys.exit(main())
