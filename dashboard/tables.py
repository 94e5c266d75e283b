"""The pages' tables, declared once as lists of columns: a header in words with its unit, how a
cell is made from the page's frame, and how the grid shows it.

A column is one entry in a list, so adding one (such as "oldest unacked" or "ETA") is one
line in `FLEET`, and every header, width and frozen identity column comes from here. Cells never
read `None`/`nan` (empty instead), durations are in words (core/durations.py) and pin ids show their distinguishing
tail (dashboard/text.py). Streamlit only in `column_config`, so the cells are tested with plain
pytest.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote, urlencode

import pandas as pd

from jetwatch.dashboard.text import cell, duration, pin_holder, pin_tail, visible
from jetwatch.health import advice
from jetwatch.health import eta as eta_rule

Cells = Callable[[pd.DataFrame, dt.datetime], Sequence[Any]]
NAME_WIDTH = 125  # pixels for a stream or consumer name: ORDERS_archive whole, still three identity columns in 400 px


@dataclass(frozen=True)
class Column:
    header: str  # in words, with the unit: what the engineer reads
    cells: Cells  # the column's values for the rows of the page's frame, at `now`
    kind: str = "text"  # text | number | link
    number_format: str | None = None
    width: str | int | None = None  # small | medium | large, or pixels
    pinned: bool = False  # identity: stays in view when the table scrolls right
    help: str | None = None
    shown_if: Callable[[pd.DataFrame], bool] | None = None  # e.g. the account only with several accounts


def consumer_link(account: object, stream: str, consumer: str, cluster: object = None) -> str:
    """The Consumer page's deep link for one consumer (its name last: the Fleet shows it as the
    link's text, decoded by the grid); with its cluster, the page reads that cluster's store. A
    name with bidi controls gets a last parameter of its own, `shown`, the name with each control
    as a visible mark: the grid shows that, and the page ignores it (U+202E would turn the link's
    text around, and a name could pass for another)."""
    query = {"cluster": cluster, "account": account, "stream": stream, "consumer": consumer}
    shown = visible(consumer)
    if shown != consumer:
        query["shown"] = shown
    return "consumer?" + urlencode({k: v for k, v in query.items() if v is not None and not pd.isna(v)},
                                   quote_via=quote)


CONSUMER_IN_LINK = r"[?&](?:consumer|shown)=([^&]*)$"  # the link text: the consumer's name, as shown


def link_target(url: str) -> dict[str, str]:
    """account, stream and consumer named by a consumer link (for tests and the selection)."""
    from urllib.parse import parse_qs, urlsplit
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


def limit(values: pd.Series, limits: pd.Series) -> list[str]:
    """'12 / 1,000': a gauge and its limit ('∞' for none)."""
    return [f"{v:,.0f} / {'∞' if pd.isna(m) or m <= 0 else f'{m:,.0f}'}" if not pd.isna(v) else ""
            for v, m in zip(values, limits)]


def since_cell(ts: object, now: dt.datetime) -> str:
    """When a state started, absolute (UTC) and as an age, short enough for a table cell:
    '07:12:03 (12 min ago)' today, '11-22 07:12 (1 d 2 h ago)' before."""
    if ts is None or pd.isna(ts):
        return ""
    t, n = pd.Timestamp(ts).tz_convert("UTC"), pd.Timestamp(now).tz_convert("UTC")
    clock = t.strftime("%H:%M:%S") if t.date() == n.date() else t.strftime("%m-%d %H:%M")
    return f"{clock} ({duration((n - t).total_seconds())} ago)"


def _since_words(f: pd.DataFrame, now: dt.datetime) -> list[str]:
    """The verdict's since, and where an unhealthy run began earlier (the consumer moved between
    verdicts in it), that start too: one "unhealthy since" however the verdict changes."""
    run = f["unhealthy_since"] if "unhealthy_since" in f else [None] * len(f)
    out = []
    for since, began in zip(f["since"], run):
        said = since_cell(since, now)
        if began is not None and not pd.isna(began) and (since is None or pd.isna(since)
                                                          or pd.Timestamp(began) < pd.Timestamp(since)):
            said = f"{said}; unhealthy since {since_cell(began, now)}" if said else f"unhealthy since {since_cell(began, now)}"
        out.append(said)
    return out


def _pinned_for(f: pd.DataFrame, now: dt.datetime) -> list[str]:
    return [duration((pd.Timestamp(now) - pd.Timestamp(t)).total_seconds()) if isinstance(p, str) and p and not pd.isna(t)
            else "" for p, t in zip(f["pinned_id"], f["pinned_ts"])]


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _time(value: object) -> Any:
    return None if value is None or pd.isna(value) else value


def context(row: Any) -> advice.Context:
    """What the advice reads about one Fleet row (a Series or a namedtuple-like mapping)."""
    get = row.get if hasattr(row, "get") else (lambda k, d=None: getattr(row, k, d))
    unpins, moves = get("unpins"), get("moves")
    return advice.Context(moves=moves if isinstance(moves, dict) else {},
        pinned_id=_text(get("pinned_id")), priority_policy=_text(get("priority_policy")), group=_text(get("pin_group")),
        unpins=unpins if isinstance(unpins, dict) else {}, last_pull=_time(get("last_pull")),
        last_ack=_time(get("last_ack")), first_seen=_time(get("first_seen")), paused_until=_time(get("pause_until")),
        since=_time(get("since")))


def _first_finding(row: Any) -> dict[str, Any]:
    findings = row.get("findings")
    return findings[0] if isinstance(findings, list) and findings else {}


def _by_row(f: pd.DataFrame, words: Callable[[dict[str, Any]], str], ok: Callable[[pd.DataFrame], pd.Series]) -> list[str]:
    """`words` of each row that is not OK (most of a big fleet is OK: its words are `ok`'s)."""
    out = ok(f).astype(object).to_numpy()
    troubled = (f["verdict"] != "OK").to_numpy()
    for i, row in zip(troubled.nonzero()[0], f[troubled].to_dict("records")):
        out[i] = words(row)
    return list(out)


def reasons(f: pd.DataFrame, now: dt.datetime) -> list[str]:
    """Each row's reason, saying since when where the verdict is about time."""
    return _by_row(f, lambda r: advice.reason_since(r["verdict"], r["reason"], _first_finding(r).get("numbers"),
                                                    context(r), now), lambda f: f["reason"])


def next_steps(f: pd.DataFrame, now: dt.datetime) -> list[str]:
    """What to do about each row's verdict."""
    nothing = advice.next_step("OK", {}, advice.Context())
    return _by_row(f, lambda r: advice.next_step(r["verdict"], _first_finding(r).get("numbers"), context(r)),
                   lambda f: pd.Series(nothing, index=f.index))


def _backlog_free(f: pd.DataFrame) -> pd.Series:
    work = pd.to_numeric(f["num_pending"], errors="coerce").fillna(0) + \
        pd.to_numeric(f["num_ack_pending"], errors="coerce").fillna(0)
    return work <= 0


def _oldest_unacked_words(f: pd.DataFrame) -> list[str]:
    """Each row's oldest unacknowledged age in words: 'none' where nothing waits, empty where it is
    not known yet."""
    age = pd.to_numeric(f["oldest_unacked_age_seconds"], errors="coerce").astype(float)
    return ["none" if free and pd.isna(a) else duration(a) for a, free in zip(age, _backlog_free(f))]


def eta_words(row: Any) -> str:
    """One consumer's ETA in words, durations as the pages say them: '~4 min 12 s (3 min–6 min)',
    'not draining', '' for none."""
    state = row.get("eta_state")
    return eta_rule.words(state if isinstance(state, str) else None, row.get("eta_seconds"),
                          row.get("eta_low_seconds"), row.get("eta_high_seconds"))


def eta_tile(row: Any) -> tuple[str, str]:
    """One consumer's ETA for a tile: ('~4 min 12 s', '3 min–6 min'), the range apart so the tile's
    value stays short; ('not draining', '') and ('', '') as eta_words says them."""
    state = row.get("eta_state")
    state = state if isinstance(state, str) else None
    value = eta_rule.words(state, row.get("eta_seconds"))
    low = row.get("eta_low_seconds")
    if not value.startswith("~") or low is None or pd.isna(low):
        return value, ""
    return value, f"{duration(low)}–{duration(row.get('eta_high_seconds')) or '∞'}"


def _eta_words(f: pd.DataFrame) -> list[str]:
    return [eta_words(r) for r in f[["eta_state", "eta_seconds", "eta_low_seconds", "eta_high_seconds"]]
            .to_dict("records")]


def _several_accounts(f: pd.DataFrame) -> bool:
    return f["account"].nunique(dropna=False) > 1


def _several_clusters(f: pd.DataFrame) -> bool:
    return "cluster" in f and f["cluster"].nunique(dropna=False) > 1


def _clusters(f: pd.DataFrame) -> Sequence[Any]:
    return list(f["cluster"]) if "cluster" in f else [None] * len(f)


def _link(f: pd.DataFrame, now: dt.datetime) -> list[str]:
    """Each row's deep link, naming its cluster when the row has one (dashboard/stores.py adds it)."""
    return [consumer_link(a, s, c, cl) for a, s, c, cl in zip(f["account"], f["stream"], f["consumer"], _clusters(f))]


def _any_silenced(f: pd.DataFrame) -> bool:
    return "silenced" in f and bool(f["silenced"].fillna(False).astype(bool).any())


def silenced_cell(row: Any, now: dt.datetime) -> str:
    """A silence in a cell: '🔕 alice, 52 min left'; empty where none holds."""
    if not bool(row.get("silenced")):
        return ""
    left = (pd.Timestamp(row["silenced_until"]) - pd.Timestamp(now)).total_seconds()
    return f"🔕 {visible(str(row['silenced_by']))}, {duration(max(left, 0.0))} left"


def _silenced(f: pd.DataFrame, now: dt.datetime) -> list[str]:
    return [silenced_cell(r, now) for r in f[["silenced", "silenced_by", "silenced_until"]].to_dict("records")]


def _cluster_column(width: Any = "small") -> Column:
    return Column("Cluster", lambda f, now: f["cluster"], width=width, pinned=True, shown_if=_several_clusters,
                  help="the cluster (its collector's --cluster) the consumer is in")


# The Fleet, left to right. The first three are the identity of a row and stay in view.
FLEET: list[Column] = [
    Column("Verdict", lambda f, now: f["verdict"], width=112, pinned=True,
           help="the most severe finding (health rules, worst first)"),
    _cluster_column(80),
    Column("Stream", lambda f, now: f["stream"], width=NAME_WIDTH, pinned=True),
    Column("Consumer", _link,
           kind="link", width=NAME_WIDTH, pinned=True, help="opens the consumer's page"),
    # Only while an operator's silence holds somewhere: beside the verdict it annotates, never instead of it.
    Column("Silenced", _silenced, width=120, shown_if=_any_silenced,
           help="an operator acknowledged this verdict: its alerts are held back for the time left, or until the "
                "verdict turns into another; the verdict itself stays as judged (the note is on the consumer's page)"),
    # The impact in view at 1280 px beside the identity: what is owed, how old, when it drains.
    Column("Pending (msgs)", lambda f, now: f["num_pending"], kind="number", number_format="%d", width=95,
           help="messages not yet delivered"),
    Column("In flight / max", lambda f, now: limit(f["num_ack_pending"], f["max_ack_pending"]), width=100,
           help="messages delivered and not yet acknowledged, of max_ack_pending"),
    Column("Oldest unacked", lambda f, now: _oldest_unacked_words(f), width=105,
           help="age of the oldest unacknowledged message, read from the stream (none: nothing waits); the "
                "table lists the oldest work first within each verdict"),
    Column("Drain ETA", lambda f, now: _eta_words(f), width=140,
           help="time until the backlog is gone at the health window's net drain rate, with its range; "
                "otherwise why it will not drain (not draining, paused, no pullers, holder idle); empty: nothing owed"),
    Column("Why", reasons, width="medium", help="the verdict's reason, with its numbers"),
    Column("Next step", next_steps, width="medium", help="what to do about it"),
    Column("Since (UTC)", lambda f, now: _since_words(f, now), width=150,
           help="when the consumer entered this verdict, and how long ago; where it was unhealthy before, under "
                "another verdict, since when it has been unhealthy without a break"),
    Column("Age is", lambda f, now: f["oldest_unacked_age_kind"], width="small",
           help="exact: the message's own timestamp; estimate: interpolated from the stream's history"),
    Column("Pulls waiting / max", lambda f, now: limit(f["num_waiting"], f["max_waiting"]), width="small",
           help="pull requests waiting at the server, of max_waiting"),
    Column("Acks/s", lambda f, now: f["acked_per_second"], kind="number", number_format="%.2f", width=120,
           help="acknowledgements per second, averaged over the health window (the verdict's reason says what "
                "happened lately)"),
    Column("Redeliveries/s", lambda f, now: f["redelivered_per_second"], kind="number", number_format="%.2f",
           width=150, help="redeliveries per second, averaged over the health window"),
    Column("Pin holder", lambda f, now: _holders(f), width="small",
           help="the pinned worker as it announced itself (verified: CONNZ shows that connection under that name), "
                "else \"unannounced\" and the end of the pin id; whole on the consumer's page"),
    Column("Pinned for", _pinned_for, width="small"),
    Column("Account", lambda f, now: f["account"], width="small", shown_if=_several_accounts),
]


def _holders(f: pd.DataFrame) -> list[str]:
    """The pin holder of each row, by its announced name where a worker announced the pin."""
    none = [None] * len(f)
    return [pin_holder(p, n, v) for p, n, v in zip(f["pinned_id"], f.get("holder_name", none),
                                                    f.get("holder_verification", none))]


# The Fleet's recent verdict changes, newest first.
CHANGES: list[Column] = [
    Column("When (UTC)", lambda f, now: [since_cell(t, now) for t in f["ts"]], width="small"),
    _cluster_column(),
    Column("Stream", lambda f, now: f["stream"], width=NAME_WIDTH, pinned=True),
    Column("Consumer", _link,
           kind="link", width="small", pinned=True),
    Column("From", lambda f, now: f["from_verdict"].fillna("(new)"), width="small"),
    Column("To", lambda f, now: f["to_verdict"], width="small"),
    Column("Why", lambda f, now: f["reason"], width="large"),
    Column("Account", lambda f, now: f["account"], width="small", shown_if=_several_accounts),
]


def _durations(column: str) -> Cells:
    return lambda f, now: [duration(v) for v in f[column]]


def _utc_cells(column: str) -> Cells:
    return lambda f, now: [since_cell(t, now) for t in f[column]]


# The Pins page: one row per consumer.
PIN_SUMMARY: list[Column] = [
    _cluster_column(),
    Column("Stream", lambda f, now: f["stream"], width=NAME_WIDTH, pinned=True),
    Column("Consumer", _link, kind="link", width=NAME_WIDTH, pinned=True),
    Column("Flapping now", lambda f, now: ["FLAPPING" if x else "" for x in f["flapping"]], width="small",
           help="the Fleet's verdict, as the collector judged it at its last cycle: more than flapping_switches "
                "pin switches in the last health window"),
    Column("Switches", lambda f, now: f["switches"], kind="number", number_format="%d", width="small"),
    Column("Most in one window", lambda f, now: f["most_in_a_window"], kind="number", number_format="%d", width="small",
           help="history: the most pin switches within any one health window of the range (flapping is judged "
                "on the last one)"),
    Column("Switches per hour", lambda f, now: f["switches_per_hour"], kind="number", number_format="%.1f",
           width="small", help="over the time with data in the range, not the whole range"),
    Column("Median pin", _durations("median_pin_seconds"), width="small",
           help="how long a pin lasts, median; the ongoing pin counts at its duration so far"),
    Column("95th percentile pin", _durations("p95_pin_seconds"), width="small",
           help="the ongoing pin counts at its duration so far"),
    Column("Ongoing pin", lambda f, now: [f"{duration(v)} so far" if v is not None and not pd.isna(v) else ""
                                          for v in f["ongoing_pin_seconds"]], width="small",
           help="the pin held now, from its start to now"),
    Column("No pin, work pending", _durations("nopin_pending_seconds"), width="small",
           help="time with messages pending and nobody pinned"),
    Column("No pin, weighted by age", _durations("nopin_age_weighted_seconds"), width="small",
           help="each second with work and nobody pinned, counted once per hour that the oldest unacknowledged "
                "message had waited then (an hour while the oldest was 2 h old counts 2 h)"),
    Column("Oldest waited, no pin", _durations("nopin_oldest_age_seconds"), width="small",
           help="the oldest unacknowledged message's age while nobody was pinned"),
    Column("Account", lambda f, now: f["account"], width="small", shown_if=_several_accounts),
]

# The Pins page: one row per pin (a session), newest first.
SESSIONS: list[Column] = [
    _cluster_column(),
    Column("Stream", lambda f, now: f["stream"], width=NAME_WIDTH, pinned=True),
    Column("Consumer", _link, kind="link", width=NAME_WIDTH, pinned=True),
    Column("Pin holder", lambda f, now: _holders(f), width="small",
           help="the worker that held the pin as it announced itself (verified: CONNZ showed that connection under "
                "that name), else \"unannounced\" and the end of the pin id"),
    Column("Pin id (tail)", lambda f, now: [pin_tail(p) for p in f["pinned_id"]], width="small",
           help="the pin id's distinguishing tail: a pin id names one pin, not a client"),
    Column("Start (UTC)", _utc_cells("start_ts"), width="small"),
    Column("End (UTC)", lambda f, now: ["still pinned" if r == "still pinned" else since_cell(t, now)
                                        for t, r in zip(f["end_ts"], f["end_reason"])], width="small"),
    Column("Duration", lambda f, now: [f"{duration(d)} (ongoing)" if r == "still pinned" else duration(d)
                                       for d, r in zip(f["duration_seconds"], f["end_reason"])], width="small",
           help="an ongoing pin: from its start to now"),
    Column("End reason", lambda f, now: ["" if r == "still pinned" else r for r in f["end_reason"]], width="small",
           help="timeout: the pinned client stopped pulling; admin: an operator unpinned; inferred: seen in samples"),
    Column("Gap after", _durations("gap_seconds"), width="small", help="time until the next pin of the consumer"),
    Column("Group", lambda f, now: f["group_name"], width="small"),
    Column("Account", lambda f, now: f["account"], width="small", shown_if=_several_accounts),
]

# The Pins page: every pin and unpin, newest first.
PIN_EVENTS: list[Column] = [
    Column("When (UTC)", _utc_cells("ts"), width="small"),
    _cluster_column(),
    Column("Stream", lambda f, now: f["stream"], width=NAME_WIDTH, pinned=True),
    Column("Consumer", _link, kind="link", width=NAME_WIDTH, pinned=True),
    Column("Event", lambda f, now: f["event"], width="small"),
    Column("Pin id (tail)", lambda f, now: [pin_tail(p) for p in f["pinned_id"]], width="small"),
    Column("Reason", lambda f, now: f["reason"], width="small"),
    Column("Seen by", lambda f, now: f["source"], width="small", help="advisory, or inferred from samples"),
    Column("Vouched", lambda f, now: f["vouched"], width="small"),
    Column("Group", lambda f, now: f["group_name"], width="small"),
]


_PIN_PARAMS = ("expect_pin", "unpinned_id", "pinned_before")


def _param_word(name: str, value: object) -> object:
    if name in _PIN_PARAMS:
        return pin_tail(value)
    return duration(value) if name.endswith("_s") else value


def _params_words(f: pd.DataFrame, now: dt.datetime) -> list[str]:
    names = {"expect_pin": "pin confirmed", "unpinned_id": "pin dropped", "pinned_before": "pin before",
             "any_holder": "whoever held it when sent",
             "still_in_flight": "still in flight", "timeout_s": "timeout", "stay_until": "stay paused until"}
    return ["; ".join(str(names.get(k, k)) if v is True else f"{names.get(k, k)} {_param_word(k, v)}" for k, v in p.items())
            if isinstance(p, dict) else "" for p in f["parameters"]]


# The Audit page: one row per action.
AUDIT: list[Column] = [
    Column("When (UTC)", _utc_cells("ts"), width="small"),
    Column("Summary", lambda f, now: f["summary"], width="large", help="who did what to which consumer, and how it ended"),
    Column("Outcome", lambda f, now: f["outcome"], width="small"),
    Column("Consumer", _link, kind="link", width="small", help="opens the consumer's page"),
    Column("Stream", lambda f, now: f["stream"], width="small"),
    _cluster_column(),
    Column("Account", lambda f, now: f["account"], width="small"),
    Column("Actor", lambda f, now: f["actor"], width="small"),
    Column("Pin holder", lambda f, now: f["holder"] if "holder" in f else [""] * len(f), width="small",
           help="who held the pin when the unpin or drain ran, as its worker announced itself (verified: CONNZ "
                "showed that connection under that name), else \"unannounced\" and the end of the pin id"),
    Column("Parameters", _params_words, width="medium"),
    Column("Error", lambda f, now: [m if o != "ok" else "" for m, o in zip(f["message"], f["outcome"])], width="large",
           help="what went wrong, for failures, refusals and timeouts"),
    Column("Origin", lambda f, now: f["origin"], width="small"),
]


def _ns(column: str) -> Cells:
    return lambda f, now: [duration(v / 1e9) if v is not None and not pd.isna(v) else "" for v in f[column]]


def _limit_words(column: str) -> Cells:
    return lambda f, now: ["" if v is None or pd.isna(v) else "unlimited" if v <= 0 else f"{v:,.0f}" for v in f[column]]


def _list_words(column: str) -> Cells:
    def cells(f: pd.DataFrame, now: dt.datetime) -> list[Any]:
        out = []
        for v in f[column]:
            v = v.tolist() if hasattr(v, "tolist") else v  # DuckDB lists arrive as arrays
            out.append(", ".join(map(str, v)) if isinstance(v, (list, tuple)) else cell(v))
        return out
    return cells


# The Consumer page: its configuration's history, newest first.
CONFIGS: list[Column] = [
    Column("Changed (UTC)", _utc_cells("changed_at"), width="small"),
    Column("Max in flight", _limit_words("max_ack_pending"), width="small", help="max_ack_pending"),
    Column("Max waiting pulls", _limit_words("max_waiting"), width="small", help="max_waiting"),
    Column("Ack wait", _ns("ack_wait_ns"), width="small", help="ack_wait: unacknowledged messages are redelivered after it"),
    Column("Max deliveries", _limit_words("max_deliver"), width="small", help="max_deliver"),
    Column("Priority policy", lambda f, now: f["priority_policy"], width="small"),
    Column("Priority groups", _list_words("priority_groups"), width="small"),
    Column("Pin timeout", _ns("priority_timeout_ns"), width="small",
           help="priority_timeout: a pinned client that does not pull for this long loses its pin"),
    Column("Ack policy", lambda f, now: f["ack_policy"], width="small"),
    Column("Filtered", lambda f, now: ["yes" if x is True else "no" if x is False else "" for x in f["filtered"]],
           width="small"),
    Column("Created (UTC)", _utc_cells("created"), width="small"),
]

# The Consumer page: its advisories, newest first.
ADVISORIES: list[Column] = [
    Column("When (UTC)", _utc_cells("ts"), width="small"),
    Column("Advisory", lambda f, now: f["kind"], width="medium"),
    Column("Group", lambda f, now: f["group_name"], width="small"),
    Column("Pin id (tail)", lambda f, now: [pin_tail(p) for p in f["pinned_id"]], width="small"),
    Column("Reason", lambda f, now: f["reason"], width="small"),
]


def build(columns: list[Column], frame: pd.DataFrame, now: dt.datetime) -> pd.DataFrame:
    """The table of `columns` for the rows of `frame`: headers in words, no None in any cell."""
    shown = [c for c in columns if c.shown_if is None or c.shown_if(frame)]
    out = {}
    for c in shown:
        values = list(c.cells(frame, now))
        if c.kind == "number":
            numbers = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce")
            # The grid writes a missing number as "None": with a gap, the column is text instead.
            out[c.header] = (numbers.to_numpy() if not numbers.isna().any() else
                             ["" if pd.isna(v) else (c.number_format or "%s") % v for v in numbers])
        else:
            out[c.header] = [visible(v) if isinstance(v, str) else cell(v) for v in values]
    return pd.DataFrame(out, index=range(len(frame)))


def column_config(columns: list[Column], table: pd.DataFrame) -> dict[str, Any]:
    """Streamlit's column configuration for the columns present in `table`."""
    import streamlit as st
    config: dict[str, Any] = {}
    for c in columns:
        if c.header not in table.columns:
            continue
        common: dict[str, Any] = {"width": c.width, "help": c.help, "pinned": c.pinned}
        if c.kind == "link":
            config[c.header] = st.column_config.LinkColumn(c.header, display_text=CONSUMER_IN_LINK, **common)
        elif c.kind == "number" and pd.api.types.is_numeric_dtype(table[c.header]):
            config[c.header] = st.column_config.NumberColumn(c.header, format=c.number_format, **common)
        else:
            config[c.header] = st.column_config.TextColumn(c.header, **common)
    return config


# The Fleet's figures averaged over the health window: their headers name it (beside a verdict about
# the last 40 s, "Acks/s 3.20" must say it is the window's average, not the rate now).
WINDOWED = ("Acks/s", "Redeliveries/s")


def fleet_columns(health_window: float) -> list[Column]:
    """FLEET with each windowed figure's header naming the window: "Acks/s (last 5 min)"."""
    return [replace(c, header=f"{c.header} (last {duration(health_window)})") if c.header in WINDOWED else c
            for c in FLEET]


def fleet_table(frame: pd.DataFrame, now: dt.datetime, columns: list[Column] | None = None) -> pd.DataFrame:
    return build(FLEET if columns is None else columns, frame, now)
