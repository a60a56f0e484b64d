"""A job's code: the caller's directory as a tar, without what .gitignore files leave out, without git's
and Terraform's files (a state holds every secret of a stack), and refused over its bound."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from lium_provider.jobs.code import CodeTooLarge, pack_code


def names(archive: bytes) -> set[str]:
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        return {member.name for member in tar.getmembers()}


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_gitignored_files_and_terraforms_and_gits_files_are_left_out(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "train.py": "print('train')",
            "data/big.bin": "x",
            "data/keep.txt": "kept",
            ".gitignore": "data/*\n!data/keep.txt\n*.log\n",
            "run.log": "noise",
            "sub/.gitignore": "local.cfg\n",
            "sub/local.cfg": "mine",
            "sub/model.py": "pass",
            "terraform.tfstate": '{"secret": "s3cr3t"}',
            "terraform.tfstate.backup": "old",
            ".terraform/providers/x": "binary",
            ".git/config": "[core]",
            "cdktf.out/stacks/a/cdk.tf.json": "{}",
        },
    )
    packed = names(pack_code(tmp_path, 1024 * 1024))
    assert packed == {"train.py", "data/keep.txt", ".gitignore", "sub/.gitignore", "sub/model.py"}


def test_a_directory_over_the_bound_is_refused_naming_its_size_the_bound_and_its_largest_file(
    tmp_path: Path,
) -> None:
    write(tmp_path, {"weights.bin": "w" * 3 * 1024 * 1024, "train.py": "pass"})
    with pytest.raises(CodeTooLarge) as refused:
        pack_code(tmp_path, 2 * 1024 * 1024)
    message = str(refused.value)
    assert "3.0 MiB" in message and "2.0 MiB" in message and "weights.bin" in message, message
    assert "--code-limit-mib" in message and "--no-code" in message


def test_the_archive_extracts_to_the_same_files(tmp_path: Path) -> None:
    write(tmp_path, {"a/b/c.py": "print(1)", "top.txt": "t"})
    archive = pack_code(tmp_path, 1024 * 1024)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        member = tar.extractfile("a/b/c.py")
        assert member is not None and member.read() == b"print(1)"
