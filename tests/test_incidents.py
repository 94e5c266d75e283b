"""The incident library (tests/incident_library.py) against the real server: every incident named
right within its deadline from its start and never eased while it lasts; every healthy look-alike,
running at the same time on the same server, raising nothing. The same rules are specified over
minutes of modelled behaviour in tests/test_health.py; this is them against the server's own
numbers and clocks."""

from __future__ import annotations

import pytest

from tests.incident_library import judged, library, run_library


@pytest.mark.incidents
@pytest.mark.serial  # its deadlines are wall-clock seconds: it runs after the parallel lane, on a worker of its own
def test_each_incident_is_named_in_time_beside_its_look_alikes(nats_server, db_path, uid, run):
    outcome = run(run_library(nats_server.url, db_path, uid, library()))
    table = judged(outcome)
    report = "\n".join(f"{j.key}: expected {j.expected}, final {j.final}, "
                       f"{'named after ' + format(j.taken, '.1f') + ' s' if j.taken is not None else 'not named'}, "
                       f"raised {j.alarms}{'' if j.ok else '  <-- WRONG: ' + j.reason}" for j in table)
    print("\nINCIDENTS\n" + report)
    assert all(j.ok for j in table), report
    assert all(j.final == j.expected for j in table if j.expected != "-"), report
    etas = {key: outcome.etas.get(stream) for key, stream in outcome.streams.items()}
    assert etas["gone"] == "no pullers", "no drain time where nobody pulls"
    assert etas["holder"] == "holder idle", "a standby waits: somebody pulls, behind the idle pin holder"
    assert etas["stuck"] == "not draining", "nothing acknowledged: no drain time"
    look_alikes = {key: eta for key, eta in etas.items() if outcome.scenarios[key].verdict is None}
    assert "no pullers" not in look_alikes.values(), f"workers pull on every look-alike: {look_alikes}"
    assert "STALLED" not in [v for _, v in outcome.changes["longjobs"]], "acks keep coming: never stalled"
