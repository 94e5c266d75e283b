"""Consumer: one consumer's verdict since when and what to do, its gauges, rates, pins, config history and
advisories; refreshed like the Fleet."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pandas as pd
import streamlit as st

from jetwatch.actions.operations import THEN_CHOICES, Target
from jetwatch.core.pin_announce import verification_words
from jetwatch.dashboard import charts, data, dropped, operator, stores, tables, ui, url_state
from jetwatch.health import advice, drops, failover, silences, thresholds
from jetwatch.health.cluster import UNLISTED
from jetwatch.store.database import StoreError, StoreMissing

s = ui.settings()
params = st.query_params

st.title("Consumer")
operator.sidebar(s)
try:
    fleet_stores = ui.fleet_stores(s)
    latest = stores.consumer_keys(fleet_stores)
except StoreMissing as exc:
    st.info(ui.md(exc))
    st.stop()
except StoreError as exc:  # held by another process for longer than --lock-timeout
    st.error(ui.md(exc))
    st.stop()

if latest.empty:
    st.info("No consumers yet: the collector has not sampled the server.")
    st.stop()

several = len(fleet_stores) > 1
clusters = [cs.cluster for cs in fleet_stores]
wanted_cluster = params.get("cluster")
if wanted_cluster not in clusters:  # a link without its cluster: the first that has the consumer
    named = latest[(latest["stream"] == params.get("stream")) & (latest["consumer"] == params.get("consumer"))]
    wanted_cluster = named["cluster"].iloc[0] if not named.empty else clusters[0]
# The cluster picker only with several clusters: one store reads exactly as before clusters.
cluster = (st.selectbox("Cluster", clusters, index=clusters.index(wanted_cluster), key="consumer_cluster")
           if several else clusters[0])
mine = latest[latest["cluster"] == cluster]
options = list(zip(mine["account"], mine["stream"], mine["consumer"]))
wanted = (params.get("account"), params.get("stream"), params.get("consumer"))
if wanted[1] and wanted[2] and not wanted[0]:
    wanted = next((o for o in options if o[1:] == wanted[1:]), wanted)
if wanted not in options and all(wanted[1:]):
    options.append(wanted)  # a consumer no longer live: its history is still worth seeing
if not options:
    st.info(f"No consumers in cluster {ui.md(cluster)} yet: its collector has not sampled its server.")
    st.stop()
index = options.index(wanted) if wanted in options else 0
choice = st.selectbox("Consumer", options, index=index, key="consumer_pick",
                      format_func=lambda o: ui.visible(f"{o[1]} / {o[2]}  ({o[0]})"))
account, stream, consumer = choice
st.query_params.update({"cluster": cluster, "account": account, "stream": stream, "consumer": consumer})
here = stores.find(fleet_stores, cluster)
store = here.store

range_choice = url_state.selectbox(st, "Time range", list(ui.RANGES), key="consumer_range", param="range",
                                   default="1 hour")
operator.dialog(s, store)  # the pending action names its cluster: its server and store


def holder_help(row: pd.Series, pinned: str, now: dt.datetime) -> str:
    """The pin id whole, and what the holder's worker said of itself and how that was checked.
    A tile's help is Markdown, and every announced field is whatever a user of the account chose
    to publish: each is escaped (a link or an image in a version must read as text, never load)."""
    text = f"pin id {ui.md(pinned)}, since {ui.md(ui.since(row['pinned_ts'], now))}. "
    name = row.get("holder_name")
    if not isinstance(name, str):
        return text + ("No worker announced this pin: a worker that uses jetwatch's pin announcement "
                       "(docs/deployment.md, \"Who holds the pin\") says its name, host and version when pinned.")
    details = ", ".join(f"{label} {ui.md(value)}" for label, value in (
        ("host", row.get("holder_host")), ("process", row.get("holder_pid")), ("version", row.get("holder_version")))
        if value is not None and not (isinstance(value, float) and pd.isna(value)))
    return text + f"Announced by {ui.md(name)} ({details}): {ui.md(row.get('holder_note') or '')}."


def verdict_of(now: dt.datetime) -> pd.Series | None:
    """The verdict the collector kept for this consumer, read alone (never the whole fleet's)."""
    mine = data.fleet(store, ui.thresholds(s), now=now, only=(account, stream, consumer)).consumers
    return None if mine.empty else mine.iloc[0]


def actions(row: pd.Series, verdict: pd.Series | None) -> None:
    """The operator's actions, each offered only where it can succeed (or with a warning first)."""
    target = Target(account, stream, consumer, row["pin_group"] if isinstance(row["pin_group"], str) else None)
    context = tables.context(row)
    st.markdown("#### Actions")
    a1, a2, a3, a4 = st.columns(4)
    if context.grouped:
        a1.button("Unpin", key="action_unpin", on_click=operator.request, args=("unpin", target, cluster),
                  kwargs={"expect_pin": context.pinned_id}, disabled=not advice.unpin_offered(context),
                  help=f"drops pin {context.pinned_id}" if context.pinned else "nothing is pinned: nothing to unpin")
    minutes = a2.number_input("Pause for (minutes)", min_value=1, max_value=10080, value=15, key="pause_minutes")
    a2.button("Pause", key="action_pause", on_click=lambda: operator.request(
        "pause", target, cluster, until=data.utcnow() + dt.timedelta(minutes=minutes)))
    paused = bool(row["paused"]) if not pd.isna(row["paused"]) else False
    a3.button("Resume", key="action_resume", on_click=operator.request, args=("resume", target, cluster),
              disabled=not paused, help=None if paused else "not paused: nothing to resume")
    choices = advice.drain_choices(THEN_CHOICES, context)
    then = a4.selectbox("Drain, then", choices, key="drain_then",
                        help=None if "handoff" in choices else "no hand-off: nobody is pinned in a priority group")
    timeout_s = a4.number_input("Drain timeout (s)", min_value=1, max_value=3600, value=60, key="drain_timeout")
    stay_minutes = 60
    if then == "stay-paused":
        stay_minutes = a4.number_input("Stay paused for (minutes)", min_value=1, value=60, key="drain_stay")
    warning = advice.drain_warning(str(verdict["verdict"])) if verdict is not None else None
    anyway = True
    if warning:
        a4.warning(warning, icon="⚠️")
        anyway = a4.checkbox("Drain anyway", key="drain_anyway")
    a4.button("Drain", key="action_drain", disabled=not anyway, on_click=lambda: operator.request(
        "drain", target, cluster, then=then, timeout_s=timeout_s,
        stay_until=data.utcnow() + dt.timedelta(minutes=stay_minutes) if then == "stay-paused" else None))
    silence_action(target, verdict)
    if verdict is not None and str(verdict["reason"]).startswith(UNLISTED):
        st.button("Forget", key="action_forget", on_click=operator.request, args=("forget", target, cluster),
                  help="the server no longer lists it and no DELETED advisory said it was removed: forget it if you "
                       "know it is gone for good (it comes back if the server lists it again)")


SILENCE_FOR = {"15 min": 900, "1 h": 3600, "4 h": 4 * 3600, "8 h": 8 * 3600, "24 h": 24 * 3600}


def silence_action(target: Target, verdict: pd.Series | None) -> None:
    """Acknowledge the verdict for a while, with a note: its alerts are held back, it stays shown."""
    current = str(verdict["verdict"]) if verdict is not None else None
    can = current is not None and silences.alerting(current)
    s1, s2, s3 = st.columns([1, 3, 1])
    length = s1.selectbox("Silence for", list(SILENCE_FOR), index=1, key="silence_for", disabled=not can)
    note = s2.text_input("Note (why, who is on it)", key="silence_note", disabled=not can,
                         max_chars=silences.NOTE_CHARS)
    s3.button(f"Silence {current}" if can else "Silence", key="action_silence",
              disabled=not can or not note.strip(),
              help=("hold back this verdict's alerts for the time chosen, or until it turns into another; the "
                    "verdict stays shown" if can else f"{current or 'no verdict'} raises no alert: nothing to silence"),
              on_click=lambda: operator.request("silence", target, cluster, for_s=SILENCE_FOR[length], note=note,
                                                expect_verdict=current))


def thresholds_section(configs: pd.DataFrame) -> None:
    """Which thresholds this consumer's metadata sets (io.nats.monitor.* or io.jetwatch.*), which
    keys it names that jetwatch does not apply, and what could not be read; the rest are the settings."""
    st.markdown("#### Thresholds")
    metadata = None
    if not configs.empty:
        config = configs.iloc[0]["config_json"]
        config = json.loads(config) if isinstance(config, str) else config
        metadata = config.get("metadata") if isinstance(config, dict) else None
    own = thresholds.from_metadata(metadata)
    settings_now = ui.thresholds(s)
    rows = [{"Threshold": name, "Value": ui.duration(own.values[name]) if name.endswith(("_after", "_age", "_within"))
             else f"{own.values[name]:g}", "From": f"metadata {own.sources[name]}",
             "Setting": ui.duration(getattr(settings_now, name)) if name.endswith(("_after", "_age", "_within"))
             else f"{getattr(settings_now, name):g}"} for name in sorted(own.values)]
    if rows:
        st.caption("set by this consumer's metadata; every other threshold is the setting")
        st.dataframe(ui.visible_frame(pd.DataFrame(rows)), key="consumer_thresholds", hide_index=True)
    else:
        st.caption("all from the settings: this consumer's metadata sets none (io.nats.monitor.last-ack-critical, "
                   "io.nats.monitor.last-delivery-critical or io.jetwatch.<threshold>)")
    for key, why in own.not_applied.items():
        st.caption(ui.md(f"{key} is not applied: {why}"))
    for problem in own.problems:
        st.warning(ui.md(f"metadata threshold not read: {problem}"), icon="⚠️")


def silences_section(found: pd.DataFrame, now: dt.datetime) -> None:
    st.markdown("#### Silences")
    if found.empty:
        st.caption("none: an operator may silence an alerting verdict for up to 24 h with a note (Actions below, "
                   "or `jetwatch silence`)")
        return
    st.dataframe(ui.visible_frame(data.silences_table(found, now)), key="consumer_silences", hide_index=True)


def standby(col: Any, row: pd.Series) -> None:
    """Failover readiness of a pinned_client group (health/failover.py): a finding, not a verdict."""
    found = failover.finding(row.get("priority_policy"), row.get("pinned_id"), row.get("num_waiting"),
                             row.get("num_pending"), row.get("num_ack_pending"), row.get("max_ack_pending"),
                             s.holder_pulls)
    if found is None:
        return
    value = {failover.STANDBY: f"{found['standby_pulls']} waiting", failover.NO_STANDBY: "none",
             failover.NO_HOLDER: "no holder"}[found["readiness"]]
    col.metric("Standby", value, help="pulls waiting beyond the holder's, read from num_waiting: with messages "
               "pending, a pull carrying the pin id is served at once, so every waiting pull is a standby's; with "
               f"none pending, the holder's own pull waits too (counted as {s.holder_pulls}, --holder-pulls)")
    col.caption(found["finding"])


def cluster_section(led: data.Leadership | None, now: dt.datetime) -> None:
    """Which server leads the consumer, since when, and each leader change in the range: what
    `nats consumer info` shows of its cluster, with its history."""
    if led is None:
        return
    st.markdown("#### Cluster")
    since = ui.md(ui.since(led.since, now))
    if led.leader is None:
        st.markdown(f"**No server leads it** since {since}: nothing is delivered or acknowledged until one is elected")
    else:
        st.markdown(f"Led by **{ui.md(led.leader)}** since {'at least ' if led.from_start else ''}{since}")
    if led.changes:
        n = len(led.changes)
        moves = "; ".join(f"{ui.md(a or 'no leader')} → {ui.md(b or 'no leader')} at {ui.md(ui.since(at, now))}"
                          for at, a, b in led.changes[-5:])
        st.caption(f"{n} leader change{'s' if n != 1 else ''} in this range{' (the last 5)' if n > 5 else ''}: {moves}")


def unpinned_here(target: Target) -> tuple[bool, str | None, str | None]:
    """Whether this session unpinned the consumer (its result still shown), the pin it dropped (None:
    the reply did not say) and the latest other pin the server's events show since (None: none yet;
    the events are read from just before the unpin, where the dropped pin may still be)."""
    result = operator.result_for(target, cluster)
    if result is None or not result.ok or result.action != "unpin":
        return False, None, None
    dropped = result.details.get("unpinned_id")
    fresh = operator.new_pin_after(store, result)
    fresh = fresh[fresh["pinned_id"] != dropped] if dropped and not fresh.empty else fresh
    new = fresh.iloc[-1]["pinned_id"] if not fresh.empty else None
    return True, (str(dropped) if dropped else None), (str(new) if isinstance(new, str) and new else None)


def poison(gone: pd.DataFrame, naks: pd.DataFrame, counts: pd.DataFrame, now: dt.datetime) -> None:
    """Messages the consumer dropped (all counted, the newest listed), and naked ones about to be,
    each with the line that reads it."""
    st.markdown("#### Dropped messages")
    if gone.empty:
        st.caption("none retained: no message of this consumer reached max_deliver or was terminated")
    else:
        by_cause = dropped.causes(counts)
        total = sum(by_cause.values())
        parts = [f"{n} {drops.WORDS[c]}" for c, n in by_cause.items()]
        listed = f"the newest {len(gone)} listed" if len(gone) < total else "newest first"
        st.caption(f"{total} message{'s' if total != 1 else ''} this consumer dropped unprocessed since "
                   f"{ui.md(ui.since(counts['oldest'].min(), now))} (what the store keeps), {listed}: "
                   f"{'; '.join(parts)}.")
        if by_cause.get(drops.MAX_DELIVER) or by_cause.get(drops.TERMINATED):
            st.caption("Given up on by the workers: read one with its line below the table, then fix the handler or "
                       "move it to a dead-letter stream.")
        if by_cause.get(drops.REMOVED):
            st.caption("Removed from the stream while owed: lost, not poison; the workers did not keep up with the "
                       "stream's limits (add workers, or raise max_age, max_msgs or max_bytes).")
        st.dataframe(ui.visible_frame(dropped.table(gone, stream)), key="consumer_dropped", hide_index=True)
        lines = dropped.readable_lines(gone, stream)
        if lines:
            st.code("\n".join(lines), language="bash")
    if not naks.empty:
        st.markdown("##### Naked, still owed")
        st.caption("messages the workers refused in this range: how many deliveries each has left before "
                   "max_deliver drops it")
        st.dataframe(ui.visible_frame(dropped.naks_table(naks)), key="consumer_naks_left", hide_index=True)


@st.fragment(run_every=s.refresh)
def live() -> None:
    """Everything read from the store refreshes like the Fleet; the numbers and the pin id come
    from one read of the consumer's latest sample, so the pin shown is never older than them."""
    until = data.utcnow()
    since = until - ui.RANGES[range_choice]
    try:
        detail = data.consumer_detail(store, account, stream, consumer, since, until)
    except StoreError as exc:
        st.error(ui.md(exc))
        return
    now = data.utcnow()
    ui.stale_banner(s, now)
    operator.show_result({cluster: store}, Target(account, stream, consumer), cluster)  # this consumer's only
    try:
        hushes = data.consumer_silences(store, account, stream, consumer)
    except StoreError as exc:
        st.error(ui.md(exc))
        hushes = pd.DataFrame(columns=["ended_at", "end_reason", *silences.COLUMNS])
    st.subheader(f"{ui.md(stream)} / {ui.md(consumer)}")
    if detail.latest.empty:
        st.warning("This consumer is not in the latest sample: it was deleted, or is filtered out.")
        max_ack = max_wait = None
    else:
        row = detail.latest.iloc[0]
        st.caption(f"Data as of {ui.md(ui.since(row['ts'], now))} · refreshes every {ui.duration(s.refresh)}")
        max_ack, max_wait = row["max_ack_pending"], row["max_waiting"]
        verdict = verdict_of(now)
        if verdict is not None:
            st.markdown(f"### {ui.badge(verdict['verdict'])} since {ui.md(ui.since(verdict['since'], now))}")
            verdict = silences.attach(pd.DataFrame([verdict]).drop(columns=["silenced", *silences.COLUMNS],
                                                                   errors="ignore"),
                                      hushes[hushes["ended_at"].isna()], now).iloc[0]
            ui.silence_banner(verdict, now)
            ui.findings(row.combine_first(verdict), now)  # the pin as sampled with the numbers
            ui.config_findings(verdict)
        counts = st.columns(4)
        counts[0].metric("Pending (msgs)", f"{row['num_pending']:,}")
        counts[1].metric("In flight (msgs)", f"{row['num_ack_pending']:,}")
        counts[2].metric("Pulls waiting", f"{row['num_waiting']:,}")
        counts[3].metric("To redeliver (msgs)", f"{row['num_redelivered']:,}")
        # A tile cuts a value that does not fit: each holds a number, a duration or a state, and
        # what qualifies it (estimate, range, the whole pin id) is said under it or in its help.
        tiles = st.columns(4)
        pinned = row["pinned_id"] if isinstance(row["pinned_id"], str) and row["pinned_id"] else None
        name = row.get("holder_name") if pinned else None
        announced = isinstance(name, str) and bool(name)
        policy = row.get("priority_policy") if isinstance(row.get("priority_policy"), str) else None
        unpinned, dropped_pin, new_pin = unpinned_here(Target(account, stream, consumer))
        if unpinned and (new_pin is not None or pinned is None or pinned == dropped_pin):
            # After this session's unpin the sample may still show the dropped pin: the tile says
            # what the server's pin events say since (the latest pin, or nobody yet), once.
            tiles[0].metric("Pin holder", ui.pin_tail(new_pin) if new_pin else "nobody yet",
                            help=f"you unpinned {'pin ' + ui.md(dropped_pin) if dropped_pin else 'the pin held then'}"
                                 + (f"; the pin since is {ui.md(new_pin)}" if new_pin else ""))  # Markdown: escaped
            tiles[0].caption(f"new pin, after your unpin (pin id {ui.md(new_pin)})" if new_pin else
                             "unpinned: the next client to pull is pinned")
        elif pinned or policy == "pinned_client":
            tiles[0].metric("Pin holder", "nobody" if not pinned else ui.short(ui.visible(name)) if announced
                            else ui.pin_tail(pinned), help=holder_help(row, pinned, now) if pinned else None)
            if pinned:  # a tile holds a short value: whether the holder is verified goes under it
                tiles[0].caption(verification_words(row.get("holder_verification")) if announced else "unannounced")
        else:  # no pin can be held: a "nobody" here would read as a group that lost its holder
            tiles[0].metric("Priority policy", policy or "none",
                            help="ADR-42 priority groups: only a pinned_client group has a pin holder")
        for col, (label, age, kind) in zip(tiles[1:], (
                ("Oldest unacked", row["oldest_unacked_age_seconds"], row["oldest_unacked_age_kind"]),
                ("Oldest undelivered", row["oldest_undelivered_age_seconds"], row["oldest_undelivered_age_kind"]))):
            col.metric(label, "none" if pd.isna(age) else ui.duration(age),
                       help="age of the oldest message still owed, read from the stream's timestamps (an estimate is "
                            "interpolated from its sequence/time history where the collector may not read messages)")
            if kind == "estimate" and not pd.isna(age):
                col.caption("estimated from the stream's history")
        if verdict is not None:
            value, spread = tables.eta_tile(verdict)
            tiles[3].metric("Drain ETA", value or "none",
                            help="backlog over the health window's net drain rate (acks minus arrivals), with its range")
            if spread:
                tiles[3].caption(f"range {spread}")
        loss = row.get("time_to_loss_seconds")
        more = st.columns(4)
        standby(more[1], row)
        more[0].metric(
            "Time to loss", "none" if loss is None or pd.isna(loss) else "losing now" if loss <= 0
            else "~" + ui.duration(loss),
            help="when the stream's limits (max_age, max_msgs, max_bytes with discard old) remove messages this "
                 "consumer has not processed, at the current arrival and acknowledgement rates")
        if row["paused"]:
            st.info(f"Paused until {ui.md(ui.since(row['pause_until'], now))}")
        operator.drain_progress(store, account, stream, consumer)
        if operator.operator(s):
            actions(row, verdict)
            if st.session_state.pop(operator.FRESH, False):
                st.rerun(scope="app")  # the confirmation dialog lives outside this fragment

    start = data.data_start(detail.samples, since)  # a young install: the range starts where its data does
    st.caption(f"Showing {detail.source}" + (f" from {ui.md(ui.since(start, now))}, where this consumer's data starts"
                                             if start > since else ""))
    band = detail.band(start, until)
    st.plotly_chart(charts.consumer_gauges(detail.samples, max_ack, max_wait, band=band, span=(start, until)),
                    key="consumer_gauges")
    if not band.empty:
        st.caption("Behind the charts: the verdicts the collector judged, " + " → ".join(
            f"{v} {ui.ago(t, now)}" for v, t in zip(band["verdict"].tail(4), band["start"].tail(4))))
    if detail.source.startswith("raw samples"):
        filtered = bool(not detail.latest.empty and detail.latest["filtered"].fillna(False).astype(bool).iloc[0])
        st.plotly_chart(charts.consumer_rates(data.rates(detail.samples, filtered), "Rates from sequence deltas",
                                              span=(start, until)), key="consumer_rates")
    sessions, done = detail.sessions, detail.actions
    st.plotly_chart(charts.pin_timeline(sessions, data.pin_switches(detail.pins), "Pin timeline", actions=done),
                    key="consumer_pins")

    cluster_section(data.leadership(detail.samples), now)
    poison(detail.dropped, detail.naks, detail.dropped_counts, now)

    silences_section(hushes, now)
    thresholds_section(detail.configs)

    st.markdown("#### Configuration")
    if detail.configs.empty:
        st.caption("no configuration recorded")
    else:
        current = detail.configs.iloc[0]
        st.json(ui.visible_value(json.loads(current["config_json"]) if isinstance(current["config_json"], str)
                                 else current["config_json"]), expanded=False)
        table = tables.build(tables.CONFIGS, detail.configs, now)
        st.dataframe(ui.visible_frame(table), key="consumer_config_history", hide_index=True,
                     column_config=tables.column_config(tables.CONFIGS, table))

    st.markdown("#### Recent advisories")
    if detail.advisories.empty:
        st.caption("none in this range")
    else:
        table = tables.build(tables.ADVISORIES, detail.advisories, now)
        st.dataframe(ui.visible_frame(table), key="consumer_advisories", hide_index=True,
                     column_config=tables.column_config(tables.ADVISORIES, table))


live()
