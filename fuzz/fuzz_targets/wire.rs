//! The remote runner's wire decoder (`drivers::remote::wire`): the input is a byte stream of
//! frames, each frame's body decoded as a request and as a response. A message that decodes
//! must encode to the same body.
#![no_main]

use drivers::remote::wire::{read_frame, Request, Response};
use libfuzzer_sys::fuzz_target;

/// A small frame limit so that length prefixes above it take the refusal path.
const LIMIT: u32 = 1 << 16;

fuzz_target!(|data: &[u8]| {
    let mut stream = data;
    while let Ok(body) = read_frame(&mut stream, LIMIT) {
        if let Ok(r) = Request::decode(&body) {
            assert_eq!(Request::decode(&r.encode()).expect("re-decodes"), r);
        }
        if let Ok(r) = Response::decode(&body) {
            assert_eq!(Response::decode(&r.encode()).expect("re-decodes"), r);
        }
    }
});
