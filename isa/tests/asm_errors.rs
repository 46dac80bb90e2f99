//! Bad input is refused with `FILE:LINE:COL: message` naming the offending token, never a
//! panic.

use std::path::PathBuf;

use isa::asm::{parse_program, AsmContext, AsmError};
use isa::npy::{self, Elem};
use isa::HwConfig;

fn ctx() -> AsmContext {
    AsmContext {
        file_name: "bad.vasm".into(),
        base_dir: PathBuf::from("."),
        config: None,
    }
}

fn parse_err_with(src: &str, ctx: &AsmContext) -> AsmError {
    match parse_program(src, ctx) {
        Ok(p) => panic!("expected an error, got {p:?}"),
        Err(e) => e,
    }
}

/// Asserts the error is at `line:col` and its message contains every one of `needles`.
#[track_caller]
fn check_with(src: &str, ctx: &AsmContext, line: usize, col: usize, needles: &[&str]) {
    let e = parse_err_with(src, ctx);
    let text = e.to_string();
    let head = format!("bad.vasm:{line}:{col}: ");
    assert!(text.starts_with(&head), "expected {head}...\ngot:\n{text}");
    for n in needles {
        assert!(text.contains(n), "expected {n:?} in:\n{text}");
    }
    // The source line and a caret under the column follow the message.
    let lines: Vec<&str> = text.lines().collect();
    let caret = lines.last().unwrap();
    assert_eq!(caret.trim_start(), "^", "{text}");
    assert_eq!(caret.chars().count(), col, "{text}");
    assert_eq!(
        lines[lines.len() - 2],
        src.lines().nth(line - 1).unwrap_or("")
    );
}

#[track_caller]
fn check(src: &str, line: usize, col: usize, needles: &[&str]) {
    check_with(src, &ctx(), line, col, needles);
}

const BUFS: &str = ".buffer x i8 [2, 16] input\n.buffer y i8 [2, 16] output\n";

#[test]
fn unknown_mnemonic() {
    check(
        "finish\n  lod inp sram=0\n",
        2,
        3,
        &["unknown mnemonic 'lod'"],
    );
    check(
        "42\n",
        1,
        1,
        &["expected a directive, an instruction or a micro-op", "'42'"],
    );
}

#[test]
fn unknown_memory_type_and_alu_op() {
    check(
        "load  wgts sram=0\n",
        1,
        7,
        &["unknown memory type 'wgts'", "acc8"],
    );
    check("store\n", 1, 6, &["expected a memory type", "end of line"]);
    check(
        "alu mix uops=0..1 iter=1,1\n",
        1,
        5,
        &["unknown ALU operation 'mix'"],
    );
}

#[test]
fn unknown_key_and_flag() {
    check(
        "gemm uops=0..1 iter=1,1 imm=3\n",
        1,
        25,
        &["unknown key 'imm' for gemm", "wgt="],
    );
    check(
        "finish pop_prev bogus\n",
        1,
        17,
        &["unknown operand 'bogus'", "push_next"],
    );
    check("finish reset\n", 1, 8, &["unknown operand 'reset'"]);
    check(
        "gemm uops=0..1 iter=1,1 reset=1\n",
        1,
        25,
        &["'reset' is a flag"],
    );
    check("gemm uops=0..1 iter\n", 1, 16, &["'iter' needs a value"]);
}

#[test]
fn missing_required_key() {
    check(
        "gemm uops=0..1 wgt=1,1\n",
        1,
        1,
        &["gemm needs iter=OUT,IN"],
    );
    check("alu add iter=1,1\n", 1, 1, &["alu needs uops=BEGIN..END"]);
    let src = format!("{BUFS}load inp sram=0 dram=x y=1 x=1\n");
    check(&src, 3, 1, &["load needs stride=N"]);
}

#[test]
fn duplicate_key_and_flag() {
    check(
        "load inp sram=0 dram=0 y=1 x=1 sram=2 stride=1\n",
        1,
        32,
        &["duplicate key 'sram'", "column 10"],
    );
    check(
        "finish pop_next pop_next\n",
        1,
        17,
        &["duplicate flag 'pop_next'"],
    );
    check(
        "alu add uops=0..1 iter=1,1 imm=1 rawimm=2\n",
        1,
        34,
        &["imm= and rawimm= cannot both be given"],
    );
}

#[test]
fn values_too_large_for_their_fields() {
    // The default config has 11-bit ACC indices: dst factors stop at 2047.
    check(
        "gemm uops=0..1 iter=1,1 dst=2048,0\n",
        1,
        29,
        &[
            "2048 is out of range for dst_factor_out",
            "between 0 and 2047",
            "11 bits",
            "1x16_i8w8a32_15_15_18_17",
        ],
    );
    // ... and the INP buffer has 2048 rows.
    check(
        "load inp sram=2048 dram=0 y=1 x=1 stride=1\n",
        1,
        10,
        &["sram_base 2048", "INP"],
    );
    check(
        "load inp sram=0 dram=0 y=70000 x=1 stride=1\n",
        1,
        26,
        &["70000", "y_size"],
    );
    check(
        "gemm uops=0..8193 iter=1,1\n",
        1,
        6,
        &["uop_end 8193", "8192"],
    );
    check(
        "gemm uops=0..1 iter=16384,1\n",
        1,
        21,
        &[
            "16384 is out of range for iter_out",
            "between 0 and 16383",
            "14 bits",
        ],
    );
    check(
        "alu add uops=0..1 iter=1,1 imm=40000\n",
        1,
        32,
        &["40000", "imm"],
    );
    check(
        "load inp sram=0 dram=0x100000000 y=1 x=1 stride=1\n",
        1,
        22,
        &["4294967296", "dram"],
    );
    check(
        "load inp sram=0 dram=0 y=1 x=1 stride=1 pad=0,16,0,0\n",
        1,
        47,
        &["16", "y_pad_1"],
    );
    check(
        "gemm uops=0..1 iter=1,1 dst=99999999999999999999999999999999999999999,0\n",
        1,
        29,
        &["too large"],
    );
    check(
        ".uops k\n    uop dst=0 src=0 wgt=1024\n",
        2,
        25,
        &["1024 is out of range for wgt_idx", "10 bits"],
    );
}

#[test]
fn operations_the_config_or_isa_refuse() {
    check(
        "store acc sram=0 dram=0 y=1 x=1 stride=1\n",
        1,
        7,
        &["STORE reads only the OUT buffer"],
    );
    check(
        "store out sram=0 dram=0 y=1 x=1 stride=1 pad=1,0,0,0\n",
        1,
        42,
        &["STORE has no padding"],
    );
    let nomul = HwConfig {
        alu_mul: false,
        ..HwConfig::default()
    };
    let c = AsmContext {
        config: Some(nomul),
        ..ctx()
    };
    check_with("alu mul uops=0..1 iter=1,1 imm=2\n", &c, 1, 5, &["ALU MUL"]);
}

#[test]
fn symbols() {
    check(
        &format!("{BUFS}load inp sram=0 dram=z y=1 x=1 stride=1\n"),
        3,
        22,
        &["no segment named 'z'"],
    );
    check(
        &format!("{BUFS}load inp sram=0 dram=x-1 y=1 x=1 stride=1\n"),
        3,
        22,
        &["-1 is out of range", "dram"],
    );
    check(
        "load inp sram=0 dram=x y=1 x=1 stride=1\n.buffer x i8 [16]\n",
        1,
        22,
        &["no segment named 'x'", "before this instruction"],
    );
    check(
        ".buffer x i8 [1]\n.buffer x i8 [1]\n",
        2,
        9,
        &["segment 'x' is declared twice"],
    );
    check(".buffer \"\" i8 [1]\n", 1, 9, &["cannot be empty"]);
    check(".buffer \"abc i8 [1]\n", 1, 9, &["unterminated string"]);
    check(
        ".buffer \"a\\qb\" i8 [1]\n",
        1,
        11,
        &["unknown escape '\\q'"],
    );
}

#[test]
fn config_directive() {
    check(
        ".buffer x i8 [1]\n.config default\n",
        2,
        1,
        &[".config must come before"],
    );
    check(
        ".config default\n.config small\n",
        2,
        1,
        &["a second .config", "line 1"],
    );
    check(
        ".config tiny\n",
        1,
        9,
        &["unknown preset 'tiny'", "wide-bus"],
    );
    check(
        ".config \"no/such.json\"\n",
        1,
        9,
        &["cannot read config file", "no/such.json"],
    );
    check(
        ".config {\"LOG_BLOCK\": 4}\n",
        1,
        9,
        &["missing key LOG_INP_WIDTH"],
    );
    check(
        ".config {\"LOG_BLOCK\": 4\n",
        1,
        9,
        &["unterminated JSON object"],
    );
    let c = AsmContext {
        config: Some(HwConfig::preset("batched").unwrap()),
        ..ctx()
    };
    check_with(
        "; for the default shape\n.config default\nfinish\n",
        &c,
        2,
        1,
        &[
            "1x16_i8w8a32_15_15_18_17",
            "4x8_i8w8a32_15_16_16_18",
            "differ",
        ],
    );
}

#[test]
fn buffers() {
    check(".buffer x f32 [4]\n", 1, 11, &["unknown dtype 'f32'"]);
    check(".buffer x i8 4\n", 1, 14, &["expected a shape", "'4'"]);
    check(
        ".buffer x i8 [4] inputs\n",
        1,
        18,
        &["expected input, output", "'inputs'"],
    );
    check(
        ".buffer x i8 [4] input input\n",
        1,
        24,
        &["'input' is given twice"],
    );
    check(
        ".buffer x i8 [2, 2] = [1, 2, 3]\n",
        1,
        23,
        &["3 values given but shape [2, 2] holds 4"],
    );
    check(
        ".buffer x i8 [2, 2] = [1, 2,\n   3, 200]\n",
        2,
        7,
        &["value 200 at index 3 does not fit i8"],
    );
    check(
        ".buffer x u8 [2] = [1, -1]\n",
        1,
        24,
        &["value -1 at index 1", "u8"],
    );
    check(
        ".buffer x i8 [2] = [1 2]\n",
        1,
        23,
        &["expected ',' or ']'", "'2]'"],
    );
    check(
        ".buffer x i8 [2] = ones\n",
        1,
        20,
        &["expected '['", "'ones'"],
    );
    check(
        ".buffer x i8 [2] offset=100\n",
        1,
        25,
        &["offset=100", "multiple of 256"],
    );
    check(
        ".buffer x i8 [4294967295, 4294967295]\n",
        1,
        14,
        &["larger than"],
    );
    check(
        ".buffer x i8 [2] = zeros junk\n",
        1,
        26,
        &["expected the end of the line", "'junk'"],
    );
}

#[test]
fn micro_op_blocks() {
    check("uop dst=0 src=0 wgt=0\n", 1, 1, &["must follow a .uops"]);
    check(
        ".uops k\nfinish\nuop dst=1\n",
        3,
        1,
        &["must follow a .uops"],
    );
    check(
        ".uops k [3]\n    uop dst=1\n    uop dst=2\nfinish\n",
        1,
        1,
        &["declares shape [3] (3 micro-ops) but 2 uop lines"],
    );
    check(".uops k = [1]\n", 1, 9, &["uop lines that follow"]);
    check(
        ".uops k\n    uop iter=1\n",
        2,
        9,
        &["unknown key 'iter' for uop"],
    );
    check(".directive\n", 1, 1, &["unknown directive '.directive'"]);
}

#[test]
fn npy_initializers() {
    let dir = std::env::temp_dir().join(format!("isa-asm-errors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    npy::write_file(&dir.join("a.npy"), Elem::I16, &[2, 2], &[0; 8]).unwrap();
    let c = AsmContext {
        base_dir: dir.clone(),
        ..ctx()
    };
    check_with(
        ".buffer x i8 [2, 2] = file \"a.npy\"\n",
        &c,
        1,
        28,
        &["a.npy holds int16", "declared i8"],
    );
    check_with(
        ".buffer x i16 [4] = file \"a.npy\"\n",
        &c,
        1,
        26,
        &["a.npy has shape [2, 2]", "[4]"],
    );
    check_with(
        ".buffer x i16 [2, 2] = file \"b.npy\"\n",
        &c,
        1,
        29,
        &["cannot load", "b.npy"],
    );
    check_with(
        ".buffer x i16 [2, 2] = file b.npy\n",
        &c,
        1,
        29,
        &["quoted .npy file path"],
    );
    // The good case, for contrast.
    let p = parse_program(".buffer x i16 [2, 2] = file \"a.npy\"\n", &c).unwrap();
    assert_eq!(p.segments[0].init.as_deref(), Some(&[0u8; 8][..]));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn operand_syntax() {
    check(
        "gemm uops=0-1 iter=1,1\n",
        1,
        12,
        &["expected '..'", "'-1'"],
    );
    check(
        "gemm uops=0..1 iter=1\n",
        1,
        22,
        &["expected ',' in iter=OUT,IN"],
    );
    check("gemm uops=0..1 iter=1,1x\n", 1, 24, &["unexpected 'x'"]);
    check(
        "load inp sram=0 dram=+1 y=1 x=1 stride=1\n",
        1,
        22,
        &["expected an address"],
    );
    check("finish ,\n", 1, 8, &["expected an operand", "','"]);
}

#[test]
fn tabs_and_crlf_keep_positions() {
    check(
        "finish\r\n\tgemm uops=0..1 iter=1,1 dst=0,4096\r\n",
        2,
        32,
        &["dst_factor_in"],
    );
}
