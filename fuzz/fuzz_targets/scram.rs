//! Arbitrary server-first and server-final SCRAM messages (RFC 5802) for the client: the input
//! is the server-first message, a 0xff byte, and the server-final message. Parsing must give a
//! reply or an error, never a panic; a server-final is only accepted with the right signature.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strait_dataplane::wire::sasl::{ScramClient, ScramHash};

const NONCE: &str = "fyko+d2lbbFgONRv9qkxdawL";

fuzz_target!(|data: &[u8]| {
    let [hash, rest @ ..] = data else {
        return;
    };
    let (first, last) = match rest.iter().position(|b| *b == 0xff) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &[][..]),
    };
    let hash = if hash % 2 == 0 {
        ScramHash::Sha256
    } else {
        ScramHash::Sha512
    };
    let mut client = ScramClient::new(hash, "user", "pencil", NONCE.to_string());
    let _ = client.client_first();
    match client.step(first) {
        Ok(Some(reply)) => {
            let reply = String::from_utf8(reply).expect("client-final is text");
            assert!(reply.starts_with("c=biws,r=") && reply.contains(",p="), "{reply}");
            if let Ok(done) = client.step(last) {
                assert_eq!(done, None, "nothing follows an accepted server-final");
            }
        }
        Ok(None) => panic!("a server-first must be answered"),
        Err(_) => {}
    }
});
