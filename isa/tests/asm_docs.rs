//! The example in `isa::asm`'s module documentation assembles, means what it says, and
//! survives a print/parse round trip.

use std::path::PathBuf;

use isa::asm::{parse_program, print_program, AsmContext};
use isa::npy::{self, Elem};
use isa::{AluOp, DType, HwConfig, Insn, MemType, Role};

const EXAMPLE: &str = include_str!("../src/asm/example.vasm");

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("isa-asm-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn module_doc_example_assembles() {
    let dir = temp_dir("doc");
    npy::write_file(&dir.join("x.npy"), Elem::I8, &[1, 4], &[1, 2, 0xff, 4]).unwrap();
    let ctx = AsmContext {
        file_name: "example.vasm".into(),
        base_dir: dir.clone(),
        config: None,
    };
    let p = parse_program(EXAMPLE, &ctx).unwrap_or_else(|e| panic!("{e}"));
    std::fs::remove_dir_all(&dir).unwrap();

    assert_eq!(p.config, HwConfig::preset("small").unwrap());
    p.validate().unwrap();
    let names: Vec<&str> = p.segments.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["x", "w", "y", "k"]);
    let x = p.segment("x").unwrap();
    assert_eq!((x.dtype, x.shape.as_slice()), (DType::I8, &[1, 4][..]));
    assert_eq!(
        x.role,
        Role {
            input: true,
            output: false
        }
    );
    assert_eq!(x.init.as_deref(), Some(&[1, 2, 0xff, 4][..]));
    let w = p.segment("w").unwrap();
    assert_eq!(
        w.init.as_deref().unwrap()[..4],
        [1, (-2i8) as u8, 3, 0],
        "row-major values"
    );
    let y = p.segment("y").unwrap();
    assert_eq!((y.role.output, y.init.is_none()), (true, true));
    let k = p.segment("k").unwrap();
    assert_eq!((k.dtype, k.shape.as_slice()), (DType::Uop, &[1][..]));
    assert_eq!(k.init.as_deref(), Some(&[0, 0, 0, 0][..]));

    assert_eq!(p.insns.len(), 9);
    // dram=w is w's offset in WGT elements.
    let Insn::Load(lw) = p.insns[1] else { panic!() };
    assert_eq!(lw.memory_type, MemType::Wgt);
    assert_eq!(u64::from(lw.dram_base), w.offset / 16);
    assert!(lw.deps.push_next);
    let Insn::Alu(shr) = p.insns[6] else { panic!() };
    assert_eq!((shr.op, shr.use_imm, shr.imm), (AluOp::Shr, true, 1));
    assert!(matches!(p.insns[8], Insn::Finish(d) if d.pop_next));

    let text = print_program(&p);
    let again =
        parse_program(&text, &AsmContext::default()).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(again, p);
}
