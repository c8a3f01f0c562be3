"""Read a log directory with TensorBoard's own reader and check its scalars.

usage: python3 check_tensorboard.py LOGDIR EXPECT_JSON

EXPECT_JSON holds {"tag": [[step, value], ...], ...}. Every expected scalar must be there with
that step and value (abs 1e-6 or rel 1e-5); other tags may exist. Also prints what else the
reader found (images, histograms, tensors). Exit 1 with a diff on mismatch.
"""
import json
import math
import sys

from tensorboard.backend.event_processing import event_accumulator


def main():
    logdir, expect_path = sys.argv[1], sys.argv[2]
    with open(expect_path) as f:
        expected = json.load(f)
    acc = event_accumulator.EventAccumulator(
        logdir, size_guidance={"scalars": 0, "images": 0, "histograms": 0, "tensors": 0}
    )
    acc.Reload()
    tags = acc.Tags()
    problems = []
    count = 0
    for tag, points in expected.items():
        if tag not in tags["scalars"]:
            problems.append(f"tag {tag!r} missing; scalars read: {sorted(tags['scalars'])}")
            continue
        got = [(e.step, e.value) for e in acc.Scalars(tag)]
        want = [(int(s), float(v)) for s, v in points]
        if len(got) != len(want):
            problems.append(f"{tag}: {len(got)} values read, {len(want)} expected: {got} vs {want}")
            continue
        for (gs, gv), (ws, wv) in zip(got, want):
            if gs != ws or not math.isclose(gv, wv, rel_tol=1e-5, abs_tol=1e-6):
                problems.append(f"{tag}: read (step {gs}, {gv}), expected (step {ws}, {wv})")
            count += 1
    # The HParams plugin's summaries (`_hparams_/...`, tensors) are read by `read_hparams.py`.
    others = {
        k: sorted(t for t in v if not t.startswith("_hparams_/"))
        for k, v in tags.items()
        if k in ("images", "histograms", "tensors")
    }
    others = {k: v for k, v in others.items() if v}
    if others:
        print(f"also read: {others}")
    if problems:
        print("\n".join(problems))
        sys.exit(1)
    print(f"ok: {count} scalars in {len(expected)} tags")


if __name__ == "__main__":
    main()
