"""A pin story on a real server: a first pin, a stalled pinned client (timeout), an admin unpin."""

from __future__ import annotations

from dataclasses import dataclass, field

from nats.aio.client import Client

from jetwatch.core.jsapi import JetStreamAPI
from jetwatch.demo.workers import PullWorker
from tests.helpers import eventually, make_consumer, make_stream, publish


@dataclass
class PinStory:
    stream: str
    consumer: str
    pins: list[str] = field(default_factory=list)
    workers: list[PullWorker] = field(default_factory=list)


async def pin_story(nc: Client, api: JetStreamAPI, stream: str, consumer: str, subject: str,
                    timeout_s: float = 3.0) -> PinStory:
    """Leaves two workers running on the consumer (the caller stops them). The workers pull
    every half second against a pin timeout six times as long: on a loaded machine an event
    loop can stall for a second (a collector cycle in the same loop), and an unplanned timeout
    unpin would add a sixth event to the story."""
    story = PinStory(stream, consumer)
    await make_stream(api, stream, [subject])
    await make_consumer(api, stream, consumer, "pinned_client", timeout_s=timeout_s)
    a = PullWorker(nc, stream, consumer, "jobs", name="a", expires_s=0.5).start()
    story.workers.append(a)
    await publish(nc, subject, 3)
    story.pins.append(await eventually(lambda: a.pin_id, message="first pin"))
    b = PullWorker(nc, stream, consumer, "jobs", name="b", expires_s=0.5).start()
    story.workers.append(b)
    a.stalled = True
    await publish(nc, subject, 3)
    story.pins.append(await eventually(lambda: b.pin_id, message="pin after the stall"))
    a.stalled = False
    await api.unpin(stream, consumer, "jobs")
    await publish(nc, subject, 3)
    story.pins.append(await eventually(
        lambda: next((w.pin_id for w in story.workers if w.pin_id and w.pin_id not in story.pins), None),
        message="pin after the admin unpin"))
    return story
