"""Reads MLflow runs back with MLflow's own Python client, for the real-server tests
(`stoker_tests::mlflow_server::read_runs`).

python3 mlflow_read.py TRACKING_URI RUN_NAME DOWNLOAD_DIR

prints, as JSON, every run of the default experiment named RUN_NAME: its id, status, params, each
metric's whole history (`MlflowClient.get_metric_history`, as [step, value] pairs sorted by step)
and its artifacts' paths (`list_artifacts`, recursively); the artifact folder `checkpoints` of the
first run is downloaded into DOWNLOAD_DIR (`download_artifacts`). An https server's CA comes from
MLFLOW_TRACKING_SERVER_CERT_PATH, as for any MLflow user.
"""

import json
import sys

from mlflow import MlflowClient


def artifacts(client, run_id, path=None):
    for info in client.list_artifacts(run_id, path):
        if info.is_dir:
            yield from artifacts(client, run_id, info.path)
        else:
            yield info.path


def main():
    uri, name, download = sys.argv[1], sys.argv[2], sys.argv[3]
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs(["0"], filter_string=f"attributes.run_name = '{name}'")
    out = []
    for run in runs:
        run_id = run.info.run_id
        metrics = {
            key: sorted([m.step, m.value] for m in client.get_metric_history(run_id, key))
            for key in run.data.metrics
        }
        paths = sorted(artifacts(client, run_id))
        out.append({
            "run_id": run_id,
            "status": run.info.status,
            "params": run.data.params,
            "metrics": metrics,
            "artifacts": paths,
        })
    if runs and any(p.startswith("checkpoints/") for p in out[0]["artifacts"]):
        client.download_artifacts(runs[0].info.run_id, "checkpoints", dst_path=download)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
