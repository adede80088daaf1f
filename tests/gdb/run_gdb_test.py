#!/usr/bin/env python3
# run_gdb_test.py: the gdb tests (tests/gdb/CMakeLists.txt). Runs gdb in batch
# mode on weft_gdb_target (tests/gdb/gdb_target.cpp) stopped at
# weft_gdb_stop_here(), live or from a core file written there, runs
# `weft list` and `weft bt all`, and checks the listed fibers and the
# function names of each backtrace, in order.
#
# With --qemu (the AArch64 cross build: --qemu "qemu-aarch64 -L SYSROOT",
# --gdb gdb-multiarch) the target runs under qemu-aarch64: live through
# qemu's gdb stub (-g PORT, `target remote`), and the core file is the one
# qemu-user writes when the target aborts at the stop (WEFT_GDB_ABORT=1).
#
# Usage: run_gdb_test.py --mode live|core --gdb GDB --script weft_gdb.py
#                        --target weft_gdb_target --workdir DIR
#                        [--strip-debug [--objcopy OBJCOPY]] [--qemu "QEMU ARGS..."]
import argparse
import glob
import os
import re
import resource
import shlex
import socket
import subprocess
import sys
import time

# name -> (kind, state, task state or None, functions expected in its
# backtrace, innermost first; each must appear after the previous one)
EXPECTED = {
    "alpha": ("coroutine", "suspended", None, ["alpha_inner", "alpha_middle", "alpha_outer"]),
    "beta": ("fiber", "suspended", None, ["beta_inner", "beta_outer"]),
    "delta": ("coroutine", "created", None, None),
    "painted": ("coroutine", "suspended", None, ["painted_body"]),
    "gamma": ("task", "suspended", "waiting", ["gamma_inner", "gamma_outer"]),
    "epsilon": ("task", "suspended", "waiting", ["epsilon_inner", "epsilon_outer"]),
}
# Tasks shrunk at the stop: live, `weft bt` writes their frames back and
# unwinds them; a core file cannot be written, so it must say why instead.
SHRUNK = {"epsilon"}
# Frames that must not appear in a fiber's backtrace: those of the thread
# that was stopped (the unwinder must start from the saved frame).
FOREIGN = ["weft_gdb_stop_here", "main"]


def run(cmd):
    print("+ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=100)
    print(p.stdout, flush=True)
    return p


def gdb_base(a):
    base = [a.gdb, "-batch", "-nx", "-ex", "set pagination off", "-ex", "set width 0",
            "-ex", "set debuginfod enabled off"]
    if a.sysroot:
        base += ["-ex", "set sysroot " + a.sysroot]
    return base + ["-x", a.script]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_qemu(a, cmds):
    """Live under qemu: the target waits for gdb on a port of qemu's stub."""
    port = free_port()
    qemu = subprocess.Popen(shlex.split(a.qemu) + ["-g", str(port), a.target],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        return run(gdb_base(a) + ["-ex", "file " + a.target, "-ex", "target remote 127.0.0.1:%d" % port,
                                  "-ex", "break weft_gdb_stop_here", "-ex", "continue"] + cmds + ["-ex", "kill"])
    finally:
        qemu.kill()
        qemu.wait()


def qemu_core(a):
    """The core file qemu-user writes when the target aborts at the stop."""
    for f in glob.glob(os.path.join(a.workdir, "qemu_*.core")):
        os.remove(f)
    env = dict(os.environ, WEFT_GDB_ABORT="1")

    def unlimited():
        resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))

    p = subprocess.run(shlex.split(a.qemu) + [a.target], cwd=a.workdir, env=env, preexec_fn=unlimited,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # qemu itself then dies of the same SIGABRT; the host's core of qemu
    # (core_pattern "core") is of no use here.
    for f in glob.glob(os.path.join(a.workdir, "core*")):
        os.remove(f)
    cores = glob.glob(os.path.join(a.workdir, "qemu_*.core"))
    if not cores:
        fail("qemu wrote no core file (exit status %d)" % p.returncode)
    return cores[0]


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


FULL_MARK = "=== weft bt all full ==="
# weft's own frames, which `weft bt` leaves out at both ends unless `full`.
INTERNAL = re.compile(r"^(weft::detail::|weft::context::|weft::this_fiber::|weft_context_)")


def check(out, mode, through_qemu=False):
    if "Traceback" in out or "Python Exception" in out:
        fail("the gdb script raised a Python exception")
    if FULL_MARK not in out:
        fail("gdb did not get to `weft bt all full`")
    out, full = out.split(FULL_MARK, 1)
    if not re.search(r"weft::detail::\w", full):
        fail("`weft bt all full` shows none of weft's own frames: %s" % full)
    if "frames of weft's switch and wait path" not in out:
        fail("`weft bt all` does not say that it left weft's frames out")
    # weft list rows: Id Kind Name State Task Worker Stack Size HighWater
    rows = {}
    for line in out.splitlines():
        m = re.match(r"^(\d+)\s+(fiber|coroutine|task)\s+(\S+)\s+(\S+)\s+(.*)$", line)
        if m:
            rows[m.group(3)] = (m.group(2), m.group(4), m.group(5), int(m.group(1)))
    for name, (kind, state, tstate, _) in EXPECTED.items():
        if name not in rows:
            fail("weft list does not show '%s'" % name)
        r = rows[name]
        if r[0] != kind or r[1] != state:
            fail("'%s' listed as %s %s, expected %s %s" % (name, r[0], r[1], kind, state))
        if tstate and tstate not in r[2]:
            fail("task '%s' listed without task state %s: %s" % (name, tstate, r[2]))
    hw = rows["painted"][2].split()[-1]
    if not hw.isdigit() or int(hw) < 3000:
        fail("painted coroutine's high-water mark is %s, expected >= 3000" % hw)
    # weft bt all: a header per fiber, then its frames.
    sections = re.split(r"^weft (?:fiber|coroutine|task) \d+ '([^']*)' \([^\n]*\):$", out, flags=re.M)
    bts = {sections[i]: sections[i + 1] for i in range(1, len(sections) - 1, 2)}
    for name, (_, _, _, funcs) in EXPECTED.items():
        if name not in bts:
            fail("weft bt all printed nothing for '%s'" % name)
        text = bts[name]
        # A core file cannot be written to; nor, live, can qemu-user's gdb
        # stub write a page the guest made PROT_NONE (a shrunk stack,
        # SHRINK-P1), where ptrace can: in both the tool must say so
        # (the native live run checks the shrunk task's frames).
        if name in SHRUNK and (mode == "core" or through_qemu):
            if "shrunk task" not in text:
                fail("'%s' (shrunk) should say it cannot be unwound here: %s" % (name, text))
            continue
        if funcs is None:
            if "no frames" not in text:
                fail("'%s' (never started) should have no frames: %s" % (name, text))
            continue
        frames = [l for l in text.splitlines() if re.match(r"^#\d+", l)]
        names = []
        for l in frames:
            m = re.search(r"(?:in |^#\d+\s+)([A-Za-z_][\w:<>~]*)\s*\(", l)
            names.append(m.group(1) if m else "")
        pos = 0
        for fn in funcs:
            while pos < len(names) and names[pos] != fn:
                pos += 1
            if pos == len(names):
                fail("backtrace of '%s' lacks %s (in order %s); frames: %s" % (name, fn, funcs, names))
            pos += 1
        for fn in FOREIGN:
            if fn in names:
                fail("backtrace of '%s' shows %s, a frame of the stopped thread" % (name, fn))
        if names and (INTERNAL.match(names[0]) or INTERNAL.match(names[-1])):
            fail("backtrace of '%s' begins or ends with weft's own frames: %s" % (name, names))
    print("OK: %d fibers listed, backtraces as expected" % len(rows))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["live", "core"], required=True)
    ap.add_argument("--gdb", default="gdb")
    ap.add_argument("--script", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--objcopy", default="objcopy")
    ap.add_argument("--qemu", help="run the target under this emulator command (AArch64 cross build)")
    ap.add_argument("--strip-debug", action="store_true",
                    help="run on a copy of the target without any debug info (objcopy --strip-debug): "
                         "libweft's DWARF goes too, so the script can only use weft's exported symbols")
    a = ap.parse_args()
    a.sysroot = None
    if a.qemu:
        q = shlex.split(a.qemu)
        if "-L" in q:
            a.sysroot = q[q.index("-L") + 1]
    if a.strip_debug:
        stripped = os.path.join(a.workdir, "weft_gdb_target.nodebug." + a.mode)
        subprocess.run([a.objcopy, "--strip-debug", a.target, stripped], check=True)
        if subprocess.run(["readelf", "-S", stripped], stdout=subprocess.PIPE, text=True).stdout.find(".debug_info") >= 0:
            fail("objcopy --strip-debug left .debug_info")
        a.target = stripped
    cmds = ["-ex", "weft list", "-ex", "weft bt all", "-ex", "echo " + FULL_MARK + "\\n", "-ex", "weft bt all full"]
    stop = ["-ex", "break weft_gdb_stop_here", "-ex", "run", "-ex", "finish"]
    if a.qemu and a.mode == "live":
        p = run_qemu(a, cmds)
    elif a.qemu:
        core = qemu_core(a)
        p = run(gdb_base(a) + cmds + [a.target, core])
        os.remove(core)
    elif a.mode == "live":
        p = run(gdb_base(a) + stop + cmds + ["-ex", "kill", "--args", a.target])
    else:
        core = os.path.join(a.workdir, "weft_gdb_target.core")
        if os.path.exists(core):
            os.remove(core)
        run(gdb_base(a) + stop + ["-ex", "generate-core-file " + core, "-ex", "kill", "--args", a.target])
        if not os.path.exists(core):
            fail("gdb wrote no core file")
        p = run(gdb_base(a) + cmds + [a.target, core])
        os.remove(core)
    if a.strip_debug:
        os.remove(a.target)
    check(p.stdout, a.mode, through_qemu=bool(a.qemu))


if __name__ == "__main__":
    main()
