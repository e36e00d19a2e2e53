//! Config value providers: `${provider:path:key}` references, as Kafka's `ConfigTransformer`
//! resolves them, with the `FileConfigProvider`, `EnvVarConfigProvider` and
//! `DirectoryConfigProvider` classes.
//!
//! - `${env:NAME}`: an environment variable.
//! - `${file:PATH:KEY}`: key `KEY` of the properties file `PATH`.
//! - `${file:PATH}`: the whole file, trailing line ends removed (a strait extension; Kafka's
//!   file provider would leave such a reference unresolved).
//! - `${dir:DIR:NAME}`: the content of file `NAME` in directory `DIR`.
//!
//! Providers are declared as in MM2 (`config.providers=file`,
//! `config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider`,
//! `config.providers.file.param.allowed.paths=/etc/secrets`). `env` and `file` work without a
//! declaration (MM2 would leave the reference as it is; the caller warns). A reference that
//! cannot be resolved is an error; Kafka would silently keep the literal text.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use super::ConfigEnv;
use crate::mm2::filter::{JavaRegex, java_list};

/// `FileConfigProvider`.
pub const FILE_PROVIDER_CLASS: &str = "org.apache.kafka.common.config.provider.FileConfigProvider";
/// `EnvVarConfigProvider`.
pub const ENV_PROVIDER_CLASS: &str = "org.apache.kafka.common.config.provider.EnvVarConfigProvider";
/// `DirectoryConfigProvider`.
pub const DIRECTORY_PROVIDER_CLASS: &str =
    "org.apache.kafka.common.config.provider.DirectoryConfigProvider";

/// The largest file a provider reads.
pub const MAX_PROVIDER_FILE_BYTES: u64 = 1 << 20;
/// The most references one value may hold.
pub const MAX_REFERENCES_PER_VALUE: usize = 64;

/// What kind of provider a name stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    /// `FileConfigProvider`: keys of a properties file (and, in strait, whole files).
    File,
    /// `EnvVarConfigProvider`: environment variables.
    EnvVar,
    /// `DirectoryConfigProvider`: files of a directory.
    Directory,
}

impl ProviderKind {
    fn from_class(class: &str) -> Option<ProviderKind> {
        match class {
            FILE_PROVIDER_CLASS => Some(ProviderKind::File),
            ENV_PROVIDER_CLASS => Some(ProviderKind::EnvVar),
            DIRECTORY_PROVIDER_CLASS => Some(ProviderKind::Directory),
            _ => None,
        }
    }

    fn params(self) -> &'static [&'static str] {
        match self {
            ProviderKind::File | ProviderKind::Directory => &["allowed.paths"],
            ProviderKind::EnvVar => &["allowlist.pattern"],
        }
    }
}

/// A declared (or built-in) provider.
#[derive(Debug, Clone)]
pub struct Provider {
    /// The name used in references (`${name:...}`).
    pub name: String,
    /// What it reads.
    pub kind: ProviderKind,
    /// Declared through `config.providers` (false for the built-in `env` and `file`).
    pub declared: bool,
    /// `allowed.paths`: absolute directories the file providers may read under.
    pub allowed_paths: Option<Vec<PathBuf>>,
    /// `allowlist.pattern`: environment variable names the env provider may read.
    pub allowlist: Option<JavaRegex>,
}

/// A problem with a declaration or a reference. Never contains a resolved value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    #[error(
        "unknown config provider `{name}`; declare it with config.providers={name} and config.providers.{name}.class"
    )]
    UnknownProvider { name: String },
    #[error("environment variable `{name}` is not set")]
    MissingEnv { name: String },
    #[error(
        "environment variable `{name}` is not allowed by config.providers.{provider}.param.allowlist.pattern"
    )]
    EnvNotAllowed { name: String, provider: String },
    #[error("the env provider takes no path (`${{{provider}:NAME}}`)")]
    EnvPath { provider: String },
    #[error("cannot read `{path}`: {reason}")]
    Read { path: String, reason: String },
    #[error("`{path}` has no key `{key}`")]
    MissingKey { path: String, key: String },
    #[error("`{path}` is outside config.providers.{provider}.param.allowed.paths")]
    NotAllowed { path: String, provider: String },
    #[error("a value may hold at most {MAX_REFERENCES_PER_VALUE} provider references")]
    TooManyReferences,
    #[error("config provider `{name}` has no class (config.providers.{name}.class)")]
    MissingClass { name: String },
    #[error(
        "config provider class `{class}` is not supported; use {FILE_PROVIDER_CLASS}, {ENV_PROVIDER_CLASS} or {DIRECTORY_PROVIDER_CLASS}"
    )]
    UnsupportedClass { class: String },
    #[error("unknown parameter `{param}` for config provider `{name}` (accepted: {accepted})")]
    UnknownParam {
        name: String,
        param: String,
        accepted: String,
    },
    #[error("`{name}` is not listed in config.providers")]
    NotListed { name: String },
    #[error("allowed.paths entry `{path}` is not absolute")]
    RelativeAllowedPath { path: String },
    #[error("invalid allowlist.pattern: {reason}")]
    BadAllowlist { reason: String },
}

/// A problem found while reading the declarations, tied to the key that has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclarationError {
    /// The `config.providers*` key.
    pub key: String,
    /// The problem.
    pub error: ProviderError,
}

/// The providers of a config file.
#[derive(Debug, Clone, Default)]
pub struct Providers {
    by_name: BTreeMap<String, Provider>,
}

impl Providers {
    /// Reads `config.providers` and its `config.providers.<name>.*` keys from the top-level
    /// entries. Returns the providers and every problem found.
    pub fn from_entries<'a>(
        entries: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> (Providers, Vec<DeclarationError>) {
        let mut errors = Vec::new();
        let d = Declarations::read(entries, &mut errors);
        d.unlisted(&mut errors);
        let mut by_name = BTreeMap::new();
        for name in &d.listed {
            let Some(class) = d.classes.get(name) else {
                errors.push(DeclarationError {
                    key: "config.providers".to_string(),
                    error: ProviderError::MissingClass { name: name.clone() },
                });
                continue;
            };
            let Some(kind) = ProviderKind::from_class(&class.class) else {
                errors.push(DeclarationError {
                    key: class.key.clone(),
                    error: ProviderError::UnsupportedClass {
                        class: class.class.clone(),
                    },
                });
                continue;
            };
            let mut provider = Provider {
                name: name.clone(),
                kind,
                declared: true,
                allowed_paths: None,
                allowlist: None,
            };
            for param in d.params.get(name).map(Vec::as_slice).unwrap_or(&[]) {
                provider.set_param(param, &mut errors);
            }
            by_name.insert(name.clone(), provider);
        }
        (Providers { by_name }, errors)
    }

    /// The provider a reference names: a declared one, or the built-in `env` and `file`.
    pub fn get(&self, name: &str) -> Option<Provider> {
        if let Some(p) = self.by_name.get(name) {
            return Some(p.clone());
        }
        let kind = match name {
            "env" => ProviderKind::EnvVar,
            "file" => ProviderKind::File,
            _ => return None,
        };
        Some(Provider {
            name: name.to_string(),
            kind,
            declared: false,
            allowed_paths: None,
            allowlist: None,
        })
    }
}

/// `config.providers.<name>.class`.
#[derive(Debug)]
struct ClassDecl {
    key: String,
    class: String,
}

/// `config.providers.<name>.param.<param>`.
#[derive(Debug)]
struct ParamDecl {
    key: String,
    param: String,
    value: String,
}

/// The `config.providers*` keys of a file, by provider name.
#[derive(Debug, Default)]
struct Declarations {
    listed: Vec<String>,
    classes: BTreeMap<String, ClassDecl>,
    params: BTreeMap<String, Vec<ParamDecl>>,
}

impl Declarations {
    fn read<'a>(
        entries: impl IntoIterator<Item = (&'a str, &'a str)>,
        errors: &mut Vec<DeclarationError>,
    ) -> Declarations {
        let mut d = Declarations::default();
        for (key, value) in entries {
            if key == "config.providers" {
                d.listed = java_list(value)
                    .into_iter()
                    .filter(|s| !s.is_empty())
                    .collect();
            } else if let Some(rest) = key.strip_prefix("config.providers.") {
                if let Some(name) = rest.strip_suffix(".class") {
                    let class = ClassDecl {
                        key: key.to_string(),
                        class: value.trim().to_string(),
                    };
                    d.classes.insert(name.to_string(), class);
                } else if let Some((name, param)) = rest.split_once(".param.") {
                    d.params
                        .entry(name.to_string())
                        .or_default()
                        .push(ParamDecl {
                            key: key.to_string(),
                            param: param.to_string(),
                            value: value.to_string(),
                        });
                } else {
                    errors.push(DeclarationError {
                        key: key.to_string(),
                        error: ProviderError::UnknownParam {
                            name: rest.split('.').next().unwrap_or(rest).to_string(),
                            param: rest.to_string(),
                            accepted: "class, param.<name>".to_string(),
                        },
                    });
                }
            }
        }
        d
    }

    /// Classes and parameters of providers `config.providers` does not list.
    fn unlisted(&self, errors: &mut Vec<DeclarationError>) {
        let keys = self.classes.iter().map(|(name, c)| (name, &c.key)).chain(
            self.params
                .iter()
                .flat_map(|(name, ps)| ps.iter().map(move |p| (name, &p.key))),
        );
        for (name, key) in keys {
            if !self.listed.contains(name) {
                errors.push(DeclarationError {
                    key: key.clone(),
                    error: ProviderError::NotListed { name: name.clone() },
                });
            }
        }
    }
}

impl Provider {
    /// Applies one declared parameter (`allowed.paths` of file and directory providers,
    /// `allowlist.pattern` of the environment provider).
    fn set_param(&mut self, p: &ParamDecl, errors: &mut Vec<DeclarationError>) {
        let error = |error| DeclarationError {
            key: p.key.clone(),
            error,
        };
        match (self.kind, p.param.as_str()) {
            (ProviderKind::File | ProviderKind::Directory, "allowed.paths") => {
                let mut paths = Vec::new();
                for path in java_list(&p.value).into_iter().filter(|p| !p.is_empty()) {
                    let pb = PathBuf::from(&path);
                    if !pb.is_absolute() {
                        errors.push(error(ProviderError::RelativeAllowedPath { path }));
                        continue;
                    }
                    paths.push(normalize(&pb));
                }
                self.allowed_paths = Some(paths);
            }
            (ProviderKind::EnvVar, "allowlist.pattern") => match JavaRegex::full_match(&p.value) {
                Ok(re) => self.allowlist = Some(re),
                Err(reason) => errors.push(error(ProviderError::BadAllowlist {
                    reason: reason.to_string(),
                })),
            },
            _ => errors.push(error(ProviderError::UnknownParam {
                name: self.name.clone(),
                param: p.param.clone(),
                accepted: self.kind.params().join(", "),
            })),
        }
    }
}

/// One `${provider:path:variable}` reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The provider name.
    pub provider: String,
    /// Empty when the reference has two parts.
    pub path: String,
    /// The key, variable or file name.
    pub variable: String,
    /// The reference as written.
    pub text: String,
}

/// Finds the references in a value, as `ConfigTransformer.DEFAULT_PATTERN`
/// (`\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}`) does. Returns (start, end, reference) spans.
pub fn find_references(value: &str) -> Vec<(usize, usize, Reference)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(rel) = value[from..].find("${") {
        let start = from + rel;
        let Some(close_rel) = value[start + 2..].find('}') else {
            break;
        };
        let close = start + 2 + close_rel;
        let content = &value[start + 2..close];
        match content.split_once(':') {
            Some((provider, rest)) => {
                let (path, variable) = match rest.split_once(':') {
                    Some((p, v)) => (p, v),
                    None => ("", rest),
                };
                out.push((
                    start,
                    close + 1,
                    Reference {
                        provider: provider.to_string(),
                        path: path.to_string(),
                        variable: variable.to_string(),
                        text: value[start..=close].to_string(),
                    },
                ));
                from = close + 1;
            }
            // No colon: not a reference at this `${`; look further on.
            None => from = start + 1,
        }
    }
    out
}

/// A value after resolution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expanded {
    /// The value with every reference replaced.
    pub value: String,
    /// The references that were replaced.
    pub references: Vec<Reference>,
}

/// Replaces every reference in `value`.
pub fn expand(
    value: &str,
    providers: &Providers,
    env: &dyn ConfigEnv,
) -> Result<Expanded, ProviderError> {
    let refs = find_references(value);
    if refs.is_empty() {
        return Ok(Expanded {
            value: value.to_string(),
            references: Vec::new(),
        });
    }
    if refs.len() > MAX_REFERENCES_PER_VALUE {
        return Err(ProviderError::TooManyReferences);
    }
    let mut out = String::with_capacity(value.len());
    let mut last = 0;
    let mut references = Vec::with_capacity(refs.len());
    for (start, end, r) in refs {
        out.push_str(&value[last..start]);
        out.push_str(&resolve_one(&r, providers, env)?);
        last = end;
        references.push(r);
    }
    out.push_str(&value[last..]);
    Ok(Expanded {
        value: out,
        references,
    })
}

fn resolve_one(
    r: &Reference,
    providers: &Providers,
    env: &dyn ConfigEnv,
) -> Result<String, ProviderError> {
    let provider = providers
        .get(&r.provider)
        .ok_or_else(|| ProviderError::UnknownProvider {
            name: r.provider.clone(),
        })?;
    match provider.kind {
        ProviderKind::EnvVar => {
            if !r.path.is_empty() {
                return Err(ProviderError::EnvPath {
                    provider: provider.name,
                });
            }
            if let Some(allow) = &provider.allowlist
                && allow.matches(&r.variable) != Some(true)
            {
                return Err(ProviderError::EnvNotAllowed {
                    name: r.variable.clone(),
                    provider: provider.name,
                });
            }
            env.env_var(&r.variable)
                .ok_or_else(|| ProviderError::MissingEnv {
                    name: r.variable.clone(),
                })
        }
        ProviderKind::File => {
            if r.path.is_empty() {
                // `${file:PATH}`: the whole file.
                let path = checked_path(&provider, &r.variable)?;
                let text = read_text(env, &path)?;
                Ok(text.trim_end_matches(['\n', '\r']).to_string())
            } else {
                let path = checked_path(&provider, &r.path)?;
                let text = read_text(env, &path)?;
                let props = super::properties::parse_str(&text);
                if let Some(e) = props.errors.first() {
                    return Err(ProviderError::Read {
                        path: r.path.clone(),
                        reason: e.to_string(),
                    });
                }
                props.get(&r.variable).map(str::to_string).ok_or_else(|| {
                    ProviderError::MissingKey {
                        path: r.path.clone(),
                        key: r.variable.clone(),
                    }
                })
            }
        }
        ProviderKind::Directory => {
            let dir = checked_path(&provider, &r.path)?;
            if r.variable.is_empty() || r.variable.contains(['/', '\\']) || r.variable == ".." {
                return Err(ProviderError::MissingKey {
                    path: r.path.clone(),
                    key: r.variable.clone(),
                });
            }
            read_text(env, &dir.join(&r.variable))
        }
    }
}

/// Applies `allowed.paths` the way Kafka's `AllowedPaths.parseUntrustedPath` does: the
/// lexically normalised path must start with an allowed directory.
fn checked_path(provider: &Provider, path: &str) -> Result<PathBuf, ProviderError> {
    let p = PathBuf::from(path);
    match &provider.allowed_paths {
        None => Ok(p),
        Some(allowed) => {
            let norm = normalize(&p);
            if allowed.iter().any(|a| norm.starts_with(a)) {
                Ok(norm)
            } else {
                Err(ProviderError::NotAllowed {
                    path: path.to_string(),
                    provider: provider.name.clone(),
                })
            }
        }
    }
}

/// `Path.normalize()`: drops `.` and folds `..` without touching the file system.
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if out.file_name().is_some() {
                    out.pop();
                } else if !out.has_root() {
                    // A relative path keeps leading `..`; the root has no parent.
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

fn read_text(env: &dyn ConfigEnv, path: &Path) -> Result<String, ProviderError> {
    let bytes = env
        .read_file(path, MAX_PROVIDER_FILE_BYTES)
        .map_err(|e| ProviderError::Read {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
    String::from_utf8(bytes).map_err(|_| ProviderError::Read {
        path: path.display().to_string(),
        reason: "not valid UTF-8".to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::StaticEnv as FakeEnv;

    fn providers(entries: &[(&str, &str)]) -> (Providers, Vec<DeclarationError>) {
        Providers::from_entries(entries.iter().copied())
    }

    #[test]
    fn reference_syntax_like_config_transformer() {
        let refs =
            find_references("a ${env:HOME} b ${file:/x/y:k} ${nocolon} ${file:/a:b:c} $env:X");
        let got: Vec<(String, String, String)> = refs
            .into_iter()
            .map(|(_, _, r)| (r.provider, r.path, r.variable))
            .collect();
        assert_eq!(
            got,
            vec![
                ("env".into(), "".into(), "HOME".into()),
                ("file".into(), "/x/y".into(), "k".into()),
                ("file".into(), "/a".into(), "b:c".into()),
            ]
        );
        assert!(find_references("${unclosed:x").is_empty());
        assert_eq!(find_references("${a${b:c}").len(), 1);
    }

    #[test]
    fn builtin_env_and_file() {
        let env = FakeEnv::new()
            .var("PASS", "s3cret")
            .file("/etc/strait/pw.txt", "from-file\n\n")
            .file(
                "/etc/strait/creds.properties",
                "user = alice\npassword=p\\=w\n",
            );
        let (p, errs) = providers(&[]);
        assert!(errs.is_empty());
        let e = expand("x-${env:PASS}-y", &p, &env).expect("resolves");
        assert_eq!(e.value, "x-s3cret-y");
        assert_eq!(e.references.len(), 1);
        assert_eq!(
            expand("${file:/etc/strait/pw.txt}", &p, &env)
                .expect("resolves")
                .value,
            "from-file"
        );
        assert_eq!(
            expand("${file:/etc/strait/creds.properties:password}", &p, &env)
                .expect("resolves")
                .value,
            "p=w"
        );
        assert_eq!(
            expand("${env:NOPE}", &p, &env),
            Err(ProviderError::MissingEnv {
                name: "NOPE".into()
            })
        );
        assert!(matches!(
            expand("${file:/etc/strait/creds.properties:nokey}", &p, &env),
            Err(ProviderError::MissingKey { .. })
        ));
        assert!(matches!(
            expand("${file:/missing}", &p, &env),
            Err(ProviderError::Read { .. })
        ));
        assert!(matches!(
            expand("${vault:a:b}", &p, &env),
            Err(ProviderError::UnknownProvider { .. })
        ));
        // Text without references is untouched, including lone `${`.
        assert_eq!(expand("a${b}c", &p, &env).expect("no refs").value, "a${b}c");
    }

    #[test]
    fn declared_providers_and_params() {
        let env = FakeEnv::new()
            .var("KAFKA_PW", "pw")
            .var("OTHER", "no")
            .file("/secrets/a.properties", "k=v")
            .file("/elsewhere/a.properties", "k=v")
            .file("/secrets/dir/token", "tok\n");
        let (p, errs) = providers(&[
            ("config.providers", "secrets, vars, dir"),
            ("config.providers.secrets.class", FILE_PROVIDER_CLASS),
            ("config.providers.secrets.param.allowed.paths", "/secrets"),
            ("config.providers.vars.class", ENV_PROVIDER_CLASS),
            ("config.providers.vars.param.allowlist.pattern", "KAFKA_.*"),
            ("config.providers.dir.class", DIRECTORY_PROVIDER_CLASS),
        ]);
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(
            expand("${secrets:/secrets/a.properties:k}", &p, &env)
                .expect("ok")
                .value,
            "v"
        );
        assert!(matches!(
            expand("${secrets:/secrets/../elsewhere/a.properties:k}", &p, &env),
            Err(ProviderError::NotAllowed { .. })
        ));
        assert_eq!(
            expand("${vars:KAFKA_PW}", &p, &env).expect("ok").value,
            "pw"
        );
        assert!(matches!(
            expand("${vars:OTHER}", &p, &env),
            Err(ProviderError::EnvNotAllowed { .. })
        ));
        assert!(matches!(
            expand("${vars:/p:KAFKA_PW}", &p, &env),
            Err(ProviderError::EnvPath { .. })
        ));
        // The directory provider does not trim.
        assert_eq!(
            expand("${dir:/secrets/dir:token}", &p, &env)
                .expect("ok")
                .value,
            "tok\n"
        );
        assert!(expand("${dir:/secrets/dir:../a.properties}", &p, &env).is_err());
    }

    #[test]
    fn declaration_errors() {
        let (_, errs) = providers(&[
            ("config.providers", "a, b, c"),
            (
                "config.providers.a.class",
                "com.example.VaultConfigProvider",
            ),
            ("config.providers.c.class", FILE_PROVIDER_CLASS),
            ("config.providers.c.param.allowed.paths", "relative/dir"),
            ("config.providers.c.param.colour", "blue"),
            ("config.providers.d.class", ENV_PROVIDER_CLASS),
        ]);
        let got: Vec<(&str, String)> = errs
            .iter()
            .map(|e| (e.key.as_str(), e.error.to_string()))
            .collect();
        assert!(
            got.iter()
                .any(|(k, m)| *k == "config.providers.a.class" && m.contains("not supported")),
            "{got:?}"
        );
        assert!(
            got.iter()
                .any(|(k, m)| *k == "config.providers" && m.contains("`b` has no class")),
            "{got:?}"
        );
        assert!(
            got.iter()
                .any(|(k, _)| *k == "config.providers.c.param.allowed.paths"),
            "{got:?}"
        );
        assert!(
            got.iter().any(
                |(k, m)| *k == "config.providers.c.param.colour" && m.contains("allowed.paths")
            ),
            "{got:?}"
        );
        assert!(
            got.iter()
                .any(|(k, m)| *k == "config.providers.d.class" && m.contains("not listed")),
            "{got:?}"
        );
    }

    #[test]
    fn normalize_is_lexical() {
        assert_eq!(normalize(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(normalize(Path::new("/a/../../c")), PathBuf::from("/c"));
    }
}
