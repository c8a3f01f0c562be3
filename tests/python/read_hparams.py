"""Read a log directory's HParams as TensorBoard's *HParams* tab does.

usage: python3 read_hparams.py LOGDIR

Loads LOGDIR with TensorBoard's own multiplexer and data provider, then asks the hparams
plugin's backend what the tab asks it: the experiment (GetExperiment) and the session groups
(ListSessionGroups). Prints JSON:
{"experiment": {"hparams": [[name, type]], "metrics": [tag, ...]},
 "sessions": [{"name": run, "hparams": {name: value}, "metrics": {tag: value},
               "status": "STATUS_SUCCESS"}]}
"""
import json
import sys

from tensorboard import context
from tensorboard.backend.event_processing import data_provider
from tensorboard.backend.event_processing import plugin_event_multiplexer
from tensorboard.plugins import base_plugin
from tensorboard.plugins.hparams import api_pb2
from tensorboard.plugins.hparams import backend_context
from tensorboard.plugins.hparams import get_experiment
from tensorboard.plugins.hparams import list_session_groups


def value(v):
    kind = v.WhichOneof("kind")
    return getattr(v, kind) if kind else None


def main():
    logdir = sys.argv[1]
    multiplexer = plugin_event_multiplexer.EventMultiplexer()
    multiplexer.AddRunsFromDirectory(logdir)
    multiplexer.Reload()
    provider = data_provider.MultiplexerDataProvider(multiplexer, logdir)
    tb_context = base_plugin.TBContext(logdir=logdir, multiplexer=multiplexer, data_provider=provider)
    backend = backend_context.Context(tb_context)
    ctx = context.RequestContext()
    experiment = get_experiment.Handler(ctx, backend, "", api_pb2.GetExperimentRequest()).run()
    # The tab asks for every status (a session whose status is not allowed is left out).
    statuses = [api_pb2.STATUS_UNKNOWN, api_pb2.STATUS_SUCCESS, api_pb2.STATUS_FAILURE, api_pb2.STATUS_RUNNING]
    request = api_pb2.ListSessionGroupsRequest(start_index=0, slice_size=100, allowed_statuses=statuses)
    groups = list_session_groups.Handler(ctx, backend, "", request).run()
    sessions = []
    for group in groups.session_groups:
        for session in group.sessions:
            sessions.append(
                {
                    "name": session.name,
                    "hparams": {k: value(v) for k, v in group.hparams.items()},
                    "metrics": {m.name.tag: m.value for m in session.metric_values},
                    "status": api_pb2.Status.Name(session.status),
                }
            )
    print(
        json.dumps(
            {
                "experiment": {
                    "hparams": [[h.name, api_pb2.DataType.Name(h.type)] for h in experiment.hparam_infos],
                    "metrics": [m.name.tag for m in experiment.metric_infos],
                },
                "sessions": sessions,
            }
        )
    )


if __name__ == "__main__":
    main()
