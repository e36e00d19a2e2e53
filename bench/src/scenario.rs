//! The scenarios: named parameter sets for one measured run of each replicator.
#![forbid(unsafe_code)]

use serde::Serialize;
use strait_dataplane::batch::Compression;

/// How load meets the replicator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Everything is produced before the replicator starts; measures the time to copy it all.
    CatchUp,
    /// The replicator runs first (warmed up), then load arrives at a fixed rate; measures
    /// latency.
    Steady,
}

/// One scenario's parameters. Every field can be overridden on the command line.
#[derive(Debug, Clone, Serialize)]
pub struct Scenario {
    pub name: String,
    pub mode: Mode,
    pub partitions: i32,
    pub records: u64,
    pub value_bytes: usize,
    pub key_bytes: usize,
    /// Distinct keys; 0 = no keys.
    pub key_cardinality: u64,
    pub headers: usize,
    #[serde(serialize_with = "codec_name")]
    pub codec: Compression,
    /// Generator batch size (uncompressed bytes).
    pub batch_bytes: usize,
    /// Generator linger.
    pub linger_ms: u64,
    /// Steady mode: records per second.
    pub rate: Option<f64>,
    /// Give up waiting for the replicated records after this long.
    pub timeout_s: u64,
    /// Give up when no new record arrived for this long after the first one.
    pub stall_timeout_s: u64,
    /// MM2's producer linger (its docs: 100 ms for throughput; Kafka 4's default 5 ms for
    /// latency runs).
    pub mm2_linger_ms: u64,
}

fn codec_name<S: serde::Serializer>(c: &Compression, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(c.name())
}

/// Names accepted by `--scenario`.
pub const NAMES: &[&str] = &[
    "smoke",
    "catch-up",
    "steady",
    "many-partitions",
    "codecs",
    "small-batches",
];

const KIB: usize = 1024;

impl Scenario {
    /// The scenario called `name`. `codecs` expands to one run per codec: see
    /// [`Scenario::variants`].
    pub fn named(name: &str) -> Option<Scenario> {
        let base = Scenario {
            name: name.to_string(),
            mode: Mode::CatchUp,
            partitions: 8,
            records: 0,
            value_bytes: KIB,
            key_bytes: 0,
            key_cardinality: 0,
            headers: 0,
            codec: Compression::None,
            batch_bytes: 64 * KIB,
            linger_ms: 5,
            rate: None,
            timeout_s: 900,
            stall_timeout_s: 60,
            mm2_linger_ms: 100,
        };
        Some(match name {
            // Seconds: CI keeps the harness working with it.
            "smoke" => Scenario {
                partitions: 3,
                records: 3_000,
                value_bytes: 512,
                key_bytes: 16,
                key_cardinality: 100,
                headers: 1,
                batch_bytes: 16 * KIB,
                timeout_s: 120,
                ..base
            },
            // 1 GiB of 1 KiB records on 8 partitions.
            "catch-up" => Scenario {
                records: 1 << 20,
                ..base
            },
            // 5 000 records/s (about 5 MiB/s) for 60 s, linger 5 ms like Kafka 4's producer.
            "steady" => Scenario {
                mode: Mode::Steady,
                records: 300_000,
                batch_bytes: 16 * KIB,
                rate: Some(5_000.0),
                timeout_s: 300,
                mm2_linger_ms: 5,
                ..base
            },
            // 1 000 partitions, 256 MiB, 16 KiB batches (about 16 per partition).
            "many-partitions" => Scenario {
                partitions: 1000,
                records: 256 * 1024,
                batch_bytes: 16 * KIB,
                ..base
            },
            // 256 MiB per codec; see variants().
            "codecs" => Scenario {
                records: 256 * 1024,
                key_bytes: 16,
                key_cardinality: 10_000,
                ..base
            },
            // Linger 0 at 20 000 records/s of 256 B: batches of one or two records.
            "small-batches" => Scenario {
                mode: Mode::Steady,
                partitions: 16,
                records: 600_000,
                value_bytes: 256,
                batch_bytes: 16 * KIB,
                linger_ms: 0,
                rate: Some(20_000.0),
                timeout_s: 300,
                mm2_linger_ms: 5,
                ..base
            },
            _ => return None,
        })
    }

    /// The runs a scenario is made of: one, except `codecs` (none, lz4, zstd).
    pub fn variants(&self) -> Vec<(String, Scenario)> {
        if self.name == "codecs" {
            [Compression::None, Compression::Lz4, Compression::Zstd]
                .into_iter()
                .map(|c| {
                    (
                        c.name().to_string(),
                        Scenario {
                            codec: c,
                            ..self.clone()
                        },
                    )
                })
                .collect()
        } else {
            vec![(self.codec.name().to_string(), self.clone())]
        }
    }

    /// Key + value + header bytes of one record.
    pub fn record_bytes(&self) -> usize {
        crate::payload::RecordShape::new(
            self.value_bytes,
            self.key_bytes,
            self.key_cardinality,
            self.headers,
        )
        .record_bytes()
    }
}

/// Parses a codec name as Kafka spells it.
pub fn parse_codec(s: &str) -> Option<Compression> {
    Compression::ALL.into_iter().find(|c| c.name() == s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_resolves_and_is_sane() {
        for n in NAMES {
            let s = Scenario::named(n).unwrap();
            assert!(s.records > 0 && s.partitions > 0, "{n}");
            assert_eq!(s.mode == Mode::Steady, s.rate.is_some(), "{n}");
        }
        assert!(Scenario::named("nope").is_none());
        assert_eq!(Scenario::named("many-partitions").unwrap().partitions, 1000);
        let gib = Scenario::named("catch-up").unwrap();
        assert_eq!(gib.records * gib.record_bytes() as u64, 1 << 30);
        assert_eq!(Scenario::named("small-batches").unwrap().linger_ms, 0);
    }

    #[test]
    fn codecs_expand_to_three_runs() {
        let v = Scenario::named("codecs").unwrap().variants();
        let names: Vec<_> = v.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["none", "lz4", "zstd"]);
        assert_eq!(v[2].1.codec, Compression::Zstd);
        assert_eq!(Scenario::named("smoke").unwrap().variants().len(), 1);
        assert_eq!(parse_codec("lz4"), Some(Compression::Lz4));
        assert_eq!(parse_codec("brotli"), None);
    }
}
