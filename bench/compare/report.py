#!/usr/bin/env python3
"""bench/compare/report.py: the weft peer report (bench/README.md, rules B1-B7).

scripts/bench builds the binaries and calls this. It runs every candidate in
every scenario as a fresh child process, interleaved (repetition 1: A B C ...,
repetition 2: A B C ..., ...), pinned to one CPU, and writes:

  OUT/latest.md     the markdown report (also printed on stdout), ending with
                    the targets of issue 10 (and of earlier issues), each
                    a ratio of this run's medians (or a callgrind count or
                    M1 figure) marked met / not met, and issue 27's HP7 / HP8
  OUT/latest.json   every sample, the medians, and the run's metadata
  OUT/latest.csv    every sample, one a line
  OUT/*.svg         one chart per scenario (matplotlib)
  --log FILE        the children's stderr (default OUT/log.txt)

The binaries: weft_bench_report (C++: weft and the C++ peers; a second build
with WEFT_SHARE_FP_ENV=ON gives the L0 "FP env shared" rows; coroutines choose
their FP mode at run time, the -ownfp candidates) and weft_bench_go; for HP8,
weft_bench_hp_callgrind (bench/hp_callgrind.cpp) from --bin's directory.
Progress goes to stderr. Exits 1 if any child failed (crashed, non-zero exit,
timed out, printed no sample); the report is still written.
"""

import argparse
import csv
import datetime
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

# --- scenarios -----------------------------------------------------------------

# count, stack, lifecycle rounds (the first is cold), switch target (ms):
# (full, quick) pairs where they differ.
SCENARIOS = {
    "S1": dict(title="S1: {count} coroutine, 16 KB stack (hot switch)",
               count=(1, 1), stack=16 * KiB, rounds=(201, 41), target_ms=(100, 10)),
    "S2": dict(title="S2: {count} coroutines, 2 MB stacks",
               count=(1000, 1000), stack=2 * MiB, rounds=(5, 3), target_ms=(100, 10)),
    "S3": dict(title="S3: {count} coroutines, 64 KB stacks (cache-missing)",
               count=(30000, 10000), stack=64 * KiB, rounds=(3, 2), target_ms=(200, 15)),
}
LIVE_SERIES = [8, 64, 256, 1024, 4096, 8192]
LIVE_COUNT = 100
LIVE_STACK = 64 * KiB
M1_STACK = 16 * KiB
M1_COUNTS = ([1_000_000, 10_000_000], [100_000])
CALLGRIND_ITERS = 10000
# Issue 27's HP8 scheduler counts: weft_bench_hp_callgrind (bench/hp_callgrind.cpp,
# next to weft_bench_report) under callgrind at two operation counts; the
# difference of the totals over the difference of the counts is one
# operation (start-up and shutdown cancel). Mode, label, limit.
HP_COUNTS = (20_000, 220_000)
HP_MODES = [
    ("rendezvous", "instructions per rendezvous message (send + recv, unbuffered weft::channel, "
                   "two tasks, 1-worker runtime)", 250),
    ("yield", "instructions per yield through the scheduler (two tasks yielding in turn, 1-worker runtime)", 150),
]
# Instructions per round trip of weft's coroutine before the fiber funnel
# (the full run of 2026-11-22, measured at ff2ea53): the funnel's budget.
FUNNEL_BUDGET = 121

# --- candidates (rows) ------------------------------------------------------------

# key: unique row id; label: what the table shows; world: which binary
# ("cpp", "cpp-sharefp", "go"); cand: the binary's candidate name; live:
# extra live bytes at each yield; group: "weft" or "peer"; lifecycle: runs
# the lifecycle (and spawn-to-finish) rounds; switch: runs the switch round.
def rows_for(scenario):
    rows = []

    def add(key, label, world, cand, live=0, group="weft", lifecycle=True, switch=True):
        rows.append(dict(key=key, label=label, world=world, cand=cand, live=live,
                         group=group, lifecycle=lifecycle, switch=switch))

    add("weft-mmap", "weft coroutine, mmap_stack", "cpp", "weft-mmap")
    add("weft-pooled", "weft coroutine, pooled_stack", "cpp", "weft-pooled")
    # What a program that names no allocator gets: the process-wide pool
    # with default options (128 KB stacks, 16 cached per thread; S2's 2 MB
    # stacks are too big for it and are mapped each time). Its switch is
    # weft-pooled's, so it runs the lifecycle only.
    add("weft-default", "weft coroutine, default pool (stack_pool::global())", "cpp", "weft-default",
        switch=False)
    add("weft-pooled-nocolour", "weft coroutine, pooled_stack, cache colouring off", "cpp", "weft-pooled-nocolour")
    add("weft-fiber", "weft fiber, pooled_stack (resume + this_fiber::suspend)", "cpp", "weft-fiber")
    # A ring hands control over with this_fiber::switch_to: no driver in
    # between, one switch per transfer; a ring needs two fibers (S1). Its
    # lifecycle is weft-fiber's, so it has no lifecycle row.
    add("weft-fiber-switch", "weft fiber ring, pooled_stack (this_fiber::switch_to)"
        + (", 2 fibers" if scenario == "S1" else ""), "cpp", "weft-fiber-switch", lifecycle=False)
    for live, name in ((0, "~0 B"), (1024, "1 KB"), (4096, "4 KB")):
        add(f"weft-copy-{live}", f"weft coroutine, copy-stack, {name} live", "cpp", "weft-copy", live)
    # The compact copy-stack coroutine (weft/compact_coroutine.hpp), on the
    # same 4 shared stacks: the copy-stack targets are measured on it.
    for live, name in ((0, "~0 B"), (1024, "1 KB")):
        add(f"weft-compact-{live}", f"weft compact_coroutine, copy-stack, {name} live", "cpp", "weft-compact", live)
    add("weft-context", "weft context::jump (L0)", "cpp", "weft-context")
    add("weft-fast", "weft context::fast_jump (L0, inline)", "cpp", "weft-fast")
    # The coroutine rows above share the thread's FP control state (the
    # default, fp_env_mode::shared); these keep their own (fp_env_mode::own),
    # the ABI's guarantee, as Boost.Context does. The build's
    # WEFT_SHARE_FP_ENV no longer matters to coroutines: it is L0's switch
    # only (the -fp rows of the bench-sharefp build below).
    add("weft-mmap-own", "weft coroutine, mmap_stack (own FP state)", "cpp", "weft-mmap-ownfp")
    add("weft-pooled-own", "weft coroutine, pooled_stack (own FP state)", "cpp", "weft-pooled-ownfp")
    add("weft-copy-0-own", "weft coroutine, copy-stack, ~0 B live (own FP state)", "cpp", "weft-copy-ownfp", 0)
    add("weft-context-fp", "weft context::jump (L0) (FP env shared)", "cpp-sharefp", "weft-context")
    add("weft-fast-fp", "weft context::fast_jump (L0, inline) (FP env shared)", "cpp-sharefp", "weft-fast")
    add("fcontext", "Boost.Context jump_fcontext", "cpp", "fcontext", group="peer")
    add("fiber-protected", "boost::context::fiber, protected_fixedsize_stack", "cpp", "fiber-protected", group="peer")
    add("fiber-pooled", "boost::context::fiber, pooled_fixedsize_stack", "cpp", "fiber-pooled", group="peer")
    add("ucontext", "glibc ucontext (swapcontext)", "cpp", "ucontext", group="peer")
    add("cpp20", "C++20 stackless generator", "cpp", "cpp20", group="peer")
    add("go-chan", "Go goroutine, unbuffered channel handshake", "go", "go-chan", group="peer")
    add("go-gosched", "Go goroutines, runtime.Gosched ring", "go", "go-gosched", group="peer", lifecycle=False)
    return rows


def live_rows():
    rows = []
    for cand, label in (("weft-pooled", "weft pooled_stack (standalone stacks)"),
                        ("weft-copy", "weft copy-stack (4 shared stacks)")):
        for live in LIVE_SERIES:
            rows.append(dict(key=f"{cand}-live{live}", label=label, world="cpp", cand=cand, live=live,
                             group="weft", lifecycle=False, series=cand))
    return rows


M1_ROWS = [
    # key, label, world, cand, reason a 10M run cannot fit (None: decide by estimate)
    ("weft-pooled", "weft coroutine, pooled_stack (16 KB mmap stacks)", "cpp", "weft-pooled",
     "10M guarded mmap stacks are 20M mappings and at least 40 GB of touched pages: do not fit"),
    ("weft-copy", "weft coroutine, copy-stack", "cpp", "weft-copy", None),
    ("weft-compact", "weft compact_coroutine (copy-stack)", "cpp", "weft-compact", None),
    ("cpp20", "C++20 stackless generator", "cpp", "cpp20", None),
    ("fiber-pooled", "boost::context::fiber, pooled_fixedsize_stack (16 KB)", "cpp", "fiber-pooled", None),
    ("go", "Go goroutines (parked on a channel)", "go", "go", None),
]

CALLGRIND_ROWS = [
    ("weft-mmap", "weft coroutine resume+yield", "cpp", "weft-mmap"),
    ("weft-fiber", "weft fiber resume + this_fiber::suspend", "cpp", "weft-fiber"),
    ("weft-copy", "weft copy-stack coroutine resume+yield", "cpp", "weft-copy"),
    ("weft-compact", "weft compact_coroutine resume+yield", "cpp", "weft-compact"),
    ("weft-fiber-switch", "weft fiber this_fiber::switch_to x2 (ring of 2)", "cpp", "weft-fiber-switch"),
    ("weft-context", "weft context::jump x2", "cpp", "weft-context"),
    ("weft-fast", "weft context::fast_jump x2", "cpp", "weft-fast"),
    ("weft-mmap-own", "weft coroutine resume+yield (own FP state)", "cpp", "weft-mmap-ownfp"),
    ("weft-context-fp", "weft context::jump x2 (FP env shared)", "cpp-sharefp", "weft-context"),
    ("weft-fast-fp", "weft context::fast_jump x2 (FP env shared)", "cpp-sharefp", "weft-fast"),
    ("fcontext", "Boost.Context jump_fcontext x2", "cpp", "fcontext"),
    ("fiber-protected", "boost::context::fiber resume x2", "cpp", "fiber-protected"),
    ("ucontext", "glibc swapcontext x2", "cpp", "ucontext"),
    ("cpp20", "C++20 generator resume + co_yield", "cpp", "cpp20"),
]

# --- helpers -----------------------------------------------------------------------


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def fmt(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def cell(stat):
    if not stat:
        return "n/a"
    return f"{fmt(stat['median'])} [{fmt(stat['min'])}, {fmt(stat['max'])}]"


def ratio(a, b):
    if not a or not b or not b["median"]:
        return None
    return a["median"] / b["median"]


def fmt_ratio(r):
    return "n/a" if r is None else f"{r:.2f}"


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


class Runner:
    def __init__(self, args):
        self.args = args
        self.quick = args.quick
        self.q = 1 if args.quick else 0
        self.samples = []  # dicts
        self.failures = []
        self.notes = []
        self.logf = None
        self.worlds = {}  # world -> dict(bin=..., info=..., missing=reason)
        self.pin = []
        if shutil.which("taskset") and (os.cpu_count() or 1) > 1:
            self.pin = ["taskset", "-c", str(args.cpu)]

    # -- worlds --
    def probe(self):
        a = self.args
        for world, path in (("cpp", a.bin), ("cpp-sharefp", a.bin_sharefp)):
            if not path or not os.access(path, os.X_OK):
                why = "not built" if path else (a.sharefp_missing if world == "cpp-sharefp" and a.sharefp_missing else "no binary given")
                self.worlds[world] = dict(missing=why)
                continue
            out = subprocess.run([path, "--list"], capture_output=True, text=True, check=True).stdout
            info = json.loads(out)
            self.worlds[world] = dict(bin=path, info=info, cands={c["name"] for c in info["candidates"]})
        if a.go_bin and os.access(a.go_bin, os.X_OK):
            out = subprocess.run([a.go_bin, "--list"], capture_output=True, text=True, check=True).stdout
            info = json.loads(out)
            self.worlds["go"] = dict(bin=a.go_bin, info=info, cands={"go-chan", "go-gosched", "go"})
        else:
            self.worlds["go"] = dict(missing=a.go_missing or "no Go binary")

    def available(self, row):
        w = self.worlds.get(row["world"], {})
        if "missing" in w:
            return False, w["missing"]
        if row["cand"] not in w["cands"]:
            return False, "not built"
        return True, ""

    # -- running --
    def run_child(self, cmd, env=None, timeout=900, pin=True, what=""):
        full = (self.pin if pin else []) + cmd
        e = dict(os.environ)
        if env:
            e.update(env)
        t0 = time.monotonic()
        try:
            p = subprocess.run(full, capture_output=True, text=True, env=e, timeout=timeout)
        except subprocess.TimeoutExpired as ex:
            self.fail(what, f"timed out after {timeout} s", ex.stderr or "")
            return None, time.monotonic() - t0
        dt = time.monotonic() - t0
        if self.logf:
            self.logf.write(f"$ {' '.join(full)}\n{p.stderr}")
        if p.returncode != 0:
            sig = f"signal {-p.returncode}" if p.returncode < 0 else f"exit {p.returncode}"
            self.fail(what, sig, p.stderr)
            return None, dt
        lines = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
        if not lines:
            self.fail(what, "printed no sample", p.stderr)
            return None, dt
        return lines, dt

    def fail(self, what, why, stderr):
        msg = f"{what}: {why}"
        tail = (stderr or "").strip().splitlines()[-3:]
        if tail:
            msg += " (" + " | ".join(tail) + ")"
        self.failures.append(msg)
        log(f"report: FAILED {msg}")

    def add(self, section, row, lines, rep):
        for l in lines:
            self.samples.append(dict(section=section, row=row["key"], label=row["label"], world=row["world"],
                                     candidate=row["cand"], live=row.get("live", 0), metric=l["metric"],
                                     rep=rep, value=l["value"], unit=l["unit"]))

    # -- vm.max_map_count --
    def map_count_ok(self, needed, why):
        """Makes vm.max_map_count >= needed; returns (ok, previous value or None)."""
        cur = int(read_first("/proc/sys/vm/max_map_count", "65530"))
        if cur >= needed:
            return True, None
        if os.geteuid() != 0:
            return False, None
        try:
            with open("/proc/sys/vm/max_map_count", "w") as f:
                f.write(str(needed))
        except OSError as ex:
            log(f"report: cannot raise vm.max_map_count: {ex}")
            return False, None
        self.notes.append(f"vm.max_map_count was raised from {cur} to {needed} for {why} "
                          f"(root; restored right after).")
        log(f"report: vm.max_map_count {cur} -> {needed} for {why}")
        return True, cur

    def restore_map_count(self, prev):
        if prev is not None:
            with open("/proc/sys/vm/max_map_count", "w") as f:
                f.write(str(prev))

    # -- scenarios --
    def scenario_cmd(self, row, name, count, stack, rounds, target_ms, lifecycle=True, switch=True):
        w = self.worlds[row["world"]]
        if row["world"] == "go":
            cmd = [w["bin"], "--scenario", name, "--candidate", row["cand"], "--count", str(count),
                   "--rounds", str(rounds), "--target-ms", str(target_ms)]
            return cmd, {"GOMAXPROCS": "1"}
        cmd = [w["bin"], "--scenario", name, "--candidate", row["cand"], "--count", str(count),
               "--stack", str(stack), "--live", str(row.get("live", 0)), "--rounds", str(rounds),
               "--target-ms", str(target_ms)]
        if not lifecycle:
            cmd.append("--no-lifecycle")
        if not switch:
            cmd.append("--no-switch")
        return cmd, None

    def run_scenarios(self):
        reps = self.args.reps
        self.scen_rows = {}
        self.scen_params = {}
        for name in self.args.scenarios:
            if name not in SCENARIOS:
                continue
            sc = SCENARIOS[name]
            count = sc["count"][self.q]
            # Each guarded stack is two mappings; leave room for the process's own.
            needed = 2 * count + 4096
            ok, prev = self.map_count_ok(needed, f"{name} ({count} guarded stacks)")
            if not ok:
                limit = int(read_first("/proc/sys/vm/max_map_count", "65530"))
                new = max(1, (limit - 4096) // 2)
                self.notes.append(f"{name}: vm.max_map_count is {limit} and cannot be raised (not root): "
                                  f"{new} coroutines instead of {count}.")
                count = new
            self.scen_params[name] = dict(count=count, stack=sc["stack"], rounds=sc["rounds"][self.q],
                                          target_ms=sc["target_ms"][self.q])
            rows = rows_for(name)
            self.scen_rows[name] = rows
            runnable = [r for r in rows if self.available(r)[0]]
            try:
                for rep in range(reps):
                    for row in runnable:
                        cmd, env = self.scenario_cmd(row, name, count, sc["stack"], sc["rounds"][self.q],
                                                     sc["target_ms"][self.q], row["lifecycle"],
                                                     row.get("switch", True))
                        lines, dt = self.run_child(cmd, env, what=f"{name} {row['label']}")
                        log(f"[{name} rep {rep + 1}/{reps}] {row['label']}: {dt:.1f} s")
                        if lines:
                            self.add(name, row, lines, rep)
            finally:
                self.restore_map_count(prev)

    def run_live_series(self):
        reps = self.args.reps
        rows = live_rows()
        self.live_rows = rows
        target = 50 if not self.quick else 5
        runnable = [r for r in rows if self.available(r)[0]]
        for rep in range(reps):
            for row in runnable:
                cmd, env = self.scenario_cmd(row, "L", LIVE_COUNT, LIVE_STACK, 1, target, lifecycle=False)
                lines, dt = self.run_child(cmd, env, what=f"L {row['label']} {row['live']} B")
                log(f"[L rep {rep + 1}/{reps}] {row['label']}, {row['live']} B live: {dt:.1f} s")
                if lines:
                    self.add("L", row, lines, rep)

    # -- M1 --
    def run_m1(self):
        counts = M1_COUNTS[self.q]
        avail_kib = meminfo_kib("MemAvailable")
        self.m1_results = {}  # (key, count) -> dict or skip reason
        for key, label, world, cand, no_10m in M1_ROWS:
            row = dict(key=key, label=label, world=world, cand=cand, live=0)
            ok, why = self.available(row)
            per = None
            for count in counts:
                if not ok:
                    self.m1_results[(key, count)] = dict(skip=why if why != "not built" else "n/a (not built)")
                    continue
                if count >= 10_000_000 and no_10m:
                    self.m1_results[(key, count)] = dict(skip=no_10m)
                    continue
                if per is not None:
                    est = per * count * 1.1
                    if est > avail_kib * KiB * 0.85:
                        self.m1_results[(key, count)] = dict(
                            skip=f"skipped: estimated {est / GiB:.0f} GiB from the {counts[0]:,} run "
                                 f"({per:,.0f} B each) exceeds the {avail_kib * KiB / GiB:.0f} GiB available")
                        continue
                prev = None
                if cand in ("weft-pooled", "weft-mmap"):
                    ok_map, prev = self.map_count_ok(2 * count + 65530, f"M1 {label} at {count:,}")
                    if not ok_map:
                        self.m1_results[(key, count)] = dict(
                            skip=f"skipped: needs vm.max_map_count >= {2 * count:,} (two mappings per "
                                 f"guarded stack) and cannot raise it (not root)")
                        continue
                try:
                    w = self.worlds[world]
                    if world == "go":
                        cmd, env = [w["bin"], "--m1", "--count", str(count)], {"GOMAXPROCS": "1"}
                    else:
                        cmd, env = [w["bin"], "--m1", "--candidate", cand, "--count", str(count),
                                    "--stack", str(M1_STACK)], None
                    lines, dt = self.run_child(cmd, env, timeout=1200, what=f"M1 {label} {count:,}")
                finally:
                    self.restore_map_count(prev)
                log(f"[M1] {label}, {count:,}: {dt:.1f} s")
                if not lines:
                    self.m1_results[(key, count)] = dict(skip="failed (see the failures below)")
                    continue
                vals = {l["metric"]: l["value"] for l in lines}
                vals["seconds"] = dt
                self.m1_results[(key, count)] = vals
                for l in lines:
                    self.samples.append(dict(section="M1", row=key, label=label, world=world, candidate=cand,
                                             live=0, metric=l["metric"], rep=0, value=l["value"],
                                             unit=l["unit"], count=count))
                per = vals.get("m1_bytes_per_coroutine")

    # -- callgrind --
    def run_callgrind(self):
        self.cg = {}
        if not shutil.which("valgrind"):
            self.notes.append("callgrind: valgrind is not installed; no instruction counts.")
            return
        n = CALLGRIND_ITERS
        for key, label, world, cand in CALLGRIND_ROWS:
            row = dict(key=key, label=label, world=world, cand=cand)
            ok, why = self.available(row)
            if not ok:
                self.cg[key] = None
                continue
            counts = []
            for iters in (n, 2 * n):
                cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                       self.worlds[world]["bin"], "--callgrind", "--candidate", cand, "--iters", str(iters)]
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
                m = re.search(r"Collected : (\d+)", p.stderr)
                if p.returncode != 0 or not m:
                    self.fail(f"callgrind {label}", f"exit {p.returncode}", p.stderr)
                    break
                counts.append(int(m.group(1)))
            if len(counts) == 2:
                per_rt = (counts[1] - counts[0]) / n
                self.cg[key] = per_rt
                self.samples.append(dict(section="callgrind", row=key, label=label, world=world, candidate=cand,
                                         live=0, metric="instructions_per_round_trip", rep=0, value=per_rt,
                                         unit="instructions"))
                log(f"[callgrind] {label}: {per_rt:.1f} instructions per round trip")

    # -- HP8: the scheduler under callgrind --
    def run_hp_callgrind(self):
        """Instructions per yield and per rendezvous message (weft_bench_hp_callgrind)."""
        self.hp = {}  # mode -> dict(per_op=..., ir={count: total}) or dict(missing=reason)
        path = self.args.hp_bin or os.path.join(os.path.dirname(os.path.abspath(self.args.bin)),
                                                "weft_bench_hp_callgrind")
        self.hp_bin = path
        if not shutil.which("valgrind"):
            why = "valgrind missing"
        elif not os.access(path, os.X_OK):
            why = f"{os.path.basename(path)} not built"
        else:
            why = None
        for mode, label, _ in HP_MODES:
            if why:
                self.hp[mode] = dict(missing=why)
                continue
            ir = {}
            for n in HP_COUNTS:
                cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", path, mode, str(n)]
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
                if self.logf:
                    self.logf.write(f"$ {' '.join(cmd)}\n{p.stdout}{p.stderr}")
                m = re.search(r"Collected : (\d+)", p.stderr)
                if p.returncode != 0 or not m:
                    self.fail(f"callgrind HP8 {mode} {n:,}", f"exit {p.returncode}", p.stderr)
                    break
                ir[n] = int(m.group(1))
            if len(ir) != len(HP_COUNTS):
                self.hp[mode] = dict(missing="failed (see the failures below)")
                continue
            n1, n2 = HP_COUNTS
            per_op = (ir[n2] - ir[n1]) / (n2 - n1)
            self.hp[mode] = dict(per_op=per_op, ir=ir)
            self.samples.append(dict(section="callgrind-hp", row=f"weft-{mode}", label=label, world="hp",
                                     candidate=mode, live=0, metric="instructions_per_op", rep=0, value=per_op,
                                     unit="instructions"))
            log(f"[callgrind HP8] {mode}: {per_op:.1f} instructions per operation "
                f"({ir[n2]:,} at {n2:,} - {ir[n1]:,} at {n1:,})")

    # -- aggregation --
    def stats(self, section, row, metric):
        v = [s["value"] for s in self.samples
             if s["section"] == section and s["row"] == row and s["metric"] == metric]
        if not v:
            return None
        return dict(median=statistics.median(v), min=min(v), max=max(v), n=len(v))


# --- report ----------------------------------------------------------------------------


def machine_header(r, started, elapsed):
    a = r.args
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout if shutil.which("lscpu") else ""
    model = re.search(r"Model name:\s*(.+)", lscpu)
    model = model.group(1).strip() if model else platform.processor()
    cache = ", ".join(f"{k} {v}" for k, v in re.findall(r"(L[123][di]?) cache:\s*([^\n(]+?)\s*(?:\(|\n)", lscpu))
    hyper = re.search(r"Hypervisor vendor:\s*(.+)", lscpu)
    cpp = r.worlds.get("cpp", {}).get("info", {})
    go = r.worlds.get("go", {})
    flags = a.cxx_flags or "?"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    # The report's own output (bench/results/ in a full run) is rewritten by
    # this very run: it does not make the code measured uncommitted.
    out = os.path.relpath(os.path.abspath(a.out))
    spec = [] if out.startswith("..") else ["--", ".", f":(exclude){out}"]
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", *spec], capture_output=True,
                           text=True).stdout.strip()
    lines = [
        f"- date: {started.strftime('%Y-%m-%d %H:%M UTC')}; {'quick run (--quick)' if a.quick else 'full run'}, "
        f"{a.reps} interleaved repetition{'s' if a.reps != 1 else ''}, took {elapsed / 60:.1f} min",
        f"- machine: {model}, {os.cpu_count()} cores"
        + (f" ({hyper.group(1).strip()} guest)" if hyper else "")
        + (f"; {cache}" if cache else "")
        + f"; {meminfo_kib('MemTotal') / (1024 * 1024):.0f} GiB; Linux {platform.release()}",
        f"- compiler: {cpp.get('compiler', '?')}, flags `{flags}`; Boost {cpp.get('boost', '?')} (Debian); "
        + (f"Go {go['info']['go']} (GOMAXPROCS=1)" if "info" in go else f"Go: not available ({go.get('missing')})"),
        f"- weft {cpp.get('version', cpp.get('weft', '?'))} at commit {commit or '?'}"
        + (" with uncommitted changes" if dirty else "")
        + "; " + ("copy-stack built" if cpp.get("copy_stack") else "copy-stack not built yet (weft/shared_stack.hpp absent)"),
        f"- pinned with `{' '.join(r.pin)}`" if r.pin else "- not pinned (taskset missing or one CPU)",
    ]
    return lines


METHOD = """\
How to read this:
- every cell is **median [min, max]** over the repetitions; each repetition of each candidate
  is a fresh process, and candidates alternate (A B C ... A B C ...), so drift hits all alike;
- **switch** = one transfer of control: a resume+yield round trip is **two** switches, and the
  figure is ns per round trip / 2, measured over round-robin passes (resume coroutine 0, 1, ...,
  N-1, again); between its yields each coroutine touches its own 64-byte state (a local of its
  body: on its stack, or in its frame for C++20);
- **create** = stack + control block allocation and construction, the body not yet run;
  **first entry** = the first resume, running the body to its first yield; **destroy** =
  destroying the suspended coroutine (weft and boost::context::fiber unwind its stack; for
  jump_fcontext, weft context::jump and ucontext the stack is just freed; Go: close its channel
  and let it return). All ns per coroutine. **cold** = the first round in a fresh process (empty
  pools); **warm** = the mean of the later rounds (pools warm);
- **spawn to finish** = the lifecycle a runtime lives on, per coroutine: create N coroutines whose
  body touches its 64-byte state once and returns without yielding, then run each to completion
  with one resume and release it (its stack back to the pool; C++20: resume to the final suspend,
  then destroy the frame); N alive at once, as in the other rounds; the first of these rounds warms
  up and is dropped, the figure is the mean of the others. Candidates without a coroutine object
  (jump_fcontext, weft context::jump, ucontext, Go) have no such row;
- ratio columns are row / peer (below 1: the row is faster); switch ratios are against Boost.Context
  jump_fcontext, create ratios against boost::context::fiber with pooled_fixedsize_stack and against
  the C++20 generator;
- weft context::jump and jump_fcontext are the raw switch (no coroutine object); Go's stacks
  grow on demand (the stack column does not apply), C++20 frames are on the heap;
- **weft fiber** is the type-erased core under weft's coroutine (`weft::fiber`): the same
  resume + suspend round trips; **weft fiber ring** is N fibers (2 in S1) handing control to the
  next with `this_fiber::switch_to`, one switch per transfer and no driver in between (the driver
  resumes one fiber, the ring runs for the whole pass, the last fiber suspends back), so its
  figure is ns per transfer, each preceded by the departing fiber's touch of its state."""


def scenario_title(r, name):
    count = r.scen_params[name]["count"]
    full = SCENARIOS[name]["count"][0]
    t = SCENARIOS[name]["title"].format(count=f"{count:,}")
    return t + (f" (full runs: {full:,})" if count != full else "")


def scenario_tables(r, name):
    rows = r.scen_rows[name]
    p = r.scen_params[name]
    out = [f"## {scenario_title(r, name)}", ""]
    out.append(f"{p['count']:,} coroutine{'s' if p['count'] != 1 else ''}, {p['stack'] // KiB:,} KB stacks; lifecycle: 1 cold + "
               f"{p['rounds'] - 1} warm rounds per repetition; switch: about {p['target_ms']} ms of passes.")
    out.append("")
    out += ["| candidate | ns per switch | ratio to jump_fcontext |", "|---|---|---|"]
    base = r.stats(name, "fcontext", "switch")
    for row in rows:
        if not row.get("switch", True):
            continue
        ok, why = r.available(row)
        st = r.stats(name, row["key"], "switch") if ok else None
        label = f"**{row['label']}**" if row["group"] == "weft" else row["label"]
        if not ok:
            out.append(f"| {label} | n/a ({why}) | |")
            continue
        out.append(f"| {label} | {cell(st)} | {fmt_ratio(ratio(st, base))} |")
    out += ["", "Lifecycle, ns per coroutine (ratios: cold / warm):", "",
            "| candidate | create cold | create warm | ratio to fiber pooled | ratio to C++20 "
            "| first entry cold | first entry warm | destroy cold | destroy warm |",
            "|---|---|---|---|---|---|---|---|---|"]
    fp = {k: r.stats(name, "fiber-pooled", f"create_{k}") for k in ("cold", "warm")}
    c20 = {k: r.stats(name, "cpp20", f"create_{k}") for k in ("cold", "warm")}
    for row in rows:
        if not row["lifecycle"]:
            continue
        ok, why = r.available(row)
        label = f"**{row['label']}**" if row["group"] == "weft" else row["label"]
        if not ok:
            out.append(f"| {label} | n/a ({why}) | | | | | | | |")
            continue
        s = {m: r.stats(name, row["key"], m) for m in
             ("create_cold", "create_warm", "entry_cold", "entry_warm", "destroy_cold", "destroy_warm")}
        rfp = f"{fmt_ratio(ratio(s['create_cold'], fp['cold']))} / {fmt_ratio(ratio(s['create_warm'], fp['warm']))}"
        rc = f"{fmt_ratio(ratio(s['create_cold'], c20['cold']))} / {fmt_ratio(ratio(s['create_warm'], c20['warm']))}"
        out.append(f"| {label} | {cell(s['create_cold'])} | {cell(s['create_warm'])} | {rfp} | {rc} | "
                   f"{cell(s['entry_cold'])} | {cell(s['entry_warm'])} | {cell(s['destroy_cold'])} | "
                   f"{cell(s['destroy_warm'])} |")
    out.append("")
    out += spawn_table(r, name)
    return out


def spawn_table(r, name):
    """Spawn to finish: create + first entry + run to completion + release, warm."""
    rows = [x for x in r.scen_rows[name] if x["lifecycle"] and r.available(x)[0]
            and r.stats(name, x["key"], "spawn_warm")]
    if not rows:
        return []
    out = ["Spawn to finish, ns per coroutine, warm (create + first entry + run to completion + release; "
           "the body touches its state once and returns without yielding):", "",
           "| candidate | spawn to finish | ratio to C++20 | ratio to fiber pooled | of which run + release |",
           "|---|---|---|---|---|"]
    c20 = r.stats(name, "cpp20", "spawn_warm")
    fp = r.stats(name, "fiber-pooled", "spawn_warm")
    for row in rows:
        st = r.stats(name, row["key"], "spawn_warm")
        label = f"**{row['label']}**" if row["group"] == "weft" else row["label"]
        out.append(f"| {label} | {cell(st)} | {fmt_ratio(ratio(st, c20))} | {fmt_ratio(ratio(st, fp))} | "
                   f"{cell(r.stats(name, row['key'], 'spawn_run_warm'))} |")
    out.append("")
    return out


def live_table(r):
    out = [f"## Copy-stack switch cost vs live bytes", "",
           f"{LIVE_COUNT} coroutines round-robin, {LIVE_STACK // KiB} KB stacks; each keeps N bytes live on its stack "
           "across every yield (plus its 64-byte state). ns per switch, median [min, max].", ""]
    out.append("| candidate | " + " | ".join(f"{n:,} B" for n in LIVE_SERIES) + " |")
    out.append("|---|" + "---|" * len(LIVE_SERIES))
    for series in ("weft-pooled", "weft-copy"):
        rows = [x for x in r.live_rows if x["series"] == series]
        ok, why = r.available(rows[0])
        cells = []
        for row in rows:
            cells.append(cell(r.stats("L", row["key"], "switch")) if ok else f"n/a ({why})")
        out.append(f"| {rows[0]['label']} | " + " | ".join(cells) + " |")
        if ok and series == "weft-copy":
            saved = [r.stats("L", row["key"], "copy_max_saved") for row in rows]
            out.append("| (copy-stack: most bytes saved at one switch) | "
                       + " | ".join(f"{s['max']:,.0f}" if s else "n/a" for s in saved) + " |")
    out.append("")
    return out


def m1_table(r):
    counts = M1_COUNTS[r.q]
    out = ["## M1: memory per suspended coroutine", "",
           "Each figure is one child process: it creates the coroutines, runs each to its first yield with "
           "~100 B of live locals (a 64-byte state and 40 more bytes), then reads its peak RSS (VmHWM in "
           "/proc/self/status) and subtracts its RSS before the first was created. Handles included.", ""]
    hdr = "| candidate | count | peak RSS | bytes per coroutine | ratio to C++20 | ratio to fiber pooled |"
    out += [hdr, "|---|---|---|---|---|---|"]
    for key, label, world, cand, _ in M1_ROWS:
        for count in counts:
            res = r.m1_results.get((key, count))
            name = f"**{label}**" if key.startswith("weft") else label
            if res is None:
                continue
            if "skip" in res:
                out.append(f"| {name} | {count:,} | {res['skip']} | | | |")
                continue
            per = res["m1_bytes_per_coroutine"]

            def rat(other):
                o = r.m1_results.get((other, count), {})
                v = o.get("m1_bytes_per_coroutine") if isinstance(o, dict) else None
                return f"{per / v:.2f}" if v else "n/a"

            out.append(f"| {name} | {count:,} | {res['m1_peak_rss'] / MiB:,.0f} MiB | {per:,.0f} | "
                       f"{rat('cpp20')} | {rat('fiber-pooled')} |")
    out.append("")
    return out


def callgrind_table(r):
    out = ["## Instructions per round trip (callgrind)", "",
           f"`valgrind --tool=callgrind`, one coroutine, bare resume+yield (no state touched): total "
           f"instructions with {2 * CALLGRIND_ITERS:,} round trips minus with {CALLGRIND_ITERS:,}, divided by "
           f"{CALLGRIND_ITERS:,}. Deterministic; includes the benchmark loop's own few instructions. The "
           "switch_to ring has two fibers and makes two transfers for each round trip of the others (its loop "
           "is the ring's countdown). A system "
           "call counts as one instruction: ucontext's sigprocmask per switch costs far more than it shows here.", "",
           "| candidate | instructions per round trip | per switch | ratio to jump_fcontext |", "|---|---|---|---|"]
    base = r.cg.get("fcontext")
    for key, label, world, cand in CALLGRIND_ROWS:
        v = r.cg.get(key)
        name = f"**{label}**" if key.startswith("weft") else label
        if v is None:
            ok, why = r.available(dict(world=world, cand=cand))
            out.append(f"| {name} | n/a ({why or 'failed'}) | | |")
            continue
        out.append(f"| {name} | {v:.1f} | {v / 2:.1f} | {v / base:.2f} |" if base else f"| {name} | {v:.1f} | {v / 2:.1f} | n/a |")
    out.append("")
    return out


def issue10_targets(r):
    """Issue 10's targets (the coroutine at the cost of a raw switch), each checked against this run."""
    out = ["## Targets of issue 10", ""]
    if r.quick:
        out += ["**Quick run: the timed figures and M1 are not meaningful** (short passes, fewer coroutines in "
                f"S3, M1 at {M1_COUNTS[1][0]:,}); the section is printed to show that every figure is computed. "
                "The callgrind counts do not depend on the mode. Only a full run decides a target.", ""]
    out += ["Each timed figure is a ratio of medians from this run; the figures it divides follow in "
            "parentheses. weft coroutine = `weft::coroutine` on `pooled_stack` with a pool of the scenario's "
            "stack size (the weft-pooled rows); FP state shared = the default (`fp_env_mode::shared`), own FP "
            "state = `fp_env_mode::own` (the weft-pooled-own rows); compact copy-stack = `weft::compact_coroutine`, its \"~0 B live\" row and its M1 "
            "figure (FP state shared); destroy = the destroy-warm column (a suspended coroutine unwound); "
            "spawn to finish = the spawn-to-finish table.", "",
            "| target | limit | measured | met |", "|---|---|---|---|"]
    tally = [0, 0]

    def med(section, row, metric):
        st = r.stats(section, row, metric)
        return st["median"] if st else None

    def line(figure, limit_text, value, limit, detail="", fmt="{:.2f}"):
        if value is None:
            out.append(f"| {figure} | {limit_text} | not measured{detail} | |")
            return
        met = value <= limit
        tally[0 if met else 1] += 1
        out.append(f"| {figure} | {limit_text} | {fmt.format(value)}{detail} | {'met' if met else '**not met**'} |")

    def ratio_line(figure, limit, section, num, den, metric, den_name, unit="ns"):
        a, b = med(section, num, metric), med(section, den, metric)
        if a is None or b is None or not b:
            why = " (not run)" if section not in r.scen_rows else f" ({num if a is None else den} has no figure)"
            line(figure, f"<= {limit}x {den_name}", None, limit, why)
            return
        line(figure, f"<= {limit}x {den_name}", a / b, limit, f" ({fmt(a)} / {fmt(b)} {unit})")

    for name in ("S1", "S2", "S3"):
        ratio_line(f"{name} switch, weft coroutine (own FP state)", 1.0, name, "weft-pooled-own", "fcontext",
                   "switch", "jump_fcontext")
    for name in ("S1", "S2"):
        ratio_line(f"{name} switch, weft coroutine (FP state shared)", 0.6, name, "weft-pooled", "fcontext",
                   "switch", "jump_fcontext")
    ratio_line("S3 switch, weft compact copy-stack coroutine (~0 B live)", 0.5, "S3", "weft-compact-0", "fcontext",
               "switch", "jump_fcontext")
    for name in ("S2", "S3"):
        ratio_line(f"{name} spawn to finish, weft coroutine", 1.5, name, "weft-pooled", "cpp20", "spawn_warm",
                   "C++20 generator")
        ratio_line(f"{name} spawn to finish, weft coroutine", 1.0, name, "weft-pooled", "fiber-pooled",
                   "spawn_warm", "boost::context::fiber (pooled)")
    for name in ("S2", "S3"):
        ratio_line(f"{name} destroy suspended (warm), weft coroutine", 0.5, name, "weft-pooled", "fiber-pooled",
                   "destroy_warm", "boost::context::fiber (pooled)")
    # M1: the M1 section's bytes per coroutine (peak RSS over the count),
    # from the largest count that ran.
    m1 = [(count, res) for count in sorted(M1_COUNTS[r.q], reverse=True)
          for res in [r.m1_results.get(("weft-compact", count))]
          if isinstance(res, dict) and "m1_bytes_per_coroutine" in res]
    for limit, what in ((250, ""), (160, " (stretch)")):
        if m1:
            count, res = m1[0]
            line(f"M1 bytes per suspended compact copy-stack coroutine, ~100 B live{what}", f"<= {limit} B",
                 res["m1_bytes_per_coroutine"], limit, f" at {count:,}", fmt="{:.0f} B")
        else:
            line(f"M1 bytes per suspended compact copy-stack coroutine, ~100 B live{what}", f"<= {limit} B", None,
                 limit, " (M1 not run)" if "M1" not in r.args.only.split(",") else " (weft-compact has no M1 figure)")
    a, b = med("S1", "weft-compact-0", "switch"), med("S1", "weft-pooled", "switch")
    line("S1 switch, compact copy-stack (~0 B live) / standalone weft coroutine", "<= 1.2x", a / b if a and b else None,
         1.2, f" ({fmt(a)} / {fmt(b)} ns)" if a and b else (" (S1 not run)" if "S1" not in r.scen_rows else ""))
    cg_why = "" if r.cg else " (callgrind not run)"
    line("instructions per round trip, weft coroutine resume + yield (callgrind)", "<= 70",
         r.cg.get("weft-mmap"), 70, cg_why, fmt="{:.0f}")
    # The ring's figure is per two switch_to()s (one round trip of the others).
    st = r.cg.get("weft-fiber-switch")
    line("instructions per weft fiber switch_to (callgrind, ring of 2: round trip / 2)", "<= 60",
         st / 2 if st is not None else None, 60, cg_why, fmt="{:.0f}")
    out += ["", f"{tally[0]} of {tally[0] + tally[1]} measured targets met"
            + (" (quick run: not meaningful)." if r.quick else "."), ""]
    return out


def targets_table(r):
    """The targets of the stacks and benchmark issues, each checked against this run."""
    out = ["## Targets of earlier issues (stacks, benchmark, fiber core)", "",
           "Each target is a ratio of medians from this run (the issues' wording), or a callgrind count. The lifecycle sum is "
           "create + first entry + destroy, warm, per coroutine; weft's rows are its default allocator "
           "(pooled_stack), sharing the thread's FP control state (the default), unless named.", "",
           "| figure | target | measured | met |", "|---|---|---|---|"]

    def med(section, row, metric):
        st = r.stats(section, row, metric)
        return st["median"] if st else None

    def line(figure, target, value, limit, fmt="{:.2f}", strict=False):
        if value is None:
            out.append(f"| {figure} | {target} | n/a (not run) | |")
            return
        met = value < limit if strict else value <= limit
        out.append(f"| {figure} | {target} | {fmt.format(value)} | {'yes' if met else '**no**'} |")

    def rat(a, b):
        return a / b if a is not None and b else None

    for name, limit in (("S1", 0.5), ("S2", 0.5), ("S3", 0.6)):
        if name not in r.scen_rows:
            continue
        base = med(name, "fcontext", "switch")
        line(f"{name} switch, weft coroutine", f"<= {limit} x jump_fcontext",
             rat(med(name, "weft-pooled", "switch"), base), limit)
        line(f"{name} switch, weft coroutine (own FP state)", f"<= {limit} x jump_fcontext",
             rat(med(name, "weft-pooled-own", "switch"), base), limit)
        line(f"{name} switch, weft context::fast_jump (L0)", f"<= {limit} x jump_fcontext",
             rat(med(name, "weft-fast", "switch"), base), limit)
    for name in ("S2", "S3"):
        if name in r.scen_rows:
            on, off = med(name, "weft-pooled", "switch"), med(name, "weft-pooled-nocolour", "switch")
            if on is not None and off is not None:
                out.append(f"| {name} switch, cache colouring on / off (information) | below 1: colouring helps | "
                           f"{on / off:.2f} ({fmt(on)} / {fmt(off)} ns) | |")
    if r.cg:
        base = r.cg.get("fcontext")
        line("instructions per round trip, weft coroutine", "fewer than jump_fcontext",
             rat(r.cg.get("weft-mmap"), base), 1.0, strict=True)
        line("instructions per round trip, weft context::fast_jump", "fewer than jump_fcontext",
             rat(r.cg.get("weft-fast"), base), 1.0, strict=True)
        # The fiber funnel (fiber_record.hpp) must not make a round trip
        # dearer than the coroutine layer was before it.
        for key, what in (("weft-mmap", "weft coroutine"), ("weft-fiber", "weft fiber resume + suspend"),
                          ("weft-fiber-switch", "weft fiber switch_to x2")):
            line(f"instructions per round trip, {what}", f"<= {FUNNEL_BUDGET} (coroutine before the funnel)",
                 r.cg.get(key), FUNNEL_BUDGET, fmt="{:.0f}")

    def life(section, row):
        parts = [med(section, row, m) for m in ("create_warm", "entry_warm", "destroy_warm")]
        return None if None in parts else sum(parts)

    for name in ("S2", "S3"):
        if name not in r.scen_rows:
            continue
        w = life(name, "weft-pooled")
        line(f"{name} create + first entry + destroy, warm pool", "<= 0.5 x fiber pooled",
             rat(w, life(name, "fiber-pooled")), 0.5)
        line(f"{name} create + first entry + destroy, warm pool", "<= 2 x C++20 generator",
             rat(w, life(name, "cpp20")), 2.0)
    res = r.m1_results.get(("weft-copy", 10_000_000))
    if isinstance(res, dict) and "m1_peak_rss" in res:
        line("M1 10,000,000 copy-stack coroutines, peak RSS", "<= 2.0 GB", res["m1_peak_rss"] / 1e9, 2.0,
             fmt="{:.2f} GB")
    elif "M1" in (r.args.only or ""):
        out.append("| M1 10,000,000 copy-stack coroutines, peak RSS | <= 2.0 GB | not run at this size |  |")
    out.append("")
    return out


def hp_targets(r):
    """Issue 27's HP7 / HP8 rows: (markdown lines, the rows for latest.json)."""
    out = ["## Targets of issue 27 (HP7, HP8)", ""]
    if r.quick:
        out += ["**Quick run: only a full run decides a target.** The HP7 ratios come from short passes; the "
                "HP8 callgrind counts do not depend on the mode.", ""]
    n1, n2 = HP_COUNTS
    out += ["HP7: each figure is a ratio of medians from this run (the medians follow in parentheses, ns per "
            "switch). weft coroutine = `weft::coroutine` on `pooled_stack` (the weft-pooled rows of the S1 / S2 "
            "tables); default FP mode = the coroutine's default, `fp_env_mode::shared` (no FP control state "
            "saved at a switch; the default build's WEFT_SHARE_FP_ENV=OFF applies to L0's jump only); own FP "
            "mode = `fp_env_mode::own` (the weft-pooled-own rows: the FP control state saved and restored at "
            "each switch, as jump_fcontext does).",
            "",
            "HP8: callgrind instruction counts. The coroutine round trip is the callgrind table's \"weft "
            "coroutine resume+yield\" row against its \"weft context::fast_jump x2\" row, both from "
            "weft_bench_report of the default build (the same harness and loop); that fast_jump saves and "
            "restores the FP control state (the default build), the coroutine does not (`fp_env_mode::shared`): "
            "the information row below sets like against like. The yield and rendezvous figures come from "
            "bench/hp_callgrind.cpp (`weft_bench_hp_callgrind MODE N`: a runtime with one worker thread, "
            "two tasks, default runtime_options): total instructions of the whole process "
            f"(`valgrind --tool=callgrind`, all threads) at N = {n2:,} minus at N = {n1:,}, divided by "
            f"{n2 - n1:,}; start-up and shutdown cancel. The program checks what it ran (the two tasks "
            "alternated at every yield; every message arrived, in order). A system call counts as one "
            "instruction, and under valgrind clock_gettime() is a system call rather than the vDSO's code.",
            "",
            "| target | limit | measured | met |", "|---|---|---|---|"]
    rows = []

    def emit(tid, figure, limit_text, value, limit, detail, fmt="{:.2f}", why=None, extra=None):
        text = f"{tid} {figure}"
        if value is None:
            measured = why or "not evaluated"
            out.append(f"| {text} | {limit_text} | {measured} | |")
            met = None
        else:
            met = value <= limit
            measured = fmt.format(value) + detail
            out.append(f"| {text} | {limit_text} | {measured} | {'met' if met else '**not met**'} |")
        row = dict(id=tid, target=text, limit=limit_text, measured=measured, value=value, limit_value=limit,
                   met=met)
        if extra:
            row.update(extra)
        rows.append(row)

    def med(section, row):
        st = r.stats(section, row, "switch")
        return st["median"] if st else None

    for key, mode, limit in (("weft-pooled", "default FP mode", 0.6), ("weft-pooled-own", "own FP mode", 1.0)):
        for name in ("S1", "S2"):
            figure = f"L2 {name} switch, weft coroutine, {mode}"
            limit_text = f"<= {limit}x jump_fcontext"
            if name not in r.scen_rows:
                emit("HP7", figure, limit_text, None, limit, "", why=f"not evaluated ({name} not run)")
                continue
            a, b = med(name, key), med(name, "fcontext")
            if a is None or b is None or not b:
                emit("HP7", figure, limit_text, None, limit, "",
                     why=f"not evaluated ({key if a is None else 'fcontext'} has no figure)")
                continue
            emit("HP7", figure, limit_text, a / b, limit, f" ({fmt(a)} / {fmt(b)} ns)",
                 extra=dict(row=key, peer="fcontext", scenario=name, medians_ns=[a, b]))

    # HP8: the coroutine round trip against the raw fast_jump round trip.
    figure = "instructions per round trip, weft coroutine resume + yield (callgrind)"
    if not shutil.which("valgrind"):
        emit("HP8", figure, "<= fast_jump x2 + 20", None, None, "", why="not evaluated (valgrind missing)")
    elif not r.cg:
        emit("HP8", figure, "<= fast_jump x2 + 20", None, None, "", why="not evaluated (callgrind not run)")
    else:
        co, fast = r.cg.get("weft-mmap"), r.cg.get("weft-fast")
        if co is None or fast is None:
            emit("HP8", figure, "<= fast_jump x2 + 20", None, None, "",
                 why=f"not evaluated ({'weft-mmap' if co is None else 'weft-fast'} has no count)")
        else:
            emit("HP8", figure, f"<= fast_jump x2 + 20 = {fast + 20:.0f}", co, fast + 20,
                 f" (fast_jump x2: {fast:.0f}; difference {co - fast:+.0f})", fmt="{:.0f}",
                 extra=dict(fast_jump=fast, coroutine=co))
            # Information: the same difference with the FP control state
            # handled alike on both sides.
            own, fast_fp = r.cg.get("weft-mmap-own"), r.cg.get("weft-fast-fp")
            parts = []
            if own is not None:
                parts.append(f"own FP state coroutine {own:.0f} - fast_jump x2 {fast:.0f} = {own - fast:+.0f}")
            if fast_fp is not None:
                parts.append(f"coroutine {co:.0f} - fast_jump x2 (FP env shared build) {fast_fp:.0f} = "
                             f"{co - fast_fp:+.0f}")
            if parts:
                out.append(f"| HP8 (information) the same difference with the FP control state handled alike "
                           f"on both sides | +20 | {'; '.join(parts)} | |")

    for mode, label, limit in HP_MODES:
        res = getattr(r, "hp", {}).get(mode)
        if res is None:
            emit("HP8", label, f"<= {limit}", None, limit, "", why="not evaluated (callgrind not run)")
        elif "missing" in res:
            emit("HP8", label, f"<= {limit}", None, limit, "", why=f"not evaluated ({res['missing']})")
        else:
            ir = res["ir"]
            emit("HP8", label, f"<= {limit}", res["per_op"], limit,
                 f" (({ir[n2]:,} - {ir[n1]:,}) / {n2 - n1:,})", fmt="{:.0f}",
                 extra=dict(mode=mode, ir={str(k): v for k, v in ir.items()}))
    met = sum(1 for x in rows if x["met"])
    decided = sum(1 for x in rows if x["met"] is not None)
    out += ["", f"{met} of {decided} evaluated HP targets met" + (" (quick run: not decided)." if r.quick else "."),
            ""]
    return out, rows


# --- charts ------------------------------------------------------------------------------


def charts(r, outdir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as ex:
        r.notes.append(f"charts: matplotlib is not available ({ex}); no charts drawn.")
        return []
    plt.rcParams["svg.hashsalt"] = "weft"
    written = []

    def bars(ax, labels, stats, title, xlabel, colors):
        # stats may hold None (no figure for that row): no bar, "n/a".
        y = list(range(len(labels)))
        med = [s["median"] if s else 0 for s in stats]
        lo = [s["median"] - s["min"] if s else 0 for s in stats]
        hi = [s["max"] - s["median"] if s else 0 for s in stats]
        ax.barh(y, med, xerr=[lo, hi], color=colors, capsize=2, error_kw=dict(lw=0.8))
        ax.set_yticks(y, labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_title(title, fontsize=9)
        ax.grid(axis="x", which="both", alpha=0.3)
        floor = min((s["min"] for s in stats if s), default=1)
        for i, st in enumerate(stats):
            if st:
                ax.text(st["max"], i, " " + fmt(st["median"]), va="center", fontsize=6)
            else:
                ax.text(floor, i, " n/a", va="center", fontsize=6)

    def save(fig, path):
        fig.savefig(path, metadata={"Date": None})
        fig.savefig(path[:-4] + ".png", dpi=100)
        plt.close(fig)

    def color(row):
        return "#d95f02" if row["group"] == "weft" else "#7570b3"

    for name in r.scen_rows:
        rows = [x for x in r.scen_rows[name] if r.stats(name, x["key"], "switch")]
        if not rows:
            continue
        fig, axes = plt.subplots(1, 3, figsize=(15, 0.32 * len(rows) + 1.6), sharey=True)
        labels = [x["label"] for x in rows]
        colors = [color(x) for x in rows]
        bars(axes[0], labels, [r.stats(name, x["key"], "switch") for x in rows],
             "switch (one transfer of control)", "ns per switch (log), median [min, max]", colors)
        for ax, metric, title in ((axes[1], "create_cold", "create, cold"), (axes[2], "create_warm", "create, warm")):
            bars(ax, labels, [r.stats(name, x["key"], metric) for x in rows], title, "ns per coroutine (log)", colors)
            ax.tick_params(labelleft=False)
        fig.suptitle(f"weft {scenario_title(r, name)}; {r.started_str}", fontsize=10)
        fig.tight_layout()
        path = os.path.join(outdir, f"{name.lower()}.svg")
        save(fig, path)
        written.append(path)

    # M1
    counts = M1_COUNTS[r.q]
    items = [(f"{label} ({count:,})", res["m1_bytes_per_coroutine"], key)
             for key, label, _, _, _ in M1_ROWS for count in counts
             for res in [r.m1_results.get((key, count))] if res and "skip" not in res]
    if items:
        fig, ax = plt.subplots(figsize=(9, 0.35 * len(items) + 1.4))
        y = list(range(len(items)))
        ax.barh(y, [v for _, v, _ in items], color=["#d95f02" if k.startswith("weft") else "#7570b3" for *_, k in items])
        ax.set_yticks(y, [l for l, _, _ in items], fontsize=7)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlabel("bytes of peak RSS per suspended coroutine (log)", fontsize=8)
        for i, (_, v, _) in enumerate(items):
            ax.text(v, i, " " + fmt(v), va="center", fontsize=6)
        ax.set_title(f"weft M1: memory per suspended coroutine (~100 B live); {r.started_str}", fontsize=9)
        ax.grid(axis="x", which="both", alpha=0.3)
        fig.tight_layout()
        path = os.path.join(outdir, "m1.svg")
        save(fig, path)
        written.append(path)

    # live-bytes series
    fig, ax = plt.subplots(figsize=(7, 4))
    drew = False
    for series, style in (("weft-pooled", "o-"), ("weft-copy", "s-")):
        rows = [x for x in r.live_rows if x["series"] == series]
        pts = [(x["live"], r.stats("L", x["key"], "switch")) for x in rows]
        pts = [(n, s) for n, s in pts if s]
        if not pts:
            continue
        xs = [n for n, _ in pts]
        ax.errorbar(xs, [s["median"] for _, s in pts],
                    yerr=[[s["median"] - s["min"] for _, s in pts], [s["max"] - s["median"] for _, s in pts]],
                    fmt=style, capsize=2, label=rows[0]["label"])
        drew = True
    if drew:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("live bytes on the coroutine's stack at each yield")
        ax.set_ylabel("ns per switch")
        ax.set_title(f"switch cost vs live bytes ({LIVE_COUNT} coroutines round-robin); {r.started_str}", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(outdir, "live_bytes.svg")
        save(fig, path)
        written.append(path)
    else:
        plt.close(fig)
    return written


# --- main ------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="short run: fewer iterations and coroutines")
    ap.add_argument("--bin", required=True, help="weft_bench_report (default build)")
    ap.add_argument("--bin-sharefp", help="weft_bench_report built with WEFT_SHARE_FP_ENV=ON")
    ap.add_argument("--go-bin", help="weft_bench_go")
    ap.add_argument("--hp-bin", help="weft_bench_hp_callgrind (default: next to --bin)")
    ap.add_argument("--go-missing", help="why there is no Go binary")
    ap.add_argument("--sharefp-missing", help="why there is no --bin-sharefp")
    ap.add_argument("--out", required=True, help="directory for latest.md/json/csv and the charts")
    ap.add_argument("--reps", type=int, help="repetitions (default 7; --quick: 1, as the other reports: a quick run's timings are not a measurement)")
    ap.add_argument("--cpu", type=int, default=1, help="CPU to pin to (taskset -c)")
    ap.add_argument("--cxx-flags", default="", help="the compiler flags, for the header")
    ap.add_argument("--log", help="file for the children's stderr (default OUT/log.txt)")
    ap.add_argument("--only", default="S1,S2,S3,L,M1,callgrind", help="comma-separated parts to run")
    a = ap.parse_args()
    if a.reps is None:
        a.reps = 1 if a.quick else 7
    parts = set(a.only.split(","))
    a.scenarios = [s for s in ("S1", "S2", "S3") if s in parts]

    os.makedirs(a.out, exist_ok=True)
    started = datetime.datetime.now(datetime.timezone.utc)
    t_start = time.monotonic()
    r = Runner(a)
    r.started_str = started.strftime("%Y-%m-%d") + (", quick run" if a.quick else "")
    r.probe()
    r.logf = open(a.log or os.path.join(a.out, "log.txt"), "w")
    for w, info in r.worlds.items():
        if "missing" in info:
            log(f"report: {w}: {info['missing']}")
    r.scen_rows, r.scen_params, r.live_rows, r.m1_results, r.cg, r.hp = {}, {}, [], {}, {}, {}
    r.run_scenarios()
    if "L" in parts:
        r.run_live_series()
    if "M1" in parts:
        r.run_m1()
    if "callgrind" in parts:
        r.run_callgrind()
        r.run_hp_callgrind()
    elapsed = time.monotonic() - t_start

    written = charts(r, a.out)
    md = ["# weft peer report", ""]
    md += machine_header(r, started, elapsed)
    md += ["", METHOD, ""]
    for name in r.scen_rows:
        md += scenario_tables(r, name)
    if r.live_rows:
        md += live_table(r)
    if "M1" in parts:
        md += m1_table(r)
    if "callgrind" in parts:
        md += callgrind_table(r)
    md += issue10_targets(r)
    md += targets_table(r)
    hp_md, hp_rows = hp_targets(r)
    md += hp_md
    if written:
        md += ["## Charts", ""] + [f"![{os.path.basename(p)}]({os.path.basename(p)})" for p in written] + [""]
    notes = list(r.notes)
    if "info" not in r.worlds.get("go", {}):
        notes.append(f"Go: not available ({r.worlds.get('go', {}).get('missing')}).")
    if "missing" in r.worlds.get("cpp-sharefp", {}):
        notes.append(f"FP env shared rows: {r.worlds['cpp-sharefp']['missing']}.")
    if notes:
        md += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    if r.failures:
        md += ["## Failures", ""] + [f"- {f}" for f in r.failures] + [""]
    text = "\n".join(md)
    with open(os.path.join(a.out, "latest.md"), "w") as f:
        f.write(text)
    with open(os.path.join(a.out, "latest.csv"), "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["section", "row", "label", "world", "candidate", "live", "count", "metric", "rep", "value", "unit"])
        for s in r.samples:
            wr.writerow([s["section"], s["row"], s["label"], s["world"], s["candidate"], s["live"],
                         s.get("count", ""), s["metric"], s["rep"], s["value"], s["unit"]])
    summary = {}
    for s in r.samples:
        k = f"{s['section']}/{s['row']}/{s['metric']}" + (f"/{s['count']}" if "count" in s else "")
        summary.setdefault(k, []).append(s["value"])
    summary = {k: dict(median=statistics.median(v), min=min(v), max=max(v), n=len(v)) for k, v in summary.items()}
    meta = dict(date=started.isoformat(), quick=a.quick, reps=a.reps, elapsed_s=elapsed,
                worlds={w: {k: v for k, v in i.items() if k != "cands"} for w, i in r.worlds.items()},
                scenarios=r.scen_params, notes=notes, failures=r.failures, pin=r.pin, cxx_flags=a.cxx_flags)
    with open(os.path.join(a.out, "latest.json"), "w") as f:
        json.dump(dict(meta=meta, summary=summary, targets=hp_rows, samples=r.samples), f, separators=(",", ":"))
    r.logf.close()
    print(text)
    log(f"report: wrote {a.out}/latest.md, latest.json, latest.csv" + (f" and {len(written)} charts" if written else "")
        + f" in {elapsed / 60:.1f} min")
    if r.failures:
        log(f"report: {len(r.failures)} candidate run(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
