//! The link between the replicators and the source cluster, for the slow-link measurement: the
//! replicators can be given another source bootstrap than the bench's own clients (the fault
//! clusters' PLAINTEXT listener, behind Toxiproxy, while the generator goes to the unproxied
//! INTERNAL listener), and a Toxiproxy `latency` toxic on every proxy of that listener.
//!
//! `--source-latency-ms N` is one-way latency: N ms on each direction (downstream, broker to
//! client, and upstream), so N ms added to every chunk each way and 2N ms to the round trip,
//! jitter 0.
#![forbid(unsafe_code)]

use std::path::Path;

use anyhow::{Context, Result, anyhow};
use serde::Serialize;
use strait_tests::toxiproxy::{Fault, Toxic, Toxiproxy};

/// Largest `--source-latency-ms` accepted (a minute each way is no link any more).
pub const MAX_ONE_WAY_LATENCY_MS: u64 = 60_000;

/// The name of the toxics the bench adds (`<LABEL>-upstream`, `<LABEL>-downstream`).
pub const TOXIC_LABEL: &str = "strait-bench-source-latency";

/// What the replicators' link to the source was, as recorded in the result file.
#[derive(Debug, Clone, Serialize)]
pub struct LinkInfo {
    /// Where the bench's generator and admin client reach the source.
    pub bench_source_bootstrap: String,
    /// The source bootstrap written into the replicators' `mm2.properties`.
    pub replicator_source_bootstrap: String,
    /// The target bootstrap of the replicators and of the bench's consumer.
    pub target_bootstrap: String,
    /// Latency added on each direction of every source proxy, ms (0: none).
    pub source_one_way_latency_ms: u64,
    /// Round-trip time added: twice the one-way latency, ms.
    pub source_added_rtt_ms: u64,
    /// Toxiproxy's API, when a toxic was added.
    pub toxiproxy_api: Option<String>,
    /// The proxies that carried the toxic.
    pub latency_proxies: Vec<String>,
}

/// Parses `--source-latency-ms`: whole milliseconds, one way, 0 to [`MAX_ONE_WAY_LATENCY_MS`].
pub fn parse_one_way_latency_ms(s: &str) -> Result<u64, String> {
    let ms: u64 = s
        .trim()
        .parse()
        .map_err(|e| format!("{s:?} is not a whole number of milliseconds: {e}"))?;
    if ms > MAX_ONE_WAY_LATENCY_MS {
        return Err(format!(
            "{ms} ms one way is more than the {MAX_ONE_WAY_LATENCY_MS} ms accepted"
        ));
    }
    Ok(ms)
}

/// Toxiproxy's API address: `option`, else `127.0.0.1:$STRAIT_TOXIPROXY_PORT`, else the test
/// bed's `STRAIT_TOXIPROXY_API`, else Toxiproxy's default `127.0.0.1:8474`.
pub fn toxiproxy_api(option: Option<&str>, port_env: Option<&str>, testbed_dir: &Path) -> String {
    if let Some(a) = option {
        return a.to_string();
    }
    if let Some(p) = port_env.filter(|p| !p.trim().is_empty()) {
        return format!("127.0.0.1:{}", p.trim());
    }
    crate::machine::testbed_var(testbed_dir, "STRAIT_TOXIPROXY_API")
        .unwrap_or_else(|| "127.0.0.1:8474".into())
}

/// The proxies of `cluster`'s PLAINTEXT client listener among `all` (the test bed names them
/// `CLUSTER-NODE-plaintext`), in node order.
pub fn plaintext_proxies(all: &[String], cluster: &str) -> Vec<String> {
    let mut found: Vec<(u32, String)> = all
        .iter()
        .filter_map(|name| {
            let node = name
                .strip_prefix(cluster)?
                .strip_prefix('-')?
                .strip_suffix("-plaintext")?;
            Some((node.parse().ok()?, name.clone()))
        })
        .collect();
    found.sort();
    found.into_iter().map(|(_, n)| n).collect()
}

/// The latency toxic for `one_way_ms`.
pub fn latency_toxic(one_way_ms: u64) -> Toxic {
    Toxic::Latency {
        latency_ms: one_way_ms,
        jitter_ms: 0,
    }
}

/// Toxics in place on the source's proxies; [`SlowSource::remove`] (or dropping it) takes them
/// off.
#[derive(Debug)]
pub struct SlowSource {
    fault: Fault,
    api: String,
    pub proxies: Vec<String>,
}

impl SlowSource {
    /// Adds `one_way_ms` of latency on both directions of every PLAINTEXT proxy of `cluster`.
    pub fn add(api: &str, cluster: &str, one_way_ms: u64) -> Result<SlowSource> {
        let tp = Toxiproxy::at(api);
        let all = tp
            .proxies()
            .with_context(|| format!("listing Toxiproxy's proxies at {api}"))?;
        let proxies = plaintext_proxies(&all, cluster);
        if proxies.is_empty() {
            return Err(anyhow!(
                "Toxiproxy at {api} has no proxy named {cluster}-<node>-plaintext (it has: {}); \
                 is the fault cluster up (`scripts/testbed up {cluster}`)?",
                all.join(", ")
            ));
        }
        let fault = tp
            .try_inject(&proxies, TOXIC_LABEL, latency_toxic(one_way_ms))
            .map_err(|(proxy, e)| {
                anyhow!("adding {one_way_ms} ms of latency on proxy {proxy}: {e}")
            })?;
        eprintln!(
            "strait-bench: {one_way_ms} ms one-way latency ({} ms round trip) on {}",
            2 * one_way_ms,
            proxies.join(", ")
        );
        Ok(SlowSource {
            fault,
            api: api.to_string(),
            proxies,
        })
    }

    /// Toxiproxy's API address.
    pub fn api(&self) -> &str {
        &self.api
    }

    /// Removes the toxics.
    pub fn remove(self) -> Result<()> {
        let n = self.fault.applied().len();
        self.fault
            .try_heal()
            .with_context(|| format!("removing the latency toxics at {}", self.api))?;
        eprintln!("strait-bench: removed {n} latency toxics");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_option() {
        assert_eq!(parse_one_way_latency_ms("25"), Ok(25));
        assert_eq!(parse_one_way_latency_ms(" 0 "), Ok(0));
        assert_eq!(parse_one_way_latency_ms("60000"), Ok(60_000));
        for bad in ["60001", "-1", "2.5", "25ms", ""] {
            assert!(parse_one_way_latency_ms(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn latency_is_the_same_each_way_without_jitter() {
        assert_eq!(
            latency_toxic(75),
            Toxic::Latency {
                latency_ms: 75,
                jitter_ms: 0
            }
        );
    }

    #[test]
    fn picks_the_clusters_plaintext_proxies_in_node_order() {
        let all: Vec<String> = [
            "fsource-10-plaintext",
            "fsource-2-plaintext",
            "fsource-1-sasl_ssl",
            "fsource-1-plaintext",
            "ftarget-1-plaintext",
            "fsourcex-3-plaintext",
            "fsource-a-plaintext",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            plaintext_proxies(&all, "fsource"),
            [
                "fsource-1-plaintext",
                "fsource-2-plaintext",
                "fsource-10-plaintext"
            ]
        );
        assert!(plaintext_proxies(&all, "source").is_empty());
    }

    #[test]
    fn api_address_precedence() {
        let none = Path::new("/nonexistent-testbed");
        assert_eq!(
            toxiproxy_api(Some("h:1"), Some("8475"), none),
            "h:1".to_string()
        );
        assert_eq!(toxiproxy_api(None, Some("8475"), none), "127.0.0.1:8475");
        assert_eq!(toxiproxy_api(None, Some(" "), none), "127.0.0.1:8474");
        assert_eq!(toxiproxy_api(None, None, none), "127.0.0.1:8474");
    }
}
