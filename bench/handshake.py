"""Plugin start-up benchmark: our Python provider against the Go hashicorp/null provider.

Terraform starts each provider process three or four times per command, and every start costs the time
from exec to the go-plugin handshake line on stdout. This script execs both providers alternately with
the environment Terraform gives them (magic cookie, protocol versions, an AutoMTLS client certificate)
and reports the medians of

- exec -> handshake line (the target: ours <= 100 ms and <= 4x the Go provider), and
- exec -> first answered call (grpc.health.v1.Health/Check over mutual TLS), which also counts the work
  a server defers until after its handshake line.

Run from the repository root: ``.venv/bin/python -m bench.handshake [--runs 20] [--ours "CMD ..."]``.
"""

from __future__ import annotations

import argparse
import compileall
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.null_provider import VERSION as NULL_VERSION
from bench.null_provider import null_provider_binary
from tests.tfbridge.plugin_host import ClientIdentity, Handshake, plugin_env, read_handshake_line, stub
from tfbridge.proto import health_pb2, health_pb2_grpc

REPO_ROOT = Path(__file__).resolve().parent.parent
VENV_PYTHON = REPO_ROOT / ".venv" / "bin" / "python"
TARGET_MS = 100.0
TARGET_RATIO = 4.0


@dataclass(frozen=True)
class Start:
    handshake_ms: float
    first_call_ms: float


def default_ours() -> list[str]:
    """The Lium provider as Terraform runs it, or the transport's test provider before that exists."""
    if (REPO_ROOT / "provider" / "lium_provider" / "__main__.py").is_file():
        return [str(VENV_PYTHON), "-m", "lium_provider"]
    return [str(VENV_PYTHON), str(REPO_ROOT / "tests" / "tfbridge" / "serve_empty_provider.py")]


def measure_start(command: list[str], env: dict[str, str], identity: ClientIdentity) -> Start:
    started = time.perf_counter()
    process = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    try:
        handshake = Handshake.parse(read_handshake_line(process))
        handshake_ms = (time.perf_counter() - started) * 1000
        with handshake.channel(identity) as channel:
            stub(health_pb2_grpc.HealthStub, channel).Check(
                health_pb2.HealthCheckRequest(service="plugin"), timeout=10
            )
        first_call_ms = (time.perf_counter() - started) * 1000
    finally:
        process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()
    # A killed Go provider leaves its socket behind (ours lives in PLUGIN_UNIX_SOCKET_DIR, removed later).
    Path(handshake.address).unlink(missing_ok=True)
    return Start(handshake_ms, first_call_ms)


def report(name: str, starts: list[Start]) -> tuple[float, float]:
    handshake = statistics.median(s.handshake_ms for s in starts)
    first_call = statistics.median(s.first_call_ms for s in starts)
    spread = f"min {min(s.handshake_ms for s in starts):.1f}, max {max(s.handshake_ms for s in starts):.1f}"
    print(
        f"{name:>4}: exec->handshake median {handshake:6.1f} ms ({spread}); "
        f"exec->first call median {first_call:6.1f} ms"
    )
    return handshake, first_call


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--ours", type=shlex.split, help="command that starts our provider")
    args = parser.parse_args()
    ours: list[str] = args.ours or default_ours()
    go_null = [str(null_provider_binary())]
    identity = ClientIdentity.generate()
    # Measure starts with bytecode caches present, as after a wheel install or any earlier run (an
    # editable checkout under PYTHONDONTWRITEBYTECODE would otherwise recompile every start).
    compileall.compile_dir(REPO_ROOT / "provider", quiet=1)
    compileall.compile_dir(REPO_ROOT / "tests" / "tfbridge", quiet=1)

    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="handshake-bench-") as socket_dir:
        env = plugin_env(identity, Path(socket_dir))
        results: dict[str, list[Start]] = {"ours": [], "go": []}
        contenders = [("ours", ours), ("go", go_null)]
        for _, command in contenders:  # one unmeasured start each warms the page cache
            measure_start(command, env, identity)
        for run in range(args.runs):
            # Alternate who goes first so neither always runs right after the other.
            for name, command in contenders if run % 2 == 0 else contenders[::-1]:
                results[name].append(measure_start(command, env, identity))

    print(f"ours: {shlex.join(ours)}")
    print(f"go:   {go_null[0]} (hashicorp/null {NULL_VERSION}, plugin protocol 5)")
    print(
        f"{args.runs} interleaved starts each; {os.cpu_count()} CPUs, load average {load_before:.2f} before"
    )
    ours_handshake, ours_first_call = report("ours", results["ours"])
    go_handshake, go_first_call = report("go", results["go"])
    ratio = ours_handshake / go_handshake
    print(f"ours/go: handshake {ratio:.2f}x, first call {ours_first_call / go_first_call:.2f}x")
    met = ours_handshake <= TARGET_MS and ratio <= TARGET_RATIO
    print(
        f"target (handshake <= {TARGET_MS:.0f} ms and <= {TARGET_RATIO:.0f}x go): {'met' if met else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
