"""jetwatch's Grafana dashboard, built with Grafana's foundation SDK (its build for Grafana 11.6).

`python deploy/grafana/dashboard.py > deploy/grafana/jetwatch.json` writes the JSON that is committed
and imported; nothing is added to it by hand, so tests/test_grafana.py can fail while the two differ.
Every metric a query names is looked up in the collector's own declaration
(`jetwatch.exporters.metrics.METRICS`): a metric renamed there stops this script, instead of leaving
a panel that quietly shows nothing.

Fleet totals and the collector's own series carry no `cluster` label of their own (one collector
serves one cluster): they are kept to the chosen clusters through the collector that exported them,
`and on (job, instance)` its freshness gauge, which names its cluster.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from grafana_foundation_sdk.builders import common, dashboard, prometheus, stat, table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import (
    BigValueColorMode,
    BigValueGraphMode,
    GraphDrawStyle,
    LegendDisplayMode,
    LegendPlacement,
)
from grafana_foundation_sdk.models.dashboard import (
    DataSourceRef,
    DataTransformerConfig,
    DynamicConfigValue,
    VariableOption,
    VariableRefresh,
    VariableSort,
)
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

from jetwatch.exporters.metrics import BY_NAME

DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
CHAIN = ("cluster", "account", "stream", "consumer")  # the query variables, each filtered by those before it
PER_CONSUMER = ", ".join(f'{label}=~"${label}"' for label in CHAIN)
CONSUMER_LEGEND = "{{stream}} / {{consumer}}"
NON_OK_ONLY = ("Under the collector's default `--metrics-cardinality auto`, every consumer has its series up to "
               "--metrics-all-up-to consumers (1,000); above that, or under `non_ok`, only consumers that are "
               "not OK do, and an empty panel means every consumer is OK (docs/metrics.md). "
               "`--metrics-cardinality all` shows every consumer of any fleet.")


class UndeclaredMetric(LookupError):
    """A query names a series /metrics never writes."""


def metric(name: str, suffix: str = "") -> str:
    """A metric as /metrics writes it (counters end in _total), refused unless the collector declares it."""
    declared = BY_NAME.get(name)
    if declared is None:
        raise UndeclaredMetric(f"{name} is not a metric the collector declares (exporters/metrics.py METRICS): "
                               "fix the dashboard's query")
    if suffix and declared.type != "histogram":
        raise UndeclaredMetric(f"{name} is a {declared.type}: /metrics writes no {name}{suffix}")
    return declared.exposed + suffix


def in_clusters(expr: str) -> str:
    """`expr` kept to the series of collectors whose cluster is chosen (see the module's docstring)."""
    fresh = metric("jetwatch_collector_last_cycle_timestamp_seconds")
    return f'({expr}) and on (job, instance) {fresh}{{cluster=~"$cluster"}}'


def query(expr: str, legend: str = "", ref: str = "A") -> prometheus.Dataquery:
    return prometheus.Dataquery().expr(expr).legend_format(legend or "__auto").ref_id(ref).datasource(DATASOURCE)


def instant(expr: str, legend: str = "", ref: str = "A") -> prometheus.Dataquery:
    """The latest value of each series, for a panel that shows now rather than over time."""
    return query(expr, legend, ref).instant()


def rows_of(expr: str, ref: str) -> prometheus.Dataquery:
    """The latest value of each series as a table row, its labels as columns."""
    return instant(expr, ref=ref).format(PromQueryFormat.TABLE)


def legend() -> common.VizLegendOptions:
    return (common.VizLegendOptions().display_mode(LegendDisplayMode.TABLE).placement(LegendPlacement.BOTTOM)
            .show_legend(True).calcs(["lastNotNull", "max"]))


def graph(title: str, description: str, unit: str, *targets: prometheus.Dataquery,
          width: int = 12) -> timeseries.Panel:
    panel = (timeseries.Panel().title(title).description(description).datasource(DATASOURCE).unit(unit)
             .span(width).height(8).legend(legend()).min(0))
    for target in targets:
        panel = panel.with_target(target)
    return panel


# -- variables ------------------------------------------------------------------------------------

def datasource_variable() -> dashboard.DatasourceVariable:
    return (dashboard.DatasourceVariable("datasource").label("Prometheus").type("prometheus")
            .description("The Prometheus that scrapes the jetwatch collectors."))


def chained_variable(label: str) -> dashboard.QueryVariable:
    """A multi-value variable, its values filtered by the variables before it in CHAIN. The
    clusters are read from the collectors' freshness gauge, which every collector exports, so a
    cluster whose consumers are all OK is still listed and its fleet panels still chosen; the
    rest from the verdicts, which above --metrics-all-up-to (or under `non_ok`) name only
    consumers that are not OK."""
    before = CHAIN[:CHAIN.index(label)]
    if label == "cluster":
        source = metric("jetwatch_collector_last_cycle_timestamp_seconds")
        said = "The clusters of the collectors Prometheus scrapes (each collector's --cluster)."
    else:
        selector = ", ".join(f'{b}=~"${b}"' for b in before)
        source = f"{metric('jetwatch_consumer_verdict')}{{{selector}}}"
        said = (f"The {label}s of the consumers that have a verdict series: every consumer up to "
                "--metrics-all-up-to, only those not OK above it (--metrics-cardinality auto).")
    return (dashboard.QueryVariable(label).label(label.capitalize()).description(said).datasource(DATASOURCE)
            .query(f"label_values({source}, {label})").refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(VariableSort.ALPHABETICAL_ASC).multi(True).include_all(True).all_value(".*")
            .current(VariableOption(selected=True, text=["All"], value=["$__all"])))


# -- panels ---------------------------------------------------------------------------------------

def verdict_counts() -> timeseries.Panel:
    expr = f"sum by (verdict) ({in_clusters(metric('jetwatch_consumers'))})"
    return graph("Consumers by verdict", (
        "How many consumers each verdict names, in the chosen clusters, OK ones included (these totals "
        "are exported whatever --metrics-cardinality). Anything but OK rising: the table beside names "
        "the consumers; jetwatch's Consumer page says why and what to do."), "short", query(expr, "{{verdict}}"))


def worst_consumers() -> table.Panel:
    selector = f'{{{PER_CONSUMER}, verdict!="OK"}}'
    judged = f"{metric('jetwatch_consumer_verdict')}{selector} == 1"
    since = f"time() - {metric('jetwatch_consumer_verdict_since_timestamp_seconds')}{selector}"
    hidden = {"Time": True, "Value #A": True, "__name__": True, "job": True, "instance": True}
    return (table.Panel().title("Consumers not OK now").description(
        "Every consumer whose verdict is not OK, longest held first: `For` is how long the verdict has "
        "held. Open the consumer on jetwatch's Consumer page (the alert's runbook link) for the reason "
        "and the next step; a consumer held for long was likely not acted on. " + NON_OK_ONLY)
        .datasource(DATASOURCE).span(12).height(8)
        .with_target(rows_of(judged, "A")).with_target(rows_of(since, "B"))
        .with_transformation(DataTransformerConfig(id_val="merge", options={}))
        .with_transformation(DataTransformerConfig(id_val="organize", options={
            "excludeByName": hidden, "renameByName": {"Value #B": "For"}}))
        .override_by_name("For", [DynamicConfigValue(id_val="unit", value="s")])
        .sort_by([common.TableSortByFieldState().display_name("For").desc(True)]))


def pending() -> timeseries.Panel:
    expr = f"{metric('jetwatch_consumer_pending_messages')}{{{PER_CONSUMER}}}"
    return graph("Pending (not yet delivered)", (
        "Messages each consumer has not been delivered yet (num_pending). Growing while nothing is in "
        "flight: nobody pulls, or the pin holder is idle; growing with in flight at its limit: the "
        "workers are too slow or too few. " + NON_OK_ONLY), "short", query(expr, CONSUMER_LEGEND))


def in_flight() -> timeseries.Panel:
    flight = f"{metric('jetwatch_consumer_ack_pending_messages')}{{{PER_CONSUMER}}}"
    limit = f"{metric('jetwatch_consumer_ack_pending_limit_messages')}{{{PER_CONSUMER}}}"
    return (graph("In flight vs max_ack_pending", (
        "Messages delivered and not yet acknowledged (num_ack_pending), and the consumer's "
        "max_ack_pending as a dashed line. At the limit the server delivers nothing more: workers hold "
        "messages without acknowledging them (stuck, or ack_wait too long), or need more room. "
        + NON_OK_ONLY), "short", query(flight, CONSUMER_LEGEND + " in flight", "A"),
        query(limit, CONSUMER_LEGEND + " limit", "B"))
        .override_by_query("B", [DynamicConfigValue(id_val="custom.lineStyle", value={"fill": "dash", "dash": [10, 10]})]))


def oldest_unacked() -> timeseries.Panel:
    expr = f"{metric('jetwatch_consumer_oldest_unacked_age_seconds')}{{{PER_CONSUMER}}}"
    return graph("Oldest unacknowledged message age", (
        "How old the oldest message is that each consumer has not acknowledged: the consumer's lag in "
        "time. Rising steadily: the work is falling behind; compare it with the stream's max_age. "
        + NON_OK_ONLY), "s", query(expr, CONSUMER_LEGEND))


def time_to_loss() -> timeseries.Panel:
    expr = f"{metric('jetwatch_consumer_time_to_loss_seconds')}{{{PER_CONSUMER}}}"
    return graph("Time to loss", (
        "Seconds until the stream's limits (max_age, max_msgs, max_bytes with discard old) remove "
        "messages the consumer has not processed, at the current rates; 0: they already have. Only "
        "consumers with a loss in sight have a series. Before it reaches 0: add workers, or raise the "
        "stream's limits. " + NON_OK_ONLY), "s", query(expr, CONSUMER_LEGEND))


def counted(counter: str) -> str:
    """The counter's increase over the rate interval, a series born within it counted whole. The
    collector writes a cause's series with its first move, and increase() needs two samples of a
    series: alone it would never show a cause's first move, which for a rare cause is every move."""
    name, window = metric(counter), "$__rate_interval"
    return f"({name} unless {name} offset {window}) or increase({name}[{window}])"


def pin_moves() -> timeseries.Panel:
    expr = f"sum by (cause) ({in_clusters(counted('jetwatch_pin_moves'))})"
    return (graph("Pin moves by cause", (
        "How often the pin of pinned_client consumers moved to another client, by cause "
        "(operator_unpin, leader_change, deploy, holder_disconnected, priority_timeout, unknown), each "
        "counted once its cause is settled (--deploy-window after the pin ended). Moves other than "
        "an operator's unpin, repeated: look at the holders on jetwatch's Pins page."), "short",
        query(expr, "{{cause}}")).draw_style(GraphDrawStyle.BARS))


def failover_readiness() -> stat.Panel:
    expr = f"sum by (readiness) ({in_clusters(metric('jetwatch_pinned_groups'))})"
    return (stat.Panel().title("Failover readiness of pinned groups").description(
        "pinned_client consumers by what happens if the pin holder stops: standby (another client's "
        "pull waits, and the pin moves to it after priority_timeout), no_standby (work stops until a "
        "new client pulls), no_holder (nothing is pinned). no_standby is a finding, not a fault: start "
        "a second worker where the work must not wait.").datasource(DATASOURCE).span(12).height(8)
        .with_target(instant(expr, "{{readiness}}")).unit("short")
        .reduce_options(common.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
        .graph_mode(BigValueGraphMode.NONE).color_mode(BigValueColorMode.VALUE))


def cycle_time() -> timeseries.Panel:
    buckets = f"rate({metric('jetwatch_collector_cycle_duration_seconds', '_bucket')}[$__rate_interval])"
    by_collector = f"sum by (job, instance, le) ({in_clusters(buckets)})"
    return graph("Collector cycle time", (
        "How long the collector's sampling cycles take (sampling to verdicts kept), median and 95th "
        "percentile. A cycle longer than the collector's --interval holds back the next, and the data "
        "ages: raise --interval, or give this collector fewer streams to watch."), "s",
        query(f"histogram_quantile(0.5, {by_collector})", "{{instance}} p50", "A"),
        query(f"histogram_quantile(0.95, {by_collector})", "{{instance}} p95", "B"), width=8)


def freshness() -> timeseries.Panel:
    fresh = metric("jetwatch_collector_last_cycle_timestamp_seconds")
    return graph("Data freshness", (
        "Seconds since each cluster's collector ended its last cycle. Growing past a few --interval: the "
        "collector is stuck or cannot reach NATS (JetwatchCollectorSilent fires past 60 s); every verdict "
        "on this dashboard is that old."), "s", query(f'time() - {fresh}{{cluster=~"$cluster"}}', "{{cluster}}"), width=8)


def collector_errors() -> timeseries.Panel:
    rejects = f"increase({metric('jetwatch_collector_rejects')}[$__rate_interval])"
    gaps = f"increase({metric('jetwatch_collector_capture_gaps')}[$__rate_interval])"
    return graph("Collector errors", (
        "Inputs the collector rejected (malformed samples or advisories) and gaps found in its advisory "
        "capture (advisories lost before they were stored: pin history is incomplete around them). Any "
        "gap: read the collector's log and docs/faults.md."), "short",
        query(f"sum by (instance) ({in_clusters(rejects)})", "{{instance}} rejected inputs", "A"),
        query(f"sum by (instance) ({in_clusters(gaps)})", "{{instance}} capture gaps", "B"), width=8)


def dashboard_builder() -> dashboard.Dashboard:
    board = (dashboard.Dashboard("jetwatch").uid("jetwatch").tags(["nats", "jetstream", "jetwatch"])
             .description("NATS JetStream pull consumers as jetwatch judges them: verdicts, backlog, pins, "
                          "and the collector's own health.")
             .refresh("30s").time("now-1h", "now").with_variable(datasource_variable()))
    for label in CHAIN:
        board = board.with_variable(chained_variable(label))
    rows: tuple[tuple[str, tuple[Any, ...]], ...] = (
        ("Fleet", (verdict_counts(), worst_consumers())),
        ("Consumers", (pending(), in_flight(), oldest_unacked(), time_to_loss())),
        ("Pins", (pin_moves(), failover_readiness())),
        ("Collector", (cycle_time(), freshness(), collector_errors())),
    )
    ids = iter(range(1, 100))  # Grafana links to a panel by its id: each its own
    for title, panels in rows:
        board = board.with_row(dashboard.Row(title).id(next(ids)))
        for panel in panels:
            board = board.with_panel(panel.id(next(ids)))
    return board


def build() -> dict[str, Any]:
    """The dashboard as plain JSON values (what `jetwatch.json` holds)."""
    loaded: dict[str, Any] = json.loads(json.dumps(dashboard_builder().build(), cls=JSONEncoder))
    return loaded


def queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every query of every panel, read back from the built JSON."""
    return [(p["title"], t["expr"]) for p in build()["panels"] for t in p.get("targets", [])]


def render() -> str:
    return json.dumps(build(), sort_keys=True, indent=2) + "\n"


if __name__ == "__main__":
    try:
        sys.stdout.write(render())
    except UndeclaredMetric as exc:
        sys.exit(f"dashboard.py: {exc}")
