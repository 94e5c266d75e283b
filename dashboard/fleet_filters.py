"""The Fleet's filters and pages, applied where the data is, before anything reaches the browser.

At 100,000 consumers the grid cannot hold the fleet: building every row's cells and shipping them
to the browser costs seconds on each refresh, and a browser-side filter would need all of it.
So the page filters the fleet it read once per cycle, counts what matched, and builds cells only
for the one page shown. No Streamlit here: the page and bench/fleet_page.py call the same code.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

PAGE_SIZES = (100, 250, 1000)
NO_POLICY = "none"  # how a consumer without a priority policy reads in the policy filter


@dataclass(frozen=True)
class FleetFilter:
    """What the viewer asked for; empty means everything."""

    streams: tuple[str, ...] = ()
    verdicts: tuple[str, ...] = ()
    policies: tuple[str, ...] = ()
    search: str = ""
    clusters: tuple[str, ...] = ()  # with several clusters' stores (dashboard/stores.py)

    def apply(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The rows of `frame` that match, in the fleet's order (worst first)."""
        keep = pd.Series(True, index=frame.index)
        if self.clusters:
            keep &= frame["cluster"].isin(self.clusters)
        if self.streams:
            keep &= frame["stream"].isin(self.streams)
        if self.verdicts:
            keep &= frame["verdict"].isin(self.verdicts)
        if self.policies:
            keep &= frame["priority_policy"].fillna(NO_POLICY).isin(self.policies)
        if self.search:
            needle = self.search.lower()
            keep &= (frame["consumer"].str.lower().str.contains(needle, regex=False)
                     | frame["stream"].str.lower().str.contains(needle, regex=False))
        return frame if bool(keep.all()) else frame[keep]


def policies(frame: pd.DataFrame) -> list[str]:
    return sorted(frame["priority_policy"].fillna(NO_POLICY).unique())


def pages(rows: int, size: int) -> int:
    """How many pages `rows` rows fill; an empty table still has its one (empty) page."""
    return max(1, -(-rows // size))


def page_of(frame: pd.DataFrame, number: int, size: int) -> pd.DataFrame:
    """Page `number` (from 1, clamped to the pages there are) of `size` rows."""
    number = min(max(1, number), pages(len(frame), size))
    return frame.iloc[(number - 1) * size:number * size]
