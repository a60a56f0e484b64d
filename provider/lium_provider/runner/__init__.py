"""The stock dstack runner on a Lium pod: started over root SSH, supervised, health-checked and stopped.

dstack's Lium backend starts ``dstack-runner`` through the pod's root SSH with the environment and working
directory of the pod's PID 1 (SSH replaced both), and leaves the runner to drop privileges to the image
user. ``lium_runner`` does the same declaratively:

* :mod:`.scripts` — the shell that runs on the pod (probe, fetch, launch, supervise, stop), built here
  and parsed here, so it is unit-tested without a pod;
* :mod:`.pod_ssh` — one verified root SSH connection (pinned host key) with commands, SFTP upload and
  HTTP to the runner through a ``direct-tcpip`` tunnel;
* :mod:`.task_api` — the runner's job API as dstack's server uses it (healthcheck, submit, run, pull);
* :mod:`.bootstrap` — the idempotent sequence that ties them together.

Nothing here imports paramiko at module level except :mod:`.pod_ssh`, which the resource loads only when
it talks to a pod (Terraform starts the provider several times per command).
"""
