"""``lium-tf plan-summary``: saved Terraform plans as a pull-request comment (Markdown) or JSON, with policies.

Input is ``terraform show -json <planfile>``, one document per stack. The summary says what each plan
creates, updates, replaces and destroys, what its GPU pods cost per hour and month now and how much that
changes, and the worst case until Lium removes the pods. Policies (:mod:`.policies`) judge the same
numbers, so that a pipeline can fail on them. The modules, one job each:

- :mod:`.parsing`: the plan document → :class:`ResourceChange` (``parse_plan``);
- :mod:`.values`: masked, Markdown-safe rendering of values;
- :mod:`.pricing`: each pod's price per hour from its state or the nodes feed;
- :mod:`.report`: totals, the change, the worst-case spend;
- :mod:`.policies`, :mod:`.markdown`, :mod:`.json_format`: judging and presenting the report;
- :mod:`.summary`: all of it for a command (``main_summary``);
- :mod:`.gitops_contract`: what pipelines rely on (formats, exit codes, files, :class:`Policies`).

Importing the package loads none of them: each name below loads its module when first used, so that
``lium-tf gitops plan`` can load the pricing code while Terraform plans (:mod:`.gitops`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "FORMATS": "gitops_contract",
    "Policies": "gitops_contract",
    "OfferBook": "pricing",
    "PlanError": "parsing",
    "ResourceChange": "parsing",
    "parse_plan": "parsing",
    "Summary": "summary",
    "build_summary": "summary",
    "judge": "summary",
    "main_summary": "summary",
    "render": "summary",
    "summarize": "summary",
}

if TYPE_CHECKING:
    from lium_provider.plan_summary.gitops_contract import FORMATS, Policies
    from lium_provider.plan_summary.parsing import PlanError, ResourceChange, parse_plan
    from lium_provider.plan_summary.pricing import OfferBook
    from lium_provider.plan_summary.summary import (
        Summary,
        build_summary,
        judge,
        main_summary,
        render,
        summarize,
    )


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = [
    "FORMATS",
    "OfferBook",
    "PlanError",
    "Policies",
    "ResourceChange",
    "Summary",
    "build_summary",
    "judge",
    "main_summary",
    "parse_plan",
    "render",
    "summarize",
]
