#!/usr/bin/env python3
"""The HTTP row of the IO section (INFORMATIONAL): weft's HTTP example server
(examples/16_http_server.cpp, --serve) against a Go net/http server doing the
same routes with the same bodies (bench/compare/io/http_go), both on
127.0.0.1, both driven by wrk (Debian package wrk).

Per route ("/", "/sleep", "/fanout"; --quick: "/" only) and server (weft with
--workers 1, Go with --procs 1, i.e. GOMAXPROCS=1), each sample is a fresh
server process pinned to CPU 0 (taskset -c 0) and

    taskset -c 1 wrk -t1 -c50 -d<secs>s --latency http://127.0.0.1:PORT<route>

pinned to CPU 1, after an unrecorded wrk warm-up of --warmup seconds on the
same server. Servers alternate within every repetition (weft go weft go ...).
Before the first measurement of each server process one urllib request
checks the measured route's status and body (and, on a server's first
process of the run, every route, /backend and a 404 included).

Per sample: requests per second and the p99 latency (wrk --latency), the
server's CPU seconds (utime + stime of the whole process, /proc/PID/stat)
over the measured wrk run, per request, and wrk's own CPU (its rusage from
wait4) over its wall time: near 100% means the client, not the server, set
the pace (wrk -t1 has one thread on one core). Non-2xx/3xx responses and
socket errors that wrk reports are kept and shown in the row.

After its run each server gets SIGTERM and must exit with status 0 within
10 s (both drain gracefully). A weft server that does not start, answers a
check wrongly, dies, gets non-2xx answers or connect/read/write errors from
wrk, or does not exit cleanly fails the script (exit status 1); wrk timeouts
(a matter of timing) only mark the row. A Go failure only marks its cells.
Timings are never checked.

The comparison is not like for like: the two servers parse HTTP differently
(weft's example reads the request line and two headers; Go's net/http parses
every header into a map, adds a Date header, keeps per-connection state for
its keep-alive and shutdown logic, ...). The ratio says how this example
does next to the server a Go user would write, not how the runtimes compare.

This script builds nothing: scripts/bench builds the binaries; the defaults
are where it puts them.

  /usr/bin/python3 bench/compare/io/http.py [--quick] [--reps N] [--duration S] [--out DIR]

Writes OUT/http.md (the table), OUT/http.json (every sample) and appends the
servers' output and wrk's to --log.
"""

import os
import sys

# This file is named http.py: drop its own directory from the module path
# before anything imports the standard library's http package (urllib does).
_here = os.path.dirname(os.path.abspath(__file__))
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != _here]

import argparse  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import select  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import urllib.error  # noqa: E402
import urllib.request  # noqa: E402
import importlib.util  # noqa: E402

# The /proc readings and the log line are R8's (bench/compare/io/r8.py),
# loaded by path: this directory is off the module path (above).
_spec = importlib.util.spec_from_file_location("weft_r8", os.path.join(_here, "r8.py"))
_r8 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_r8)
log, clk_tck, proc_cpu, machine_state, med = _r8.log, _r8.clk_tck, _r8.proc_cpu, _r8.machine_state, _r8.med

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))

# What every server must answer (weft's example's bodies; the Go server
# sends the same bytes).
BODIES = {
    "/": "hello from weft\n",
    "/sleep": "slept 50 ms\n",
    "/fanout": "fanout sum 4999950000\n",
    "/backend": "backend said PING\n",
}
CHECK_404 = "/no-such-route"

START_S = 10     # a server must print "listening on PORT" within this
STOP_S = 10      # and exit with status 0 within this after SIGTERM
WRK_SLACK_S = 30  # wrk is killed this long past its -d


def git_rev():
    """weft's commit, read from .git without running git; None if unknown."""
    git = os.path.join(ROOT, ".git")
    try:
        if os.path.isfile(git):  # a worktree: "gitdir: PATH"
            with open(git) as f:
                line = f.read().strip()
            if not line.startswith("gitdir:"):
                return None
            git = os.path.normpath(os.path.join(ROOT, line[len("gitdir:"):].strip()))
        with open(os.path.join(git, "HEAD")) as f:
            head = f.read().strip()
        if not head.startswith("ref:"):
            return head[:12]
        ref = head[4:].strip()
        common = git
        if os.path.exists(os.path.join(git, "commondir")):
            with open(os.path.join(git, "commondir")) as f:
                common = os.path.normpath(os.path.join(git, f.read().strip()))
        for base in (git, common):
            path = os.path.join(base, ref)
            if os.path.isfile(path):
                with open(path) as f:
                    return f.read().strip()[:12]
        with open(os.path.join(common, "packed-refs")) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 2 and parts[1] == ref:
                    return parts[0][:12]
    except OSError:
        return None
    return None


def first_line(argv):
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=10)
        out = p.stdout.decode(errors="replace").strip().splitlines()
        return out[0].strip() if out else None
    except (OSError, subprocess.TimeoutExpired):
        return None


class Server:
    """One server process, pinned with taskset; stdout is read for
    "listening on PORT", stderr goes to a file of its own (its tail goes into
    a failure's message, all of it into the log)."""

    def __init__(self, name, argv, cpus, logf):
        self.name = name
        self.logf = logf
        self.err = tempfile.TemporaryFile()
        self.out_lines = []
        self.exit_status = None
        self.proc = subprocess.Popen(["taskset", "-c", cpus] + argv, stdout=subprocess.PIPE, stderr=self.err,
                                     start_new_session=True)
        self.port = None
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            r, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if r:
                line = self.proc.stdout.readline()
                if not line:
                    break
                text = line.decode(errors="replace").strip()
                self.out_lines.append(text)
                if text.startswith("listening on "):
                    self.port = int(text.split()[2])
                    return
            elif self.proc.poll() is not None:
                break
        try:
            exited = self.proc.wait(timeout=1)  # stdout closed: it is probably exiting
        except subprocess.TimeoutExpired:
            exited = None
        self.kill()
        why = (f"exited with status {exited} before printing 'listening on <port>'" if exited is not None
               else f"no 'listening on <port>' within {START_S} s (or stdout closed); killed")
        raise RuntimeError(f"{why}{self.stderr_tail()}")

    def stderr_tail(self, n=4):
        self.err.seek(0)
        tail = self.err.read().decode(errors="replace").strip().splitlines()[-n:]
        return ("; stderr: " + " | ".join(tail)) if tail else ""

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        """SIGTERM, then up to STOP_S for the exit. Returns None if it exited
        with status 0, else why not (it is killed if still there)."""
        if self.proc.poll() is not None:
            why = f"died before SIGTERM (status {self.proc.returncode})"
        else:
            self.proc.send_signal(signal.SIGTERM)
            try:
                out, _ = self.proc.communicate(timeout=STOP_S)
                self.out_lines += out.decode(errors="replace").strip().splitlines()
                why = None if self.proc.returncode == 0 else f"exit status {self.proc.returncode} after SIGTERM"
            except subprocess.TimeoutExpired:
                why = f"still running {STOP_S} s after SIGTERM; killed"
        self.kill()
        self.exit_status = self.proc.returncode
        return None if why is None else why + self.stderr_tail()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.stdout and not self.proc.stdout.closed:
            self.proc.stdout.close()

    def close(self):
        self.logf.write(f"---- {self.name} (pid {self.proc.pid}, exit {self.proc.returncode}) stdout ----\n")
        self.logf.write("\n".join(self.out_lines) + "\n")
        if not self.err.closed:
            self.err.seek(0)
            data = self.err.read()
            if data:
                self.logf.write(f"---- {self.name} (pid {self.proc.pid}) stderr ----\n")
                self.logf.write(data.decode(errors="replace"))
            self.err.close()
        self.logf.flush()


def check_route(port, path):
    """One GET over urllib; None if the status and body are right, else what
    was wrong."""
    want_code, want_body = (404, f"no route for {path}\n") if path == CHECK_404 else (200, BODIES[path])
    url = f"http://127.0.0.1:{port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            code, body = r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        code, body = e.code, e.read().decode(errors="replace")
    except (OSError, ValueError) as e:
        return f"GET {path}: {e}"
    if code != want_code or body != want_body:
        return f"GET {path}: {code} {body!r}, expected {want_code} {want_body!r}"
    return None


UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}


def to_ms(text):
    m = re.fullmatch(r"([0-9.]+)(us|ms|s|m|h)", text)
    return float(m.group(1)) * UNITS[m.group(2)] if m else None


def parse_wrk(text):
    """The figures of wrk's report (wrk 4.1 with --latency)."""
    res = {}
    m = re.search(r"^\s*99%\s+(\S+)", text, re.M)
    if m:
        res["p99_ms"] = to_ms(m.group(1))
    m = re.search(r"^\s*50%\s+(\S+)", text, re.M)
    if m:
        res["p50_ms"] = to_ms(m.group(1))
    m = re.search(r"^\s*(\d+) requests in ([0-9.]+)(us|ms|s|m|h)", text, re.M)
    if m:
        res["requests"] = int(m.group(1))
        res["wrk_window_s"] = float(m.group(2)) * UNITS[m.group(3)] / 1e3
    m = re.search(r"^Requests/sec:\s+([0-9.]+)", text, re.M)
    if m:
        res["rps"] = float(m.group(1))
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    res["socket_errors"] = ({k: int(v) for k, v in zip(("connect", "read", "write", "timeout"), m.groups())}
                            if m else {"connect": 0, "read": 0, "write": 0, "timeout": 0})
    m = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    res["non_2xx"] = int(m.group(1)) if m else 0
    return res


def run_wrk(args, port, route, seconds, logf):
    """Runs wrk on CPU 1 against the server; returns (wall s, CPU s, output, status)."""
    cmd = ["taskset", "-c", "1", args.wrk, "-t1", f"-c{args.conns}", f"-d{seconds:g}s", "--latency",
           "--timeout", "5s", f"http://127.0.0.1:{port}{route}"]
    out = tempfile.TemporaryFile()
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    # wait4 for wrk's own rusage (taskset execs wrk: same process); bounded
    # by polling with WNOHANG, then a kill.
    limit = t0 + seconds + WRK_SLACK_S
    status, ru = None, None
    while True:
        pid, st, r = os.wait4(p.pid, os.WNOHANG)
        if pid == p.pid:
            status, ru = st, r
            break
        if time.monotonic() > limit:
            log(f"http: wrk still running {seconds + WRK_SLACK_S:g} s after its start: killed")
            p.kill()
            _, status, ru = os.wait4(p.pid, 0)
            break
        time.sleep(0.02)
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)  # so that Popen does not wait again
    out.seek(0)
    text = out.read().decode(errors="replace")
    out.close()
    logf.write(f"---- {' '.join(cmd)} (exit {p.returncode}, {wall:.2f} s) ----\n{text}\n")
    logf.flush()
    return wall, ru.ru_utime + ru.ru_stime, text, p.returncode


def fmt(x, digits=0):
    if x is None:
        return "-"
    return f"{x:,.{digits}f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weft", default=os.path.join(ROOT, "build/gcc-release/examples/weft_example_16_http_server"))
    ap.add_argument("--go", default=os.path.join(ROOT, "build/bench/weft_bench_http_go"))
    ap.add_argument("--go-missing", default=None, help="why there is no Go server (scripts/bench)")
    ap.add_argument("--go-cmd", default=None, help="the go command that built the Go server (for `go version`)")
    ap.add_argument("--wrk", default=shutil.which("wrk") or "/usr/bin/wrk")
    ap.add_argument("--quick", action="store_true", help="1 repetition of 1 s, route / only (CI)")
    ap.add_argument("--reps", type=int, default=None, help="repetitions (default 5, --quick 1)")
    ap.add_argument("--duration", type=float, default=None, help="measured seconds per sample (default 5, --quick 1)")
    ap.add_argument("--warmup", type=float, default=None,
                    help="unrecorded wrk seconds first, on the same server (default 1, --quick 0)")
    ap.add_argument("--routes", default=None, help="comma-separated (default /,/sleep,/fanout; --quick /)")
    ap.add_argument("--servers", default="weft,go")
    ap.add_argument("--conns", type=int, default=50)
    ap.add_argument("--out", default=None, help="default bench/results (--quick: build/bench/results)")
    ap.add_argument("--log", default=os.path.join(ROOT, "build/bench/http-log.txt"))
    args = ap.parse_args()
    args.reps = args.reps or (1 if args.quick else 5)
    args.duration = args.duration or (1.0 if args.quick else 5.0)
    args.warmup = args.warmup if args.warmup is not None else (0.0 if args.quick else 1.0)
    args.routes = args.routes or ("/" if args.quick else "/,/sleep,/fanout")
    args.out = args.out or os.path.join(ROOT, "build/bench/results" if args.quick else "bench/results")
    if not (1 <= args.duration <= 60 and 0 <= args.warmup <= 10 and 1 <= args.reps <= 20
            and 1 <= args.conns <= 1000):
        ap.error("--duration must be in [1, 60], --warmup in [0, 10], --reps in [1, 20], --conns in [1, 1000]")
    routes = [r for r in args.routes.split(",") if r]
    for r in routes:
        if r not in BODIES:
            ap.error(f"unknown route {r!r} (known: {', '.join(BODIES)})")

    for tool in ("taskset", args.wrk):
        if shutil.which(tool) is None:
            log(f"http: {tool} is missing (Debian packages util-linux, wrk)")
            return 1

    servers, missing = {}, {}
    for name in [s for s in args.servers.split(",") if s]:
        if name not in ("weft", "go"):
            ap.error(f"unknown server {name!r}")
        path = getattr(args, name)
        if name == "go" and args.go_missing:
            missing[name] = args.go_missing
        elif os.access(path, os.X_OK):
            servers[name] = path
        else:
            missing[name] = f"not built ({os.path.relpath(path, ROOT)} is missing)"
        if name in missing:
            log(f"http: {name}: {missing[name]}")
    if "weft" in missing:
        log("http: weft's server is missing: nothing to compare")
        return 1

    versions = {
        "weft": f"examples/16_http_server.cpp at {git_rev() or 'an unknown commit (no readable .git)'}",
        "wrk": first_line([args.wrk, "-v"]),
        "kernel": platform.release(),
    }
    if "go" in servers:
        versions["go_binary"] = first_line([servers["go"], "--version"])
        if args.go_cmd:
            versions["go_cmd"] = first_line([args.go_cmd, "version"])

    os.makedirs(os.path.dirname(os.path.abspath(args.log)), exist_ok=True)
    logf = open(args.log, "a")
    logf.write(f"\n==== http {time.strftime('%Y-%m-%d %H:%M:%S')} ====\n")
    logf.flush()

    def server_argv(name):
        if name == "go":
            # A bound for a forgotten server: well past this run's length.
            limit = int(args.reps * len(routes) * len(servers) * (args.duration + args.warmup + 60)) + 60
            return [servers[name], "--port", "0", "--procs", "1", "--max-seconds", str(limit)]
        return [servers[name], "--serve", "--port", "0", "--workers", "1"]

    state0 = machine_state()
    date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    samples = []
    checked_all = set()
    total = args.reps * len(routes) * len(servers)
    done = 0
    started = time.monotonic()
    for rep in range(args.reps):
        for route in routes:
            for name in servers:
                done += 1
                sample = {"rep": rep, "route": route, "server": name}
                samples.append(sample)
                try:
                    srv = Server(name, server_argv(name), "0", logf)
                except RuntimeError as e:
                    sample["error"] = f"did not start: {e}"
                    sample["fatal"] = True
                    log(f"http: [{done}/{total}] {route} {name}: FAILED: {sample['error']}")
                    continue
                try:
                    paths = [route]
                    if name not in checked_all:
                        paths = list(BODIES) + [CHECK_404]
                        checked_all.add(name)
                    for path in paths:
                        wrong = check_route(srv.port, path)
                        if wrong:
                            sample["error"] = f"wrong answer: {wrong}"
                            sample["fatal"] = True
                            break
                    if "error" not in sample and args.warmup > 0:
                        run_wrk(args, srv.port, route, args.warmup, logf)
                    if "error" not in sample:
                        cpu0 = proc_cpu(srv.proc.pid)
                        wall, wrk_cpu, text, status = run_wrk(args, srv.port, route, args.duration, logf)
                        alive = srv.alive()
                        cpu1 = proc_cpu(srv.proc.pid) if alive else None
                        sample.update(parse_wrk(text))
                        sample.update({"wrk_wall_s": wall, "wrk_cpu_s": wrk_cpu, "wrk_status": status})
                        if cpu1 is not None:
                            sample["server_cpu_s"] = cpu1 - cpu0
                        errs = sample["socket_errors"]
                        if not alive:
                            sample["error"] = f"server died during the run (status {srv.proc.returncode})"
                            sample["fatal"] = True
                        elif status != 0 or "rps" not in sample or not sample.get("requests"):
                            sample["error"] = f"wrk exit status {status}, no result: {text.strip()[-200:]!r}"
                            sample["fatal"] = True
                        elif sample["non_2xx"] or errs["connect"] or errs["read"] or errs["write"]:
                            # Kept as a sample (the row shows its figures and the errors),
                            # fatal for weft: the check said the answers were right.
                            sample["fatal"] = True
                finally:
                    why = srv.stop()
                    sample["exit_status"] = srv.exit_status
                    sample["server_output"] = srv.out_lines[-3:]
                    srv.close()
                if why:
                    sample["stop_error"] = why
                    sample["fatal"] = True
                el = time.monotonic() - started
                if "error" in sample:
                    msg = f"FAILED: {sample['error']}"
                else:
                    e = sample["socket_errors"]
                    msg = (f"{sample['rps']:,.0f} req/s p99 {fmt(sample.get('p99_ms'), 2)} ms "
                           f"server cpu {sample.get('server_cpu_s', float('nan')):.2f} s "
                           f"wrk cpu {100 * sample['wrk_cpu_s'] / sample['wrk_wall_s']:.0f}%"
                           + (f" non-2xx {sample['non_2xx']}" if sample["non_2xx"] else "")
                           + (f" socket errors {e}" if any(e.values()) else ""))
                if why:
                    msg += f"; STOP FAILED: {why}"
                log(f"http: [{done}/{total}] rep {rep + 1} {route} {name}: {msg}  ({el:.0f} s)")
    logf.close()
    state1 = machine_state()

    # ---- summarise ---------------------------------------------------------
    def measured(route, name):
        return [s for s in samples if s["route"] == route and s["server"] == name and "rps" in s
                and "error" not in s]

    def per_req_us(s):
        return s["server_cpu_s"] / s["requests"] * 1e6 if "server_cpu_s" in s and s.get("requests") else None

    summary = {}
    for route in routes:
        for name in servers:
            ok = measured(route, name)
            all_s = [s for s in samples if s["route"] == route and s["server"] == name]
            errs = {k: sum(s.get("socket_errors", {}).get(k, 0) for s in all_s)
                    for k in ("connect", "read", "write", "timeout")}
            c = {"n": len(ok), "non_2xx": sum(s.get("non_2xx", 0) for s in all_s), "socket_errors": errs,
                 "failed": [s.get("error") or s.get("stop_error") for s in all_s
                            if "error" in s or "stop_error" in s]}
            if ok:
                rps = [s["rps"] for s in ok]
                cpu = [x for x in (per_req_us(s) for s in ok) if x is not None]
                c.update({
                    "rps": med(rps), "rps_min": min(rps), "rps_max": max(rps),
                    "p99_ms": med([s["p99_ms"] for s in ok if s.get("p99_ms") is not None]),
                    "cpu_us_per_req": med(cpu),
                    "server_busy": med([s["server_cpu_s"] / s["wrk_wall_s"] for s in ok if "server_cpu_s" in s]),
                    "wrk_busy": med([s["wrk_cpu_s"] / s["wrk_wall_s"] for s in ok]),
                    "wrk_busy_max": max(s["wrk_cpu_s"] / s["wrk_wall_s"] for s in ok),
                })
            summary[f"{route} {name}"] = c

    def paired(route, key):
        """Per-repetition ratios weft/go: (median, min, max) or None."""
        rs = []
        for rep in range(args.reps):
            pick = {}
            for s in samples:
                if s["rep"] == rep and s["route"] == route and "rps" in s and "error" not in s:
                    v = s["rps"] if key == "rps" else per_req_us(s)
                    if v is not None:
                        pick[s["server"]] = v
            if "weft" in pick and pick.get("go"):
                rs.append(pick["weft"] / pick["go"])
        return (med(rs), min(rs), max(rs)) if rs else None

    ratios = {route: {"rps": paired(route, "rps"), "cpu_per_req": paired(route, "cpu")} for route in routes}

    lines = ["## HTTP: the example server against Go net/http under wrk (informational)", ""]
    lines.append("**INFORMATIONAL, not a runtime comparison.** The two servers parse HTTP differently: "
                 "weft's example (examples/16_http_server.cpp) reads the request line and looks at two headers, "
                 "while Go's net/http does more per request (every header parsed into a map, a Date header "
                 "formatted into every response, per-connection state for keep-alive, timeouts and graceful "
                 "shutdown). The ratios say how this example does next to the server a Go user would write "
                 "(bench/compare/io/http_go), not how the two runtimes compare; R8 (r8.md) is the like-for-like "
                 "IO row.")
    lines.append("")
    lines.append(f"{'Quick run (CI): the figures say nothing. ' if args.quick else ''}"
                 f"{args.reps} repetition(s), each sample a fresh server process pinned to CPU 0 (weft "
                 f"`--workers 1`, Go `--procs 1`: GOMAXPROCS=1), servers interleaved; "
                 f"`taskset -c 1 wrk -t1 -c{args.conns} -d{args.duration:g}s --latency --timeout 5s` on CPU 1, "
                 + (f"after {args.warmup:g} s of unrecorded wrk on the same server; " if args.warmup else "")
                 + "median [min, max]. Server CPU: the server's user+sys seconds (/proc/PID/stat) over the "
                 "measured wrk run, per request. wrk CPU: wrk's user+sys over its wall time, median (max): "
                 "near 100% the client, not the server, set the pace, and then CPU per request is the figure "
                 "that compares. Server CPU %: the server's CPU over the same wall time. "
                 "Ratios weft/Go: median [min, max] of the per-repetition ratios.")
    lines.append("")
    vers = [f"weft: {versions['weft']}"]
    if "go_binary" in versions:
        vers.append(f"Go server built with {versions['go_binary']}"
                    + (f" (`{versions['go_cmd']}`)" if versions.get("go_cmd") else ""))
    vers.append(f"wrk: {versions['wrk']}")
    vers.append(f"kernel {versions['kernel']}")
    lines.append("Versions: " + "; ".join(vers) + ".")
    lines.append("")
    lines.append(f"Machine at start: {state0}; at end: {state1}.")
    if missing:
        lines.append("")
        for name, why in missing.items():
            lines.append(f"- {name}: not measured: {why}")
    lines.append("")
    lines.append("| route | server | requests/s | p99 ms | server CPU us/request | server CPU % | wrk CPU % "
                 "| errors |")
    lines.append("|---|---|---:|---:|---:|---:|---:|---|")

    def errors_cell(c):
        parts = []
        if c["non_2xx"]:
            parts.append(f"{c['non_2xx']:,} non-2xx/3xx")
        e = c["socket_errors"]
        if any(e.values()):
            parts.append("socket errors " + ", ".join(f"{k} {v:,}" for k, v in e.items() if v))
        if c["failed"]:
            parts.append(f"{len(c['failed'])} sample(s) FAILED: {c['failed'][0]}")
        return "; ".join(parts) if parts else "none"

    for route in routes:
        for name in list(servers) + [n for n in missing]:
            if name in missing:
                lines.append(f"| `{route}` | {name} | not measured | - | - | - | - | {missing[name]} |")
                continue
            c = summary[f"{route} {name}"]
            if not c["n"]:
                lines.append(f"| `{route}` | {name} | failed | - | - | - | - | {errors_cell(c)} |")
                continue
            lines.append(
                f"| `{route}` | {name} | {fmt(c['rps'])} [{fmt(c['rps_min'])}, {fmt(c['rps_max'])}] "
                f"| {fmt(c['p99_ms'], 2)} | {fmt(c['cpu_us_per_req'], 1)} | {fmt(100 * c['server_busy'])}% "
                f"| {fmt(100 * c['wrk_busy'])}% ({fmt(100 * c['wrk_busy_max'])}%) | {errors_cell(c)} |")

    if "go" in servers:
        lines.append("")
        lines.append("| route | weft/Go requests/s | weft/Go server CPU per request |")
        lines.append("|---|---:|---:|")

        def plain(r):
            return "-" if r is None else f"{r[0]:.2f} [{r[1]:.2f}, {r[2]:.2f}]"
        for route in routes:
            lines.append(f"| `{route}` | {plain(ratios[route]['rps'])} | {plain(ratios[route]['cpu_per_req'])} |")

    bad = [s for s in samples if "error" in s or "stop_error" in s or s.get("fatal")]
    if bad:
        lines.append("")
        lines.append("### Failures and errors")
        lines.append("")
        for s in bad:
            what = s.get("error") or s.get("stop_error") or (
                f"wrk reported non-2xx/3xx {s.get('non_2xx', 0)}, socket errors {s.get('socket_errors')}")
            if "error" in s and "stop_error" in s:
                what += f"; then {s['stop_error']}"
            lines.append(f"- rep {s['rep'] + 1} `{s['route']}` {s['server']}: {what}")

    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "http.md"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out, "http.json"), "w") as f:
        json.dump({"meta": {"date": date, "quick": args.quick, "reps": args.reps, "duration_s": args.duration,
                            "warmup_s": args.warmup, "conns": args.conns, "routes": routes, "versions": versions,
                            "machine_start": state0, "machine_end": state1},
                   "args": vars(args), "missing": missing, "summary": summary,
                   "ratios": {r: {k: (None if v is None else {"median": v[0], "min": v[1], "max": v[2]})
                                  for k, v in d.items()} for r, d in ratios.items()},
                   "samples": samples}, f, indent=1)
    log(f"http: wrote {os.path.join(args.out, 'http.md')} and http.json; servers' and wrk's output in {args.log}")

    weft_failed = [s for s in samples if s["server"] == "weft" and s.get("fatal")]
    if weft_failed:
        log(f"http: weft's server failed in {len(weft_failed)} sample(s)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
