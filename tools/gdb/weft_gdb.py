# weft_gdb.py: gdb commands for weft's coroutines (docs/debugging.md).
#
#   weft list            every live fiber / coroutine / task's fiber: id, kind,
#                        name, state, task (id, state, worker), stack range,
#                        high-water mark of a painted stack
#   weft bt ID           the backtrace of suspended fiber ID, without weft's
#                        own frames at either end (the switch and wait path
#                        inside, the task and fiber entry outside)
#   weft bt all          the backtraces of every suspended fiber
#   ... full             (weft bt ID full, weft bt all full) every frame
#
# It works on a live process and on a core file, and on programs built
# without debug info: it calls nothing in the inferior and uses none of
# weft's DWARF types. Everything comes from memory, through three symbols
# weft exports (src/fiber/registry.cpp, src/runtime/debug.cpp):
#   weft_debug_registry     the shard array of the registry of live fibers
#   weft_debug_layout       the offsets of the registry and of a fiber record,
#                           and the switch frame of the target
#   weft_debug_task_layout  the offsets of a task record (absent when the
#                           program runs no tasks)
#
# A backtrace starts from a suspended fiber's saved frame
# (weft/detail/context_frame.hpp): a frame unwinder, installed while the
# command runs, makes the caller of the thread's innermost frame the
# fiber's resume point (pc, sp, frame pointer read from the saved frame);
# gdb's own unwinder does the rest. The thread's registers are not written,
# so this works on core files too. Frame #0 of gdb's output (the thread's
# real innermost frame) is left out and the frames are renumbered.
#
# Load with `source weft_gdb.py`, or let gdb auto-load it (installed next to
# libweft.so as libweft.so.<version>-gdb.py; docs/debugging.md).

import re
import struct

import gdb
import gdb.unwinder

_LAYOUT_MAGIC = 0x5745465444424731  # "WEFTDBG1"
_TASK_MAGIC = 0x5745465454534B31  # "WEFTTSK1"
_FIBER_STATES = ("created", "running", "suspended", "done")
_FLAVOURS = ("fiber", "coroutine", "coroutine")
_TASK_STATES = ("created", "ready", "running", "waiting", "done", "failed", "canceled", "timed_out")
_MAX_FIBERS = 10_000_000


class WeftError(Exception):
    pass


def _symbol_address(name):
    """The address of a global symbol, from the symbol table (no types)."""
    try:
        return int(gdb.parse_and_eval("(unsigned long)&%s" % name))
    except gdb.error:
        return None


def _read(addr, size):
    return gdb.selected_inferior().read_memory(addr, size).tobytes()


def _u64(addr):
    return struct.unpack("<Q", _read(addr, 8))[0]


def _u8(addr):
    return _read(addr, 1)[0]


def _i32(addr):
    return struct.unpack("<i", _read(addr, 4))[0]


def _table(symbol, magic, names):
    addr = _symbol_address(symbol)
    if addr is None:
        return None
    head = struct.unpack("<3Q", _read(addr, 24))
    if head[0] != magic:
        raise WeftError("%s has an unknown magic number 0x%x (not weft's, or a newer weft?)" % (symbol, head[0]))
    count = head[2]
    if count < len(names):
        raise WeftError("%s has %d entries; this script needs %d (an older weft?)" % (symbol, count, len(names)))
    values = struct.unpack("<%dQ" % len(names), _read(addr, 8 * len(names)))
    return dict(zip(names, values))


# The index of each entry is the interface (registry.cpp documents it).
_LAYOUT_NAMES = (
    "magic", "version", "count", "shards", "shard_stride", "shard_head",
    "id", "next", "name_data", "name_size", "state", "flavour", "ctx",
    "stack_base", "stack_size", "painted", "copy", "owner", "arch",
    "frame_size", "switch_gap", "frame_fp", "frame_ret", "paint_byte", "requested_stack",
    "arena", "arena_saved",
)
_TASK_NAMES = ("magic", "version", "count", "id", "state", "worker")


def _layouts():
    layout = _table("weft_debug_layout", _LAYOUT_MAGIC, _LAYOUT_NAMES)
    if layout is None:
        raise WeftError("no weft_debug_layout symbol: the program does not use weft's coroutines, "
                        "or it was stripped of its symbol table")
    registry = _symbol_address("weft_debug_registry")
    if registry is None:
        raise WeftError("no weft_debug_registry symbol")
    return layout, _table("weft_debug_task_layout", _TASK_MAGIC, _TASK_NAMES), registry


class Fiber:
    pass


def _high_water(f, lay):
    """Bytes of the stack ever used (from its top), by scanning the paint."""
    chunk = 4096
    p, top = f.stack_lo, f.stack_hi
    paint = lay["paint_byte"]
    while p < top:
        n = min(chunk, top - p)
        data = _read(p, n)
        for i, b in enumerate(data):
            if b != paint:
                return top - (p + i)
        p += n
    return 0


def fibers():
    """Every fiber in the registry, sorted by id."""
    lay, tlay, registry = _layouts()
    out = []
    seen = set()
    for s in range(lay["shards"]):
        rec = _u64(registry + s * lay["shard_stride"] + lay["shard_head"])
        while rec and rec not in seen and len(seen) < _MAX_FIBERS:
            seen.add(rec)
            f = Fiber()
            f.address = rec
            f.id = _u64(rec + lay["id"])
            size = min(_u64(rec + lay["name_size"]), 256)
            data = _u64(rec + lay["name_data"])
            try:
                f.name = _read(data, size).decode("utf-8", "replace") if size and data else ""
            except gdb.MemoryError:
                f.name = "<unreadable name at 0x%x>" % data
            st = _u8(rec + lay["state"])
            f.state = _FIBER_STATES[st] if st < len(_FIBER_STATES) else "?%d" % st
            fl = _u8(rec + lay["flavour"])
            f.kind = _FLAVOURS[fl] if fl < len(_FLAVOURS) else "?"
            f.ctx = _u64(rec + lay["ctx"])
            f.stack_lo = _u64(rec + lay["stack_base"])
            f.stack_hi = f.stack_lo + _u64(rec + lay["stack_size"])
            f.copy = _u64(rec + lay["copy"]) != 0
            # A shrunk task's frames are in a heap block (docs/runtime.md,
            # "Idle tasks give their stack back"): (block, at, size) or None.
            f.shrunk = None
            arena = _u64(rec + lay["arena"])
            if arena:
                block = _u64(arena + lay["arena_saved"])
                # The block starts with its 16-byte link in the shrink table
                # (block_head, src/runtime/shrink.cpp): the next block, and
                # the fiber with the state in its low two bits (1: shrunk; 0
                # or 2: the stack holds the frames, refused or restored by
                # a fault, SHRINK-P2).
                if block and (_u64(block + 8) & 3) == 1:
                    # The range is [ctx, top of the stack): the stack's top
                    # is a page boundary (docs/runtime.md), so no page size
                    # is needed.
                    f.shrunk = (block + 16, f.ctx, f.stack_hi - f.ctx)
            f.painted = _u8(rec + lay["painted"]) != 0
            f.high_water = None
            if f.painted and not f.copy:
                try:
                    f.high_water = _high_water(f, lay)
                except gdb.MemoryError:
                    pass
            owner = _u64(rec + lay["owner"])
            f.task = None
            if owner and tlay is not None:
                f.kind = "task"
                ts = _u8(owner + tlay["state"])
                f.task = (_u64(owner + tlay["id"]), _TASK_STATES[ts] if ts < len(_TASK_STATES) else "?%d" % ts,
                          _i32(owner + tlay["worker"]))
            out.append(f)
            rec = _u64(rec + lay["next"])
    out.sort(key=lambda f: f.id)
    return out


def _list():
    fs = fibers()
    rows = [("Id", "Kind", "Name", "State", "Task", "Worker", "Stack", "Size", "High water")]
    for f in fs:
        task, worker = "-", "-"
        if f.task:
            task = "%d %s" % (f.task[0], f.task[1])
            worker = str(f.task[2]) if f.task[2] >= 0 else "-"
        stack = "[0x%x, 0x%x)" % (f.stack_lo, f.stack_hi)
        if f.copy:
            stack += " shared"
        hw = "-" if f.high_water is None else str(f.high_water)
        rows.append((str(f.id), f.kind, f.name or "<anonymous>", f.state, task, worker, stack,
                     str(f.stack_hi - f.stack_lo), hw))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        gdb.write("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() + "\n")
    gdb.write("%d fiber(s)\n" % len(fs))


# ---- the unwinder --------------------------------------------------------------------


class _FrameId:
    def __init__(self, sp, pc):
        self.sp = sp
        self.pc = pc


class _SwitchFrameUnwinder(gdb.unwinder.Unwinder):
    """While `regs` is set, the caller of the thread's innermost frame is the
    suspended fiber's resume point: {register name: value} in `regs`."""

    def __init__(self):
        super().__init__("weft-switch-frame")
        self.regs = None
        self.arch = None

    def __call__(self, pending):
        if self.regs is None:
            return None
        level = pending.level() if hasattr(pending, "level") else None
        if level is not None and level != 0:
            return None
        sp_name, pc_name = ("rsp", "rip") if self.arch == 1 else ("sp", "pc")
        sp = pending.read_register(sp_name)
        pc = pending.read_register(pc_name)
        if level is None and int(sp) != self.innermost_sp:
            return None
        # The innermost frame's id gets the fiber's saved stack pointer, not
        # the thread's: gdb stops a backtrace where a caller's frame looks
        # "inner to" (below) its callee's, and the fiber's stack may lie
        # anywhere relative to the thread's.
        info = pending.create_unwind_info(_FrameId(gdb.Value(self.ctx).cast(sp.type), pc))
        for name, value in self.regs.items():
            reg_type = pending.read_register(name).type
            info.add_saved_register(name, gdb.Value(value).cast(reg_type))
        return info


_unwinder = _SwitchFrameUnwinder()
gdb.unwinder.register_unwinder(None, _unwinder, replace=True)


def _resume_registers(f, lay):
    """The registers of f's innermost frame, from its saved switch frame."""
    ctx = f.ctx
    fp = _u64(ctx + lay["frame_fp"])
    pc = _u64(ctx + lay["frame_ret"])
    sp = ctx + lay["frame_size"] + lay["switch_gap"]
    if lay["arch"] == 1:
        return {"rip": pc, "rsp": sp, "rbp": fp}
    if lay["arch"] == 2:
        return {"pc": pc, "sp": sp, "x29": fp, "x30": pc}
    raise WeftError("unknown architecture code %d in weft_debug_layout" % lay["arch"])


_FRAME_LINE = re.compile(r"^#(\d+)(\s+)")
# weft's own frames, which `weft bt` leaves out at both ends of a backtrace
# unless asked for `full`: the switch, the park and the wait machinery at
# the inner end (the last weft frame shown is the API call the program
# made: weft::event::wait_slow, weft::this_task::sleep_for...), the task's
# and fiber's entry at the outer end. Matched on the function's name (an
# optional return type first), after "#N  [0xADDR in ]".
_INTERNAL = re.compile(
    r"^(?:0x[0-9a-f]+ in )?(?:[\w:<>]+ )?"
    r"(?:weft::detail::|weft::context::|weft::this_fiber::|weft::waiter::|weft::io::detail::"
    r"|weft::\(anonymous namespace\)::|weft_context_|std::__invoke|std::invoke)")


def _is_internal(line):
    m = _FRAME_LINE.match(line)
    return bool(m) and bool(_INTERNAL.match(line[m.end():]))


def _trim(lines):
    """Leaves out weft's frames at both ends (a line that is not a frame,
    a wrapped argument list, goes with the frame above it)."""
    frames = []
    for line in lines:
        if _FRAME_LINE.match(line) or not frames:
            frames.append([line])
        else:
            frames[-1].append(line)
    first, last = 0, len(frames)
    while first < last and _is_internal(frames[first][0]):
        first += 1
    while last > first and _is_internal(frames[last - 1][0]):
        last -= 1
    if first == last:  # nothing but weft: show it all
        return lines
    out = []
    if first:
        out.append("   (%d frame%s of weft's switch and wait path; `weft bt ID full` shows them)"
                   % (first, "" if first == 1 else "s"))
    for f in frames[first:last]:
        out.extend(f)
    if last < len(frames):
        out.append("   (%d frame%s of weft's task and fiber entry)" % (len(frames) - last,
                                                                      "" if len(frames) - last == 1 else "s"))
    return out


def _unshrink(f):
    """Put a shrunk task's frames back on its stack, so that gdb can unwind
    them: the kept words of its heap block (SHRINK-Z1, src/runtime/shrink.cpp:
    two base high halves, a 2-bit tag per 8-byte word, four to a byte, then
    the kept words in stack order, 8 bytes whole or 4 as a low half) are
    written where they were (through ptrace, which writes the PROT_NONE
    range as it is); zero words read as zeros already (released pages). The
    task's own restore later writes the same bytes again, so this changes
    nothing it sees; it only makes the pages resident. Returns
    None, or why it could not (a core file cannot be written)."""
    block, at, size = f.shrunk
    words = size // 8
    base_a, base_b = struct.unpack("<II", _read(block, 8))
    n_tags = (words + 3) // 4
    tags = _read(block + 8, n_tags) if n_tags else b""
    pos = block + 8 + n_tags
    inferior = gdb.selected_inferior()
    try:
        for i in range(words):
            t = (tags[i // 4] >> (i % 4 * 2)) & 3
            if t == 0:
                continue
            if t == 3:
                v = _u64(pos)
                pos += 8
            else:
                v = ((base_a if t == 1 else base_b) << 32) | struct.unpack("<I", _read(pos, 4))[0]
                pos += 4
            inferior.write_memory(at + i * 8, struct.pack("<Q", v))
    except gdb.error as e:
        return ("shrunk task: its frames are in a heap block at 0x%x and could not be written back "
                "to its stack for unwinding (%s); a core file, or a gdb stub that cannot write the "
                "task's protected pages (qemu-user's), cannot show them\n" % (block, e))
    return None


def _backtrace(f, lay, limit, full=False):
    if f.state != "suspended":
        why = {"created": "not started yet: no frames", "done": "finished: no frames",
               "running": "running: its frames are those of the thread running it (see `info threads`)"}
        return why.get(f.state, f.state) + "\n"
    if f.copy:
        return ("copy-stack fiber: its frames may be saved off its shared stack; "
                "backtraces of copy-stack fibers are not supported\n")
    if f.shrunk:
        note = _unshrink(f)
        if note:
            return note
    try:
        gdb.selected_thread()
        innermost = gdb.newest_frame()
    except gdb.error as e:
        raise WeftError("no thread to unwind from (%s): run the program or load a core file" % e)
    _unwinder.arch = lay["arch"]
    _unwinder.innermost_sp = int(innermost.read_register("rsp" if lay["arch"] == 1 else "sp"))
    _unwinder.regs = _resume_registers(f, lay)
    _unwinder.ctx = f.ctx
    # gdb stops unwinding at main (and at the entry point) before it asks
    # any unwinder: when the thread is stopped in main, the fiber's frames,
    # made callers of main's, would not be reached.
    saved = [(p, gdb.parameter(p)) for p in ("backtrace past-main", "backtrace past-entry")]
    try:
        for p, _ in saved:
            gdb.execute("set %s on" % p, to_string=True)
        gdb.invalidate_cached_frames()
        text = gdb.execute("backtrace" + (" %d" % (limit + 1) if limit else ""), to_string=True)
    finally:
        _unwinder.regs = None
        for p, v in saved:
            gdb.execute("set %s %s" % (p, "on" if v else "off"), to_string=True)
        gdb.invalidate_cached_frames()
    out = []
    skipping = False
    for line in text.splitlines():
        m = _FRAME_LINE.match(line)
        if m:
            n = int(m.group(1))
            skipping = n == 0
            if not skipping:
                line = "#%-2d %s" % (n - 1, line[m.end():])
        if not skipping:
            out.append(line)
    if not full:
        out = _trim(out)
    return "\n".join(out) + "\n"


def _header(f):
    task = ""
    if f.task:
        task = ", task %d (%s, worker %s)" % (f.task[0], f.task[1], f.task[2] if f.task[2] >= 0 else "-")
    return "weft %s %d '%s' (%s%s):\n" % (f.kind, f.id, f.name or "<anonymous>", f.state, task)


class WeftPrefix(gdb.Command):
    """weft's coroutines: `weft list`, `weft bt ID`, `weft bt all` (docs/debugging.md)."""

    def __init__(self):
        super().__init__("weft", gdb.COMMAND_STACK, gdb.COMPLETE_NONE, True)


class WeftList(gdb.Command):
    """List every live weft fiber, coroutine and task's fiber.

Columns: id, kind (fiber, coroutine, task), name, state, the task's id and
state, the worker the task last ran on, the stack range and size, and the
high-water mark in bytes when the stack was painted (fiber_options::paint_stack)."""

    def __init__(self):
        super().__init__("weft list", gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        try:
            _list()
        except (WeftError, gdb.MemoryError) as e:
            raise gdb.GdbError("weft: %s" % e)


class WeftBacktrace(gdb.Command):
    """Backtrace of a suspended weft fiber: weft bt ID [N] [full] | weft bt all [N] [full].

ID is the id `weft list` shows; N limits the number of frames. It unwinds
from the fiber's saved switch frame and works on core files too. weft's own
frames at both ends (the switch and wait path, the task and fiber entry) are
left out and counted unless `full` is given."""

    def __init__(self):
        super().__init__("weft bt", gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        args = gdb.string_to_argv(arg)
        full = "full" in args[1:]
        args = [a for i, a in enumerate(args) if i == 0 or a != "full"]
        if not args or len(args) > 2:
            raise gdb.GdbError("usage: weft bt ID [N] [full] | weft bt all [N] [full]")
        limit = int(args[1]) if len(args) > 1 else 0
        try:
            lay, _, _ = _layouts()
            fs = fibers()
            if args[0] == "all":
                chosen = fs
            else:
                want = int(args[0], 0)
                chosen = [f for f in fs if f.id == want]
                if not chosen:
                    raise WeftError("no live fiber with id %d (see `weft list`)" % want)
            for i, f in enumerate(chosen):
                if i:
                    gdb.write("\n")
                gdb.write(_header(f))
                gdb.write(_backtrace(f, lay, limit, full))
        except (WeftError, gdb.MemoryError) as e:
            raise gdb.GdbError("weft: %s" % e)


WeftPrefix()
WeftList()
WeftBacktrace()
