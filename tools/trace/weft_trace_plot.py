#!/usr/bin/env python3
# weft_trace_plot.py: draws a weft task trace (the trace-event JSON file a
# runtime writes when WEFT_TRACE=path or runtime_options::trace_path is set;
# docs/debugging.md) as a per-worker timeline image, offline.
#
#   weft_trace_plot.py TRACE.json OUT.png|OUT.svg [--from MS --to MS] [--title T]
#
# One lane per worker (and one for "other threads" when spawns or wakes
# came from threads that are not workers). Task runs are bars coloured by
# task name, time asleep light grey bars, spawn / wake / steal / timers
# instants small markers above the bars. The x axis is milliseconds from
# the runtime's start; --from / --to cut a window out of it.
#
# Needs matplotlib (Debian: apt-get install python3-matplotlib; then run it
# with /usr/bin/python3 if another python3 comes first in PATH). Exit codes:
# 0 drawn, 2 bad arguments or an unreadable trace, 3 matplotlib missing.

import argparse
import json
import re
import sys
import zlib
from collections import Counter, defaultdict

LEGEND_MAX = 12
UNNAMED = "(unnamed tasks)"
OTHER = "(other names)"

# marker, colour, label per instant category
INSTANTS = {
    "spawn": ("^", "#107010", "spawn"),
    "wake": ("v", "#1040a0", "wake"),
    "steal": ("X", "#c00000", "steal"),
    "timers": ("d", "#000000", "timers fired"),
}
SLEEP_COLOUR = "#d9d9d9"
OTHER_COLOUR = "#8c8c8c"
UNNAMED_COLOUR = "#b3b3cc"
# 20 colours far enough apart, none of them near the sleep grey
PALETTE = [
    "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#e15759", "#76b7b2", "#edc948",
    "#9c755f", "#ff9da7", "#17becf", "#bcbd22", "#8c564b", "#393b79", "#637939",
    "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d", "#31a354",
]


def darker(colour, f=0.65):
    r, g, b = (int(colour[k:k + 2], 16) for k in (1, 3, 5))
    return f"#{int(r * f):02x}{int(g * f):02x}{int(b * f):02x}"


class TraceError(Exception):
    pass


def fail(msg, code=2):
    print(f"weft_trace_plot: {msg}", file=sys.stderr)
    sys.exit(code)


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file")
    except OSError as e:
        raise TraceError(f"{path}: {e.strerror}")
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise TraceError(f"{path}: not valid JSON ({e}); a runtime that was killed before it stopped writes no complete trace")
    # The trace-event format also allows a bare array of events.
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise TraceError(f"{path}: no traceEvents list: not a trace-event file")
    other = doc.get("otherData", {}) if isinstance(doc, dict) else {}
    return events, other if isinstance(other, dict) else {}


def number(e, key):
    v = e.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def is_unnamed(e):
    # The writer names an unnamed task "task <id>".
    args = e.get("args") if isinstance(e.get("args"), dict) else {}
    return bool(re.fullmatch(r"task \d+", e["name"])) and (args.get("id") is None or e["name"] == f"task {args['id']}")


def collect(events):
    spans = []      # (tid, ts, dur, task name or None for sleep, unnamed)
    instants = []   # (tid, ts, cat)
    thread_names = {}
    for e in events:
        if not isinstance(e, dict):
            continue
        ph, tid = e.get("ph"), e.get("tid")
        if ph == "M" and e.get("name") == "thread_name" and isinstance(tid, int):
            args = e.get("args") if isinstance(e.get("args"), dict) else {}
            thread_names[tid] = str(args.get("name", f"thread {tid}"))
            continue
        if not isinstance(tid, int):
            continue
        ts = number(e, "ts")
        if ts is None:
            continue
        cat = e.get("cat")
        if ph == "X" and cat in ("task", "sleep"):
            dur = number(e, "dur")
            if dur is not None and dur >= 0:
                name = str(e.get("name", "")) if cat == "task" else None
                spans.append((tid, ts, dur, name, cat == "task" and is_unnamed(e)))
        elif ph in ("i", "I") and cat in INSTANTS:
            instants.append((tid, ts, cat))
    return spans, instants, thread_names


def legend_labels(spans):
    """Gives each span its legend label: its name, except that unnamed tasks
    share one label when there are more names than the legend shows."""
    lump = len({s[3] for s in spans if s[3] is not None}) > LEGEND_MAX
    return [(tid, ts, dur, UNNAMED if lump and unnamed else name) for tid, ts, dur, name, unnamed in spans]


def choose_colours(spans):
    """Returns {label: colour} for the legend's labels, the rest map to OTHER."""
    count, total = Counter(), Counter()
    for _, _, dur, label in spans:
        if label is not None:
            count[label] += 1
            total[label] += dur
    ranked = sorted(count, key=lambda n: (-count[n], -total[n], n))
    room = LEGEND_MAX if len(ranked) <= LEGEND_MAX else LEGEND_MAX - 1
    colours, used = {}, set()
    for name in ranked[:room]:
        if name == UNNAMED:
            colours[name] = UNNAMED_COLOUR
            continue
        # A hash of the name, not its rank, so a task keeps its colour from
        # one trace to the next; the next free slot settles collisions.
        i = zlib.crc32(name.encode()) % len(PALETTE)
        while PALETTE[i] in used and len(used) < len(PALETTE):
            i = (i + 1) % len(PALETTE)
        colours[name] = PALETTE[i]
        used.add(PALETTE[i])
    return colours, ranked[:room], len(ranked) > room


def main(argv=None):
    ap = argparse.ArgumentParser(description="Draw a weft task trace as a per-worker timeline image.")
    ap.add_argument("trace", help="the trace-event JSON file a weft runtime wrote (WEFT_TRACE)")
    ap.add_argument("out", help="the image to write: .png or .svg")
    ap.add_argument("--from", dest="t_from", type=float, metavar="MS", help="start of the window, ms")
    ap.add_argument("--to", dest="t_to", type=float, metavar="MS", help="end of the window, ms")
    ap.add_argument("--title", help="the plot's title (default: the trace file's name)")
    a = ap.parse_args(argv)

    fmt = a.out.rsplit(".", 1)[-1].lower() if "." in a.out else ""
    if fmt not in ("png", "svg"):
        fail(f"{a.out}: the output must end in .png or .svg")
    if a.t_from is not None and a.t_to is not None and a.t_to <= a.t_from:
        fail("--to must be later than --from")

    try:
        events, other = load(a.trace)
    except TraceError as e:
        fail(str(e))
    spans, instants, thread_names = collect(events)
    if not spans and not instants:
        fail(f"{a.trace}: no weft events (task, sleep, spawn, wake, steal, timers) in {len(events)} event(s)")

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.lines import Line2D
        from matplotlib.patches import Patch
    except ImportError:
        fail(f"needs matplotlib, which {sys.executable} cannot import "
             "(Debian: apt-get install python3-matplotlib, then run with /usr/bin/python3)", 3)


    lo = a.t_from * 1000 if a.t_from is not None else None
    hi = a.t_to * 1000 if a.t_to is not None else None
    if lo is not None or hi is not None:
        lo_ = lo if lo is not None else float("-inf")
        hi_ = hi if hi is not None else float("inf")
        spans = [s for s in spans if s[1] + s[2] >= lo_ and s[1] <= hi_]
        instants = [i for i in instants if lo_ <= i[1] <= hi_]
        if not spans and not instants:
            fail(f"{a.trace}: no events between {a.t_from} and {a.t_to} ms")

    # Lanes: every worker, busy or not; any other thread only with events in the window.
    workers = other.get("workers")
    if not isinstance(workers, int) or workers < 0:
        workers = 1 + max([t for t, n in thread_names.items() if n.startswith("worker")] or [-1])
    busy = {s[0] for s in spans} | {i[0] for i in instants}
    tids = sorted(set(range(workers)) | busy)

    def lane_name(tid):
        if tid < workers:
            return f"worker {tid}"
        return thread_names.get(tid, "other threads")

    lane = {tid: k for k, tid in enumerate(tids)}

    spans = legend_labels(spans)
    colours, legend_names, has_other = choose_colours(spans)

    # Tall enough for the lanes and for both legends stacked beside them
    # (about 0.2 in a row, titles included).
    legend_rows = len(legend_names) + has_other + 1 + len({i[2] for i in instants}) + 3
    fig, ax = plt.subplots(figsize=(13, max(1.6 + 0.55 * len(tids), 1.4 + 0.2 * legend_rows, 3.2)))
    # Thin darker edges keep sub-pixel spans visible and part runs of one
    # task that follow each other.
    bars = defaultdict(list)  # (lane, colour) -> [(x, width)] in ms
    for tid, ts, dur, label in spans:
        colour = SLEEP_COLOUR if label is None else colours.get(label, OTHER_COLOUR)
        bars[(lane[tid], colour)].append((ts / 1000, dur / 1000))
    for (y, colour), xs in bars.items():
        h = 0.3 if colour == SLEEP_COLOUR else 0.6
        ax.broken_barh(xs, (y - h / 2, h), facecolors=colour, edgecolors=darker(colour), linewidth=0.4,
                       zorder=1 if colour == SLEEP_COLOUR else 2)

    marks = defaultdict(lambda: ([], []))
    for tid, ts, cat in instants:
        xs, ys = marks[cat]
        xs.append(ts / 1000)
        # Above the bars (the y axis is inverted); on the line in a lane of
        # instants only.
        ys.append(lane[tid] - (0.42 if tid < workers else 0))
    for cat, (xs, ys) in marks.items():
        m, c, _ = INSTANTS[cat]
        ax.scatter(xs, ys, marker=m, s=14, c=c, linewidths=0, zorder=3)

    ax.set_yticks(range(len(tids)), [lane_name(t) for t in tids])
    ax.set_ylim(len(tids) - 0.5, -0.65)  # worker 0 on top
    ax.set_xlabel("time since the runtime started (ms)")
    ax.grid(axis="x", color="#eeeeee", zorder=0)
    ax.set_axisbelow(True)
    if lo is not None or hi is not None:
        ax.set_xlim(left=a.t_from, right=a.t_to)
    title = a.title if a.title is not None else a.trace.rsplit("/", 1)[-1]
    dropped = other.get("dropped")
    if isinstance(dropped, int) and dropped > 0:
        title += f"  ({dropped} events dropped)"
    ax.set_title(title)

    task_handles = [Patch(color=colours[n], label=n) for n in legend_names]
    if has_other:
        task_handles.append(Patch(color=OTHER_COLOUR, label=OTHER))
    task_handles.append(Patch(color=SLEEP_COLOUR, label="asleep"))
    event_handles = [Line2D([], [], linestyle="", marker=INSTANTS[c][0], color=INSTANTS[c][1], label=INSTANTS[c][2])
                     for c in INSTANTS if c in marks]
    legends = [ax.legend(handles=task_handles, title="tasks", loc="upper left", bbox_to_anchor=(1.01, 1.0),
                         fontsize="small", frameon=False)]
    if event_handles:
        ax.add_artist(legends[0])
        legends.append(ax.legend(handles=event_handles, title="events", loc="lower left", bbox_to_anchor=(1.01, 0.0),
                                 fontsize="small", frameon=False))

    try:
        fig.savefig(a.out, format=fmt, dpi=110, bbox_inches="tight", bbox_extra_artists=legends)
    except OSError as e:
        fail(f"{a.out}: {e.strerror}")
    print(f"{a.out}: {len(spans)} spans, {len(instants)} instants on {len(tids)} lane(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
