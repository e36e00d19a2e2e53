//! MM2's naming rules: replication policies ([`policy`]) and topic, group and config-property
//! filters ([`filter`]). Pure: no IO, no clock.
#![deny(clippy::disallowed_methods)]

pub mod filter;
pub mod policy;
