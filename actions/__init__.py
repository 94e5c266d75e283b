"""Operator actions on consumers, shared by the dashboard and the CLI."""
