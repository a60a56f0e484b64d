# `terraform test` for the module: plan-only checks first (nothing is rented), then a real pod, which
# `terraform test` destroys when the file's runs are done.

variables {
  name = "tftest"
}

run "plan_names_the_template_and_the_pod" {
  command = plan

  assert {
    condition     = lium_pod.this.name == "tftest-0"
    error_message = "The pod is named after the module's name."
  }

  assert {
    condition     = lium_template.this.image == "python:3.11-slim"
    error_message = "The template runs the default image."
  }
}

run "a_name_lium_cannot_take_is_refused" {
  command = plan

  variables {
    name = "Not A Name"
  }

  expect_failures = [var.name]
}

run "apply_rents_a_running_pod" {
  command = apply

  assert {
    condition     = lium_pod.this.status == "RUNNING"
    error_message = "The pod is running once the apply is done."
  }

  assert {
    condition     = startswith(output.ssh, "ssh -o UserKnownHostsFile=known_hosts -p ") && output.price_per_hour > 0
    error_message = "The outputs give an SSH command and a price."
  }
}
