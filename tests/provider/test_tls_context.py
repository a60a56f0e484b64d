"""One TLS context per process and trust setting, where a setting is the file it names from here."""

from __future__ import annotations

import shutil
from pathlib import Path

import certifi
import pytest

from lium_provider.api.transport import tls_context


def test_a_relative_bundle_is_read_from_the_working_directory_and_again_when_rewritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        shutil.copy(certifi.where(), tmp_path / name / "ca.pem")
    monkeypatch.setenv("SSL_CERT_FILE", "ca.pem")
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.chdir(tmp_path / "one")
    first = tls_context()
    assert tls_context() is first, "the same setting built a second context"
    monkeypatch.chdir(tmp_path / "two")
    assert tls_context() is not first, "another directory's bundle reused the first one's context"
    monkeypatch.chdir(tmp_path / "one")
    (tmp_path / "one" / "ca.pem").write_text((tmp_path / "two" / "ca.pem").read_text() + "\n")
    assert tls_context() is not first, "a rewritten bundle kept its old context"
