"""The API key is checked once per process before a create is planned, and nowhere else on purpose.

Configure sends nothing (Terraform starts the provider two or three times per command, and each start
used to cost a ``GET /users/me``). A bad key still fails ``terraform plan`` of a new stack, and any
other command fails on its first request with the same title, naming the argument to fix; the key
itself appears nowhere in what Terraform prints.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from lium_emulator.launcher import RunningEmulator
from lium_provider.api.client import LiumClient
from lium_provider.domain.journal import RentJournal
from lium_provider.session import UNUSABLE_ANSWER, LiumSession
from tests.provider.test_bounds_terraform import closed_port
from tests.support.lium import PROVIDER_BLOCK, Account, pod_block, sleeping_template
from tests.support.proxy import RecordingProxy
from tests.support.terraform import Terraform
from tfbridge import TFError

pytestmark = pytest.mark.terraform

WRONG_KEY = "tf-0000000000000000-not-a-key"
STACK = sleeping_template("checked") + pod_block("checked")


def assert_rejected(result: object, what: str) -> None:
    stderr = getattr(result, "stderr", "")
    assert getattr(result, "returncode", 0) == 1, f"{what} succeeded with a wrong key"
    assert "Lium rejected the API key" in stderr, stderr
    assert "check the API key (provider `api_key`, or LIUM_API_KEY)" in " ".join(stderr.split()), stderr
    assert WRONG_KEY not in stderr + getattr(result, "stdout", ""), f"{what} printed the key"


def test_a_wrong_key_fails_the_plan_of_a_new_stack_and_the_refresh_of_an_old_one(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    fresh = make_terraform(PROVIDER_BLOCK + STACK, **{**account.env, "LIUM_API_KEY": WRONG_KEY})
    fresh.init()
    assert_rejected(fresh.run("plan", "-input=false", "-no-color", check=False), "a plan of creates")
    tf = make_terraform(PROVIDER_BLOCK + STACK, **account.env)
    tf.init()
    tf.apply()
    tf.env["LIUM_API_KEY"] = WRONG_KEY
    assert_rejected(tf.run("plan", "-input=false", "-no-color", check=False), "a refresh")
    assert_rejected(tf.run("destroy", "-auto-approve", "-input=false", "-no-color", check=False), "a destroy")
    tf.env["LIUM_API_KEY"] = account.api_key
    tf.destroy()
    assert account.live()["pods"] == []


def test_only_the_plans_of_creates_check_the_key_and_deletes_list_no_more_than_they_wait(
    emulator: RunningEmulator, make_terraform: Callable[..., Terraform], account: Account
) -> None:
    with RecordingProxy(emulator.root_url) as proxy:
        tf = make_terraform(PROVIDER_BLOCK + STACK, **{**account.env, "LIUM_API_URL": f"{proxy.url}/api"})
        tf.init()
        tf.apply()
        applied = len(proxy.exchanges)
        tf.destroy()
        exchanges = list(proxy.exchanges)
    routes = Counter(f"{e.method} {e.route}" for e in exchanges)
    # The apply's two provider processes each plan the creates (Terraform re-plans before applying).
    assert routes["GET /api/users/me"] == 2, routes
    assert all(e.route != "/api/users/me" for e in exchanges[applied:]), "the destroy checked the key"
    # The template's delete looks for unrecorded pods in the listing that saw its pod go: of the
    # listings after the pod's DELETE, exactly one (the last) lacks the pod.
    destroyed = exchanges[applied:]
    pod_delete = next(e for e in destroyed if e.method == "DELETE" and e.route.startswith("/api/pods/"))
    pod_id = pod_delete.route.rsplit("/", 1)[-1]
    later = [e for e in destroyed if e.route == "/api/pods" and e.arrived > pod_delete.arrived]
    without = [e for e in later if all(p.get("id") != pod_id for p in e.response_json or [])]
    assert len(without) == 1 and without[0] is later[-1], [(e.arrived, len(e.response_json)) for e in later]
    assert account.live()["pods"] == []


def session_of(client: LiumClient, journal_dir: Path) -> LiumSession:
    """A configured provider's session around ``client``, as resources see it."""
    return LiumSession(
        client=client,
        feed_url=f"{client.base_url}/public/v1/nodes",
        ssh_private_key=None,
        runner_download_url=None,
        journal=RentJournal(journal_dir / "journal"),
        stack_tag="aaaaaaaa",
    )


def test_a_failed_check_is_kept_so_later_creates_fail_at_once(tmp_path: Path) -> None:
    with closed_port() as url:
        client = LiumClient(url, "tf-key", connect_timeout=1.0, timeout=2.0, max_retries=0)
        s = session_of(client, tmp_path)
        errors = []
        for _ in range(3):
            with pytest.raises(TFError) as raised:
                s.verify_access()
            errors.append(raised.value)
        client.close()
    assert errors[0].summary == "Cannot reach the Lium API" and url in errors[0].detail, errors[0]
    assert errors[1] is errors[0] and errors[2] is errors[0]
    assert client.request_count == 1


def test_an_unreadable_answer_is_titled_by_its_cause_not_as_unreachable(
    account: Account, tmp_path: Path
) -> None:
    client = LiumClient(account.emulator.api_url, account.api_key, max_retries=0)
    s = session_of(client, tmp_path)
    garbage = {
        "seed": 1,
        "rules": [{"method": "GET", "path": "/users/me", "kind": "garbage", "body": "not_json"}],
    }
    with account.faults(garbage), pytest.raises(TFError) as raised:
        s.verify_access()
    client.close()
    assert raised.value.summary == UNUSABLE_ANSWER, raised.value
    assert "Cannot reach" not in raised.value.summary and "JSON" in raised.value.detail
