#!/usr/bin/env python3
# check_trace_selftest.py: shows that check_trace.py can fail. It writes a
# small valid weft trace and broken copies of it (overlapping spans, a
# worker without its thread_name, a missing task, ...) to a temporary
# directory, runs the checker on each and expects exit 0 for the valid one
# and exit 1 with the right message for each broken one.
#
#   check_trace_selftest.py [path/to/check_trace.py]

import copy
import json
import os
import subprocess
import sys
import tempfile

CHECKER = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_trace.py")
ARGS = ["--workers", "2", "--expect-task", "main", "--expect-task", "consumer", "--expect", "spawn", "--expect", "wake",
        "--expect", "sleep", "--expect", "steal", "--expect", "timers"]


def valid():
    def x(tid, cat, name, ts, dur, tid_id=None):
        e = {"ph": "X", "pid": 1, "tid": tid, "cat": cat, "name": name, "ts": ts, "dur": dur}
        if tid_id is not None:
            e["args"] = {"id": tid_id}
        return e

    def i(tid, cat, ts, args):
        return {"ph": "i", "s": "t", "pid": 1, "tid": tid, "cat": cat, "name": cat, "ts": ts, "args": args}

    ev = [{"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "weft runtime"}}]
    ev += [{"ph": "M", "pid": 1, "tid": t, "name": "thread_name", "args": {"name": n}}
           for t, n in ((0, "worker 0"), (1, "worker 1"), (2, "other threads"))]
    ev += [
        i(2, "spawn", 1.0, {"id": 1, "task": "main"}),
        x(0, "task", "main", 2.0, 10.0, 1),
        i(0, "spawn", 3.0, {"id": 2, "task": "consumer"}),
        # back to back, as the writer puts a switch: end == next start
        x(0, "task", "consumer", 12.0, 5.125, 2),
        x(0, "sleep", "asleep", 17.125, 100.0),
        i(1, "steal", 4.0, {"victim": 0, "tasks": 1}),
        x(1, "task", "task 3", 4.5, 0.001, 3),
        x(1, "sleep", "asleep", 5.0, 50.0),
        i(1, "timers", 55.0, {"fired": 1}),
        i(1, "wake", 55.5, {"id": 1}),
        x(1, "task", "main", 56.0, 3.0, 1),
    ]
    return {"traceEvents": ev, "displayTimeUnit": "ns", "otherData": {"workers": 2, "dropped": 0}}


def broken():
    """(name, change, text the failure must contain)"""
    def spans(d, tid):
        return [e for e in d["traceEvents"] if e.get("ph") == "X" and e["tid"] == tid]

    def overlap_tasks(d):
        spans(d, 0)[0]["dur"] = 12.0  # main runs 2 us into consumer
    def overlap_sleep(d):
        spans(d, 1)[1]["dur"] = 55.0  # the sleep runs 4 us into main
    def no_worker(d):
        d["traceEvents"] = [e for e in d["traceEvents"] if not (e.get("name") == "thread_name" and e.get("tid") == 1)]
    def no_task(d):
        d["traceEvents"] = [e for e in d["traceEvents"] if e.get("name") != "consumer"]
    def no_id(d):
        del spans(d, 0)[1]["args"]
    def negative_dur(d):
        spans(d, 1)[1]["dur"] = -1
    def no_scope(d):
        del d["traceEvents"][4]["s"]
    def no_steal(d):
        d["traceEvents"] = [e for e in d["traceEvents"] if e.get("cat") != "steal"]
    def wrong_workers(d):
        d["otherData"]["workers"] = 3
    def bad_tid(d):
        d["traceEvents"][4]["tid"] = 7
    def no_events(d):
        d["traceEvents"] = "none"
    return [
        ("overlapping task spans", overlap_tasks, "spans overlap on tid 0"),
        ("a sleep overlapping a task", overlap_sleep, "spans overlap on tid 1"),
        ("a worker without thread_name", no_worker, "no thread_name metadata for worker 1"),
        ("a missing task", no_task, "no task span named 'consumer'"),
        ("a task span without args.id", no_id, "without an integer args.id"),
        ("a negative dur", negative_dur, "dur >= 0"),
        ("an instant without s", no_scope, "an instant needs s"),
        ("no steal event", no_steal, "no steal event"),
        ("otherData.workers wrong", wrong_workers, "otherData.workers is 3"),
        ("a tid past the other-threads lane", bad_tid, "tid 7"),
        ("traceEvents not a list", no_events, "traceEvents is not a list"),
    ]


def run(path):
    r = subprocess.run([sys.executable, CHECKER, "--trace", path, *ARGS], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def main():
    passed = failed = 0

    def report(ok, what, out):
        nonlocal passed, failed
        print(f"{'ok' if ok else 'FAIL'}: {what}")
        if not ok:
            print("  " + out.strip().replace("\n", "\n  "))
        passed, failed = passed + ok, failed + (not ok)

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        with open(path, "w") as f:
            json.dump(valid(), f)
        rc, out = run(path)
        report(rc == 0, "the valid trace passes", out)
        d = valid()
        d["traceEvents"][5]["dur"] = 10.5  # main runs 0.5 us into consumer: within the tolerance
        with open(path, "w") as f:
            json.dump(d, f)
        rc, out = run(path)
        report(rc == 0, "an overlap under 1 us passes", out)
        for what, change, expect in broken():
            d = copy.deepcopy(valid())
            change(d)
            with open(path, "w") as f:
                json.dump(d, f)
            rc, out = run(path)
            report(rc == 1 and expect in out, f"{what} fails ({expect})", out)
        with open(path, "w") as f:
            f.write(json.dumps(valid())[:200])
        rc, out = run(path)
        report(rc == 1 and "not valid JSON" in out, "a truncated file fails", out)
        rc, out = run(os.path.join(tmp, "missing.json"))
        report(rc == 1 and "No such file" in out, "a missing file fails", out)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
