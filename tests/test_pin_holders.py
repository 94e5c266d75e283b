"""Who holds the pin: a real worker announces itself when pinned, the collector checks the announcement
against the server's CONNZ and shows the holder by name; a forged announcement from another
connection stays unverified and never replaces the verified one."""

from __future__ import annotations

import json
import subprocess
import sys

import nats
import pytest

from jetwatch.collectors.pin_holders import NO_CONNZ_NOTE, PinHolderCapture, check
from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.core.pin_announce import (
    NO_CONNZ,
    UNVERIFIED,
    VERIFIED,
    Announcement,
    BadAnnouncement,
    PinAnnouncer,
    announce_subject,
    holder_key,
    parse_announcement,
)
from jetwatch.demo.workers import PullWorker
from jetwatch.exporters import metrics
from jetwatch.store.database import Store
from tests.helpers import (
    clean_env,
    collecting,
    collector_settings,
    eventually,
    make_consumer,
    make_stream,
    publish,
    rows,
)
from tests.test_dashboard import run_app

HOLDER = "SELECT name, verification, host, version FROM pin_holders WHERE pin_id = ?"


async def _forge(url: str, stream: str, consumer: str, pin_id: str, claimed: str) -> None:
    """Another connection (named `forger`) announcing `pin_id` as if it were `claimed`."""
    nc = await nats.connect(url, name="forger")
    try:
        fake = PinAnnouncer(nc, stream, consumer, group="jobs", name=claimed, version="6.6.6").announcement(pin_id)
        await nc.publish(announce_subject(stream, consumer), fake.encode())
        await nc.flush()
    finally:
        await nc.close()


def test_a_real_worker_is_shown_verified_and_a_forgery_never_replaces_it(nats_server, db_path, uid, run, app_env):
    stream, consumer = f"{uid}_PINWHO", "work"
    store = Store(db_path)
    settings = collector_settings(nats_server.url, db_path, (stream,), monitor_url=(nats_server.monitor_url,))

    async def scenario() -> str:
        nc = await nats.connect(nats_server.url, name="worker-a")
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid.lower()}.pinwho.>"])
        await make_consumer(api, stream, consumer, "pinned_client", timeout_s=30)
        async with collecting(settings):
            worker = PullWorker(nc, stream, consumer, group="jobs", name="worker-a",
                                announcer=PinAnnouncer(nc, stream, consumer, group="jobs", version="1.2.3")).start()
            await publish(nc, f"{uid.lower()}.pinwho.x", 5)
            pin = await eventually(lambda: worker.pin_id, message="the worker pinned")
            await eventually(lambda: rows(store, HOLDER, [pin]) and rows(store, HOLDER, [pin])[0][1] == VERIFIED,
                             message="the announcement stored, verified")
            await eventually(lambda: rows(store, "SELECT pinned_id FROM consumer_latest WHERE stream = ?", [stream])
                             == [(pin,)], message="the pin sampled")
            await eventually(lambda: rows(store, "SELECT count(*) FROM verdicts_current WHERE stream = ?",
                                          [stream])[0][0] == 1, message="the consumer judged")

            await _forge(nats_server.url, stream, consumer, pin, claimed="evil-twin")
            await _forge(nats_server.url, stream, consumer, "MARKERPIN0000000000000", claimed="worker-a")
            # Announcements are checked in order: once the marker is stored, so was the forgery before it.
            marker = await eventually(lambda: rows(store, HOLDER, ["MARKERPIN0000000000000"]),
                                      message="the forged marker stored")
            assert marker[0][:2] == ("worker-a", UNVERIFIED)  # the name claimed is not the sending connection's
            assert rows(store, HOLDER, [pin])[0][:2] == ("worker-a", VERIFIED)  # never replaced by the forgery
            assert rows(store, HOLDER, [pin])[0][3] == "1.2.3"
            await worker.stop()
        await nc.close()
        return pin

    pin = run(scenario())

    out = subprocess.run([sys.executable, "-m", "jetwatch.cli", "status", "--json", "--db", db_path],
                         env=clean_env(), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    [mine] = [r for r in json.loads(out.stdout) if r["stream"] == stream]
    assert mine["pin"]["id"] == pin
    assert mine["pin"]["holder"] == "worker-a · verified"
    assert (mine["pin"]["name"], mine["pin"]["verification"], mine["pin"]["version"]) == ("worker-a", VERIFIED, "1.2.3")

    app_env(db_path)
    at = run_app("views/consumer.py", stream=stream, consumer=consumer)
    [tile] = [m for m in at.metric if m.label == "Pin holder"]
    assert tile.value == "worker-a" and "verified" in [c.value for c in at.caption]
    at = run_app()
    from tests.test_dashboard import consumers, frame
    table = frame(at, "Verdict")
    assert table[consumers(table) == consumer].iloc[0]["Pin holder"] == "worker-a · verified"
    at = run_app("views/pins.py")
    sessions = frame(at, "End reason")
    assert list(sessions[sessions["Pin id (tail)"] == "…" + pin[-6:]]["Pin holder"]) == ["worker-a · verified"]


def test_a_pin_is_held_for_its_own_consumer_and_another_real_connection_never_takes_it(nats_server, db_path, uid,
                                                                                         run):
    """Two consumers: worker-a holds A/wa's pin, verified. `mallory`, a real connection (so CONNZ
    verifies her name), announces that pin id on her own consumer's subject (A/wb) and on A/wa's:
    the first is refused (the pin is A/wa's by the live state and the pinned advisory), the second
    never replaces the verified holder, so A/wa's holder stays worker-a in the store, in the
    collector's /metrics map and in `status --json`."""
    stream = f"{uid}_PINOWN"
    store = Store(db_path)
    settings = collector_settings(nats_server.url, db_path, (stream,), monitor_url=(nats_server.monitor_url,))
    marker = "MALLORYMARKER000000001"

    async def scenario() -> tuple[str, dict]:
        nc = await nats.connect(nats_server.url, name="worker-a")
        mallory = await nats.connect(nats_server.url, name="mallory")
        api = JetStreamAPI(nc)
        await make_stream(api, stream, [f"{uid.lower()}.pinown.>"])
        for consumer in ("wa", "wb"):
            await make_consumer(api, stream, consumer, "pinned_client", timeout_s=30)
        async with collecting(settings) as collector:
            worker = PullWorker(nc, stream, "wa", group="jobs", name="worker-a",
                                announcer=PinAnnouncer(nc, stream, "wa", group="jobs", version="1.2.3")).start()
            await publish(nc, f"{uid.lower()}.pinown.x", 5)
            pin = await eventually(lambda: worker.pin_id, message="the worker pinned")
            mine = "SELECT name, verification FROM pin_holders WHERE pin_id = ? AND stream = ? AND consumer = ?"
            await eventually(lambda: rows(store, mine, [pin, stream, "wa"]) == [("worker-a", VERIFIED)],
                             message="worker-a stored, verified")
            await eventually(lambda: rows(store, "SELECT pinned_id FROM consumer_latest WHERE stream = ? AND "
                                                 "consumer = 'wa'", [stream]) == [(pin,)], message="the pin sampled")
            await eventually(lambda: rows(store, "SELECT count(*) FROM verdicts_current WHERE stream = ?",
                                          [stream])[0][0] == 2, message="both consumers judged")

            for consumer in ("wb", "wa"):  # her own consumer's subject, then the victim's
                claim = PinAnnouncer(mallory, stream, consumer, group="jobs", version="6.6.6").announcement(pin)
                await mallory.publish(announce_subject(stream, consumer), claim.encode())
            await mallory.publish(announce_subject(stream, "wb"),
                                  PinAnnouncer(mallory, stream, "wb", group="jobs").announcement(marker).encode())
            # Announcements are handled in order: once the marker is stored, so were her claims.
            await eventually(lambda: rows(store, mine, [marker, stream, "wb"]) == [("mallory", VERIFIED)],
                             message="mallory's marker stored, verified (her connection is real)")
            assert rows(store, "SELECT stream, consumer, name, verification, version FROM pin_holders "
                               "WHERE pin_id = ?", [pin]) == [(stream, "wa", "worker-a", VERIFIED, "1.2.3")]
            key = holder_key(collector.pin_holders.account, stream, "wa", pin)
            held = dict(collector.pin_holders.holders)
            await worker.stop()
        await mallory.close()
        await nc.close()
        return pin, {"wa": held.get(key), "wb": held.get(holder_key(key[0], stream, "wb", pin))}

    pin, held = run(scenario())
    assert held == {"wa": ("worker-a", VERIFIED), "wb": None}
    out = subprocess.run([sys.executable, "-m", "jetwatch.cli", "status", "--json", "--db", db_path],
                         env=clean_env(), capture_output=True, text=True, timeout=60)
    assert out.returncode in (0, 1, 2), out.stderr
    said = {r["consumer"]: r for r in json.loads(out.stdout) if r["stream"] == stream}
    assert said["wa"]["pin"]["id"] == pin and said["wa"]["pin"]["holder"] == "worker-a · verified"
    assert said["wa"]["pin"]["version"] == "1.2.3"


def test_a_forged_announcement_alone_shows_unverified_and_the_real_one_then_wins(nats_server, db_path, uid, run):
    """The forgery first: it is stored unverified; the real worker's announcement then replaces it."""
    stream, consumer = f"{uid}_PINFIRST", "work"
    store = Store(db_path)
    settings = collector_settings(nats_server.url, db_path, (stream,), monitor_url=(nats_server.monitor_url,))
    pin = "FORGEDFIRST00000000001"

    async def scenario() -> None:
        nc = await nats.connect(nats_server.url, name="worker-b")
        async with collecting(settings):
            await _forge(nats_server.url, stream, consumer, pin, claimed="worker-b")
            await eventually(lambda: rows(store, HOLDER, [pin]), message="the forgery stored")
            assert rows(store, HOLDER, [pin])[0][:2] == ("worker-b", UNVERIFIED)
            real = PinAnnouncer(nc, stream, consumer, group="jobs")
            await nc.publish(announce_subject(stream, consumer), real.announcement(pin).encode())
            await eventually(lambda: rows(store, HOLDER, [pin])[0][1] == VERIFIED, message="the real one verified")
        await nc.close()

    run(scenario())


def test_without_connz_access_the_holder_says_so(run):
    ann = Announcement("PIN", "S", "C", "jobs", "worker-a", "host", 1, None, 5, "SERVER")
    checked = run(check(None, ann, "$G"))
    assert (checked.verification, checked.note) == (NO_CONNZ, NO_CONNZ_NOTE)
    from jetwatch.dashboard.text import pin_holder
    assert pin_holder("abcdefghijk123456", "worker-a", NO_CONNZ) == "worker-a · unverified (no CONNZ access)"
    assert pin_holder("abcdefghijk123456", None, None) == "unannounced …123456"
    assert pin_holder(None, None, None) == ""


def test_an_announcement_on_another_consumers_subject_is_refused():
    ann = Announcement("PIN", "S", "C", None, "worker-a", "host", 1, None, 5, "SERVER")
    assert parse_announcement(announce_subject("S", "C"), ann.encode()) == ann
    with pytest.raises(BadAnnouncement, match="arrived on"):
        parse_announcement(announce_subject("S", "OTHER"), ann.encode())
    with pytest.raises(BadAnnouncement, match="name"):
        parse_announcement(announce_subject("S", "C"), json.dumps({**json.loads(ann.encode()), "name": "x" * 300}).encode())


def test_the_metrics_pin_info_carries_the_holder_name_bounded():
    assert metrics.holder_label(("w" * 100, VERIFIED)) == "w" * metrics.HOLDER_LABEL_CHARS
    assert metrics.holder_label(None) == "unannounced"
    assert "holder" in metrics.BY_NAME["jetwatch_consumer_pin"].labels
    # `pin_holder`: the holder in the pages' words, which the alert rules quote.
    assert "pin_holder" in metrics.BY_NAME["jetwatch_consumer_pin"].labels
    assert metrics.pin_holder_label("abcdefghijk123456", ("worker-a", VERIFIED)) == "worker-a · verified"
    assert metrics.pin_holder_label("abcdefghijk123456", None) == "unannounced …123456"
    assert metrics.pin_holder_label("abcdefghijk123456", ("w" * 100, NO_CONNZ)) == \
        "w" * metrics.HOLDER_LABEL_CHARS + " · unverified (no CONNZ access)"


def test_the_capture_keeps_a_verified_holder_in_memory_against_a_forgery(run, db_path):
    """What /metrics reads: the collector's map never trades a verified holder for an unverified one."""
    class Verdicts:
        def __init__(self) -> None:
            self.answers = [{"name": "worker-a"}, {"name": "forger"}]

        async def connection(self, server_id: str, cid: int):
            return self.answers.pop(0)

    store = Store(db_path)
    store.migrate()

    async def scenario() -> dict:
        async def write(fn):
            return store.write(fn)

        capture = PinHolderCapture(None, Verdicts(), "$G", write)
        ann = Announcement("PIN", "S", "C", None, "worker-a", "host", 1, None, 5, "SERVER")
        await capture.handle(announce_subject("S", "C"), ann.encode())
        await capture.handle(announce_subject("S", "C"), ann.encode())
        return capture.holders

    assert run(scenario()) == {("$G", "S", "C", "PIN"): ("worker-a", VERIFIED)}
