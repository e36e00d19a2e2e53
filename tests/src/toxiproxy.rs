//! A small client of Toxiproxy's HTTP API (the proxy `scripts/testbed` puts in front of every
//! client listener of the fault clusters), so a test can slow, cap, black-hole or reset the links
//! between a client and one broker or a whole cluster, and then heal them.
//!
//! Proxies are named `CLUSTER-NODE-LISTENER` (`ftarget-2-plaintext`); see
//! [`crate::faults::FaultCluster::proxies`].

use std::fmt;

use serde_json::json;

use crate::Testbed;
use crate::http::{self, HttpError};

/// A failed API call.
#[derive(Debug)]
pub enum ToxiproxyError {
    /// No answer from the API.
    Http(HttpError),
    /// The API answered with an error status.
    Refused {
        call: String,
        status: u16,
        body: String,
    },
}

impl fmt::Display for ToxiproxyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToxiproxyError::Http(e) => write!(f, "toxiproxy: {e}"),
            ToxiproxyError::Refused { call, status, body } => {
                write!(f, "toxiproxy {call}: HTTP {status}: {}", body.trim())
            }
        }
    }
}

impl std::error::Error for ToxiproxyError {}

impl From<HttpError> for ToxiproxyError {
    fn from(e: HttpError) -> Self {
        ToxiproxyError::Http(e)
    }
}

/// What a toxic does to the bytes of a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Toxic {
    /// Every chunk is delayed by `latency_ms` (± `jitter_ms`).
    Latency { latency_ms: u64, jitter_ms: u64 },
    /// At most `kb_per_s` KB a second.
    Bandwidth { kb_per_s: u64 },
    /// Nothing gets through and the connection stays open and silent (the `timeout` toxic with
    /// timeout 0), new connections too; what was sent meanwhile is dropped, so a connection
    /// that lived through it carries a broken stream afterwards.
    BlackHole,
    /// Every connection is reset (TCP RST) as soon as data arrives (`reset_peer`, timeout 0).
    ResetPeer,
}

impl Toxic {
    fn type_and_attributes(self) -> (&'static str, serde_json::Value) {
        match self {
            Toxic::Latency {
                latency_ms,
                jitter_ms,
            } => (
                "latency",
                json!({ "latency": latency_ms, "jitter": jitter_ms }),
            ),
            Toxic::Bandwidth { kb_per_s } => ("bandwidth", json!({ "rate": kb_per_s })),
            Toxic::BlackHole => ("timeout", json!({ "timeout": 0 })),
            Toxic::ResetPeer => ("reset_peer", json!({ "timeout": 0 })),
        }
    }
}

/// Which direction of a link a toxic acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Client to broker.
    Upstream,
    /// Broker to client.
    Downstream,
}

impl Stream {
    fn name(self) -> &'static str {
        match self {
            Stream::Upstream => "upstream",
            Stream::Downstream => "downstream",
        }
    }
}

/// The Toxiproxy server of the test bed.
#[derive(Debug, Clone)]
pub struct Toxiproxy {
    api: String,
}

impl Toxiproxy {
    /// The test bed's server (`STRAIT_TOXIPROXY_API` in `testbed.env`).
    pub fn from_testbed() -> Toxiproxy {
        Toxiproxy::at(Testbed::load().var("STRAIT_TOXIPROXY_API"))
    }

    /// The server whose API listens on `api` (`host:port`).
    pub fn at(api: &str) -> Toxiproxy {
        Toxiproxy {
            api: api.to_string(),
        }
    }

    fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> Result<String, ToxiproxyError> {
        let body = body.map(|b| b.to_string());
        let r = http::request(&self.api, method, path, body.as_deref())?;
        if (200..300).contains(&r.status) {
            Ok(r.body)
        } else {
            Err(ToxiproxyError::Refused {
                call: format!("{method} {path}"),
                status: r.status,
                body: r.body,
            })
        }
    }

    /// Names of every proxy.
    pub fn proxies(&self) -> Result<Vec<String>, ToxiproxyError> {
        let body = self.call("GET", "/proxies", None)?;
        let v: serde_json::Value =
            serde_json::from_str(&body).map_err(|e| ToxiproxyError::Refused {
                call: "GET /proxies".into(),
                status: 200,
                body: format!("not JSON ({e}): {body}"),
            })?;
        Ok(v.as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default())
    }

    /// Adds toxic `name` of kind `toxic` on `stream` of `proxy`.
    pub fn add_toxic(
        &self,
        proxy: &str,
        name: &str,
        toxic: Toxic,
        stream: Stream,
    ) -> Result<(), ToxiproxyError> {
        self.call(
            "POST",
            &format!("/proxies/{proxy}/toxics"),
            Some(toxic_body(name, toxic, stream)),
        )
        .map(drop)
    }

    /// Removes toxic `name` from `proxy`.
    pub fn remove_toxic(&self, proxy: &str, name: &str) -> Result<(), ToxiproxyError> {
        self.call("DELETE", &format!("/proxies/{proxy}/toxics/{name}"), None)
            .map(drop)
    }

    /// Names of the toxics on `proxy`.
    pub fn toxics(&self, proxy: &str) -> Result<Vec<String>, ToxiproxyError> {
        let body = self.call("GET", &format!("/proxies/{proxy}/toxics"), None)?;
        let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        Ok(v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|t| t["name"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Enables or disables `proxy`: disabled, it closes its connections and refuses new ones.
    pub fn set_enabled(&self, proxy: &str, enabled: bool) -> Result<(), ToxiproxyError> {
        self.call(
            "POST",
            &format!("/proxies/{proxy}"),
            Some(json!({ "enabled": enabled })),
        )
        .map(drop)
    }

    /// Enables every proxy and removes every toxic.
    pub fn reset(&self) -> Result<(), ToxiproxyError> {
        self.call("POST", "/reset", None).map(drop)
    }

    /// Puts `toxic` on both directions of every proxy in `proxies`; the returned [`Fault`]
    /// removes them when healed or dropped. Panics when Toxiproxy refuses (tests).
    pub fn inject(&self, proxies: &[String], label: &str, toxic: Toxic) -> Fault {
        self.try_inject(proxies, label, toxic)
            .unwrap_or_else(|(proxy, e)| panic!("cannot inject {label} on {proxy}: {e}"))
    }

    /// [`Toxiproxy::inject`] that returns the proxy it could not change and why instead of
    /// panicking; the toxics already added are removed before it returns.
    pub fn try_inject(
        &self,
        proxies: &[String],
        label: &str,
        toxic: Toxic,
    ) -> Result<Fault, (String, ToxiproxyError)> {
        let mut fault = Fault {
            tp: self.clone(),
            applied: Vec::new(),
            label: label.to_string(),
        };
        for proxy in proxies {
            for stream in [Stream::Upstream, Stream::Downstream] {
                let name = format!("{label}-{}", stream.name());
                // On error `fault` is dropped, which removes what was added.
                self.add_toxic(proxy, &name, toxic, stream)
                    .map_err(|e| (proxy.clone(), e))?;
                fault.applied.push((proxy.clone(), name));
            }
        }
        Ok(fault)
    }
}

/// The JSON body of `POST /proxies/{proxy}/toxics`: toxic `name` of kind `toxic` on `stream`,
/// always on (toxicity 1).
pub fn toxic_body(name: &str, toxic: Toxic, stream: Stream) -> serde_json::Value {
    let (kind, attributes) = toxic.type_and_attributes();
    json!({
        "name": name,
        "type": kind,
        "stream": stream.name(),
        "toxicity": 1.0,
        "attributes": attributes,
    })
}

/// Toxics in place; [`Fault::heal`] (or dropping it) removes them.
#[derive(Debug)]
pub struct Fault {
    tp: Toxiproxy,
    applied: Vec<(String, String)>,
    label: String,
}

impl Fault {
    /// Removes the toxics; panics when Toxiproxy refuses (the test bed would stay faulty).
    pub fn heal(self) {
        let label = self.label.clone();
        self.try_heal()
            .unwrap_or_else(|e| panic!("cannot heal {label}: {e}"));
    }

    /// Removes the toxics; `Err` when Toxiproxy refuses (the rest are still tried on drop).
    pub fn try_heal(mut self) -> Result<(), ToxiproxyError> {
        self.remove_all()
    }

    /// `(proxy, toxic name)` of every toxic in place.
    pub fn applied(&self) -> &[(String, String)] {
        &self.applied
    }

    fn remove_all(&mut self) -> Result<(), ToxiproxyError> {
        while let Some((proxy, name)) = self.applied.pop() {
            self.tp.remove_toxic(&proxy, &name)?;
        }
        Ok(())
    }
}

impl Drop for Fault {
    fn drop(&mut self) {
        // A failing test must not leave the links broken for the next one.
        if let Err(e) = self.remove_all() {
            eprintln!("warning: could not heal {}: {e}", self.label);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_toxic_body() {
        let b = toxic_body(
            "slow-downstream",
            Toxic::Latency {
                latency_ms: 25,
                jitter_ms: 0,
            },
            Stream::Downstream,
        );
        assert_eq!(
            b,
            json!({
                "name": "slow-downstream",
                "type": "latency",
                "stream": "downstream",
                "toxicity": 1.0,
                "attributes": { "latency": 25, "jitter": 0 },
            })
        );
        assert_eq!(
            toxic_body("x", Toxic::BlackHole, Stream::Upstream)["attributes"],
            json!({ "timeout": 0 })
        );
    }
}
