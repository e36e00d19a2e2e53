//! Value parsing with Kafka `ConfigDef` semantics (Java `trim()`, case-insensitive booleans,
//! `Integer.parseInt`...), and the typed values strait derives from them.

use std::fmt;
use std::net::SocketAddr;

use super::keys::Ty;
use crate::mm2::filter::{PatternList, java_list};

/// Why a key does not accept a value. Never retriable: the file must change. Callers add the
/// key and the line ([`super::ConfigError`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// Not of the key's type, or out of its range.
    #[error("expected {expected}")]
    Expected {
        /// What the key takes.
        expected: String,
    },
    /// A `bootstrap.servers` entry that is not `host:port`.
    #[error("invalid address `{entry}`: {reason}")]
    Address { entry: String, reason: &'static str },
    /// `bootstrap.servers` names no broker.
    #[error("no broker address given")]
    NoAddress,
    /// What the value says is not valid: a regular expression, a JAAS entry.
    #[error("{0}")]
    Invalid(String),
}

impl ValueError {
    fn expected(what: impl Into<String>) -> ValueError {
        ValueError::Expected {
            expected: what.into(),
        }
    }
}

/// Java's `String.trim()`: strips every character up to U+0020 at both ends.
pub fn java_trim(s: &str) -> &str {
    s.trim_matches(|c: char| c <= ' ')
}

/// `ConfigDef` BOOLEAN: `true`/`false`, any case, trimmed.
pub fn parse_bool(v: &str) -> Result<bool, ValueError> {
    let t = java_trim(v);
    if t.eq_ignore_ascii_case("true") {
        Ok(true)
    } else if t.eq_ignore_ascii_case("false") {
        Ok(false)
    } else {
        Err(ValueError::expected("true or false"))
    }
}

/// Java `Boolean.parseBoolean`: exactly `true` in any case, no trimming; anything else is
/// false. MirrorMaker uses it (not `ConfigDef`) to decide which flows get a herder.
pub fn java_parse_boolean(v: &str) -> bool {
    v.eq_ignore_ascii_case("true")
}

/// An integer with `Integer/Long/Short.parseXxx` syntax, checked against `[lo, hi]`.
pub fn parse_int(v: &str, lo: i64, hi: i64, what: &str) -> Result<i64, ValueError> {
    let t = java_trim(v);
    let n: i64 = t
        .parse()
        .map_err(|_| ValueError::expected(format!("{what}, not a number")))?;
    if n < lo || n > hi {
        return Err(ValueError::expected(format!("{what}, out of range")));
    }
    Ok(n)
}

/// A double (`Double.parseDouble`, including the `d`/`f` suffixes) in `[lo, hi]`.
pub fn parse_double(v: &str, lo: f64, hi: f64) -> Result<f64, ValueError> {
    let t = java_trim(v);
    let t = t.strip_suffix(['d', 'D', 'f', 'F']).unwrap_or(t);
    let n: f64 = t.parse().map_err(|_| ValueError::expected("a number"))?;
    if !(n >= lo && n <= hi) {
        return Err(ValueError::expected(format!("a number in [{lo}, {hi}]")));
    }
    Ok(n)
}

/// A broker address from `bootstrap.servers`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BrokerAddress {
    /// Host name or IP literal (IPv6 without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl fmt::Display for BrokerAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// Parses `bootstrap.servers` like `ClientUtils.parseAndValidateAddresses`: empty entries
/// are skipped, an optional `PROTOCOL://` prefix is ignored, IPv6 goes in brackets.
pub fn parse_host_ports(v: &str) -> Result<Vec<BrokerAddress>, ValueError> {
    let mut out = Vec::new();
    for item in java_list(v) {
        if item.is_empty() {
            continue;
        }
        let bad = |reason| ValueError::Address {
            entry: item.clone(),
            reason,
        };
        let addr = item
            .split_once("://")
            .map(|(_, rest)| rest)
            .unwrap_or(&item);
        let (host, port) = if let Some(rest) = addr.strip_prefix('[') {
            let (h, after) = rest.split_once(']').ok_or_else(|| bad("missing `]`"))?;
            let p = after
                .strip_prefix(':')
                .ok_or_else(|| bad("expected host:port"))?;
            (h, p)
        } else {
            addr.rsplit_once(':')
                .ok_or_else(|| bad("expected host:port"))?
        };
        let host_ok = !host.is_empty()
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '%' | '.' | '_' | ':'));
        if !host_ok {
            return Err(bad("bad host name"));
        }
        let port: u16 = port
            .parse()
            .map_err(|_| bad("the port must be 0..=65535"))?;
        out.push(BrokerAddress {
            host: host.to_string(),
            port,
        });
    }
    if out.is_empty() {
        return Err(ValueError::NoAddress);
    }
    Ok(out)
}

/// `auto.offset.reset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AutoOffsetReset {
    /// The log start.
    Earliest,
    /// The log end.
    Latest,
    /// No reset: a missing position is an error.
    None,
    /// `by_duration:<ISO-8601>` (Kafka 4.0, KIP-1106): the offset of that long ago.
    ByDuration(String),
}

impl AutoOffsetReset {
    /// Parses the value (case-insensitive, as Kafka's validator).
    pub fn parse(v: &str) -> Result<AutoOffsetReset, ValueError> {
        let t = java_trim(v);
        let lower = t.to_ascii_lowercase();
        match lower.as_str() {
            "earliest" => Ok(AutoOffsetReset::Earliest),
            "latest" => Ok(AutoOffsetReset::Latest),
            "none" => Ok(AutoOffsetReset::None),
            _ => match lower.strip_prefix("by_duration:") {
                Some(d) if d.starts_with('p') && d.len() > 1 => Ok(AutoOffsetReset::ByDuration(
                    t["by_duration:".len()..].to_string(),
                )),
                _ => Err(ValueError::expected(
                    "earliest, latest, none or by_duration:<ISO-8601 duration>",
                )),
            },
        }
    }

    /// The value as written in a properties file.
    pub fn name(&self) -> String {
        match self {
            AutoOffsetReset::Earliest => "earliest".into(),
            AutoOffsetReset::Latest => "latest".into(),
            AutoOffsetReset::None => "none".into(),
            AutoOffsetReset::ByDuration(d) => format!("by_duration:{d}"),
        }
    }
}

/// `isolation.level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsolationLevel {
    /// Everything up to the high watermark, aborted transactions included.
    ReadUncommitted,
    /// Up to the last stable offset, aborted transactions dropped.
    ReadCommitted,
}

impl IsolationLevel {
    /// Parses the value.
    pub fn parse(v: &str) -> Result<IsolationLevel, ValueError> {
        match java_trim(v) {
            "read_committed" => Ok(IsolationLevel::ReadCommitted),
            "read_uncommitted" => Ok(IsolationLevel::ReadUncommitted),
            _ => Err(ValueError::expected("read_committed or read_uncommitted")),
        }
    }

    /// The value as written in a properties file.
    pub fn name(self) -> &'static str {
        match self {
            IsolationLevel::ReadCommitted => "read_committed",
            IsolationLevel::ReadUncommitted => "read_uncommitted",
        }
    }

    /// The Fetch request's `isolation_level` byte.
    pub fn wire_value(self) -> i8 {
        match self {
            IsolationLevel::ReadUncommitted => 0,
            IsolationLevel::ReadCommitted => 1,
        }
    }
}

/// Producer `acks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// `0`: no acknowledgement.
    None,
    /// `1`: the leader only.
    Leader,
    /// `all` / `-1`: every in-sync replica.
    All,
}

impl Acks {
    /// Parses the value.
    pub fn parse(v: &str) -> Result<Acks, ValueError> {
        match java_trim(v) {
            "all" | "-1" => Ok(Acks::All),
            "1" => Ok(Acks::Leader),
            "0" => Ok(Acks::None),
            _ => Err(ValueError::expected("all, -1, 0 or 1")),
        }
    }

    /// The Produce request's `acks` field.
    pub fn wire_value(self) -> i16 {
        match self {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }

    /// The value as written in a properties file.
    pub fn name(self) -> &'static str {
        match self {
            Acks::None => "0",
            Acks::Leader => "1",
            Acks::All => "all",
        }
    }
}

/// Checks `v` against a key's type (not against what strait supports).
pub fn check_type(ty: Ty, v: &str) -> Result<(), ValueError> {
    match ty {
        Ty::Bool => parse_bool(v).map(drop),
        Ty::Int(lo, hi) => parse_int(v, lo, hi, &ty.describe()).map(drop),
        Ty::Long(lo, hi) => parse_int(v, lo, hi, &ty.describe()).map(drop),
        Ty::Short(lo, hi) => parse_int(v, lo, hi, &ty.describe()).map(drop),
        Ty::Double(lo, hi) => parse_double(v, lo, hi).map(drop),
        Ty::Str | Ty::Password | Ty::List => Ok(()),
        Ty::Class => {
            let t = java_trim(v);
            let ok = t.is_empty()
                || t.split('.').all(|part| {
                    let mut cs = part.chars();
                    matches!(cs.next(), Some(c) if c.is_alphabetic() || c == '_' || c == '$')
                        && cs.all(|c| c.is_alphanumeric() || c == '_' || c == '$')
                });
            if ok {
                Ok(())
            } else {
                Err(ValueError::expected("a Java class name"))
            }
        }
        Ty::Enum(options) => {
            let t = java_trim(v);
            if options.contains(&t) {
                Ok(())
            } else {
                Err(ValueError::expected(ty.describe()))
            }
        }
        Ty::EnumCi(options) => {
            let t = java_trim(v);
            if options.iter().any(|o| o.eq_ignore_ascii_case(t)) {
                Ok(())
            } else {
                Err(ValueError::expected(ty.describe()))
            }
        }
        Ty::HostPorts => parse_host_ports(v).map(drop),
        Ty::ReplicationFactor => parse_replication_factor(v).map(drop),
        Ty::Patterns => PatternList::parse("", v).map(drop).map_err(|e| match e {
            crate::mm2::filter::FilterError::InvalidRegex {
                culprit, reason, ..
            } => ValueError::Invalid(match culprit {
                Some(c) => format!("invalid regular expression `{c}`: {reason}"),
                None => format!("invalid regular expression: {reason}"),
            }),
            other => ValueError::Invalid(other.to_string()),
        }),
        Ty::Jaas => super::jaas::parse(v)
            .map(drop)
            .map_err(|e| ValueError::Invalid(e.to_string())),
        Ty::ListenAddr => parse_listen_addr(v).map(drop),
        Ty::OffsetReset => AutoOffsetReset::parse(v).map(drop),
        Ty::CpuList => parse_cpu_list(v).map(drop),
    }
}

/// Most CPUs a list may name (a bound on what a range expands to).
pub const MAX_CPU: usize = 4095;

/// CPU numbers and ranges (`0-3,8,10-11`), as `taskset -c` takes them: sorted, without
/// duplicates; empty for an empty value.
pub fn parse_cpu_list(v: &str) -> Result<Vec<usize>, ValueError> {
    let t = java_trim(v);
    let mut out = std::collections::BTreeSet::new();
    if t.is_empty() {
        return Ok(Vec::new());
    }
    let bad = || ValueError::expected("CPU numbers and ranges, for example 2-5,8 (at most 4095)");
    for part in t.split(',').map(str::trim) {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (part, part),
        };
        let lo: usize = lo.parse().map_err(|_| bad())?;
        let hi: usize = hi.parse().map_err(|_| bad())?;
        if lo > hi || hi > MAX_CPU {
            return Err(bad());
        }
        out.extend(lo..=hi);
    }
    Ok(out.into_iter().collect())
}

/// A replication factor: -1 (broker default) or 1..=32767.
pub fn parse_replication_factor(v: &str) -> Result<i16, ValueError> {
    let n = parse_int(v, i64::MIN, i64::MAX, "an integer")
        .map_err(|_| ValueError::expected("-1 (broker default) or 1..=32767, not a number"))?;
    if n == -1 || (1..=i64::from(i16::MAX)).contains(&n) {
        // In range by the check just above.
        Ok(i16::try_from(n).unwrap_or(-1))
    } else {
        Err(ValueError::expected("-1 (broker default) or 1..=32767"))
    }
}

/// `ip:port`, or `None` for an empty value.
pub fn parse_listen_addr(v: &str) -> Result<Option<SocketAddr>, ValueError> {
    let t = java_trim(v);
    if t.is_empty() {
        return Ok(None);
    }
    t.parse::<SocketAddr>().map(Some).map_err(|_| {
        ValueError::expected("ip:port (for example 127.0.0.1:8787), or empty to disable")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list(" 0-2, 5,3 ").unwrap(), vec![0, 1, 2, 3, 5]);
        assert_eq!(parse_cpu_list("").unwrap(), Vec::<usize>::new());
        assert_eq!(parse_cpu_list("7").unwrap(), vec![7]);
        for bad in ["3-1", "a", "1,,2", "0-5000", "-1"] {
            assert!(parse_cpu_list(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn booleans() {
        assert_eq!(parse_bool(" TRUE "), Ok(true));
        assert_eq!(parse_bool("False"), Ok(false));
        assert!(parse_bool("yes").is_err());
        assert!(java_parse_boolean("tRuE"));
        assert!(!java_parse_boolean("true "));
        assert!(!java_parse_boolean("yes"));
    }

    #[test]
    fn integers() {
        assert_eq!(parse_int(" 42 ", 0, 100, "x"), Ok(42));
        assert_eq!(parse_int("+7", 0, 100, "x"), Ok(7));
        assert!(parse_int("abc", 0, 100, "x").is_err());
        assert!(parse_int("101", 0, 100, "x").is_err());
        assert!(parse_int("1.0", 0, 100, "x").is_err());
        assert!(check_type(Ty::Int(i32::MIN.into(), i32::MAX.into()), "2147483648").is_err());
        assert!(check_type(Ty::Short(i16::MIN.into(), i16::MAX.into()), "40000").is_err());
        assert_eq!(parse_double("0.8d", 0.5, 1.0), Ok(0.8));
        assert!(parse_double("NaN", 0.0, 1.0).is_err());
    }

    #[test]
    fn replication_factors() {
        assert_eq!(parse_replication_factor("-1"), Ok(-1));
        assert_eq!(parse_replication_factor("3"), Ok(3));
        assert!(parse_replication_factor("0").is_err());
        assert!(parse_replication_factor("-2").is_err());
        assert!(parse_replication_factor("65537").is_err());
        assert!(parse_replication_factor("abc").is_err());
    }

    #[test]
    fn host_ports() {
        let got = parse_host_ports("a:9092, b.example.com:19092,,[::1]:9093,SASL_SSL://c:1")
            .expect("valid");
        assert_eq!(
            got.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
            vec!["a:9092", "b.example.com:19092", "[::1]:9093", "c:1"]
        );
        assert!(parse_host_ports("...").is_err());
        assert!(parse_host_ports("host").is_err());
        assert!(parse_host_ports("host:99999").is_err());
        assert!(parse_host_ports(":9092").is_err());
        assert!(parse_host_ports("").is_err());
        assert!(parse_host_ports("a b:1").is_err());
    }

    #[test]
    fn enums_and_classes() {
        assert!(check_type(Ty::EnumCi(&["PLAINTEXT", "SSL"]), "ssl").is_ok());
        assert!(check_type(Ty::Enum(&["source", "target"]), "middle").is_err());
        assert!(check_type(Ty::Enum(&["source", "target"]), "Source").is_err());
        assert!(
            check_type(
                Ty::Class,
                "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
            )
            .is_ok()
        );
        assert!(check_type(Ty::Class, "a.b$C").is_ok());
        assert!(check_type(Ty::Class, "not a class").is_err());
        assert_eq!(
            AutoOffsetReset::parse("EARLIEST"),
            Ok(AutoOffsetReset::Earliest)
        );
        assert_eq!(
            AutoOffsetReset::parse("by_duration:PT1H"),
            Ok(AutoOffsetReset::ByDuration("PT1H".into()))
        );
        assert!(AutoOffsetReset::parse("by_duration:").is_err());
        assert_eq!(Acks::parse("-1"), Ok(Acks::All));
        assert_eq!(
            IsolationLevel::parse("read_committed"),
            Ok(IsolationLevel::ReadCommitted)
        );
        assert_eq!(parse_listen_addr(""), Ok(None));
        assert!(parse_listen_addr("localhost:1").is_err());
        assert_eq!(
            parse_listen_addr("127.0.0.1:8787").map(|a| a.map(|a| a.port())),
            Ok(Some(8787))
        );
    }

    proptest! {
        #[test]
        fn check_type_never_panics(v in "\\PC{0,40}") {
            for ty in [Ty::Bool, Ty::Int(0, 10), Ty::Double(0.0, 1.0), Ty::Class, Ty::HostPorts, Ty::ReplicationFactor, Ty::Patterns, Ty::Jaas, Ty::ListenAddr, Ty::OffsetReset] {
                let _ = check_type(ty, &v);
            }
        }

        #[test]
        fn host_ports_round_trip(hosts in proptest::collection::vec(("[a-z][a-z0-9.-]{0,10}", any::<u16>()), 1..5)) {
            let text = hosts.iter().map(|(h, p)| format!("{h}:{p}")).collect::<Vec<_>>().join(",");
            let got = parse_host_ports(&text).expect("valid");
            let want: Vec<BrokerAddress> = hosts.iter().map(|(h, p)| BrokerAddress { host: h.clone(), port: *p }).collect();
            prop_assert_eq!(got, want);
        }
    }
}
