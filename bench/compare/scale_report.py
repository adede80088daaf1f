#!/usr/bin/env python3
"""bench/compare/scale_report.py: the scale section of the weft peer report
(issue 26's targets SC1-SC8, issue 42's SH1-SH6, "idle tasks shrink
without a trace", and issue 43's SC10-SC11, timers without a task): weft
against Go, Tokio and Boost.Fiber with many idle tasks, timers and
deadlines, the doors of weft's idle-stack shrinking (spawning many, waking
many, pinging after each idle time, periodic wakes), and many callback
timers (weft::timer against Go's time.AfterFunc and Tokio's DelayQueue).

Writes

  OUT/scale.md        the tables and the targets table (also printed on stdout)
  OUT/scale.json      every sample, the medians [min, max], the targets
  OUT/scale-log.txt   each child's command line and stderr (or --log FILE)

Usage:
  scale_report.py --candidate NAME=COMMAND-PREFIX [--candidate ...]
                  [--missing NAME=WHY ...] [--quick] [--reps N] [--out DIR]
                  [--only sc1,sc2,...,sc10,sc11,sh1,...] [--idle-ms N] [--idle-conns-json FILE]

  e.g. --candidate weft=build/bench/bench/weft_runtime_weft
       --candidate go=build/bench/weft_runtime_go
       --candidate tokio=build/bench/cargo-target/release/weft_runtime_tokio
       --candidate "boost.fiber=build/bench/bench/weft_runtime_boost_fiber --stack 8192"

The candidates are the runtime section's programs (runtime_report.py's
docstring is the protocol: `PREFIX SCENARIO --workers W [--quick]`, one JSON
line on stdout, GOMAXPROCS=W, W=1 pinned to one CPU, each sample a fresh
process); this script adds `--count N` where it needs another size,
`--idle-ms MS` to the idle scenarios (sc1, sc3, sc4, sh1-sh3) and
`--period-ms MS --run-ms MS` to sh4. The names weft, go, tokio and
boost.fiber are the ones the targets use. A candidate named in --missing
(e.g. "tokio=cargo is not installed") is listed as not available with the
reason. The "weft" column runs weft with its DEFAULT runtime options: this
script passes no shrink threshold (runtime_options::shrink_idle_after is
whatever the library's default is; weft's samples report the value they ran
with, and the report prints it). "weft-noshrink" is weft's prefix with
`--shrink-idle-after-ms 0` (shrinking off; SC8 and the SH rows), made here.

Scenarios (full size; --quick in parentheses). The SC rows' "idle" wait is
--idle-ms (default 300 ms), the same for every candidate; it should be the
idle time weft's shrinking policy needs before memory is read (past the
default shrink_idle_after that the report prints), and the row labels say
which was used.

  sc1  memory per idle task (SC1, SC2), W=1: 1,000,000 (100,000) tasks each
       blocked (weft: one weft::event, ev.wait(); Go: receiving from one
       channel; Tokio: one tokio::sync::Notify, Notified::enable()d;
       Boost.Fiber: one condition_variable_any); no join handles kept (a wait
       group or counter counts the ends). The root reads VmRSS and VmPTE before
       the first spawn and after all have started and idled --idle-ms; figures:
       (after - before) / N, RSS and page tables apart (page tables are not in
       VmRSS). Then all are woken and waited for; every task must have woken.
       Boost.Fiber runs 100,000 fibers in full runs too (its stacks are
       malloc'd, 12 KiB each, the smallest that did not crash: 1,000,000 need
       ~9 GiB; its per-fiber figure does not depend on the count).
  sc3  the same with 10,000,000 (200,000) tasks, weft only: peak RSS (VmHWM)
       of the process. The program abandons the sample (exit 3) when its RSS
       passes 16 GiB, and the driver kills a child past 16 GiB. Go is not run
       (10,000,000 goroutines need about 27 GiB; this machine has 24): its
       figure is extrapolated from its sc1 RSS + page tables per task, and
       says so.
  sc4  10,000 tasks each waiting on a channel of its own (weft::channel(1),
       Go chan (cap 1), tokio mpsc::channel(1)); after --idle-ms idle the root
       pings each in turn and receives its reply (i+1) on one shared channel
       of capacity 1. Timed: the 10,000 round trips; ns per round trip. W=1.
  sc5  100,000 (10,000) tasks loop { sleep 10 ms } (weft
       this_task::sleep_for, Go time.Sleep, tokio::time::sleep,
       this_fiber::sleep_for) for 2 s (0.5 s), W=1 and W=2; CPU per wake =
       (user+sys CPU of the process over spawning, running and joining) /
       wakes; and wakes per second (the ideal is tasks x 100 per s: a
       runtime that falls behind shows fewer).
  sc6  one task reads 1 byte at a time from a loopback TCP connection that
       holds data, each read with a 30 s deadline (weft:
       stream::read_some(buf, ec, io::after(30s)); Go: SetReadDeadline(now +
       30 s), Read, SetReadDeadline(zero); Tokio: tokio::time::timeout(30 s,
       read)); rounds of { the other end writes 65,536 bytes; 65,536 timed
       reads }, 16 rounds (2). Timed: the reads; ns per read. W=1.
  sc8  runtime_report.py's r3 (yield ring) and r4 (channel ping-pong), weft
       with shrink_idle_after at its default against 0 (off), interleaved,
       W=1 and W=2 (and r2, spawn + join, shown without a target: shrinking
       reserves room for the fiber's record and wait arena, about 480 B, in
       every task's block at spawn); twice the repetitions of the others in full runs (10), as
       a 5% limit needs tighter medians than the rest.

Issue 43's rows (timers without a task; Boost.Fiber is not run: it has no
timer that is not a fiber):

  sc10 RSS per pending timer, W=1: 100,000 (10,000) timers each armed 1 h
       out, its callback adding one to a counter (weft: weft::timer made and
       reset(1 h) by the root task; Go: time.AfterFunc(1 h, f), the
       *time.Timer kept; Tokio: one tokio_util DelayQueue holding a key per
       timer, the keys kept). VmRSS and VmPTE before the first timer, after
       all are armed, and after 10 rounds of re-arming every timer to another
       far deadline (weft reset, Go Reset, Tokio DelayQueue::reset); then all
       are stopped (each stop must find its timer pending) and none may have
       fired. Figures: (armed - before) / N (SC10), and (re-armed - armed) /
       N, the growth from re-arming (SC10b).
  sc11 CPU per timer fire, W=1 and W=2: 100,000 (10,000) periodic timers
       every 10 ms for 2 s (0.5 s), the callback adding one to an atomic
       (weft: weft::timer::reset_every(10 ms); Go: time.AfterFunc whose f
       re-arms its own timer with Reset at its previous deadline + 10 ms;
       Tokio: one DelayQueue driven by one task that re-inserts each
       expired key at its deadline + 10 ms); then all stopped. CPU
       (getrusage user+sys of the process) from before the first timer until
       all are stopped, per fire; fires per s between the end of arming and
       the stop, as a share of the ideal (timers x 100 per s).

Issue 42's rows (SH), each for weft, weft-noshrink, Go and Tokio (SH3: weft,
Go and Tokio; its target is against Go only, and weft-noshrink there would
add about 6 minutes to a full run). They reuse sc1's, sc4's and sc5's code
in every program with parameters (the program scenarios sh1-sh4):

  sh1  W=2: 1,000,000 (20,000) tasks blocked on one event / channel /
       Notify as in sc1 (`PREFIX sh1 --workers 2 --count N --idle-ms 0`);
       the task whose start makes the count N signals the root (weft: an
       event, Go: closes a channel, Tokio: Notify::notify_one), which waits
       for it without polling. SH1's figure: first spawn until then
       (extra.parked_ms, wall time). Then all are woken and joined at once
       (extra.wake_join_ms, shown without a target).
  sh2  W=2: the same, idling 2 s and 10 s (0.2 s) between
       (`... sh2 --workers 2 --count N --idle-ms 2000`); SH2's figure: the
       wake (weft event::set, Go close(ch), Tokio notify_waiters()) + the
       join (weft wait_group, Go WaitGroup, Tokio a counter + Notify), wall
       time (extra.wake_join_ms). RSS per task before the wake is shown.
  sh3  W=1 and W=2: sc4 (10,000 tasks each waiting on a channel of its own,
       pinged in turn, replies on a shared channel) after 0.3 s, 1 s, 5 s
       and 30 s idle (0.3 s) (`... sh3 --workers W --count 10000 --idle-ms
       30000`); ns per round trip.
  sh4  W=1 and W=2: sc5 with 1,000 and 100,000 (1,000) tasks each looping
       sleep 1 s for 10 s (1 s), and sleep 100 ms for 3 s (full runs only)
       (`... sh4 --workers W --count 1000 --period-ms 1000 --run-ms
       10000`); CPU (user+sys of the process, spawn to join) per wake, and
       wakes per s as a share of the ideal (tasks / period).
  SH5  sh4's cell of 1,000 tasks sleeping 1 s, W=2, 10 s (1 s): the
       process's CPU / wall time (extra.cpu_fraction), a fraction of one
       core. `--only sh5` runs just that cell.

Weft's samples also report its workers' shrinks and restores
(runtime::stats(), read outside the timed parts); the tables list them.
A full run of the SH rows alone takes 45-60 minutes on 2 cores (SH3's idle
times about 20, SH4's runs about 18, the million-task samples of SH1/SH2
the rest; 1,000,000 parked weft tasks that are not shrunk hold about
5 GiB, Go's 2.7 GiB); --only sh1,sh2,... picks rows.

Targets (weft median / peer median): SC1 RSS per idle task <= 0.4x Go;
SC2 <= 2.5x Tokio; SC3 peak RSS <= 12 GiB at 10,000,000; SC4 <= 1.0x Go;
SC5 CPU per wake <= 1.0x Tokio and <= 0.5x Go at W=1 and W=2; SC6 <= 1.0x
Tokio and <= 0.5x Go; SC10 RSS per pending timer <= 1.0x Go and its growth
after re-arming <= 1.0x Go (a growth at or below zero meets it); SC11 CPU
per timer fire <= 1.0x Tokio at W=1 and W=2; SC7 (idle connections) read from the IO section's
JSON (bench/compare/io/idle_conns*) when it is there; SC8 on/off <= 1.05 for
R3 and R4. SH1, SH2 and SH4 (every variant and W) <= 1.05x weft-noshrink
and <= 1.0x Go; SH3 <= 1.0x Go at every idle time and W; SH5 <= 0.05 of one
core (Tokio's figures are shown next to Go's: the issue's best peer is the
lower of the two, but its limits name Go). Every cell is median [min, max]
over the repetitions (5; --quick: 1, and its figures say nothing).

Exits 1 if a weft child failed (crash, wrong result, timeout, memory) or a
peer crashed or gave a wrong result; a peer's timeout is reported only.
"""

import argparse
import datetime
import glob
import json
import math
import os
import statistics
import shlex
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runtime_report as rr  # noqa: E402  (the runtime section: its Runner runs and logs a child)

GIB_KIB = 1024 * 1024
IDLE_MS_DEFAULT = 300  # the SC rows' idle wait unless --idle-ms
SH_CANDIDATES = ("weft", "weft-noshrink", "go", "tokio")
NOSHRINK = ["--shrink-idle-after-ms", "0"]
SH5_CELL = (1_000, 1_000)  # SH5 is sh4's sample of 1,000 tasks sleeping 1,000 ms, W=2
SH5_LIMIT = 0.05


def sizes(quick):
    q = 1 if quick else 0
    return {
        "sc1": (1_000_000, 100_000)[q],
        "sc1_boost": 100_000,
        "sc3": (10_000_000, 200_000)[q],
        "sc4": 10_000,
        "sc5": (100_000, 10_000)[q],
        "sc6": (16 * 65_536, 2 * 65_536)[q],
        "sc10": (100_000, 10_000)[q],
        "sc11": (100_000, 10_000)[q],
    }


SC10_ROUNDS = 10  # the programs' re-arm rounds in sc10
TIMER_CANDIDATES = ("weft", "go", "tokio")  # sc10 / sc11; Boost.Fiber has no timer without a fiber


def sh_plan(quick):
    """Issue 42's variants. n12: sh1/sh2's tasks; sh2_idle, sh3_idle in ms;
    sh4: (tasks, period ms, run ms). Quick runs keep them short."""
    if quick:
        return dict(n12=20_000, sh2_idle=[200], sh3_n=10_000, sh3_idle=[300], sh4=[(1_000, 1_000, 1_000)])
    return dict(n12=1_000_000, sh2_idle=[2_000, 10_000], sh3_n=10_000, sh3_idle=[300, 1_000, 5_000, 30_000],
                sh4=[(1_000, 1_000, 10_000), (100_000, 1_000, 10_000), (1_000, 100, 3_000), (100_000, 100, 3_000)])


def secs(ms):
    """2000 -> '2 s', 300 -> '0.3 s'."""
    return f"{ms / 1000:g} s"


def period(ms):
    return f"{ms:,} ms" if ms < 1000 else secs(ms)


# (scenario, workers, candidates, metric keys); metric key -> (label, extractor)
def x_extra(k):
    return lambda res: res["extra"].get(k)


METRICS = {
    "rsspt": ("RSS bytes per task", x_extra("rss_bytes_per_task")),
    "ptept": ("page-table bytes per task (VmPTE)", x_extra("pte_bytes_per_task")),
    "hwm": ("peak RSS (GiB)", lambda res: res["peak_rss_kib"] / GIB_KIB),
    "ns": ("ns per op", lambda res: res["per_op_ns"]),
    "cpuw": ("CPU ns per wake", x_extra("cpu_ns_per_wake")),
    "wps": ("wakes per s (thousands)", lambda res: res["extra"].get("wakes_per_s", 0) / 1e3),
    "parked": ("spawn until all parked (ms)", x_extra("parked_ms")),
    "wakejoin": ("wake all + join (ms)", x_extra("wake_join_ms")),
    "cpufrac": ("CPU, fraction of one core", x_extra("cpu_fraction")),
    "wpsi": ("wakes per s, % of ideal", lambda res: 100.0 * res["extra"]["wakes_per_s"] / res["extra"]["ideal_wakes_per_s"]
             if res["extra"].get("wakes_per_s") and res["extra"].get("ideal_wakes_per_s") else None),
    "rsspt10": ("RSS bytes per pending timer", x_extra("rss_bytes_per_timer")),
    "ptept10": ("page-table bytes per timer (VmPTE)", x_extra("pte_bytes_per_timer")),
    "grow10": (f"RSS growth bytes per timer after {SC10_ROUNDS} re-arm rounds", x_extra("rss_growth_bytes_per_timer")),
    "rearm": ("ns per re-arm", x_extra("rearm_ns_per_reset")),
    "cpuf": ("CPU ns per fire", x_extra("cpu_ns_per_fire")),
    "fpsi": ("fires per s, % of ideal", lambda res: 100.0 * res["extra"]["fires_per_s"] / res["extra"]["ideal_fires_per_s"]
             if res["extra"].get("fires_per_s") and res["extra"].get("ideal_fires_per_s") else None),
    "shrinks": ("weft shrinks", x_extra("shrinks")),
    "restores": ("weft restores", x_extra("restores")),
}


class Scale:
    def __init__(self, a):
        self.a = a
        self.sz = sizes(a.quick)
        self.plan = sh_plan(a.quick)
        self.rt_sz = rr.sizes(a.quick)
        # runtime_report's Runner runs a child (timeout, memory limit,
        # pinning, the log); this script only builds the commands.
        ra = argparse.Namespace(quick=a.quick, cpu=a.cpu, mem_limit_gib=a.mem_limit_gib, timeout=a.timeout)
        self.runner = rr.Runner(ra)
        self.samples = []
        self.failures = []
        self.fatal = 0
        self.skipped = set()

    def cells(self):
        """(label, scenario program name, W, candidate, extra args, timeout, mem limit GiB)."""
        a, sz = self.a, self.sz
        names = dict(a.candidates)
        idle = ["--idle-ms", str(a.idle_ms)]
        out = []
        if "sc1" in a.only or "sc2" in a.only:
            for n in ("weft", "go", "tokio", "boost.fiber"):
                if n in names:
                    args = ["--count", str(sz["sc1_boost"])] if n == "boost.fiber" and not a.quick else []
                    out.append(("sc1", "sc1", 1, n, args + idle, None, None))
        if "sc3" in a.only and "weft" in names:
            out.append(("sc3", "sc3", 1, "weft", ["--rss-guard-gib", "16"] + idle, 20.0 if a.quick else 900.0, 16.5))
        if "sc4" in a.only:
            for n in ("weft", "go", "tokio"):
                if n in names:
                    out.append(("sc4", "sc4", 1, n, list(idle), None, None))
        if "sc5" in a.only:
            for w in (1, 2):
                for n in ("weft", "go", "tokio", "boost.fiber"):
                    if n in names:
                        out.append(("sc5", "sc5", w, n, [], None, None))
        if "sc6" in a.only:
            for n in ("weft", "go", "tokio"):
                if n in names:
                    out.append(("sc6", "sc6", 1, n, [], None, None))
        if "sc10" in a.only:
            for n in TIMER_CANDIDATES:
                if n in names:
                    out.append(("sc10", "sc10", 1, n, [], None, None))
        if "sc11" in a.only:
            for w in (1, 2):
                for n in TIMER_CANDIDATES:
                    if n in names:
                        out.append(("sc11", "sc11", w, n, [], None, None))
        if "sc8" in a.only and "weft" in names:
            for sc in ("r3", "r4", "r2"):  # r2 (spawn + join): no target, shown for the spawn cost
                for w in (1, 2):
                    out.append((f"sc8-{sc}", sc, w, "weft", [], None, None))
                    out.append((f"sc8-{sc}", sc, w, "weft-noshrink", list(NOSHRINK), None, None))
        out += self.sh_cells(names)
        return out

    def sh_cells(self, names):
        """Issue 42's cells: weft (default options), weft-noshrink, Go, Tokio."""
        a, p = self.a, self.plan
        out = []

        def cell(label, scenario, w, args, noshrink=True):
            for n in SH_CANDIDATES:
                if n == "weft-noshrink":
                    if noshrink and "weft" in names:
                        out.append((label, scenario, w, n, args + NOSHRINK, None, None))
                elif n in names:
                    out.append((label, scenario, w, n, list(args), None, None))

        if "sh1" in a.only:
            cell("sh1", "sh1", 2, ["--count", str(p["n12"]), "--idle-ms", "0"])
        if "sh2" in a.only:
            for idle in p["sh2_idle"]:
                cell(f"sh2-{idle}", "sh2", 2, ["--count", str(p["n12"]), "--idle-ms", str(idle)])
        if "sh3" in a.only:
            for idle in p["sh3_idle"]:
                for w in (1, 2):
                    cell(f"sh3-{idle}", "sh3", w, ["--count", str(p["sh3_n"]), "--idle-ms", str(idle)], noshrink=False)
        if "sh4" in a.only or "sh5" in a.only:
            for n, per, run in p["sh4"]:
                for w in (1, 2):
                    if "sh4" in a.only or ((n, per) == SH5_CELL and w == 2):
                        cell(f"sh4-{n}-{per}", "sh4", w,
                             ["--count", str(n), "--period-ms", str(per), "--run-ms", str(run)])
        return out

    def check(self, label, scenario, w, res, args):
        if not isinstance(res, dict) or not isinstance(res.get("extra"), dict):
            return "bad output: not a JSON object with extra"
        if res.get("scenario") != scenario or res.get("workers") != w:
            return f"bad output: echoes scenario {res.get('scenario')!r} workers {res.get('workers')!r}"
        if not isinstance(res.get("peak_rss_kib"), int) or res["peak_rss_kib"] <= 0:
            return f"bad output: peak_rss_kib = {res.get('peak_rss_kib')!r}"
        ex = res["extra"]
        if label.startswith("sc8-"):
            want = self.rt_sz[scenario]
            if res.get("ops") != want["ops"]:
                return f"bad output: ops = {res.get('ops')!r}, want {want['ops']:,}"
            if "sum" in want and ex.get("sum") != want["sum"]:
                return f"wrong result: extra.sum = {ex.get('sum')!r}, want {want['sum']:,}"
            return None
        for opt, key in (("--idle-ms", "idle_ms"), ("--period-ms", "period_ms"), ("--run-ms", "run_ms")):
            if opt in args and ex.get(key) != int(args[args.index(opt) + 1]):
                return f"bad output: extra.{key} = {ex.get(key)!r}, want {args[args.index(opt) + 1]} (is {opt} known?)"

        def positive(*keys):
            for k in keys:
                v = ex.get(k)
                if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                    return f"bad output: extra.{k} = {v!r}"
            return None

        if scenario.startswith("sh"):
            n = int(args[args.index("--count") + 1])
            if res.get("ops") != n:
                return f"bad output: ops = {res.get('ops')!r}, want {n:,}"
            if scenario in ("sh1", "sh2"):
                if ex.get("woke") != n:
                    return f"wrong result: {ex.get('woke')!r} of {n:,} tasks woke"
                return positive("parked_ms", "wake_join_ms")
            if scenario == "sh3":
                if ex.get("replies_ok") != n:
                    return f"wrong result: extra.replies_ok = {ex.get('replies_ok')!r}"
                if not isinstance(res.get("per_op_ns"), (int, float)):
                    return f"bad output: per_op_ns = {res.get('per_op_ns')!r}"
                return None
            err = positive("cpu_ns_per_wake", "wakes_per_s", "wakes", "ideal_wakes_per_s")
            if err is None and not isinstance(ex.get("cpu_fraction"), (int, float)):
                err = f"bad output: extra.cpu_fraction = {ex.get('cpu_fraction')!r}"
            return err
        want_ops = {"sc1": self.sz["sc1"], "sc3": self.sz["sc3"], "sc4": self.sz["sc4"], "sc5": self.sz["sc5"],
                    "sc6": self.sz["sc6"], "sc10": self.sz["sc10"], "sc11": self.sz["sc11"]}[scenario]
        if "--count" in args:
            want_ops = int(args[args.index("--count") + 1])
        if res.get("ops") != want_ops:
            return f"bad output: ops = {res.get('ops')!r}, want {want_ops:,} (wrong sizes?)"
        if scenario in ("sc1", "sc3"):
            if ex.get("woke") != want_ops:
                return f"wrong result: {ex.get('woke')!r} of {want_ops:,} tasks woke"
            for k in ("rss_bytes_per_task", "pte_bytes_per_task"):
                if not isinstance(ex.get(k), (int, float)):
                    return f"bad output: extra.{k} = {ex.get(k)!r}"
        if scenario == "sc4" and ex.get("replies_ok") != want_ops:
            return f"wrong result: extra.replies_ok = {ex.get('replies_ok')!r}"
        if scenario == "sc5":
            for k in ("cpu_ns_per_wake", "wakes_per_s", "wakes"):
                v = ex.get(k)
                if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                    return f"bad output: extra.{k} = {v!r}"
        if scenario == "sc6" and not isinstance(res.get("per_op_ns"), (int, float)):
            return f"bad output: per_op_ns = {res.get('per_op_ns')!r}"
        if scenario == "sc10":
            if ex.get("fired") != 0:
                return f"wrong result: extra.fired = {ex.get('fired')!r} (no timer may fire)"
            if ex.get("stopped") != want_ops:
                return f"wrong result: extra.stopped = {ex.get('stopped')!r}, want {want_ops:,} (every timer pending)"
            if ex.get("rounds") != SC10_ROUNDS:
                return f"bad output: extra.rounds = {ex.get('rounds')!r}, want {SC10_ROUNDS}"
            for k in ("rss_bytes_per_timer", "pte_bytes_per_timer", "rss_growth_bytes_per_timer"):
                if not isinstance(ex.get(k), (int, float)) or not math.isfinite(ex[k]):
                    return f"bad output: extra.{k} = {ex.get(k)!r}"
        if scenario == "sc11":
            return positive("cpu_ns_per_fire", "fires_per_s", "fires", "ideal_fires_per_s")
        return None

    def run(self):
        a = self.a
        cells = self.cells()
        prefixes = dict(a.candidates)
        if "weft" in prefixes:
            prefixes["weft-noshrink"] = prefixes["weft"]
        # Group by (label, W): the candidates of a group alternate within
        # each repetition (A B C, A B C, ...).
        groups = []
        for c in cells:
            key = (c[0], c[2])
            if not groups or groups[-1][0] != key:
                groups.append((key, []))
            groups[-1][1].append(c)
        total = sum(a.reps * (2 if c[0].startswith("sc8-") and not a.quick else 1) for c in cells)
        k = 0
        for (label, w), members in groups:
            reps = a.reps * 2 if label.startswith("sc8-") and not a.quick else a.reps
            for rep in range(reps):
                # The order rotates by one every repetition (A B, B A, ...):
                # no candidate always runs first, or right after another.
                order = members[rep % len(members):] + members[:rep % len(members)]
                for (lab, scenario, w_, name, args, timeout, mem) in order:
                    k += 1
                    if (lab, w_, name) in self.skipped:
                        continue
                    cmd = list(prefixes[name]) + [scenario, "--workers", str(w_)] + (["--quick"] if a.quick else []) \
                        + list(args)
                    self.runner.a.timeout = timeout or a.timeout
                    self.runner.a.mem_limit_gib = mem or a.mem_limit_gib
                    rr.log(f"[{k}/{total}] {lab} W={w_} {name} (rep {rep + 1}/{reps})")
                    res, err, info = self.runner.run_child(cmd, w_)
                    if err is None:
                        err = self.check(lab, scenario, w_, res, args)
                    if info.get("hang") or (err and lab == "sc3"):
                        self.skipped.add((lab, w_, name))
                    sample = dict(label=lab, scenario=scenario, workers=w_, candidate=name, rep=rep, cmd=cmd,
                                  ok=err is None, error=err, result=res if err is None else None,
                                  info={k2: v for k2, v in info.items()})
                    self.samples.append(sample)
                    if err is not None:
                        why = err
                        if lab == "sc3" and "exit status 3" in err:
                            why = f"RSS passed the memory guard: {err}"
                        self.failures.append(f"{lab} W={w_} {name} rep {rep + 1}: {why}")
                        rr.log(f"  FAILED: {why}")
                        # sc3 past its memory guard is a target not met, not a
                        # failure of the harness; a peer's hang is the peer's.
                        guard = lab == "sc3" and ("exit status 3" in err or "memory limit" in err)
                        if not guard and (name.startswith("weft") or not info.get("hang")):
                            self.fatal += 1
        self.runner.logf = None

    def stat(self, label, name, w, metric):
        vals = [METRICS[metric][1](s["result"]) for s in self.samples
                if s["ok"] and s["label"] == label and s["candidate"] == name and s["workers"] == w]
        return rr.stat([v for v in vals if isinstance(v, (int, float))])

    def summary(self):
        out = {}
        for s in self.samples:
            for m in METRICS:
                st = self.stat(s["label"], s["candidate"], s["workers"], m)
                if st:
                    out.setdefault(s["label"], {}).setdefault(s["candidate"], {}).setdefault(f"W={s['workers']}", {})[m] = st
        return out


TABLES = [
    # (label, title, workers, metrics)
    ("sc1", "SC1 / SC2: memory per idle task, {sc1:,} tasks blocked on an event / channel, read after {idle} idle "
     "(W=1){boost}", [1], ["rsspt", "ptept", "hwm"]),
    ("sc3", "SC3: {sc3:,} idle tasks, weft, read after {idle} idle (W=1)", [1], ["hwm", "rsspt", "ptept"]),
    ("sc4", "SC4: {sc4:,} tasks idle {idle}, each pinged once: ns per round trip (W=1)", [1], ["ns"]),
    ("sc5", "SC5: {sc5:,} tasks each looping sleep 10 ms for {run}: CPU per wake", [1, 2], ["cpuw", "wps"]),
    ("sc6", "SC6: 1-byte reads with a 30 s deadline from a loopback TCP socket that holds data, {sc6:,} reads (W=1)",
     [1], ["ns"]),
    ("sc10", "SC10: {sc10:,} pending timers each armed 1 h out, then re-armed {rounds} times (W=1)", [1],
     ["rsspt10", "ptept10", "grow10", "rearm"]),
    ("sc11", "SC11: {sc11:,} timers firing every 10 ms for {run}: CPU per fire", [1, 2], ["cpuf", "fpsi"]),
    ("sc8-r3", "SC8: R3 yield ring, weft with shrink_idle_after at its default and at 0 (off): ns per yield",
     [1, 2], ["ns"]),
    ("sc8-r4", "SC8: R4 channel ping-pong, the same: ns per message", [1, 2], ["ns"]),
    ("sc8-r2", "SC8, no target: R2 spawn + join, the same: ns per task (a task of a runtime that shrinks has "
     "room for its fiber's record and wait arena, about 480 B, in its block from spawn on)", [1, 2], ["ns"]),
]


def tables_md(s):
    a = s.a
    md = []
    cands = [n for n, _ in a.candidates] + (["weft-noshrink"] if "weft" in dict(a.candidates) else [])
    for label, title, workers, metrics in TABLES:
        rows = [n for n in cands if any(x["label"] == label and x["candidate"] == n for x in s.samples)]
        if not rows:
            continue
        fmtargs = dict(s.sz, run="0.5 s" if a.quick else "2 s", idle=f"{a.idle_ms:,} ms", rounds=SC10_ROUNDS,
                       boost="" if a.quick else f"; Boost.Fiber: {s.sz['sc1_boost']:,} fibers")
        md += [f"### {title.format(**fmtargs)}", ""]
        head = ["candidate"] + [f"W={w} {METRICS[m][0]}" for m in metrics for w in workers]
        if label.startswith("sc8-"):
            head += [f"W={w} on/off" for w in workers]
        md += ["| " + " | ".join(head) + " |", "|---|" + "---|" * (len(head) - 1)]
        for n in rows:
            row = [n]
            for m in metrics:
                for w in workers:
                    st = s.stat(label, n, w, m)
                    fails = [x for x in s.samples if x["label"] == label and x["candidate"] == n
                             and x["workers"] == w and not x["ok"]]
                    c = rr.cell(st)
                    if fails:
                        c += f" ({len(fails)} failed)"
                    row.append(c)
            if label.startswith("sc8-"):
                for w in workers:
                    on, off = s.stat(label, "weft", w, "ns"), s.stat(label, "weft-noshrink", w, "ns")
                    row.append(f"{on['median'] / off['median']:.3f}" if n == "weft" and on and off else "")
            md.append("| " + " | ".join(row) + " |")
        if label in ("sc10", "sc11"):
            md.append("| boost.fiber | " + " | ".join(["not run"] * (len(head) - 1)) + " |")
            md += ["", TIMER_NOTES[label]]
        md.append("")
    return md + sh_tables_md(s)


TIMER_NOTES = {
    "sc10": "weft: `weft::timer t(f); t.reset(1h)`, re-armed with `reset(1h + k s)`; Go: `time.AfterFunc(time.Hour, f)`, "
            "re-armed with `Reset`; Tokio: one `tokio_util::time::DelayQueue` holding a key per timer, re-armed with "
            "`reset(key, ...)` (Tokio has no callback timer that is not a task). RSS per timer = (VmRSS after arming - "
            "before) / N, the handles (a vector of timers / `*time.Timer` / `Key`) included; the growth = (after the "
            "re-arm rounds - after arming) / N. Boost.Fiber: not run (it has no timer that is not a fiber).",
    "sc11": "weft: `reset_every(10ms)`; Go: `time.AfterFunc` whose func re-arms its own timer with `Reset` at its "
            "previous deadline + 10 ms (Go runs each func in a goroutine of its own); Tokio: one `DelayQueue` driven "
            "by one task, re-inserting each expired key at its deadline + 10 ms. CPU is the process's (getrusage "
            "user+sys) from before the first timer until all are stopped, per fire; fires per s is counted between the "
            "end of arming and the stop (ideal: timers x 100 per s). Boost.Fiber: not run (it has no timer that is "
            "not a fiber).",
}


def grid_md(s, title, cols, tag=None, note=None):
    """A table: a row per candidate that ran any column (weft, weft-noshrink,
    go, tokio first); cols are (header, label, W, metric). With tag (a
    function of label and W naming a column), a line under it lists weft's
    shrinks / restores per sample (median) for each (label, W)."""
    names = [n for n, _ in s.a.candidates] + ["weft-noshrink"]
    cands = [n for n in SH_CANDIDATES if n in names] + [n for n in names if n not in SH_CANDIDATES]
    ran = {(x["label"], x["workers"], x["candidate"]) for x in s.samples}
    rows = [n for n in cands if any((lab, w, n) in ran for _, lab, w, _ in cols)]
    if not rows:
        return []
    md = [f"### {title}", "", "| candidate | " + " | ".join(h for h, _, _, _ in cols) + " |",
          "|---|" + "---|" * len(cols)]
    for n in rows:
        row = [n]
        for _, lab, w, m in cols:
            if (lab, w, n) not in ran:
                row.append("not run")
                continue
            fails = sum(1 for x in s.samples if x["label"] == lab and x["candidate"] == n and x["workers"] == w
                        and not x["ok"])
            row.append(rr.cell(s.stat(lab, n, w, m)) + (f" ({fails} failed)" if fails else ""))
        md.append("| " + " | ".join(row) + " |")
    md.append("")
    if tag:
        trace = []
        for n in ("weft", "weft-noshrink"):
            per, seen = [], set()
            for _, lab, w, _ in cols:
                sh, rs = s.stat(lab, n, w, "shrinks"), s.stat(lab, n, w, "restores")
                if (lab, w) in seen or not sh or not rs:
                    continue
                seen.add((lab, w))
                per.append((tag(lab, w), sh["median"], rs["median"]))
            # weft-noshrink's are 0 unless shrinking was not off: shown only then
            if per and (n == "weft" or any(a or b for _, a, b in per)):
                trace.append(f"{n}: " + "; ".join(f"{t} {rr.fmt(a)} / {rr.fmt(b)}" for t, a, b in per))
        if trace:
            md += ["Shrinks / restores made by the workers per sample (median), "
                   + ". ".join(trace) + ".", ""]
    if note:
        md += [note, ""]
    return md


def sh_tables_md(s):
    p = s.plan
    md = []
    n12 = p["n12"]
    md += grid_md(s, f"SH1: {n12:,} tasks spawned until all are parked on one event / channel / Notify (W=2)",
                  [("W=2 spawn until all parked (ms)", "sh1", 2, "parked"),
                   ("W=2 then wake all + join at once (ms)", "sh1", 2, "wakejoin"),
                   ("W=2 RSS bytes per task, all parked", "sh1", 2, "rsspt")],
                  tag=lambda lab, w: f"W={w}")
    cols = []
    for idle in p["sh2_idle"]:
        cols += [(f"after {secs(idle)} idle: wake all + join (ms)", f"sh2-{idle}", 2, "wakejoin"),
                 (f"after {secs(idle)} idle: RSS bytes per task before the wake", f"sh2-{idle}", 2, "rsspt")]
    md += grid_md(s, f"SH2: {n12:,} parked tasks woken at once after idling "
                  + " and ".join(secs(i) for i in p["sh2_idle"]) + ", then joined (W=2)", cols,
                  tag=lambda lab, w: f"after {secs(int(lab.split('-')[1]))} idle")
    md += grid_md(s, f"SH3: {p['sh3_n']:,} tasks each waiting on a channel of its own, pinged in turn after idling "
                  + ", ".join(secs(i) for i in p["sh3_idle"]) + ": ns per round trip",
                  [(f"W={w} after {secs(idle)}", f"sh3-{idle}", w, "ns") for idle in p["sh3_idle"] for w in (1, 2)],
                  tag=lambda lab, w: f"W={w} after {secs(int(lab.split('-')[1]))}")

    def sh4_tag(lab, w):
        _, n, per = lab.split("-")
        return f"W={w} {int(n):,} x {period(int(per))}"

    for metric, what, tag in (("cpuw", "CPU (user+sys of the process) ns per wake", sh4_tag),
                              ("wpsi", "wakes per s, % of the ideal (tasks / period): below 100, the runtime fell "
                               "behind (or the run was short: each task's last sleep after the stop counts)", None)):
        md += grid_md(s, "SH4: tasks each looping sleep(period), "
                      + ", ".join(f"{n:,} x {period(per)} for {secs(run)}" for n, per, run in p["sh4"]) + f": {what}",
                      [(f"W={w} {n:,} x {period(per)}", f"sh4-{n}-{per}", w, metric)
                       for n, per, _ in p["sh4"] for w in (1, 2)], tag=tag)
    run = dict(((n, per), r) for n, per, r in p["sh4"]).get(SH5_CELL)
    if run:
        md += grid_md(s, f"SH5: {SH5_CELL[0]:,} tasks sleeping {period(SH5_CELL[1])} in a loop for {secs(run)} (sh4's "
                      "sample), W=2: CPU of the whole process as a fraction of one core",
                      [("W=2 CPU / wall", f"sh4-{SH5_CELL[0]}-{SH5_CELL[1]}", 2, "cpufrac")])
    return md


UNITS = {"rsspt": " B", "ptept": " B", "ns": " ns", "cpuw": " ns", "parked": " ms", "wakejoin": " ms",
         "rsspt10": " B", "grow10": " B", "cpuf": " ns"}


def ratio_target(s, label, metric, w, peer, limit):
    wf, p = s.stat(label, "weft", w, metric), s.stat(label, peer, w, metric)
    if not wf or not p or not p["median"]:
        who = "weft" if not wf else peer
        missing = dict(s.a.missing).get(who)
        return None, (f"no figure: {who} not available ({missing})" if missing else
                      f"no figure ({who} did not run or failed)")
    r = wf["median"] / p["median"]
    u = UNITS.get(metric, "")
    return r <= limit, f"{r:.2f}x {peer} (weft {rr.fmt(wf['median'])}{u}, {peer} {rr.fmt(p['median'])}{u})"


def sc7_rows(d, path):
    """SC7 and SH6 from bench/compare/io/idle_conns/sc7.py's JSON, a pair of
    rows per worker count: weft's RSS per idle connection over Go's, and
    weft's echo round over Go's (SH6), median [min, max] over the
    repetitions; met when the median is within the limit and weft lost no
    echo (SC7: and none was late). A JSON from before worker counts holds
    W=1 alone. Returns [(name, met, measured, limit)]."""
    limit = d.get("target_rss_vs_go", 0.5)
    elimit = d.get("target_echo_vs_go", 1.0)
    per_w = d.get("by_workers") or {"1": {"summary": d.get("summary", {}), "ratios": d.get("ratios", [])}}
    rows = []
    for wk in sorted(per_w, key=int):
        summ, rat = per_w[wk].get("summary", {}), per_w[wk].get("ratios", [])
        w = summ.get("weft", {})
        lost, late = w.get("lost"), w.get("late")
        n = (w.get("connected") or ["?"])[0]
        ratios = sorted(r["rss"] for r in rat if isinstance(r, dict) and "rss" in r)
        name = f"SC7 idle connections, W={wk}"
        if not ratios:
            rows.append((name, None, f"no weft/Go ratio in {os.path.basename(path)} (missing: {d.get('missing')})",
                         f"<= {limit}x go"))
        else:
            med = statistics.median(ratios)
            rss = statistics.median(w.get("rss_per_conn") or [0])
            g = statistics.median(summ.get("go", {}).get("rss_per_conn") or [0])
            rows.append((name, med <= limit and lost == 0 and late == 0,
                         f"{med:.2f}x go [{ratios[0]:.2f}, {ratios[-1]:.2f}] at {n} connections "
                         f"(weft {rss:,.0f} B, go {g:,.0f} B per connection); weft lost {lost}, late {late}",
                         f"<= {limit}x go, 0 lost"))
        echo = sorted(r["echo"] for r in rat if isinstance(r, dict) and "echo" in r)
        name = f"SH6 one byte to each idle connection, all replies in, W={wk}"
        if "by_workers" not in d:
            continue  # an older sc7.json has no echo round figure
        if not echo:
            rows.append((name, None, f"no weft/Go pair of echo rounds that lost nothing in {os.path.basename(path)}",
                         f"<= {elimit}x go"))
        else:
            med = statistics.median(echo)
            we = statistics.median(w.get("echo_s") or [0]) * 1e3
            ge = statistics.median(summ.get("go", {}).get("echo_s") or [0]) * 1e3
            rows.append((name, med <= elimit and lost == 0,
                         f"{med:.2f}x go [{echo[0]:.2f}, {echo[-1]:.2f}] at {n} connections "
                         f"(weft {we:,.0f} ms, go {ge:,.0f} ms); weft lost {lost}",
                         f"<= {elimit}x go, 0 lost"))
    return rows


def idle_conns(s):
    """SC7 (and SH6) from the IO section's JSON (bench/compare/io/idle_conns*),
    if any: [(name, met, measured, limit)]."""
    cand = [s.a.idle_conns_json] if s.a.idle_conns_json else (
        [os.path.join(s.a.out, "idle_conns.json")]
        + sorted(glob.glob(os.path.join(s.a.out, "idle_conns*.json"))) + [os.path.join(s.a.out, "sc7.json")])
    for path in cand:
        if path and os.path.exists(path):
            try:
                with open(path) as f:
                    d = json.load(f)
            except (OSError, ValueError) as ex:
                return [("SC7 idle connections", None, f"{path}: unreadable ({ex})", "see the IO section")]
            if isinstance(d, dict) and "ratios" in d and "summary" in d:
                return sc7_rows(d, path)
            ts = d.get("targets") if isinstance(d, dict) else None
            if isinstance(ts, dict):
                ts = list(ts.values())
            if isinstance(ts, list) and ts:
                mets = [t.get("met") for t in ts if isinstance(t, dict)]
                meas = "; ".join(str(t.get("measured", t.get("ratio", t.get("value", "?"))))
                                 for t in ts if isinstance(t, dict))
                lim = "; ".join(str(t.get("limit", t.get("target", "?"))) for t in ts if isinstance(t, dict))
                met = None if any(m is None for m in mets) else all(mets)
                return [("SC7 idle connections", met, f"{meas} ({os.path.basename(path)})", lim or "see the IO section")]
            met = d.get("met") if isinstance(d, dict) else None
            return [("SC7 idle connections", met if isinstance(met, bool) else None,
                     f"{os.path.basename(path)} present; no targets list found in it", "see the IO section")]
    return [("SC7 idle connections", None, "not run (no sc7.json in the results)",
             "see the IO section (bench/compare/io/idle_conns*)")]


def targets(s):
    a = s.a
    t = []

    def add(name, limit, met, measured):
        t.append(dict(target=name, limit=limit, met=met, measured=measured))

    idle = f"{a.idle_ms:,} ms"
    for label, peer, lim, name in (("sc1", "go", 0.4, f"SC1 RSS per idle task (after {idle} idle) vs Go"),
                                   ("sc1", "tokio", 2.5, f"SC2 RSS per idle task (after {idle} idle) vs Tokio")):
        met, m = ratio_target(s, label, "rsspt", 1, peer, lim)
        if met is not None:
            wf, p = s.stat(label, "weft", 1, "ptept"), s.stat(label, peer, 1, "ptept")
            wr, pr = s.stat(label, "weft", 1, "rsspt"), s.stat(label, peer, 1, "rsspt")
            if wf and p and wr and pr:
                m += (f"; with page tables {(wr['median'] + wf['median']) / (pr['median'] + p['median']):.2f}x"
                      f" (weft {rr.fmt(wf['median'])} B, {peer} {rr.fmt(p['median'])} B of VmPTE per task)")
        add(name, f"<= {lim}x {peer}", met, m)
    h = s.stat("sc3", "weft", 1, "hwm")
    fails = [x for x in s.samples if x["label"] == "sc3" and not x["ok"]]
    if h:
        m = f"{h['median']:.2f} GiB at {s.sz['sc3']:,} tasks"
    elif fails:
        m = f"no sample finished: {fails[0]['error'][:160]}"
    else:
        m = "not run"
    gp, gr = s.stat("sc1", "go", 1, "ptept"), s.stat("sc1", "go", 1, "rsspt")
    if gp and gr:
        m += (f"; Go not run (10,000,000 goroutines need ~27 GiB), extrapolated from its SC1: "
              f"{(gp['median'] + gr['median']) * 10_000_000 / 2 ** 30:.1f} GiB")
    add(f"SC3 peak RSS, 10,000,000 idle tasks (after {idle} idle)" + (" (quick: fewer)" if a.quick else ""), "<= 12 GiB",
        (h["median"] <= 12.0) if h else (False if fails else None), m)
    met, m = ratio_target(s, "sc4", "ns", 1, "go", 1.0)
    add(f"SC4 ping an idle task (round trip, after {idle} idle) vs Go", "<= 1.0x go", met, m)
    for w in (1, 2):
        r1, m1 = ratio_target(s, "sc5", "cpuw", w, "tokio", 1.0)
        r2, m2 = ratio_target(s, "sc5", "cpuw", w, "go", 0.5)
        met = None if r1 is None or r2 is None else (r1 and r2)
        add(f"SC5 CPU per timer wake, W={w}", "<= 1.0x tokio and <= 0.5x go", met, f"{m1}; {m2}")
    r1, m1 = ratio_target(s, "sc6", "ns", 1, "tokio", 1.0)
    r2, m2 = ratio_target(s, "sc6", "ns", 1, "go", 0.5)
    add("SC6 read with a deadline", "<= 1.0x tokio and <= 0.5x go",
        None if r1 is None or r2 is None else (r1 and r2), f"{m1}; {m2}")
    for name, met, m, lim in idle_conns(s):
        add(name, lim, met, m)
    for sc in ("r3", "r4"):
        for w in (1, 2):
            on, off = s.stat(f"sc8-{sc}", "weft", w, "ns"), s.stat(f"sc8-{sc}", "weft-noshrink", w, "ns")
            if on and off:
                r = on["median"] / off["median"]
                add(f"SC8 {sc.upper()} shrinking on / off, W={w}", "<= 1.05", r <= 1.05,
                    f"{r:.3f} (on {rr.fmt(on['median'])} ns, off {rr.fmt(off['median'])} ns)")
            else:
                add(f"SC8 {sc.upper()} shrinking on / off, W={w}", "<= 1.05", None, "not run")
    for x in t:
        x["issue"] = 42 if x["target"].startswith("SH6") else 26
    sh = sh_targets(s)
    # SH6 comes from sc7.py's run; it goes last among issue 42's rows.
    return [x for x in t if x["issue"] == 26] + sh + [x for x in t if x["issue"] == 42] + timer_targets(s)


def sc9_rows(out, add):
    """SC9 (issue 43) from bench/compare/io/idle_conns/sc7.py --shape real's
    OUT/sc9.json (scripts/bench runs it before this report): per worker
    count, weft's RSS per idle connection of the real server shape over Go's,
    median [min, max] over the repetitions; met when the median is within
    the limit and weft lost no echo."""
    path = os.path.join(out, "sc9.json")
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError) as ex:
        add("SC9 RSS per idle connection, real server shape", "<= 0.5x go", None,
            f"no sc9.json in {out} ({ex.__class__.__name__}): the IO section's SC9 did not run")
        return
    limit = d.get("target_rss_vs_go", 0.5)
    for wk in sorted(d.get("by_workers") or {}, key=int):
        summ, rat = d["by_workers"][wk].get("summary", {}), d["by_workers"][wk].get("ratios", [])
        w = summ.get("weft", {})
        name = f"SC9 RSS per idle connection, real server shape, W={wk}"
        ratios = sorted(r["rss"] for r in rat if isinstance(r, dict) and "rss" in r)
        if not ratios:
            add(name, f"<= {limit}x go", None, f"no weft/Go ratio in sc9.json (missing: {d.get('missing')})")
            continue
        med = statistics.median(ratios)
        n = (w.get("connected") or ["?"])[0]
        rss = statistics.median(w.get("rss_per_conn") or [0])
        g = statistics.median(summ.get("go", {}).get("rss_per_conn") or [0])
        lost = w.get("lost")
        add(name, f"<= {limit}x go, 0 lost", med <= limit and lost == 0,
            f"{med:.2f}x go [{ratios[0]:.2f}, {ratios[-1]:.2f}] at {n} connections "
            f"(weft {rss:,.0f} B, go {g:,.0f} B per connection); weft lost {lost}")


def timer_targets(s):
    """Issue 43's targets: SC9 (a real server's idle connection, from
    sc9.json) against Go, SC10 (RSS per pending timer, its growth after
    re-arming) against Go, SC11 (CPU per fire) against Tokio; the other
    peer's ratio is shown without a limit."""
    a = s.a
    t = []
    n10, n11 = s.sz["sc10"], s.sz["sc11"]

    def add(name, limit, met, measured):
        t.append(dict(target=name, limit=limit, met=met, measured=measured, issue=43))

    sc9_rows(a.out, add)

    def not_run(label):
        return None if label in a.only else f"not run (--only leaves {label} out)"

    def other(label, metric, w, peer):
        wf, p = s.stat(label, "weft", w, metric), s.stat(label, peer, w, metric)
        if wf and p and p["median"]:
            u = UNITS.get(metric, "")
            return f"; no limit: {wf['median'] / p['median']:.2f}x {peer} ({peer} {rr.fmt(p['median'])}{u})"
        return ""

    name = f"SC10 RSS per pending timer ({n10:,} timers) vs Go"
    if not_run("sc10"):
        add(name, "<= 1.0x go", None, not_run("sc10"))
    else:
        met, m = ratio_target(s, "sc10", "rsspt10", 1, "go", 1.0)
        add(name, "<= 1.0x go", met, m + other("sc10", "rsspt10", 1, "tokio"))
    # The growth is near zero for a timer whose re-arm allocates nothing: a
    # ratio of two near-zero figures says little, so weft meets it when its
    # median growth is at most Go's, or at most zero.
    name = f"SC10 growth after re-arming {n10:,} timers {SC10_ROUNDS} times vs Go"
    wf, p = s.stat("sc10", "weft", 1, "grow10"), s.stat("sc10", "go", 1, "grow10")
    if not_run("sc10"):
        add(name, "<= 1.0x go", None, not_run("sc10"))
    elif not wf or not p:
        who = "weft" if not wf else "go"
        why = dict(a.missing).get(who)
        add(name, "<= 1.0x go", None, f"no figure: {who} not available ({why})" if why else
            f"no figure ({who} did not run or failed)")
    else:
        w_, g_ = wf["median"], p["median"]
        ratio = f"{w_ / g_:.2f}x go, " if g_ > 0 else ""
        tk = s.stat("sc10", "tokio", 1, "grow10")
        add(name, "<= 1.0x go (or <= 0)", w_ <= max(g_, 0.0),
            f"{ratio}weft {rr.fmt(w_)} B, go {rr.fmt(g_)} B per timer"
            + (f"; no limit: tokio {rr.fmt(tk['median'])} B" if tk else ""))
    for w in (1, 2):
        name = f"SC11 CPU per timer fire ({n11:,} timers every 10 ms), W={w} vs Tokio"
        if not_run("sc11"):
            add(name, "<= 1.0x tokio", None, not_run("sc11"))
            continue
        met, m = ratio_target(s, "sc11", "cpuf", w, "tokio", 1.0)
        add(name, "<= 1.0x tokio", met, m + other("sc11", "cpuf", w, "go"))
    return t


def sh_targets(s):
    """Issue 42's targets: a row per SH target, variant and W. A variant of
    full runs that a quick run leaves out says so."""
    a, p, full = s.a, s.plan, sh_plan(False)
    t = []
    ran = {(x["label"], x["workers"]) for x in s.samples}

    def add(name, limit, met, measured):
        t.append(dict(target=name, limit=limit, met=met, measured=measured, issue=42))

    def why_not(row, in_plan):
        if not in_plan:
            return "not run (full runs only)"
        if row not in a.only and not (row == "sh5" and "sh4" in a.only):
            return f"not run (--only leaves {row} out)"
        return "no figure (no sample finished)"

    def info(label, metric, w):
        wf, tk = s.stat(label, "weft", w, metric), s.stat(label, "tokio", w, metric)
        if wf and tk and tk["median"]:
            u = UNITS.get(metric, "")
            return f"; no limit: {wf['median'] / tk['median']:.2f}x tokio (tokio {rr.fmt(tk['median'])}{u})"
        return ""

    def vs(row, label, metric, w, name, in_plan, noshrink=True):
        lim = ("<= 1.05x weft-noshrink and " if noshrink else "") + "<= 1.0x go"
        if (label, w) not in ran:
            add(name, lim, None, why_not(row, in_plan))
            return
        parts = [ratio_target(s, label, metric, w, "weft-noshrink", 1.05)] if noshrink else []
        parts.append(ratio_target(s, label, metric, w, "go", 1.0))
        verdicts = [r for r, _ in parts]
        add(name, lim, None if any(v is None for v in verdicts) else all(verdicts),
            "; ".join(m for _, m in parts) + info(label, metric, w))

    n12 = p["n12"]
    vs("sh1", "sh1", "parked", 2, f"SH1 spawn {n12:,} tasks until all are parked, W=2", True)
    for idle in sorted(set(p["sh2_idle"]) | set(full["sh2_idle"])):
        vs("sh2", f"sh2-{idle}", "wakejoin", 2, f"SH2 wake + join {n12:,} tasks after {secs(idle)} idle, W=2",
           idle in p["sh2_idle"])
    for idle in sorted(set(p["sh3_idle"]) | set(full["sh3_idle"])):
        for w in (1, 2):
            vs("sh3", f"sh3-{idle}", "ns", w, f"SH3 ping an idle task after {secs(idle)} idle, W={w}",
               idle in p["sh3_idle"], noshrink=False)
    mine = {(n, per): run for n, per, run in p["sh4"]}
    runs = dict(mine)
    for n, per, run in full["sh4"]:
        runs.setdefault((n, per), run)
    for (n, per), run in runs.items():
        for w in (1, 2):
            vs("sh4", f"sh4-{n}-{per}", "cpuw", w,
               f"SH4 CPU per wake, {n:,} tasks each sleeping {period(per)} for {secs(run)}, W={w}", (n, per) in mine)
    label = f"sh4-{SH5_CELL[0]}-{SH5_CELL[1]}"
    run = runs[SH5_CELL]
    name = f"SH5 CPU of {SH5_CELL[0]:,} tasks sleeping {period(SH5_CELL[1])} in a loop for {secs(run)}, W=2"
    st = s.stat(label, "weft", 2, "cpufrac")
    if not st:
        add(name, f"<= {SH5_LIMIT} of one core", None,
            why_not("sh5", SH5_CELL in mine) if (label, 2) not in ran else "no figure (weft did not run or failed)")
    else:
        others = [f"{n} {s.stat(label, n, 2, 'cpufrac')['median']:.3f}" for n in SH_CANDIDATES[1:]
                  if s.stat(label, n, 2, "cpufrac")]
        add(name, f"<= {SH5_LIMIT} of one core", st["median"] <= SH5_LIMIT,
            f"{st['median']:.3f} [{st['min']:.3f}, {st['max']:.3f}] of one core"
            + (f" (no limit: {', '.join(others)})" if others else ""))
    return t


def targets_md(s, tg):
    md = []
    p = s.plan
    for issue, head, quick_note in (
            (26, "## Targets (issue 26)", f"(SC3 ran {s.sz['sc3']:,} tasks, not 10,000,000)."),
            (42, "## Targets (issue 42): idle tasks shrink without a trace",
             f"(SH1/SH2 ran {p['n12']:,} tasks, SH2 idled {', '.join(secs(i) for i in p['sh2_idle'])}, SH3 "
             f"{', '.join(secs(i) for i in p['sh3_idle'])}, SH4 ran {secs(p['sh4'][0][2])}; the variants of full runs "
             "only say so)."),
            (43, "## Targets (issue 43): a real idle connection, timers without a task",
             f"(SC9 ran 2,000 connections, SC10 {s.sz['sc10']:,} timers, SC11 {s.sz['sc11']:,} timers for 0.5 s).")):
        rows = [t for t in tg if t.get("issue") == issue]
        if not rows:
            continue
        met = sum(1 for t in rows if t["met"] is True)
        unmet = sum(1 for t in rows if t["met"] is False)
        md += [head, ""]
        if s.a.quick:
            md += ["**Quick run: small counts and one repetition; these verdicts say nothing** " + quick_note, ""]
        if issue == 42:
            md += ["Ratios are weft's median over the other's; \"weft\" is weft with its default runtime options "
                   f"(shrink_idle_after = {weft_threshold(s)}), \"weft-noshrink\" the same binary with "
                   "`--shrink-idle-after-ms 0`. The issue's best peer is the lower of Go and Tokio; its limits name "
                   "Go, and Tokio's ratio is shown without a limit.", ""]
        if issue == 43:
            md += ["SC9 comes from the IO section's sc9.md (bench/compare/io/idle_conns/sc7.py --shape real). "
                   "Ratios are weft's median over the other's. SC10's limits name Go (`time.AfterFunc`); Tokio's "
                   "figure (a `DelayQueue` key) is shown without a limit. SC11's limit names Tokio (a `DelayQueue` "
                   "driven by one task); Go's ratio is shown without a limit. Boost.Fiber is not run (it has no "
                   "timer that is not a fiber).", ""]
        md += [f"{met} of {len(rows)} met, {unmet} not met, {len(rows) - met - unmet} without a figure.", "",
               "| target | limit | measured | met |", "|---|---|---|---|"]
        for t in rows:
            v = "n/a" if t["met"] is None else ("met" if t["met"] else "NOT met")
            md.append(f"| {t['target']} | {t['limit']} | {t['measured']} | {v} |")
        md.append("")
    return md


def weft_threshold(s):
    """weft's shrink_idle_after as its default-option samples report it."""
    vals = sorted({x["result"]["extra"].get("shrink_idle_after_ms") for x in s.samples
                   if x["ok"] and x["candidate"] == "weft" and isinstance(x["result"].get("extra"), dict)} - {None})
    return ", ".join(f"{v:,} ms" for v in vals) + " as weft's samples report it" if vals else \
        "its default (no weft sample reported it)"


READ = """\
How to read this: every cell is **median [min, max]** over the repetitions, each sample a fresh
process, the candidates of a table alternating within every repetition (their order rotated by
one each repetition). W=1 children are pinned
to one CPU. The SC idle scenarios idle {idle_ms:,} ms (`--idle-ms`, meant to be the idle time weft's
shrinking policy needs; weft's threshold is in the list above) for every
candidate before memory is read or a task is pinged; in SC1 and SC3 weft's sample then waits
until its RSS stops falling (less than 8 B per task freed in 200 ms, at most 30 s: shrinking a
million tasks takes its workers seconds), Go's and Tokio's do not (their RSS does not move). RSS per task is VmRSS growth / tasks; page
tables (VmPTE) are **not** part of VmRSS and are shown apart. SC5's CPU is the whole process's
(getrusage user+sys) over spawn, 2 s of sleeping and join, divided by the wakes counted;
"wakes per s" below the ideal (tasks x 100 per s) means the runtime fell behind. Ratios are
weft's median over the peer's (below 1: weft is smaller or faster). SC8 runs one binary twice
(`--shrink-idle-after-ms 0` for off), interleaved: the ratio is what shrinking costs the hot
paths (the wait arena, the pin checks, the idle list), within this machine's noise. The SH rows
(issue 42) measure the doors of shrinking: spawning a million tasks until all are parked,
waking them all after 2 s and 10 s idle, pinging 10,000 idle tasks after 0.3-30 s, and the CPU
of tasks that sleep 1 s or 100 ms in a loop; weft with its default options against the same
binary with shrinking off (weft-noshrink), Go and Tokio. Whether weft's tasks were shrunk in a
sample is under each SH table (its workers' shrinks / restores).

What could favour a candidate here:

- SC1/SC2 count RSS only: weft's stacks are mappings of their own, whose page tables (VmPTE,
  shown) and virtual address space are not in RSS; Go's and Tokio's tasks live in their heaps,
  whose free space (Go's GC keeps up to 2x live) counts in RSS. The idle wait ({idle_ms:,} ms) is
  the same for all and is chosen for weft's shrinking; weft alone may wait longer for its RSS
  to settle (above), which favours it over a reading at a fixed time.
- Boost.Fiber's fibers have malloc'd 12 KiB stacks (8 KiB crashed) in SC1 and 8 KiB in SC5,
  smaller than its default (128 KiB): its memory figures are smaller than a default user's.
- SC5 at W=2: Boost.Fiber's work_stealing spins when idle (its default), which shows as CPU.
  Tokio rounds sleeps up to its 1 ms wheel tick; Go and weft use their own timer structures.
- SC6: weft's deadline is an argument of the read, which can skip arming a timer when data is
  there; Tokio's timeout() polls the read first and registers its timer only if the read is
  pending; Go's SetReadDeadline arms (and the zero deadline disarms) a runtime timer on every
  iteration, as written by a Go user who clears the deadline. The data is pre-filled (64 KiB
  per round, written by the same task outside the timed reads) for every candidate.
- SC4 uses each runtime's ordinary channel with capacity 1 (weft::channel(1), Go chan,
  tokio::sync::mpsc::channel(1)); a oneshot in Tokio would be cheaper.
- Tokio runs multi_thread with worker_threads = W also at W=1 (the current_thread scheduler
  is another design; it would likely be faster at W=1); its root is a spawned task, as in
  the others, not the block_on future on the main thread.
- The Go peer is built by the newest Go on the machine with its own defaults (a build-time
  go.mod at that version, so no compatibility GODEBUG settings of the source's go 1.19 line).
- SH1/SH2 end the spawn when the last task has counted itself, just before its wait; Tokio's
  tasks enable their `Notified` before counting (already registered waiters), weft's and Go's
  last one may still be a few microseconds from its wait. The wake is one call each (weft
  `event::set`, Go `close`, Tokio `notify_waiters`), the join counts ends (weft `wait_group`,
  Go `WaitGroup`, Tokio an atomic counter and a `Notify`). weft's sample reads
  `runtime::stats()` once before the wake or the pings, outside the timed part; the peers read
  nothing there. weft's and weft-noshrink's samples of one variant alternate with the peers'.
- The "weft" column runs with the library's default `shrink_idle_after`: where that is longer
  than a variant's idle time or sleep period, weft's tasks are not shrunk in that variant and
  its figure is that of weft without shrinking (the shrink counts under the tables show it).
- SH3 has no weft-noshrink row (its limit is against Go; it would add about 6 minutes).
- SH4/SH5's CPU is the whole process's (getrusage), spawn to join: the runtimes' own threads
  (Go's sysmon and GC, weft's workers shrinking and restoring stacks) count, as they would for
  a user. Each task's last sleep, begun before the stop flag, is counted (the run is up to one
  period longer than its nominal time, alike for all). Tokio's timer wheel has 1 ms ticks.
- SC10/SC11 (issue 43) compare each runtime's own timer without a task: weft::timer, Go's
  time.AfterFunc, and for Tokio, which has no callback timer, tokio_util's DelayQueue (one
  queue, one key per timer, one task driving it). A DelayQueue entry holds no callable (the
  driving task's code is the "callback" of every key), so its memory per timer is not the
  same object as a weft or Go timer; SC10 has no Tokio limit. Go runs each AfterFunc callback
  in a new goroutine, weft on the worker between tasks, Tokio in the one driving task: at W=2
  one DelayQueue's fires run on one worker at a time (a queue per worker might use both).
  SC10 reads RSS without forcing a collection in Go. SC11's CPU includes making and stopping
  the timers (the same work for each). weft's and Go's periodic timers skip deadlines missed
  by more than a period; Tokio's driver does the same, checking the clock every 64 fires."""


def machine(s, started, elapsed):
    class R:
        pass
    r = R()
    r.a = argparse.Namespace(quick=s.a.quick, reps=s.a.reps, timeout=s.a.timeout, mem_limit_gib=s.a.mem_limit_gib,
                             candidates=s.a.candidates)
    r.pin_cpu = s.runner.pin_cpu
    r.load_at_start = s.load_at_start
    r.samples = [dict(candidate=x["candidate"], ok=x["ok"], extra=(x["result"] or {}).get("extra", {}))
                 for x in s.samples]
    lines = rr.machine_lines(r, started, elapsed)
    lines.append("- sc3's children: timeout 900 s, memory limit 16.5 GiB (and the program's own 16 GiB guard)")
    lines.append(f"- weft: its default runtime options (shrink_idle_after = {weft_threshold(s)}; this script sets "
                 "none); weft-noshrink: the same binary with `--shrink-idle-after-ms 0`")
    lines.append(f"- the SC rows' idle wait: {s.a.idle_ms:,} ms (`--idle-ms`"
                 + (", the default)" if s.a.idle_ms == IDLE_MS_DEFAULT else ")"))
    thr = {x["result"]["extra"].get("shrink_idle_after_ms") for x in s.samples
           if x["ok"] and x["candidate"] == "weft" and isinstance(x["result"].get("extra"), dict)} - {None}
    if thr and any(s.a.idle_ms < v for v in thr) and any(x["label"] in ("sc1", "sc3", "sc4") for x in s.samples):
        lines.append(f"- **note: the SC idle wait ({s.a.idle_ms:,} ms) is shorter than weft's shrink_idle_after "
                     f"({', '.join(f'{v:,}' for v in sorted(thr))} ms): SC1-SC4 read weft's tasks before they "
                     "shrink; give --idle-ms past it**")
    for n, why in s.a.missing:
        lines.append(f"- **{n}: not available** ({why})")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--candidate", action="append", type=rr.parse_candidate, default=[],
                    help="NAME=COMMAND-PREFIX (weft, go, tokio, boost.fiber)")
    ap.add_argument("--missing", action="append", default=[], help="NAME=WHY: a peer that could not be built")
    ap.add_argument("--reps", type=int, help="repetitions (default 5; --quick: 1)")
    ap.add_argument("--quick", action="store_true", help="small sizes, one repetition: checks that it runs")
    ap.add_argument("--out", default=".", help="directory for scale.md / scale.json (default .)")
    ap.add_argument("--only", default="sc1,sc2,sc3,sc4,sc5,sc6,sc8,sc10,sc11,sh1,sh2,sh3,sh4,sh5",
                    help="targets to run (sc2 is sc1's run; sh5 is one of sh4's cells)")
    ap.add_argument("--idle-ms", type=int, default=IDLE_MS_DEFAULT,
                    help=f"the SC rows' idle wait before memory is read or a task pinged (default {IDLE_MS_DEFAULT}; "
                    "set it to the idle time weft's shrinking policy needs)")
    ap.add_argument("--timeout", type=float, help="seconds per child (default 180; --quick: 30)")
    ap.add_argument("--mem-limit-gib", type=float, default=12.0, help="kill a child past this RSS (sc3: 16.5)")
    ap.add_argument("--cpu", type=int, default=1, help="the CPU W=1 children are pinned to (default 1)")
    ap.add_argument("--idle-conns-json", help="SC7's JSON (default: OUT/idle_conns*.json if present; its "
                    "'targets', a list of objects with limit, measured and met, fill the row)")
    ap.add_argument("--log", help="file for the children's stderr (default OUT/scale-log.txt)")
    a = ap.parse_args()
    a.missing = [tuple(m.split("=", 1)) if "=" in m else (m, "no reason given") for m in a.missing]
    if not a.candidate:
        ap.error("give at least one --candidate")
    a.candidates = a.candidate
    a.only = [x for x in a.only.split(",") if x]
    if a.reps is None:
        a.reps = 1 if a.quick else 5
    if a.timeout is None:
        a.timeout = 30.0 if a.quick else 180.0
    os.makedirs(a.out, exist_ok=True)
    started = datetime.datetime.now(datetime.timezone.utc)
    t0 = time.monotonic()
    s = Scale(a)
    s.load_at_start = os.getloadavg()
    logf = open(a.log or os.path.join(a.out, "scale-log.txt"), "w")
    s.runner.logf = logf
    rr.log(f"scale report: {len(a.candidates)} candidate(s), {a.reps} repetition(s){' (quick)' if a.quick else ''}")
    try:
        s.run()
    except KeyboardInterrupt:
        s.failures.append("interrupted (Ctrl-C); the tables hold what had run")
    logf.close()
    elapsed = time.monotonic() - t0
    tg = targets(s)
    md = ["# weft scale report (issues 26, 42 and 43): idle tasks, timers, deadlines against Go, Tokio and Boost.Fiber",
          ""]
    md += machine(s, started, elapsed)
    md += ["", READ.format(idle_ms=a.idle_ms), ""]
    md += targets_md(s, tg)
    md += ["## Scenarios", ""] + tables_md(s)
    if s.failures:
        md += ["## Failures", ""] + [f"- {f}" for f in s.failures] + [""]
    text = "\n".join(md)
    with open(os.path.join(a.out, "scale.md"), "w") as f:
        f.write(text)
    meta = dict(date=started.isoformat(), quick=a.quick, reps=a.reps, elapsed_s=elapsed,
                candidates={n: p for n, p in a.candidates}, missing=dict(a.missing), sizes=s.sz,
                pin_cpu=s.runner.pin_cpu, idle_ms=a.idle_ms, sh_plan=s.plan, machine=dict(cpus=os.cpu_count(),
                                                                          mem_total_kib=rr.meminfo_kib("MemTotal")))
    with open(os.path.join(a.out, "scale.json"), "w") as f:
        json.dump(dict(meta=meta, summary=s.summary(), targets=tg, failures=s.failures, samples=s.samples), f, indent=1)
    print(text)
    rr.log(f"scale report: wrote {a.out}/scale.md, scale.json in {elapsed / 60:.1f} min")
    return 1 if s.fatal else 0


if __name__ == "__main__":
    sys.exit(main())
