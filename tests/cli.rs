//! End-to-end tests of the `vta` binary: help texts, `config show`, `disasm`, the
//! asm/disasm round trip, and that bad input gives a clear error and a non-zero exit.

#[path = "support/cli.rs"]
mod support;

use support::{fails, ok, scratch, vta, vta_in};

use isa::{
    container, AluInsn, AluOp, Codec, DType, DepFlags, GemmInsn, HwConfig, Insn, MemInsn, MemType,
    Program, Role, Uop, UopLoop,
};

fn mem(memory_type: MemType, sram_base: u16, dram_base: u32, x_size: u16) -> MemInsn {
    MemInsn::transfer(memory_type, sram_base, dram_base, 1, x_size, x_size)
}

fn lp(uop_end: u16) -> UopLoop {
    UopLoop {
        uop_end,
        iter_out: 1,
        iter_in: 1,
        ..UopLoop::default()
    }
}

/// A small but complete instruction stream: every opcode, dependency flags, padding and a
/// negative immediate.
fn sample_insns() -> Vec<Insn> {
    vec![
        Insn::Load(mem(MemType::Uop, 0, 0, 2)),
        Insn::Load(MemInsn {
            x_pad_0: 1,
            y_pad_1: 2,
            ..mem(MemType::Inp, 0, 8, 1)
        }),
        Insn::Load(MemInsn {
            deps: DepFlags {
                push_next: true,
                ..DepFlags::NONE
            },
            ..mem(MemType::Wgt, 0, 1, 1)
        }),
        Insn::Gemm(GemmInsn {
            deps: DepFlags {
                pop_prev: true,
                ..DepFlags::NONE
            },
            lp: UopLoop {
                reset_reg: true,
                ..lp(1)
            },
            wgt_factor_out: 0,
            wgt_factor_in: 0,
        }),
        Insn::Gemm(GemmInsn {
            deps: DepFlags::NONE,
            lp: UopLoop {
                iter_out: 2,
                dst_factor_out: 1,
                src_factor_out: 1,
                ..lp(1)
            },
            wgt_factor_out: 0,
            wgt_factor_in: 0,
        }),
        Insn::Alu(AluInsn {
            deps: DepFlags {
                push_next: true,
                ..DepFlags::NONE
            },
            lp: lp(2),
            op: AluOp::Shr,
            use_imm: true,
            imm: -3,
        }),
        Insn::Store(MemInsn {
            deps: DepFlags {
                pop_prev: true,
                ..DepFlags::NONE
            },
            ..mem(MemType::Out, 0, 12, 1)
        }),
        Insn::Finish(DepFlags::NONE),
    ]
}

/// A program with the sample instructions and segments of every kind.
fn sample_program(cfg: HwConfig) -> Program {
    let codec = Codec::new(&cfg);
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
    let mut p = Program {
        config: cfg,
        insns: sample_insns(),
        segments: Vec::new(),
    };
    p.push_segment("uops", DType::Uop, vec![2], Role::default(), Some(uops));
    p.push_segment(
        "w",
        DType::I8,
        vec![16, 16],
        Role::default(),
        Some((0..256).map(|i| (i % 7) as u8).collect()),
    );
    p.push_segment(
        "x",
        DType::I8,
        vec![1, 16],
        Role {
            input: true,
            output: false,
        },
        None,
    );
    p.push_segment(
        "y",
        DType::I8,
        vec![1, 16],
        Role {
            input: false,
            output: true,
        },
        None,
    );
    p.validate().unwrap();
    p
}

fn raw_stream(cfg: &HwConfig) -> Vec<u8> {
    Codec::new(cfg).encode_stream(&sample_insns()).unwrap()
}

#[test]
fn help_texts() {
    insta::assert_snapshot!("help_vta", ok(vta(&["--help"])));
    insta::assert_snapshot!("help_config", ok(vta(&["config", "--help"])));
    insta::assert_snapshot!("help_config_show", ok(vta(&["config", "show", "--help"])));
    insta::assert_snapshot!(
        "help_config_presets",
        ok(vta(&["config", "presets", "--help"]))
    );
    insta::assert_snapshot!("help_asm", ok(vta(&["asm", "--help"])));
    insta::assert_snapshot!("help_disasm", ok(vta(&["disasm", "--help"])));
}

#[test]
fn config_show_default() {
    insta::assert_snapshot!("config_show_default", ok(vta(&["config", "show"])));
    let json = ok(vta(&["config", "show", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&json).expect("one JSON object");
    assert_eq!(v["config_string"], "1x16_i8w8a32_15_15_18_17");
    insta::assert_snapshot!("config_show_default_json", json);
}

#[test]
fn config_show_native_reloads_and_presets_are_listed() {
    let dir = scratch("native");
    let native = ok(vta(&["config", "show", "--native", "--config", "rect"]));
    std::fs::write(dir.join("rect.json"), &native).unwrap();
    assert_eq!(
        HwConfig::load(dir.join("rect.json").to_str().unwrap()).unwrap(),
        HwConfig::preset("rect").unwrap()
    );
    let shown = ok(vta_in(&dir, &["config", "show", "--config", "rect.json"]));
    assert!(shown.starts_with("2x16x8_i8w8a32_15_15_17_17 (file rect.json)\n"));
    let presets = ok(vta(&["config", "presets"]));
    for (name, desc, _) in isa::PRESETS {
        assert!(
            presets.contains(name) && presets.contains(desc),
            "{presets}"
        );
    }
}

#[test]
fn disasm_raw_stream() {
    let dir = scratch("raw");
    std::fs::write(dir.join("insns.bin"), raw_stream(&HwConfig::default())).unwrap();
    insta::assert_snapshot!(
        "disasm_raw_text",
        ok(vta_in(&dir, &["disasm", "insns.bin"]))
    );
    let json = ok(vta_in(&dir, &["disasm", "insns.bin", "--json"]));
    assert_eq!(json.lines().count(), sample_insns().len());
    for line in json.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(v["opcode"].is_string(), "{line}");
    }
    insta::assert_snapshot!("disasm_raw_json", json);

    // The same stream under another config decodes with that config's field positions.
    let small = HwConfig::preset("small").unwrap();
    std::fs::write(dir.join("small.bin"), raw_stream(&small)).unwrap();
    let json = ok(vta_in(
        &dir,
        &["disasm", "small.bin", "--json", "--config", "small"],
    ));
    let codec = Codec::new(&small);
    let expect: String = sample_insns()
        .iter()
        .map(|i| codec.to_vta_json(i).unwrap().to_string() + "\n")
        .collect();
    assert_eq!(json, expect);
}

#[test]
fn disasm_uops() {
    let dir = scratch("uops");
    let cfg = HwConfig::default();
    let codec = Codec::new(&cfg);
    let uops = [
        Uop {
            dst_idx: 0,
            src_idx: 0,
            wgt_idx: 0,
        },
        Uop {
            dst_idx: 5,
            src_idx: 2047,
            wgt_idx: 1023,
        },
    ];
    let bytes: Vec<u8> = uops
        .iter()
        .flat_map(|u| codec.encode_uop(u).unwrap())
        .collect();
    std::fs::write(dir.join("uops.bin"), bytes).unwrap();
    insta::assert_snapshot!(
        "disasm_uops_text",
        ok(vta_in(&dir, &["disasm", "--uops", "uops.bin"]))
    );
    let json = ok(vta_in(&dir, &["disasm", "--uops", "uops.bin", "--json"]));
    assert_eq!(
        json,
        "{\"dst_idx\":0,\"src_idx\":0,\"wgt_idx\":0}\n\
         {\"dst_idx\":5,\"src_idx\":2047,\"wgt_idx\":1023}\n"
    );
    std::fs::write(dir.join("odd.bin"), [0u8; 6]).unwrap();
    let err = fails(vta_in(&dir, &["disasm", "--uops", "odd.bin"]));
    assert!(
        err.contains("odd.bin") && err.contains("4-byte micro-op"),
        "{err}"
    );
}

#[test]
fn container_disasm_asm_round_trip() {
    let dir = scratch("roundtrip");
    for preset in ["default", "rect"] {
        let p = sample_program(HwConfig::preset(preset).unwrap());
        let original = container::write(&p).unwrap();
        let a = format!("{preset}.vtab");
        std::fs::write(dir.join(&a), &original).unwrap();

        let text = ok(vta_in(&dir, &["disasm", &a]));
        let s = format!("{preset}.s");
        std::fs::write(dir.join(&s), &text).unwrap();
        let b = format!("{preset}-again.vtab");
        ok(vta_in(&dir, &["asm", &s, "-o", &b]));
        let again = std::fs::read(dir.join(&b)).unwrap();
        assert!(again == original, "{preset}: asm(disasm(x)) != x");
        assert_eq!(ok(vta_in(&dir, &["disasm", &b])), text);

        // The container's JSON view is the instruction stream's.
        let json = ok(vta_in(&dir, &["disasm", &a, "--json"]));
        let codec = Codec::new(&p.config);
        let expect: String = p
            .insns
            .iter()
            .map(|i| codec.to_vta_json(i).unwrap().to_string() + "\n")
            .collect();
        assert_eq!(json, expect);
    }
}

/// A hand-written source with a `.npy` initializer, relative to the source's directory.
const RELU_SRC: &str = "\
; relu of one 1x16 accumulator row
.config default
.buffer bias i32 [1, 16] input = file \"data/bias.npy\"
.buffer out  i8  [1, 16] output
.uops copy
    uop dst=0 src=0

load  acc sram=0 dram=bias y=1 x=1 stride=1
load  uop sram=0 dram=copy y=1 x=1 stride=1
alu   max uops=0..1 iter=1,1 imm=0 push_next
store out sram=0 dram=out y=1 x=1 stride=1 pop_prev push_prev
finish pop_next
";

#[test]
fn asm_disasm_asm_round_trip_from_source() {
    let dir = scratch("source");
    std::fs::create_dir_all(dir.join("src/data")).unwrap();
    let bias: Vec<u8> = (0..16i32)
        .flat_map(|i| ((i - 8) * 1000).to_le_bytes())
        .collect();
    let npy = isa::npy::encode(isa::npy::elem_of(DType::I32), &[1, 16], &bias);
    std::fs::write(dir.join("src/data/bias.npy"), npy).unwrap();
    std::fs::write(dir.join("src/relu.vasm"), RELU_SRC).unwrap();

    ok(vta_in(&dir, &["asm", "src/relu.vasm", "-o", "a.vtab"]));
    let a = std::fs::read(dir.join("a.vtab")).unwrap();
    let p = container::read(&a).unwrap();
    assert_eq!(p.insns.len(), 5);
    assert_eq!(p.segment("bias").unwrap().init.as_deref(), Some(&bias[..]));

    let text = ok(vta_in(&dir, &["disasm", "a.vtab"]));
    std::fs::write(dir.join("b.vasm"), &text).unwrap();
    ok(vta_in(&dir, &["asm", "b.vasm", "-o", "b.vtab"]));
    assert!(std::fs::read(dir.join("b.vtab")).unwrap() == a);

    // --config naming the same ISA is accepted; another ISA is refused by the assembler.
    ok(vta_in(
        &dir,
        &[
            "asm",
            "src/relu.vasm",
            "-o",
            "c.vtab",
            "--config",
            "wide-bus",
        ],
    ));
    let err = fails(vta_in(
        &dir,
        &["asm", "src/relu.vasm", "-o", "d.vtab", "--config", "small"],
    ));
    assert!(err.contains("src/relu.vasm:2:1:"), "{err}");
}

#[test]
fn error_assembly_points_at_the_line() {
    let dir = scratch("asm_error");
    std::fs::write(
        dir.join("bad.vasm"),
        ".config default\nfinish\nlaod inp sram=0 dram=0 y=1 x=1 stride=1\n",
    )
    .unwrap();
    let err = fails(vta_in(&dir, &["asm", "bad.vasm", "-o", "bad.vtab"]));
    assert!(err.starts_with("error: bad.vasm:3:1: "), "{err}");
    assert!(err.contains("laod"), "{err}");
    assert!(!dir.join("bad.vtab").exists());
}

#[test]
fn asm_without_output_writes_next_to_the_source() {
    let dir = scratch("default_out");
    let p = sample_program(HwConfig::default());
    let bytes = container::write(&p).unwrap();
    std::fs::write(dir.join("p.vtab"), &bytes).unwrap();
    let text = ok(vta_in(&dir, &["disasm", "p.vtab"]));
    std::fs::create_dir(dir.join("src")).unwrap();
    std::fs::write(dir.join("src/q.s"), text).unwrap();
    ok(vta_in(&dir, &["asm", "src/q.s"]));
    assert!(std::fs::read(dir.join("src/q.vtab")).unwrap() == bytes);
}

#[test]
fn error_missing_file() {
    let err = fails(vta(&["disasm", "no-such-file.bin"]));
    assert!(
        err.contains("no-such-file.bin") && err.contains("No such file"),
        "{err}"
    );
    let err = fails(vta(&["asm", "no-such-file.s", "-o", "x.vtab"]));
    assert!(err.contains("no-such-file.s"), "{err}");
    let err = fails(vta(&["config", "show", "--config", "no-such.json"]));
    assert!(err.contains("no-such.json"), "{err}");
}

#[test]
fn error_invalid_config() {
    let dir = scratch("badcfg");
    let json = HwConfig::default()
        .to_json()
        .replace("\"LOG_BLOCK\": 4", "\"LOG_BLOCK\": 11");
    std::fs::write(dir.join("big.json"), json).unwrap();
    let err = fails(vta_in(&dir, &["config", "show", "--config", "big.json"]));
    assert!(
        err.contains("big.json") && err.contains("LOG_BLOCK = 11"),
        "{err}"
    );
    // The same refusal wherever a config is taken.
    std::fs::write(dir.join("z.bin"), [0u8; 16]).unwrap();
    let err = fails(vta_in(&dir, &["disasm", "z.bin", "--config", "big.json"]));
    assert!(err.contains("LOG_BLOCK"), "{err}");

    std::fs::write(dir.join("broken.json"), "{\"LOG_BLOCK\": 4,").unwrap();
    let err = fails(vta_in(&dir, &["config", "show", "--config", "broken.json"]));
    assert!(
        err.contains("broken.json") && err.contains("not valid JSON"),
        "{err}"
    );
    let err = fails(vta(&["config", "show", "--config", "no-such-preset"]));
    assert!(
        err.contains("no-such-preset") && err.contains("default"),
        "{err}"
    );
}

#[test]
fn error_raw_stream_of_17_bytes() {
    let dir = scratch("len17");
    std::fs::write(dir.join("odd.bin"), [0u8; 17]).unwrap();
    let err = fails(vta_in(&dir, &["disasm", "odd.bin"]));
    assert!(
        err.contains("odd.bin") && err.contains("17 bytes is not a whole number of 16-byte"),
        "{err}"
    );
}

/// A disassembler lists every encodable instruction and marks what the config refuses (here
/// an unknown opcode and a LOAD beyond its buffer); the listing does not assemble back.
#[test]
fn disasm_lists_invalid_instructions_and_marks_them() {
    let dir = scratch("invalid");
    let mut bytes = raw_stream(&HwConfig::default());
    bytes[2 * 16] = (bytes[2 * 16] & !7) | 6;
    let codec = Codec::new(&HwConfig::default());
    let beyond = Insn::Load(mem(MemType::Acc, 0, 0, 1));
    let mut word = u128::from_le_bytes(codec.encode(&beyond).unwrap());
    let sram = codec.mem.slot(isa::Field::SramBase);
    word |= ((1u128 << sram.width) - 1) << sram.lsb;
    bytes.extend(word.to_le_bytes());
    std::fs::write(dir.join("op.bin"), &bytes).unwrap();
    let n = bytes.len() / 16;

    let out = vta_in(&dir, &["disasm", "op.bin"]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let text = ok(out);
    assert_eq!(text.lines().count(), n, "{text}");
    let line2 = text.lines().nth(2).unwrap();
    assert!(
        line2.starts_with(".word 0x") && line2.contains("; #2 invalid: unknown opcode 6"),
        "{text}"
    );
    let last = text.lines().last().unwrap();
    assert!(
        last.starts_with("load  acc")
            && last.contains("invalid: sram_base")
            && last.contains("beyond the ACC buffer"),
        "{text}"
    );
    let marked = text.lines().filter(|l| l.contains("invalid:")).count();
    assert_eq!(marked, 2, "{text}");
    assert!(
        err.contains(&format!("2 of {n} instructions are invalid")),
        "{err}"
    );

    let json = ok(vta_in(&dir, &["disasm", "op.bin", "--json"]));
    let rows: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), n);
    assert_eq!(rows[2]["opcode"], 6);
    assert!(rows[2]["invalid"]
        .as_str()
        .unwrap()
        .contains("unknown opcode 6"));
    assert_eq!(rows[n - 1]["opcode"], "LOAD");
    assert_eq!(rows[n - 1]["sram_base"], (1u64 << sram.width) - 1);
    assert!(rows.iter().filter(|r| r.get("invalid").is_some()).count() == 2);

    // The listing does not assemble back: the assembler refuses what the simulator would.
    std::fs::write(dir.join("op.vasm"), format!(".config default\n{text}")).unwrap();
    let err = fails(vta_in(&dir, &["asm", "op.vasm", "-o", "op.vtab"]));
    assert!(err.contains(".word"), "{err}");
}

#[test]
fn error_container_for_another_config() {
    let dir = scratch("wrongcfg");
    let p = sample_program(HwConfig::default());
    std::fs::write(dir.join("p.vtab"), container::write(&p).unwrap()).unwrap();
    let err = fails(vta_in(&dir, &["disasm", "p.vtab", "--config", "batched"]));
    assert!(
        err.contains("p.vtab")
            && err.contains("1x16_i8w8a32_15_15_18_17")
            && err.contains("4x8_i8w8a32_15_16_16_18")
            && err.contains("vta asm --config"),
        "{err}"
    );
    // A config with the same ISA (only the bus differs) is accepted.
    ok(vta_in(&dir, &["disasm", "p.vtab", "--config", "wide-bus"]));
}

#[test]
fn error_damaged_containers() {
    let dir = scratch("damaged");
    let good = container::write(&sample_program(HwConfig::default())).unwrap();
    std::fs::write(dir.join("cut.vtab"), &good[..good.len() / 2]).unwrap();
    let err = fails(vta_in(&dir, &["disasm", "cut.vtab"]));
    assert!(
        err.contains("cut.vtab") && err.contains("truncated: the file has"),
        "{err}"
    );
    let mut flipped = good.clone();
    flipped[40] ^= 4;
    std::fs::write(dir.join("flip.vtab"), flipped).unwrap();
    let err = fails(vta_in(&dir, &["disasm", "flip.vtab"]));
    assert!(err.contains("checksum mismatch"), "{err}");
    let mut newer = good;
    newer[8] = 9;
    std::fs::write(dir.join("new.vtab"), newer).unwrap();
    let err = fails(vta_in(&dir, &["disasm", "new.vtab"]));
    assert!(err.contains("format version 9 is newer"), "{err}");
    let err = fails(vta_in(&dir, &["disasm", "--uops", "new.vtab"]));
    assert!(err.contains("container"), "{err}");
    // Garbage after the magic is damage, not a format from the future.
    std::fs::write(dir.join("garbage.vtab"), b"VTAPROG\0garbage garbage").unwrap();
    let err = fails(vta_in(&dir, &["disasm", "garbage.vtab"]));
    assert!(
        err.contains("not a valid version") && err.contains("corrupted"),
        "{err}"
    );
}

#[test]
fn error_empty_files_and_compiled_models_are_named() {
    let dir = scratch("other_files");
    std::fs::write(dir.join("empty.vtab"), b"").unwrap();
    std::fs::write(dir.join("model.vtab"), b"VTAMODEL\x02\0\0\0").unwrap();
    for cmd in ["disasm", "sim"] {
        let err = fails(vta_in(&dir, &[cmd, "empty.vtab"]));
        assert!(err.contains("the file is empty"), "{cmd}: {err}");
        let err = fails(vta_in(&dir, &[cmd, "model.vtab"]));
        assert!(
            err.contains("compiled model") && err.contains("vta run"),
            "{cmd}: {err}"
        );
    }
}

#[test]
fn error_garbage_assembly_input() {
    let dir = scratch("garbage_asm");
    std::fs::write(dir.join("bin.s"), [0xffu8, 0xfe, 0x00]).unwrap();
    let err = fails(vta_in(&dir, &["asm", "bin.s", "-o", "x.vtab"]));
    assert!(err.contains("bin.s") && err.contains("UTF-8"), "{err}");
    assert!(!dir.join("x.vtab").exists());
}

#[test]
fn usage_errors_exit_with_2() {
    let out = vta(&["disasm"]);
    assert_eq!(out.status.code(), Some(2));
    let out = vta(&["frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
}
