-- Migration 15: config findings (health/config_findings.py), beside the verdict: settings that
-- defeat themselves and resets, each {kind, reason, fix, numbers}. They never change the verdict.
ALTER TABLE verdicts_current ADD COLUMN IF NOT EXISTS config_findings JSON;
