resource "lium_runner" "trainer" {
  pod_id       = lium_pod.gpu.id
  ssh_host_key = lium_pod.gpu.ssh_host_key

  # The runner's own sshd (the pod's port 10022) also accepts these keys.
  authorized_keys = [file("~/.ssh/id_ed25519.pub")]
  environment     = { HF_HOME = "/root/.cache/huggingface" }

  # Run once through the runner, as the image user, before the apply is done.
  smoke_test = ["nvidia-smi", "python3 -c 'import torch; assert torch.cuda.is_available()'"]

  timeouts {
    create = "15m"
  }
}

output "runner_ssh" {
  value = "ssh root@${lium_pod.gpu.ssh_host} -p ${lium_runner.trainer.runner_ssh_port}"
}
