#!/usr/bin/env python3
"""make_seeds.py: writes the hand-made seed inputs of fuzz/corpus/.

Each seed is a small program in coroutine_fuzz.cpp's input language: the
outer program's operations, with the bytes a body reads for its own steps
placed right after the resume that runs it. The encoding below mirrors
run(), create(), drive() and body_main() in coroutine_fuzz.cpp; if those
change, these seeds still parse (any bytes do) but mean something else, so
regenerate them. Seeds are named seed-<what>; the fuzzer's own finds, kept
by `-merge=1`, are named by their SHA-1.

    fuzz/make_seeds.py [DIR]      (default: fuzz/corpus next to this file)
"""

import os
import sys

# Outer operations (run(): pick(12), then a slot).
CREATE, RESUME, DESTROY, MOVE, SELF_MOVE, OUTSIDE, THREAD, QUERY, SWAP = 0, 1, 3, 4, 5, 6, 7, 8, 9
# Kinds (create(): 1 + pick(4)).
PLAIN, INTS, STRS, GEN = 0, 1, 2, 3
# Stack allocators (create(): pick(3)); the pool has 128 KiB stacks, at most 3.
MALLOC, MMAP, POOLED = 0, 1, 2
# Size classes (size_classes[] in coroutine_fuzz.cpp).
S64K, S128K, S256K, SDEFAULT, S2048, S256, S6000, S1, SZERO, SHUGE = range(10)
# Private data sizes (private_sizes[]): 0, 0, 16, 100, 4096, 70000.
P0, P16, P100, P4096, P70000 = 0, 2, 3, 4, 5
# Body steps (body_main(): pick(16)).
(B_YIELD, B_YIELD2, B_RETURN, B_THROW, B_DEEP, B_SELF, B_OTHER, B_THIS_YIELD, B_LEAKED, B_DESTROY,
 B_CATCH_ALL, B_CATCH_STD, B_NESTED, B_KEEP, B_THROW_CATCH, B_GENERATOR) = range(16)


def value(v):
    return list((v & 0xFFFFFFFF).to_bytes(4, "big"))


def create(slot, kind, malloc=False, size=S128K, private=P0, name=1, paint=False, guard=0, alloc=None):
    if alloc is None:
        alloc = MALLOC if malloc else MMAP
    return [CREATE, slot, kind, alloc, guard, size, private, name, 0 if paint else 1]


def resume(slot, v=0):
    return [RESUME, slot] + value(v)


def on_thread(slot, v=0):
    return [THREAD, slot] + value(v)


def y(kind=PLAIN, length=10):
    # A yield; a string coroutine reads the length of the string it yields.
    return [B_YIELD] + ([length] if kind == STRS else [])


SEEDS = {
    # Each kind: create, a few yields, return; the values and the result checked.
    "plain-yields-then-returns": create(0, PLAIN) + resume(0) + y() + resume(0) + y() + resume(0) + [B_RETURN],
    "ints-values-flow": create(1, INTS) + resume(1, 5) + y(INTS) + resume(1, 6) + y(INTS) + resume(1, 7) + [B_RETURN]
    + [QUERY, 1],
    "strings-values-flow": create(2, STRS) + resume(2) + y(STRS, 70) + resume(2) + y(STRS, 3) + resume(2) + [B_RETURN]
    + [QUERY, 2],
    "generator-runs-out": create(3, GEN) + resume(3) + y(GEN) + resume(3) + y(GEN) + resume(3) + [B_RETURN]
    + resume(3),
    # Exceptions of each type, then resume of a done coroutine.
    "throw-runtime-error": create(0, INTS) + resume(0, 1) + y(INTS) + resume(0, 2) + [B_THROW, 0] + resume(0, 3)
    + [QUERY, 0],
    "throw-int": create(0, PLAIN) + resume(0) + [B_THROW, 1] + resume(0),
    "throw-odd-type": create(0, STRS) + resume(0) + [B_THROW, 2] + resume(0) + [QUERY, 0],
    "generator-throws": create(1, GEN) + resume(1) + y(GEN) + resume(1) + [B_THROW, 0] + resume(1),
    # Destruction of suspended coroutines: frames unwind, catch (...) rethrows.
    "destroy-deep-suspended": create(0, PLAIN) + resume(0) + [B_DEEP, 20] + [DESTROY, 0],
    "destroy-in-catch-all": create(0, INTS) + resume(0, 1) + [B_CATCH_ALL] + [DESTROY, 0],
    "destroy-in-catch-std": create(0, STRS) + resume(0) + [B_CATCH_STD, 40] + [DESTROY, 0],
    "destroy-never-started": create(0, GEN) + [DESTROY, 0] + create(0, PLAIN, malloc=True) + [DESTROY, 0],
    "destroy-with-kept-inner": create(0, PLAIN) + resume(0) + [B_KEEP, 0] + y() + [DESTROY, 0],
    # Misuse from inside: resume itself, resume the resumer, this_coroutine::yield.
    "resume-self": create(0, PLAIN) + resume(0) + [B_SELF] + value(0) + y() + resume(0) + [B_RETURN],
    "resume-self-generator": create(0, GEN) + resume(0) + [B_SELF] + value(0) + y(GEN) + resume(0) + [B_SELF]
    + value(0) + [B_RETURN],
    "resume-ancestor": create(0, PLAIN) + create(1, INTS) + resume(0) + [B_OTHER, 1, 1] + value(9)
    + [B_OTHER, 0, 1] + value(0) + y(INTS) + y() + resume(0) + [B_RETURN],
    "this-coroutine-yield-typed": create(0, INTS) + resume(0, 4) + [B_THIS_YIELD] + y(INTS) + resume(0, 5)
    + [B_RETURN],
    "this-coroutine-yield-plain": create(0, PLAIN) + resume(0) + [B_THIS_YIELD] + resume(0) + [B_THIS_YIELD]
    + [DESTROY, 0],
    # Misuse from outside: leaked yielders, this_coroutine::yield, empty handles.
    "leaked-yielder-outside": create(0, INTS) + resume(0, 1) + y(INTS) + [OUTSIDE, 0, 1] + [OUTSIDE, 0, 0]
    + resume(0, 2) + [B_RETURN],
    "leaked-yielder-inside": create(0, PLAIN) + create(1, STRS) + resume(1) + y(STRS) + resume(0) + [B_LEAKED, 1]
    + y() + [DESTROY, 1] + [DESTROY, 0],
    "nested-inner-misuses-outer": create(0, STRS) + resume(0) + [B_NESTED, 0, 0] + [B_NESTED, 1, 1] + y(STRS)
    + [DESTROY, 0],
    "moved-from-handles": create(0, INTS) + resume(0, 1) + y(INTS) + [MOVE, 0, 1, 0] + resume(0, 2) + [QUERY, 0]
    + resume(1, 3) + [B_RETURN] + [QUERY, 1],
    "move-over-suspended": create(0, PLAIN) + create(1, PLAIN) + resume(0) + y() + resume(1) + y()
    + [MOVE, 0, 1, 0] + resume(1) + [B_RETURN],
    "generator-moves": create(0, GEN) + resume(0) + y(GEN) + [MOVE, 0, 1, 0] + resume(1) + y(GEN)
    + [MOVE, 1, 2, 1] + resume(2) + y(GEN) + resume(0) + [DESTROY, 2],
    "self-move-and-swap": create(0, INTS) + create(1, GEN) + resume(0, 1) + y(INTS) + [SELF_MOVE, 0]
    + [SWAP, 0, 1] + resume(1, 2) + y(INTS) + resume(0) + y(GEN),
    # Threads: migration, and resume of a coroutine running on another thread.
    "migrate-to-thread": create(0, INTS) + resume(0, 1) + y(INTS) + on_thread(0, 2) + y(INTS) + resume(0, 3)
    + [B_RETURN],
    "resume-running-on-other-thread": create(0, PLAIN) + create(1, PLAIN) + resume(0) + [B_OTHER, 1, 0]
    + value(0) + [B_OTHER, 0, 1] + value(0) + y() + y() + [DESTROY, 0] + [DESTROY, 1],
    # Inside a body: destroy another coroutine, run a generator, throw and catch.
    "body-destroys-other": create(0, PLAIN) + create(1, INTS) + resume(1, 1) + y(INTS) + resume(0)
    + [B_DESTROY, 1] + [B_GENERATOR] + [B_THROW_CATCH] + [B_RETURN],
    # Stack sizes: too small, borderline, invalid; painted stacks; big private data.
    "stack-too-small": create(0, PLAIN, malloc=True, size=S256) + create(1, INTS, size=S64K, private=P70000)
    + create(2, STRS, malloc=True, size=S1, name=0) + resume(0),
    "stack-borderline": create(0, PLAIN, size=S2048) + create(1, GEN, malloc=True, size=S6000) + resume(0)
    + resume(1) + [QUERY, 0] + [DESTROY, 0],
    "stack-invalid-sizes": create(0, PLAIN, size=SZERO) + create(1, INTS, malloc=True, size=SHUGE)
    + create(2, GEN, size=SHUGE),
    "painted-private-data": create(0, INTS, size=S256K, private=P4096, paint=True, name=3) + resume(0, 1)
    + [B_DEEP, 10] + [QUERY, 0] + resume(0, 2) + [B_RETURN] + [QUERY, 0],
    "malloc-stacks-everywhere": create(0, PLAIN, malloc=True) + create(1, INTS, malloc=True, private=P100)
    + create(2, STRS, malloc=True, guard=2) + create(3, GEN, malloc=True) + resume(0) + y() + resume(1, 1)
    + y(INTS) + resume(2) + y(STRS) + resume(3) + y(GEN) + [SWAP, 0, 3] + [MOVE, 1, 2, 0],
    # Pooled stacks: reuse after destruction mid-frame, the pool's limit, a
    # request larger than the pool's stacks, a free on another thread.
    "pooled-reuse": create(0, PLAIN, alloc=POOLED) + resume(0) + [B_DEEP, 12] + [DESTROY, 0]
    + create(0, INTS, alloc=POOLED, paint=True) + resume(0, 1) + y(INTS) + [QUERY, 0] + resume(0, 2) + [B_RETURN],
    "pooled-limit": create(0, PLAIN, alloc=POOLED) + create(1, INTS, alloc=POOLED, size=S256)
    + create(2, GEN, alloc=POOLED, size=S64K) + create(3, STRS, alloc=POOLED) + [DESTROY, 1]
    + create(3, STRS, alloc=POOLED),
    "pooled-unpooled-and-invalid": create(0, PLAIN, alloc=POOLED, size=S256K) + resume(0) + y()
    + create(1, INTS, alloc=POOLED, size=SZERO) + create(2, GEN, alloc=POOLED, size=SHUGE) + [DESTROY, 0],
    "pooled-freed-on-thread": create(0, PLAIN, alloc=POOLED) + create(1, INTS, alloc=POOLED) + resume(1, 1)
    + y(INTS) + on_thread(0) + [B_DESTROY, 1] + y() + create(1, GEN, alloc=POOLED) + resume(1) + y(GEN),
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
    os.makedirs(out, exist_ok=True)
    for name, data in SEEDS.items():
        assert all(0 <= b < 256 for b in data), name
        with open(os.path.join(out, "seed-" + name), "wb") as f:
            f.write(bytes(data))
    print(f"wrote {len(SEEDS)} seeds to {out}")


if __name__ == "__main__":
    main()
