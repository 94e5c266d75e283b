"""What the browser tests need of the installed Chromium, and the reverse proxy they put in front
of the dashboard: both checked on loopback pages of their own, so a browser or proxy fault is
named here rather than found as a timeout inside a dashboard test."""

from __future__ import annotations

import pytest

from tests.browser import lacking
from tests.loopback import WebSocketProbe, proxied

pytestmark = [pytest.mark.browser]


def test_the_installed_browser_has_what_the_tests_need_and_a_browser_without_it_is_named(chromium):
    assert lacking(chromium) == []
    said = lacking(chromium, wait_s=2.0, java_script_enabled=False)  # a page without scripts never opens one
    assert len(said) == 1 and said[0].startswith("open a WebSocket to a page on 127.0.0.1"), said


def test_the_proxy_sets_its_headers_on_the_websocket_and_drops_the_browsers_own(chromium):
    """What a deployment's proxy does and the dashboard relies on: the upgrade request that starts a
    Streamlit session carries the proxy's X-Forwarded-For and user header, never the browser's."""
    with WebSocketProbe() as probe, proxied(probe.port, {"X-Forwarded-For": "203.0.113.7",
                                                         "X-Forwarded-User": "carol"}) as proxy:
        context = chromium.new_context(extra_http_headers={"X-Forwarded-User": "mallory"})
        try:
            page = context.new_page()
            page.goto(f"http://127.0.0.1:{proxy.port}/", wait_until="load")
            page.wait_for_function(f"document.title === {probe.MESSAGE!r}", timeout=15_000)
        finally:
            context.close()
    sent = probe.upgrade_headers or {}
    assert (sent.get("x-forwarded-for"), sent.get("x-forwarded-user")) == ("203.0.113.7", "carol"), sent
    assert sent.get("origin") == f"http://127.0.0.1:{proxy.port}" and "probe=1" in sent.get("cookie", ""), sent
