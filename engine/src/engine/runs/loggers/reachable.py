"""Whether a logger's server answers, asked once before any work: MLflow's client retries an
unreachable http(s) tracking URI for minutes without a word, so the run would fail (or hang)
only after its data and model were built. One GET with a short timeout, in a thread, so a
name that does not resolve cannot hold the start longer either; any HTTP answer (404, 401 of
a server that wants a token) counts as reachable. Whether the server that answers is the one
meant is the logger's question (mlflow_logger.not_mlflow)."""

from __future__ import annotations

import http.client
import threading
import urllib.error
import urllib.request
from urllib.parse import urlsplit

PROBE_S = 5.0  # how long a server may take to answer the start's one request


def _ask(url: str, timeout: float, said: list[str]) -> None:
    """Append to `said` why `url` gives no HTTP answer ('' when it gives one)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout):
            pass
    except urllib.error.HTTPError:
        said.append("")  # an HTTP status: the server is there
    except urllib.error.URLError as err:
        said.append(str(err.reason))
    except (OSError, http.client.HTTPException, ValueError) as err:
        said.append(str(err) or type(err).__name__)
    else:
        said.append("")


def no_answer(url: str, timeout: float | None = None) -> str | None:
    """Why the http(s) server at `url` does not answer within `timeout` seconds (PROBE_S),
    in a few words; None when it answers or `url` is no http(s) URL (a folder, sqlite:,
    databricks: nothing to reach)."""
    if urlsplit(url).scheme not in ("http", "https"):
        return None
    timeout = PROBE_S if timeout is None else timeout
    said: list[str] = []
    asking = threading.Thread(target=_ask, args=(url, timeout, said), daemon=True)
    asking.start()
    asking.join(timeout + 1)  # name resolution has no timeout of its own
    if not said:
        return f"no answer within {timeout:g} s"
    return said[0] or None
