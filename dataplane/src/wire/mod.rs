//! A sans-IO Kafka client connection: framing, correlation ids, ApiVersions negotiation, TLS
//! (rustls) and SASL (PLAIN, SCRAM-SHA-256/512). Nothing here owns a socket or reads a clock;
//! the drivers in [`crate::io`] move the bytes.
#![forbid(unsafe_code)]

pub mod config;

pub use config::{
    ConnConfig, KeyStore, SaslConfig, SaslMechanism, Secret, SecurityProtocol, TlsConfig, TrustStore,
};
