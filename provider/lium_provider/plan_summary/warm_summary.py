"""The pull-request job's summary, made warm in a fork of the provider's zygote while Terraform plans.

The summary needs the provider's pricing code (pydantic, gpuhunt, httpx): ~0.2 s of CPU to import, and
imported in the job during ``terraform plan`` it slows that plan by a sixth on a 2-core runner
(docs/benchmarks.md). The provider's zygote has all of it imported. So once ``terraform init`` has
installed the provider, the job starts the provider program's side command ``plan-summary``
(:mod:`tfbridge.serving.commands`) from the zygote, which greets, reads the nodes feed, and waits. After
``terraform show`` the job sends it one request line (the stack's name, the plan JSON's path, the
policies) and reads one answer line: the summary in Markdown and JSON, and the policies' violations.

Only a provider of this very version is asked: another version would price and render as it does, not
as ``lium-tf`` documents. Whenever no warm zygote serves it, or it fails, the job summarises
in-process, as it always can (:class:`Summarizer` does either).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import lium_provider
from lium_provider import PLAN_SUMMARY_COMMAND, __version__
from lium_provider.plan_summary.gitops_contract import Policies
from tfbridge.serving.constants import COMMAND_FLAG
from tfbridge.serving.launch import build_identity
from tfbridge.serving.warm import InstalledProvider, LineReader, start_warm, stop

if TYPE_CHECKING:
    from lium_provider.plan_summary.pricing import OfferBook

# The command's first line, and the build it runs: only the same build of the code (the same installation,
# not merely the same version: another checkout or virtualenv prices and renders as its own code does) may
# make the job's summary.
_GREETING = b"lium-plan-summary 2"
# A warm fork greets within ~20 ms; the answer waits for the feed and the pricing.
_GREETING_TIMEOUT_SECONDS = 2.0
_ANSWER_TIMEOUT_SECONDS = 300.0
_MAX_ANSWER_BYTES = 256 << 20
# The in-process warm-up thread's niceness (Linux sets it per thread): it has until Terraform's plan is done.
_WARM_UP_NICENESS = 10


class RenderedSummary(NamedTuple):
    """A plan's summary as the job publishes it: Markdown, JSON, and the policies it violates."""

    markdown: str
    json: str
    violations: tuple[str, ...]

    @property
    def failed(self) -> bool:
        return bool(self.violations)


def command(args: Sequence[str]) -> int:
    """The side command, run in the provider program: ``[nodes feed flag]`` (empty: the default feed)."""
    from lium_provider.plan_summary.parsing import PlanError
    from lium_provider.plan_summary.pricing import OfferBook

    out = sys.stdout.buffer
    out.write(greeting() + b"\n")
    out.flush()
    book = OfferBook.for_environment(args[0] if args and args[0] else None, os.environ)
    book.fetch()
    request = json.loads(sys.stdin.buffer.readline())
    plan_json = Path(request["plan_json_file"]).read_text(encoding="utf-8")
    try:
        summary = _summarize(request["stack"], plan_json, book, Policies(**request["policies"]))
    except PlanError as exc:  # the job says it as its own: no second read of the feed to find it again
        answer: dict[str, object] = {"plan_error": str(exc)}
    else:
        answer = summary._asdict()
    out.write(json.dumps(answer).encode() + b"\n")
    return 0


def greeting() -> bytes:
    """The greeting of this build: the zygote's build identity (the interpreter, the installed
    distributions, the bridge's files) and where the code that makes the summary lives, since one
    installation may take ``lium_provider`` from elsewhere than ``tfbridge`` (``PYTHONPATH``)."""
    code = os.path.realpath(os.path.dirname(lium_provider.__file__))
    build = hashlib.sha256("\0".join((build_identity(), code)).encode()).hexdigest()[:32]
    return _GREETING + b" " + build.encode()


def _summarize(stack: str, plan_json: str, book: OfferBook, policies: Policies) -> RenderedSummary:
    from lium_provider.plan_summary.summary import judge, render

    report, results = judge([(stack, plan_json)], book, policies)
    markdown = render(report, results, "markdown")
    return RenderedSummary(markdown.text, render(report, results, "json").text, tuple(markdown.violations))


class WarmSummary:
    """The ``plan-summary`` command of the installed provider, when a warm zygote runs it."""

    def __init__(self, provider: InstalledProvider | None, feed_flag: str | None) -> None:
        """Start it now (if ``provider`` is this version), without waiting. It runs where the job runs:
        relative paths in the environment (``SSL_CERT_FILE``) mean what they mean to the job."""
        self._process = None
        self._lines: LineReader | None = None
        if provider is not None and provider.version == __version__:
            with contextlib.suppress(OSError):
                self._process = start_warm(
                    provider.executable,
                    (COMMAND_FLAG, PLAN_SUMMARY_COMMAND, feed_flag or ""),
                    Path.cwd(),
                    os.environ,
                )
                self._lines = LineReader(self._process)
        self._greeted: bool | None = None

    def greeted(self) -> bool:
        """Whether it runs, as this very build (it said so within a short wait): then :meth:`summarize`
        will likely answer."""
        if self._greeted is None:
            line = None if self._lines is None else self._lines.line(_GREETING_TIMEOUT_SECONDS, 128)
            self._greeted = line == greeting()
        return self._greeted

    def summarize(self, stack: str, plan_json_file: Path, policies: Policies) -> RenderedSummary | None:
        """The summary of the plan JSON in ``plan_json_file``; None if the command could not make it.
        PlanError, as in-process, when the file is not a plan."""
        if self._process is None or self._lines is None or not self.greeted():
            return None
        request = {
            "stack": stack,
            "plan_json_file": str(plan_json_file.resolve()),
            "policies": policies._asdict(),
        }
        assert self._process.stdin is not None
        try:
            self._process.stdin.write(json.dumps(request).encode() + b"\n")
            self._process.stdin.flush()
        except OSError:
            return None
        line = self._lines.line(_ANSWER_TIMEOUT_SECONDS, _MAX_ANSWER_BYTES)
        if not line:
            return None
        try:
            answer = json.loads(line)
        except ValueError:
            return None
        if not isinstance(answer, dict):
            return None
        if isinstance(answer.get("plan_error"), str):
            from lium_provider.plan_summary.parsing import PlanError

            raise PlanError(answer["plan_error"])
        try:
            return RenderedSummary(answer["markdown"], answer["json"], tuple(answer["violations"]))
        except (KeyError, TypeError):
            return None

    def close(self) -> None:
        if self._process is not None:
            stop(self._process)


class Summarizer:
    """The job's summary, made ready while Terraform plans: warm, by the provider's ``plan-summary``
    command (:class:`WarmSummary`), when the provider's zygote runs it; otherwise in this process, where
    a thread imports the pricing code and reads the feed meanwhile, which still takes them off the
    job's time (though not off the plan's)."""

    def __init__(self, feed_flag: str | None) -> None:
        self._feed_flag = feed_flag
        self._warm = WarmSummary(None, feed_flag)
        self._book: OfferBook | None = None
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._prepare, name="summary-warm-up", daemon=True)

    def start(self, provider: InstalledProvider | None) -> None:
        """Start getting ready: warm, by ``provider``'s command, or here."""
        self._warm = WarmSummary(provider, self._feed_flag)
        self._thread.start()

    def _prepare(self) -> None:
        if self._warm.greeted():
            return
        with contextlib.suppress(OSError):  # yield the cores to Terraform and the provider first
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _WARM_UP_NICENESS)
        self._prepare_here()

    def _prepare_here(self) -> None:
        try:
            from lium_provider.plan_summary.pricing import OfferBook

            importlib.import_module("lium_provider.plan_summary.summary")  # what judge and render need
            book = OfferBook.for_environment(self._feed_flag, os.environ)
            book.fetch()
            self._book = book
        except BaseException as exc:  # handed to the main thread, which raises it
            self._failure = exc

    def summaries(self, stack: str, plan_json_file: Path, policies: Policies) -> RenderedSummary:
        """The plan's summary in Markdown and in JSON, with the policies' verdicts."""
        if self._thread.ident is None:  # never started (no plan ran): get ready here
            self._thread.start()
        self._thread.join()
        rendered = self._warm.summarize(stack, plan_json_file, policies)
        if rendered is not None:
            return rendered
        if self._book is None and self._failure is None:  # the warm command failed after greeting
            self._prepare_here()
        if self._failure is not None:
            raise self._failure
        assert self._book is not None
        return _summarize(stack, plan_json_file.read_text(encoding="utf-8"), self._book, policies)

    def close(self) -> None:
        self._warm.close()
