"""The generated constructs and GpuStack, synthesized in-process with cdktf (JSON and HCL)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lium_constructs import (
    DataLiumOffers,
    DataLiumPod,
    DataLiumSshKeys,
    DockerCredential,
    GpuStack,
    LiumProvider,
    OfferFilter,
    Pod,
    RegistryAuth,
    Runner,
    SecretVariable,
    Template,
    cdk,
)
from lium_constructs._cdk import selected_cdk
from lium_constructs.generated.pod import PodTimeouts


@pytest.fixture
def stack(tmp_path: Path) -> cdk.TerraformStack:
    app = cdk.App(outdir=str(tmp_path))  # not Testing.app(): that one leaves a directory in /tmp
    return cdk.TerraformStack(app, "s")


def synth(stack: cdk.TerraformStack) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(cdk.Testing.synth(stack))
    return doc


def test_pod_arguments_blocks_and_meta_arguments(stack: cdk.TerraformStack) -> None:
    LiumProvider(stack, "lium")
    second = LiumProvider(stack, "eu", alias="eu", endpoint="https://eu.example/api")
    template = Template(stack, "t", name="t", image="python:3.11-slim", internal_ports=[22, 10022])
    Pod(
        stack,
        "p",
        name="gpu",
        template_id=template.id,
        gpu="H100",
        max_price_per_hour=2.5,
        regions=["us", "eu"],
        spot=False,
        timeouts=PodTimeouts(create="20m"),
        count=cdk.TerraformCount.of(2),
        depends_on=[template],
        lifecycle=cdk.TerraformResourceLifecycle(prevent_destroy=True),
        provider=second,
    )
    doc = synth(stack)
    assert doc["provider"]["lium"] == [{}, {"alias": "eu", "endpoint": "https://eu.example/api"}]
    pod = doc["resource"]["lium_pod"]["p"]
    assert pod == {
        "name": "gpu",
        "template_id": "${lium_template.t.id}",
        "gpu": "H100",
        "max_price_per_hour": 2.5,
        "regions": ["us", "eu"],
        "spot": False,
        "timeouts": {"create": "20m"},
        "count": 2,
        "depends_on": ["lium_template.t"],
        "lifecycle": {"prevent_destroy": True},
        "provider": "lium.eu",
    }
    assert doc["resource"]["lium_template"]["t"] == {
        "name": "t",
        "image": "python:3.11-slim",
        "internal_ports": [22, 10022],
    }


def test_provider_alias_can_be_set_after_construction(stack: cdk.TerraformStack) -> None:
    provider = LiumProvider(stack, "lium")
    provider.alias = "late"
    Template(stack, "t", name="t", image="ubuntu:22.04", provider=provider)
    doc = synth(stack)
    assert doc["provider"]["lium"] == [{"alias": "late"}]
    assert doc["resource"]["lium_template"]["t"]["provider"] == "lium.late"


def test_for_each_passes_through(stack: cdk.TerraformStack) -> None:
    LiumProvider(stack, "lium")
    names = cdk.TerraformIterator.from_list(["a", "b"])
    Template(stack, "t", name=cdk.Token.as_string(names.value), image="ubuntu:22.04", for_each=names)
    template = synth(stack)["resource"]["lium_template"]["t"]
    assert template["for_each"] == '${toset(["a", "b"])}'
    assert template["name"] == "${each.value}"


def test_secret_arguments_refuse_literals_and_take_references(stack: cdk.TerraformStack) -> None:
    with pytest.raises(ValueError, match="password_wo is secret"):
        DockerCredential(stack, "literal", username="u", password_wo="hunter2")
    with pytest.raises(ValueError, match="api_key is secret"):
        LiumProvider(stack, "literal-key", api_key="sk-literal")
    LiumProvider(stack, "lium")
    password = SecretVariable(stack, "password", name="registry_password")
    DockerCredential(stack, "c", username="u", password_wo=password.string_value, password_wo_version=1)
    text = cdk.Testing.synth(stack)
    assert "hunter2" not in text and "sk-literal" not in text
    doc = json.loads(text)
    assert list(doc["resource"]["lium_docker_credential"]) == ["c"], "a refused construct must not be added"
    assert doc["resource"]["lium_docker_credential"]["c"]["password_wo"] == "${var.registry_password}"
    assert doc["variable"]["registry_password"] == {
        "ephemeral": True,
        "nullable": False,
        "sensitive": True,
        "type": "string",
    }
    assert password.environment_variable == "TF_VAR_registry_password"


def test_computed_attribute_getters_are_references(stack: cdk.TerraformStack) -> None:
    LiumProvider(stack, "lium")
    template = Template(stack, "t", name="t", image="ubuntu:22.04")
    pod = Pod(stack, "p", name="p", template_id=template.id)
    runner = Runner(stack, "r", pod_id=pod.id, ssh_host_key=pod.ssh_host_key)
    offers = DataLiumOffers(stack, "o", gpu="H100")
    lookup = DataLiumPod(stack, "l", name="p")
    outputs = {
        "port": pod.ssh_port,
        "ports": pod.ports,
        "healthy": runner.healthy,
        "runner_port": runner.runner_ssh_port,
        "second_gpu": offers.offers.get(1).gpu,
        "all_offers": offers.offers.reference,
        "looked_up": lookup.price_per_hour,
    }
    for name, value in outputs.items():
        cdk.TerraformOutput(stack, name, value=value)
    values = {name: output["value"] for name, output in synth(stack)["output"].items()}
    assert values == {
        "port": "${lium_pod.p.ssh_port}",
        "ports": "${lium_pod.p.ports}",
        "healthy": "${lium_runner.r.healthy}",
        "runner_port": "${lium_runner.r.runner_ssh_port}",
        "second_gpu": "${data.lium_offers.o.offers[1].gpu}",
        "all_offers": "${data.lium_offers.o.offers}",
        "looked_up": "${data.lium_pod.l.price_per_hour}",
    }


def test_write_only_attributes_have_no_getter() -> None:
    assert not hasattr(DockerCredential, "password_wo")
    assert hasattr(DockerCredential, "password_wo_version")


def test_hcl_synthesis(stack: cdk.TerraformStack) -> None:
    LiumProvider(stack, "lium")
    password = SecretVariable(stack, "password", name="registry_password")
    credential = DockerCredential(stack, "c", username="u", password_wo=password.string_value)
    template = Template(
        stack,
        "t",
        name="t",
        image="ubuntu:22.04",
        environment={"A_B": "1"},
        docker_credential_id=credential.id,
    )
    Pod(stack, "p", name="p", template_id=template.id, spot=True, timeouts=PodTimeouts(delete="5m"))
    hcl = " ".join(cdk.Testing.synth_hcl(stack).split())  # whitespace does not matter here
    for fragment in (
        'variable "registry_password" { type = string sensitive = true nullable = false ephemeral = true }',
        'password_wo = "${var.registry_password}"',
        'environment = { A_B = "1" }',
        "spot = true",
        'timeouts { delete = "5m" }',
    ):
        assert fragment in hcl, f"{fragment!r} missing from:\n{hcl}"


def test_gpu_stack_per_pod_resources_and_outputs(stack: cdk.TerraformStack) -> None:
    LiumProvider(stack, "lium")
    GpuStack(
        stack,
        "train",
        name="training",
        count=2,
        image="registry.example/team/img:1",
        registry=RegistryAuth(username="bot"),
        offer=OfferFilter(gpu="RTX 4090", min_memory_gib=32, max_price_per_hour=1.5),
        output_prefix="train_",
    )
    doc = synth(stack)
    resources = doc["resource"]
    for type_name in ("lium_docker_credential", "lium_template", "lium_pod", "lium_runner"):
        assert sorted(resources[type_name]) == ["train_0", "train_1"], type_name
    pod = resources["lium_pod"]["train_1"]
    assert pod["name"] == "training-1", "Lium names come from `name`, Terraform addresses from the id"
    assert pod["template_id"] == "${lium_template.train_1.id}"
    assert (pod["gpu"], pod["min_memory_gib"], pod["max_price_per_hour"]) == ("RTX 4090", 32, 1.5)
    assert (
        resources["lium_template"]["train_1"]["docker_credential_id"]
        == "${lium_docker_credential.train_1.id}"
    )
    assert resources["lium_runner"]["train_0"]["ssh_host_key"] == "${lium_pod.train_0.ssh_host_key}"
    assert doc["output"]["train_stack_price_per_hour"]["value"] == (
        "${sum([lium_pod.train_0.price_per_hour, lium_pod.train_1.price_per_hour])}"
    )
    assert sorted(doc["output"]) == [
        "train_known_hosts",
        "train_price_per_hour",
        "train_run_command",
        "train_runner_ports",
        "train_ssh_commands",
        "train_stack_price_per_hour",
    ]
    assert doc["output"]["train_run_command"]["value"] == (
        "lium-tf run --dir cdktf.out/stacks/s --target lium_runner.train_0 --target lium_runner.train_1 --"
    )
    assert doc["output"]["train_known_hosts"]["value"] == (
        '${join("\\n", [lium_pod.train_0.known_hosts, lium_pod.train_1.known_hosts])}'
    )


def test_gpu_stack_without_runner_and_with_no_pods(stack: cdk.TerraformStack) -> None:
    LiumProvider(stack, "lium")
    GpuStack(stack, "empty", image="ubuntu:22.04", count=0, runner=None)
    doc = synth(stack)
    assert "resource" not in doc
    assert doc["output"]["stack_price_per_hour"]["value"] == 0
    assert "runner_ports" not in doc["output"]


def test_gpu_stack_termination_hours_goes_to_every_pod(stack: cdk.TerraformStack) -> None:
    LiumProvider(stack, "lium")
    GpuStack(stack, "bounded", image="ubuntu:22.04", count=2, termination_hours=12, runner=None)
    GpuStack(stack, "open", image="ubuntu:22.04", count=1, runner=None, output_prefix="open_")
    pods = synth(stack)["resource"]["lium_pod"]
    hours = {name: pod.get("termination_hours") for name, pod in pods.items()}
    assert hours == {"bounded_0": 12, "bounded_1": 12, "open_0": None}, "unset: the provider's default"


def test_gpu_stack_refuses_a_volume_for_several_pods(stack: cdk.TerraformStack) -> None:
    with pytest.raises(ValueError, match="one pod at a time"):
        GpuStack(stack, "gpu", image="ubuntu:22.04", count=2, volume_id="vol-1")


def test_cdk_switch_reads_lium_cdk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LIUM_CDK", raising=False)
    assert selected_cdk() == "cdktf"
    monkeypatch.setenv("LIUM_CDK", "cdktn")
    assert selected_cdk() == "cdktn"
    monkeypatch.setenv("LIUM_CDK", "pulumi")
    with pytest.raises(ImportError, match="LIUM_CDK='pulumi' is not supported"):
        selected_cdk()


def test_gpu_stack_serves_ports_and_shares_the_pods_with_a_team(stack: cdk.TerraformStack) -> None:
    LiumProvider(stack, "lium")
    team = DataLiumSshKeys(stack, "team", name_prefix="ml-")
    GpuStack(
        stack,
        "serve",
        image="vllm/vllm-openai:v0.6.0",
        count=2,
        serve=[8000],
        authorized_keys=team.keys.every("public_key"),
        entrypoint=None,  # the image's own server
        startup_commands=None,
    )
    GpuStack(
        stack,
        "nodes",
        image="daturaai/lium-cluster:1.2.0",
        nodes=2,
        serve=[6006],
        startup_commands="-c 'tensorboard --logdir /mnt/runs --port 6006 --bind_all'",
        runner=None,
        output_prefix="nodes_",
    )
    doc = synth(stack)
    resources = doc["resource"]
    assert resources["lium_template"]["serve_1"]["internal_ports"] == [22, 10022, 8000]
    pod = resources["lium_pod"]["serve_1"]
    assert pod["wait_for_ports"] == [8000]
    assert pod["authorized_keys"] == "${data.lium_ssh_keys.team.keys[*].public_key}"
    assert doc["output"]["served_addresses"]["value"][1] == {
        "8000": '${lium_pod.serve_1.ssh_host}:${lium_pod.serve_1.ports["8000"]}'
    }
    assert resources["lium_template"]["nodes"]["internal_ports"] == [22, 10022, 6006]
    assert resources["lium_cluster"]["nodes"]["wait_for_ports"] == [6006]
    assert doc["output"]["nodes_served_addresses"]["value"][0] == {
        "6006": '${lium_cluster.nodes.nodes[0].ssh_host}:${lium_cluster.nodes.nodes[0].ports["6006"]}'
    }


@pytest.mark.parametrize("serve", [[22], [8000, 8000], [0], [70000]])
def test_gpu_stack_refuses_bad_served_ports(stack: cdk.TerraformStack, serve: list[int]) -> None:
    with pytest.raises(ValueError, match="serve"):
        GpuStack(stack, "gpu", image="ubuntu:22.04", serve=serve, entrypoint=None, startup_commands=None)


def test_gpu_stack_refuses_to_serve_with_a_container_that_only_sleeps(stack: cdk.TerraformStack) -> None:
    with pytest.raises(ValueError, match="sleep infinity"):
        GpuStack(stack, "gpu", image="ubuntu:22.04", serve=[8000])


def test_gpu_stack_refuses_keys_and_ports_given_in_the_wrong_shape(stack: cdk.TerraformStack) -> None:
    with pytest.raises(ValueError, match="a list of public key lines"):
        GpuStack(stack, "a", image="ubuntu:22.04", authorized_keys="ssh-ed25519 AAAA")
    with pytest.raises(ValueError, match="a list of ports"):
        GpuStack(stack, "b", image="ubuntu:22.04", serve="8000", entrypoint=None, startup_commands=None)
    with pytest.raises(ValueError, match="rendezvous"):
        GpuStack(
            stack, "c", image="daturaai/lium-cluster:1.2.0", nodes=2, serve=[29500], startup_commands=None
        )
