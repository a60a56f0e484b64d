"""``lium-tf``, ``lium-emulator`` and the contributor tools (``python -m devtools``) explain themselves: every option has help, every default is shown,
``--version`` answers, and no description shows source markup (reST's double backticks).

The help is what a new user reads first; these run the installed console scripts (and the checkout's
module), as the user does.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from devtools.__main__ import build_parser as devtools_parser
from lium_emulator import __version__ as emulator_version
from lium_emulator.cli import _parser as emulator_parser
from lium_provider import __version__ as provider_version
from lium_provider.cli import build_parser

SCRIPTS = Path(sys.executable).parent
PARSERS = {"lium-tf": build_parser, "lium-emulator": emulator_parser, "devtools": devtools_parser}
# How each is run: the console scripts as installed, the contributor tools as a module of the checkout.
COMMANDS = {
    "lium-tf": [str(SCRIPTS / "lium-tf")],
    "lium-emulator": [str(SCRIPTS / "lium-emulator")],
    "devtools": [sys.executable, "-m", "devtools"],
}


def _help(*args: str) -> str:
    result = subprocess.run(
        [*COMMANDS[args[0]], *args[1:], "--help"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return " ".join(result.stdout.split())  # argparse wraps lines; compare words


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(commands.choices)


CASES = [(script, name) for script, make in PARSERS.items() for name in _subcommands(make())]


@pytest.mark.parametrize(("script", "command"), CASES, ids=[f"{s} {c}" for s, c in CASES])
def test_every_option_has_help_and_shows_its_default(script: str, command: str) -> None:
    sub = _subcommands(PARSERS[script]())[command]
    text = _help(script, command)
    assert sub.description, f"{script} {command} has no description"
    assert "``" not in text, f"{script} {command} --help shows source markup"
    for action in sub._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        name = "/".join(action.option_strings) or action.dest
        assert action.help, f"{script} {command}: {name} has no help"
        shown = action.default not in (None, False, argparse.SUPPRESS)
        if shown and action.option_strings:
            # argparse may wrap a long default at a hyphen: compare without any whitespace.
            unwrapped = "".join(text.split())
            assert f"(default:{action.default})".replace(" ", "") in unwrapped, (
                f"{script} {command}: {name} hides its default"
            )


@pytest.mark.parametrize(
    ("script", "version"), [("lium-tf", provider_version), ("lium-emulator", emulator_version)]
)
def test_version(script: str, version: str) -> None:
    result = subprocess.run([str(SCRIPTS / script), "--version"], capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout.strip()) == (0, f"{script} {version}")


@pytest.mark.parametrize("script", PARSERS)
def test_top_level_help_has_a_plain_description(script: str) -> None:
    text = _help(script)
    assert "``" not in text and ":mod:" not in text
    assert all(name in text for name in _subcommands(PARSERS[script]()))
