"""Property-based tests at the URL boundary: a link to a page carries whatever query parameters
its writer typed (or a browser's history kept). The promise: each page renders over a real store,
under Streamlit's AppTest, whatever text each parameter holds; a value the page does not know is
left out (the filter, range or consumer falls back), never a traceback. AppTest runs the real app
and is slow, so few examples; `--hypothesis-profile=explore` searches further."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.test_dashboard import run_app

# What a URL can hold: any text but a lone surrogate (a browser's UTF-8 and Streamlit's protobuf
# replace one before the page sees it).
HOSTILE = ("\u202eorders", "idle", "30 days", "NaN", "-1", "<img src=x>", "'; DROP TABLE samples; --", "x" * 300,
           "%00", "\x00", "1 hour", "STALLED", "timeout", "$G", "default")
values = st.one_of(st.sampled_from(HOSTILE), st.text(st.characters(exclude_categories=("Cs",)), max_size=16))
PAGES = {
    None: ("clusters", "streams", "verdicts", "policies", "search"),  # the Fleet
    "views/pins.py": ("range", "reasons", "search"),
    "views/consumer.py": ("cluster", "account", "stream", "consumer", "range"),
    "views/audit.py": ("actors", "actions", "outcomes", "search"),
}


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(list(PAGES)), st.data())
def test_any_query_parameters_open_the_page_without_a_traceback(filled_db, app_env, page, data):
    app_env(filled_db)
    query = {name: data.draw(values, label=name) for name in PAGES[page] if data.draw(st.booleans(), label=f"has {name}")}
    run_app(page, **query)  # asserts the page raised nothing
