//! What every member of a group must share: a digest of the configuration file's entries,
//! key by key, without the process-local ones (the API, shards, I/O driver, memory, metrics
//! and the member's own group timings). Values are digested as written (before `${env:...}`
//! and `${file:...}` are resolved), so a secret read from a per-host file may differ between
//! hosts while the reference to it is the same. Two files that say the same thing in different
//! words (a flow key against a top-level key) differ: the group refuses rather than guesses.
//!
//! The digest is FNV-1a (64 bit): stable across processes and versions, not a secret.

use std::collections::BTreeMap;

use super::codec::MemberMetadata;
use crate::config::properties::Properties;

/// Keys that may differ between the members of one group: they shape one process, not what
/// the group replicates.
pub const PROCESS_LOCAL_PREFIXES: &[&str] = &[
    "strait.api.",
    "strait.shards",
    "strait.io",
    "strait.memory.bytes",
    "strait.metrics.",
    "strait.group.instance.id",
    "strait.group.session.timeout.ms",
    "strait.group.heartbeat.interval.ms",
    "strait.group.rebalance.timeout.ms",
];

/// Whether `key` may differ between members.
pub fn is_process_local(key: &str) -> bool {
    PROCESS_LOCAL_PREFIXES
        .iter()
        .any(|p| key == *p || (p.ends_with('.') && key.starts_with(p)))
}

/// FNV-1a over `bytes`, continuing from `h`.
fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// The per-key digests of a file (sorted by key) and their overall digest.
pub fn of_properties(props: &Properties) -> (u64, Vec<(String, u64)>) {
    let keys: BTreeMap<&str, &str> = props
        .entries
        .iter()
        .filter(|e| !is_process_local(&e.key))
        .map(|e| (e.key.as_str(), e.value.trim()))
        .collect();
    let mut all = FNV_OFFSET;
    let mut out = Vec::with_capacity(keys.len());
    for (k, v) in keys {
        let d = fnv(fnv(fnv(FNV_OFFSET, k.as_bytes()), b"="), v.as_bytes());
        all = fnv(all, &d.to_be_bytes());
        out.push((k.to_string(), d));
    }
    (all, out)
}

/// Why `member` may not join a group led by `leader`: the keys whose values differ or that
/// only one of them sets. `None` when the digests agree.
pub fn refusal(leader: &MemberMetadata, member: &MemberMetadata) -> Option<String> {
    if leader.digest == member.digest {
        return None;
    }
    let l: BTreeMap<&str, u64> = leader.keys.iter().map(|(k, d)| (k.as_str(), *d)).collect();
    let m: BTreeMap<&str, u64> = member.keys.iter().map(|(k, d)| (k.as_str(), *d)).collect();
    let mut differ: Vec<String> = Vec::new();
    for (k, d) in &m {
        match l.get(k) {
            Some(ld) if ld == d => {}
            Some(_) => differ.push(format!("{k} (different value)")),
            None => differ.push(format!("{k} (set only on this member)")),
        }
    }
    for k in l.keys().filter(|k| !m.contains_key(*k)) {
        differ.push(format!("{k} (set only on the leader)"));
    }
    if differ.is_empty() {
        differ.push("(the digests differ but no key does: a different strait version?)".into());
    }
    Some(format!(
        "this member's configuration differs from the group leader's; every member of a group \
         must replicate the same flows. Differing keys: {}",
        differ.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::properties::parse_str;

    fn meta(text: &str) -> MemberMetadata {
        let (digest, keys) = of_properties(&parse_str(text));
        MemberMetadata {
            digest,
            keys,
            ..MemberMetadata::default()
        }
    }

    #[test]
    fn process_local_keys_may_differ_and_flow_keys_may_not() {
        let a = meta(
            "clusters=A,B\nA->B.enabled=true\ntopics=t.*\nstrait.api.listen=127.0.0.1:1\nstrait.shards=2\n",
        );
        let b =
            meta("clusters=A,B\nA->B.enabled=true\ntopics=t.*\nstrait.api.listen=127.0.0.1:2\n");
        assert_eq!(refusal(&a, &b), None);
        let c = meta(
            "clusters=A,B\nA->B.enabled=true\ntopics=other\nrefresh.topics.interval.seconds=5\n",
        );
        let why = refusal(&a, &c).unwrap();
        assert!(why.contains("topics (different value)"), "{why}");
        assert!(
            why.contains("refresh.topics.interval.seconds (set only on this member)"),
            "{why}"
        );
        assert!(!why.contains("strait.api"), "{why}");
    }

    #[test]
    fn the_digest_ignores_order_and_surrounding_spaces() {
        let a = meta("a=1\nb=2\n");
        let b = meta("b = 2 \na=1\n");
        assert_eq!(a.digest, b.digest);
        assert_ne!(a.digest, meta("a=1\nb=3\n").digest);
    }
}
