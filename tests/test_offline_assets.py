"""A consumer a running server holds but cannot load (ADR-44), as after a downgrade: a real
nats-server restarted on a store whose consumer requires an API level above its own. The server
lists the consumer under `missing` and, with its reason, under `offline`, answers its INFO with
500/10195, and stops the whole stream, whose other consumer it then lists nowhere.

Both are OFFLINE in the server's own words (not NO_LEADER: no server is gone), stay listed with
their last known state, and `check` is CRITICAL; once the server can load it again (the downgrade
undone), both are served again. The server's /jsz lists neither and says nothing of why: in JSZ
mode they are kept as no longer listed, with no DELETED advisory (they used to vanish), until an
operator forgets one (audited) or the server lists them again; a consumer the server removes and
says so (DELETED) leaves at once."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import nats
import pytest

from jetwatch import cli
from jetwatch.core.embedded_server import NatsServer, free_port
from jetwatch.core.jsapi import JetStreamAPI
from tests.helpers import collecting, collector_settings, eventually, make_consumer, publish, status_json

pytestmark = pytest.mark.serial  # the server is stopped and started again under a running collector


def _required_level(store: Path, consumer: str, level: str) -> None:
    """Write the API level a consumer requires into its stored config, as a newer server leaves it."""
    meta = next(store.rglob(f"obs/{consumer}/meta.inf"))
    config = json.loads(meta.read_text())
    config.setdefault("metadata", {})["_nats.req.level"] = level
    meta.write_text(json.dumps(config))


def _restarted_with(server: NatsServer, consumer: str, level: str) -> None:
    server.stop()
    _required_level(server.store_dir, consumer, level)
    server.start()


def _cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(list(args))
    return code, out.getvalue()


def _check(db: str) -> tuple[int, str]:
    return _cli("check", "--db", db)


@pytest.mark.parametrize("mode", ["list", "jsz"])
def test_a_consumer_the_server_cannot_load_is_offline_in_its_own_words_and_so_is_its_stopped_stream(tmp_path, run,
                                                                                                   mode):
    server = NatsServer(store_dir=tmp_path / "js", monitor_port=free_port(), name="s1").start()  # named: as in production
    db = str(tmp_path / "jetwatch.duckdb")
    sampling = {"monitor_url": (server.monitor_url,)} if mode == "jsz" else {}

    def said() -> dict[str, dict]:
        return {r["consumer"]: r for r in status_json(db)}

    async def scenario() -> None:
        nc = await nats.connect(server.url, max_reconnect_attempts=-1)
        api = JetStreamAPI(nc)
        await api.add_stream({"name": "S2", "subjects": ["s2.>"], "storage": "file"})  # kept across the restart
        for name in ("new", "old"):
            await make_consumer(api, "S2", name)
        await publish(nc, "s2.job", 3)
        await nc.close()
        settings = collector_settings(server.url, db, ("S2",), health_window=6.0, health_min_samples=3,
                                      health_min_span=1.0, no_leader_after=2.0, **sampling)
        async with collecting(settings):
            await eventually(lambda: {c: r["verdict"] for c, r in said().items()}.keys() == {"new", "old"}
                             and all(r["verdict"] != "COLLECTING" for r in said().values()), timeout=60,
                             message="both consumers judged")
            _restarted_with(server, "new", "99")  # a downgrade: the store asks more than this server knows
            if mode == "jsz":
                def all_unlisted() -> dict[str, dict] | None:
                    now = said()
                    return now if now.keys() == {"new", "old"} and all(
                        r["reason"].startswith("not listed by the server since") for r in now.values()) else None

                kept = await eventually(all_unlisted, timeout=60, message="both consumers kept as no longer listed")
                assert all("no DELETED advisory" in r["reason"] for r in kept.values()), kept
                assert all(r["next_step"].startswith("check that it still exists") for r in kept.values()), kept
                code, text = _check(db)
                assert code != 0, text
                # An operator who knows it is gone for good forgets it (audited): it leaves, the other stays.
                assert _cli("forget", "S2", "new", "--db", db, "--yes", "--actor", "oncall")[0] == 0
                await eventually(lambda: said().keys() == {"old"}, timeout=30, message="the forgotten consumer gone")
                _restarted_with(server, "new", "0")
                await eventually(lambda: (now := said()).keys() == {"new", "old"} and not any(
                    r["reason"].startswith("not listed") for r in now.values()), timeout=60,
                    message="both consumers listed again (the forgotten one comes back)")
                code, text = _cli("forget", "S2", "old", "--db", db, "--yes", "--actor", "oncall")
                assert code == 1 and "the server still lists it" in text, text
                return
            def all_offline() -> dict[str, dict] | None:
                now = said()
                return now if now.keys() == {"new", "old"} and all(r["verdict"] == "OFFLINE" for r in now.values()) else None

            offline = await eventually(all_offline, timeout=60, message="both consumers OFFLINE")
            assert "unsupported - required API level: 99" in offline["new"]["reason"], offline["new"]
            assert "stream S2 is stopped" in offline["old"]["reason"] and "new" in offline["old"]["reason"], offline["old"]
            assert "no server leads" not in offline["new"]["reason"]
            assert "upgrade the server, or undo the downgrade" in offline["new"]["next_step"], offline["new"]
            code, text = _check(db)
            assert code == 2 and "OFFLINE" in text, text

            _restarted_with(server, "new", "0")  # the downgrade undone
            await eventually(lambda: (now := said()).keys() == {"new", "old"}
                             and all(r["verdict"] != "OFFLINE" for r in now.values()), timeout=60,
                             message="both consumers served again")

    try:
        run(scenario())
    finally:
        server.stop()


def test_a_consumer_the_server_removes_for_inactivity_leaves_by_its_deleted_advisory(tmp_path, run):
    """Not every consumer that leaves the listings is held: one the server removes says so (an
    ephemeral consumer past its inactive_threshold sends DELETED), and it leaves every page."""
    server = NatsServer(store_dir=tmp_path / "js", name="s1").start()
    db = str(tmp_path / "jetwatch.duckdb")

    async def scenario() -> None:
        nc = await nats.connect(server.url)
        api = JetStreamAPI(nc)
        await api.add_stream({"name": "E2", "subjects": ["e2.>"]})
        await make_consumer(api, "E2", "stays")
        async with collecting(collector_settings(server.url, db, ("E2",))):
            await api.request("CONSUMER.CREATE.E2.brief", {"stream_name": "E2", "config": {
                "name": "brief", "ack_policy": "explicit", "inactive_threshold": 3_000_000_000}})
            await eventually(lambda: {r["consumer"] for r in status_json(db)} == {"stays", "brief"}, timeout=30,
                             message="both consumers listed")
            await eventually(lambda: {r["consumer"] for r in status_json(db)} == {"stays"}, timeout=30,
                             message="the removed consumer gone")
        await nc.close()

    try:
        run(scenario())
    finally:
        server.stop()
