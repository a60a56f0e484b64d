"""Shell lines the docs give readers to paste work as written on a fresh machine.

Every line of a shell block that makes an SSH key is run with a home directory that has no ``~/.ssh``
(a fresh CI runner's), and must leave the key pair there, private to the user; run again, it keeps the
key it made. Every CDK CLI command works offline as written: it skips the provider lock (which asks the
public registry), and its block or page turns Terraform's version check off.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path

from tests.test_doc_references import REPO, hand_written_files

SHELL_BLOCK = re.compile(r"```(?:sh|shell|bash)\n")


def key_making_lines() -> list[tuple[str, str]]:
    """``(where, line)`` for every line of a Markdown shell block that runs ssh-keygen."""
    found = []
    for path in hand_written_files():
        if path.suffix != ".md":
            continue
        for block in SHELL_BLOCK.split(path.read_text(encoding="utf-8"))[1:]:
            for line in block.split("```")[0].splitlines():
                if "ssh-keygen" in line:
                    found.append((str(path.relative_to(REPO)), line.split("   #")[0]))
    return found


def test_every_key_making_line_works_where_no_ssh_directory_exists(tmp_path: Path) -> None:
    lines = key_making_lines()
    assert len(lines) >= 4  # the emulator guide and the quickstart, HCL and gitops READMEs
    for number, (where, line) in enumerate(lines):
        home = tmp_path / f"home{number}"
        home.mkdir()
        env = {**os.environ, "HOME": str(home)}
        for attempt in ("first", "second"):
            result = subprocess.run(
                ["bash", "-c", line],
                env=env,
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                timeout=60,
            )
            assert result.returncode == 0, f"{where}: {line!r} failed on its {attempt} run:\n{result.stderr}"
            if attempt == "first":
                made = (home / ".ssh" / "id_ed25519").read_bytes()
        key = home / ".ssh" / "id_ed25519"
        assert key.read_bytes() == made, f"{where}: the second run replaced the key"
        assert (home / ".ssh" / "id_ed25519.pub").is_file()
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
        assert stat.S_IMODE(key.parent.stat().st_mode) == 0o700, f"{where}: ~/.ssh is not private"


CDK_COMMAND = re.compile(r"\b(?:cdktf|cdktn) (?:deploy|destroy)\b")


def test_every_cdk_cli_command_of_the_docs_runs_offline_as_written() -> None:
    commands = 0
    for path in hand_written_files():
        if path.suffix != ".md":
            continue
        text = path.read_text(encoding="utf-8")
        for block in SHELL_BLOCK.split(text)[1:]:
            body = block.split("```")[0]
            for line in body.splitlines():
                if not CDK_COMMAND.search(line) or line.lstrip().startswith("#"):
                    continue
                commands += 1
                where = f"{path.relative_to(REPO)}: {line.strip()!r}"
                assert "--skip-provider-lock" in line, f"{where} asks the public registry for a lock"
                assert "CHECKPOINT_DISABLE=1" in body or "quickstart" in text, (
                    f"{where}: its block does not turn Terraform's version check off"
                )
    assert (
        commands >= 8
    )  # the quickstart, fleet, volume, private-registry and distributed examples, the guide
