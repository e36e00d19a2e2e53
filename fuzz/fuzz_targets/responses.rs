//! Decodes arbitrary bytes as the broker responses strait reads, at every version we may
//! negotiate: whatever a broker (or anything on its address) sends must give a value or an
//! error, never a panic or an allocation the bytes do not justify (the vendored kafka-protocol
//! bounds those; see vendor/README.md).
#![no_main]

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiVersionsRequest, CreateTopicsRequest, DescribeConfigsRequest, DescribeGroupsRequest,
    FetchRequest, FindCoordinatorRequest, InitProducerIdRequest, ListGroupsRequest,
    ListOffsetsRequest, MetadataRequest, OffsetCommitRequest, OffsetFetchRequest, ProduceRequest,
    SaslAuthenticateRequest, SaslHandshakeRequest,
};
use kafka_protocol::protocol::Request;
use libfuzzer_sys::fuzz_target;
use strait_dataplane::wire::Response;

fn decode<R: Request>(version: i16, body: &[u8]) {
    let r = Response {
        correlation_id: 1,
        api_key: R::KEY,
        api_version: version,
        body: Bytes::copy_from_slice(body),
    };
    let _ = r.decode::<R>("fuzz:9092");
}

fuzz_target!(|data: &[u8]| {
    let [api, version, body @ ..] = data else {
        return;
    };
    let version = i16::from(*version % 18);
    match api % 15 {
        0 => decode::<FetchRequest>(version, body),
        1 => decode::<ProduceRequest>(version, body),
        2 => decode::<MetadataRequest>(version, body),
        3 => decode::<ApiVersionsRequest>(version, body),
        4 => decode::<ListOffsetsRequest>(version, body),
        5 => decode::<InitProducerIdRequest>(version, body),
        6 => decode::<FindCoordinatorRequest>(version, body),
        7 => decode::<OffsetFetchRequest>(version, body),
        8 => decode::<ListGroupsRequest>(version, body),
        9 => decode::<CreateTopicsRequest>(version, body),
        10 => decode::<DescribeConfigsRequest>(version, body),
        11 => decode::<OffsetCommitRequest>(version, body),
        12 => decode::<SaslHandshakeRequest>(version, body),
        13 => decode::<SaslAuthenticateRequest>(version, body),
        _ => decode::<DescribeGroupsRequest>(version, body),
    }
});
