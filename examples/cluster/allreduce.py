"""A collective across the cluster, run on every node by its dstack runner: an all-reduce over TCP in
plain Python between the members' overlay addresses, then the same with torch.distributed's gloo backend
where torch is importable. Every node checks the sum; any mismatch or timeout exits non-zero, which
fails the runner's smoke test and with it the apply.

Environment (set per node by the stack): RANK, WORLD_SIZE, MASTER_ADDR (node 0's overlay address) and
MASTER_PORT; the gloo run uses MASTER_PORT + 1. RENDEZVOUS_SECONDS (default 300): how long a node waits
for the others. Every node must run this at once: a runner replaced alone waits that long for nodes that
are done already, and then fails saying so.
"""

import json
import os
import socket
import struct
import sys
import time

RENDEZVOUS_SECONDS = float(os.environ.get("RENDEZVOUS_SECONDS") or 300)
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
master, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
value = (rank + 1) ** 2  # each node's contribution; the sum is known in advance
expected = sum((r + 1) ** 2 for r in range(world))


def send(sock: socket.socket, payload: dict) -> None:
    data = json.dumps(payload).encode()
    sock.sendall(struct.pack("!I", len(data)) + data)


def receive(sock: socket.socket) -> dict:
    def exactly(n: int) -> bytes:
        chunks = b""
        while len(chunks) < n:
            chunk = sock.recv(n - len(chunks))
            if not chunk:
                raise ConnectionError("peer closed the connection")
            chunks += chunk
        return chunks

    (length,) = struct.unpack("!I", exactly(4))
    return json.loads(exactly(length))


def all_reduce_tcp() -> int:
    """Node 0 gathers every value and sends the sum back; the others connect to it."""
    if rank == 0:
        with socket.create_server((master, port), reuse_port=False) as server:
            server.settimeout(RENDEZVOUS_SECONDS)
            peers = []
            total = value
            while len(peers) < world - 1:
                peer, _ = server.accept()
                peer.settimeout(RENDEZVOUS_SECONDS)
                total += receive(peer)["value"]
                peers.append(peer)
            for peer in peers:
                send(peer, {"sum": total})
                peer.close()
            return total
    deadline = time.monotonic() + RENDEZVOUS_SECONDS
    while True:
        try:
            sock = socket.create_connection((master, port), timeout=10)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    with sock:
        sock.settimeout(RENDEZVOUS_SECONDS)
        send(sock, {"rank": rank, "value": value})
        return int(receive(sock)["sum"])


def all_reduce_gloo() -> str:
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        return "gloo skipped (torch is not importable here)"
    dist.init_process_group("gloo", init_method=f"tcp://{master}:{port + 1}", rank=rank, world_size=world)
    tensor = torch.tensor([float(value)])
    dist.all_reduce(tensor)
    dist.destroy_process_group()
    if int(tensor.item()) != expected:
        sys.exit(f"gloo all-reduce on rank {rank}: got {tensor.item()}, expected {expected}")
    return f"gloo sum {int(tensor.item())}"


try:
    total = all_reduce_tcp()
except OSError as exc:  # refused or timed out: the other nodes never came
    sys.exit(
        f"all-reduce on rank {rank} of {world}: the other nodes did not join within {RENDEZVOUS_SECONDS:g} s "
        f"({exc!r}). Every node runs this collective at once: a runner replaced alone runs it alone, so "
        "replace every node's runner together (terraform apply with -replace for each of them)."
    )
if total != expected:
    sys.exit(f"tcp all-reduce on rank {rank}: got {total}, expected {expected}")
print(f"all-reduce ok on rank {rank} of {world}: tcp sum {total}; {all_reduce_gloo()}")
