"""Values the launcher and the rest of the bridge share, each defined here and nowhere else.

This file imports nothing, and must not: :mod:`tfbridge.serving.launch` runs as a script with the standard library
only and without the ``tfbridge`` package on ``sys.path`` (``python -I -S .../launch.py``), so it reads
this file by path and executes it; every other module imports it as ``tfbridge.serving.constants``.
"""

# go-plugin's handshake cookie for Terraform providers (terraform-plugin-go's tfprotov6 handshake config).
# Terraform sets it in every provider's environment; a process started without it is not serving Terraform.
MAGIC_COOKIE_KEY = "TF_PLUGIN_MAGIC_COOKIE"
MAGIC_COOKIE_VALUE = "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2"

# The tfplugin protocol the bridge serves: the second field of its handshake line, what Terraform lists in
# PLUGIN_PROTOCOL_VERSIONS, and the ProtocolVersion of a provider Terraform attaches to.
PROVIDER_PROTOCOL_VERSION = 6

# The launcher starts the provider program with ``ZYGOTE_FLAG SOCKET IDLE_SECONDS`` to make it a zygote.
ZYGOTE_FLAG = "--tfbridge-zygote"
# ``COMMAND_FLAG NAME ARGS...`` runs one of the program's side commands instead of serving Terraform, warm
# from the zygote like any start (see tfbridge.serving.commands).
COMMAND_FLAG = "--tfbridge-command"

# The exchange between a launcher and the zygote's forked server (see tfbridge.serving.launch): each message starts
# with one of these letters.
FORKED = "P"  # zygote to launcher, ``P<pid>\n``: a forked server runs for this start
STALE = "S"  # zygote to launcher, ``S\n``: the zygote's sources changed and it is going away
EXITED = "X"  # server to launcher, ``X<exit code>\n``: the server is exiting with that code
ORPHANED = "O"  # launcher to server: Terraform is gone
# The environment variable through which a cold-started server learns the descriptor of its end of the
# socket to its launcher (see tfbridge.serving.hosts).
LAUNCHER_FD_ENV = "TFBRIDGE_LAUNCHER_FD"
# The environment variable through which a server learns the pid of the Terraform process it serves
# (the launcher's parent; see tfbridge.command).
TERRAFORM_PID_ENV = "TFBRIDGE_TERRAFORM_PID"
# Set (to anything) in a start's environment, it asks the launcher to serve only from a warm zygote: with
# none to serve it, the launcher exits at once without a handshake and starts nothing (see
# tfbridge.serving.reattach, which starts providers ahead of a command only when that is cheap).
WARM_ONLY_ENV = "TFBRIDGE_WARM_ONLY"
