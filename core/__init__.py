"""The bottom layer: settings, clock, errors, the NATS connection and JetStream API calls.

Nothing here imports any other part of jetwatch."""
