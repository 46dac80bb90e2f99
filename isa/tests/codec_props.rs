//! Property tests: `decode(encode(x)) == x` for every valid instruction and micro-op of every
//! preset, and decoding arbitrary bytes never panics.

use isa::{
    AluInsn, AluOp, Codec, DepFlags, GemmInsn, HwConfig, Insn, MemInsn, MemType, Uop, UopLoop,
    PRESETS,
};
use proptest::prelude::*;

fn bits(n: u32) -> std::ops::RangeInclusive<u32> {
    0..=((1u64 << n) - 1) as u32
}

fn deps() -> impl Strategy<Value = DepFlags> {
    any::<[bool; 4]>().prop_map(|[a, b, c, d]| DepFlags {
        pop_prev: a,
        pop_next: b,
        push_prev: c,
        push_next: d,
    })
}

fn uop_loop(cfg: &HwConfig, src_mem: MemType) -> impl Strategy<Value = UopLoop> {
    let ud = cfg.depth(MemType::Uop);
    let a = cfg.log_depth(MemType::Acc);
    let s = cfg.log_depth(src_mem);
    (
        any::<bool>(),
        0..=ud,
        0..=ud,
        bits(14),
        bits(14),
        [bits(a), bits(a), bits(s), bits(s)],
    )
        .prop_map(move |(reset_reg, x, y, io, ii, [d0, d1, s0, s1])| UopLoop {
            reset_reg,
            uop_bgn: x.min(y).min(ud - 1) as u16,
            uop_end: x.max(y) as u16,
            iter_out: io as u16,
            iter_in: ii as u16,
            dst_factor_out: d0 as u16,
            dst_factor_in: d1 as u16,
            src_factor_out: s0 as u16,
            src_factor_in: s1 as u16,
        })
}

fn insn(cfg: HwConfig) -> impl Strategy<Value = Insn> {
    let loads = [
        MemType::Uop,
        MemType::Wgt,
        MemType::Inp,
        MemType::Acc,
        MemType::Acc8,
    ];
    let mem = (
        deps(),
        any::<bool>(),
        0..loads.len(),
        any::<u16>(),
        any::<u32>(),
        any::<[u16; 3]>(),
        [0u8..16, 0u8..16, 0u8..16, 0u8..16],
    )
        .prop_map({
            let cfg = cfg.clone();
            move |(deps, store, t, sram, dram_base, [y_size, x_size, x_stride], pads)| {
                let memory_type = if store { MemType::Out } else { loads[t] };
                let pads = if store { [0; 4] } else { pads };
                let m = MemInsn {
                    deps,
                    memory_type,
                    sram_base: (u32::from(sram) % cfg.depth(memory_type)) as u16,
                    dram_base,
                    y_size,
                    x_size,
                    x_stride,
                    y_pad_0: pads[0],
                    y_pad_1: pads[1],
                    x_pad_0: pads[2],
                    x_pad_1: pads[3],
                };
                if store {
                    Insn::Store(m)
                } else {
                    Insn::Load(m)
                }
            }
        });
    let w = cfg.log_depth(MemType::Wgt);
    let gemm =
        (deps(), uop_loop(&cfg, MemType::Inp), bits(w), bits(w)).prop_map(|(deps, lp, wo, wi)| {
            Insn::Gemm(GemmInsn {
                deps,
                lp,
                wgt_factor_out: wo as u16,
                wgt_factor_in: wi as u16,
            })
        });
    let n_ops: usize = if cfg.alu_mul { 5 } else { 4 };
    let alu = (
        deps(),
        uop_loop(&cfg, MemType::Acc),
        0..n_ops,
        any::<bool>(),
        any::<i16>(),
    )
        .prop_map(|(deps, lp, op, use_imm, imm)| {
            Insn::Alu(AluInsn {
                deps,
                lp,
                op: AluOp::ALL[op],
                use_imm,
                imm,
            })
        });
    prop_oneof![mem, gemm, alu, deps().prop_map(Insn::Finish)]
}

fn preset_and_insns() -> impl Strategy<Value = (HwConfig, Vec<Insn>)> {
    (0..PRESETS.len()).prop_flat_map(|i| {
        let cfg = HwConfig::preset(PRESETS[i].0).unwrap();
        (Just(cfg.clone()), prop::collection::vec(insn(cfg), 1..20))
    })
}

proptest! {
    #[test]
    fn decode_inverts_encode((cfg, insns) in preset_and_insns()) {
        let codec = Codec::new(&cfg);
        let bytes = codec.encode_stream(&insns).unwrap();
        prop_assert_eq!(codec.decode_stream(&bytes).unwrap(), insns);
    }

    #[test]
    fn uop_decode_inverts_encode(p in 0..PRESETS.len(), raw in any::<[u32; 3]>()) {
        let cfg = HwConfig::preset(PRESETS[p].0).unwrap();
        let codec = Codec::new(&cfg);
        let u = Uop {
            dst_idx: raw[0] % cfg.depth(MemType::Acc),
            src_idx: raw[1] & ((1 << cfg.uop_src_bits()) - 1),
            wgt_idx: raw[2] % cfg.depth(MemType::Wgt),
        };
        prop_assert_eq!(codec.decode_uop(&codec.encode_uop(&u).unwrap()), u);
    }

    #[test]
    fn decoding_garbage_never_panics(p in 0..PRESETS.len(), bytes in any::<[u8; 16]>()) {
        let codec = Codec::new(&HwConfig::preset(PRESETS[p].0).unwrap());
        if let Ok(insn) = codec.decode(&bytes) {
            // Whatever decodes must re-encode to the same fields (reserved bits aside).
            prop_assert_eq!(codec.decode(&codec.encode(&insn).unwrap()).unwrap(), insn);
        }
    }

    #[test]
    fn out_of_range_values_are_errors(p in 0..PRESETS.len(), excess in 0u32..100) {
        let cfg = HwConfig::preset(PRESETS[p].0).unwrap();
        let codec = Codec::new(&cfg);
        let mut g = GemmInsn::default();
        g.lp.uop_end = (cfg.depth(MemType::Uop) + 1 + excess).min(u16::MAX.into()) as u16;
        prop_assert!(codec.encode(&Insn::Gemm(g)).is_err());
    }
}
