//! The compiled-model loader (`vta_runtime::Model::from_bytes`): every input as it is, then
//! its payload re-framed with a valid header, length and checksum (see the container target)
//! so that the config, the postcard body and the plan checks see the mutations.
#![no_main]

use isa::container::frame;
use libfuzzer_sys::fuzz_target;
use vta_runtime::file::{FORMAT_VERSION, MAGIC};
use vta_runtime::Model;

const FORMAT: frame::Format = frame::Format {
    magic: MAGIC,
    kind: "compiled model",
    version: FORMAT_VERSION,
    older: "recompile",
    other_file: |_| "",
};

fuzz_target!(|data: &[u8]| {
    let _ = Model::from_bytes(data, "fuzz.vtab");
    let payload =
        if data.starts_with(&MAGIC) && data.len() >= frame::HEADER_BYTES + frame::CHECKSUM_BYTES {
            &data[frame::HEADER_BYTES..data.len() - frame::CHECKSUM_BYTES]
        } else {
            data
        };
    let mut file = frame::start(&FORMAT, payload.len());
    file.extend_from_slice(payload);
    let _ = Model::from_bytes(&frame::finish(file), "fuzz.vtab");
});
