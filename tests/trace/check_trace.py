#!/usr/bin/env python3
# check_trace.py: checks a task trace a weft runtime wrote (WEFT_TRACE;
# docs/debugging.md) against the trace-event format weft promises, for a
# CTest test:
#
#   check_trace.py --trace FILE --workers N --expect-task NAME [--expect-task NAME ...]
#                  [--expect CAT ...] [--plot tools/trace/weft_trace_plot.py --out PNG [--python PY]]
#
# It prints each check it passed and stops at the first failure with exit 1.
# With --plot it also runs the plot script on the trace (under --python,
# default this interpreter, which then needs matplotlib) and checks that a
# PNG came out.

import argparse
import json
import os
import re
import subprocess
import sys
from collections import defaultdict

CATEGORIES = ("task", "sleep", "spawn", "wake", "steal", "timers")
# args each instant category carries
INSTANT_ARGS = {"spawn": ("id", "task"), "wake": ("id",), "steal": ("victim", "tasks"), "timers": ("fired",)}
TOLERANCE_US = 1.0  # covers the 1 ns rounding of ts and dur, and ts + dur summed in binary floating point
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class Failed(Exception):
    pass


def ok(msg):
    print(f"ok: {msg}")


def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def describe(i, e):
    return f"event #{i} {json.dumps(e, separators=(',', ':'))[:200]}"


def check_events(events, workers):
    """Checks each event's keys; returns the spans per tid, task names, categories seen."""
    spans = defaultdict(list)  # tid -> [(ts, end, index)]
    task_names = set()
    cats = set()
    thread_names = {}
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            raise Failed(f"event #{i} is not an object")
        ph = e.get("ph")
        if ph == "M":
            if not isinstance(e.get("name"), str) or not isinstance(e.get("args"), dict):
                raise Failed(f"{describe(i, e)}: metadata without name or args")
            if e["name"] == "thread_name":
                if not isinstance(e.get("tid"), int) or not isinstance(e["args"].get("name"), str):
                    raise Failed(f"{describe(i, e)}: thread_name without an integer tid and args.name")
                thread_names[e["tid"]] = e["args"]["name"]
            continue
        if ph not in ("X", "i"):
            raise Failed(f"{describe(i, e)}: phase {ph!r}; a weft trace has only M, X and i")
        for key in ("pid", "tid", "ts"):
            if not is_num(e.get(key)):
                raise Failed(f"{describe(i, e)}: no numeric {key}")
        if not isinstance(e.get("name"), str) or not e["name"]:
            raise Failed(f"{describe(i, e)}: no name")
        tid, ts, cat = e["tid"], e["ts"], e.get("cat")
        if not isinstance(tid, int) or not 0 <= tid <= workers:
            raise Failed(f"{describe(i, e)}: tid {tid} is neither a worker (0..{workers - 1}) nor other threads ({workers})")
        if ts < 0:
            raise Failed(f"{describe(i, e)}: ts before the runtime's start")
        if cat not in CATEGORIES:
            raise Failed(f"{describe(i, e)}: category {cat!r}, not one of {', '.join(CATEGORIES)}")
        cats.add(cat)
        args = e.get("args", {})
        if not isinstance(args, dict):
            raise Failed(f"{describe(i, e)}: args is not an object")
        if ph == "X":
            if cat not in ("task", "sleep"):
                raise Failed(f"{describe(i, e)}: a span of category {cat!r}; spans are task or sleep")
            if not is_num(e.get("dur")) or e["dur"] < 0:
                raise Failed(f"{describe(i, e)}: a span needs dur >= 0")
            if cat == "task":
                if not isinstance(args.get("id"), int):
                    raise Failed(f"{describe(i, e)}: a task span without an integer args.id")
                task_names.add(e["name"])
            spans[tid].append((ts, ts + e["dur"], i))
        else:
            if e.get("s") not in ("t", "p", "g"):
                raise Failed(f"{describe(i, e)}: an instant needs s (scope) t, p or g")
            if cat not in INSTANT_ARGS:
                raise Failed(f"{describe(i, e)}: an instant of category {cat!r}")
            for key in INSTANT_ARGS[cat]:
                if key not in args:
                    raise Failed(f"{describe(i, e)}: a {cat} instant without args.{key}")
    return spans, task_names, cats, thread_names


def check_overlaps(spans, events):
    for tid, ss in sorted(spans.items()):
        ss.sort()
        prev = None  # the span that ends last so far
        for s in ss:
            if prev is not None and s[0] < prev[1] - TOLERANCE_US:
                raise Failed(f"spans overlap on tid {tid} by {prev[1] - s[0]:.3f} us:\n  {describe(prev[2], events[prev[2]])}"
                             f"\n  {describe(s[2], events[s[2]])}")
            if prev is None or s[1] > prev[1]:
                prev = s
    ok(f"no task or sleep spans overlap on one thread (tolerance {TOLERANCE_US:g} us): "
       + ", ".join(f"tid {t}: {len(ss)}" for t, ss in sorted(spans.items())))


def check_plot(a):
    out = a.out
    if os.path.exists(out):
        os.remove(out)
    cmd = [a.python, a.plot, a.trace, out, "--title", os.path.basename(a.trace)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise Failed(f"plot script exited {r.returncode}: {' '.join(cmd)}\n{r.stdout}{r.stderr}".rstrip())
    if not os.path.isfile(out) or os.path.getsize(out) == 0:
        raise Failed(f"plot script wrote no image to {out}")
    with open(out, "rb") as f:
        if f.read(8) != PNG_SIGNATURE:
            raise Failed(f"{out} is not a PNG file")
    ok(f"plot script drew {out} ({os.path.getsize(out)} bytes)")


def run(a):
    try:
        with open(a.trace, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise Failed(f"{a.trace}: {e.strerror}")
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise Failed(f"{a.trace}: not valid JSON: {e}")
    if not isinstance(doc, dict):
        raise Failed(f"{a.trace}: the top level is not an object")
    ok(f"{a.trace} parses as JSON")
    events = doc.get("traceEvents")
    if not isinstance(events, list):
        raise Failed("traceEvents is not a list")
    ok(f"traceEvents is a list of {len(events)} events")

    spans, task_names, cats, thread_names = check_events(events, a.workers)
    ok("every event has the keys its phase and category need")

    for w in range(a.workers):
        if w not in thread_names:
            raise Failed(f"no thread_name metadata for worker {w}")
    ok(f"thread_name metadata for workers 0..{a.workers - 1}")

    check_overlaps(spans, events)

    for name in a.expect_task:
        if name not in task_names:
            named = sorted(n for n in task_names if not re.fullmatch(r"task \d+", n))
            shown = ", ".join(named[:20]) or "none"
            if len(named) < len(task_names):
                shown += f"; {len(task_names) - len(named)} unnamed"
            raise Failed(f"no task span named {name!r} (task names: {shown})")
    if a.expect_task:
        ok(f"task spans named {', '.join(a.expect_task)}")

    for cat in a.expect:
        if cat not in cats:
            raise Failed(f"no {cat} event (categories seen: {', '.join(sorted(cats)) or 'none'})")
    if a.expect:
        ok(f"at least one event of each of {', '.join(a.expect)}")

    other = doc.get("otherData")
    if not isinstance(other, dict) or other.get("workers") != a.workers:
        got = other.get("workers") if isinstance(other, dict) else None
        raise Failed(f"otherData.workers is {got!r}, expected {a.workers}")
    ok(f"otherData.workers == {a.workers}")
    dropped = other.get("dropped")
    if not isinstance(dropped, int) or dropped < 0:
        raise Failed(f"otherData.dropped is {dropped!r}, expected a count")
    print(f"note: {dropped} events dropped")

    if a.plot:
        check_plot(a)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Check a weft task trace file.")
    ap.add_argument("--trace", required=True, help="the trace-event JSON file")
    ap.add_argument("--workers", required=True, type=int, help="the runtime's worker count")
    ap.add_argument("--expect-task", action="append", default=[], metavar="NAME", help="a task span that must appear")
    ap.add_argument("--expect", action="append", default=[], choices=CATEGORIES, metavar="CAT",
                    help=f"a category that must appear at least once ({', '.join(CATEGORIES)})")
    ap.add_argument("--plot", metavar="SCRIPT", help="weft_trace_plot.py, to run on the trace")
    ap.add_argument("--out", metavar="PNG", help="the image --plot writes")
    ap.add_argument("--python", default=sys.executable, help="the interpreter for --plot (default: this one)")
    a = ap.parse_args(argv)
    if a.plot and not a.out:
        ap.error("--plot needs --out")
    if a.workers < 1:
        ap.error("--workers must be at least 1")
    try:
        run(a)
    except Failed as e:
        print(f"FAILED: {e}")
        return 1
    print("trace OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
