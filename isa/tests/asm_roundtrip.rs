//! `parse_program(print_program(p)) == p` over random valid programs, and the printer's other
//! outputs read back as well.

use isa::asm::{parse_program, print_insns, print_program, print_uops, AsmContext};
use isa::layout::{Field, Layout};
use isa::{
    AluInsn, AluOp, Codec, DType, DepFlags, GemmInsn, HwConfig, Insn, MemInsn, MemType, Program,
    Role, UopLoop,
};
use proptest::prelude::*;

/// The presets the tests cover, plus a config outside them (printed as inline JSON).
fn config(name: &str) -> HwConfig {
    if name == "custom" {
        let mut c = HwConfig::preset("rect").unwrap();
        c.alu_mul = false;
        c.token_queue_depth = 64;
        c.validate().unwrap();
        return c;
    }
    HwConfig::preset(name).unwrap()
}

fn arb_config() -> impl Strategy<Value = HwConfig> {
    prop::sample::select(vec![
        "default", "rect", "small", "batched", "wide-bus", "custom",
    ])
    .prop_map(config)
}

/// Values that fit `width` bits (and a u16).
fn field(l: &Layout, f: Field) -> impl Strategy<Value = u16> {
    let width = l.slot(f).width.min(16);
    prop_oneof![
        Just(0u16),
        Just(((1u32 << width) - 1) as u16),
        0..=((1u32 << width) - 1) as u16
    ]
}

fn arb_deps() -> impl Strategy<Value = DepFlags> {
    any::<[bool; 4]>().prop_map(|[a, b, c, d]| DepFlags {
        pop_prev: a,
        pop_next: b,
        push_prev: c,
        push_next: d,
    })
}

/// A micro-op loop within the field widths of `l` (GEMM and ALU differ in `src`).
fn arb_loop(cfg: &HwConfig, l: &Layout) -> impl Strategy<Value = UopLoop> {
    let uop_depth = cfg.depth(MemType::Uop) as u16;
    (
        any::<bool>(),
        field(l, Field::UopBgn),
        prop_oneof![Just(uop_depth), 0..=uop_depth],
        field(l, Field::IterOut),
        field(l, Field::IterIn),
        field(l, Field::DstFactorOut),
        field(l, Field::DstFactorIn),
        field(l, Field::SrcFactorOut),
        field(l, Field::SrcFactorIn),
    )
        .prop_map(
            |(reset_reg, uop_bgn, uop_end, io, ii, dout, din, sout, sin)| UopLoop {
                reset_reg,
                uop_bgn,
                uop_end,
                iter_out: io,
                iter_in: ii,
                dst_factor_out: dout,
                dst_factor_in: din,
                src_factor_out: sout,
                src_factor_in: sin,
            },
        )
}

/// Any instruction `Codec::check` accepts under `cfg`.
fn arb_insn(cfg: &HwConfig) -> impl Strategy<Value = Insn> {
    let codec = Codec::new(cfg);
    let mem = |store: bool, cfg: &HwConfig| {
        let types: Vec<MemType> = if store {
            vec![MemType::Out]
        } else {
            vec![
                MemType::Uop,
                MemType::Wgt,
                MemType::Inp,
                MemType::Acc,
                MemType::Acc8,
            ]
        };
        let depths: Vec<(MemType, u32)> = types.iter().map(|&m| (m, cfg.depth(m))).collect();
        let pad = if store { 0u8..=0 } else { 0u8..=15 };
        (
            arb_deps(),
            prop::sample::select(depths).prop_flat_map(|(m, d)| (Just(m), 0..d.min(0x1_0000))),
            prop_oneof![3 => 0u32..80, 1 => any::<u32>()],
            any::<u16>(),
            prop_oneof![Just(0u16), 1u16..4, any::<u16>()],
            any::<u16>(),
            [pad.clone(), pad.clone(), pad.clone(), pad],
        )
            .prop_map(|(deps, (m, sram), dram, y, x, stride, p)| MemInsn {
                deps,
                memory_type: m,
                sram_base: sram as u16,
                dram_base: dram,
                y_size: y,
                x_size: x,
                x_stride: stride,
                y_pad_0: p[0],
                y_pad_1: p[1],
                x_pad_0: p[2],
                x_pad_1: p[3],
            })
    };
    let ops: Vec<AluOp> = AluOp::ALL
        .into_iter()
        .filter(|&o| o != AluOp::Mul || cfg.alu_mul)
        .collect();
    let gemm = (
        arb_deps(),
        arb_loop(cfg, &codec.gemm),
        field(&codec.gemm, Field::WgtFactorOut),
        field(&codec.gemm, Field::WgtFactorIn),
    )
        .prop_map(|(deps, lp, wo, wi)| {
            Insn::Gemm(GemmInsn {
                deps,
                lp,
                wgt_factor_out: wo,
                wgt_factor_in: wi,
            })
        });
    let alu = (
        arb_deps(),
        arb_loop(cfg, &codec.alu),
        prop::sample::select(ops),
        any::<bool>(),
        prop_oneof![Just(0i16), any::<i16>()],
    )
        .prop_map(|(deps, lp, op, use_imm, imm)| {
            Insn::Alu(AluInsn {
                deps,
                lp,
                op,
                use_imm,
                imm,
            })
        });
    let check = codec.clone();
    prop_oneof![
        mem(false, cfg).prop_map(Insn::Load),
        mem(true, cfg).prop_map(Insn::Store),
        gemm,
        alu,
        arb_deps().prop_map(Insn::Finish),
    ]
    .prop_filter("encodable", move |i| check.encode(i).is_ok())
}

fn arb_name() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => "[a-z_][a-z0-9_.]{0,7}",
        1 => "[ -~]{1,6}",
        1 => "[a\\n\\t\"\\\\\\x01\\x7f]{1,4}",
        1 => "\\PC{1,4}",
    ]
}

#[derive(Debug, Clone)]
struct SegSpec {
    name: String,
    dtype: DType,
    shape: Vec<usize>,
    role: (bool, bool),
    init: u8,
    bytes: Vec<u8>,
    gap: u64,
}

fn arb_seg() -> impl Strategy<Value = SegSpec> {
    (
        arb_name(),
        prop::sample::select(DType::ALL.to_vec()),
        prop::collection::vec(0usize..5, 0..4),
        any::<(bool, bool)>(),
        0u8..4,
        prop::collection::vec(any::<u8>(), 256),
        prop_oneof![4 => Just(0u64), 1 => 1u64..4],
    )
        .prop_map(|(name, dtype, shape, role, init, bytes, gap)| SegSpec {
            name,
            dtype,
            shape,
            role,
            init,
            bytes,
            gap,
        })
}

fn build(cfg: HwConfig, segs: Vec<SegSpec>, insns: Vec<Insn>) -> Program {
    let codec = Codec::new(&cfg);
    let align = Program::dram_align(&cfg);
    let mut p = Program {
        config: cfg,
        insns,
        segments: Vec::new(),
    };
    for (i, s) in segs.into_iter().enumerate() {
        let mut name = s.name;
        while p.segment(&name).is_some() {
            name = format!("{name}_{i}");
        }
        let size = s.shape.iter().product::<usize>() * s.dtype.size();
        let init = match s.init {
            0 => None,
            1 => Some(vec![0; size]),
            // Micro-op segments: words that are valid micro-ops (printed as `.uops`).
            2 if s.dtype == DType::Uop => Some(
                s.bytes[..size]
                    .chunks_exact(4)
                    .flat_map(|c| {
                        let u = codec.decode_uop(&[c[0], c[1], c[2], c[3]]);
                        codec.encode_uop(&u).unwrap()
                    })
                    .collect(),
            ),
            _ => Some(s.bytes[..size].to_vec()),
        };
        let role = Role {
            input: s.role.0,
            output: s.role.1,
        };
        p.push_segment(&name, s.dtype, s.shape, role, init);
        if let Some(last) = p.segments.last_mut() {
            last.offset += s.gap * align;
        }
    }
    p
}

fn arb_program() -> impl Strategy<Value = Program> {
    arb_config().prop_flat_map(|cfg| {
        (
            prop::collection::vec(arb_seg(), 0..6),
            prop::collection::vec(arb_insn(&cfg), 0..24),
            Just(cfg),
        )
            .prop_map(|(segs, insns, cfg)| build(cfg, segs, insns))
    })
}

fn ctx_for(cfg: &HwConfig) -> AsmContext {
    AsmContext {
        file_name: "listing".into(),
        config: Some(cfg.clone()),
        ..AsmContext::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 400,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn print_then_parse_is_identity(p in arb_program()) {
        p.validate().unwrap();
        let text = print_program(&p);
        let back = parse_program(&text, &AsmContext::default())
            .unwrap_or_else(|e| panic!("{e}\n--- text ---\n{text}"));
        prop_assert_eq!(&back, &p, "text:\n{}", text);
        // With the program's own config selected as well.
        prop_assert_eq!(parse_program(&text, &ctx_for(&p.config)).unwrap(), p);
    }

    #[test]
    fn decoded_instructions_list_and_parse_back(
        cfg in arb_config(),
        words in prop::collection::vec(any::<[u8; 16]>(), 1..32),
    ) {
        let codec = Codec::new(&cfg);
        let insns: Vec<Insn> = words.iter().filter_map(|w| codec.decode(w).ok()).collect();
        let text = print_insns(&cfg, &insns);
        prop_assert_eq!(text.lines().count(), insns.len());
        let back = parse_program(&text, &ctx_for(&cfg))
            .unwrap_or_else(|e| panic!("{e}\n--- text ---\n{text}"));
        prop_assert_eq!(back.insns, insns);
        prop_assert!(back.segments.is_empty());
    }

    #[test]
    fn micro_op_listings_parse_back(cfg in arb_config(), words in prop::collection::vec(any::<[u8; 4]>(), 0..16)) {
        let codec = Codec::new(&cfg);
        let uops: Vec<_> = words.iter().map(|w| codec.decode_uop(w)).collect();
        let text = format!(".uops k\n{}", print_uops(&cfg, &uops));
        let p = parse_program(&text, &ctx_for(&cfg)).unwrap_or_else(|e| panic!("{e}\n{text}"));
        prop_assert_eq!(p.uops(&p.segments[0]), uops);
    }

    #[test]
    fn damaged_text_is_an_error_or_a_program_never_a_panic(
        p in arb_program(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<char>(), 0u8..3), 1..6),
    ) {
        let mut text: Vec<char> = print_program(&p).chars().collect();
        for (at, c, kind) in edits {
            let i = at.index(text.len() + 1);
            match kind {
                0 => text.insert(i, c),
                1 if i < text.len() => { text.remove(i); }
                _ => text.insert(i, ['\n', '[', '"', '=', '-', ',', ';'][i % 7]),
            }
        }
        let text: String = text.into_iter().collect();
        if let Err(e) = parse_program(&text, &AsmContext::default()) {
            let msg = e.to_string();
            prop_assert!(msg.starts_with(&format!(":{}:{}: ", e.line, e.col)), "{}", msg);
        }
    }
}
