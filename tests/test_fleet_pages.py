"""A fleet bigger than one grid page: filters apply to the whole fleet on the server, counts
follow them, and only one page of rows is built and sent."""

from __future__ import annotations

import pandas as pd
import pytest

from jetwatch.dashboard.fleet_filters import FleetFilter, page_of, pages
from tests.test_dashboard import consumers, frame, run_app
from tests.test_oncall_pages import fleet_badges, nobody_pulls, working, write_store

FLEET = pd.DataFrame({
    "stream": ["ORDERS", "ORDERS", "Billing", "billing_eu", "logs"],
    "consumer": ["Alpha", "beta", "gamma", "Delta", "orders-tail"],
    "verdict": ["STALLED", "OK", "OK", "NO_PULLERS", "OK"],
    "priority_policy": ["pinned_client", None, "overflow", None, None],
})


@pytest.mark.parametrize("wanted, expected", [
    (FleetFilter(), ["Alpha", "beta", "gamma", "Delta", "orders-tail"]),
    (FleetFilter(streams=("ORDERS",)), ["Alpha", "beta"]),
    (FleetFilter(verdicts=("OK",)), ["beta", "gamma", "orders-tail"]),
    (FleetFilter(policies=("none",)), ["beta", "Delta", "orders-tail"]),
    (FleetFilter(policies=("pinned_client", "overflow")), ["Alpha", "gamma"]),
    (FleetFilter(search="ORDERS"), ["Alpha", "beta", "orders-tail"]),  # stream or consumer, any case
    (FleetFilter(search="billing"), ["gamma", "Delta"]),
    (FleetFilter(search="a.p"), []),  # a search is text, not a pattern
    (FleetFilter(streams=("ORDERS",), verdicts=("OK",), search="b"), ["beta"]),
])
def test_fleet_filter_keeps_the_matching_rows_in_fleet_order(wanted, expected):
    assert list(wanted.apply(FLEET)["consumer"]) == expected


@pytest.mark.parametrize("rows, size, number, first, count, total", [
    (0, 100, 1, None, 0, 1),
    (100, 100, 1, 0, 100, 1),
    (101, 100, 2, 100, 1, 2),
    (250, 100, 3, 200, 50, 3),
    (250, 100, 9, 200, 50, 3),  # past the end: the last page
    (250, 100, 0, 0, 100, 3),
])
def test_page_of_takes_one_page_clamped_to_the_pages_there_are(rows, size, number, first, count, total):
    frame_ = pd.DataFrame({"n": range(rows)})
    page = page_of(frame_, number, size)
    assert pages(rows, size) == total
    assert len(page) == count
    if count:
        assert page["n"].iloc[0] == first


# One worker runs this module, so the 250-consumer store (`big_db`) is written once.
pytestmark = pytest.mark.xdist_group("big_db")


@pytest.fixture(scope="module")
def big_db(tmp_path_factory):
    """250 consumers written and judged by the collector's path: 30 nobody pulls, the rest work."""
    db = str(tmp_path_factory.mktemp("fleetpages") / "big.duckdb")
    fleet = {("$G", f"S{i // 50}", f"w{i:03d}"): (nobody_pulls if i % 25 == 0 or i >= 230 else working)
             for i in range(250)}
    write_store(db, fleet, cycles=8)
    return db


def test_fleet_shows_one_page_of_a_big_fleet_and_pages_through_it(big_db, app_env):
    app_env(big_db)
    at = run_app()
    first = consumers(frame(at, "Verdict"))
    assert len(first) == 100
    assert "100 of 250 matching consumers shown (page 1 of 3; 250 in all)" in "\n".join(c.value for c in at.caption)
    assert fleet_badges(at) == ":red-badge[NO_PULLERS] 30  :green-badge[OK] 220"  # the whole fleet, not the page
    at.number_input(key="fleet_page").set_value(3).run()
    last = consumers(frame(at, "Verdict"))
    assert len(last) == 50
    seen = set(first) | set(last)
    at.number_input(key="fleet_page").set_value(2).run()
    seen |= set(consumers(frame(at, "Verdict")))
    assert len(seen) == 250  # every consumer on exactly one page
    assert set(first[:30]) == {f"w{i:03d}" for i in range(250) if i % 25 == 0 or i >= 230}  # worst first


def test_a_filter_applies_to_the_whole_fleet_and_brings_the_page_back_in_range(big_db, app_env):
    app_env(big_db)
    at = run_app()
    at.number_input(key="fleet_page").set_value(3).run()
    at.text_input(key="fleet_search").input("w24").run()  # w240..w249: one page
    table = consumers(frame(at, "Verdict"))
    assert sorted(table) == [f"w24{i}" for i in range(10)]
    assert not at.exception
    at.text_input(key="fleet_search").input("").run()
    at.multiselect(key="fleet_verdict").set_value(["NO_PULLERS"]).run()
    assert len(consumers(frame(at, "Verdict"))) == 30  # found on every page of the unfiltered fleet
    assert fleet_badges(at) == ":red-badge[NO_PULLERS] 30"


def _fleet_order(row) -> tuple:
    """The fleet's order written out by hand (independent of the query and of the merge): verdict
    severity, the oldest waiting work first (none: -1), the biggest backlog first (none: last),
    stream, consumer, cluster."""
    from jetwatch.health.verdicts import SEVERITY

    age = -1.0 if pd.isna(row["oldest_unacked_age_seconds"]) else float(row["oldest_unacked_age_seconds"])
    pending = row["num_pending"]
    return (SEVERITY[row["verdict"]], -age, pd.isna(pending), 0 if pd.isna(pending) else -pending,
            row["stream"], row["consumer"], row.get("cluster", ""))


def test_one_store_reads_in_the_fleet_order(big_db):
    """fleet_verdicts.sql orders one store worst first, as the order written out by hand does."""
    from jetwatch.dashboard import data
    from jetwatch.store.database import Store

    read = data.fleet(Store(big_db)).consumers
    assert read["verdict"].nunique() > 1
    assert list(read["consumer"]) == [r["consumer"] for r in sorted(read.to_dict("records"), key=_fleet_order)]


def test_several_clusters_merge_in_the_order_one_store_reads(big_db):
    """dashboard/stores.worst_first merges several stores' fleets, each already worst first: the
    result is the same rows, each with its cluster, in the order written out by hand over all of
    them (rows of one store equal in every key keep the store's order)."""
    from jetwatch.dashboard import data
    from jetwatch.dashboard.stores import worst_first
    from jetwatch.store.database import Store

    read = data.fleet(Store(big_db)).consumers
    # four clusters: every other row, the whole fleet again (the same names), every third row, none
    parts = [("b", read.iloc[::2]), ("a", read), ("c", read.iloc[1::3]), ("d", read.iloc[0:0])]
    merged = worst_first(parts)
    whole = pd.concat([part.assign(cluster=c) for c, part in parts], ignore_index=True)
    records = whole.to_dict("records")
    order = sorted(range(len(records)), key=lambda i: _fleet_order(records[i]))  # a stable sort too
    expected = whole.iloc[order][["cluster", *read.columns]].reset_index(drop=True)
    assert len(merged) == len(read) + len(read.iloc[::2]) + len(read.iloc[1::3])
    assert list(zip(merged["cluster"], merged["consumer"])) == list(zip(expected["cluster"], expected["consumer"]))
    pd.testing.assert_frame_equal(merged, expected)


def test_several_clusters_stores_are_read_at_once_and_a_failing_one_still_says_so(big_db, tmp_path):
    """stores.fleet reads the stores on threads of their own (two clusters cost about one): each
    read here waits at a barrier for the other, which only a read at the same time can pass; the
    fleet is what the reads one after the other give. A store that cannot be read raises, as
    before."""
    import shutil
    import threading

    from jetwatch.dashboard import data, stores
    from jetwatch.store.database import Store, StoreMissing

    copy = tmp_path / "b.duckdb"
    shutil.copy(big_db, copy)
    both = [stores.ClusterStore("a", str(big_db), None), stores.ClusterStore("b", str(copy), None)]
    barrier = threading.Barrier(2, timeout=60)

    def read(cs: stores.ClusterStore) -> data.Fleet:
        barrier.wait()  # broken (an error) if the other store's read does not run meanwhile
        return data.fleet(cs.store)

    together = stores.fleet(both, read)
    one_by_one = stores.worst_first([(cs.cluster, data.fleet(cs.store).consumers) for cs in both])
    pd.testing.assert_frame_equal(together.consumers, one_by_one)
    assert set(together.consumers["cluster"]) == {"a", "b"}

    missing = [both[0], stores.ClusterStore("c", str(tmp_path / "none.duckdb"), None)]
    with pytest.raises(StoreMissing):
        stores.fleet(missing, lambda cs: data.fleet(cs.store) if cs.cluster == "a" else Store(cs.path).query("fleet_latest"))
