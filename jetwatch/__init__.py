"""jetwatch: health of NATS JetStream pull consumers."""
