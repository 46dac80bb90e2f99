//! The instruction and micro-op decoders (`isa::Codec`) on raw streams: the first byte picks a
//! preset config, the rest is the stream. Whatever decodes must re-encode to an instruction
//! that decodes to itself.
#![no_main]

use isa::{Codec, HwConfig, INSN_BYTES, PRESETS, UOP_BYTES};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, stream)) = data.split_first() else {
        return;
    };
    let cfg = HwConfig::preset(PRESETS[pick as usize % PRESETS.len()].0).expect("a preset");
    let codec = Codec::new(&cfg);
    for chunk in stream.chunks_exact(INSN_BYTES) {
        if let Ok(insn) = codec.decode(chunk.try_into().expect("16 bytes")) {
            let bytes = codec
                .encode(&insn)
                .expect("a decoded instruction re-encodes");
            assert_eq!(codec.decode(&bytes).expect("and decodes again"), insn);
        }
    }
    let _ = codec.decode_stream(stream);
    if let Ok(uops) = codec.decode_uop_stream(stream) {
        for (u, chunk) in uops.iter().zip(stream.chunks_exact(UOP_BYTES)) {
            let bytes = codec.encode_uop(u).expect("a decoded micro-op re-encodes");
            assert_eq!(&codec.decode_uop(&bytes), u, "micro-op {chunk:?}");
        }
    }
});
