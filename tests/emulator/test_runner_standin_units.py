"""In-process checks of the runner stand-in's pieces: the served script, multipart, archives, history."""

from __future__ import annotations

import io
import os
import random
import tarfile
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from lium_emulator.runner_standin import DEFAULT_VERSION, dstack_runner, runner_standin_script


def test_script_is_a_standalone_python_program_reporting_its_version() -> None:
    script = runner_standin_script("0.22.5")
    assert script.startswith(b"#!/usr/bin/python3\n")
    compile(script, "dstack-runner", "exec")
    assert b'\nVERSION = "0.22.5"  #' in script
    assert b'VERSION = "1.2.3rc1"' in runner_standin_script("1.2.3rc1")
    assert f'VERSION = "{DEFAULT_VERSION}"'.encode() in runner_standin_script()
    with pytest.raises(ValueError):
        runner_standin_script('1"; import os')


def test_multipart_archive_round_trips_binary_data() -> None:
    payload = random.Random(7).randbytes(20000) + b"\r\n--tricky\r\n\r\n"
    request = httpx.Request(
        "POST", "http://runner/api/upload_archive", files={"archive": ("b1f3-id", payload)}
    )
    body = request.read()
    assert dstack_runner.multipart_archive(request.headers["Content-Type"], body) == ("b1f3-id", payload)
    other = httpx.Request("POST", "http://runner/", files={"other": ("x", b"1")})
    assert dstack_runner.multipart_archive(other.headers["Content-Type"], other.read()) is None
    assert dstack_runner.multipart_archive("application/json", body) is None


def tar_with(*members: tarfile.TarInfo) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for member in members:
            tar.addfile(member, io.BytesIO(b"x" * member.size) if member.isfile() else None)
    return buffer.getvalue()


def member(name: str, link: str | None = None) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    if link is None:
        info.size = 1
    else:
        info.type, info.linkname = tarfile.SYMTYPE, link
    return info


@pytest.mark.parametrize(
    "bad",
    [
        member("../escape"),
        member("/etc/absolute"),
        member("a/../../up"),
        member("link", "../../etc"),
        member("abs", "/etc"),
    ],
)
def test_archives_cannot_write_outside_their_directory(tmp_path: Path, bad: tarfile.TarInfo) -> None:
    archive = tmp_path / "bad.tar"
    archive.write_bytes(tar_with(bad))
    user = dstack_runner.JobUser("root", os.getuid(), os.getgid(), [os.getgid()], "/root")
    with pytest.raises(dstack_runner.JobSetupError, match="unsafe path"):
        dstack_runner.extract_tar(archive, str(tmp_path / "out"), user)


def test_archives_extract_with_relative_links(tmp_path: Path) -> None:
    archive = tmp_path / "good.tar"
    archive.write_bytes(tar_with(member("src/main.py"), member("src/lib/alias", "../main.py")))
    user = dstack_runner.JobUser("root", os.getuid(), os.getgid(), [os.getgid()], "/root")
    dstack_runner.extract_tar(archive, str(tmp_path / "out"), user)
    assert (tmp_path / "out" / "src" / "lib" / "alias").read_text() == "x"


def test_history_timestamps_increase_and_pulls_resume_where_they_left() -> None:
    history = dstack_runner.History()
    history.add_state("running")
    for index in range(50):
        history.add_job_log(f"line {index}\n".encode())
    first = history.since(0)
    stamps = [event["timestamp"] for event in first["job_states"] + first["job_logs"]]
    assert stamps == sorted(set(stamps)) and first["last_updated"] == stamps[-1]
    history.add_state("done", exit_status=0)
    second = history.since(first["last_updated"])
    assert [event["state"] for event in second["job_states"]] == ["done"]
    assert second["job_logs"] == [] and second["last_updated"] > first["last_updated"]


def test_job_user_resolution() -> None:
    root = dstack_runner.resolve_user(None)
    assert (root.name, root.uid) == ("root", 0)
    assert dstack_runner.resolve_user({"uid": 0, "gid": 0}).groups == [0]
    with pytest.raises(dstack_runner.JobSetupError, match="no such user"):
        dstack_runner.resolve_user({"username": "no-such-user-here"})
    assert dstack_runner.expand_path("~/files", "/work", "/home/app") == "/home/app/files"
    assert dstack_runner.expand_path("repo", "/work", "/home/app") == "/work/repo"


def test_the_final_pull_lets_the_runner_exit_only_once_its_answer_is_written(tmp_path: Path) -> None:
    # The runner exits as soon as the final pull is marked, and its handler threads with it: marking
    # it before the answer is written cut that answer short ("peer closed connection without sending
    # complete message body").
    executor = dstack_runner.Executor(tmp_path, ssh_port=0)
    executor.state = "wait_logs_finished"
    assert executor.pull(0)["has_more"] is False
    assert not executor.final_pull.is_set(), "reading the final state is not yet answering it"
    server = ThreadingHTTPServer(("127.0.0.1", 0), dstack_runner.make_handler(executor))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        answer = httpx.get(f"http://127.0.0.1:{server.server_address[1]}/api/pull", params={"timestamp": 0})
        assert answer.status_code == 200 and answer.json()["has_more"] is False
        assert executor.final_pull.wait(5), "the final pull, answered, was not marked"
    finally:
        server.shutdown()
        server.server_close()
