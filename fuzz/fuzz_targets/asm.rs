//! The assembler (`isa::asm::parse_program`) on arbitrary text, with a preset config chosen
//! outside the file and a base directory that does not exist (so `.config`/`file` directives
//! only ever fail to open). A program that assembles must print and re-assemble to itself.
#![no_main]

use isa::asm::{parse_program, print_program, AsmContext};
use isa::HwConfig;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    let ctx = AsmContext {
        file_name: "fuzz.vasm".into(),
        base_dir: "/nonexistent/vta-fuzz".into(),
        config: Some(HwConfig::preset("small").expect("a preset")),
    };
    if let Ok(p) = parse_program(src, &ctx) {
        let text = print_program(&p);
        let again = parse_program(&text, &ctx).expect("a printed program re-assembles");
        assert_eq!(again, p);
    }
});
