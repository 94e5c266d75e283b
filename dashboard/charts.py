"""Plotly figures for the pages: plain functions of DataFrames, returning go.Figure.

Plotly renders HTML in labels, hovers and tick text, and stream and consumer names come from the
server: every name is escaped before it reaches a figure.
"""

from __future__ import annotations

import hashlib
import html

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from jetwatch.health.rules import BY_NAME

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
           "#7f7f7f", "#d62728")
REASON_SYMBOL = {"timeout": "x", "admin": "diamond", "inferred": "circle-open", "unknown": "circle-open"}


def esc(value: object) -> str:
    return html.escape("" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value))


def lane(stream: str, consumer: str, group: str | None) -> str:
    return esc(f"{stream} / {consumer}" + (f" [{group}]" if group else ""))


def client_colour(pinned_id: str) -> str:
    """A stable colour per pin id, so one client's bars match across lanes and reruns."""
    return PALETTE[int(hashlib.md5(str(pinned_id).encode()).hexdigest(), 16) % len(PALETTE)]


def _limit_line(fig: go.Figure, samples: pd.DataFrame, value: float | None, name: str, row: int) -> None:
    if value is None or pd.isna(value) or value <= 0 or samples.empty:
        return
    fig.add_trace(go.Scatter(x=[samples["ts"].min(), samples["ts"].max()], y=[value, value], mode="lines",
                             name=esc(name), line={"dash": "dash", "color": "#d62728"}), row=row, col=1)


BAND_COLOUR = {"red": "#d62728", "orange": "#ff7f0e", "yellow": "#e3c700", "blue": "#1f77b4", "green": "#2ca02c",
               "gray": "#9e9e9e"}


def verdict_band(fig: go.Figure, band: pd.DataFrame | None) -> None:
    """The consumer's verdicts over time as coloured spans behind every subplot, named on hover
    and labelled at the top when not OK (so the band reads without colour too)."""
    if band is None or band.empty:
        return
    for span in band.itertuples(index=False):
        known = BY_NAME.get(str(span.verdict))
        colour = BAND_COLOUR[known.colour if known else "gray"]
        fig.add_vrect(x0=span.start, x1=span.end, fillcolor=colour, opacity=0.12, layer="below", line_width=0,
                      row="all", col=1, name=esc(span.verdict))
        if span.verdict != "OK":
            fig.add_annotation(x=span.start, y=1.0, xref="x", yref="paper", text=esc(span.verdict), showarrow=False,
                               xanchor="left", yanchor="bottom", font={"size": 10, "color": colour},
                               hovertext=esc(span.reason))


def consumer_gauges(samples: pd.DataFrame, max_ack_pending: float | None, max_waiting: float | None,
                    title: str = "", band: pd.DataFrame | None = None) -> go.Figure:
    """Pending, in flight (with max_ack_pending) and waiting pulls (with max_waiting) over time,
    over the band of the consumer's verdicts."""
    fig = make_subplots(rows=4, cols=1, shared_xaxes=True, vertical_spacing=0.04,
                        subplot_titles=("pending (not yet delivered)", "ack pending (in flight)",
                                        "waiting pull requests", "awaiting redelivery"))
    for row, (col, name) in enumerate((("num_pending", "pending"), ("num_ack_pending", "ack pending"),
                                       ("num_waiting", "waiting"), ("num_redelivered", "redelivered")), start=1):
        if col in samples:
            fig.add_trace(go.Scatter(x=samples["ts"], y=samples[col], mode="lines", name=name), row=row, col=1)
    _limit_line(fig, samples, max_ack_pending, "max_ack_pending", 2)
    _limit_line(fig, samples, max_waiting, "max_waiting", 3)
    verdict_band(fig, band)
    fig.update_layout(height=720, title=esc(title), margin={"l": 40, "r": 10, "t": 60, "b": 30},
                      legend={"orientation": "h"})
    return fig


def consumer_rates(rates: pd.DataFrame, title: str = "") -> go.Figure:
    fig = go.Figure()
    for col, name in (("delivered_per_second", "deliveries/s"), ("acked_per_second", "acks/s"),
                      ("redelivered_per_second", "redeliveries/s")):
        if col in rates:
            fig.add_trace(go.Scatter(x=rates["ts"], y=rates[col], mode="lines", name=name))
    fig.update_layout(height=300, title=esc(title), margin={"l": 40, "r": 10, "t": 50, "b": 30},
                      yaxis_title="per second", legend={"orientation": "h"})
    return fig


def pin_timeline(sessions: pd.DataFrame, events: pd.DataFrame, title: str = "Pins") -> go.Figure:
    """One lane per consumer and group, a bar per pin coloured by client id, unpins marked by reason."""
    fig = go.Figure()
    if sessions.empty and events.empty:
        fig.add_annotation(text="No pin events in this range", showarrow=False, x=0.5, y=0.5,
                           xref="paper", yref="paper")
        fig.update_layout(height=200, title=esc(title))
        return fig
    lanes: list[str] = []
    if not sessions.empty:
        s = sessions.copy()
        s["lane"] = [lane(a, b, c) for a, b, c in zip(s["stream"], s["consumer"], s["group_name"])]
        s["start"] = pd.to_datetime(s["start_ts"], utc=True)
        s["end"] = pd.to_datetime(s["end_ts"], utc=True)
        lanes = list(dict.fromkeys(s["lane"]))
        for pin_id, part in s.groupby("pinned_id", sort=False):
            fig.add_trace(go.Bar(
                base=part["start"], x=(part["end"] - part["start"]).dt.total_seconds() * 1000,
                y=part["lane"], orientation="h", name=esc(pin_id)[:10], showlegend=False,
                marker={"color": client_colour(str(pin_id))},
                customdata=[[esc(pin_id), f"{d:.0f}s", esc(r)] for d, r in
                            zip(part["duration_seconds"], part["end_reason"])],
                hovertemplate="pin %{customdata[0]}<br>%{base|%H:%M:%S} for %{customdata[1]}"
                              "<br>ended: %{customdata[2]}<extra>%{y}</extra>"))
    if not events.empty:
        un = events[events["event"] == "unpinned"].copy()
        if not un.empty:
            un["lane"] = [lane(a, b, c) for a, b, c in zip(un["stream"], un["consumer"], un["group_name"])]
            un["why"] = [("inferred" if src == "inferred" else (r or "unknown"))
                         for r, src in zip(un["reason"], un["source"])]
            for why, part in un.groupby("why"):
                fig.add_trace(go.Scatter(
                    x=pd.to_datetime(part["ts"], utc=True), y=part["lane"], mode="markers",
                    name=f"unpinned: {esc(why)}",
                    marker={"symbol": REASON_SYMBOL.get(str(why), "circle-open"), "size": 11, "color": "#222"},
                    hovertemplate=f"unpinned ({esc(why)})<br>%{{x|%H:%M:%S}}<extra>%{{y}}</extra>"))
            lanes += [ln for ln in un["lane"] if ln not in lanes]
    fig.update_layout(
        barmode="overlay", height=max(220, 60 + 34 * len(set(lanes))), title=esc(title),
        xaxis={"type": "date", "title": "time (UTC)"}, yaxis={"categoryorder": "array", "categoryarray": lanes[::-1]},
        margin={"l": 10, "r": 10, "t": 80, "b": 40},
        legend={"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"})
    return fig
