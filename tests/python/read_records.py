"""Read a writer's file with the reader its users have, and print what was read as JSON.

usage: python3 read_records.py events EVENT_FILE
       python3 read_records.py csv CSV_FILE

events: TensorBoard's own loader (EventFileLoader, as `tensorboard --logdir` reads); prints
    {"events": [[step, tag], ...]}: the tag of each event's first summary value, "" for an event
    without one (the file version, a restart mark).
csv: Python's csv module with strict=True; prints {"epochs": [...], "problems": [...]}: the
    epoch of every row, and every row whose field count differs from the header's or whose
    cells are not numbers, and whether the file ends with a line break.
"""
import csv
import json
import sys


def events(path):
    from tensorboard.backend.event_processing import event_file_loader

    out = []
    for event in event_file_loader.EventFileLoader(path).Load():
        tag = event.summary.value[0].tag if event.HasField("summary") and event.summary.value else ""
        out.append([event.step, tag])
    return {"events": out}


def rows(path):
    problems = []
    epochs = []
    with open(path, newline="") as f:
        text = f.read()
    if text and not text.endswith("\n"):
        problems.append("the file does not end with a line break")
    reader = csv.reader(text.splitlines(keepends=True), strict=True)
    header = next(reader)
    for n, row in enumerate(reader, start=1):
        if len(row) != len(header):
            problems.append(f"row {n} has {len(row)} fields, the header {len(header)}")
            continue
        try:
            epochs.append(int(row[0]))
            int(row[1])
            [float(cell) for cell in row[2:] if cell]
        except ValueError as e:
            problems.append(f"row {n}: {e}")
    return {"epochs": epochs, "problems": problems}


def main():
    kind, path = sys.argv[1], sys.argv[2]
    print(json.dumps(events(path) if kind == "events" else rows(path)))


if __name__ == "__main__":
    main()
