"""Multi-node clusters through Lium's own SDK and CLI (``lium-io``, unchanged): the fabrics on offer,
an all-or-nothing rental of whole nodes, the members' overlay addresses reaching each other, removal
of every member at once, and the refusals of orders Lium does not take."""

import json
import shlex
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

import httpx
import pytest
from lium.sdk import Cluster, ClusterOffer, LiumError, LiumNotFoundError, PodStartError

from lium_emulator.catalogs.images import CLUSTER_IMAGE_REPOSITORY
from lium_emulator.catalogs.nodes import Catalog
from lium_emulator.launcher import RunningEmulator, launch
from tests.emulator.sdk_user import SdkUser
from tests.emulator.testkit import FAST_TIMINGS, wait_gone, wait_until

pytestmark = pytest.mark.sandbox  # members are real pod sandboxes

CATALOG = Catalog.load(None)


def _offer_with_free_nodes(user: SdkUser, count: int) -> ClusterOffer:
    offers = [o for o in user.lium.clusters() if o.free_count >= count]
    assert offers, f"no fabric with {count} free nodes: {user.lium.clusters()}"
    return offers[0]


def _up(user: SdkUser, count: int = 2, **kwargs: Any) -> Cluster:
    offer = _offer_with_free_nodes(user, count)
    return user.lium.up_cluster(
        [n.id for n in offer.cheapest(count)],
        name="train-" + uuid.uuid4().hex[:6],
        ssh_keys=[user.public_key],
        **kwargs,
    )


def _probe_ssh(user: SdkUser, pod: Any, host: str, port: int) -> str:
    """What the pod reads first from ``host:port`` (an SSH server's banner), run inside the pod."""
    script = (
        f"import socket; s = socket.create_connection(({host!r}, {port}), timeout=10); "
        "print(s.recv(64).decode(errors='replace').strip())"
    )
    result = user.lium.exec(pod, command=f"python3 -c {shlex.quote(script)}")
    assert result["success"], result
    return str(result["stdout"]).strip()


def test_the_default_catalog_offers_two_fabrics_of_free_nodes(user: SdkUser) -> None:
    offers = user.lium.clusters()
    assert len([o for o in offers if o.free_count >= 2]) >= 2, offers
    assert {o.fabric_type for o in offers} == {"infiniband", "roce"}
    for offer in offers:
        on_fabric = [n for n in CATALOG.nodes.values() if n.fabric_id == offer.fabric_id]
        assert offer.node_count == len(on_fabric)
        assert {n.id for n in offer.nodes} <= {n.id for n in on_fabric}
        assert all(n.gpu_count == n.available_gpu_count for n in offer.nodes), "members are taken whole"
    assert user.lium.cluster_offer(offers[0].fabric_id[:6]) == offers[0]
    assert user.lium.cluster_template().docker_image == CLUSTER_IMAGE_REPOSITORY


def test_up_wait_overlay_and_rm_through_the_sdk(user: SdkUser) -> None:
    cluster = _up(user, 2)
    assert cluster.size == 2
    ready = user.lium.wait_cluster_ready(cluster, timeout=90, poll_interval=1)
    assert [p.cluster_node_index for p in ready.pods] == [0, 1]
    assert [p.cluster_overlay_ip for p in ready.pods] == ["10.42.0.1", "10.42.0.2"]
    assert ready.master_addr == "10.42.0.1"
    assert len({p.name for p in ready.pods}) == 1, "every member has the cluster's pod name"
    node0, node1 = ready.pods
    assert _probe_ssh(user, node0, str(node1.cluster_overlay_ip), 22).startswith("SSH-2.0-")
    assert _probe_ssh(user, node1, str(node0.cluster_overlay_ip), 22).startswith("SSH-2.0-")
    # the members are no longer on offer, and they show as one cluster of the caller's
    taken = {p.executor.id for p in ready.pods if p.executor is not None}
    assert len(taken) == 2
    assert not taken & {n.id for o in user.lium.clusters() for n in o.nodes}
    assert [c.id for c in user.lium.my_clusters()] == [cluster.id]
    assert user.lium.cluster(cluster.id[:8]).id == cluster.id

    results = user.lium.rm_cluster(ready)
    assert sorted(r["node_rank"] for r in results) == [0, 1]
    assert all(r["success"] for r in results), results
    for pod in ready.pods:
        wait_gone(user.http, pod.id)
    with pytest.raises(LiumNotFoundError):
        user.lium.rm_cluster(ready)
    assert taken <= {n.id for o in user.lium.clusters() for n in o.nodes}, "the nodes are free again"


def test_one_member_failing_releases_the_whole_cluster(
    user: SdkUser, set_faults: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    set_faults(
        {
            "rules": [
                {"method": "POST", "path": "/executors/cluster/rent", "kind": "creation_failed", "first": 1}
            ]
        }
    )
    cluster = _up(user, 2)
    failed, released = sorted(
        (p for p in cluster.pods), key=lambda p: p.cluster_node_index or 0, reverse=True
    )
    wait_until(lambda: _status(user.http, failed.id) == "CREATION_FAILED", what="the last member to fail")
    wait_gone(user.http, released.id)
    events = user.http.get(f"/pods/{released.id}/events").json()
    assert any(e.get("reason") == "cluster_member_failed" for e in events), events
    statement = user.http.get(f"/pods/{failed.id}").json()
    assert statement["status"] == "CREATION_FAILED"
    with pytest.raises(PodStartError, match=r"CREATION_FAILED|vanished"):
        user.lium.wait_cluster_ready(cluster, timeout=5, poll_interval=1)
    # billed only for what ran: the failed member nothing, the released one its moment of running
    report = httpx.get(
        f"{user.emulator.root_url}/_emulator/resources",
        params={"user_id": user.http.get("/users/me").json()["id"]},
        headers=user.emulator.admin_headers,
        timeout=30,
    ).json()
    billed = {p["id"]: p for p in report["accounts"][0]["pods"]}
    assert billed[failed.id]["billed_seconds"] == 0
    ran = billed[released.id]
    assert (
        ran["running_at"] is None
        or ran["billed_seconds"]
        <= (
            datetime.fromisoformat(ran["deleting_at"]) - datetime.fromisoformat(ran["running_at"])
        ).total_seconds()
        + 0.001
    )


def _status(http: httpx.Client, pod_id: str) -> str | None:
    response = http.get(f"/pods/{pod_id}")
    return str(response.json()["status"]) if response.status_code == 200 else None


def _rent(http: httpx.Client, body: dict[str, Any], key: str | None = None) -> httpx.Response:
    headers = {"Idempotency-Key": key} if key else {}
    return http.post("/executors/cluster/rent", json=body, headers=headers)


def _order(user: SdkUser, nodes: list[str], template_id: str | None = None) -> dict[str, Any]:
    return {
        "pod_name": "order-" + uuid.uuid4().hex[:6],
        "template_id": template_id or user.lium.cluster_template().id,
        "executor_uuids": nodes,
        "user_public_key": [user.public_key],
    }


def test_a_repeated_order_with_its_key_rents_once(user: SdkUser) -> None:
    offer = _offer_with_free_nodes(user, 2)
    body = _order(user, [n.id for n in offer.cheapest(2)])
    first = _rent(user.http, body, "key-1")
    assert first.status_code == 200, first.text
    again = _rent(user.http, body, "key-1")
    assert again.json() == first.json()
    assert again.headers["Idempotent-Replayed"] == "true"
    cluster_id = first.json()["cluster_id"]
    assert len([p for p in user.lium.ps() if p.cluster_id == cluster_id]) == 2
    assert user.http.delete(f"/clusters/{cluster_id}").status_code == 200


def test_orders_lium_refuses(user: SdkUser, make_account: Callable[..., httpx.Client]) -> None:
    offers = user.lium.clusters()
    ib, roce = (next(o for o in offers if o.fabric_type == kind) for kind in ("infiniband", "roce"))
    plain = next(n for n in CATALOG.nodes.values() if n.fabric_id is None)
    cases = {
        "cluster_fabric_mismatch": _order(user, [ib.nodes[0].id, roce.nodes[0].id]),
        "node_not_in_fabric": _order(user, [ib.nodes[0].id, plain.id]),
        "cluster_nodes_invalid": _order(user, [ib.nodes[0].id, ib.nodes[0].id]),
        "node_not_found": _order(user, [ib.nodes[0].id, str(uuid.uuid4())]),
        "cluster_template_required": _order(
            user,
            [n.id for n in ib.nodes[:2]],
            next(t.id for t in user.lium.templates() if t.docker_image == "ubuntu"),
        ),
    }
    for code, body in cases.items():
        response = _rent(user.http, body)
        assert response.json()["error"]["code"] == code, (code, response.text)
    one_node = _rent(user.http, _order(user, [ib.nodes[0].id]))
    assert one_node.status_code == 422, one_node.text
    # a node with a pod on it is not free as a whole node
    taken = user.http.post(
        f"/executors/{ib.nodes[0].id}/rent",
        json={"pod_name": "single", "template_id": user.lium.cluster_template().id, "gpu_count": 8},
    )
    assert taken.status_code == 200, taken.text
    busy = _rent(user.http, _order(user, [ib.nodes[0].id, ib.nodes[1].id]))
    assert busy.json()["error"]["code"] == "node_unavailable", busy.text
    assert user.http.delete(f"/pods/{taken.json()['pod_id']}").status_code == 200
    # nothing of any refused order was rented
    assert not [p for p in user.lium.ps() if p.cluster_id]
    # another account's cluster is not removed by this one
    other = make_account()
    assert other.delete(f"/clusters/{uuid.uuid4()}").status_code == 404


def test_clusters_switched_off_are_refused_as_lium_refuses(tmp_path: Any) -> None:
    emulator: RunningEmulator = launch([*FAST_TIMINGS, "--features", "rent_idempotency"])
    try:
        with httpx.Client(base_url=emulator.api_url, headers={"X-API-KEY": "lium-emulator-key"}) as http:
            assert http.get("/executors/infiniband-clusters").json() == []
            assert "multinode_clusters" not in http.get("/version").json()["features"]
            node_ids = [n.id for n in CATALOG.nodes.values() if n.fabric_id == "ib-sjc-h100-01"][:2]
            refused = http.post(
                "/executors/cluster/rent",
                json={"pod_name": "x", "template_id": str(uuid.uuid4()), "executor_uuids": node_ids},
            )
            assert refused.status_code == 403
            assert refused.json()["error"]["code"] == "multinode_clusters_disabled"
            assert http.get("/pods").json() == []
    finally:
        assert emulator.stop() == 0


def test_cli_lists_rents_shows_and_removes_a_cluster(user: SdkUser) -> None:
    listed = json.loads(user.cli("clusters", "--format", "json"))
    assert listed, listed
    fabric = next(o for o in user.lium.clusters() if o.free_count >= 2).fabric_id
    shown = json.loads(
        user.cli(
            "clusters",
            "up",
            fabric,
            "--nodes",
            "2",
            "-n",
            "cli-job",
            "-y",
            "--format",
            "json",
            "--timeout",
            "90",
        )
    )
    assert shown, shown
    cluster = next(c for c in user.lium.my_clusters() if c.pods[0].name == "cli-job")
    assert all(p.status == "RUNNING" for p in cluster.pods)
    user.cli("clusters", "rm", cluster.id[:8], "-y")
    for pod in cluster.pods:
        wait_gone(user.http, pod.id)
    with pytest.raises(LiumError):
        user.lium.cluster(cluster.id)
