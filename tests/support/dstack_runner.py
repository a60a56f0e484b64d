"""The runner API as dstack 0.22.5's server calls it, written down from its runner client
(``dstack/_internal/server/services/runner/client.py``, class ``RunnerClient``): what the provider
and ``lium-tf run`` may send a runner, and what the emulator's stand-in must answer."""

from __future__ import annotations

DSTACK_RUNNER_ROUTES = frozenset(
    {
        ("GET", "/api/healthcheck"),  # healthcheck()
        ("GET", "/api/metrics"),  # get_metrics(): a 404 means none
        ("POST", "/api/submit"),  # submit_job()
        ("POST", "/api/upload_archive"),  # upload_archive(): multipart file archives
        ("POST", "/api/upload_code"),  # upload_code(): the repo's code, a tar
        ("POST", "/api/run"),  # run_job()
        ("GET", "/api/pull"),  # pull(timestamp)
        ("POST", "/api/stop"),  # stop()
    }
)
