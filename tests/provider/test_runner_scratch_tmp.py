from __future__ import annotations
import json, time
from collections.abc import Callable, Iterator
from pathlib import Path
import pytest
from lium_emulator.launcher import RunningEmulator, launch
from tests.support.lium import FAST_TIMINGS, PROVIDER_BLOCK, Account, new_account
from tests.support.terraform import Terraform

@pytest.fixture(scope="module")
def emulator() -> Iterator[RunningEmulator]:
    with launch(FAST_TIMINGS) as running:
        yield running

def test_basic(emulator, make_terraform, tmp_path):
    account = new_account(emulator, tmp_path)
    body = '''
resource "lium_template" "t" {
  name = "t"
  image = "python:3.11-slim"
  entrypoint = "/bin/sh"
  startup_commands = "-c 'exec sleep infinity'"
}
resource "lium_pod" "p" {
  name = "p"
  template_id = lium_template.t.id
}
resource "lium_runner" "r" {
  pod_id = lium_pod.p.id
  ssh_host_key = lium_pod.p.ssh_host_key
  smoke_test = ["id", "pwd", "python3 -c 'print(42)'"]
}
'''
    tf = make_terraform(PROVIDER_BLOCK + body, **account.env)
    tf.init()
    t=time.monotonic()
    r = tf.apply(check=False)
    print(time.monotonic()-t)
    print(r.stdout[-3000:], r.stderr[-3000:])
    print(json.dumps([i["attributes"] for x in tf.resources() if x["type"]=="lium_runner" for i in x["instances"]], indent=1))
    code, plan = tf.plan_exitcode()
    print(code, plan[-1500:])
    tf.destroy()
    assert account.live()["pods"] == []
