//! The ONNX importer (`compiler::frontend::import_graph`: protobuf decoding, import with shape
//! inference and constant folding, graph simplification) on arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

/// A budget far below the default, so the fuzzer meets the refusal path often and no input
/// it keeps allocates near libFuzzer's RSS limit.
const MEMORY_BUDGET: u64 = 16 << 20;

fuzz_target!(|data: &[u8]| {
    let _ = compiler::frontend::import_graph(data, "fuzz.onnx", MEMORY_BUDGET);
});
