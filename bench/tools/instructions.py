#!/usr/bin/env python3
"""Instructions per training step of each case of the `compare` benchmark, counted by valgrind.

Timings on a shared 2-vCPU VM move 5-10 % from run to run; instruction counts do not depend on what
else the machine does. Each case runs twice under `valgrind --tool=cachegrind --cache-sim=no`
(`compare --one <case> <model> <steps>`), with N and 2N measured steps after the same warm-up; the
difference of the two totals over N is the steady cost of one step: start-up, warm-up and shutdown
cancel out. RAYON_NUM_THREADS=1 keeps rayon's idle spinning, which varies from run to run, out of
the count: the numbers are the work of a step, single-threaded.

Each case is measured `repeats` times (default 3); the table gives the median and the range.
Memory allocation paths in glibc vary a little from run to run (a few thousand instructions per
step), which is what the range shows.

With THREAD=main in the environment, each case counts the training thread alone (callgrind,
`--separate-threads=yes`): the background writers and the dashboard's drawing thread left out.

Usage (after `cargo build --release -p stoker-bench --bin compare [--features learner]`; the environment
variable COMPARE names another `compare` binary):
    python3 bench/tools/instructions.py [mlp_steps] [conv_steps] [cases] [repeats]
e.g. `python3 bench/tools/instructions.py 400 0 abcde 3`; 0 steps skips a model.
"""

import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile

CASES = {
    "a": "(a) hand-written burn loop",
    "b": "(b) stoker, no callbacks",
    "c": "(c) stoker, default callbacks",
    "d": "(d) (c) + 20 DSL callbacks",
    "e": "(e) (d) + fetch of 2 scalars every 10 steps",
    "f": "(f) burn-train Learner, default metrics, no renderer",
    "g": "(g) (d) + synchronous fetch of 2 scalars every step",
    "h": "(h) (d) + deferred fetch of 2 scalars every step",
    "j": "(j) (c), the dashboard for progress bar + printer",
    "k": "(k) (b) + Trainer::seed (the devices seeded before every step)",
}

# The cases that need a terminal on stderr (the dashboard draws only there): run under `script`,
# which gives the program a pseudo-terminal (set to 120x40); valgrind then writes its count to a file. Their count
# includes the dashboard's drawing thread (valgrind counts every thread, and runs them one at a
# time), which draws every 250 ms of the slowed-down run's wall time.
PTY_CASES = {"j"}


def binary():
    if os.environ.get("COMPARE"):
        return os.environ["COMPARE"]
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(os.path.dirname(__file__), "..", "..", "target")
    path = os.path.join(target, "release", "compare")
    if not os.path.exists(path):
        sys.exit(f"{path} not found: build it with `cargo build --release -p stoker-bench --bin compare`")
    return path


def instructions(exe, case, model, steps):
    if os.environ.get("THREAD") == "main":
        return main_thread_instructions(exe, case, model, steps)
    env = dict(os.environ, RAYON_NUM_THREADS="1")
    valgrind = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
    program = [exe, "--one", case, model, str(steps)]
    if case in PTY_CASES:
        with tempfile.NamedTemporaryFile(mode="r", suffix=".log") as log:
            # A terminal of 120x40, so that the dashboard draws what it would in one.
            command = "stty cols 120 rows 40; " + shlex.join(valgrind + [f"--log-file={log.name}"] + program)
            out = subprocess.run(["script", "-qefc", command, "/dev/null"], env=env, capture_output=True,
                                 text=True, stdin=subprocess.DEVNULL)
            report = log.read()
    else:
        out = subprocess.run(valgrind + program, env=env, capture_output=True, text=True)
        report = out.stderr
    if out.returncode != 0:
        sys.exit(f"case {case} {model} {steps} failed:\n{report[-3000:]}{out.stdout[-3000:]}")
    match = re.search(r"I\s+refs:\s+([\d,]+)", report)
    if not match:
        sys.exit(f"no instruction count in valgrind's output:\n{report[-3000:]}")
    return int(match.group(1).replace(",", ""))


def main_thread_instructions(exe, case, model, steps):
    """With THREAD=main: the instructions of the training thread alone (callgrind with
    `--separate-threads=yes`, thread 1), leaving out the writers' and the dashboard's threads,
    whose work per step depends on the wall time of a run slowed down by valgrind."""
    env = dict(os.environ, RAYON_NUM_THREADS="1")
    with tempfile.TemporaryDirectory() as tmp:
        out_file = os.path.join(tmp, "cg.out")
        valgrind = ["valgrind", "--tool=callgrind", "--separate-threads=yes", f"--callgrind-out-file={out_file}",
                    f"--log-file={os.path.join(tmp, 'log')}"]
        program = [exe, "--one", case, model, str(steps)]
        command = shlex.join(valgrind + program)
        if case in PTY_CASES:
            command = "stty cols 120 rows 40; " + command
        out = subprocess.run(["script", "-qefc", command, "/dev/null"], env=env, capture_output=True,
                             text=True, stdin=subprocess.DEVNULL)
        first = out_file + "-01"
        if out.returncode != 0 or not os.path.exists(first):
            sys.exit(f"case {case} {model} {steps} failed:\n{out.stdout[-3000:]}")
        match = re.search(r"^(?:summary|totals):\s+(\d+)", open(first).read(), re.M)
        if not match:
            sys.exit(f"no instruction count in {first}")
        return int(match.group(1))


def main():
    mlp_steps = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    conv_steps = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    cases = sys.argv[3] if len(sys.argv) > 3 else "abcde"
    repeats = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    exe = binary()
    for model, steps in (("mlp", mlp_steps), ("conv", conv_steps)):
        if steps == 0:
            continue
        samples = {case: [] for case in cases}
        for _ in range(repeats):
            # Cases interleaved, so that anything drifting affects them alike.
            for case in cases:
                short = instructions(exe, case, model, steps)
                long = instructions(exe, case, model, 2 * steps)
                samples[case].append((long - short) / steps)
        per_step = {case: statistics.median(values) for case, values in samples.items()}
        print(f"\n{model}: instructions per step (valgrind, {steps} vs {2 * steps} steps, "
              f"RAYON_NUM_THREADS=1, median of {repeats})")
        print(f"  {'case':<52} {'instr/step':>12}  {'range':>21}  {'(a)/case':>9}  {'vs (a)':>9}")
        base = per_step.get("a")
        for case, count in per_step.items():
            low, high = min(samples[case]), max(samples[case])
            ratio = f"{base / count:9.4f}" if base else ""
            extra = f"{count - base:+9.0f}" if base else ""
            print(f"  {CASES[case]:<52} {count:12.0f}  {low:10.0f}-{high:<10.0f}  {ratio}  {extra}")
        if "c" in per_step and "f" in per_step:
            print(f"  (f) / (c) instructions: {per_step['f'] / per_step['c']:.3f}")


if __name__ == "__main__":
    main()
