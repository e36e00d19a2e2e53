//! Errors and warnings of the config layer. Every error names the key, the file line and,
//! when one exists, the closest valid key; messages never contain secret values.

use std::fmt;

/// What kind of problem an error is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorKind {
    /// The file cannot be read.
    Io,
    /// A line Java's `Properties.load` would reject.
    Syntax,
    /// No scope knows this key.
    UnknownKey,
    /// A valid key in a scope where it has no effect.
    MisplacedKey,
    /// A key or flow names a cluster alias that `clusters` does not list.
    UnknownCluster,
    /// A key removed from Kafka (with its replacement).
    RemovedKey,
    /// A value of the wrong type or out of range.
    InvalidValue,
    /// A required key is missing.
    Missing,
    /// A valid setting strait cannot honour.
    Unsupported,
    /// A key MirrorMaker sets itself.
    Reserved,
    /// A `${provider:...}` reference or provider declaration.
    Provider,
    /// TLS settings that do not fit together (Kafka's `DefaultSslEngineFactory` rules).
    Tls,
    /// SASL settings that do not fit together.
    Sasl,
    /// Settings that contradict each other.
    Conflict,
    /// A bound on the file (size, entries, clusters) is exceeded.
    Limit,
}

/// One problem in a config file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render())]
pub struct ConfigError {
    /// What kind of problem.
    pub kind: ErrorKind,
    /// The key as written in the file (for missing keys: the key to add).
    pub key: Option<String>,
    /// 1-based line of the key in the file.
    pub line: Option<u32>,
    /// What is wrong; never contains a secret value.
    pub message: String,
    /// The key (or `key = value` line) that was probably meant.
    pub suggestion: Option<String>,
}

impl ConfigError {
    /// A new error.
    pub fn new(
        kind: ErrorKind,
        key: Option<&str>,
        line: Option<u32>,
        message: impl Into<String>,
    ) -> Self {
        ConfigError {
            kind,
            key: key.map(str::to_string),
            line,
            message: message.into(),
            suggestion: None,
        }
    }

    /// Adds a suggestion.
    pub fn suggest(mut self, suggestion: Option<String>) -> Self {
        self.suggestion = suggestion;
        self
    }

    fn render(&self) -> String {
        let mut s = String::new();
        if let Some(line) = self.line {
            s.push_str(&format!("line {line}: "));
        }
        if let Some(key) = &self.key {
            s.push_str(&format!("`{key}`: "));
        }
        s.push_str(&self.message);
        if let Some(sugg) = &self.suggestion {
            if self.kind == ErrorKind::Missing {
                s.push_str(&format!(" (add `{sugg}`)"));
            } else {
                s.push_str(&format!(" (did you mean `{sugg}`?)"));
            }
        }
        s
    }
}

/// Every error of a file that failed to load.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} configuration error(s):\n{}", .0.len(), .0.iter().map(|e| format!("  {e}")).collect::<Vec<_>>().join("\n"))]
pub struct ConfigErrors(pub Vec<ConfigError>);

/// How much a warning matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    /// Worth knowing; nothing is wrong (for example a key strait accepts and ignores).
    Note,
    /// Probably not what was meant, or a known MirrorMaker trap.
    Warning,
}

/// What a warning is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WarningKind {
    /// A key given twice; the later line wins.
    DuplicateKey,
    /// A valid MirrorMaker key that has no effect in strait.
    IgnoredKey,
    /// `tasks.max`: meaningless to strait.
    TasksMax,
    /// `replication.factor` left at MirrorMaker's default of 2.
    ReplicationFactorDefault,
    /// Identity policy with flows both ways over overlapping topics.
    IdentityCycle,
    /// Two aliases point at the same cluster.
    SameCluster,
    /// What `offset.lag.max` does to translation precision.
    OffsetLagMax,
    /// `sync.group.offsets.enabled` is false.
    GroupOffsetSyncDisabled,
    /// A provider reference MirrorMaker would not resolve.
    ProviderNotDeclared,
    /// The file's encoding or byte order mark reads differently in MirrorMaker.
    Encoding,
    /// A value that looks like it holds an inline `#` comment.
    InlineComment,
    /// MirrorMaker decides something with a stricter parser than `ConfigDef`.
    Mm2Parsing,
    /// A top-level key whose effect is wider than it looks.
    WideEffect,
    /// Checkpoints cannot be emitted with these settings.
    CheckpointsOff,
    /// strait chose a different default than MirrorMaker.
    StraitDefault,
    /// No flow replicates anything.
    NoReplication,
    /// A flow exists only to emit heartbeats into a cluster.
    HeartbeatsOnly,
    /// What `exactly.once.source.support=enabled` changes.
    ExactlyOnce,
}

/// A warning or a note about a config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigWarning {
    /// Warning or note.
    pub severity: Severity,
    /// What it is about.
    pub kind: WarningKind,
    /// The key concerned, as written in the file (or the key to look at).
    pub key: Option<String>,
    /// 1-based line of the key, when one line is concerned.
    pub line: Option<u32>,
    /// The explanation; never contains a secret value.
    pub message: String,
}

impl ConfigWarning {
    /// A new warning.
    pub fn new(
        severity: Severity,
        kind: WarningKind,
        key: Option<&str>,
        line: Option<u32>,
        message: impl Into<String>,
    ) -> Self {
        ConfigWarning {
            severity,
            kind,
            key: key.map(str::to_string),
            line,
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        if let Some(key) = &self.key {
            write!(f, "`{key}`: ")?;
        }
        f.write_str(&self.message)
    }
}
