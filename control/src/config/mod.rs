//! MirrorMaker 2 configuration: strait reads an existing `mm2.properties` exactly as
//! MirrorMaker does, but strictly: every unknown key, every key in a scope where it has no
//! effect and every invalid value is an error naming the key, its line and the closest valid
//! key.
//!
//! Entry points: [`load`] (the typed [`Mm2Config`], or every error) and [`check`] (a report
//! for `strait check`). [`redact`] is the one function that decides what may be printed.
//!
//! Pipeline: bytes → [`properties`] (Java `Properties.load` rules, line numbers) →
//! [`providers`] (`${env:..}`, `${file:..}`) → `validate` (scope, catalogue in [`keys`],
//! types) → `resolve` (MirrorMaker's precedence, typed flows and clients) → `cross` (rules
//! between `strait.*` keys) → `traps` (warnings) → [`check`] (report).
//!
//! Bounds: the file may hold [`MAX_FILE_BYTES`] bytes and [`MAX_ENTRIES`] entries, and list
//! [`resolve::MAX_CLUSTERS`] cluster aliases; provider files are limited to
//! [`providers::MAX_PROVIDER_FILE_BYTES`].

pub mod check;
mod cross;
pub mod diff;
pub mod error;
pub mod jaas;
pub mod keys;
pub mod model;
pub mod properties;
pub mod providers;
pub mod resolve;
mod traps;
pub mod validate;
pub mod values;

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use check::{CheckReport, check, check_with};
pub use error::{ConfigError, ConfigErrors, ConfigWarning, ErrorKind, Severity, WarningKind};
pub use model::*;
pub use values::{Acks, AutoOffsetReset, BrokerAddress, IsolationLevel};

use properties::Encoding;
use resolve::{RawEntry, Resolver};
use validate::{Aliases, Classified};

/// The largest config file strait reads.
pub const MAX_FILE_BYTES: u64 = 4 << 20;
/// The most entries a config file may hold.
pub const MAX_ENTRIES: usize = 100_000;

/// What config loading reads from the outside world: environment variables and files.
/// Tests pass a [`StaticEnv`].
pub trait ConfigEnv {
    /// The value of an environment variable.
    fn env_var(&self, name: &str) -> Option<String>;
    /// A file's bytes; an error when it is larger than `max_bytes`.
    fn read_file(&self, path: &Path, max_bytes: u64) -> io::Result<Vec<u8>>;
}

/// The real process environment and file system.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemEnv;

impl ConfigEnv for SystemEnv {
    fn env_var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }

    fn read_file(&self, path: &Path, max_bytes: u64) -> io::Result<Vec<u8>> {
        read_bounded(path, max_bytes)
    }
}

fn read_bounded(path: &Path, max_bytes: u64) -> io::Result<Vec<u8>> {
    let file = std::fs::File::open(path)?;
    let mut buf = Vec::new();
    // Read one byte more than allowed to tell "exactly at the limit" from "too large".
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut buf)?;
    if buf.len() as u64 > max_bytes {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {max_bytes} bytes"),
        ));
    }
    Ok(buf)
}

/// A fixed environment for tests: given variables, given files, and optionally the real
/// file system behind them.
#[derive(Debug, Clone, Default)]
pub struct StaticEnv {
    vars: BTreeMap<String, String>,
    files: BTreeMap<PathBuf, Vec<u8>>,
    disk: bool,
}

impl StaticEnv {
    /// No variables, no files.
    pub fn new() -> Self {
        StaticEnv::default()
    }

    /// Adds an environment variable.
    pub fn var(mut self, name: &str, value: &str) -> Self {
        self.vars.insert(name.to_string(), value.to_string());
        self
    }

    /// Adds a file.
    pub fn file(mut self, path: impl Into<PathBuf>, content: impl AsRef<[u8]>) -> Self {
        self.files.insert(path.into(), content.as_ref().to_vec());
        self
    }

    /// Reads files not given here from the real file system.
    pub fn with_disk(mut self) -> Self {
        self.disk = true;
        self
    }
}

impl ConfigEnv for StaticEnv {
    fn env_var(&self, name: &str) -> Option<String> {
        self.vars.get(name).cloned()
    }

    fn read_file(&self, path: &Path, max_bytes: u64) -> io::Result<Vec<u8>> {
        match self.files.get(path) {
            Some(b) if b.len() as u64 > max_bytes => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("larger than {max_bytes} bytes"),
            )),
            Some(b) => Ok(b.clone()),
            None if self.disk => read_bounded(path, max_bytes),
            None => Err(io::Error::new(io::ErrorKind::NotFound, "no such file")),
        }
    }
}

/// What may be printed of a value: secrets (any key holding a password, a secret, a JAAS
/// config or a private key) become `[redacted]`. Everyone printing config values uses this.
pub fn redact<'a>(key: &str, value: &'a str) -> Cow<'a, str> {
    if keys::is_secret_key(key) {
        Cow::Borrowed("[redacted]")
    } else {
        Cow::Borrowed(value)
    }
}

/// Loads `path` with the process environment.
pub fn load(path: &Path) -> Result<Mm2Config, ConfigErrors> {
    load_with(path, &SystemEnv)
}

/// Loads `path` with the given environment.
pub fn load_with(path: &Path, env: &dyn ConfigEnv) -> Result<Mm2Config, ConfigErrors> {
    let outcome = analyse(path, env);
    match outcome.config {
        Some(config) if outcome.errors.is_empty() => Ok(config),
        _ => Err(ConfigErrors(outcome.errors)),
    }
}

/// Everything known about a file: the config (built even when there are errors, with
/// defaults in place of invalid values), the errors and the warnings.
pub(crate) struct Outcome {
    pub config: Option<Mm2Config>,
    pub errors: Vec<ConfigError>,
    pub warnings: Vec<ConfigWarning>,
}

pub(crate) fn analyse(path: &Path, env: &dyn ConfigEnv) -> Outcome {
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    let bytes = match env.read_file(path, MAX_FILE_BYTES) {
        Ok(b) => b,
        Err(e) => {
            errors.push(ConfigError::new(
                ErrorKind::Io,
                None,
                None,
                format!("cannot read {}: {e}", path.display()),
            ));
            return Outcome {
                config: None,
                errors,
                warnings,
            };
        }
    };
    let props = properties::parse_bytes_bounded(&bytes, MAX_ENTRIES);
    file_level_findings(&props, &mut errors, &mut warnings);
    if props.truncated {
        errors.push(ConfigError::new(
            ErrorKind::Limit,
            None,
            None,
            format!("the file holds more than {MAX_ENTRIES} entries"),
        ));
        return Outcome {
            config: None,
            errors,
            warnings,
        };
    }
    let path_arc: Arc<Path> = Arc::from(path);
    let Expansion { raw, unresolved } = expand_values(&props, env, &mut errors, &mut warnings);

    let clusters = read_clusters(&raw, &mut errors, &mut warnings);
    let aliases = Aliases::from_entries(
        &clusters,
        raw.iter()
            .map(|(k, e)| (k.as_str(), e.value.as_str(), e.line)),
    );
    check_keys(
        &raw,
        &clusters,
        &aliases,
        &unresolved,
        &mut errors,
        &mut warnings,
    );

    let mut resolver = Resolver::new(path_arc.clone(), &raw, clusters.clone());
    let (clusters_cfg, mut flows) = resolver.resolve();
    errors.append(&mut resolver.errors);
    warnings.append(&mut resolver.warnings);
    let strait = resolve::strait_settings(&path_arc, &raw);
    resolve::prefer_strait_progress_replication(&mut flows, &strait);
    errors.extend(cross::errors(&strait, &flows));
    traps::add_warnings(&raw, &clusters_cfg, &flows, &mut warnings);

    dedup(&mut errors, |e| {
        (e.kind, e.key.clone(), e.line, e.message.clone())
    });
    dedup(&mut warnings, |w| {
        (w.kind, w.key.clone(), w.line, w.message.clone())
    });
    errors.sort_by_key(|e| (e.line.unwrap_or(u32::MAX), e.key.clone()));
    warnings.sort_by_key(|w| (std::cmp::Reverse(w.severity), w.line.unwrap_or(u32::MAX)));

    let config = Mm2Config {
        path: path.to_path_buf(),
        clusters: clusters_cfg,
        flows,
        strait,
        warnings: warnings.clone(),
    };
    Outcome {
        config: Some(config),
        errors,
        warnings,
    }
}

/// Every value with its `${provider:...}` references expanded, and the keys whose references
/// could not be.
struct Expansion {
    raw: BTreeMap<String, RawEntry>,
    /// Their raw text is not checked again.
    unresolved: BTreeSet<String>,
}

/// Reads the providers declared in `props`, then expands every value with them.
fn expand_values(
    props: &properties::Properties,
    env: &dyn ConfigEnv,
    errors: &mut Vec<ConfigError>,
    warnings: &mut Vec<ConfigWarning>,
) -> Expansion {
    let lines: BTreeMap<&str, u32> = props
        .entries
        .iter()
        .map(|e| (e.key.as_str(), e.line))
        .collect();

    // Providers, then every value expanded.
    let (providers, decl_errors) = providers::Providers::from_entries(
        props
            .entries
            .iter()
            .filter(|e| e.key.starts_with("config.providers"))
            .map(|e| (e.key.as_str(), e.value.as_str())),
    );
    for d in decl_errors {
        let line = lines.get(d.key.as_str()).copied();
        errors.push(ConfigError::new(
            ErrorKind::Provider,
            Some(&d.key),
            line,
            d.error.to_string(),
        ));
    }
    let mut raw: BTreeMap<String, RawEntry> = BTreeMap::new();
    let mut undeclared: BTreeSet<String> = BTreeSet::new();
    // Keys whose references could not be resolved: their raw text is not checked again.
    let mut unresolved: BTreeSet<String> = BTreeSet::new();
    for e in &props.entries {
        let expanded = if e.key.starts_with("config.providers") {
            Ok(providers::Expanded {
                value: e.value.clone(),
                references: Vec::new(),
            })
        } else {
            providers::expand(&e.value, &providers, env)
        };
        match expanded {
            Ok(x) => {
                provider_notes(e, &x, &providers, &mut undeclared, warnings);
                raw.insert(
                    e.key.clone(),
                    RawEntry {
                        value: x.value,
                        line: e.line,
                    },
                );
            }
            Err(err) => {
                errors.push(ConfigError::new(
                    ErrorKind::Provider,
                    Some(&e.key),
                    Some(e.line),
                    err.to_string(),
                ));
                unresolved.insert(e.key.clone());
                raw.insert(
                    e.key.clone(),
                    RawEntry {
                        value: e.value.clone(),
                        line: e.line,
                    },
                );
            }
        }
    }
    Expansion { raw, unresolved }
}

/// Notes on the references of `e`: providers strait resolves that MirrorMaker would need
/// declared (once per provider), and strait's whole-file extension.
fn provider_notes(
    e: &properties::Entry,
    x: &providers::Expanded,
    providers: &providers::Providers,
    undeclared: &mut BTreeSet<String>,
    warnings: &mut Vec<ConfigWarning>,
) {
    for r in &x.references {
        if providers.get(&r.provider).is_some_and(|p| !p.declared)
            && undeclared.insert(r.provider.clone())
        {
            warnings.push(ConfigWarning::new(
                Severity::Note,
                WarningKind::ProviderNotDeclared,
                Some(&e.key),
                Some(e.line),
                format!(
                    "`${{{}:...}}` is resolved by strait; MirrorMaker needs config.providers={} and its class declared, or it keeps the text as it is",
                    r.provider, r.provider
                ),
            ));
        } else if r.path.is_empty()
            && providers
                .get(&r.provider)
                .is_some_and(|p| p.declared && p.kind == providers::ProviderKind::File)
        {
            warnings.push(ConfigWarning::new(
                Severity::Note,
                WarningKind::ProviderNotDeclared,
                Some(&e.key),
                Some(e.line),
                "`${file:PATH}` (whole file) is a strait extension; MirrorMaker's FileConfigProvider needs `${file:PATH:KEY}`",
            ));
        }
    }
}

/// Checks every key: its cluster aliases, its scope, and its value against the key tables.
fn check_keys(
    raw: &BTreeMap<String, RawEntry>,
    clusters: &[String],
    aliases: &Aliases,
    unresolved: &BTreeSet<String>,
    errors: &mut Vec<ConfigError>,
    warnings: &mut Vec<ConfigWarning>,
) {
    for (key, e) in raw {
        match validate::classify(key, clusters) {
            Classified::UnknownCluster {
                alias,
                suggestion,
                flow,
            } => {
                let msg = match flow {
                    Some(f) => format!(
                        "flow `{f}` names cluster `{alias}`, which `clusters` does not list ({})",
                        clusters.join(", ")
                    ),
                    None => format!(
                        "`{alias}` is not a cluster alias listed in `clusters` ({})",
                        clusters.join(", ")
                    ),
                };
                errors.push(
                    ConfigError::new(ErrorKind::UnknownCluster, Some(key), Some(e.line), msg)
                        .suggest(suggestion),
                );
            }
            Classified::Scoped(validate::Scope::Flow(s, t), _) if s == t => {
                errors.push(ConfigError::new(
                    ErrorKind::Conflict,
                    Some(key),
                    Some(e.line),
                    format!(
                        "`{s}->{t}` is a flow from a cluster to itself; MirrorMaker never runs one"
                    ),
                ));
            }
            Classified::Scoped(scope, rest) => match validate::lookup(&scope, &rest) {
                Some(_) if unresolved.contains(key) => {}
                Some(found) => {
                    validate::check_value(key, e.line, &e.value, found, errors, warnings)
                }
                None => errors.push(validate::unknown_key(key, e.line, &scope, &rest, aliases)),
            },
        }
    }
}

fn dedup<T, K: Ord>(v: &mut Vec<T>, key: impl Fn(&T) -> K) {
    let mut seen = BTreeSet::new();
    v.retain(|x| seen.insert(key(x)));
}

fn file_level_findings(
    props: &properties::Properties,
    errors: &mut Vec<ConfigError>,
    warnings: &mut Vec<ConfigWarning>,
) {
    for e in &props.errors {
        errors.push(ConfigError::new(
            ErrorKind::Syntax,
            None,
            Some(e.line),
            e.message.clone(),
        ));
    }
    for d in &props.duplicates {
        warnings.push(ConfigWarning::new(
            Severity::Warning,
            WarningKind::DuplicateKey,
            Some(&d.key),
            Some(d.later_line),
            format!(
                "also set on line {}; line {} wins (as in MirrorMaker)",
                d.earlier_line, d.later_line
            ),
        ));
    }
    if props.encoding == Encoding::Latin1 {
        warnings.push(ConfigWarning::new(
            Severity::Note,
            WarningKind::Encoding,
            None,
            props.first_non_ascii_line,
            "the file is not valid UTF-8; read as ISO-8859-1, as MirrorMaker does",
        ));
    } else if let Some(line) = props.first_non_ascii_line {
        warnings.push(ConfigWarning::new(
            Severity::Warning,
            WarningKind::Encoding,
            None,
            Some(line),
            "non-ASCII characters: strait reads the file as UTF-8, MirrorMaker as ISO-8859-1, so they differ; write them as \\uXXXX to be safe",
        ));
    }
    if props.had_bom {
        warnings.push(ConfigWarning::new(
            Severity::Warning,
            WarningKind::Encoding,
            None,
            Some(1),
            "the file starts with a UTF-8 byte order mark; MirrorMaker would read it as part of the first key",
        ));
    }
}

/// Whether `alias` may name a cluster: it goes into topic names.
fn valid_alias(alias: &str) -> bool {
    !alias.is_empty()
        && !alias.contains("->")
        && alias
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

fn invalid_alias(alias: &str, line: u32) -> ConfigError {
    let hint = if alias.contains('#') {
        " (`#` starts a comment only at the beginning of a line)"
    } else {
        ""
    };
    ConfigError::new(
        ErrorKind::InvalidValue,
        Some("clusters"),
        Some(line),
        format!(
            "invalid cluster alias `{alias}`: aliases go into topic names, so they may hold only letters, digits, `.`, `_` and `-`{hint}"
        ),
    )
}

/// Reads and checks `clusters`.
fn read_clusters(
    raw: &BTreeMap<String, RawEntry>,
    errors: &mut Vec<ConfigError>,
    warnings: &mut Vec<ConfigWarning>,
) -> Vec<String> {
    let Some(e) = raw.get("clusters") else {
        errors.push(
            ConfigError::new(
                ErrorKind::Missing,
                Some("clusters"),
                None,
                "`clusters` is required: the list of cluster aliases (for example `clusters = A, B`)",
            )
            .suggest(Some("clusters".to_string())),
        );
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for alias in crate::mm2::filter::java_list(&e.value) {
        if !valid_alias(&alias) {
            errors.push(invalid_alias(&alias, e.line));
            // Keep checking the other keys against the alias that was surely meant (the text
            // before a blank or `#`), so one typo does not bury the file in follow-up errors.
            let salvaged = alias
                .split(|c: char| c.is_whitespace() || c == '#')
                .next()
                .unwrap_or("")
                .to_string();
            if valid_alias(&salvaged) && !out.contains(&salvaged) {
                out.push(salvaged);
            }
            continue;
        }
        if out.contains(&alias) {
            warnings.push(ConfigWarning::new(
                Severity::Warning,
                WarningKind::DuplicateKey,
                Some("clusters"),
                Some(e.line),
                format!("alias `{alias}` is listed twice"),
            ));
            continue;
        }
        out.push(alias);
    }
    if out.is_empty()
        && errors
            .iter()
            .all(|err| err.key.as_deref() != Some("clusters"))
    {
        errors.push(ConfigError::new(
            ErrorKind::Missing,
            Some("clusters"),
            Some(e.line),
            "`clusters` lists no alias",
        ));
    }
    if out.len() > resolve::MAX_CLUSTERS {
        errors.push(ConfigError::new(
            ErrorKind::Limit,
            Some("clusters"),
            Some(e.line),
            format!(
                "{} aliases; at most {} are supported",
                out.len(),
                resolve::MAX_CLUSTERS
            ),
        ));
        out.truncate(resolve::MAX_CLUSTERS);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_text(text: &str, env: StaticEnv) -> Result<Mm2Config, ConfigErrors> {
        let env = env.file("/cfg/mm2.properties", text);
        load_with(Path::new("/cfg/mm2.properties"), &env)
    }

    /// (key, line, kind, suggestion) of each error.
    type Found = (Option<String>, Option<u32>, ErrorKind, Option<String>);

    fn errors_of(text: &str) -> Vec<Found> {
        match load_text(text, StaticEnv::new()) {
            Ok(_) => Vec::new(),
            Err(ConfigErrors(errs)) => errs
                .into_iter()
                .map(|e| (e.key, e.line, e.kind, e.suggestion))
                .collect(),
        }
    }

    const MIN: &str = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\nreplication.factor = 3\n";

    #[test]
    fn minimal_file_loads() {
        let c = load_text(MIN, StaticEnv::new()).expect("valid");
        assert_eq!(c.clusters.len(), 2);
        // A->B replicates; B->A exists for heartbeats only.
        assert_eq!(c.flows.len(), 2);
        let ab = c.flow("A", "B").expect("A->B");
        assert!(ab.enabled.value);
        assert!(!ab.heartbeats_only);
        let ba = c.flow("B", "A").expect("B->A");
        assert!(ba.heartbeats_only);
        assert_eq!(
            ab.clients.source_consumer.client.bootstrap_servers[0].to_string(),
            "a:9092"
        );
        assert_eq!(
            ab.clients.target_producer.client.bootstrap_servers[0].to_string(),
            "b:9092"
        );
        assert_eq!(ab.offset_syncs_topic(), "mm2-offset-syncs.B.internal");
        assert_eq!(ab.clients.offset_syncs_producer.client.cluster, "A");
        assert_eq!(ab.checkpoints_topic(), "A.checkpoints.internal");
        assert_eq!(ab.remote_topic("orders"), "A.orders");
        assert_eq!(ab.mm2_offsets_topic.value, "mm2-offsets.A.internal");
    }

    #[test]
    fn missing_file_is_an_io_error() {
        let r = load_with(Path::new("/nope/mm2.properties"), &StaticEnv::new());
        let errs = r.expect_err("missing").0;
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].kind, ErrorKind::Io);
    }

    #[test]
    fn missing_clusters_and_bootstrap() {
        let errs = errors_of("A->B.enabled=true\n");
        assert!(
            errs.iter()
                .any(|e| e.0.as_deref() == Some("clusters") && e.2 == ErrorKind::Missing),
            "{errs:?}"
        );
        let errs = errors_of("clusters=A,B\nA.bootstrap.servers=a:1\nA->B.enabled=true\n");
        assert!(
            errs.iter().any(|e| e.0.as_deref() == Some("B.bootstrap.servers") && e.2 == ErrorKind::Missing),
            "{errs:?}"
        );
    }

    #[test]
    fn redaction() {
        assert_eq!(
            redact("A.sasl.jaas.config", "x password=\"p\";"),
            "[redacted]"
        );
        assert_eq!(redact("A.bootstrap.servers", "a:1"), "a:1");
    }
}
