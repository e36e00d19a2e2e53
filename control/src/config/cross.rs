//! Rules between keys of strait's own settings, checked while the file is loaded so that
//! `strait run`, `strait check` and a reload refuse the same files.

use super::error::{ConfigError, ErrorKind};
use super::model::{FlowConfig, Origin, Setting, StraitSettings};

fn line_of<T>(s: &Setting<T>) -> Option<u32> {
    match &s.origin {
        Origin::File { line, .. } | Origin::FromKey { line, .. } => Some(*line),
        Origin::MirrorMakerDefault | Origin::StraitDefault { .. } => None,
    }
}

/// Every contradiction between `strait.*` settings, and between them and the flows.
pub(crate) fn errors(s: &StraitSettings, flows: &[FlowConfig]) -> Vec<ConfigError> {
    let mut out = Vec::new();
    // A member sends several heartbeats per session, so that one lost heartbeat does not end
    // it (Kafka's consumer documents the same rule).
    let (session, heartbeat) = (&s.group_session_timeout_ms, &s.group_heartbeat_interval_ms);
    if u64::from(heartbeat.value) * 3 > u64::from(session.value) {
        // The line of whichever of the two the file sets (the heartbeat's when both).
        let (key, line) = match line_of(heartbeat) {
            Some(l) => ("strait.group.heartbeat.interval.ms", Some(l)),
            None => ("strait.group.session.timeout.ms", line_of(session)),
        };
        out.push(ConfigError::new(
            ErrorKind::Conflict,
            Some(key),
            line,
            format!(
                "strait.group.heartbeat.interval.ms = {} must be at most a third of strait.group.session.timeout.ms = {}",
                heartbeat.value, session.value
            ),
        ));
    }
    // The group's coordinator is reached with the settings of a cluster strait talks to.
    let enabled: Vec<&FlowConfig> = flows.iter().filter(|f| f.enabled.value).collect();
    if let Some(cluster) = &s.group_cluster.value
        && !enabled.is_empty()
        && !enabled
            .iter()
            .any(|f| &f.source == cluster || &f.target == cluster)
    {
        let mut names: Vec<&str> = enabled
            .iter()
            .flat_map(|f| [f.source.as_str(), f.target.as_str()])
            .collect();
        names.sort_unstable();
        names.dedup();
        out.push(ConfigError::new(
            ErrorKind::Conflict,
            Some("strait.group.cluster"),
            line_of(&s.group_cluster),
            format!(
                "`{cluster}` is not a cluster of any enabled flow (the group needs one strait connects to: {})",
                names.join(", ")
            ),
        ));
    }
    // A transaction commits several times before the coordinator would time it out.
    for f in enabled.iter().filter(|f| f.exactly_once.value) {
        let (interval, timeout) = (
            &f.transaction_boundary_interval_ms,
            &f.clients.target_producer.transaction_timeout_ms,
        );
        if interval.value == 0 || interval.value * 4 > u64::from(timeout.value) {
            let (key, line) = match line_of(interval) {
                Some(l) => ("transaction.boundary.interval.ms", Some(l)),
                None => ("transaction.timeout.ms", line_of(timeout)),
            };
            out.push(ConfigError::new(
                ErrorKind::Conflict,
                Some(key),
                line,
                format!(
                    "flow {}: transaction.boundary.interval.ms = {} must be above 0 and at most a quarter of {}'s producer transaction.timeout.ms = {}",
                    f.name(),
                    interval.value,
                    f.target,
                    timeout.value
                ),
            ));
        }
    }
    // Passwords without the store they open would be silently unused.
    if s.api_keystore_location.value.is_none() {
        for (key, setting) in [
            ("strait.api.ssl.keystore.password", &s.api_keystore_password),
            ("strait.api.ssl.key.password", &s.api_key_password),
        ] {
            if setting.value.is_some() {
                out.push(ConfigError::new(
                    ErrorKind::Conflict,
                    Some(key),
                    line_of(setting),
                    "is set but strait.api.ssl.keystore.location is not",
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::{ConfigError, ErrorKind, StaticEnv, load_with};

    const HEAD: &str = "clusters = A, B, C\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nC.bootstrap.servers = c:9092\nA->B.enabled = true\n";

    fn errors(extra: &str) -> Vec<ConfigError> {
        let env = StaticEnv::new().file("/m.properties", format!("{HEAD}{extra}"));
        match load_with(Path::new("/m.properties"), &env) {
            Ok(_) => Vec::new(),
            Err(e) => e.0,
        }
    }

    fn keys(errs: &[ConfigError]) -> Vec<(Option<&str>, Option<u32>)> {
        errs.iter()
            .filter(|e| e.kind == ErrorKind::Conflict)
            .map(|e| (e.key.as_deref(), e.line))
            .collect()
    }

    #[test]
    fn the_heartbeat_is_at_most_a_third_of_the_session() {
        assert!(errors("strait.group.heartbeat.interval.ms = 2000\n").is_empty());
        // 3001 * 3 > 9000, and 4000 * 3 > default session of 10 000.
        let e = errors(
            "strait.group.session.timeout.ms = 9000\nstrait.group.heartbeat.interval.ms = 3001\n",
        );
        assert_eq!(
            keys(&e),
            vec![(Some("strait.group.heartbeat.interval.ms"), Some(7))]
        );
        assert!(
            e[0].to_string()
                .contains("at most a third of strait.group.session.timeout.ms = 9000"),
            "{}",
            e[0]
        );
        assert_eq!(
            keys(&errors("strait.group.heartbeat.interval.ms = 4000\n")),
            vec![(Some("strait.group.heartbeat.interval.ms"), Some(6))]
        );
        // Only the session in the file: its line.
        assert_eq!(
            keys(&errors("strait.group.session.timeout.ms = 8000\n")),
            vec![(Some("strait.group.session.timeout.ms"), Some(6))]
        );
    }

    #[test]
    fn a_transaction_commits_several_times_within_its_timeout() {
        const EOS: &str = "B.exactly.once.source.support = enabled\n";
        assert!(errors(EOS).is_empty());
        assert!(errors(&format!("{EOS}B.producer.transaction.timeout.ms = 4000\n")).is_empty());
        // 1000 ms * 4 > 3999.
        let e = errors(&format!("{EOS}B.producer.transaction.timeout.ms = 3999\n"));
        assert_eq!(keys(&e), vec![(Some("transaction.timeout.ms"), Some(7))]);
        assert!(e[0].to_string().contains("flow A->B"), "{}", e[0]);
        let e = errors(&format!(
            "{EOS}A->B.transaction.boundary.interval.ms = 20000\n"
        ));
        assert_eq!(
            keys(&e),
            vec![(Some("transaction.boundary.interval.ms"), Some(7))]
        );
        assert_eq!(
            keys(&errors(&format!(
                "{EOS}A->B.transaction.boundary.interval.ms = 0\n"
            ))),
            vec![(Some("transaction.boundary.interval.ms"), Some(7))]
        );
        // Without exactly-once neither is read.
        assert!(errors("A->B.transaction.boundary.interval.ms = 0\n").is_empty());
    }

    #[test]
    fn the_group_cluster_is_a_cluster_of_an_enabled_flow() {
        assert!(errors("strait.group.cluster = A\n").is_empty());
        assert!(errors("strait.group.cluster = B\n").is_empty());
        // C is declared but no enabled flow uses it.
        let e = errors("strait.group.cluster = C\n");
        assert_eq!(keys(&e), vec![(Some("strait.group.cluster"), Some(6))]);
        assert!(e[0].to_string().contains("A, B"), "{}", e[0]);
        assert!(errors("strait.group.cluster = C\nC->B.enabled = true\n").is_empty());
    }

    #[test]
    fn api_passwords_need_the_key_store() {
        let e = errors("strait.api.ssl.keystore.password = x\n");
        assert_eq!(
            keys(&e),
            vec![(Some("strait.api.ssl.keystore.password"), Some(6))]
        );
        assert!(!e[0].to_string().contains("= x"), "{}", e[0]);
        assert!(
            errors(
                "strait.api.ssl.keystore.location = /ks.p12\nstrait.api.ssl.keystore.password = x\n"
            )
            .is_empty()
        );
    }
}
