"""The Streamlit dashboard: pages in views/, data in data.py, figures in charts.py."""
