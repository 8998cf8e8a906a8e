"""logger=mlflow: one MLflow run per training run dir, through MlflowClient (no global
active run). The default store is a folder (MLflow's file store, outputs/mlruns: `mlflow ui
--backend-store-uri outputs/mlruns`); `tracking_uri` takes any other (http://host:5000,
sqlite:///mlflow.db, databricks). Params: the run's HParams columns; metrics: every scalar at
its optimizer step, and at the end the final metrics no curve already holds (epochs, wall_s,
val/best_acc, ...). MLflow keeps every point it was sent: a resumed training is a new MLflow
run, tagged with the checkpoint's run dir.
"""

from __future__ import annotations

import http.client
import logging
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

from omegaconf import DictConfig

from engine.core import probe
from engine.runs.loggers.base import Logger, RunContext

log = logging.getLogger(__name__)

INSTALL = "pip install -e '.[loggers]'"
BATCH = 1000  # metrics per log_batch call (MLflow's limit)
# what the start asks a tracking server: the call MLflow's client makes first for a named
# experiment; a tracking server answers it in JSON (200, or 404 with an error_code)
API_PROBE = "/api/2.0/mlflow/experiments/get-by-name?experiment_name=Default"


def store_uri(tracking_uri: str) -> str:
    """A local folder as a file: URI; MLflow 3 refuses its file store unless
    MLFLOW_ALLOW_FILE_STORE is set, which this sets for such a store (not for others)."""
    if "://" in tracking_uri or tracking_uri.startswith("databricks"):
        return tracking_uri
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    return Path(tracking_uri.removeprefix("file:")).resolve().as_uri()


def not_mlflow(uri: str) -> str | None:
    """What the server at `uri` answered to API_PROBE when no MLflow tracking server could have
    (`HTTP 404 text/html`); None when it answered as one, or asks for a token (401, 403)."""
    try:
        with urllib.request.urlopen(uri.rstrip("/") + API_PROBE, timeout=probe.PROBE_S) as got:
            status, kind, body = got.status, got.headers.get_content_type(), got.read(4096)
    except urllib.error.HTTPError as err:
        status, kind, body = err.code, err.headers.get_content_type(), err.read(4096)
    except (OSError, http.client.HTTPException, ValueError) as err:
        return f"no answer ({err})"
    if status in (401, 403) or (
        kind == "application/json" and (status < 300 or b"error_code" in body)
    ):
        return None
    return f"HTTP {status} {kind}"


class MLflowLogger(Logger):
    """An MLflow run in `experiment` (null: MLflow's Default) of the store at `tracking_uri`,
    named `run_name` (null: the run dir's name)."""

    requires = ("mlflow", INSTALL)

    @classmethod
    def start_problem(cls, key: str, node: DictConfig) -> str | None:
        """An http(s) tracking server that does not answer (engine/core/probe.py: any HTTP
        status is an answer; a folder, sqlite: or databricks: has nothing to reach), or a
        server there that is no MLflow tracking server (a web page, another service): MLflow's
        client would fail on it only once the data and model were built."""
        uri = str(node.get("tracking_uri"))
        folder = f"log to a folder ({key}.tracking_uri=${{paths.log_dir}}/mlruns)"
        why = probe.no_answer(uri) if urlsplit(uri).scheme in ("http", "https") else None
        if why is not None:
            return (
                f"{key}.tracking_uri={uri}: the tracking server does not answer ({why}); start "
                f"it, correct the URI, or {folder}."
            )
        answer = not_mlflow(uri) if uri.startswith(("http://", "https://")) else None
        if answer is None:
            return None
        return (
            f"{key}.tracking_uri={uri}: the server there answers, but not as an MLflow tracking "
            f"server ({answer} for {API_PROBE.split('?')[0]}); give the tracking server's "
            f"address (the one `mlflow server` prints, without /api), or {folder}."
        )

    def __init__(
        self,
        run: RunContext,
        tracking_uri: str,
        experiment: str | None = None,
        run_name: str | None = None,
    ) -> None:
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient(tracking_uri=store_uri(tracking_uri))
        experiment_id = "0"
        if experiment is not None:
            found = self.client.get_experiment_by_name(experiment)
            experiment_id = (
                found.experiment_id if found else self.client.create_experiment(experiment)
            )
        tags = {"run_dir": str(run.out)} | (
            {"resumed_at_step": str(run.start_step)} if run.start_step else {}
        )
        self.run_id = self.client.create_run(
            experiment_id, run_name=run_name or run.out.name, tags=tags
        ).info.run_id
        log.info("mlflow: run %s in %s", self.run_id, tracking_uri)
        params = [Param(key, str(value)) for key, value in run.params.items()]
        self.client.log_batch(self.run_id, params=params)
        self.logged: set[str] = set()  # keys that have a curve
        self.ended = False

    def scalars(self, values: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(key, float(value), now, step) for key, value in values.items()]
        for first in range(0, len(metrics), BATCH):
            self.client.log_batch(self.run_id, metrics=metrics[first : first + BATCH])
        self.logged |= values.keys()

    def resumed(self, previous: Path) -> None:
        self.client.set_tag(self.run_id, "resumed_from", str(previous))

    def finish(self, metrics: dict[str, float], step: int) -> None:
        self.scalars({k: v for k, v in metrics.items() if k not in self.logged}, step)
        self._end("FINISHED")

    def close(self) -> None:
        self._end("FAILED")  # closed without finish: the training failed

    def _end(self, status: str) -> None:
        if not self.ended:
            self.client.set_terminated(self.run_id, status)
            self.ended = True
