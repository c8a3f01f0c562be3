#!/usr/bin/env python3
"""Instructions per training step of each case of the `compare` benchmark, counted by valgrind.

Timings on a shared 2-vCPU VM move 5-10 % from run to run; instruction counts do not depend on what
else the machine does. Each case runs twice under `valgrind --tool=cachegrind --cache-sim=no`
(`compare --one <case> <model> <steps>`), with N and 2N measured steps after the same warm-up; the
difference of the two totals over N is the steady cost of one step: start-up, warm-up and shutdown
cancel out. RAYON_NUM_THREADS=1 keeps rayon's idle spinning, which varies from run to run, out of
the count: the numbers are the work of a step, single-threaded.

Usage (after `cargo build --release -p stoker-bench --bin compare [--features learner]`):
    python3 bench/tools/instructions.py [mlp_steps] [conv_steps] [cases]
e.g. `python3 bench/tools/instructions.py 400 40 abcde`; 0 steps skips a model.
"""

import os
import re
import subprocess
import sys

CASES = {
    "a": "(a) hand-written burn loop",
    "b": "(b) stoker, no callbacks",
    "c": "(c) stoker, default callbacks",
    "d": "(d) (c) + 20 DSL callbacks",
    "e": "(e) (d) + fetch of 2 scalars every 10 steps",
    "f": "(f) burn-train Learner, default metrics, no renderer",
}


def binary():
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(os.path.dirname(__file__), "..", "..", "target")
    path = os.path.join(target, "release", "compare")
    if not os.path.exists(path):
        sys.exit(f"{path} not found: build it with `cargo build --release -p stoker-bench --bin compare`")
    return path


def instructions(exe, case, model, steps):
    env = dict(os.environ, RAYON_NUM_THREADS="1")
    out = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
         exe, "--one", case, model, str(steps)],
        env=env, capture_output=True, text=True,
    )
    if out.returncode != 0:
        sys.exit(f"case {case} {model} {steps} failed:\n{out.stderr[-3000:]}")
    match = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
    if not match:
        sys.exit(f"no instruction count in valgrind's output:\n{out.stderr[-3000:]}")
    return int(match.group(1).replace(",", ""))


def main():
    mlp_steps = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    conv_steps = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    cases = sys.argv[3] if len(sys.argv) > 3 else "abcde"
    exe = binary()
    for model, steps in (("mlp", mlp_steps), ("conv", conv_steps)):
        if steps == 0:
            continue
        per_step = {}
        for case in cases:
            short = instructions(exe, case, model, steps)
            long = instructions(exe, case, model, 2 * steps)
            per_step[case] = (long - short) / steps
        print(f"\n{model}: instructions per step (valgrind, {steps} vs {2 * steps} steps, RAYON_NUM_THREADS=1)")
        print(f"  {'case':<52} {'instr/step':>12}  {'(a)/case':>9}  {'vs (a)':>12}")
        base = per_step.get("a")
        for case, count in per_step.items():
            ratio = f"{base / count:9.4f}" if base else ""
            extra = f"{count - base:+12.0f}" if base else ""
            print(f"  {CASES[case]:<52} {count:12.0f}  {ratio}  {extra}")
        if "c" in per_step and "f" in per_step:
            print(f"  (f) / (c) instructions: {per_step['f'] / per_step['c']:.3f}")


if __name__ == "__main__":
    main()
