//! ApiVersions negotiation: for each API, the highest version that the broker, our encoder and
//! our own handling all support.

use std::collections::HashMap;

use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};
use kafka_protocol::protocol::{Message, Request, VersionRange};

/// Upper bounds we impose on top of what the `kafka-protocol` encoder supports, and why.
///
/// - Produce v13 and Fetch v13+ address topics by UUID only; the encoder silently writes a nil
///   topic id when only a name is set, so we stay on the name-addressed versions.
/// - OffsetFetch v8+ batches several groups per request and OffsetCommit v9+ needs the new
///   consumer protocol's member epochs; our admin client speaks the single-group forms.
/// - Metadata v13 adds nothing we use.
/// - AddPartitionsToTxn v4+ is the brokers' batched form (`control/src/cluster/txn.rs`).
const CAPS: &[(ApiKey, i16)] = &[
    (ApiKey::Produce, 12),
    (ApiKey::Fetch, 12),
    (ApiKey::OffsetFetch, 7),
    (ApiKey::OffsetCommit, 8),
    (ApiKey::Metadata, 12),
    (ApiKey::AddPartitionsToTxn, 3),
];

/// Our own version range for a request type: the encoder's range, capped.
pub fn client_range<R: Request>() -> VersionRange {
    let mut range = <R as Message>::VERSIONS;
    if let Some(&(_, cap)) = CAPS.iter().find(|(k, _)| *k as i16 == R::KEY) {
        range.max = range.max.min(cap);
    }
    range
}

/// The broker's advertised ranges, keyed by API key.
#[derive(Debug, Clone, Default)]
pub struct ApiVersions {
    ranges: HashMap<i16, VersionRange>,
}

impl ApiVersions {
    pub fn from_response(resp: &ApiVersionsResponse) -> Self {
        let ranges = resp
            .api_keys
            .iter()
            .map(|k| {
                (
                    k.api_key,
                    VersionRange {
                        min: k.min_version,
                        max: k.max_version,
                    },
                )
            })
            .collect();
        ApiVersions { ranges }
    }

    /// What the broker advertised for `key`, if anything.
    pub fn broker_range(&self, key: i16) -> Option<VersionRange> {
        self.ranges.get(&key).copied()
    }

    /// The version to use for `R`: the highest one both sides support. `Err` carries both ranges
    /// for the error message.
    pub fn negotiate<R: Request>(&self) -> Result<i16, VersionMismatch> {
        let ours = client_range::<R>();
        let theirs = self.broker_range(R::KEY);
        match theirs {
            Some(t) => {
                let both = ours.intersect(&t);
                if both.is_empty() {
                    Err(VersionMismatch {
                        api_key: R::KEY,
                        ours,
                        theirs,
                    })
                } else {
                    Ok(both.max)
                }
            }
            None => Err(VersionMismatch {
                api_key: R::KEY,
                ours,
                theirs: None,
            }),
        }
    }
}

/// No version of an API is supported by both sides.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionMismatch {
    pub api_key: i16,
    pub ours: VersionRange,
    pub theirs: Option<VersionRange>,
}

/// A readable API name for messages ("Produce", "Fetch", ...).
pub fn api_name(key: i16) -> &'static str {
    match ApiKey::try_from(key) {
        Ok(k) => api_key_name(k),
        Err(_) => "UnknownApi",
    }
}

fn api_key_name(k: ApiKey) -> &'static str {
    use ApiKey::*;
    match k {
        Produce => "Produce",
        Fetch => "Fetch",
        ListOffsets => "ListOffsets",
        Metadata => "Metadata",
        OffsetCommit => "OffsetCommit",
        OffsetFetch => "OffsetFetch",
        FindCoordinator => "FindCoordinator",
        JoinGroup => "JoinGroup",
        Heartbeat => "Heartbeat",
        LeaveGroup => "LeaveGroup",
        SyncGroup => "SyncGroup",
        DescribeGroups => "DescribeGroups",
        ListGroups => "ListGroups",
        SaslHandshake => "SaslHandshake",
        ApiVersions => "ApiVersions",
        CreateTopics => "CreateTopics",
        DeleteTopics => "DeleteTopics",
        DeleteRecords => "DeleteRecords",
        InitProducerId => "InitProducerId",
        AddPartitionsToTxn => "AddPartitionsToTxn",
        EndTxn => "EndTxn",
        DescribeTransactions => "DescribeTransactions",
        DescribeAcls => "DescribeAcls",
        CreateAcls => "CreateAcls",
        DescribeConfigs => "DescribeConfigs",
        AlterConfigs => "AlterConfigs",
        SaslAuthenticate => "SaslAuthenticate",
        CreatePartitions => "CreatePartitions",
        DeleteGroups => "DeleteGroups",
        IncrementalAlterConfigs => "IncrementalAlterConfigs",
        OffsetDelete => "OffsetDelete",
        ConsumerGroupDescribe => "ConsumerGroupDescribe",
        _ => "OtherApi",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::api_versions_response::ApiVersion;
    use kafka_protocol::messages::{FetchRequest, ProduceRequest};

    fn resp(entries: &[(ApiKey, i16, i16)]) -> ApiVersionsResponse {
        let mut r = ApiVersionsResponse::default();
        r.api_keys = entries
            .iter()
            .map(|&(k, min, max)| {
                ApiVersion::default()
                    .with_api_key(k as i16)
                    .with_min_version(min)
                    .with_max_version(max)
            })
            .collect();
        r
    }

    #[test]
    fn picks_highest_common_version_under_our_caps() {
        let v =
            ApiVersions::from_response(&resp(&[(ApiKey::Produce, 3, 13), (ApiKey::Fetch, 4, 17)]));
        assert_eq!(v.negotiate::<ProduceRequest>(), Ok(12));
        assert_eq!(v.negotiate::<FetchRequest>(), Ok(12));

        let old = ApiVersions::from_response(&resp(&[(ApiKey::Produce, 3, 8)]));
        assert_eq!(old.negotiate::<ProduceRequest>(), Ok(8));
    }

    #[test]
    fn disjoint_or_missing_ranges_are_errors() {
        let v = ApiVersions::from_response(&resp(&[(ApiKey::Produce, 0, 2)]));
        let err = v.negotiate::<ProduceRequest>().unwrap_err();
        assert_eq!(err.api_key, ApiKey::Produce as i16);
        assert!(err.theirs.is_some());
        assert!(v.negotiate::<FetchRequest>().unwrap_err().theirs.is_none());
    }

    #[test]
    fn names() {
        assert_eq!(api_name(0), "Produce");
        assert_eq!(api_name(36), "SaslAuthenticate");
        assert_eq!(api_name(-7), "UnknownApi");
    }
}
