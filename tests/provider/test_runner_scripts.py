"""The pod-side shell of ``lium_runner`` and the parsing of what it prints, run by the real ``/bin/sh``."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from lium_provider.runner import scripts
from lium_provider.runner.bootstrap import PodFacts
from lium_provider.runner.task_api import JobOutcome, JobUser

KEYS = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample user@laptop", "ssh-rsa AAAAB3Nza second")


@pytest.mark.sandbox  # runs the script as PID 1 of a new PID namespace (unshare)
def test_launch_script_passes_every_value_verbatim_from_the_cwd_of_pid_1(tmp_path: Path) -> None:
    """The real shell runs launch.sh as PID 1 of a new PID namespace, against a fake ``env`` that prints
    its working directory and arguments NUL-separated."""
    fake_env = tmp_path / "bin" / "env"
    fake_env.parent.mkdir()
    fake_env.write_text('#!/bin/sh\nprintf \'%s\\0\' "$(pwd)" "$@"\n')
    fake_env.chmod(0o755)
    workdir = tmp_path / "workdir"
    workdir.mkdir()
    image = [
        "PATH=/usr/local/bin:/usr/bin",
        "SPACED=two words",
        'QUOTES=it\'s "quoted"',
        "DOLLARS=$HOME `id` $(id)",
        "MULTILINE=one\ntwo",
        "EMPTY=",
        "RAW=\udcff\udcfe",  # bytes that are not UTF-8, as parse_environ keeps them
    ]
    launch = tmp_path / "launch.sh"
    script = scripts.launch_script(image, {"STACK": "a*b", "PATH": "/override"}, "pod-1", KEYS)
    launch.write_bytes(script.encode("utf-8", "surrogateescape"))
    result = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", "/bin/sh", str(launch)],
        cwd=workdir,
        env={"PATH": f"{fake_env.parent}:/usr/bin:/bin"},
        capture_output=True,
        check=True,
    )
    words = [w.decode("utf-8", "surrogateescape") for w in result.stdout.split(b"\0")[:-1]]
    assert words == [
        str(workdir),
        "-i",
        "--",
        *image,
        "STACK=a*b",
        "PATH=/override",
        "LIUM_RUNNER_ID=pod-1",
        scripts.BINARY,
        *(
            "--log-level",
            "6",
            "start",
            "--temp-dir",
            "/tmp/runner",
            "--http-port",
            "10999",
            "--ssh-port",
            "10022",
        ),
        *("--ssh-authorized-key", KEYS[0], "--ssh-authorized-key", KEYS[1]),
    ]


@pytest.mark.parametrize(
    "command",
    [
        scripts.status_command(),
        scripts.probe_command(),
        scripts.fetch_command("https://example.invalid/{version}"),
        scripts.prepare_upload_command(),
        scripts.install_uploaded_command(),
        scripts.start_command("0" * 64),
        scripts.stop_command("pod-1"),
        scripts.log_tail_command(20),
        shlex.join(["/bin/sh", "-c", scripts.SUPERVISOR]),
    ],
    ids=["status", "probe", "fetch", "prepare", "install", "start", "stop", "tail", "supervisor"],
)
def test_every_pod_script_is_valid_sh(command: str) -> None:
    """``sh -n`` parses each script without running it; the values are arguments, not script text."""
    words = shlex.split(command)
    assert words[:2] == ["/bin/sh", "-c"]
    subprocess.run(["/bin/sh", "-n", "-c", words[2]], check=True)


def test_values_travel_as_arguments_not_script_text() -> None:
    hostile = "http://x/'; rm -rf / #"
    words = shlex.split(scripts.fetch_command(hostile))
    assert words[-2:] == ["sh", hostile] and hostile not in words[2]
    assert shlex.split(scripts.stop_command("pod-1"))[-1] == "LIUM_RUNNER_ID=pod-1"


@pytest.mark.sandbox  # runs the probe as PID 1 of a new PID namespace (unshare)
def test_the_probe_reports_the_user_of_pid_1() -> None:
    """As in a pod whose image sets USER: PID 1 of a new PID namespace runs as another uid and gid."""
    probe = shlex.split(scripts.probe_command())[2]
    as_pid_1 = ["unshare", "--pid", "--fork", "--mount-proc"]
    as_user = ["setpriv", "--reuid", "1234", "--regid", "2345", "--clear-groups"]
    output = subprocess.run(
        [*as_pid_1, *as_user, "/bin/sh", "-c", probe],
        env={"PATH": "/usr/bin:/bin", "PROBED": "yes"},
        capture_output=True,
        check=True,
    ).stdout
    text, environ = scripts.split_probe(output)
    facts = PodFacts.parse(text)
    assert facts.user == JobUser(1234, 2345)
    assert "PROBED=yes" in scripts.parse_environ(environ)
    assert facts.arch == os.uname().machine and "setsid" in facts.tools and facts.supervisor is None


def test_pod_facts_parse() -> None:
    facts = PodFacts.parse(
        "supervisor=41\nconfig=abc\nrunner=57\narch=aarch64\nuid=1000\ngid=100\ntools= setsid curl\nnoise\n"
    )
    assert facts == PodFacts(
        arch="aarch64",
        user=JobUser(1000, 100),
        tools=frozenset({"setsid", "curl"}),
        supervisor=41,
        runner=57,
        config_id="abc",
        gave_up=None,
    )
    idle = PodFacts.parse("gave_up=1\nrunner=\narch=x86_64\nuid=0\ngid=0\ntools=\n")
    assert (
        idle.supervisor is None and idle.runner is None and idle.gave_up == "1" and idle.tools == frozenset()
    )


def test_parse_environ_keeps_values_and_drops_junk() -> None:
    data = b"A=1\0B=x=y\0junk\0\0=novalue\0C=\xff\0D=\0"
    assert scripts.parse_environ(data) == ["A=1", "B=x=y", "C=\udcff", "D="]


@pytest.mark.parametrize(
    ("machine", "arch"), [("x86_64", "amd64"), ("aarch64", "arm64"), ("arm64", "arm64"), ("amd64", "amd64")]
)
def test_go_arch(machine: str, arch: str) -> None:
    assert scripts.go_arch(machine + "\n") == arch


def test_go_arch_refuses_what_dstack_does_not_build() -> None:
    with pytest.raises(ValueError, match="riscv64"):
        scripts.go_arch("riscv64")


def test_download_url_and_its_display() -> None:
    template = "https://user:secret@bucket.example/{version}/binaries/dstack-runner-linux-{arch}?X-Sig=abc"
    url = scripts.download_url(template, "0.22.5", "arm64")
    assert url == "https://user:secret@bucket.example/0.22.5/binaries/dstack-runner-linux-arm64?X-Sig=abc"
    assert scripts.display_url(url) == "https://bucket.example/0.22.5/binaries/dstack-runner-linux-arm64"


def test_config_id_changes_with_what_the_runner_is_started_with() -> None:
    launch = scripts.launch_script(["A=1"], {}, "pod-1", KEYS)
    same = scripts.config_id(launch, "https://x/0.22.5")
    assert same == scripts.config_id(scripts.launch_script(["A=1"], {}, "pod-1", KEYS), "https://x/0.22.5")
    assert same != scripts.config_id(scripts.launch_script(["A=2"], {}, "pod-1", KEYS), "https://x/0.22.5")
    assert same != scripts.config_id(launch, "https://x/0.22.6")
    assert same != scripts.config_id(
        scripts.launch_script(["A=1"], {}, "pod-1", KEYS[:1]), "https://x/0.22.5"
    )


def test_job_outcome_tail_and_description() -> None:
    outcome = JobOutcome(state="failed", exit_status=3, output=bytearray(b"a\r\nb\r\nc\r\n"))
    assert outcome.output_tail(2) == "b\nc" and not outcome.succeeded
    assert outcome.describe() == "failed, exit status 3"
    assert JobOutcome(state="done", exit_status=0).succeeded and JobOutcome().output_tail(5) == ""
