"""A ``lium_pod``'s notebook server: ``jupyter_port`` asks Lium to run one on an internal port of the pod's
template (``POST /pods/{id}/install-jupyter``), and the pod row then says how it went
(``jupyter_installation_status``: SUCCESS with ``jupyter_url``, or FAILED with ``jupyter_error``;
docs/lium-api.md#notebooks). A new container (a template switch, a restart) has none: the refresh then
reads the port as unset, so the next plan installs it again in place.
"""

from __future__ import annotations

import time

from lium_provider.api.models import RUNNING, Pod
from lium_provider.resources.common import api_errors
from lium_provider.resources.pod_model import PodModel
from lium_provider.session import LiumSession
from tfbridge import Context, PlanChange, TFError
from tfbridge.logs import REDACTOR

NOTEBOOK_READY, NOTEBOOK_FAILED = "SUCCESS", "FAILED"


def check_template_publishes(s: LiumSession, template_id: str, port: int) -> None:
    """The notebook's port must be one the template publishes, or nothing outside the pod reaches it:
    checked before a rent or a switch, so nothing is rented for a notebook that cannot work."""
    with api_errors("reading the pod's template", path=("template_id",)):
        template = s.client.get_template(template_id)
    published = (template.internal_ports or []) if template else []
    if port not in published:
        raise TFError(
            "jupyter_port is not published by the pod's template",
            f"Template {template_id} publishes internal ports {published or 'none'}; jupyter_port {port} is not "
            "one of them. Add it to the template's `internal_ports`, or choose one of those. Nothing was "
            "rented or changed.",
            path=("jupyter_port",),
        )


def _settled(pod: Pod | None) -> bool:
    return (
        pod is None
        or pod.status != RUNNING
        or pod.jupyter_installation_status in (NOTEBOOK_READY, NOTEBOOK_FAILED)
    )


def install_notebook(ctx: Context, s: LiumSession, state: PodModel, port: int) -> PodModel:
    """Ask Lium for a notebook server on ``port`` and wait until the pod row says it runs; the state
    with its URL. A failure names Lium's reason; the pod stays as it is."""
    pod_id = state.id or ""
    with api_errors("installing the notebook server", path=("jupyter_port",)):
        s.client.install_jupyter(pod_id, port)
    # A listing sent before Lium took the request may still show an earlier notebook's status.
    pod = s.watcher.wait(ctx, pod_id, _settled, newer_than=time.monotonic())
    if pod is None or pod.jupyter_installation_status != NOTEBOOK_READY or not pod.jupyter_url:
        reason = (
            pod.jupyter_error or "Lium gave no reason"
            if pod is not None and pod.status == RUNNING
            else f"the pod is {pod.status if pod else 'gone'}"
        )
        raise TFError(
            f"The notebook server on pod {pod_id} did not start",
            f"Lium could not install Jupyter on internal port {port}: {reason}.",
            path=("jupyter_port",),
        )
    REDACTOR.register(pod.jupyter_url)  # it carries the notebook's token
    return state.model_copy(update={"jupyter_port": port, "jupyter_url": pod.jupyter_url})


def refreshed_notebook(state: PodModel, pod: Pod) -> dict[str, object]:
    """What a refresh records of the pod's notebook: its URL while it runs; without one (a new
    container) the port reads as unset, so a configured one is installed again by the next apply."""
    if state.jupyter_port is None:
        return {"jupyter_url": None}
    if pod.jupyter_installation_status == NOTEBOOK_READY and pod.jupyter_url:
        REDACTOR.register(pod.jupyter_url)
        return {"jupyter_url": pod.jupyter_url}
    return {"jupyter_port": None, "jupyter_url": None}


def plan_notebook(ctx: Context, change: PlanChange[PodModel], prior: PodModel | None, switched: bool) -> None:
    """Plan ``jupyter_url``: known after apply when a notebook is installed (a new port, a new pod or
    container), null without ``jupyter_port``, else the state's. A port the template does not publish
    fails the plan when the template is known."""
    if change.is_unknown("jupyter_port"):
        change.set_unknown("jupyter_url")
        return
    port = change.planned.jupyter_port
    if port is None:
        change.set_planned("jupyter_url", None)
        return
    installing = prior is None or switched or port != prior.jupyter_port
    if not installing:
        change.set_planned("jupyter_url", prior.jupyter_url if prior else None)
        return
    change.set_unknown("jupyter_url")
    if not change.is_unknown("template_id") and isinstance(ctx.provider, LiumSession):
        check_template_publishes(ctx.provider, change.planned.template_id, port)
