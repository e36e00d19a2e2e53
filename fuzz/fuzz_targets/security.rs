//! The security parsers on hostile bytes: Java key stores (JKS/JCEKS) and their private keys,
//! encrypted PKCS#8 keys, token endpoint HTTP responses, token JSON and JWTs, endpoint URLs.
//! Byte 0 picks the parser; the rest is its input. Nothing may panic or allocate beyond what the
//! input justifies.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strait_dataplane::wire::{Secret, http, keystore, oauth, private_key};

fuzz_target!(|data: &[u8]| {
    let Some((&which, input)) = data.split_first() else {
        return;
    };
    let pw = Secret::new("changeit");
    match which % 6 {
        0 => {
            let _ = keystore::detect(input);
            let _ = keystore::describe_unknown(input);
            for password in [None, Some(&pw)] {
                if let Ok(store) = keystore::read_jks(input, password) {
                    for key in &store.keys {
                        let _ = key.private_key(&pw);
                    }
                }
            }
        }
        1 => {
            let _ = private_key::decrypt(input, "changeit");
        }
        2 => {
            for eof in [false, true] {
                if let Ok(Some(r)) = http::parse_response(input, eof) {
                    assert!(r.body.len() <= input.len());
                }
            }
        }
        3 => {
            let _ = oauth::parse_token_response(input);
            let _ = oauth::describe_error_response(input);
        }
        4 => {
            let text = String::from_utf8_lossy(input).into_owned();
            let _ = oauth::parse_jwt(&Secret::new(text.clone()), "sub");
            let _ = oauth::check_token_characters(&text);
            let _ = oauth::unsecured_list_claim(&text);
        }
        _ => {
            let _ = http::Endpoint::parse(&String::from_utf8_lossy(input));
        }
    }
});
