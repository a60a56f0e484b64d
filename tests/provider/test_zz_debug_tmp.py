from tests.provider.test_runner_terraform import TEMPLATE, RUNNER, PYTHON_IMAGE, BOOTSTRAP_DIR, the_pod, ssh_run, ssh_keypair, emulator, account, stack  # noqa
import pytest
@pytest.mark.parametrize("i", range(4))
def test_debug(stack, account, tmp_path, i):
    extra_key = ssh_keypair(tmp_path / "extra")
    extra_public = extra_key.with_suffix(".pub").read_text().strip()
    body = TEMPLATE % PYTHON_IMAGE + RUNNER % (
        f'authorized_keys = ["{extra_public}"]\n  environment = {{ STACK = "tf-runner" }}\n'
    )
    tf = stack(body)
    r = tf.apply(check=False)
    print(r.stderr)
    pod = the_pod(tf)
    if r.returncode:
      print(ssh_run(account, pod, f"ls -la {BOOTSTRAP_DIR}; cat {BOOTSTRAP_DIR}/runner.exit; tail -50 {BOOTSTRAP_DIR}/runner.log {BOOTSTRAP_DIR}/runner.log.1 {BOOTSTRAP_DIR}/supervisor.log /tmp/runner/*.log"))
    tf.destroy()
