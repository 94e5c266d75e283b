"""A minority cut off from its routes, inside a network namespace of its own: run by
tests/test_cluster_partition.py as `unshare -n python -m tests.partition_scenario OUT DIR HOLD`.

Three servers, each on its own loopback address (127.0.0.1-3), as hosts would be. The third is the
minority: it alone holds the R1 stream ONE (placement tag `cut`), and it runs with a group id of its
own so that this namespace's nftables can tell its route connections from the others' (on loopback
every connection leaves from the same address). The cut drops every packet of a route connection
that server takes part in, in both directions, and nothing else: clients still reach all three, as
when a partition cuts the servers' network from each other but not from everyone.

Four collectors watch, on default settings, one per view: connected to the majority (n0, n1) or
to the minority only (n2), each sampling with CONSUMER.LIST or with every server's /jsz. This
records what each said, second by second, from the cut until the routes are back and every
consumer is served again, and writes it to OUT as JSON; the test judges it.
Nothing here is the host's firewall: the table lives and dies with this namespace.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import nats

from jetwatch.core.embedded_server import NatsServer, cluster, free_port
from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.demo.workers import PullWorker
from tests.helpers import LoopThread, clean_env, make_consumer, publish, status_json, wait_until
from tests.incident_library import cluster_ready

CUT_GID = 4242  # the minority server's group: its sockets carry it, so its connections can be marked
HOSTS = ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
CONSUMERS = {"busy", "idle", "solo"}
CLUSTER_RED = {"NO_LEADER", "API_UNAVAILABLE"}


@dataclasses.dataclass
class CutOff(NatsServer):
    """The minority server, run with CUT_GID as its group (still root: it reads its files as any)."""

    def command(self) -> list[str]:
        return ["setpriv", f"--regid={CUT_GID}", "--clear-groups", *super().command()]


def _nft(script: str) -> None:
    subprocess.run(["nft", "-f", "-"], input=script.encode(), check=True)


def _namespace_up() -> None:
    """Loopback up, and the table that marks each connection the minority server's sockets send on."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    _nft(f"table inet partition {{\n chain out {{\n type filter hook output priority 0; policy accept;\n"
         f" meta skgid {CUT_GID} ct mark set 0x42\n }}\n}}\n")


def _cut(ports: list[int], minority_port: int) -> None:
    """Drop the route traffic of the minority: its own route listener's, and that of connections it
    dialled to the others' (marked by its group). Both ends of loopback pass the output hook."""
    listeners = ", ".join(str(p) for p in ports)
    _nft(f"""add chain inet partition cut
add rule inet partition out jump cut
add rule inet partition cut tcp dport {minority_port} drop
add rule inet partition cut tcp sport {minority_port} drop
add rule inet partition cut ct mark 0x42 tcp dport {{ {listeners} }} drop
add rule inet partition cut ct mark 0x42 tcp sport {{ {listeners} }} drop
""")


def _heal() -> None:
    _nft("flush chain inet partition cut")


async def _workload(urls: list[str]) -> list[PullWorker]:
    """An R3 stream CQ with a consumer a worker on the majority pulls from (busy) and one nobody
    pulls (idle); an R1 stream ONE on the minority server with one consumer (solo), which a worker
    connected there keeps working through the cut, fed by a producer there: a consumer the cut
    does not stop."""
    await cluster_ready(",".join(urls), "READY")
    nc = await nats.connect(urls[:2], max_reconnect_attempts=-1)
    api = JetStreamAPI(nc, timeout=10)
    await api.add_stream({"name": "CQ", "subjects": ["cq.>"], "num_replicas": 3})
    await api.add_stream({"name": "ONE", "subjects": ["one.>"], "num_replicas": 1, "placement": {"tags": ["cut"]}})
    for stream, name in (("CQ", "busy"), ("CQ", "idle"), ("ONE", "solo")):
        await make_consumer(api, stream, name)
    await publish(nc, "cq.work", 5)
    local = await nats.connect(urls[2:], max_reconnect_attempts=-1)
    asyncio.get_running_loop().create_task(_produce(local, "one.work"))
    return [PullWorker(nc, "CQ", "busy", name="worker", expires_s=2.0).start(),
            PullWorker(local, "ONE", "solo", name="local", expires_s=2.0).start()]


async def _produce(nc: Any, subject: str) -> None:
    """Two messages a second, each stored or not: a producer that goes on whatever the cluster does."""
    while True:
        with contextlib.suppress(Exception):
            await nc.request(subject, b"job", timeout=2)
        await asyncio.sleep(0.5)


def _view(db: str) -> dict[str, Any]:
    rows = status_json(db)
    return {r["consumer"]: {"verdict": r["verdict"], "reason": r["reason"], "judged_at": r["judged_at"],
                            "findings": [f.get("kind") for f in r["config_findings"]]} for r in rows}


def _collector(urls: list[str], db: str, log: Path, mode: str, nodes: list[NatsServer]) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "jetwatch.cli", "collect", "--server", ",".join(urls), "--db", db,
            "--include-streams", "CQ,ONE"]
    if mode == "jsz":
        args += ["--monitor-url", ",".join(str(n.monitor_url) for n in nodes)]
    with open(log, "wb") as out:
        return subprocess.Popen(args, env=clean_env(), stdout=out, stderr=subprocess.STDOUT)


def main(out: Path, base: Path, hold: float) -> None:
    _namespace_up()
    plain = cluster(base / "cluster", hosts=HOSTS)
    fields = {f.name: getattr(plain[2], f.name) for f in dataclasses.fields(NatsServer)}
    tags = base / "cut.conf"
    tags.write_text('server_tags: ["cut"]\n')
    nodes = [*plain[:2], CutOff(**{**fields, "extra_args": ["-c", str(tags)]})]
    for node in nodes:
        node.monitor_port = free_port()
        node.start()
    loop = LoopThread()
    sides = {"majority": [n.url for n in nodes[:2]], "minority": [nodes[2].url]}
    views = {f"{side} {mode}": (urls, mode) for side, urls in sides.items() for mode in ("list", "jsz")}
    dbs = {view: str(base / f"{view.replace(' ', '-')}.duckdb") for view in views}
    collectors: dict[str, subprocess.Popen[bytes]] = {}
    record: dict[str, Any] = {"timeline": [], "hosts": {n.name: n.host for n in nodes}, "minority": nodes[2].name}
    try:
        workers = loop.call(_workload([n.url for n in nodes]))
        for view, (urls, mode) in views.items():
            collectors[view] = _collector(urls, dbs[view], Path(dbs[view]).with_suffix(".log"), mode, nodes)
        wait_until(lambda: all(Path(db).exists() and set(_view(db)) == CONSUMERS for db in dbs.values()),
                   timeout=90, interval=1.0, message="both collectors judged the three consumers")
        record["before"] = {view: _view(db) for view, db in dbs.items()}

        record["acked_at_cut"] = {w.consumer: w.stats.acked for w in workers}
        _cut([int(p.rsplit(":", 1)[1]) for p in nodes[0].routes] + [int(nodes[0].cluster_port or 0)],
             int(nodes[2].cluster_port or 0))
        cut_at = time.monotonic()

        def observe() -> dict[str, Any]:
            moment = {"t": round(time.monotonic() - cut_at, 1), **{view: _view(db) for view, db in dbs.items()}}
            record["timeline"].append(moment)
            return moment

        def solo_named() -> bool:
            moment = observe()
            return all(moment[view].get("solo", {}).get("verdict") in CLUSTER_RED for view in views
                       if view.startswith("majority"))

        try:
            wait_until(solo_named, timeout=45, interval=1.0, message="solo named by the majority's collectors")
        except AssertionError:
            pass  # the test says what was seen instead
        until = time.monotonic() + hold
        while time.monotonic() < until:
            observe()
            time.sleep(1.0)

        record["acked_at_heal"] = {w.consumer: w.stats.acked for w in workers}
        _heal()
        record["healed_at"] = round(time.monotonic() - cut_at, 1)

        def served() -> bool:
            moment = observe()
            return all(set(moment[view]) == CONSUMERS and all(c["verdict"] not in CLUSTER_RED
                                                              for c in moment[view].values()) for view in views)

        try:
            wait_until(served, timeout=150, interval=1.0, message="every consumer served again")
        except AssertionError:
            pass
        for worker in workers:
            loop.call(asyncio.wait_for(worker.stop(), 15))
    finally:
        for proc in collectors.values():
            proc.send_signal(signal.SIGTERM)
        for view, proc in collectors.items():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
            record.setdefault("exit", {})[view] = proc.returncode
            record.setdefault("logs", {})[view] = Path(dbs[view]).with_suffix(".log").read_text(errors="replace")[-6000:]
        loop.close()
        for node in nodes:
            node.stop(signal.SIGKILL)
        out.write_text(json.dumps(record))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3]))
