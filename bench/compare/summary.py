#!/usr/bin/env python3
"""bench/compare/summary.py: the short "how weft compares" table and the index
of a results directory, both generated from the reports' JSON files.

scripts/bench runs it after the reports. It reads RESULTS/latest.json (the
coroutine report, bench/compare/report.py), runtime.json and async.json
(bench/compare/runtime_report.py), r8.json (bench/compare/io/r8.py),
http.json (bench/compare/io/http.py, index only), r9.json
(bench/compare/io/r9.py, index only) and scale.json
(bench/compare/scale_report.py), whichever exist, and writes
RESULTS/README.md: the summary table, issues 26's, 42's and 43's scale targets (from
scale.json, when there), then one line per report with its date and a link. With --readme FILE it also puts the
summary table into FILE between the markers

    <!-- bench-summary: begin -->  ...  <!-- bench-summary: end -->

and with --check FILE it only checks that FILE holds exactly what it would
write there (the test suite runs this, so the README's table is never edited
by hand). Every cell is the median with [min, max] over the report's
repetitions; ratios are weft's median over the peer's.
"""

import argparse
import json
import os
import sys

from report import fmt  # the peer report's number format (bench/compare/report.py)

BEGIN = "<!-- bench-summary: begin -->"
END = "<!-- bench-summary: end -->"


def load(results, name):
    path = os.path.join(results, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def cell(stat):
    """median [min, max] of a {"median", "min", "max"} dict, or n/a."""
    if not stat:
        return "n/a"
    if stat.get("min") is None or stat["min"] == stat["max"]:
        return fmt(stat["median"])  # one sample, or a figure reported without its spread
    return f"{fmt(stat['median'])} [{fmt(stat['min'])}, {fmt(stat['max'])}]"


def ratio(weft, peer):
    if not weft or not peer or not peer.get("median"):
        return "n/a"
    return f"{weft['median'] / peer['median']:.2f}"


def dig(d, *keys):
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def rows(results):
    """(scenario, unit, weft, go, go ratio, boost peer, boost, boost ratio) rows."""
    out = []
    latest = load(results, "latest.json")
    if latest:
        s = latest["summary"]
        w = s.get("S1/weft-fiber/switch")
        out.append(("context switch, one coroutine, hot (S1; Go: a Gosched)", "ns",
                     w, s.get("S1/go-gosched/switch"), "Boost.Context fiber", s.get("S1/fiber-protected/switch")))
        n = "1000000"
        w = s.get(f"M1/weft-pooled/m1_bytes_per_coroutine/{n}")
        out.append(("memory per suspended coroutine, 1M (M1)", "bytes",
                     w, s.get(f"M1/go/m1_bytes_per_coroutine/{n}"), "Boost.Context fiber, pooled",
                     s.get(f"M1/fiber-pooled/m1_bytes_per_coroutine/{n}")))
        w = s.get(f"M1/weft-copy/m1_bytes_per_coroutine/{n}")
        out.append(("the same, weft copy-stack (M1)", "bytes",
                     w, s.get(f"M1/go/m1_bytes_per_coroutine/{n}"), "Boost.Context fiber, pooled",
                     s.get(f"M1/fiber-pooled/m1_bytes_per_coroutine/{n}")))
    runtime = load(results, "runtime.json")
    if runtime:
        s = runtime["summary"]
        specs = [("r1", "ms", "skynet, 1,111,111 tasks, 2 workers (R1)", "wall ms"),
                 ("r2", "ns", "spawn + join, 2 workers (R2)", "ns per task"),
                 ("r3", "ns", "yield ring, 2 workers (R3)", "ns per yield"),
                 ("r4", "ns", "unbuffered channel ping-pong, 2 workers (R4)", "ns per message"),
                 ("r6", "ns", "mutex, 1,000 tasks, 2 workers (R6)", "ns per lock"),
                 ("r7", "cpu_us", "1M sleeping tasks, 2 workers (R7)", "CPU us per task")]
        # The other peer is Tokio where the report has it (the reference
        # work-stealing runtime), else Boost.Fiber.
        has_tokio = any(dig(s, key, "tokio", "W=2", metric) for key, metric, _, _ in specs if key in s)
        peer, peer_name = ("tokio", "Tokio") if has_tokio else ("boost.fiber", "Boost.Fiber")
        for key, metric, what, unit in specs:
            if key not in s:
                continue
            w = dig(s, key, "weft", "W=2", metric)
            out.append((what, unit, w, dig(s, key, "go", "W=2", metric), peer_name,
                        dig(s, key, peer, "W=2", metric)))
    scale = load(results, "scale.json")
    if scale:
        s = scale["summary"]
        # Issue 26's two headline figures: what an idle task holds, what a
        # timer wake costs (the other peer is Tokio here, the one to beat).
        out.append(("memory per idle task, 1M blocked on an event (SC1)", "RSS bytes",
                     dig(s, "sc1", "weft", "W=1", "rsspt"), dig(s, "sc1", "go", "W=1", "rsspt"), "Tokio",
                     dig(s, "sc1", "tokio", "W=1", "rsspt")))
        out.append(("timer wake, 100,000 tasks sleeping 10 ms, 1 worker (SC5)", "CPU ns per wake",
                     dig(s, "sc5", "weft", "W=1", "cpuw"), dig(s, "sc5", "go", "W=1", "cpuw"), "Tokio",
                     dig(s, "sc5", "tokio", "W=1", "cpuw")))
    r8 = load(results, "r8.json")
    if r8:
        s = r8["summary"]

        def stat(key, field, scale=1.0):
            e = s.get(key)
            if not e or field not in e:
                return None
            lo, hi = e.get(field + "_min"), e.get(field + "_max")
            return {"median": e[field] * scale, "min": None if lo is None else lo * scale,
                    "max": None if hi is None else hi * scale}
        # CPU per request, not requests per second: lower is better like
        # every other row, and the load generator, not the server, may set
        # the pace of requests (r8.md shows both).
        base = "1core/1000/64"
        us = 1e6 / 100_000  # the report's CPU seconds per 100,000 requests, as us per request
        out.append(("echo server, 1,000 connections, 1 core (R8)", "server CPU us per request",
                    stat(f"{base}/weft", "cpu_per_100k", us), stat(f"{base}/go", "cpu_per_100k", us),
                    "Boost.Asio", stat(f"{base}/asio", "cpu_per_100k", us)))
    return out


def table(results):
    lines = ["| scenario | unit | weft | Go | weft/Go | other peer | peer | weft/peer |",
             "|---|---|---|---|---|---|---|---|"]
    for what, unit, w, go, peer_name, peer in rows(results):
        lines.append(f"| {what} | {unit} | {cell(w)} | {cell(go)} | {ratio(w, go)} | "
                     f"{peer_name} | {cell(peer)} | {ratio(w, peer)} |")
    return lines


def dates(results):
    out = []
    for name, title in [("latest", "coroutines and stacks: S1-S3 switch, create, destroy; M1 memory; "
                         "instruction counts"),
                        ("runtime", "the runtime: R1-R7 against Go and Boost.Fiber, idle CPU"),
                        ("async", "C++20 tasks next to stackful ones (A1-A4)"),
                        ("r8", "R8, the echo server against Go, Boost.Asio, Tokio and monoio"),
                        ("http", "the HTTP example server against Go net/http under wrk (informational)"),
                        ("r9", "R9 / R9b, the RESP example server against Go under redis-benchmark "
                         "(redis-server for reference)"),
                        ("scale", "issue 26's scale scenarios SC1-SC8 (idle tasks, timers, deadlines against Go, "
                         "Tokio and Boost.Fiber), issue 42's SH1-SH6 (the doors of idle-stack shrinking) and issue 43's "
                         "SC10-SC11 (timers without a task)")]:
        d = load(results, name + ".json")
        if not d:
            continue
        meta = d.get("meta") or {"quick": d.get("args", {}).get("quick")}  # r8.json keeps it in args
        date = meta.get("date", "")[:16].replace("T", " ")
        kind = "quick run" if meta.get("quick") else "full run"
        when = f"{date} UTC, {kind}" if date else kind
        out.append(f"- [{name}.md]({name}.md): {title} ({when})")
    return out


def scale_targets(results):
    """Issues 26's, 42's and 43's targets table (SC1-SC8, SH1-SH6, SC10-SC11) from scale.json, or []."""
    d = load(results, "scale.json")
    if not d or not d.get("targets"):
        return []
    meta = d.get("meta", {})
    date = meta.get("date", "")[:16].replace("T", " ")
    kind = "quick run: small counts, one repetition, the verdicts say nothing" if meta.get("quick") else \
        f"full run, {meta.get('reps')} repetitions"
    lines = ["## Scale targets (issues 26, 42 and 43)", "",
             f"From [scale.md](scale.md) ({date} UTC, {kind}); measured = weft's median over the peer's.", "",
             "| target | limit | measured | met |", "|---|---|---|---|"]
    for t in d["targets"]:
        met = "n/a" if t.get("met") is None else ("met" if t["met"] else "NOT met")
        lines.append(f"| {t.get('target')} | {t.get('limit')} | {t.get('measured')} | {met} |")
    return lines + [""]


def hp_targets(results):
    """Issue 27's targets (HP1-HP8) from runtime.json and latest.json, or []."""
    def verdict(t):
        return "n/a" if t.get("met") is None else ("met" if t["met"] else "NOT met")

    rows, kinds = [], []
    for name, key, row in (
            ("runtime", "hp_targets", lambda t: f"| {t['id']} {t['what']}, W={t['workers']} | <= {t['limit']}x best "
                                                f"peer | {t.get('measured') or t.get('reason') or ''} | {verdict(t)} |"),
            ("latest", "targets", lambda t: f"| {t.get('target')} | {t.get('limit')} | {t.get('measured')} | "
                                            f"{verdict(t)} |")):
        d = load(results, f"{name}.json")
        if not d or not d.get(key):
            continue
        meta = d.get("meta", {})
        kinds.append(f"[{name}.md]({name}.md) ({meta.get('date', '')[:16].replace('T', ' ')} UTC, "
                     + ("quick run" if meta.get("quick") else "full run") + ")")
        rows += [row(t) for t in d[key]]
    if not rows:
        return []
    return ["## Hot-path targets (issue 27)", "",
            "From " + " and ".join(kinds) + "; a quick run's verdicts say nothing.", "",
            "| target | limit | measured | met |", "|---|---|---|---|", *rows, ""]


def summary_block(results, link):
    return [BEGIN,
            "Medians [min, max] from the `scripts/bench` reports in bench/results, on a 2-core VM; the",
            "ratio is weft's median over the peer's (below 1: weft is faster or smaller).",
            f"[All reports, with their dates and the versions of each peer]({link}).",
            "",
            *table(results),
            END]


def replace_block(text, block):
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"summary.py: no '{BEGIN}' ... '{END}' markers")
    return text[:start] + "\n".join(block) + text[end + len(END):]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", required=True, help="the results directory (bench/results)")
    ap.add_argument("--readme", help="also write the summary into this file between the markers")
    ap.add_argument("--check", help="only check that this file's summary is what would be written")
    a = ap.parse_args()
    target = a.readme or a.check
    if target:
        link = os.path.relpath(os.path.join(a.results, "README.md"), os.path.dirname(os.path.abspath(target)))
        with open(target) as f:
            text = f.read()
        new = replace_block(text, summary_block(a.results, link))
        if a.check:
            if new != text:
                print(f"summary.py: {target}'s bench summary differs from what {a.results}/*.json gives; "
                      f"run bench/compare/summary.py --results {a.results} --readme {target}", file=sys.stderr)
                return 1
            print(f"{target}: bench summary matches {a.results}")
            return 0
        with open(target, "w") as f:
            f.write(new)
    index = ["# weft benchmark results",
             "",
             "Generated by `scripts/bench` (bench/compare/summary.py); do not edit by hand.",
             "[bench/README.md](../README.md) says how each scenario is measured and what could favour",
             "any candidate.",
             "",
             "## How weft compares",
             "",
             *summary_block(a.results, "README.md")[1:-1],
             "",
             *scale_targets(a.results),
             *hp_targets(a.results),
             "## The reports",
             "",
             *dates(a.results),
             ""]
    with open(os.path.join(a.results, "README.md"), "w") as f:
        f.write("\n".join(index))
    return 0


if __name__ == "__main__":
    sys.exit(main())
