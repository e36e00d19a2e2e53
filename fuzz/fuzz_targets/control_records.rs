//! Arbitrary bytes as the records control reads back from Kafka: MM2's offset syncs,
//! checkpoints and heartbeats (`offsets::format`), MM2's Connect source offsets on import
//! (`offsets::connect`), and strait's progress records. Byte 0 picks the decoder; the rest is
//! split at the first 0xff into key and value. Each must give a value or an error, never a
//! panic; what decodes must encode back to a record that decodes to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strait_control::offsets::connect::ImportedProgress;
use strait_control::offsets::format::{Checkpoint, Heartbeat, OffsetSync};

fuzz_target!(|data: &[u8]| {
    let [which, rest @ ..] = data else {
        return;
    };
    let (key, value) = match rest.iter().position(|b| *b == 0xff) {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let v = value.unwrap_or(&[]);
    match which % 5 {
        0 => {
            if let Ok(s) = OffsetSync::decode(key, v) {
                let k = s.encode_key().expect("a decoded sync encodes");
                assert_eq!(OffsetSync::decode(&k, &s.encode_value()).ok(), Some(s));
            }
        }
        1 => {
            if let Ok(c) = Checkpoint::decode(key, v) {
                let k = c.encode_key().expect("a decoded checkpoint encodes");
                let val = c.encode_value().expect("a decoded checkpoint encodes");
                assert_eq!(Checkpoint::decode(&k, &val).ok(), Some(c));
            }
        }
        2 => {
            if let Ok(h) = Heartbeat::decode(key, v) {
                let k = h.encode_key().expect("a decoded heartbeat encodes");
                assert_eq!(Heartbeat::decode(&k, &h.encode_value()).ok(), Some(h));
            }
        }
        3 => {
            let mut imported = ImportedProgress::new("MirrorSourceConnector", "A");
            let _ = imported.apply(key, value);
            let _ = imported.apply(key, None);
        }
        _ => {
            let _ = strait_control::store::progress::decode("A", key, value);
        }
    }
});
