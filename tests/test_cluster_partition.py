"""A minority cut off from its routes: a real three-node cluster in a network namespace of the
test's own (`unshare -n`), each server on its own loopback address, the third server's route
traffic dropped there by nftables (never the host's firewall). It alone holds an R1 stream, whose
consumer a worker connected to it keeps working through the cut.

Four collectors on default settings, one per view (connected to the majority or to the minority
alone; CONSUMER.LIST or every server's /jsz), say what each can know:
- from the majority, the R1 consumer is named NO_LEADER within 30 s of the cut and stays named
  until the routes are back; the R3 consumers, re-elected there, are never red, and carry the
  finding that one more failure stops them;
- /jsz, which hears the minority server itself, names it cut off from the cluster, serving only
  the clients connected to it, from either side;
- the collector that reaches the minority alone cannot tell it from the loss of both peers: it
  names the R3 consumers (no quorum as seen there) and never the R1 consumer its server still
  serves (a consumer still working while the meta group has no leader is no outage).
Nothing vanishes from any view; once the routes are back every consumer is served again.

The scenario runs in tests/partition_scenario.py inside the namespace and records what each view
said every second; this test judges the record."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import said_named
from tests.partition_scenario import CLUSTER_RED, CONSUMERS


def _can_partition() -> bool:
    """Root with the tools, allowed to make a network namespace (a container without
    CAP_SYS_ADMIN is not)."""
    if os.geteuid() != 0 or not all(shutil.which(c) for c in ("unshare", "nft", "ip", "setpriv")):
        return False
    return subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=30).returncode == 0


pytestmark = [
    pytest.mark.cluster, pytest.mark.serial, pytest.mark.xdist_group("partition"), pytest.mark.timeout(1200),
    pytest.mark.skipif(not _can_partition(), reason="needs root allowed to make a network namespace, util-linux "
                       "(unshare, setpriv), nftables and iproute2 for a partition inside one"),
]

NAMED_WITHIN = 30.0  # seconds from the cut
MINORITY_SEES_IT_ALONE = 15.0  # the minority server's own time to stop forwarding into the cut (seen: up to 20 s)


@pytest.fixture(scope="module")
def record(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> dict[str, Any]:
    hold = float(request.config.getoption("cluster_hold"))
    base = tmp_path_factory.mktemp("partition")
    out = base / "record.json"
    ran = subprocess.run(["unshare", "-n", sys.executable, "-m", "tests.partition_scenario", str(out), str(base),
                          str(hold)], cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True,
                         timeout=hold + 420)
    assert ran.returncode == 0 and out.exists(), f"the scenario failed ({ran.returncode}):\n{ran.stderr[-4000:]}"
    said: dict[str, Any] = json.loads(out.read_text())
    said["hold"] = hold
    for view, consumer in (("majority list", "solo"), ("majority jsz", "solo"), ("minority jsz", "solo"),
                           ("minority list", "busy")):
        said_named(f"a minority cut off from its routes: {consumer} seen from the {view}", _first_named(said, view, consumer),
                   NAMED_WITHIN)
    return said


def _during(record: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in record["timeline"] if m["t"] < record["healed_at"]]


def _first_named(record: dict[str, Any], view: str, consumer: str) -> float | None:
    return next((m["t"] for m in record["timeline"] if m[view].get(consumer, {}).get("verdict") in CLUSTER_RED), None)


def _story(record: dict[str, Any], view: str) -> str:
    """What a view said whenever it changed, and its collector's log: a failure's message."""
    lines, last = [], None
    for m in record["timeline"]:
        now = {c: (v["verdict"], v["reason"][:160]) for c, v in m[view].items()}
        if now != last:
            lines.append(f"{m['t']:>6} s {now}")
            last = now
    return "\n".join(lines) + "\n--- collector log ---\n" + record["logs"][view][-3000:]


@pytest.mark.parametrize("view", ["majority list", "majority jsz"])
def test_the_majority_names_the_consumer_only_the_cut_off_server_holds_within_30_s_and_holds_it(record, view):
    minority = record["minority"]
    named = _first_named(record, view, "solo")
    assert named is not None and named <= NAMED_WITHIN, _story(record, view)
    after = [m for m in _during(record) if m["t"] >= named]
    assert after and after[-1]["t"] - named >= min(record["hold"], record["healed_at"] - named) - 2, _story(record, view)
    for m in after:
        assert m[view]["solo"]["verdict"] == "NO_LEADER", _story(record, view)
        assert minority in m[view]["solo"]["reason"], m[view]["solo"]
    assert len({m[view]["solo"]["judged_at"] for m in after}) >= 2, "no cycle judged while the routes were cut"
    if view.endswith("jsz"):
        assert "cut off from the rest of the cluster" in after[-1][view]["solo"]["reason"], after[-1][view]["solo"]
        assert f"only clients connected to {minority} reach it" in after[-1][view]["solo"]["reason"]


@pytest.mark.parametrize("view", ["majority list", "majority jsz", "minority jsz"])
def test_the_r3_consumers_the_majority_serves_are_never_red_and_carry_the_replica_finding(record, view):
    for m in _during(record):
        for consumer in ("busy", "idle"):
            assert m[view][consumer]["verdict"] not in CLUSTER_RED, _story(record, view)
    flagged = {c for m in _during(record) for c in ("busy", "idle")
               if "replica_not_current" in m[view][c]["findings"]}
    assert flagged == {"busy", "idle"}, _story(record, view)


def test_the_r1_consumer_still_working_on_the_minority_is_never_red_where_only_the_minority_is_seen(record):
    view = "minority list"
    assert record["acked_at_heal"]["solo"] > record["acked_at_cut"]["solo"] + 10, "the local worker stopped working"
    for m in record["timeline"]:
        assert m[view]["solo"]["verdict"] not in CLUSTER_RED, _story(record, view)
    # Seen from the minority alone, a cut and the loss of both peers look the same: no quorum. The
    # server there says so only once its own raft timeouts pass (its requests are forwarded into the
    # cut until then), which the collector cannot hasten: the deadline adds that wait.
    for consumer in ("busy", "idle"):
        named = _first_named(record, view, consumer)
        assert named is not None and named <= NAMED_WITHIN + MINORITY_SEES_IT_ALONE, _story(record, view)


def test_the_jsz_view_from_the_minority_names_its_server_cut_off(record):
    named = _first_named(record, "minority jsz", "solo")
    assert named is not None and named <= NAMED_WITHIN, _story(record, "minority jsz")
    assert "cut off" in next(m for m in record["timeline"] if m["t"] == named)["minority jsz"]["solo"]["reason"]


@pytest.mark.parametrize("view", ["majority list", "majority jsz", "minority list", "minority jsz"])
def test_nothing_vanishes_and_every_consumer_is_served_again_once_the_routes_are_back(record, view):
    for m in record["timeline"]:
        assert set(m[view]) == CONSUMERS, (m["t"], sorted(m[view]))
    last = record["timeline"][-1][view]
    assert all(c["verdict"] not in CLUSTER_RED for c in last.values()), _story(record, view)
    assert record["exit"][view] == 0, record["logs"][view][-3000:]
