"""The health model: window features and one table of rules, shared by dashboard and pipeline."""
