"""The embedded demo: a local nats-server and a workload with scripted trouble."""
