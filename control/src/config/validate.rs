//! Key validation: which scope a key is in, whether that scope reads it, whether its value
//! fits its type, and what was probably meant when it does not.
//!
//! Scopes follow what MirrorMaker actually reads:
//! - top level: `MirrorMakerConfig` keys, connector keys (defaults for every flow), the
//!   connection keys (defaults for every cluster), the worker keys behind the prefixes
//!   `workerConfig` copies, and `strait.*`;
//! - cluster `<alias>.<key>`: connection keys, `consumer.`/`producer.`/`admin.` client keys,
//!   and Connect worker keys (read by the flows that target the alias);
//! - flow `<src>-><tgt>.<key>`: connector keys, flow-only keys, client-prefixed keys
//!   (`consumer.*`, `source.consumer.*`, `target.producer.*`, `producer.override.*`...) and
//!   connection keys under `source.cluster.`/`target.cluster.`.

use std::sync::LazyLock;

use super::error::{ConfigError, ConfigWarning, ErrorKind, Severity, WarningKind};
use super::jaas;
use super::keys::{
    self, CLIENT_DYNAMIC_PREFIXES, CONNECTION_KEYS, CONNECTOR_KEYS, ClientKind, FLOW_ONLY_KEYS,
    KeyDef, MM2_TOP_KEYS, REMOVED_KEYS, STRAIT_KEYS, Support, WORKER_KEYS,
    WORKER_TOP_LEVEL_PREFIXES,
};
use super::values::{check_type, java_parse_boolean, java_trim};
use crate::mm2::filter::java_list;

/// Where a key applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// No prefix.
    Top,
    /// `<alias>.`
    Cluster(String),
    /// `<source>-><target>.`
    Flow(String, String),
}

/// A key split into its scope and the key within the scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Classified {
    Scoped(Scope, String),
    /// `<alias>.<key>` or a flow naming aliases `clusters` does not list.
    UnknownCluster {
        /// The unknown alias as written.
        alias: String,
        /// The key rebuilt with the closest known alias, if one is close.
        suggestion: Option<String>,
        /// The flow the key names, when it is a flow key.
        flow: Option<String>,
    },
}

/// What a scope knows about a key.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Found {
    Def(&'static KeyDef),
    /// A key family accepted by prefix.
    Dynamic(Support),
    /// `config.providers.*`, checked by the providers module.
    ProviderDecl,
}

const CONVERTER_PREFIXES: [&str; 3] = ["key.converter.", "value.converter.", "header.converter."];
const CONVERTER_SETTINGS: Support =
    Support::Ignored("converter settings have no effect: strait copies record bytes");

fn find_any(tables: &[&'static [KeyDef]], name: &str) -> Option<&'static KeyDef> {
    tables.iter().find_map(|t| keys::find(t, name))
}

fn client_key(kind: ClientKind, rest: &str) -> Option<Found> {
    if let Some(d) = kind.find(rest) {
        return Some(Found::Def(d));
    }
    if CLIENT_DYNAMIC_PREFIXES
        .iter()
        .any(|p| rest.starts_with(p) && rest.len() > p.len())
    {
        return Some(Found::Dynamic(Support::Ignored(
            "Java client metrics context; strait exports its own metrics",
        )));
    }
    None
}

fn converter_setting(rest: &str) -> Option<Found> {
    CONVERTER_PREFIXES
        .iter()
        .any(|p| rest.starts_with(p) && rest.len() > p.len())
        .then_some(Found::Dynamic(CONVERTER_SETTINGS))
}

/// A top-level key.
pub(crate) fn lookup_top(rest: &str) -> Option<Found> {
    if let Some(d) = find_any(
        &[STRAIT_KEYS, MM2_TOP_KEYS, CONNECTION_KEYS, CONNECTOR_KEYS],
        rest,
    ) {
        return Some(Found::Def(d));
    }
    if rest.starts_with("config.providers.") {
        return Some(Found::ProviderDecl);
    }
    if WORKER_TOP_LEVEL_PREFIXES
        .iter()
        .any(|p| rest.starts_with(p))
        && let Some(d) = keys::find(WORKER_KEYS, rest)
    {
        return Some(Found::Def(d));
    }
    converter_setting(rest)
}

/// A key under `<alias>.`.
pub(crate) fn lookup_cluster(rest: &str) -> Option<Found> {
    if let Some(d) = keys::find(CONNECTION_KEYS, rest) {
        return Some(Found::Def(d));
    }
    for kind in ClientKind::ALL {
        if let Some(sub) = rest
            .strip_prefix(kind.prefix())
            .and_then(|r| r.strip_prefix('.'))
        {
            return client_key(kind, sub);
        }
    }
    if let Some(d) = keys::find(WORKER_KEYS, rest) {
        return Some(Found::Def(d));
    }
    converter_setting(rest)
}

/// A key under `<src>-><tgt>.`.
pub(crate) fn lookup_flow(rest: &str) -> Option<Found> {
    if let Some(d) = find_any(&[CONNECTOR_KEYS, FLOW_ONLY_KEYS], rest) {
        return Some(Found::Def(d));
    }
    for kind in ClientKind::ALL {
        let p = kind.prefix();
        if let Some(sub) = rest.strip_prefix(&format!("{p}.override.")) {
            return client_key(kind, sub);
        }
    }
    for side in ["source.", "target.", ""] {
        for kind in ClientKind::ALL {
            if let Some(sub) = rest.strip_prefix(&format!("{side}{}.", kind.prefix())) {
                return client_key(kind, sub);
            }
        }
    }
    for side in ["source.cluster.", "target.cluster."] {
        if let Some(sub) = rest.strip_prefix(side) {
            return keys::find(CONNECTION_KEYS, sub).map(Found::Def);
        }
    }
    if let Some(f) = converter_setting(rest) {
        return Some(f);
    }
    if rest.starts_with("transforms.") || rest.starts_with("predicates.") {
        return Some(Found::Dynamic(Support::Unsupported(
            "single message transforms would need record decoding; strait copies batches",
        )));
    }
    if rest.starts_with("topic.creation.") {
        return Some(Found::Dynamic(Support::Unsupported(
            "strait creates remote topics itself, as MM2's source connector does",
        )));
    }
    None
}

pub(crate) fn lookup(scope: &Scope, rest: &str) -> Option<Found> {
    match scope {
        Scope::Top => lookup_top(rest),
        Scope::Cluster(_) => lookup_cluster(rest),
        Scope::Flow(..) => lookup_flow(rest),
    }
}

/// Splits a key into scope and rest. Aliases are matched longest first; a key valid at top
/// level wins over a cluster reading of it (MM2 would read both; only one can matter).
pub(crate) fn classify(key: &str, clusters: &[String]) -> Classified {
    let longest_prefix = |s: &str| {
        clusters
            .iter()
            .filter(|a| {
                s.len() > a.len() && s.starts_with(a.as_str()) && s.as_bytes()[a.len()] == b'.'
            })
            .max_by_key(|a| a.len())
            .cloned()
    };
    if let Some((src, after)) = key.split_once("->") {
        let src_known = clusters.iter().any(|c| c == src);
        if let Some(tgt) = longest_prefix(after) {
            let rest = after[tgt.len() + 1..].to_string();
            if src_known {
                return Classified::Scoped(Scope::Flow(src.to_string(), tgt), rest);
            }
            let suggestion = closest_alias(src, clusters).map(|a| format!("{a}->{tgt}.{rest}"));
            return Classified::UnknownCluster {
                alias: src.to_string(),
                suggestion,
                flow: Some(format!("{src}->{tgt}")),
            };
        }
        // The target is unknown: guess where it ends from the first valid flow key.
        let (tgt, rest) = split_alias(after, lookup_flow).unwrap_or_else(|| {
            after
                .split_once('.')
                .map(|(a, r)| (a.to_string(), r.to_string()))
                .unwrap_or((after.to_string(), String::new()))
        });
        let src_fixed = if src_known {
            Some(src.to_string())
        } else {
            closest_alias(src, clusters)
        };
        let suggestion = match (src_fixed, closest_alias(&tgt, clusters)) {
            (Some(s), Some(t)) if !rest.is_empty() => Some(format!("{s}->{t}.{rest}")),
            _ => None,
        };
        let alias = if src_known {
            tgt.clone()
        } else {
            src.to_string()
        };
        return Classified::UnknownCluster {
            alias,
            suggestion,
            flow: Some(format!("{src}->{tgt}")),
        };
    }
    if let Some(alias) = longest_prefix(key) {
        let rest = &key[alias.len() + 1..];
        if lookup_top(key).is_some() && lookup_cluster(rest).is_none() {
            return Classified::Scoped(Scope::Top, key.to_string());
        }
        return Classified::Scoped(Scope::Cluster(alias), rest.to_string());
    }
    if lookup_top(key).is_none()
        && let Some((alias, rest)) = split_alias(key, lookup_cluster)
    {
        let suggestion = closest_alias(&alias, clusters).map(|a| format!("{a}.{rest}"));
        return Classified::UnknownCluster {
            alias,
            suggestion,
            flow: None,
        };
    }
    Classified::Scoped(Scope::Top, key.to_string())
}

/// The leftmost split `alias.rest` where `rest` is a key `lookup` knows.
fn split_alias(s: &str, lookup: fn(&str) -> Option<Found>) -> Option<(String, String)> {
    s.match_indices('.').find_map(|(i, _)| {
        let (alias, rest) = (&s[..i], &s[i + 1..]);
        (!alias.is_empty() && lookup(rest).is_some()).then(|| (alias.to_string(), rest.to_string()))
    })
}

/// The known alias closest to `alias` (case-insensitive edit distance); none when every
/// character would have to change (`C` is not "close" to `A`).
pub(crate) fn closest_alias(alias: &str, clusters: &[String]) -> Option<String> {
    let lower = alias.to_ascii_lowercase();
    clusters
        .iter()
        .map(|c| (strsim::levenshtein(&lower, &c.to_ascii_lowercase()), c))
        .filter(|(d, c)| *d <= (c.len() / 3).max(1) && *d < alias.len().max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c.clone())
}

/// Representative aliases for suggestions.
pub(crate) struct Aliases<'a> {
    pub clusters: &'a [String],
    /// Flows with `<src>-><tgt>.enabled=true`, in file order.
    pub enabled_flows: Vec<(String, String)>,
}

impl Aliases<'_> {
    fn first_flow(&self) -> (String, String) {
        if let Some(f) = self.enabled_flows.first() {
            return f.clone();
        }
        match self.clusters {
            [a, b, ..] => (a.clone(), b.clone()),
            [a] => (a.clone(), "<target>".to_string()),
            [] => ("<source>".to_string(), "<target>".to_string()),
        }
    }

    fn flow_from(&self, src: &str) -> (String, String) {
        if let Some(f) = self.enabled_flows.iter().find(|(s, _)| s == src) {
            return f.clone();
        }
        let tgt = self
            .clusters
            .iter()
            .find(|c| c.as_str() != src)
            .cloned()
            .unwrap_or_else(|| "<target>".to_string());
        (src.to_string(), tgt)
    }

    fn flow_to(&self, tgt: &str) -> (String, String) {
        if let Some(f) = self.enabled_flows.iter().find(|(_, t)| t == tgt) {
            return f.clone();
        }
        let src = self
            .clusters
            .iter()
            .find(|c| c.as_str() != tgt)
            .cloned()
            .unwrap_or_else(|| "<source>".to_string());
        (src, tgt.to_string())
    }

    /// Enabled flows from the raw `X->Y.enabled` keys (parsed like MirrorMaker does), in
    /// file order.
    pub(crate) fn from_entries<'e>(
        clusters: &'e [String],
        entries: impl Iterator<Item = (&'e str, &'e str, u32)>,
    ) -> Aliases<'e> {
        let mut found: Vec<(u32, String, String)> = Vec::new();
        for (k, v, line) in entries {
            if let Some(pair) = k.strip_suffix(".enabled")
                && let Some((s, t)) = pair.split_once("->")
                && clusters.iter().any(|c| c == s)
                && clusters.iter().any(|c| c == t)
                && s != t
                && java_parse_boolean(v)
            {
                found.push((line, s.to_string(), t.to_string()));
            }
        }
        found.sort();
        Aliases {
            clusters,
            enabled_flows: found.into_iter().map(|(_, s, t)| (s, t)).collect(),
        }
    }
}

static TOP_CANDIDATES: LazyLock<Vec<String>> = LazyLock::new(|| {
    let mut v: Vec<String> = [STRAIT_KEYS, MM2_TOP_KEYS, CONNECTION_KEYS, CONNECTOR_KEYS]
        .iter()
        .flat_map(|t| t.iter().map(|d| d.name.to_string()))
        .collect();
    v.extend(
        WORKER_KEYS
            .iter()
            .filter(|d| {
                WORKER_TOP_LEVEL_PREFIXES
                    .iter()
                    .any(|p| d.name.starts_with(p))
            })
            .map(|d| d.name.to_string()),
    );
    v
});

fn client_candidates(prefix: &str, kind: ClientKind) -> impl Iterator<Item = String> + '_ {
    CONNECTION_KEYS
        .iter()
        .chain(kind.table().iter())
        .map(move |d| format!("{prefix}{}", d.name))
}

static CLUSTER_CANDIDATES: LazyLock<Vec<String>> = LazyLock::new(|| {
    let mut v: Vec<String> = CONNECTION_KEYS.iter().map(|d| d.name.to_string()).collect();
    for kind in ClientKind::ALL {
        v.extend(client_candidates(&format!("{}.", kind.prefix()), kind));
    }
    v.extend(WORKER_KEYS.iter().map(|d| d.name.to_string()));
    v
});

static FLOW_CANDIDATES: LazyLock<Vec<String>> = LazyLock::new(|| {
    let mut v: Vec<String> = CONNECTOR_KEYS
        .iter()
        .chain(FLOW_ONLY_KEYS.iter())
        .map(|d| d.name.to_string())
        .collect();
    for kind in ClientKind::ALL {
        let p = kind.prefix();
        for prefix in [
            format!("{p}."),
            format!("source.{p}."),
            format!("target.{p}."),
            format!("{p}.override."),
        ] {
            v.extend(client_candidates(&prefix, kind));
        }
    }
    for side in ["source.cluster.", "target.cluster."] {
        v.extend(CONNECTION_KEYS.iter().map(|d| format!("{side}{}", d.name)));
    }
    v
});

/// The closest candidate: one that extends the key by whole dotted words, or the smallest
/// edit distance within a bound that grows with the key's length.
fn best_match<'c>(key: &str, candidates: &'c [String]) -> Option<(usize, &'c str)> {
    let limit = (key.len() / 4).max(2);
    let nearest = candidates
        .iter()
        .map(|c| (strsim::levenshtein(key, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by(|(d1, c1), (d2, c2)| {
            d1.cmp(d2).then_with(|| {
                strsim::jaro_winkler(key, c2)
                    .partial_cmp(&strsim::jaro_winkler(key, c1))
                    .unwrap_or(std::cmp::Ordering::Equal)
            })
        })
        .map(|(d, c)| (d, c.as_str()));
    // A near miss (a letter or two) beats a longer key that extends this one by whole
    // words (`topic` → `topics`, not `topic.filter.class`; `emit.heartbeats` →
    // `emit.heartbeats.enabled`).
    if nearest.is_some_and(|(d, _)| d <= 2) {
        return nearest;
    }
    let dotted = format!("{key}.");
    if let Some(c) = candidates
        .iter()
        .filter(|c| c.starts_with(&dotted))
        .min_by_key(|c| c.len())
    {
        return Some((1, c));
    }
    nearest
}

fn removed(rest: &str) -> Option<(&'static str, &'static str, &'static str)> {
    let tail = ClientKind::ALL
        .iter()
        .find_map(|k| {
            rest.rsplit_once(&format!("{}.", k.prefix()))
                .map(|(_, t)| t)
        })
        .unwrap_or(rest);
    REMOVED_KEYS
        .iter()
        .find(|(old, _, _)| *old == rest || *old == tail)
        .map(|&(old, new, why)| (old, new, why))
}

/// A key read where it stands: its full text, line, scope and the rest after the scope.
struct KeyAt<'a> {
    key: &'a str,
    line: u32,
    rest: &'a str,
    aliases: &'a Aliases<'a>,
}

impl KeyAt<'_> {
    fn err(&self, kind: ErrorKind, msg: String, sugg: Option<String>) -> ConfigError {
        ConfigError::new(kind, Some(self.key), Some(self.line), msg).suggest(sugg)
    }
}

fn flow_key(s: &str, t: &str, r: &str) -> String {
    format!("{s}->{t}.{r}")
}

fn is_top_only(r: &str) -> bool {
    find_any(&[STRAIT_KEYS, MM2_TOP_KEYS], r).is_some() || r.starts_with("config.providers.")
}

/// The error for a key its scope does not read.
pub(crate) fn unknown_key(
    key: &str,
    line: u32,
    scope: &Scope,
    rest: &str,
    aliases: &Aliases,
) -> ConfigError {
    let k = KeyAt {
        key,
        line,
        rest,
        aliases,
    };
    let misplaced = match scope {
        Scope::Top => misplaced_at_top(&k),
        Scope::Cluster(a) => misplaced_under_cluster(&k, a),
        Scope::Flow(s, t) => misplaced_in_flow(&k, s, t),
    };
    removed_key(&k, scope)
        .or(misplaced)
        .unwrap_or_else(|| closest_key(&k, scope))
}

/// A key MirrorMaker renamed or removed, with its replacement.
fn removed_key(k: &KeyAt<'_>, scope: &Scope) -> Option<ConfigError> {
    let (rest, aliases) = (k.rest, k.aliases);
    if let Some((old, new, why)) = removed(rest) {
        let replaced = rest.replacen(old, new, 1);
        let sugg = match scope {
            Scope::Top => replaced,
            Scope::Cluster(a) => {
                let (s, t) = aliases.flow_from(a);
                if lookup_cluster(&replaced).is_some() {
                    format!("{a}.{replaced}")
                } else {
                    flow_key(&s, &t, &replaced)
                }
            }
            Scope::Flow(s, t) => flow_key(s, t, &replaced),
        };
        return Some(k.err(
            ErrorKind::RemovedKey,
            format!("`{old}` was {why}; use `{new}`"),
            Some(sugg),
        ));
    }

    None
}

/// A flow or cluster key at top level.
fn misplaced_at_top(k: &KeyAt<'_>) -> Option<ConfigError> {
    let rest = k.rest;
    let (src, tgt) = k.aliases.first_flow();
    if lookup_flow(rest).is_some() {
        let is_override = ClientKind::ALL
            .iter()
            .any(|k| rest.starts_with(&format!("{}.override.", k.prefix())));
        let (kind_msg, sugg) = if let Some(k) = ClientKind::ALL
            .iter()
            .find(|k| rest.starts_with(&format!("{}.", k.prefix())))
            .filter(|_| !is_override)
        {
            let alias = if *k == ClientKind::Producer {
                &tgt
            } else {
                &src
            };
            (
                "client settings need a cluster alias (or a flow) in front".to_string(),
                format!("{alias}.{rest}"),
            )
        } else {
            (
                "this key is only read per replication flow; at top level MirrorMaker ignores it"
                    .to_string(),
                flow_key(&src, &tgt, rest),
            )
        };
        return Some(k.err(ErrorKind::MisplacedKey, kind_msg, Some(sugg)));
    }
    if lookup_cluster(rest).is_some() {
        return Some(k.err(
            ErrorKind::MisplacedKey,
            "a Connect worker setting: MirrorMaker reads it per target cluster, not at top level".to_string(),
            Some(format!("{tgt}.{rest}")),
        ));
    }
    None
}

/// A flow or top-level key under cluster alias `a`.
fn misplaced_under_cluster(k: &KeyAt<'_>, a: &str) -> Option<ConfigError> {
    let (rest, aliases) = (k.rest, k.aliases);
    if lookup_flow(rest).is_some() {
        // Connector-level client overrides act on the worker of flows into `a`.
        let (s, t) = if rest.starts_with("producer.override.") {
            aliases.flow_to(a)
        } else {
            aliases.flow_from(a)
        };
        return Some(k.err(
            ErrorKind::MisplacedKey,
            format!(
                "`{rest}` is a replication-flow setting; under a cluster alias MirrorMaker ignores it"
            ),
            Some(flow_key(&s, &t, rest)),
        ));
    }
    if is_top_only(rest) || lookup_top(rest).is_some() {
        return Some(k.err(
            ErrorKind::MisplacedKey,
            format!("`{rest}` is a top-level setting; under a cluster alias it has no effect"),
            Some(rest.to_string()),
        ));
    }
    None
}

/// A cluster or top-level key in flow `s->t`.
fn misplaced_in_flow(k: &KeyAt<'_>, s: &str, t: &str) -> Option<ConfigError> {
    let rest = k.rest;
    if let Some(Found::Def(d)) = lookup_cluster(rest) {
        let on_source = keys::find(CONNECTION_KEYS, d.name).is_some()
            || ClientKind::ALL
                .iter()
                .any(|k| rest.starts_with(&format!("{}.", k.prefix())));
        let alias = if on_source { s } else { t };
        let why = if on_source {
            "connection settings belong to a cluster; per flow MirrorMaker ignores them"
        } else {
            "a Connect worker setting: MirrorMaker reads it per target cluster, not per flow"
        };
        return Some(k.err(
            ErrorKind::MisplacedKey,
            why.to_string(),
            Some(format!("{alias}.{rest}")),
        ));
    }
    if is_top_only(rest) {
        return Some(k.err(
            ErrorKind::MisplacedKey,
            format!("`{rest}` is a top-level setting; per flow it has no effect"),
            Some(rest.to_string()),
        ));
    }
    if let Some(sub) = rest
        .strip_prefix("source.cluster.")
        .or_else(|| rest.strip_prefix("target.cluster."))
    {
        return Some(k.err(
            ErrorKind::MisplacedKey,
            format!(
                "only connection settings are read from `source.cluster.*`/`target.cluster.*`; `{sub}` has no effect there"
            ),
            None,
        ));
    }
    None
}

/// An unknown key: the closest known one, in its own scope first, then in the others.
fn closest_key(k: &KeyAt<'_>, scope: &Scope) -> ConfigError {
    let (rest, aliases) = (k.rest, k.aliases);
    let (src, tgt) = aliases.first_flow();
    let own: &[String] = match scope {
        Scope::Top => &TOP_CANDIDATES,
        Scope::Cluster(_) => &CLUSTER_CANDIDATES,
        Scope::Flow(..) => &FLOW_CANDIDATES,
    };
    let prefix_of = |sc: &Scope| match sc {
        Scope::Top => String::new(),
        Scope::Cluster(a) => format!("{a}."),
        Scope::Flow(s, t) => format!("{s}->{t}."),
    };
    let mut best: Option<(usize, String, bool)> =
        best_match(rest, own).map(|(d, c)| (d, format!("{}{c}", prefix_of(scope)), true));
    let others: Vec<(Scope, &[String])> = match scope {
        Scope::Top => vec![
            (Scope::Flow(src.clone(), tgt.clone()), &FLOW_CANDIDATES[..]),
            (Scope::Cluster(tgt.clone()), &CLUSTER_CANDIDATES[..]),
        ],
        Scope::Cluster(a) => {
            let (s, t) = aliases.flow_from(a);
            vec![
                (Scope::Flow(s, t), &FLOW_CANDIDATES[..]),
                (Scope::Top, &TOP_CANDIDATES[..]),
            ]
        }
        Scope::Flow(s, _) => vec![
            (Scope::Cluster(s.clone()), &CLUSTER_CANDIDATES[..]),
            (Scope::Top, &TOP_CANDIDATES[..]),
        ],
    };
    for (sc, cands) in others {
        if let Some((d, c)) = best_match(rest, cands)
            && best.as_ref().is_none_or(|(bd, _, _)| d < *bd)
        {
            best = Some((d, format!("{}{c}", prefix_of(&sc)), false));
        }
    }
    let msg = match &best {
        Some((_, _, false)) => "unknown key in this scope".to_string(),
        _ => "unknown key".to_string(),
    };
    k.err(ErrorKind::UnknownKey, msg, best.map(|(_, s, _)| s))
}

/// Checks a value against its key's definition and what strait supports.
pub(crate) fn check_value(
    key: &str,
    line: u32,
    value: &str,
    found: Found,
    errors: &mut Vec<ConfigError>,
    warnings: &mut Vec<ConfigWarning>,
) {
    let secret = keys::is_secret_key(key);
    let shown = |v: &str| {
        if secret {
            String::new()
        } else {
            format!(" `{}`", truncate(v, 80))
        }
    };
    let (support, def) = match found {
        Found::ProviderDecl => return,
        Found::Dynamic(s) => (s, None),
        Found::Def(d) => (d.support, Some(d)),
    };
    if let Some(d) = def {
        if let Err(msg) = check_type(d.ty, value) {
            errors.push(ConfigError::new(
                ErrorKind::InvalidValue,
                Some(key),
                Some(line),
                format!("invalid value{}: {msg}", shown(value)),
            ));
            return;
        }
        if let Err((kind, msg)) = semantic_check(d.name, value) {
            errors.push(ConfigError::new(kind, Some(key), Some(line), msg));
            return;
        }
    }
    let is_list = def.is_some_and(|d| matches!(d.ty, keys::Ty::List | keys::Ty::Patterns));
    let what = Checked {
        key,
        line,
        value,
        shown: &shown(value),
    };
    check_support(
        &what,
        support,
        def.map(|d| d.name),
        is_list,
        errors,
        warnings,
    );
    if !secret {
        inline_comment(&what, warnings);
    }
}

/// A value being checked: its key, line, text and the text to quote in messages (empty for
/// secrets).
struct Checked<'a> {
    key: &'a str,
    line: u32,
    value: &'a str,
    shown: &'a str,
}

/// What strait does with the key (`support`; `name` is its definition's, `is_list` whether
/// it takes a list): notes for ignored keys, errors for values strait does not support.
fn check_support(
    c: &Checked<'_>,
    support: Support,
    name: Option<&str>,
    is_list: bool,
    errors: &mut Vec<ConfigError>,
    warnings: &mut Vec<ConfigWarning>,
) {
    let (key, line, value, shown) = (c.key, c.line, c.value, c.shown);
    let trimmed = java_trim(value);
    match support {
        Support::Used => {}
        Support::Ignored(why) => {
            if name == Some("tasks.max") {
                warnings.push(ConfigWarning::new(
                    Severity::Warning,
                    WarningKind::TasksMax,
                    Some(key),
                    Some(line),
                    "tasks.max is meaningless to strait: one process runs every flow on all its shards; partitions are spread by measured throughput",
                ));
            } else {
                warnings.push(ConfigWarning::new(
                    Severity::Note,
                    WarningKind::IgnoredKey,
                    Some(key),
                    Some(line),
                    format!("accepted for MirrorMaker compatibility, no effect in strait: {why}"),
                ));
            }
        }
        Support::OnlyValues(allowed, why) => {
            let ok = trimmed.is_empty()
                || allowed.contains(&trimmed)
                || (is_list && java_list(value).iter().all(|e| e.is_empty()));
            if !ok {
                errors.push(ConfigError::new(
                    ErrorKind::Unsupported,
                    Some(key),
                    Some(line),
                    format!("value{} is not supported: {why}", shown),
                ));
            }
        }
        Support::Unsupported(why) => {
            if !trimmed.is_empty() {
                errors.push(ConfigError::new(
                    ErrorKind::Unsupported,
                    Some(key),
                    Some(line),
                    format!("not supported: {why}"),
                ));
            }
        }
        Support::Reserved(why) => {
            errors.push(ConfigError::new(
                ErrorKind::Reserved,
                Some(key),
                Some(line),
                why.to_string(),
            ));
        }
    }
}

/// A `#` inside a value: a comment only at the beginning of a line.
fn inline_comment(c: &Checked<'_>, warnings: &mut Vec<ConfigWarning>) {
    let (key, line, value) = (c.key, c.line, c.value);
    if value.contains(" #") || value.contains("\t#") {
        warnings.push(ConfigWarning::new(
            Severity::Warning,
            WarningKind::InlineComment,
            Some(key),
            Some(line),
            format!(
                "`#` starts a comment only at the beginning of a line; this value is `{}`",
                truncate(value, 80)
            ),
        ));
    }
}

fn truncate(s: &str, max_chars: usize) -> String {
    if s.chars().count() <= max_chars {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max_chars).collect();
        t.push('…');
        t
    }
}

/// Checks of values that are valid for Kafka's type but not for strait.
fn semantic_check(name: &str, value: &str) -> Result<(), (ErrorKind, String)> {
    let t = java_trim(value);
    match name {
        "sasl.mechanism" => match t {
            "PLAIN" | "SCRAM-SHA-256" | "SCRAM-SHA-512" | "OAUTHBEARER" => Ok(()),
            "GSSAPI" => Err((
                ErrorKind::Unsupported,
                "SASL mechanism GSSAPI (Kerberos) is not supported by strait; use PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER".to_string(),
            )),
            _ => Err((
                ErrorKind::InvalidValue,
                format!(
                    "unknown SASL mechanism `{t}`; strait supports PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER"
                ),
            )),
        },
        "sasl.jaas.config" => check_jaas(value),
        "ssl.endpoint.identification.algorithm" => {
            if t.is_empty() || t.eq_ignore_ascii_case("https") {
                Ok(())
            } else {
                Err((
                    ErrorKind::InvalidValue,
                    format!("expected `https` or an empty value, not `{t}`"),
                ))
            }
        }
        "ssl.enabled.protocols" => {
            let list = java_list(value);
            if list.iter().any(|p| p == "TLSv1.2" || p == "TLSv1.3") {
                Ok(())
            } else {
                Err((
                    ErrorKind::Unsupported,
                    "strait speaks TLSv1.2 and TLSv1.3 only; the list enables neither".to_string(),
                ))
            }
        }
        "ssl.keystore.type" => match t {
            "PEM" => Ok(()),
            _ if t.eq_ignore_ascii_case("PKCS12") || t.eq_ignore_ascii_case("JKS") => Ok(()),
            _ => Err((
                ErrorKind::Unsupported,
                format!("key store type `{t}` is not supported; use PEM, PKCS12 or JKS"),
            )),
        },
        "ssl.truststore.type" => match t {
            "PEM" => Ok(()),
            _ if t.eq_ignore_ascii_case("PKCS12") || t.eq_ignore_ascii_case("JKS") => Ok(()),
            _ => Err((
                ErrorKind::Unsupported,
                format!("trust store type `{t}` is not supported; use PEM, PKCS12 or JKS"),
            )),
        },
        _ => Ok(()),
    }
}

fn check_jaas(value: &str) -> Result<(), (ErrorKind, String)> {
    let entry = jaas::parse(value)
        .map_err(|e| (ErrorKind::InvalidValue, format!("invalid JAAS config: {e}")))?;
    if entry.login_module == jaas::OAUTHBEARER_LOGIN_MODULE {
        // Its options depend on the login handler: checked when the client is resolved.
        return Ok(());
    }
    if entry.login_module != jaas::PLAIN_LOGIN_MODULE
        && entry.login_module != jaas::SCRAM_LOGIN_MODULE
    {
        return Err((
            ErrorKind::Unsupported,
            format!(
                "login module {} is not supported; strait supports {}, {} and {}",
                entry.login_module,
                jaas::PLAIN_LOGIN_MODULE,
                jaas::SCRAM_LOGIN_MODULE,
                jaas::OAUTHBEARER_LOGIN_MODULE
            ),
        ));
    }
    for opt in ["username", "password"] {
        if !entry.options.contains_key(opt) {
            return Err((
                ErrorKind::Sasl,
                format!("the JAAS config has no `{opt}` option"),
            ));
        }
    }
    if entry
        .options
        .get("tokenauth")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    {
        return Err((
            ErrorKind::Unsupported,
            "delegation tokens (tokenauth=true) are not supported by strait".to_string(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clusters(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn classification() {
        let c = clusters(&["A", "B", "us-east", "us.west"]);
        assert_eq!(
            classify("topics", &c),
            Classified::Scoped(Scope::Top, "topics".into())
        );
        assert_eq!(
            classify("A.bootstrap.servers", &c),
            Classified::Scoped(Scope::Cluster("A".into()), "bootstrap.servers".into())
        );
        assert_eq!(
            classify("us.west.consumer.fetch.min.bytes", &c),
            Classified::Scoped(
                Scope::Cluster("us.west".into()),
                "consumer.fetch.min.bytes".into()
            )
        );
        assert_eq!(
            classify("A->B.topics", &c),
            Classified::Scoped(Scope::Flow("A".into(), "B".into()), "topics".into())
        );
        assert_eq!(
            classify("us.west->us-east.emit.heartbeats.enabled", &c),
            Classified::Scoped(
                Scope::Flow("us.west".into(), "us-east".into()),
                "emit.heartbeats.enabled".into()
            )
        );
        match classify("Us-east.bootstrap.servers", &c) {
            Classified::UnknownCluster {
                alias,
                suggestion,
                flow,
            } => {
                assert_eq!(alias, "Us-east");
                assert_eq!(suggestion.as_deref(), Some("us-east.bootstrap.servers"));
                assert_eq!(flow, None);
            }
            other => panic!("{other:?}"),
        }
        match classify("A->us.east.topics", &c) {
            Classified::UnknownCluster {
                alias, suggestion, ..
            } => {
                assert_eq!(alias, "us.east");
                assert_eq!(suggestion.as_deref(), Some("A->us-east.topics"));
            }
            other => panic!("{other:?}"),
        }
        match classify("C->B.topics", &c) {
            Classified::UnknownCluster { alias, flow, .. } => {
                assert_eq!(alias, "C");
                assert_eq!(flow.as_deref(), Some("C->B"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn top_level_reading_wins_over_alias_reading() {
        let c = clusters(&["offset", "B"]);
        assert_eq!(
            classify("offset.lag.max", &c),
            Classified::Scoped(Scope::Top, "offset.lag.max".into())
        );
        assert_eq!(
            classify("offset.bootstrap.servers", &c),
            Classified::Scoped(Scope::Cluster("offset".into()), "bootstrap.servers".into())
        );
    }

    #[test]
    fn scopes_know_their_keys() {
        assert!(lookup_top("replication.factor").is_some());
        assert!(lookup_top("offset.storage.replication.factor").is_some());
        assert!(lookup_top("offset.flush.interval.ms").is_none());
        assert!(lookup_top("use.defaults.from").is_none());
        assert!(lookup_top("consumer.fetch.min.bytes").is_none());
        assert!(lookup_top("consumer.poll.timeout.ms").is_some());
        assert!(lookup_cluster("consumer.fetch.min.bytes").is_some());
        assert!(lookup_cluster("consumer.ssl.truststore.location").is_some());
        assert!(lookup_cluster("consumer.metrics.context.x").is_some());
        assert!(lookup_cluster("offset.flush.interval.ms").is_some());
        assert!(lookup_cluster("topics").is_none());
        assert!(lookup_flow("topics").is_some());
        assert!(lookup_flow("use.defaults.from").is_some());
        assert!(lookup_flow("source.consumer.fetch.min.bytes").is_some());
        assert!(lookup_flow("producer.override.acks").is_some());
        assert!(lookup_flow("source.cluster.bootstrap.servers").is_some());
        assert!(lookup_flow("source.cluster.fetch.min.bytes").is_none());
        assert!(lookup_flow("bootstrap.servers").is_none());
        assert!(lookup_flow("security.protocol").is_none());
    }

    fn aliases(c: &[String]) -> Aliases<'_> {
        Aliases {
            clusters: c,
            enabled_flows: vec![("A".into(), "B".into())],
        }
    }

    #[test]
    #[allow(clippy::too_many_lines)] // a table of cases
    fn suggestions() {
        let c = clusters(&["A", "B"]);
        let a = aliases(&c);
        let cases: &[(&str, Scope, &str, ErrorKind, Option<&str>)] = &[
            (
                "topic",
                Scope::Top,
                "topic",
                ErrorKind::UnknownKey,
                Some("topics"),
            ),
            (
                "A.topics",
                Scope::Cluster("A".into()),
                "topics",
                ErrorKind::MisplacedKey,
                Some("A->B.topics"),
            ),
            (
                "A->B.bootstrap.servers",
                Scope::Flow("A".into(), "B".into()),
                "bootstrap.servers",
                ErrorKind::MisplacedKey,
                Some("A.bootstrap.servers"),
            ),
            (
                "A->B.offset.flush.interval.ms",
                Scope::Flow("A".into(), "B".into()),
                "offset.flush.interval.ms",
                ErrorKind::MisplacedKey,
                Some("B.offset.flush.interval.ms"),
            ),
            (
                "offset.flush.interval.ms",
                Scope::Top,
                "offset.flush.interval.ms",
                ErrorKind::MisplacedKey,
                Some("B.offset.flush.interval.ms"),
            ),
            (
                "use.defaults.from",
                Scope::Top,
                "use.defaults.from",
                ErrorKind::MisplacedKey,
                Some("A->B.use.defaults.from"),
            ),
            (
                "consumer.fetch.min.bytes",
                Scope::Top,
                "consumer.fetch.min.bytes",
                ErrorKind::MisplacedKey,
                Some("A.consumer.fetch.min.bytes"),
            ),
            (
                "topics.blacklist",
                Scope::Top,
                "topics.blacklist",
                ErrorKind::RemovedKey,
                Some("topics.exclude"),
            ),
            (
                "A->B.groups.blacklist",
                Scope::Flow("A".into(), "B".into()),
                "groups.blacklist",
                ErrorKind::RemovedKey,
                Some("A->B.groups.exclude"),
            ),
            (
                "A->B.emit.heartbeats",
                Scope::Flow("A".into(), "B".into()),
                "emit.heartbeats",
                ErrorKind::UnknownKey,
                Some("A->B.emit.heartbeats.enabled"),
            ),
            (
                "A.consumer.fetch.max.byte",
                Scope::Cluster("A".into()),
                "consumer.fetch.max.byte",
                ErrorKind::UnknownKey,
                Some("A.consumer.fetch.max.bytes"),
            ),
            (
                "A->B.strait.shards",
                Scope::Flow("A".into(), "B".into()),
                "strait.shards",
                ErrorKind::MisplacedKey,
                Some("strait.shards"),
            ),
            (
                "A.clusters",
                Scope::Cluster("A".into()),
                "clusters",
                ErrorKind::MisplacedKey,
                Some("clusters"),
            ),
            (
                "offset.syncs.topic.location",
                Scope::Top,
                "offset.syncs.topic.location",
                ErrorKind::UnknownKey,
                Some("offset-syncs.topic.location"),
            ),
            (
                "A.bootstrap.server",
                Scope::Cluster("A".into()),
                "bootstrap.server",
                ErrorKind::UnknownKey,
                Some("A.bootstrap.servers"),
            ),
            (
                "completely.made.up.thing",
                Scope::Top,
                "completely.made.up.thing",
                ErrorKind::UnknownKey,
                None,
            ),
        ];
        for (key, scope, rest, kind, sugg) in cases {
            let e = unknown_key(key, 7, scope, rest, &a);
            assert_eq!(e.kind, *kind, "{key}: {e}");
            assert_eq!(e.suggestion.as_deref(), *sugg, "{key}: {e}");
            assert_eq!(e.line, Some(7));
            assert_eq!(e.key.as_deref(), Some(*key));
        }
    }

    #[test]
    #[allow(clippy::too_many_lines)] // a table of cases
    fn value_checks() {
        let mut errors = Vec::new();
        let mut warnings = Vec::new();
        let def = |t: &'static [KeyDef], n| Found::Def(keys::find(t, n).expect("known key"));
        check_value(
            "replication.factor",
            1,
            "abc",
            def(CONNECTOR_KEYS, "replication.factor"),
            &mut errors,
            &mut warnings,
        );
        check_value(
            "offset-syncs.topic.location",
            2,
            "middle",
            def(CONNECTOR_KEYS, "offset-syncs.topic.location"),
            &mut errors,
            &mut warnings,
        );
        check_value(
            "topics",
            3,
            "ok, bad[",
            def(CONNECTOR_KEYS, "topics"),
            &mut errors,
            &mut warnings,
        );
        check_value(
            "A.sasl.mechanism",
            4,
            "GSSAPI",
            def(CONNECTION_KEYS, "sasl.mechanism"),
            &mut errors,
            &mut warnings,
        );
        check_value(
            "A.sasl.jaas.config",
            5,
            "M required username=\"u\" password=\"secret-pw\";",
            def(CONNECTION_KEYS, "sasl.jaas.config"),
            &mut errors,
            &mut warnings,
        );
        check_value(
            "name",
            6,
            "x",
            def(CONNECTOR_KEYS, "name"),
            &mut errors,
            &mut warnings,
        );
        check_value(
            "tasks.max",
            7,
            "4",
            def(CONNECTOR_KEYS, "tasks.max"),
            &mut errors,
            &mut warnings,
        );
        check_value(
            "B.producer.compression.type",
            8,
            "gzip",
            def(keys::PRODUCER_KEYS, "compression.type"),
            &mut errors,
            &mut warnings,
        );
        check_value(
            "replication.policy.class",
            9,
            "com.example.MyPolicy",
            def(CONNECTOR_KEYS, "replication.policy.class"),
            &mut errors,
            &mut warnings,
        );
        check_value(
            "topics",
            10,
            "a.*  # comment",
            def(CONNECTOR_KEYS, "topics"),
            &mut errors,
            &mut warnings,
        );
        let got: Vec<(u32, ErrorKind)> = errors
            .iter()
            .map(|e| (e.line.unwrap_or(0), e.kind))
            .collect();
        assert_eq!(
            got,
            vec![
                (1, ErrorKind::InvalidValue),
                (2, ErrorKind::InvalidValue),
                (3, ErrorKind::InvalidValue),
                (4, ErrorKind::Unsupported),
                (5, ErrorKind::Unsupported),
                (6, ErrorKind::Reserved),
                (9, ErrorKind::Unsupported),
            ]
        );
        assert!(errors.iter().all(|e| !e.to_string().contains("secret-pw")));
        let w: Vec<(u32, WarningKind)> = warnings
            .iter()
            .map(|w| (w.line.unwrap_or(0), w.kind))
            .collect();
        assert_eq!(
            w,
            vec![
                (7, WarningKind::TasksMax),
                (8, WarningKind::IgnoredKey),
                (10, WarningKind::InlineComment)
            ]
        );
    }
}
