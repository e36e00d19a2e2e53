//! Helpers for integration tests against the real Kafka test bed.
