"""Plotly figures for the pages: plain functions of DataFrames, returning go.Figure.

Plotly renders HTML in labels, hovers and tick text, and stream and consumer names come from the
server: every name is escaped before it reaches a figure.
"""

from __future__ import annotations

import datetime as dt
import html

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from jetwatch.dashboard.text import duration, pin_holder, pin_tail, utc, visible
from jetwatch.health.verdicts import BY_NAME

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
           "#7f7f7f", "#d62728")
REASON_SYMBOL = {"timeout": "x", "admin": "diamond", "inferred": "circle-open", "unknown": "circle-open"}


def esc(value: object) -> str:
    """Literal text for a plotly label or hover: HTML-escaped, bidi controls shown visibly. Quotes
    stay as they are: plotly decodes only &lt; &gt; &amp; and numeric entities, so `&quot;` would
    show as written, and with `<` escaped no tag (nor attribute) can be formed."""
    text = "" if value is None or (isinstance(value, float) and pd.isna(value)) else value
    return html.escape(visible(text), quote=False)


def lane(stream: str, consumer: str, group: str | None) -> str:
    return esc(f"{stream} / {consumer}" + (f" [{group}]" if group else ""))


SERIES = {"num_pending": ("pending", "#1f77b4"), "num_ack_pending": ("ack pending", "#ff7f0e"),
          "num_waiting": ("waiting", "#2ca02c"), "num_redelivered": ("awaiting redelivery", "#9467bd")}
LIMIT_COLOUR = "#555555"  # limits are grey lines, never the red of a verdict or a series' colour
OFF_SCALE = 3.0  # a limit more than this many times the largest value is named, not drawn
MAX_BARS = 150  # more pins than this in a timeline: switch counts per time bucket instead of bars
TOP_LANES = 12  # lanes drawn at most; the page's search finds the others
PIN_LEGEND = "each bar is one pin; a pin id names one pin, not a client (a client gets a new id each time it is pinned)"


def lane_colours(starts: pd.Series) -> list[str]:
    """Colours for one lane's bars in time order, so that neighbours always differ."""
    order = starts.rank(method="first").astype(int) - 1
    return [PALETTE[i % (len(PALETTE) - 1)] for i in order]  # the last colour (red) is kept for trouble


def _limit(fig: go.Figure, samples: pd.DataFrame, col: str, value: float | None, name: str, dash: str, row: int) -> None:
    """The limit as a labelled line when it is near the values; named in a corner when it would
    squash them flat (the axis follows the values, not the limit)."""
    if value is None or pd.isna(value) or value <= 0 or samples.empty or col not in samples:
        return
    top = float(pd.to_numeric(samples[col], errors="coerce").max() or 0)
    label = f"{name} {value:,.0f}"
    axis = "y" if row == 1 else f"y{row}"
    if value > OFF_SCALE * max(top, 1.0):
        fig.add_annotation(text=esc(f"limit: {label} (off the scale)"), xref="x domain", yref=f"{axis} domain",
                           x=1, y=1, xanchor="right", yanchor="top", showarrow=False,
                           font={"size": 10, "color": LIMIT_COLOUR}, row=row, col=1)
        fig.update_yaxes(range=[0, max(top, 1.0) * 1.15], row=row, col=1)
        return
    fig.add_trace(go.Scatter(x=[samples["ts"].min(), samples["ts"].max()], y=[value, value], mode="lines",
                             name=esc(f"limit: {name}"), line={"dash": dash, "color": LIMIT_COLOUR, "width": 1}),
                  row=row, col=1)


BAND_COLOUR = {"red": "#d62728", "orange": "#ff7f0e", "yellow": "#e3c700", "blue": "#1f77b4", "green": "#2ca02c",
               "gray": "#9e9e9e"}


def verdict_band(fig: go.Figure, band: pd.DataFrame | None) -> None:
    """The consumer's verdicts over time as coloured spans behind every subplot, named on hover
    and labelled inside the top panel when not OK (so the band reads without colour too, and its
    labels never sit on a panel's title)."""
    if band is None or band.empty:
        return
    for span in band.itertuples(index=False):
        known = BY_NAME.get(str(span.verdict))
        colour = BAND_COLOUR[known.colour if known else "gray"]
        fig.add_vrect(x0=span.start, x1=span.end, fillcolor=colour, opacity=0.12, layer="below", line_width=0,
                      row="all", col=1, name=esc(span.verdict))
        if span.verdict != "OK":
            fig.add_annotation(x=span.start, y=1.0, xref="x", yref="y domain", text=esc(span.verdict), showarrow=False,
                               xanchor="left", yanchor="top", font={"size": 10, "color": colour},
                               hovertext=esc(span.reason), row=1, col=1)


PANELS = ("pending (not yet delivered)", "age of the oldest message (minutes)", "ack pending (in flight)",
          "waiting pull requests", "awaiting redelivery")
GAUGE_ROWS = (1, 3, 4, 5)  # SERIES in order; the age chart sits right under pending: how much, then how old
AGE_ROW = 2
AGES = {"oldest_unacked_age_seconds": ("oldest unacked", "#8c564b"),
        "oldest_undelivered_age_seconds": ("oldest undelivered", "#17becf")}


def _empty_panel(fig: go.Figure, row: int, words: str) -> None:
    fig.add_annotation(text=words, xref="x domain", yref=f"{'y' if row == 1 else f'y{row}'} domain", x=0.5, y=0.5,
                       showarrow=False, font={"color": "#888"}, row=row, col=1)


def _ages(fig: go.Figure, samples: pd.DataFrame) -> bool:
    """Oldest unacknowledged and oldest undelivered age, in minutes; the readings that are
    estimates (interpolated, not read from the stream) are drawn as open markers on top. False
    when the samples carry no age at all."""
    drawn = False
    for col, (name, colour) in AGES.items():
        if col not in samples:
            continue
        minutes = pd.to_numeric(samples[col], errors="coerce") / 60
        if minutes.isna().all():
            continue
        drawn = True
        fig.add_trace(go.Scatter(x=samples["ts"], y=minutes, mode=_mode(samples), name=f"{name} (min)",
                                 line={"color": colour}), row=AGE_ROW, col=1)
        kind = col.replace("_seconds", "_kind")
        if kind in samples:
            guessed = (samples[kind] == "estimate").to_numpy()
            if guessed.any():
                fig.add_trace(go.Scatter(x=samples["ts"][guessed], y=minutes[guessed], mode="markers",
                                         name=f"{name}: estimate", marker={"symbol": "circle-open", "color": colour}),
                              row=AGE_ROW, col=1)
    return drawn


FEW_POINTS = 3  # a series this short is drawn with markers: a line through one point draws nothing


def _mode(samples: pd.DataFrame) -> str:
    return "lines+markers" if len(samples) < FEW_POINTS else "lines"


def no_samples(span: tuple[dt.datetime, dt.datetime] | None) -> str:
    """Why a chart is empty, in words: no sample in its range (and which range)."""
    if span is None:
        return "no samples in this range"
    return (f"no samples between {utc(span[0])} and {utc(span[1])}: was the collector running, "
            "and does it include this stream?")


def consumer_gauges(samples: pd.DataFrame, max_ack_pending: float | None, max_waiting: float | None,
                    title: str = "", band: pd.DataFrame | None = None,
                    span: tuple[dt.datetime, dt.datetime] | None = None) -> go.Figure:
    """Pending, the age of the oldest waiting message, in flight (with max_ack_pending) and waiting
    pulls (with max_waiting) over time, over the band of the consumer's verdicts. Axes start at
    zero; time is a date axis on every panel (raw samples and rollups alike) over `span` (where
    the data starts to now: data.data_start) when given. An empty panel says why."""
    fig = make_subplots(rows=len(PANELS), cols=1, shared_xaxes=True, vertical_spacing=0.06, subplot_titles=PANELS)
    for row, col in zip(GAUGE_ROWS, SERIES):
        name, colour = SERIES[col]
        if col in samples and not samples.empty:
            fig.add_trace(go.Scatter(x=samples["ts"], y=samples[col], mode=_mode(samples), name=name,
                                     line={"color": colour}), row=row, col=1)
        else:
            _empty_panel(fig, row, "the pipeline's rollups do not keep this: pick 6 hours or less for raw samples"
                         if not samples.empty else no_samples(span))
    if samples.empty or not _ages(fig, samples):
        _empty_panel(fig, AGE_ROW, "no ages in this range: the collector did not read message times"
                     if not samples.empty else no_samples(span))
    _limit(fig, samples, "num_ack_pending", max_ack_pending, "max_ack_pending", "dash", GAUGE_ROWS[1])
    _limit(fig, samples, "num_waiting", max_waiting, "max_waiting", "dot", GAUGE_ROWS[2])
    verdict_band(fig, band)
    fig.update_yaxes(rangemode="tozero", title_text="messages", title_font={"size": 10})
    fig.update_yaxes(title_text="minutes", row=AGE_ROW, col=1)
    fig.update_yaxes(title_text="pulls", row=GAUGE_ROWS[2], col=1)
    fig.update_xaxes(type="date")
    if span is not None:
        fig.update_xaxes(range=[span[0], span[1]])
    fig.update_xaxes(title_text="time (UTC)", row=len(PANELS), col=1)
    fig.update_layout(height=900, title=esc(title) if title else None, margin={"l": 50, "r": 10, "t": 40, "b": 40},
                      legend={"orientation": "h", "x": 0, "y": -0.08, "yanchor": "top"})
    return fig


def consumer_rates(rates: pd.DataFrame, title: str = "", span: tuple[dt.datetime, dt.datetime] | None = None) -> go.Figure:
    fig = go.Figure()
    for col, name, colour in (("delivered_per_second", "deliveries/s", "#1f77b4"), ("acked_per_second", "acks/s", "#2ca02c"),
                              ("redelivered_per_second", "redeliveries/s", "#9467bd")):
        if col in rates:
            fig.add_trace(go.Scatter(x=rates["ts"], y=rates[col], mode="lines", name=name, line={"color": colour}))
    fig.update_layout(height=300, title=esc(title), margin={"l": 50, "r": 10, "t": 50, "b": 30},
                      yaxis={"title": "per second", "rangemode": "tozero"},
                      xaxis={"type": "date", **({"range": list(span)} if span else {})},
                      legend={"orientation": "h", "x": 0, "y": -0.15, "yanchor": "top"})
    if rates.empty:
        fig.add_annotation(text=no_samples(span), showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    return fig


def _empty(title: str, text: str) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=text, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_layout(height=200, title=esc(title), xaxis={"visible": False}, yaxis={"visible": False})
    return fig


def _lanes(frame: pd.DataFrame) -> list[str]:
    return [lane(a, b, c) for a, b, c in zip(frame["stream"], frame["consumer"], frame["group_name"])]


def top_lanes(sessions: pd.DataFrame, events: pd.DataFrame, limit: int = TOP_LANES) -> tuple[list[str], int]:
    """The lanes with the most pin switches (at most `limit`) and how many others there are."""
    counts: pd.Series = pd.Series(dtype=float)
    for f in (sessions, events):
        if not f.empty:
            counts = counts.add(pd.Series(_lanes(f)).value_counts(), fill_value=0)
    ranked = counts.sort_values(ascending=False, kind="stable").index.tolist()
    return ranked[:limit], max(0, len(ranked) - limit)


LABEL_GAP = 0.12  # of the time axis: labels of one lane closer than this would overlap ("unpin by ana" ≈ 100 px)


def action_labels(a: pd.DataFrame, span: pd.Timedelta) -> list[str]:
    """The label written above each action of `a` (sorted by time, with its lane): on each lane the
    first action of a run closer together than LABEL_GAP of `span` is labelled, saying how many more
    the run holds; the others are left to their marker and hover, so labels never overlap."""
    gap = span * LABEL_GAP
    labels = [""] * len(a)
    for _, lane_rows in a.groupby("lane", sort=False):
        positions = [a.index.get_loc(i) for i in lane_rows.index]
        times = list(pd.to_datetime(lane_rows["ts"], utc=True))
        head = 0
        for k in range(1, len(positions) + 1):
            if k == len(positions) or times[k] - times[head] >= gap:
                row = a.iloc[positions[head]]
                more = k - head - 1
                labels[positions[head]] = esc(f"{row['action']} by {row['actor']}" + (f" (+{more} more)" if more else ""))
                head = k
    return labels


def _actions(fig: go.Figure, actions: pd.DataFrame | None, shown: list[str], span: pd.Timedelta) -> None:
    """Operator actions from the audit log, on their consumer's lane, with who did them (labels
    thinned so that they never overlap: action_labels)."""
    if actions is None or actions.empty:
        return
    a = actions.copy()
    a["lane"] = _lanes(a)
    a = a[a["lane"].isin(shown)]
    if a.empty:
        return
    a = a.assign(ts=pd.to_datetime(a["ts"], utc=True)).sort_values("ts", kind="stable").reset_index(drop=True)
    fig.add_trace(go.Scatter(
        x=a["ts"], y=a["lane"], mode="markers+text", name="operator action",
        text=action_labels(a, span), textposition="top center",
        textfont={"size": 9}, marker={"symbol": "star", "size": 13, "color": "#d62728", "line": {"width": 1, "color": "#222"}},
        customdata=[[esc(act), esc(who), esc(out)] for act, who, out in zip(a["action"], a["actor"], a["outcome"])],
        hovertemplate="%{customdata[0]} by %{customdata[1]}: %{customdata[2]}<br>%{x|%H:%M:%S}<extra>%{y}</extra>"))


IDLE_NAME = "pin holder idle (PIN_IDLE)"


def _idle(fig: go.Figure, idle: pd.DataFrame | None, bars: pd.DataFrame) -> None:
    """The PIN_IDLE stretches, hatched over the lanes of their consumer that are drawn: the pin
    was held and nothing pulled while work and another client waited."""
    if idle is None or idle.empty:
        return
    lanes = bars[["stream", "consumer", "lane"]].drop_duplicates()
    marks = idle.merge(lanes, on=["stream", "consumer"])
    if marks.empty:
        return
    start, end = pd.to_datetime(marks["start_ts"], utc=True), pd.to_datetime(marks["end_ts"], utc=True)
    fig.add_trace(go.Bar(
        base=start, x=(end - start).dt.total_seconds() * 1000, y=marks["lane"], orientation="h", name=IDLE_NAME,
        marker={"color": "rgba(0,0,0,0)", "line": {"color": "#d62728", "width": 1},
                "pattern": {"shape": "x", "fgcolor": "#d62728", "size": 6}},
        customdata=[["until now" if ongoing else f"until {e:%H:%M:%S}"] for ongoing, e in zip(marks["ongoing"], end)],
        hovertemplate="PIN_IDLE: the pinned client pulled nothing while work and another client's pull "
                      "waited<br>named %{base|%H:%M:%S}, %{customdata[0]}<extra>%{y}</extra>"))


def _buckets(sessions: pd.DataFrame, events: pd.DataFrame, shown: list[str]) -> tuple[pd.DataFrame, str]:
    """Pin switches per lane and time bucket, for ranges with too many pins to draw one by one."""
    pins = events[events["event"] == "pinned"].copy() if not events.empty else pd.DataFrame()
    if pins.empty and not sessions.empty:
        pins = sessions.rename(columns={"start_ts": "ts"})
    pins["lane"] = _lanes(pins)
    pins = pins[pins["lane"].isin(shown)]
    ts = pd.to_datetime(pins["ts"], utc=True)
    span = (ts.max() - ts.min()).total_seconds() if len(ts) else 0
    width = next((w for w in ("1min", "5min", "15min", "1h", "6h", "1D") if span / pd.Timedelta(w).total_seconds() <= 120), "1D")
    pins["bucket"] = ts.dt.floor(width)
    return pins.groupby(["lane", "bucket"]).size().rename("switches").reset_index(), width


def _time_span(sessions: pd.DataFrame, events: pd.DataFrame, actions: pd.DataFrame | None) -> pd.Timedelta:
    """How long the timeline's time axis is: from its first to its last bar, event or action."""
    times = [pd.to_datetime(f[c], utc=True) for f, cols in ((sessions, ("start_ts", "end_ts")), (events, ("ts",)),
                                                           (actions, ("ts",)))
             if f is not None and not f.empty for c in cols if c in f]
    every = pd.concat(times).dropna() if times else pd.Series(dtype="datetime64[ns, UTC]")
    return (every.max() - every.min()) if len(every) > 1 else pd.Timedelta(minutes=1)


def pin_timeline(sessions: pd.DataFrame, events: pd.DataFrame, title: str = "Pins",
                 actions: pd.DataFrame | None = None, idle: pd.DataFrame | None = None) -> go.Figure:
    """One lane per consumer and group (the busiest TOP_LANES), a bar per pin labelled with its
    holder's announced name, else its id's tail (the holder in words and the id whole on hover) and
    coloured so neighbours differ, unpins marked by reason, the stretches its consumer was PIN_IDLE
    hatched over the bar (a holder that kept its pin without pulling is not a pin that worked),
    operator actions from the audit log marked with their actor. More than MAX_BARS pins: switch
    counts per time bucket instead of a barcode."""
    if sessions.empty and events.empty:
        return _empty(title, "No pin events in this range")
    shown, hidden = top_lanes(sessions, events)
    note = PIN_LEGEND + (f" · {hidden} more consumer(s) not drawn: search for them" if hidden else "")
    fig = go.Figure()
    bars = sessions[pd.Series(_lanes(sessions), index=sessions.index).isin(shown)] if not sessions.empty else sessions
    if len(bars) > MAX_BARS:
        counts, width = _buckets(sessions, events, shown)
        fig.add_trace(go.Heatmap(x=counts["bucket"], y=counts["lane"], z=counts["switches"], colorscale="Oranges",
                                 colorbar={"title": "pins"}, name="pin switches",
                                 hovertemplate=f"%{{z}} pins in the {width} from %{{x|%H:%M}}<extra>%{{y}}</extra>"))
        note = f"pin switches per {width} ({len(bars)} pins are too many to draw one by one)" + (
            f" · {hidden} more consumer(s) not drawn: search for them" if hidden else "")
    elif not bars.empty:
        s = bars.copy()
        s["lane"] = _lanes(s)
        s["start"] = pd.to_datetime(s["start_ts"], utc=True)
        s["end"] = pd.to_datetime(s["end_ts"], utc=True)
        s["colour"] = ""
        for _, part in s.groupby("lane", sort=False):
            s.loc[part.index, "colour"] = lane_colours(part["start"])
        none = [None] * len(s)
        holders = [pin_holder(p, n, v) for p, n, v in zip(s["pinned_id"], s.get("holder_name", none),
                                                           s.get("holder_verification", none))]
        fig.add_trace(go.Bar(
            base=s["start"], x=(s["end"] - s["start"]).dt.total_seconds() * 1000, y=s["lane"], orientation="h",
            name="pin (bar: one pin)", showlegend=True, marker={"color": list(s["colour"])},
            text=[esc(n if isinstance(n, str) and n else pin_tail(p))  # as the Consumer page's tile
                  for p, n in zip(s["pinned_id"], s.get("holder_name", none))],
            textposition="inside", insidetextanchor="start",
            customdata=[[esc(p), duration(d), esc(r), esc(h)]
                        for p, d, r, h in zip(s["pinned_id"], s["duration_seconds"], s["end_reason"], holders)],
            hovertemplate="held by %{customdata[3]}<br>pin id %{customdata[0]}<br>from %{base|%H:%M:%S} for %{customdata[1]}"
                          "<br>ended: %{customdata[2]}<extra>%{y}</extra>"))
        _idle(fig, idle, s)
        if not events.empty:
            un = events[events["event"] == "unpinned"].copy()
            un["lane"] = _lanes(un) if not un.empty else []
            un = un[un["lane"].isin(shown)] if not un.empty else un
            if not un.empty:
                un["why"] = [("inferred" if src == "inferred" else (r or "unknown"))
                             for r, src in zip(un["reason"], un["source"])]
                for why, part in un.groupby("why"):
                    fig.add_trace(go.Scatter(
                        x=pd.to_datetime(part["ts"], utc=True), y=part["lane"], mode="markers",
                        name=f"unpinned: {esc(why)}", customdata=[[esc(why)]] * len(part),
                        marker={"symbol": REASON_SYMBOL.get(str(why), "circle-open"), "size": 11, "color": "#222"},
                        # the reason comes from an advisory: data, never part of the template
                        hovertemplate="unpinned (%{customdata[0]})<br>%{x|%H:%M:%S}<extra>%{y}</extra>"))
    _actions(fig, actions, shown, _time_span(sessions, events, actions))
    fig.add_annotation(text=esc(note), xref="paper", yref="paper", x=0, y=0, yshift=-62, xanchor="left",
                       yanchor="top", showarrow=False, font={"size": 10, "color": "#555"})  # below the time axis
    fig.update_layout(
        barmode="overlay", height=max(260, 130 + 36 * len(shown)), title=esc(title),
        xaxis={"type": "date", "title": "time (UTC)"},
        yaxis={"categoryorder": "array", "categoryarray": shown[::-1], "type": "category"},
        margin={"l": 10, "r": 10, "t": 80, "b": 90},
        legend={"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"})
    return fig
