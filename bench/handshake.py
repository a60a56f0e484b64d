"""Plugin start-up benchmark: our Python provider against the Go hashicorp/null provider.

Terraform starts each provider process three or four times per command, and every start costs the time
from exec to the go-plugin handshake line on stdout. This script execs both providers alternately with
the environment Terraform gives them (magic cookie, protocol versions, an AutoMTLS client certificate)
and reports the medians of

- exec -> handshake line (the target: ours <= 100 ms and <= 4x the Go provider), and
- exec -> first answered call (grpc.health.v1.Health/Check over mutual TLS), which also counts the work
  a server defers until after its handshake line.

Our provider runs twice: as Terraform runs it (the launcher ``lium-tf install`` writes, served by a
fork of the warm zygote its first start left behind) and cold (``python -I -m lium_provider``, what
every start costs with ``TFBRIDGE_ZYGOTE=0`` and what the very first start costs).

With ``--packaged DIR`` (an unpacked ``terraform-provider-lium_*.zip`` of ``make release``) the
self-contained provider runs too, warm (its launcher and zygote) and cold (``TFBRIDGE_ZYGOTE=0``).

Run from the repository root: ``.venv/bin/python -m bench.handshake [--runs 20] [--packaged DIR]``.
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
from lium_provider.cli import launcher_command
from tests.support.procs import private_zygotes
from tests.tfbridge.plugin_host import ClientIdentity, Handshake, plugin_env, read_handshake_line, stub
from tfbridge.proto import health_pb2, health_pb2_grpc

REPO_ROOT = Path(__file__).resolve().parent.parent
TARGET_MS = 100.0
TARGET_RATIO = 4.0


@dataclass(frozen=True)
class Start:
    handshake_ms: float
    first_call_ms: float


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
    parser.add_argument("--packaged", type=Path, help="an unpacked terraform-provider-lium_*.zip")
    args = parser.parse_args()
    ours = launcher_command()
    cold = [sys.executable, "-I", "-m", "lium_provider"]
    go_null = [str(null_provider_binary())]
    identity = ClientIdentity.generate()
    # Measure starts with bytecode caches present, as after a wheel install or any earlier run (an
    # editable checkout under PYTHONDONTWRITEBYTECODE would otherwise recompile every start).
    compileall.compile_dir(REPO_ROOT / "provider", quiet=1)

    load_before = os.getloadavg()[0]
    with (
        tempfile.TemporaryDirectory(prefix="handshake-bench-") as socket_dir,
        private_zygotes(Path(socket_dir) / "zygotes") as zygotes,
    ):
        env = plugin_env(identity, Path(socket_dir))
        cold_env = {**env, "TFBRIDGE_ZYGOTE": "0"}
        contenders = [("ours", ours, env), ("cold", cold, env), ("go", go_null, env)]
        if args.packaged:
            (packaged,) = args.packaged.absolute().glob("terraform-provider-lium_v*")
            contenders += [("pkg", [str(packaged)], env), ("pkgc", [str(packaged)], cold_env)]
        results: dict[str, list[Start]] = {name: [] for name, _, _ in contenders}
        for (
            _,
            command,
            start_env,
        ) in contenders:  # one unmeasured start each warms the page cache (and zygotes)
            measure_start(command, start_env, identity)
        deadline = time.monotonic() + 30
        # The first start of ours (and of the packaged provider) left a zygote behind.
        while len(list(zygotes.glob("*.sock"))) < (2 if args.packaged else 1):
            if time.monotonic() > deadline:
                raise SystemExit("no zygote came up after the first start")
            time.sleep(0.05)
        for run in range(args.runs):
            # Rotate who goes first so nobody always runs right after the same other.
            shift = run % len(contenders)
            for name, command, start_env in contenders[shift:] + contenders[:shift]:
                results[name].append(measure_start(command, start_env, identity))

    print(f"ours: {shlex.join(ours)}  (a fork of the warm zygote, as Terraform gets it)")
    print(f"cold: {shlex.join(cold)}  (TFBRIDGE_ZYGOTE=0, or the first start)")
    print(f"go:   {go_null[0]} (hashicorp/null {NULL_VERSION}, plugin protocol 5)")
    print(
        f"{args.runs} interleaved starts each; {os.cpu_count()} CPUs, load average {load_before:.2f} before"
    )
    ours_handshake, ours_first_call = report("ours", results["ours"])
    cold_handshake, cold_first_call = report("cold", results["cold"])
    go_handshake, go_first_call = report("go", results["go"])
    if args.packaged:
        print(f"pkg:  {packaged} (the self-contained provider, warm); pkgc: the same, TFBRIDGE_ZYGOTE=0")
        packaged_handshake, packaged_first_call = report("pkg", results["pkg"])
        packaged_cold_handshake, _ = report("pkgc", results["pkgc"])
        print(
            f"pkg/go: handshake {packaged_handshake / go_handshake:.2f}x, first call "
            f"{packaged_first_call / go_first_call:.2f}x; pkgc/go: handshake {packaged_cold_handshake / go_handshake:.2f}x"
        )
    ratio = ours_handshake / go_handshake
    print(f"ours/go: handshake {ratio:.2f}x, first call {ours_first_call / go_first_call:.2f}x")
    print(
        f"cold/go: handshake {cold_handshake / go_handshake:.2f}x, first call {cold_first_call / go_first_call:.2f}x"
    )
    met = ours_handshake <= TARGET_MS and ratio <= TARGET_RATIO
    print(
        f"target (handshake <= {TARGET_MS:.0f} ms and <= {TARGET_RATIO:.0f}x go): {'met' if met else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
