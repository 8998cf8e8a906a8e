"""What TensorBoard's HParams dashboard shows for a --logdir: its columns and its trials, as
the plugin's backend answers the dashboard (its own handlers, on its own event reader)."""

from __future__ import annotations

from pathlib import Path

from tensorboard import context
from tensorboard.backend.event_processing.data_provider import MultiplexerDataProvider
from tensorboard.backend.event_processing.plugin_event_multiplexer import EventMultiplexer
from tensorboard.plugins.base_plugin import TBContext
from tensorboard.plugins.hparams import (
    api_pb2,
    backend_context,
    get_experiment,
    list_session_groups,
)


def hparams_table(logdir: Path) -> tuple[api_pb2.Experiment, api_pb2.ListSessionGroupsResponse]:
    """(The experiment: columns and metrics, the trials: one session group each) of `logdir`."""
    events = EventMultiplexer()
    events.AddRunsFromDirectory(str(logdir))
    events.Reload()
    provider = MultiplexerDataProvider(events, str(logdir))
    backend = backend_context.Context(TBContext(logdir=str(logdir), data_provider=provider))
    ctx = context.RequestContext()
    request = api_pb2.GetExperimentRequest(experiment_name="")
    experiment = get_experiment.Handler(ctx, backend, "", request).run()
    groups_request = api_pb2.ListSessionGroupsRequest(
        experiment_name="",
        col_params=[api_pb2.ColParams(hparam=h.name) for h in experiment.hparam_infos]
        + [api_pb2.ColParams(metric=m.name) for m in experiment.metric_infos],
        allowed_statuses=list(api_pb2.Status.values()),  # the dashboard asks for all
        aggregation_type=api_pb2.AGGREGATION_AVG,
        start_index=0,
        slice_size=1000,
    )
    groups = list_session_groups.Handler(ctx, backend, "", groups_request).run()
    return experiment, groups
