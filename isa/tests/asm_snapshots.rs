//! Snapshots of the printer's canonical text.

use isa::asm::{parse_program, print_insns, print_program, print_uops, AsmContext};
use isa::{
    AluInsn, AluOp, Codec, DType, DepFlags, GemmInsn, HwConfig, Insn, MemInsn, MemType, Program,
    Role, Uop, UopLoop,
};

fn mem(memory_type: MemType, sram_base: u16, dram_base: u64, y: u16, x: u16) -> MemInsn {
    MemInsn {
        deps: DepFlags::NONE,
        memory_type,
        sram_base,
        dram_base: dram_base as u32,
        y_size: y,
        x_size: x,
        x_stride: x,
        y_pad_0: 0,
        y_pad_1: 0,
        x_pad_0: 0,
        x_pad_1: 0,
    }
}

fn deps(pop_prev: bool, pop_next: bool, push_prev: bool, push_next: bool) -> DepFlags {
    DepFlags {
        pop_prev,
        pop_next,
        push_prev,
        push_next,
    }
}

fn lp(bgn: u16, end: u16, iter_out: u16, iter_in: u16) -> UopLoop {
    UopLoop {
        uop_bgn: bgn,
        uop_end: end,
        iter_out,
        iter_in,
        ..UopLoop::default()
    }
}

/// A small GEMM + ALU program on the default config touching every printer feature.
fn representative() -> Program {
    let cfg = HwConfig::default();
    let codec = Codec::new(&cfg);
    let mut p = Program {
        config: cfg.clone(),
        insns: Vec::new(),
        segments: Vec::new(),
    };
    let uops: Vec<u8> = [
        Uop {
            dst_idx: 0,
            src_idx: 0,
            wgt_idx: 0,
        },
        Uop {
            dst_idx: 1,
            src_idx: 1,
            wgt_idx: 0,
        },
    ]
    .iter()
    .flat_map(|u| codec.encode_uop(u).unwrap())
    .collect();
    let k = p.push_segment("k", DType::Uop, vec![2], Role::default(), Some(uops));
    let x_data: Vec<u8> = (0..32).map(|i| (i as i8 - 16) as u8).collect();
    let x = p.push_segment(
        "x",
        DType::I8,
        vec![2, 16],
        Role {
            input: true,
            output: false,
        },
        Some(x_data),
    );
    let w_data: Vec<u8> = (0..256).map(|i| ((i * 7) % 11) as u8).collect();
    let w = p.push_segment("w", DType::I8, vec![16, 16], Role::default(), Some(w_data));
    p.push_segment(
        "bias",
        DType::I32,
        vec![16],
        Role::default(),
        Some(vec![0; 64]),
    );
    let y = p.push_segment(
        "y",
        DType::I8,
        vec![2, 16],
        Role {
            input: false,
            output: true,
        },
        None,
    );
    p.push_segment(
        "scratch area",
        DType::U32,
        vec![3],
        Role {
            input: true,
            output: true,
        },
        Some(vec![1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 2, 1, 0, 0]),
    );
    p.push_segment("raw", DType::Uop, vec![1], Role::default(), None);
    // A segment placed above the packed layout.
    p.push_segment(
        "far",
        DType::I16,
        vec![2],
        Role::default(),
        Some(vec![0xff, 0x7f, 0, 0x80]),
    );
    p.segments.last_mut().unwrap().offset += 1024;

    let (inp_eb, wgt_eb, out_eb) = (16, 256, 16);
    p.insns = vec![
        Insn::Load(mem(MemType::Uop, 0, k / 4, 1, 2)),
        Insn::Load(MemInsn {
            x_pad_0: 1,
            x_pad_1: 1,
            ..mem(MemType::Inp, 0, x / inp_eb, 2, 1)
        }),
        Insn::Load(MemInsn {
            deps: deps(false, false, false, true),
            ..mem(MemType::Wgt, 0, w / wgt_eb, 1, 1)
        }),
        Insn::Load(mem(MemType::Acc, 0, 0, 0, 0)),
        Insn::Gemm(GemmInsn {
            deps: DepFlags::NONE,
            lp: UopLoop {
                reset_reg: true,
                ..lp(0, 2, 1, 1)
            },
            wgt_factor_out: 0,
            wgt_factor_in: 0,
        }),
        Insn::Gemm(GemmInsn {
            deps: deps(true, false, false, false),
            lp: UopLoop {
                dst_factor_in: 1,
                src_factor_in: 1,
                ..lp(0, 2, 1, 1)
            },
            wgt_factor_out: 0,
            wgt_factor_in: 0,
        }),
        Insn::Alu(AluInsn {
            deps: DepFlags::NONE,
            lp: UopLoop {
                dst_factor_in: 1,
                src_factor_in: 1,
                ..lp(0, 1, 1, 2)
            },
            op: AluOp::Max,
            use_imm: true,
            imm: 0,
        }),
        Insn::Alu(AluInsn {
            deps: DepFlags::NONE,
            lp: lp(0, 1, 1, 2),
            op: AluOp::Add,
            use_imm: false,
            imm: 0,
        }),
        Insn::Alu(AluInsn {
            deps: deps(false, false, false, true),
            lp: lp(1, 2, 1, 1),
            op: AluOp::Shr,
            use_imm: false,
            imm: -5,
        }),
        Insn::Store(MemInsn {
            deps: deps(true, false, true, false),
            ..mem(MemType::Out, 0, y / out_eb + 1, 1, 1)
        }),
        Insn::Store(mem(MemType::Out, 0, 0x10_0000, 1, 1)),
        Insn::Finish(deps(false, true, false, false)),
    ];
    p.validate().unwrap();
    p
}

#[test]
fn representative_program() {
    let p = representative();
    let text = print_program(&p);
    insta::assert_snapshot!(text);
    assert_eq!(parse_program(&text, &AsmContext::default()).unwrap(), p);
}

#[test]
fn config_outside_the_presets_prints_as_json() {
    let mut cfg = HwConfig::preset("rect").unwrap();
    cfg.alu_mul = false;
    cfg.clock_mhz = 250;
    let p = Program {
        config: cfg,
        insns: vec![Insn::Finish(DepFlags::NONE)],
        segments: Vec::new(),
    };
    let text = print_program(&p);
    insta::assert_snapshot!(text);
    assert_eq!(parse_program(&text, &AsmContext::default()).unwrap(), p);
}

#[test]
fn instruction_and_micro_op_listings() {
    let p = representative();
    let text = print_insns(&p.config, &p.insns);
    insta::assert_snapshot!("insns", text);
    let ctx = AsmContext {
        config: Some(p.config.clone()),
        ..AsmContext::default()
    };
    let back = parse_program(&text, &ctx).unwrap();
    assert_eq!((back.insns, back.segments.len()), (p.insns.clone(), 0));

    let k = p.segment("k").unwrap();
    let text = print_uops(&p.config, &p.uops(k));
    insta::assert_snapshot!("uops", text);
}

#[test]
fn error_rendering() {
    let src = ".buffer x i8 [4]\n\tload inp sram=0 dram=x y=1 x=1 stride=1 pad=0,0,16,0\n";
    let e = parse_program(
        src,
        &AsmContext {
            file_name: "prog.vasm".into(),
            ..AsmContext::default()
        },
    )
    .unwrap_err();
    insta::assert_snapshot!(e.to_string());
}
