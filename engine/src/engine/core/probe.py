"""Whether a server answers, asked once with a short timeout before work that would otherwise
wait on it: a hub's weights (engine/models/hub.py: urllib, under torch.hub, has no timeout),
a logger's tracking server (engine/runs/loggers/mlflow_logger.py: MLflow's client retries for
minutes without a word). One request, through the environment's proxies, in a thread, so a
name that does not resolve cannot hold the start longer either (name resolution has no
timeout of its own); an HTTP answer counts as the server being there."""

from __future__ import annotations

import http.client
import threading
import urllib.error
import urllib.request

PROBE_S = 5.0  # how long a server may take to answer the one request


def no_answer(
    url: str,
    timeout: float | None = None,
    *,
    method: str = "GET",
    down_from: int | None = None,
    named: bool = False,
) -> str | None:
    """Why the server at `url` gives no answer to one `method` request within `timeout`
    seconds (PROBE_S), in a few words (`named`: led by the failure's type, `gaierror: [Errno
    -2] ...`); None when it answers. An HTTP status from `down_from` on (a hub's 500) is
    `it answered HTTP 503`, no answer; any other is an answer (a redirect, 401, 404)."""
    timeout = PROBE_S if timeout is None else timeout
    said: list[str] = []

    def ask() -> None:
        try:
            request = urllib.request.Request(url, method=method)  # a malformed URL raises here
            with urllib.request.urlopen(request, timeout=timeout):
                said.append("")
        except urllib.error.HTTPError as err:  # an HTTP status: the server is there
            down = down_from is not None and err.code >= down_from
            said.append(f"it answered HTTP {err.code}" if down else "")
        except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as err:
            reason = getattr(err, "reason", err)
            words = str(reason) or type(reason).__name__
            said.append(f"{type(reason).__name__}: {reason}" if named else words)

    asking = threading.Thread(target=ask, daemon=True)
    asking.start()
    asking.join(timeout + 1)  # name resolution has no timeout of its own
    if not said:
        return f"no answer within {timeout:g} s"
    return said[0] or None
