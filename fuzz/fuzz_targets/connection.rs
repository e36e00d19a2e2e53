//! Arbitrary bytes as what a broker sends on a connection, fed to the sans-IO `Connection` in
//! pieces: during ApiVersions, during SASL (PLAIN and SCRAM), and once ready with requests in
//! flight. Every input must end in events or an error, never a panic, and no frame larger than
//! the configured maximum may be buffered.
#![no_main]

use bytes::BufMut;
use kafka_protocol::messages::MetadataRequest;
use libfuzzer_sys::fuzz_target;
use strait_dataplane::wire::{
    Connection, ConnectionParams, Event, SaslConfig, SaslMechanism, Secret,
};

const MAX_RESPONSE_BYTES: usize = 64 * 1024;

fn params(sasl: Option<SaslConfig>) -> ConnectionParams {
    ConnectionParams {
        broker: "fuzz:9092".into(),
        client_id: "fuzz".into(),
        tls: None,
        sasl,
        scram_nonce: "fyko+d2lbbFgONRv9qkxdawL".into(),
        bearer_token: None,
        max_response_bytes: MAX_RESPONSE_BYTES,
    }
}

fuzz_target!(|data: &[u8]| {
    let [mode, chunk, rest @ ..] = data else {
        return;
    };
    let sasl = match mode % 4 {
        0 => None,
        m => Some(SaslConfig::password(
            match m {
                1 => SaslMechanism::Plain,
                2 => SaslMechanism::ScramSha256,
                _ => SaslMechanism::ScramSha512,
            },
            "user",
            Secret::new("pencil"),
        )),
    };
    let Ok(mut conn) = Connection::new(params(sasl)) else {
        return;
    };
    let _ = conn.poll_transmit();
    let chunk = usize::from(*chunk).max(1);
    for piece in rest.chunks(chunk) {
        let mut buf = conn.read_buf();
        buf.put_slice(piece);
        if conn.handle_read(buf).is_err() {
            let _ = conn.handle_eof();
            return;
        }
        while let Some(ev) = conn.poll_event() {
            match ev {
                // Once ready, keep requests in flight so that answers are matched to them.
                Event::Ready => {
                    let _ = conn.send(&MetadataRequest::default(), 12);
                    let _ = conn.send(&MetadataRequest::default(), 1);
                }
                Event::Response(r) => {
                    assert!(r.body.len() <= MAX_RESPONSE_BYTES);
                    let _ = r.decode::<MetadataRequest>("fuzz:9092");
                    let _ = conn.send(&MetadataRequest::default(), 12);
                }
            }
        }
        let _ = conn.poll_transmit();
    }
    let _ = conn.handle_eof();
});
