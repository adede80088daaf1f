#!/usr/bin/env python3
"""bench/compare/runtime_report.py: the runtime section of the weft peer report.

Runs scheduler-level scenarios (many tasks, several workers) against
candidates that are separate programs, one fresh process per sample,
interleaved per repetition (rep 1: A B C, rep 2: A B C, ...), and writes

  OUT/runtime.md        the markdown tables (also printed on stdout)
  OUT/runtime.json      every sample, the medians [min, max], the targets
                        ("targets": the older R1-R7 ones; "hp_targets": issue
                        27's hot paths, HP1-HP6)
  OUT/runtime.svg/.png  grouped bars per scenario (only if matplotlib imports)
  OUT/runtime-log.txt   each child's command line and stderr (or --log FILE)

Usage:
  runtime_report.py --candidate NAME=COMMAND-PREFIX [--candidate ...]
                    [--missing NAME=REASON ...]
                    [--reps N] [--quick] [--out DIR] [--scenarios r1,r2,...]
                    [--workers 1,2] [--timeout S] [--mem-limit-gib G] [--cpu C]

  e.g. --candidate go=build/bench/weft_runtime_go
       --candidate tokio=build/bench/cargo-target/release/weft_runtime_tokio
       --candidate "boost.fiber=build/bench/weft_runtime_boost_fiber --stack 8192"
       --candidate weft=build/bench/bench/weft_runtime_weft

COMMAND-PREFIX is split like a shell would (shlex, no expansion); "{W}" in it
is replaced by the worker count. Names "weft", "go", "tokio" and
"boost.fiber" are special only in that the ratio columns are
weft/<every other candidate>, the older targets compare weft with "go" and
"boost.fiber", and the hot-path targets (HP1-HP6) compare weft with the best
of "go", "tokio" and "boost.fiber". A peer named in --missing (e.g.
"tokio=cargo is not installed"; repeatable) is listed in the report's header
as "NAME: not available (REASON)", and the hot-path table says so.

Progress goes to stderr. Exits 1 if a child of weft failed (crashed, non-zero
exit, timed out, went over the memory limit, or printed bad output) or a
peer's child failed in any way but a timeout, after writing everything it
has; 2 on a usage error. A child that times out is reported as a hang (its
cells say **hang**; the Failures section lists it) and that candidate's
later repetitions of the same scenario and worker count are skipped: a
peer's hang (Boost 1.74's channels have hang bugs fixed in later releases,
Boost.Fiber issues 254, 256, 258) is a finding about the peer, so it does not
change the exit status; weft's does.

== The candidate protocol ====================================================

A candidate is one program. The driver runs, for every scenario S in
r1 r2 r2s r3 r3b r4 r5 r5b r6 r6s r7 idle (and, for the candidate named "weft"
only, a1 a2 a3 a4f a4c a4p: the interop rows, below) and every worker count W in 1 2:

    COMMAND-PREFIX... S --workers W [--quick]

with GOMAXPROCS=W in the environment of every child (what the Go peer needs;
other programs ignore it). W=1 children are pinned to one CPU (--cpu, default
1; sched_setaffinity, like `taskset -c 1`); W=2 children are not pinned. The
program must

  * run S with a runtime of exactly W worker threads (the thread that calls
    main may be one of them, as in Boost.Fiber; helper threads the runtime
    keeps that never run tasks, such as Go's sysmon, do not count);
  * time only the scenario (not process start, not runtime start-up/shutdown);
  * verify its own result and exit non-zero (message on stderr) if wrong;
  * print exactly one non-empty line on stdout, a JSON object:

      {"scenario":"r1","workers":2,"seconds":0.75,"ops":1111111,
       "per_op_ns":675.0,"peak_rss_kib":240000,"extra":{"sum":499999500000}}

    scenario, workers  echo the command line;
    seconds            wall time of the timed region (a steady clock);
    ops                the operation count below (the driver checks it);
    per_op_ns          seconds * 1e9 / ops (null for idle);
    peak_rss_kib       VmHWM from /proc/self/status (kB), read after the
                       timed region: the peak RSS of the program's own image;
    extra              an object; the fields below are required, others are
                       kept in runtime.json; an optional extra.runtime
                       string (e.g. "go1.19.8", "Boost.Fiber 1.74
                       work_stealing") is listed in the report's header;
  * exit 0. Anything on stderr is logged, never parsed.

Why peak_rss_kib comes from the program: a child's ru_maxrss (getrusage or
os.wait4) keeps the RSS of the process image it replaced at exec, i.e. the
forked copy of this Python driver (about 10 MiB); a child that does nothing
shows that much. VmHWM belongs to the new image only. The driver still
records ru_maxrss per sample (runtime.json, "ru_maxrss_kib") and polls VmRSS
to enforce --mem-limit-gib.

"Task" is the runtime's ordinary unit (goroutine, fiber, weft task),
started with its ordinary spawn (Go's go statement; Boost.Fiber's default
launch::post: queued, the spawner runs on); a candidate whose spawn runs the
child first says so in its source. "Join" is whatever waits for a task's end
and hands over its result (fiber::join() plus a result slot; a channel or a
sync.WaitGroup in Go).

Scenarios (full size; --quick size in parentheses), ops and required extra:

  r1   skynet. A 10-ary tree of tasks over 1,000,000 leaves (10,000): the
       root task and every inner task spawn 10 children and sum the values
       they return; leaf i (0-based) returns i. Timed: from spawning the root
       to having its sum. ops = every task, 1,111,111 (11,111);
       extra.sum = 499,999,500,000 (49,995,000). Table: wall time and
       peak_rss_kib.
  r2   spawn+join. One task spawns 100,000 (10,000) trivial tasks (task i
       stores i in its own result slot), then joins them all and sums the
       slots. Timed: first spawn to last join. ops = tasks;
       extra.sum = n(n-1)/2. Table: ns per task.
  r2s  spawn+join, sequential. One task, n = 1,000,000 (10,000) times:
       spawns a trivial task that returns i, joins it at once and adds the
       result. Timed: the whole loop. ops = n; extra.sum = n(n-1)/2.
       Table: ns per task.
  r3   yield ring. 1,000 (100) tasks each yield 1,000 (100) times; the
       spawner joins them all. Timed: first spawn to last join (spawning and
       joining 1,000 tasks is about 0.1% of it). ops = total yields,
       1,000,000 (10,000). Table: ns per yield.
  r3b  ping-pong hog. A hog task loops { 64 xorshift64 steps
       (x ^= x << 13; x ^= x >> 7; x ^= x << 17); count; yield } until told to
       stop, while two other tasks exchange a value 1,000,000 (10,000) times
       over two channels without buffering (the closest the runtime has),
       each waking the other. Timed: the exchanges. ops = exchanges (round
       trips); extra.hog_per_exchange = hog iterations completed during the
       timed exchanges / exchanges (and extra.hog_iters). Table: ns per
       exchange and hog iterations per exchange; a fair scheduler gives the
       hog about one iteration per exchange or more at W=1; ~0 means the
       ping-pong pair starves it.
  r4   channel ping-pong. Two tasks exchange a value over two unbuffered
       (rendezvous) channels, one each way: the pinger sends i and receives
       the ponger's i+1, 500,000 (5,000) times, then closes its channel.
       Timed: spawning both to joining both. ops = messages (a send+recv
       each), 1,000,000 (10,000); extra.sum = the pinger's sum of what it
       received, R(R+1)/2 for R round trips. Table: ns per message.
  r5   buffered channel throughput. One producer task sends 0..n-1,
       n = 4,000,000 (40,000), into a channel of capacity 1,024; one
       consumer task sums what it receives until the channel is closed and
       drained; the spawning task closes it after joining the producer.
       Timed: first spawn to last join. ops = items; extra.sum = n(n-1)/2
       (the consumers' sums added). Table: ns per item.
  r5b  the same with four producers (producer k sends k, k+4, k+8, ...) and
       four consumers on one channel.
  r6   mutex contention. 1,000 (100) tasks each lock one mutex, increment a
       shared counter and unlock, 1,000 (100) times; the spawner joins them.
       Timed: first spawn to last join. ops = lock/unlock pairs, 1,000,000
       (10,000); extra.counter = ops. Table: ns per lock/unlock.
  r6s  mutex, few tasks. 4 tasks each lock one mutex, increment a shared
       counter and unlock, 250,000 (2,500) times; the spawner joins them.
       Timed: first spawn to last join. ops = lock/unlock pairs, 1,000,000
       (10,000); extra.counter = ops. Table: ns per lock/unlock.
  r7   timers. 1,000,000 (10,000) tasks; task i sleeps sleep_us(i)
       microseconds with the runtime's sleep, a fixed-seed random 10-100 ms
       (splitmix64 of 0x5eed000000000007 + i * 0x9e3779b97f4a7c15, then
       10,000 + z % 90,001: the same sleeps in every candidate), taking its
       deadline from the steady clock just before sleeping and comparing
       the clock with it on waking. Timed: first spawn to last join; CPU:
       getrusage(RUSAGE_SELF) user+sys over the same region. ops = tasks;
       required extra: early (wakes before the deadline; non-zero: the
       program prints its line, then exits non-zero), max_sleep_ms (the
       longest sleep), over_ms (wall time of the timed region beyond the
       longest sleep: spawning, timer lateness and joining),
       cpu_us_per_task (CPU time / tasks, in us); optional late_ms_max,
       late_ms_mean, user_s, sys_s. Table: over_ms, cpu_us_per_task and the
       early count (all samples, failed ones included).
  idle nothing to do. The runtime is started with W workers, then the
       program's task (or main thread) sleeps 2 s (0.2 s) with the runtime's
       own sleep. Timed: the sleep. ops = 0; per_op_ns = null;
       extra.cpu_percent = (user+sys CPU time of the whole process over the
       sleep, getrusage(RUSAGE_SELF)) / wall time * 100, i.e. % of one core.
       Table: that percentage.

weft-only scenarios (the interop rows, L7: weft's C++20 tasks, weft::async<T>,
next to its stackful tasks). They are run for the candidate named "weft" only
(other candidates are skipped: peers need not know them) and shown in their
own section, "Interop (L7): C++20 coroutines and stackful tasks". a1-a3
measure their variants in one process, in rounds with the order rotated, and
report each variant's median ns per op over the rounds in
extra.variants (required: every variant below, a number > 0); per_op_ns is
the first variant's (stackful only). "f" is a stackful task, "l" (or "c") a
C++20 task (weft::async<T> spawned with spawn(coro())).

  a1   pipeline, unbuffered weft::channel<long>(0): a producer sends 0..n-1,
       n = 200,000 (10,000), and closes; a consumer sums. Variants ff, lf,
       fl, ll (producer, consumer). ops = n; extra.sum = n(n-1)/2 (every
       variant checked by the program). Table: ns per hop (value).
  a2   the same over weft::channel<long>(1024), n = 1,000,000 (40,000).
  a3   spawn + join in batches of 1,000, n = 200,000 (10,000) tasks, task i
       returns i: variants sf (stackful root spawns stackful tasks), sc
       (stackful root spawns C++20 tasks, joins with join()), cc (a C++20
       root spawns C++20 tasks, joins with co_await). ops = n;
       extra.sum = n(n-1)/2. Table: ns per task.
  a4f, a4c  n = 100,000 (10,000) tasks all blocked at once on one weft event:
       stackful (a4f, event::wait) or C++20 (a4c, co_await co::wait), one
       process each. ops = n; required extra.rss_bytes_per_task (VmRSS
       growth while all wait / n). Table: RSS bytes per blocked task and
       peak RSS.
  a4p  the same with C++20 tasks parked on a foreign awaitable (a gate the
       program writes; no borrowed fiber while parked, A2).

Statistics: every cell is median [min, max] over the repetitions; ratios are
ratios of medians (below 1: weft is faster).

Targets (weft median / peer median of the table's main figure, at 1 and 2
workers; TARGETS below): R1, R2, R3, R4, R5 and R5b each at most 0.5x Go and
at most 0.5x Boost.Fiber; R6 at most 1.0x Go and at most 0.5x Boost.Fiber;
R7's CPU per task at most 0.5x Go's. And no R7 timer early, for every
candidate (met when its runs finished with early = 0). This older table is
kept as it was (R2 is now 100,000 tasks, not 1,000,000).

Hot-path targets (issue 27; HP_TARGETS below; section "Targets (issue 27,
hot paths)", runtime.json "hp_targets"): weft median / the best peer's
median of the scenario's main metric (ns per op), at W=1 and at W=2, where
the best peer is the one of go, tokio and boost.fiber with the lowest median
in this same run at the same W, among the peers whose every sample in that
cell ran without failure or hang:
  HP1 R2s spawn + join, sequential            <= 0.7x best peer
  HP2 R2 100,000 spawned at once, then joined  <= 0.7x best peer
  HP3 R3 yield                                  <= 0.6x best peer
  HP4 R4 unbuffered ping-pong                   <= 0.5x best peer
  HP5 R5 buffered channel                       <= 0.7x best peer
  HP6 R6s mutex, 4 tasks; R6 mutex, 1,000 tasks <= 0.8x best peer (both)
A row is "not evaluated (reason)" when weft has no clean figure there (a
sample failed or none ran) or no peer has one. A quick run prints the table
too, with a line saying that only a full run decides a target.
"""

import argparse
import datetime
import json
import math
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

PEER_SCENARIOS = ["r1", "r2", "r2s", "r3", "r3b", "r4", "r5", "r5b", "r6", "r6s", "r7", "idle"]
# weft-only scenarios (the interop rows): run for the candidate "weft" only.
WEFT_ONLY = ["a1", "a2", "a3", "a4f", "a4c", "a4p"]
SCENARIOS = PEER_SCENARIOS + WEFT_ONLY
ASYNC_VARIANTS = {
    "a1": ["ff", "lf", "fl", "ll"],
    "a2": ["ff", "lf", "fl", "ll"],
    "a3": ["sf", "sc", "cc"],
}
VARIANT_LABELS = {
    "ff": "stackful -> stackful", "lf": "C++20 -> stackful", "fl": "stackful -> C++20", "ll": "C++20 -> C++20",
    "sf": "stackful tasks (spawn(lambda), join())", "sc": "C++20 tasks (spawn(coro()), join())",
    "cc": "C++20 tasks from a C++20 root (co_await handle)",
}
# The interop section's rows: (scenario, metric, label, baseline metric or None).
ASYNC_ROWS = (
    [("a1", f"v:{v}", f"A1 unbuffered pipeline, {VARIANT_LABELS[v]}: ns per hop", "v:ff")
     for v in ASYNC_VARIANTS["a1"]]
    + [("a2", f"v:{v}", f"A2 buffered (1,024) pipeline, {VARIANT_LABELS[v]}: ns per hop", "v:ff")
       for v in ASYNC_VARIANTS["a2"]]
    + [("a3", f"v:{v}", f"A3 spawn + join, {VARIANT_LABELS[v]}: ns per task", "v:sf")
       for v in ASYNC_VARIANTS["a3"]]
    + [("a4f", "rsspt", "A4 blocked on an event, stackful: RSS bytes per task", None),
       ("a4c", "rsspt", "A4 blocked on an event, C++20 (co::wait, a borrowed fiber): RSS bytes per task",
        "a4f:rsspt"),
       ("a4p", "rsspt", "A4 parked on a foreign awaitable, C++20 (no fiber): RSS bytes per task", "a4f:rsspt"),
       ("a4f", "rss", "A4 stackful: peak RSS (MiB)", None),
       ("a4c", "rss", "A4 C++20, co::wait: peak RSS (MiB)", "a4f:rss"),
       ("a4p", "rss", "A4 C++20, foreign awaitable: peak RSS (MiB)", "a4f:rss")]
)
WORKERS = [1, 2]
TARGET_PEERS = ["go", "boost.fiber"]
# scenario -> {peer: the most weft median / peer median may be}, on the
# scenario's main metric (TABLES), at every worker count; a peer missing
# here has no target in that scenario.
TARGETS = {
    "r1": {"go": 0.5, "boost.fiber": 0.5},
    "r2": {"go": 0.5, "boost.fiber": 0.5},
    "r3": {"go": 0.5, "boost.fiber": 0.5},
    "r4": {"go": 0.5, "boost.fiber": 0.5},
    "r5": {"go": 0.5, "boost.fiber": 0.5},
    "r5b": {"go": 0.5, "boost.fiber": 0.5},
    "r6": {"go": 1.0, "boost.fiber": 0.5},
    "r7": {"go": 0.5},  # CPU time per sleeping task
}
# Issue 27's hot-path targets: (id, scenario, what, the most weft median /
# best peer median may be) on the scenario's main metric (TABLES), at every
# worker count; the best peer is the lowest median among HP_PEERS.
HP_PEERS = ["go", "tokio", "boost.fiber"]
HP_TARGETS = [
    ("HP1", "r2s", "R2s spawn + join, sequential", 0.7),
    ("HP2", "r2", "R2 100,000 spawned at once, then joined", 0.7),
    ("HP3", "r3", "R3 yield", 0.6),
    ("HP4", "r4", "R4 unbuffered ping-pong", 0.5),
    ("HP5", "r5", "R5 buffered channel", 0.7),
    ("HP6", "r6s", "R6s mutex, 4 tasks", 0.8),
    ("HP6", "r6", "R6 mutex, 1,000 tasks", 0.8),
]
STARVED = 0.01  # hog iterations per exchange below this: "starved"


def sizes(quick):
    """What each scenario must report: ops and checks (full or quick)."""
    q = 1 if quick else 0
    leaves = (1_000_000, 10_000)[q]
    tasks = sum(leaves // 10 ** k for k in range(7) if leaves // 10 ** k >= 1)
    n2 = (100_000, 10_000)[q]
    n2s = (1_000_000, 10_000)[q]
    ring = ((1000, 1000), (100, 100))[q]
    n3b = (1_000_000, 10_000)[q]
    sleep = (2.0, 0.2)[q]
    msgs4 = (1_000_000, 10_000)[q]
    trips4 = msgs4 // 2
    n5 = (4_000_000, 40_000)[q]
    mtx = ((1000, 1000), (100, 100))[q]
    mtxs = ((4, 250_000), (4, 2_500))[q]
    n7 = (1_000_000, 10_000)[q]
    na1 = (200_000, 10_000)[q]
    na2 = (1_000_000, 40_000)[q]
    na3 = (200_000, 10_000)[q]
    na4 = (100_000, 10_000)[q]
    return {
        "r1": dict(ops=tasks, sum=leaves * (leaves - 1) // 2, leaves=leaves),
        "r2": dict(ops=n2, sum=n2 * (n2 - 1) // 2),
        "r2s": dict(ops=n2s, sum=n2s * (n2s - 1) // 2),
        "r3": dict(ops=ring[0] * ring[1], tasks=ring[0], yields=ring[1]),
        "r3b": dict(ops=n3b),
        "r4": dict(ops=msgs4, sum=trips4 * (trips4 + 1) // 2, trips=trips4),
        "r5": dict(ops=n5, sum=n5 * (n5 - 1) // 2, producers=1, consumers=1),
        "r5b": dict(ops=n5, sum=n5 * (n5 - 1) // 2, producers=4, consumers=4),
        "r6": dict(ops=mtx[0] * mtx[1], counter=mtx[0] * mtx[1], tasks=mtx[0], locks=mtx[1]),
        "r6s": dict(ops=mtxs[0] * mtxs[1], counter=mtxs[0] * mtxs[1], tasks=mtxs[0], locks=mtxs[1]),
        "r7": dict(ops=n7, tasks=n7),
        "idle": dict(ops=0, sleep=sleep),
        "a1": dict(ops=na1, sum=na1 * (na1 - 1) // 2),
        "a2": dict(ops=na2, sum=na2 * (na2 - 1) // 2),
        "a3": dict(ops=na3, sum=na3 * (na3 - 1) // 2),
        "a4f": dict(ops=na4),
        "a4c": dict(ops=na4),
        "a4p": dict(ops=na4),
    }


# metric key -> (column label, unit, lower is better)
METRICS = {
    "ms": ("time (ms)", "ms", True),
    "rss": ("peak RSS (MiB)", "MiB", True),
    "ns": ("ns per op", "ns", True),
    "hog": ("hog iterations per exchange", "", False),
    "cpu": ("CPU (% of one core)", "%", True),
    "over": ("ms beyond the longest sleep", "ms", True),
    "cpu_us": ("CPU us per task", "us", True),
}
# scenario -> (title, [metric keys shown], the metric ratios and targets use)
TABLES = {
    "r1": ("R1 skynet: {ops:,} tasks (a 10-ary tree over {leaves:,} leaves)", ["ms", "rss"], "ms",
           {"ms": "wall time (ms)", "rss": "peak RSS (MiB)"}),
    "r2": ("R2 spawn+join: {ops:,} trivial tasks spawned by one task, then joined", ["ns"], "ns",
           {"ns": "ns per task"}),
    "r2s": ("R2s spawn+join, sequential: {ops:,} times one task spawns a trivial task and joins it at once",
            ["ns"], "ns", {"ns": "ns per task"}),
    "r3": ("R3 yield ring: {tasks:,} tasks x {yields:,} yields", ["ns"], "ns", {"ns": "ns per yield"}),
    "r3b": ("R3b ping-pong hog: {ops:,} exchanges while a hog task yields in a loop", ["ns", "hog"], "ns",
            {"ns": "ns per exchange", "hog": "hog iterations per exchange"}),
    "r4": ("R4 channel ping-pong: {trips:,} round trips over two unbuffered channels ({ops:,} messages)", ["ns"],
           "ns", {"ns": "ns per message"}),
    "r5": ("R5 buffered channel: {ops:,} items, {producers} producer, {consumers} consumer, capacity 1,024", ["ns"],
           "ns", {"ns": "ns per item"}),
    "r5b": ("R5b buffered channel: {ops:,} items, {producers} producers, {consumers} consumers, capacity 1,024",
            ["ns"], "ns", {"ns": "ns per item"}),
    "r6": ("R6 mutex contention: {tasks:,} tasks x {locks:,} lock/increment/unlock", ["ns"], "ns",
           {"ns": "ns per lock/unlock"}),
    "r6s": ("R6s mutex, few tasks: {tasks:,} tasks x {locks:,} lock/increment/unlock", ["ns"], "ns",
            {"ns": "ns per lock/unlock"}),
    "r7": ("R7 timers: {tasks:,} tasks each sleep a random 10-100 ms", ["over", "cpu_us"], "cpu_us",
           {"over": "ms beyond the longest sleep", "cpu_us": "CPU us per task"}),
    "idle": ("IDLE: a runtime with nothing to do for {sleep:g} s", ["cpu"], None,
             {"cpu": "CPU (% of one core)"}),
}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def fmt(v):
    if v is None or (isinstance(v, float) and (math.isnan(v) or math.isinf(v))):
        return "n/a"
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 0.01:
        return f"{v:.2f}"
    return f"{v:.2g}"


def cell(st):
    if not st:
        return "n/a"
    return f"{fmt(st['median'])} [{fmt(st['min'])}, {fmt(st['max'])}]"


def stat(values):
    v = [x for x in values if x is not None]
    if not v:
        return None
    return dict(median=statistics.median(v), min=min(v), max=max(v), n=len(v))


def read_first(path, default=""):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


def meminfo_kib(key):
    for line in read_first("/proc/meminfo").splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


class Runner:
    def __init__(self, args):
        self.a = args
        self.sz = sizes(args.quick)
        self.samples = []
        self.failures = []
        self.fatal = 0  # failures that make the exit status 1: all but a peer's hang
        self.hung = set()  # (scenario, w, candidate) that timed out: later repetitions are skipped
        self.notes = []
        self.logf = None
        ncpu = os.cpu_count() or 1
        self.pin_cpu = args.cpu if ncpu > 1 and args.cpu is not None else None
        if self.pin_cpu is not None and self.pin_cpu not in os.sched_getaffinity(0):
            self.notes.append(f"CPU {self.pin_cpu} is not available to the driver; W=1 runs are not pinned.")
            self.pin_cpu = None

    def command(self, prefix, scenario, w):
        cmd = [p.replace("{W}", str(w)) for p in prefix]
        cmd += [scenario, "--workers", str(w)]
        if self.a.quick:
            cmd.append("--quick")
        return cmd

    def run_child(self, cmd, w):
        """Runs one child; returns (result dict or None, error or None, rusage info)."""
        env = dict(os.environ)
        env["GOMAXPROCS"] = str(w)
        pin = self.pin_cpu if w == 1 else None

        def pre():
            if pin is not None:
                os.sched_setaffinity(0, {pin})

        limit_kib = int(self.a.mem_limit_gib * 1024 * 1024)
        out = tempfile.TemporaryFile(mode="w+")
        err = tempfile.TemporaryFile(mode="w+")
        t0 = time.monotonic()
        try:
            p = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
                                 preexec_fn=pre, start_new_session=True)
        except (OSError, subprocess.SubprocessError) as ex:
            return None, f"cannot start: {ex}", {}
        why = None
        hang = False
        peak_poll = 0
        delay = 0.001
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid != 0:
                break
            r = rss_kib(p.pid)
            peak_poll = max(peak_poll, r)
            if why is None and r > limit_kib:
                why = (f"killed: RSS {r / 1048576:.1f} GiB went over the memory limit "
                       f"({self.a.mem_limit_gib:g} GiB, --mem-limit-gib)")
            elif why is None and time.monotonic() - t0 > self.a.timeout:
                why = f"hang: timed out after {self.a.timeout:g} s"
                hang = True
            if why is not None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
                pid, status, ru = os.wait4(p.pid, 0)
                break
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        wall = time.monotonic() - t0
        p.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
        out.close()
        err.close()
        info = dict(wall_s=wall, ru_maxrss_kib=ru.ru_maxrss, polled_rss_kib=peak_poll,
                    user_s=ru.ru_utime, sys_s=ru.ru_stime, hang=hang)
        if self.logf:
            self.logf.write(f"$ GOMAXPROCS={w} {shlex.join(cmd)}"
                            + (f"   # pinned to CPU {pin}" if pin is not None else "") + "\n")
            self.logf.write(stderr)
            self.logf.write(f"# stdout: {stdout.strip()}\n# exit {p.returncode}, {wall:.2f} s, "
                            f"ru_maxrss {ru.ru_maxrss} KiB\n")
            self.logf.flush()
        tail = " | ".join(stderr.strip().splitlines()[-3:])
        if why is None and p.returncode != 0:
            why = (f"killed by signal {-p.returncode} ({signal.Signals(-p.returncode).name})"
                   if p.returncode < 0 else f"exit status {p.returncode}")
            # A program may print its line and then fail its own check (R7's
            # early timers): keep the count.
            try:
                early = json.loads(stdout.strip().splitlines()[-1])["extra"]["early"]
            except (ValueError, LookupError, TypeError, AttributeError):
                early = None
            if isinstance(early, int) and early > 0:
                info["early"] = early
                why = f"{early:,} timer(s) fired early; {why}"
        if why is not None:
            return None, why + (f" ({tail})" if tail else ""), info
        lines = [l for l in stdout.splitlines() if l.strip()]
        if len(lines) != 1:
            return None, f"bad output: {len(lines)} non-empty lines on stdout, want exactly 1", info
        try:
            res = json.loads(lines[0])
        except ValueError as ex:
            return None, f"bad output: not JSON ({ex}): {lines[0][:200]}", info
        return res, None, info

    def check(self, res, scenario, w):
        """Returns None if res follows the protocol, else what is wrong."""
        if not isinstance(res, dict):
            return "bad output: not a JSON object"
        if res.get("scenario") != scenario or res.get("workers") != w:
            return f"bad output: echoes scenario {res.get('scenario')!r} workers {res.get('workers')!r}"
        sec = res.get("seconds")
        if not isinstance(sec, (int, float)) or not math.isfinite(sec) or sec <= 0:
            return f"bad output: seconds = {sec!r}"
        extra = res.get("extra")
        if not isinstance(extra, dict):
            return "bad output: no extra object"
        want = self.sz[scenario]
        if res.get("ops") != want["ops"]:
            return f"bad output: ops = {res.get('ops')!r}, want {want['ops']:,} (wrong sizes?)"
        if scenario != "idle":
            if not isinstance(res.get("per_op_ns"), (int, float)):
                return f"bad output: per_op_ns = {res.get('per_op_ns')!r}"
        rss = res.get("peak_rss_kib")
        if not isinstance(rss, int) or rss <= 0:
            return f"bad output: peak_rss_kib = {rss!r}"
        if "sum" in want and extra.get("sum") != want["sum"]:
            return f"wrong result: extra.sum = {extra.get('sum')!r}, want {want['sum']:,}"
        if "counter" in want and extra.get("counter") != want["counter"]:
            return f"wrong result: extra.counter = {extra.get('counter')!r}, want {want['counter']:,}"
        if scenario == "r7":
            for k in ("early", "max_sleep_ms", "over_ms", "cpu_us_per_task"):
                v = extra.get(k)
                if not isinstance(v, (int, float)) or not math.isfinite(v):
                    return f"bad output: extra.{k} = {v!r}"
            if extra["early"] != 0:
                return f"{extra['early']:,} timer(s) fired early (and the program exited 0)"
            if not 10 <= extra["max_sleep_ms"] <= 100.001 or sec * 1000 < 0.999 * extra["max_sleep_ms"]:
                return f"bad output: took {sec * 1000:g} ms with a longest sleep of {extra['max_sleep_ms']!r} ms"
        if scenario == "r3b":
            h = extra.get("hog_per_exchange")
            if not isinstance(h, (int, float)) or h < 0:
                return f"bad output: extra.hog_per_exchange = {h!r}"
        if scenario in ASYNC_VARIANTS:
            v = extra.get("variants")
            if not isinstance(v, dict):
                return "bad output: no extra.variants object"
            for k in ASYNC_VARIANTS[scenario]:
                x = v.get(k)
                if not isinstance(x, (int, float)) or not math.isfinite(x) or x <= 0:
                    return f"bad output: extra.variants.{k} = {x!r}"
        if scenario in ("a4f", "a4c", "a4p"):
            x = extra.get("rss_bytes_per_task")
            if not isinstance(x, (int, float)) or not math.isfinite(x):
                return f"bad output: extra.rss_bytes_per_task = {x!r}"
        if scenario == "idle":
            c = extra.get("cpu_percent")
            if not isinstance(c, (int, float)) or c < 0:
                return f"bad output: extra.cpu_percent = {c!r}"
            if sec < 0.95 * want["sleep"]:
                return f"bad output: slept {sec:g} s, want {want['sleep']:g} s"
        return None

    def run(self):
        a = self.a
        total = a.reps * len(a.workers) * sum(
            1 for sc in a.scenarios for n, _ in a.candidates if sc not in WEFT_ONLY or n == "weft")
        k = 0
        for rep in range(a.reps):
            for scenario in a.scenarios:
                for w in a.workers:
                    for name, prefix in a.candidates:
                        if scenario in WEFT_ONLY and name != "weft":
                            continue  # peers do not implement the interop scenarios
                        k += 1
                        cmd = self.command(prefix, scenario, w)
                        hung = (scenario, w, name) in self.hung
                        if hung:
                            # It hung in an earlier repetition: another run
                            # would most likely cost the whole timeout again.
                            self.samples.append(dict(scenario=scenario, workers=w, candidate=name, rep=rep,
                                                     ok=False, skipped=True, hang=False, command=cmd,
                                                     error="skipped: hung in an earlier repetition"))
                            log(f"[{k}/{total}] rep {rep + 1}/{a.reps} {scenario} W={w} {name}: "
                                "skipped (hung in an earlier repetition)")
                            continue
                        res, why, info = self.run_child(cmd, w)
                        if why is None:
                            why = self.check(res, scenario, w)
                        s = dict(scenario=scenario, workers=w, candidate=name, rep=rep, ok=why is None,
                                 command=cmd, **info)
                        if why is None:
                            s.update(seconds=res["seconds"], ops=res["ops"], per_op_ns=res.get("per_op_ns"),
                                     peak_rss_kib=res["peak_rss_kib"], extra=res["extra"])
                        else:
                            s["error"] = why
                            self.failures.append(f"{scenario} W={w} {name} (rep {rep + 1}): {why}")
                            if info.get("hang"):
                                self.hung.add((scenario, w, name))
                            if name == "weft" or not info.get("hang"):
                                self.fatal += 1
                        self.samples.append(s)
                        if why is None:
                            if scenario in ASYNC_VARIANTS:
                                shown = ", ".join(f"{v} {fmt(x)}" for v, x in res["extra"]["variants"].items()) + " ns/op"
                            elif scenario in ("a4f", "a4c", "a4p"):
                                shown = f"{res['extra']['rss_bytes_per_task']:,.0f} RSS bytes per blocked task"
                            elif scenario == "idle":
                                shown = f"{res['extra']['cpu_percent']:.1f}% CPU"
                            else:
                                shown = f"{fmt(res['per_op_ns'])} ns/op"
                            msg = f"{res['seconds']:.3g} s timed, {shown}, peak RSS {res['peak_rss_kib'] / 1024:,.0f} MiB"
                        else:
                            msg = f"FAILED: {why}"
                        log(f"[{k}/{total}] rep {rep + 1}/{a.reps} {scenario} W={w} {name}: {msg} "
                            f"({info.get('wall_s', 0):.1f} s)")

    # -- statistics --
    def value(self, s, metric):
        if not s["ok"]:
            return None
        if metric == "ms":
            return s["seconds"] * 1000
        if metric == "rss":
            return s["peak_rss_kib"] / 1024
        if metric == "ns":
            return s["per_op_ns"]
        if metric == "hog":
            return s["extra"].get("hog_per_exchange")
        if metric == "cpu":
            return s["extra"].get("cpu_percent")
        if metric == "over":
            return s["extra"].get("over_ms")
        if metric == "cpu_us":
            return s["extra"].get("cpu_us_per_task")
        if metric.startswith("v:"):
            return s["extra"].get("variants", {}).get(metric[2:])
        if metric == "rsspt":
            return s["extra"].get("rss_bytes_per_task")
        raise KeyError(metric)

    def outcome(self, scenario, cand, w):
        """(samples run, ok, hung, skipped, other failures, timers early) of one cell."""
        ss = [s for s in self.samples if s["scenario"] == scenario and s["candidate"] == cand and s["workers"] == w]
        ok = sum(1 for s in ss if s["ok"])
        hung = sum(1 for s in ss if s.get("hang"))
        skipped = sum(1 for s in ss if s.get("skipped"))
        early = sum(s.get("early", 0) for s in ss) + sum(s["extra"].get("early", 0) for s in ss if s["ok"])
        return len(ss), ok, hung, skipped, len(ss) - ok - hung - skipped, early

    def stats(self, scenario, cand, w, metric):
        return stat([self.value(s, metric) for s in self.samples
                     if s["scenario"] == scenario and s["candidate"] == cand and s["workers"] == w])

    def summary(self):
        out = {}
        for scenario in self.a.scenarios:
            for name, _ in self.a.candidates:
                for w in self.a.workers:
                    for m in metrics_of(scenario):
                        st = self.stats(scenario, name, w, m)
                        if st:
                            out.setdefault(scenario, {}).setdefault(name, {}).setdefault(f"W={w}", {})[m] = st
        return out


def metrics_of(scenario):
    """The metric keys a scenario's samples are summarised by."""
    if scenario in WEFT_ONLY:
        return [m for sc, m, _, _ in ASYNC_ROWS if sc == scenario]
    return TABLES[scenario][1]


ASYNC_READ = """\
weft only (peers have no such thing): its C++20 tasks (`weft::async<T>` spawned with
`spawn(coro())`, no stack of their own) next to its stackful tasks, in the same process per
sample (the variants of A1-A3 run in rotated rounds in each process; a cell is the median over
the repetitions of each process's median). A hop is one value through the channel (a send and
its recv); a C++20 task's `co_await co::send/recv` first tries the operation without waiting
and, if it must wait, runs the blocking call on a fiber borrowed for that call (A3 in
src/async/async.cpp). A4: RSS growth per task while all wait on one event (one process per
variant, so that pooled stacks are not shared); a C++20 task in a `weft::co` wait holds a
borrowed fiber for the wait; A4 parked on a foreign awaitable (a gate the program writes) it
holds none (A2). Ratio: the row's median / the stackful-only row's median at the
same W."""


def async_md(r):
    """The interop section (weft-only scenarios), or [] if none was asked for."""
    a = r.a
    wanted = [sc for sc in WEFT_ONLY if sc in a.scenarios]
    if not wanted:
        return []
    md = ["## Interop (L7): C++20 coroutines and stackful tasks", ""]
    if "weft" not in [n for n, _ in a.candidates]:
        return md + ["Not run: no candidate named weft (these scenarios are weft's alone).", ""]
    sz = r.sz
    md += [ASYNC_READ, "",
           "Sizes: " + "; ".join(f"{sc.upper()} {sz[sc]['ops']:,}" + (" values" if sc in ("a1", "a2") else " tasks")
                                  for sc in wanted) + ".", ""]
    head = ["row"] + [f"W={w}" for w in a.workers] + [f"vs stackful W={w}" for w in a.workers]
    md.append("| " + " | ".join(head) + " |")
    md.append("|" + "---|" * len(head))
    for sc, m, label, base in ASYNC_ROWS:
        if sc not in a.scenarios:
            continue
        row = [label]
        for w in a.workers:
            c = cell(r.stats(sc, "weft", w, m))
            runs, ok, hung, skipped, other, _ = r.outcome(sc, "weft", w)
            if runs and not ok:
                c = "**hang** (timed out)" if hung and not other else "**failed**"
            row.append(c)
        for w in a.workers:
            if base is None:
                row.append("")
                continue
            bsc, bm = base.split(":") if base.count(":") == 1 and not base.startswith("v:") else (sc, base)
            q = ratio(r.stats(sc, "weft", w, m), r.stats(bsc, "weft", w, bm)) if bsc in a.scenarios else None
            row.append("n/a" if q is None else f"{q:.2f}")
        md.append("| " + " | ".join(row) + " |")
    md.append("")
    failed = [f for f in r.failures if f.split(" ", 1)[0] in WEFT_ONLY]
    if failed:
        md += [f"{len(failed)} sample(s) failed here (see Failures).", ""]
    return md


def ratio(a, b):
    if not a or not b or not b["median"]:
        return None
    return a["median"] / b["median"]


def machine_lines(r, started, elapsed):
    a = r.a
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout if shutil.which("lscpu") else ""
    m = re.search(r"Model name:\s*(.+)", lscpu)
    model = m.group(1).strip() if m else (platform.processor() or "?")
    hyper = re.search(r"Hypervisor vendor:\s*(.+)", lscpu)
    lines = [
        f"- date: {started.strftime('%Y-%m-%d %H:%M UTC')}; {'quick run (--quick)' if a.quick else 'full run'}, "
        f"{a.reps} interleaved repetition{'s' if a.reps != 1 else ''}, took {elapsed / 60:.1f} min",
        f"- machine: {model}, {os.cpu_count()} cores" + (f" ({hyper.group(1).strip()} guest)" if hyper else "")
        + f"; {meminfo_kib('MemTotal') / 1048576:.0f} GiB; Linux {platform.release()}",
        "- W=1 runs " + (f"pinned to CPU {r.pin_cpu} (sched_setaffinity, as `taskset -c {r.pin_cpu}`)"
                         if r.pin_cpu is not None else "not pinned (one CPU)")
        + f"; W=2 runs unpinned (CPUs {','.join(map(str, sorted(os.sched_getaffinity(0))))}); "
          "GOMAXPROCS=W for every child",
        "- load average (1, 5, 15 min) at the start: " + ", ".join(f"{x:.2f}" for x in r.load_at_start)
        + f" ({os.cpu_count()} CPUs; other work on a shared machine shows here)",
        f"- each sample a fresh process; timeout {a.timeout:g} s, memory limit {a.mem_limit_gib:g} GiB RSS per child",
        "- candidates: " + "; ".join(f"**{n}** `{shlex.join(p)}`" for n, p in a.candidates),
    ]
    for n, _ in a.candidates:
        rt = sorted({str(s["extra"]["runtime"]) for s in r.samples
                     if s["candidate"] == n and s["ok"] and "runtime" in s["extra"]})
        if rt:
            lines.append(f"- {n} reports: " + "; ".join(rt))
    return lines


def scenario_table(r, scenario):
    a = r.a
    title, metrics, main_metric, labels = TABLES[scenario]
    sz = r.sz[scenario]
    md = [f"## {title.format(**sz)}", ""]
    names = [n for n, _ in a.candidates]
    peers = [n for n in names if n != "weft"] if "weft" in names and main_metric else []
    head = ["candidate"]
    for m in metrics:
        for w in a.workers:
            head.append(f"W={w} {labels[m]}")
    if scenario == "r7":
        for w in a.workers:
            head.append(f"W={w} timers early")
    for p in peers:
        for w in a.workers:
            head.append(f"weft/{p} W={w}")
    md.append("| " + " | ".join(head) + " |")
    md.append("|" + "---|" * len(head))
    for n in names:
        row = [n]
        for m in metrics:
            for w in a.workers:
                st = r.stats(scenario, n, w, m)
                c = cell(st)
                if m == "hog" and st and st["median"] < STARVED:
                    c += " (starved)"
                runs, ok, hung, skipped, other, _ = r.outcome(scenario, n, w)
                if runs and not ok:
                    c = ("**hang** (timed out)" if hung and not other else
                         "**failed**" + (" / hang" if hung else ""))
                elif hung or other:
                    c += f" ({hung + skipped} of {runs} hung)" if hung else f" ({other} of {runs} failed)"
                row.append(c)
        if scenario == "r7":
            for w in a.workers:
                runs, ok, hung, skipped, other, early = r.outcome(scenario, n, w)
                row.append("n/a" if not runs else f"**{early:,}**" if early else
                           "0" if ok else "n/a (no run finished)")
        for p in peers:
            for w in a.workers:
                if n == "weft":
                    q = ratio(r.stats(scenario, "weft", w, main_metric), r.stats(scenario, p, w, main_metric))
                    row.append("n/a" if q is None else f"{q:.2f}")
                else:
                    row.append("")
        md.append("| " + " | ".join(row) + " |")
    md.append("")
    failed = [f for f in r.failures if f.startswith(f"{scenario} ")]
    if failed:
        md.append(f"{len(failed)} sample(s) failed here (see Failures); their cells use the other samples, if any.")
        md.append("")
    return md


def targets(r):
    """[dict(scenario, workers, peer, limit, ratio or None, met or None)], and for
    R7 dict(scenario="r7", check="no timer early", candidate, workers, early, met)."""
    names = [n for n, _ in r.a.candidates]
    out = []
    if "weft" in names:
        for scenario, limits in TARGETS.items():
            if scenario not in r.a.scenarios:
                continue
            m = TABLES[scenario][2]
            for peer in TARGET_PEERS:
                if peer not in limits:
                    continue
                for w in r.a.workers:
                    q = None
                    if peer in names:
                        q = ratio(r.stats(scenario, "weft", w, m), r.stats(scenario, peer, w, m))
                    out.append(dict(scenario=scenario, workers=w, peer=peer, limit=limits[peer], ratio=q,
                                    met=None if q is None else q <= limits[peer]))
    if "r7" in r.a.scenarios:
        for n in names:
            for w in r.a.workers:
                runs, ok, hung, skipped, other, early = r.outcome("r7", n, w)
                out.append(dict(scenario="r7", check="no timer early", candidate=n, workers=w, early=early,
                                met=False if early else (True if ok else None)))
    return out


def targets_md(r, tg):
    if not any(sc in r.a.scenarios for sc in TARGETS):
        return []  # e.g. a run of the weft-only interop rows alone
    md = ["## Targets", ""]
    names = [n for n, _ in r.a.candidates]
    ratios = [t for t in tg if "peer" in t]
    checks = [t for t in tg if "check" in t]
    rule = ("R1, R2, R3, R4, R5 (and R5b) each at most 0.5x Go and at most 0.5x Boost.Fiber; R6 at most 1.0x "
            "Go and at most 0.5x Boost.Fiber; R7's CPU time per task at most 0.5x Go's (weft median / peer "
            "median, at 1 and 2 workers); and no R7 timer early, for every candidate")
    if "weft" not in names:
        md += [f"targets: not evaluated (no candidate named weft). They are: {rule}.", ""]
        return md
    met = sum(1 for t in tg if t["met"] is True)
    unmet = sum(1 for t in tg if t["met"] is False)
    na = len(tg) - met - unmet
    md.append(f"targets: {rule}: {met} of {len(tg)} met, {unmet} not met"
              + (f", {na} without a figure" if na else "") + ".")
    md.append("")
    cols = [(p, w) for p in TARGET_PEERS for w in r.a.workers]
    md.append("| target | " + " | ".join(f"vs {p} W={w}" for p, w in cols) + " |")
    md.append("|---|" + "---|" * len(cols))
    for scenario, limits in TARGETS.items():
        if scenario not in r.a.scenarios:
            continue
        what = " (CPU per task)" if scenario == "r7" else ""
        row = [f"{scenario.upper()}{what} <= " + " / ".join(f"{limits[p]}x {p}" for p in TARGET_PEERS if p in limits)]
        for p, w in cols:
            t = next((t for t in ratios if t["scenario"] == scenario and t["peer"] == p and t["workers"] == w), None)
            if p not in limits:
                row.append("(no target)")
            elif t is None or t["ratio"] is None:
                row.append("n/a (not run)" if p not in names else "n/a (no figure)")
            else:
                row.append(f"{t['ratio']:.2f} {'met' if t['met'] else 'NOT met'}")
        md.append("| " + " | ".join(row) + " |")
    md.append("")
    if checks:
        md.append("| R7: no timer early | " + " | ".join(f"W={w}" for w in r.a.workers) + " |")
        md.append("|---|" + "---|" * len(r.a.workers))
        for n in names:
            row = [n]
            for w in r.a.workers:
                t = next(t for t in checks if t["candidate"] == n and t["workers"] == w)
                row.append("n/a (no run finished)" if t["met"] is None else
                           "met (0 early)" if t["met"] else f"NOT met ({t['early']:,} early)")
            md.append("| " + " | ".join(row) + " |")
        md.append("")
    return md


def hp_targets(r):
    """Issue 27's hot-path targets: one dict per (HP_TARGETS row, worker
    count) with id, scenario, what, workers, limit, weft (median or None),
    peers ({peer: median or None}), best_peer, ratio, met (True, False or
    None: not evaluated), reason (why not evaluated), measured (the cell's
    text) and decisive (False in a quick run)."""
    a = r.a
    names = [n for n, _ in a.candidates]
    missing = dict(getattr(a, "missing", []) or [])
    out = []
    for hp, scenario, what, limit in HP_TARGETS:
        if scenario not in a.scenarios:
            continue
        m = TABLES[scenario][2]
        for w in a.workers:
            t = dict(id=hp, scenario=scenario, what=what, workers=w, limit=limit, weft=None, peers={},
                     best_peer=None, ratio=None, met=None, reason=None, measured="", decisive=not a.quick)
            notes = []  # the peers without a figure here, and why
            clean = {}
            for p in HP_PEERS:
                if p not in names:
                    notes.append(f"{p} not available ({missing[p]})" if p in missing else f"{p} not run")
                    continue
                runs, ok, hung, skipped, other, _ = r.outcome(scenario, p, w)
                st = r.stats(scenario, p, w, m)
                t["peers"][p] = st["median"] if st else None
                if not runs:
                    notes.append(f"{p} not run")
                elif hung or skipped or other or not st:
                    bad = hung + skipped + other
                    notes.append(f"{p} left out: {bad} of {runs} run(s) "
                                 + ("hung" if (hung or skipped) and not other else "failed"))
                else:
                    clean[p] = st["median"]
            wst = r.stats(scenario, "weft", w, m) if "weft" in names else None
            wruns, wok, whung, wskipped, wother, _ = r.outcome(scenario, "weft", w)
            if "weft" not in names:
                t["reason"] = "no candidate named weft"
            elif not wruns:
                t["reason"] = "weft not run"
            elif whung or wskipped or wother or not wst:
                t["reason"] = f"weft: {whung + wskipped + wother} of {wruns} run(s) failed or hung"
            elif not clean:
                t["reason"] = "no peer figure: " + "; ".join(notes)
            if wst:
                t["weft"] = wst["median"]
            if t["reason"] is None:
                best = min(clean, key=lambda p: clean[p])
                q = t["weft"] / clean[best]
                t.update(best_peer=best, ratio=q, met=q <= limit)
                others = [f"{p} {fmt(clean[p])}" for p in HP_PEERS if p in clean and p != best]
                text = (f"{q:.2f}x {best} (weft {fmt(t['weft'])} ns, {best} {fmt(clean[best])} ns"
                        + ("; " + ", ".join(others) if others else "") + ")")
                if notes:
                    text += "; " + "; ".join(notes)
                t["measured"] = text
            else:
                t["measured"] = (f"weft {fmt(t['weft'])} ns" if t["weft"] is not None else "n/a")
            out.append(t)
    return out


def hp_targets_md(r, hp):
    if not hp:
        return []
    md = ["## Targets (issue 27, hot paths)", ""]
    md.append("weft median / the best peer's median (the lowest of go, tokio and boost.fiber in this run at the "
              "same W, among the peers whose every sample there ran without failure or hang), ns per op.")
    missing = [(n, why) for n, why in (getattr(r.a, "missing", []) or []) if n in HP_PEERS]
    if missing:
        md.append("Not available: " + "; ".join(f"{n} ({why})" for n, why in missing) + ".")
    met = sum(1 for t in hp if t["met"] is True)
    unmet = sum(1 for t in hp if t["met"] is False)
    md.append(f"{met} of {len(hp)} met, {unmet} not met" + (f", {len(hp) - met - unmet} not evaluated"
                                                          if len(hp) - met - unmet else "") + ".")
    md.append("")
    if r.a.quick:
        md += ["**Quick run (--quick): small sizes, few repetitions. This table only shows that the rows "
               "can be computed; only a full run decides a target.**", ""]
    md += ["| target | limit | measured | met |", "|---|---|---|---|"]
    for t in hp:
        status = ("met" if t["met"] else "not met") if t["met"] is not None else f"not evaluated ({t['reason']})"
        md.append(f"| {t['id']} {t['what']}, W={t['workers']} | <= {t['limit']}x best peer | {t['measured']} "
                  f"| {status} |")
    md.append("")
    return md


READ = """\
How to read this: every cell is **median [min, max]** over the repetitions, each a fresh
process, candidates interleaved (A B C, A B C, ...); W = worker threads. R1 shows the wall
time of the whole tree and the program's peak RSS (VmHWM, its whole image: runtime, binary
and libraries included); R2 ns per task spawned and joined (all spawned, then all joined;
R2s: each joined before the next is spawned); R3 ns per yield; R3b ns per ping-pong
exchange (a round trip) and how many loop iterations the yielding hog task got per exchange
(about 1 or more is fair; "starved" below {starved}); R4 ns per message over an unbuffered
channel (a round trip is two); R5 / R5b ns per item through a buffered channel; R6 / R6s ns
per contended lock/unlock (1,000 tasks / 4 tasks); R7 the wall time past the longest sleep (spawning included) and the
process's user+sys CPU time per sleeping task, and timers that woke before their deadline
(must be 0); IDLE the process's CPU time over the sleep as % of one core (a spinning idle
worker costs ~100%). Ratio columns: weft median / peer median of the time figure (R7: of the
CPU per task; below 1: weft is faster). A cell that says **hang** timed out (--timeout); a
candidate that hangs is not run again in that cell (later repetitions are skipped)."""


def charts(r, outdir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as ex:
        r.notes.append(f"chart: matplotlib is not available ({ex}); no chart drawn.")
        return []
    plt.rcParams["svg.hashsalt"] = "weft"
    panels = []
    for scenario in r.a.scenarios:
        if scenario in WEFT_ONLY:
            continue
        _, metrics, _, labels = TABLES[scenario]
        for m in metrics:
            panels.append((scenario, m, f"{scenario.upper()}: {labels[m]}"))
    # The interop rows (weft only): one panel per scenario, a bar per variant.
    async_panels = []
    if "weft" in [n for n, _ in r.a.candidates]:
        for sc, what in (("a1", "ns per hop"), ("a2", "ns per hop"), ("a3", "ns per task")):
            if sc in r.a.scenarios:
                async_panels.append(([(sc, f"v:{v}", v) for v in ASYNC_VARIANTS[sc]],
                                     f"{sc.upper()} (weft, interop): {what}", True))
        if any(sc in r.a.scenarios for sc in ("a4f", "a4c", "a4p")):
            async_panels.append(([(sc, "rsspt", lab) for sc, lab in (("a4f", "stackful"), ("a4c", "C++20 co::wait"),
                                                                    ("a4p", "C++20 foreign"))
                                  if sc in r.a.scenarios], "A4 (weft, interop): RSS bytes per blocked task", False))
    names = [n for n, _ in r.a.candidates]
    palette = ["#7570b3", "#1b9e77", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666"]
    colors, k = {}, 0
    for n in names:
        if n == "weft":
            colors[n] = "#d95f02"
        else:
            colors[n] = palette[k % len(palette)]
            k += 1
    if not panels and not async_panels:
        return []
    ncols = 4
    nmain = len(panels)
    panels = panels + async_panels
    nrows = (len(panels) + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(4 * ncols, 3.2 * nrows), squeeze=False)
    width = 0.8 / max(1, len(names))
    for i, panel in enumerate(panels):
        ax = axes[i // ncols][i % ncols]
        if i >= nmain:
            series, title, logscale = panel
            wd = 0.8 / max(1, len(series))
            for j, (sc, m, lab) in enumerate(series):
                xs, med, lo, hi = [], [], [], []
                for x, w in enumerate(r.a.workers):
                    st = r.stats(sc, "weft", w, m)
                    if not st or (logscale and st["min"] <= 0):
                        continue
                    xs.append(x - 0.4 + wd * (j + 0.5))
                    med.append(st["median"])
                    lo.append(st["median"] - st["min"])
                    hi.append(st["max"] - st["median"])
                if xs:
                    ax.bar(xs, med, wd, yerr=[lo, hi], color=palette[j % len(palette)], capsize=2,
                           error_kw=dict(lw=0.8), label=lab)
                    for x, v in zip(xs, med):
                        ax.text(x, v, fmt(v), ha="center", va="bottom", fontsize=6)
            ax.set_xticks(range(len(r.a.workers)), [f"W={w}" for w in r.a.workers])
            if logscale:
                ax.set_yscale("log")
            ax.set_title(title, fontsize=9)
            ax.grid(axis="y", which="both", alpha=0.3)
            ax.tick_params(labelsize=7)
            ax.legend(fontsize=6, frameon=False)
            continue
        scenario, m, title = panel
        logscale = m in ("ms", "ns", "rss", "over", "cpu_us")
        for j, n in enumerate(names):
            xs, med, lo, hi = [], [], [], []
            for x, w in enumerate(r.a.workers):
                st = r.stats(scenario, n, w, m)
                if not st or (logscale and st["min"] <= 0):
                    continue
                xs.append(x - 0.4 + width * (j + 0.5))
                med.append(st["median"])
                lo.append(st["median"] - st["min"])
                hi.append(st["max"] - st["median"])
            if xs:
                ax.bar(xs, med, width, yerr=[lo, hi], color=colors[n], capsize=2, error_kw=dict(lw=0.8),
                       label=n)
                for x, v in zip(xs, med):
                    ax.text(x, v, fmt(v), ha="center", va="bottom", fontsize=6)
        ax.set_xticks(range(len(r.a.workers)), [f"W={w}" for w in r.a.workers])
        if logscale:
            ax.set_yscale("log")
        ax.set_title(title, fontsize=9)
        ax.grid(axis="y", which="both", alpha=0.3)
        ax.tick_params(labelsize=7)
    for i in range(len(panels), nrows * ncols):
        axes[i // ncols][i % ncols].axis("off")
    if nmain:
        handles = [plt.Rectangle((0, 0), 1, 1, color=colors[n]) for n in names]
        fig.legend(handles, names, loc="lower right", fontsize=8, frameon=False)
        fig.suptitle(f"weft runtime peers, median [min, max]; {r.started_str}", fontsize=10)
    else:
        fig.suptitle(f"weft interop rows (L7: C++20 tasks and stackful tasks), median [min, max]; {r.started_str}",
                     fontsize=10)
    fig.tight_layout()
    path = os.path.join(outdir, "runtime.svg")
    fig.savefig(path, metadata={"Date": None})
    fig.savefig(path[:-4] + ".png", dpi=100)
    plt.close(fig)
    return [path, path[:-4] + ".png"]


def parse_candidate(text):
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"--candidate wants NAME=COMMAND-PREFIX, got {text!r}")
    name, cmd = text.split("=", 1)
    prefix = shlex.split(cmd)
    if not name or not prefix:
        raise argparse.ArgumentTypeError(f"--candidate wants NAME=COMMAND-PREFIX, got {text!r}")
    return name, prefix


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--candidate", action="append", type=parse_candidate, default=[],
                    help="NAME=COMMAND-PREFIX (repeatable); the driver appends: SCENARIO --workers W [--quick]")
    ap.add_argument("--missing", action="append", default=[],
                    help="NAME=REASON (repeatable): a peer that could not be built; listed in the header")
    ap.add_argument("--reps", type=int, help="repetitions (default 5; --quick: 1)")
    ap.add_argument("--quick", action="store_true", help="small sizes, for CI: checks that everything runs")
    ap.add_argument("--out", default=".", help="directory for runtime.md/json/svg/png (default: .)")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS),
                    help="comma-separated subset of " + " ".join(SCENARIOS) + " (" + " ".join(WEFT_ONLY)
                    + ": weft only, the interop rows)")
    ap.add_argument("--workers", default=",".join(map(str, WORKERS)),
                    help="comma-separated worker counts (default 1,2)")
    ap.add_argument("--timeout", type=float, help="seconds per child (default 120; --quick: 20)")
    ap.add_argument("--mem-limit-gib", type=float, default=9.0,
                    help="kill a child whose RSS goes over this (default 9 GiB)")
    ap.add_argument("--cpu", type=int, default=1, help="the CPU W=1 children are pinned to (default 1)")
    ap.add_argument("--log", help="file for the children's stderr (default OUT/runtime-log.txt)")
    a = ap.parse_args()
    if not a.candidate:
        ap.error("give at least one --candidate NAME=COMMAND-PREFIX")
    names = [n for n, _ in a.candidate]
    if len(set(names)) != len(names):
        ap.error("candidate names must differ")
    a.candidates = a.candidate
    a.missing = [tuple(m.split("=", 1)) if "=" in m else (m, "no reason given") for m in a.missing]
    both = [n for n, _ in a.missing if n in names]
    if both:
        ap.error(f"both a --candidate and --missing: {' '.join(both)}")
    a.scenarios = [s for s in a.scenarios.split(",") if s]
    bad = [s for s in a.scenarios if s not in SCENARIOS]
    if bad:
        ap.error(f"unknown scenario(s): {' '.join(bad)}")
    try:
        a.workers = [int(w) for w in a.workers.split(",") if w]
    except ValueError:
        ap.error("--workers wants integers")
    if a.reps is None:
        a.reps = 1 if a.quick else 5
    if a.timeout is None:
        a.timeout = 20.0 if a.quick else 120.0

    os.makedirs(a.out, exist_ok=True)
    started = datetime.datetime.now(datetime.timezone.utc)
    t0 = time.monotonic()
    r = Runner(a)
    r.load_at_start = os.getloadavg()
    r.started_str = started.strftime("%Y-%m-%d") + (", quick run" if a.quick else "")
    r.logf = open(a.log or os.path.join(a.out, "runtime-log.txt"), "w")
    log(f"runtime report: {len(a.candidates)} candidate(s), {len(a.scenarios)} scenario(s), "
        f"W in {a.workers}, {a.reps} repetition(s){' (quick)' if a.quick else ''}")
    try:
        r.run()
    except KeyboardInterrupt:
        r.failures.append("interrupted (Ctrl-C); the tables hold what had run")
        log("runtime report: interrupted; writing what there is")
    elapsed = time.monotonic() - t0

    written = charts(r, a.out)
    tg = targets(r)
    hp = hp_targets(r)
    peer_run = any(sc not in WEFT_ONLY for sc in a.scenarios)
    pretty = {"go": "Go", "tokio": "Tokio", "boost.fiber": "Boost.Fiber"}
    peers = [pretty.get(n, n) for n, _ in a.candidates if n != "weft"]
    against = (", ".join(peers[:-1]) + " and " + peers[-1]) if len(peers) > 1 else (peers[0] if peers else "")
    md = [("# weft runtime report: scheduler scenarios" + (f" against {against}" if against else "")) if peer_run
          else "# weft runtime report: the interop rows (L7, weft only)", ""]
    md += machine_lines(r, started, elapsed)
    for n, why in a.missing:
        md.append(f"- **{n}: not available** ({why})")
    md += ["", READ.format(starved=STARVED), ""] if peer_run else [""]
    for scenario in a.scenarios:
        if scenario not in WEFT_ONLY:
            md += scenario_table(r, scenario)
    md += async_md(r)
    md += hp_targets_md(r, hp)
    md += targets_md(r, tg)
    if written:
        md += ["## Chart", "", f"![runtime](runtime.svg)", ""]
    if r.notes:
        md += ["## Notes", ""] + [f"- {n}" for n in r.notes] + [""]
    if r.failures:
        md += ["## Failures", ""] + [f"- {f}" for f in r.failures] + [""]
        hung = sorted(r.hung)
        if hung:
            md += ["Hangs: " + "; ".join(f"{c} in {sc} W={w}" for sc, w, c in hung)
                   + " (timed out; later repetitions of that cell were skipped). A peer's hang is "
                   "reported, not an error: the exit status stays 0 unless weft failed or a peer "
                   "failed otherwise.", ""]
    text = "\n".join(md)
    with open(os.path.join(a.out, "runtime.md"), "w") as f:
        f.write(text)
    meta = dict(date=started.isoformat(), quick=a.quick, reps=a.reps, elapsed_s=elapsed,
                candidates={n: p for n, p in a.candidates}, missing=dict(a.missing), scenarios=a.scenarios, workers=a.workers,
                sizes=r.sz, pin_cpu=r.pin_cpu, timeout_s=a.timeout, mem_limit_gib=a.mem_limit_gib,
                machine=dict(cpus=os.cpu_count(), kernel=platform.release(),
                             mem_total_kib=meminfo_kib("MemTotal")),
                notes=r.notes)
    with open(os.path.join(a.out, "runtime.json"), "w") as f:
        json.dump(dict(meta=meta, summary=r.summary(), targets=tg, hp_targets=hp, failures=r.failures,
                       samples=r.samples), f, indent=1)
    r.logf.close()
    print(text)
    log(f"runtime report: wrote {a.out}/runtime.md, runtime.json" + (", runtime.svg, runtime.png" if written else "")
        + f" in {elapsed / 60:.1f} min")
    if r.failures:
        hangs = len(r.failures) - r.fatal
        log(f"runtime report: {len(r.failures)} child run(s) failed"
            + (f", {hangs} of them a peer's hang (reported in the tables, not an error)" if hangs else ""))
    return 1 if r.fatal else 0


if __name__ == "__main__":
    sys.exit(main())
