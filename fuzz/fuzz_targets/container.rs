//! The program container (`isa::container::read`) and the shared frame
//! (`isa::container::frame`): every input is read as it is, then its payload (the bytes
//! between a container's header and checksum, or the whole input) is re-framed with a valid
//! header, length and checksum so that the payload parser sees mutations the checksum would
//! otherwise stop. A container that reads must write back to a file that reads the same.
#![no_main]

use isa::container::{self, frame};
use libfuzzer_sys::fuzz_target;

const FORMAT: frame::Format = frame::Format {
    magic: container::MAGIC,
    kind: "VTA program container",
    version: container::FORMAT_VERSION,
    older: "re-assemble",
    other_file: container::other_file_hint,
};

fuzz_target!(|data: &[u8]| {
    check(data);
    let payload = if data.starts_with(&container::MAGIC)
        && data.len() >= frame::HEADER_BYTES + frame::CHECKSUM_BYTES
    {
        &data[frame::HEADER_BYTES..data.len() - frame::CHECKSUM_BYTES]
    } else {
        data
    };
    let mut file = frame::start(&FORMAT, payload.len());
    file.extend_from_slice(payload);
    check(&frame::finish(file));
});

fn check(bytes: &[u8]) {
    let _ = frame::read(&FORMAT, bytes);
    if let Ok(p) = container::read(bytes) {
        let again = container::write(&p).expect("a program that was read writes");
        assert_eq!(container::read(&again).expect("and reads back"), p);
    }
}
