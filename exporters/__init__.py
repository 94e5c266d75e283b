"""What leaves jetwatch for other systems: Prometheus's /metrics and Alertmanager's alerts, from each
judged cycle the collector hands over (never read from the store, never from the NATS connection)."""
