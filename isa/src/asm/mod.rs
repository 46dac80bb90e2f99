//! The text assembly format: a parser ([`parse_program`]) and a printer ([`print_program`])
//! such that `parse_program(&print_program(p), ctx) == Ok(p)` for every valid [`Program`].
//!
//! A source file describes a whole [`Program`]: the config it is built for, the named DRAM
//! segments with their types, shapes, roles and contents, and the instruction stream.
//!
//! # Example
//!
//! ```text
#![doc = include_str!("example.vasm")]
//! ```
//!
//! # Lexical structure
//!
//! - One statement per line. Blank lines are ignored. A comment starts with `;` or `#` and runs
//!   to the end of the line; it may follow any statement.
//! - Tokens are separated by spaces or tabs. Operands are written without spaces inside them
//!   (`iter=1,2`, `dram=x+16`); shapes and value lists (`[2, 16]`) may contain spaces, and a
//!   list may continue over several lines (with comments) until its closing `]`.
//! - Numbers are decimal (`42`, `-3`) or hexadecimal (`0x2a`, `-0x3`).
//! - Names (of segments) are identifiers, `[A-Za-z_][A-Za-z0-9_.]*`, or double-quoted strings
//!   for any other text. Strings are also used for file paths; they end on their line and
//!   support the escapes `\\`, `\"`, `\n`, `\t`, `\r` and `\u{HEX}`.
//!
//! # Directives
//!
//! ## `.config`
//!
//! ```text
//! .config default                  ; a built-in preset (see isa::config::PRESETS)
//! .config "configs/my_vta.json"    ; a config file, relative to AsmContext::base_dir
//! .config {"TARGET":"sim", ...}    ; the config itself, as a JSON object
//! ```
//!
//! Optional; at most one, before every other statement. The config used is:
//! - [`AsmContext::config`] when it is set (for instance by a `--config` option). If the file
//!   has a `.config` too, both must describe the same instruction set (equal
//!   [`HwConfig::isa_hash`]), else the file is refused with both config strings in the message;
//!   the context's config wins, so it may differ in micro-architecture (bus width, queues);
//! - otherwise the file's `.config`;
//! - otherwise the `default` preset.
//!
//! ## `.buffer`
//!
//! ```text
//! .buffer NAME DTYPE [D0, D1, ...] [input] [output] [offset=BYTES] [= INITIALIZER]
//! ```
//!
//! Declares a DRAM segment. `DTYPE` is `i8`, `u8`, `i16`, `i32`, `u32` or `uop` (raw 32-bit
//! micro-op words). The shape is row-major and may be empty (`[]`, one element). The roles say
//! how the host uses the segment: `input` (the user may supply its contents at run time) and
//! `output` (its contents are returned after the run); either, both or neither. The
//! initializer is one of:
//!
//! - `[V0, V1, ...]`: every element, row-major; exactly `product(shape)` values, each in the
//!   range of the dtype (`uop` and `u32` take `0..=0xffffffff`); a trailing comma is allowed;
//! - `file "PATH.npy"`: a NumPy file, relative to [`AsmContext::base_dir`], whose element type
//!   must be the dtype's (`int8`, `uint8`, `int16`, `int32`, `uint32`; `uint32` for `uop`) and
//!   whose shape must be the declared shape (see [`crate::npy`]);
//! - `zeros`: all elements zero.
//!
//! Without an initializer the segment has no initial data ([`crate::Segment::init`] is
//! `None`); it reads as zeros.
//!
//! Segments are laid out in declaration order, each at the next multiple of
//! [`Program::dram_align`] after the previous ones (as [`Program::push_segment`] does).
//! `offset=BYTES` places a segment further up instead; it must be aligned and not overlap the
//! segments before it. The printer writes it only for programs laid out otherwise.
//!
//! ## `.uops`
//!
//! ```text
//! .uops NAME [SHAPE] [input] [output] [offset=BYTES]
//!     uop dst=D src=S wgt=W
//!     ...
//! ```
//!
//! Declares a segment of dtype `uop` whose contents are the micro-ops on the `uop` lines that
//! follow it (each encoded with [`crate::Codec::encode_uop`]; indices must fit their fields
//! under the config). `dst=`, `src=` and `wgt=` default to 0. The shape defaults to
//! `[number of uop lines]`; when given, its element count must equal that number. `uop` lines
//! are only valid directly after a `.uops` (or another `uop` line); any other statement ends
//! the block. A `.uops` without `uop` lines declares an empty segment.
//!
//! # Instructions
//!
//! ```text
//! load  MEM sram=N dram=ADDR y=N x=N stride=N [pad=Y0,Y1,X0,X1] [FLAGS]
//! store out sram=N dram=ADDR y=N x=N stride=N [FLAGS]
//! gemm  uops=BEGIN..END iter=OUT,IN [dst=OUT,IN] [src=OUT,IN] [wgt=OUT,IN] [reset] [FLAGS]
//! alu   OP uops=BEGIN..END iter=OUT,IN [dst=OUT,IN] [src=OUT,IN] [imm=V | rawimm=V] [reset] [FLAGS]
//! finish [FLAGS]
//! ```
//!
//! - `MEM`, the scratchpad, is `uop`, `wgt`, `inp`, `acc`, `acc8` (LOAD) or `out` (STORE).
//! - `sram=` is `sram_base`, `y=` `y_size`, `x=` `x_size`, `stride=` `x_stride`, and
//!   `pad=` the four padding counts (default `0,0,0,0`); sizes count elements of `MEM`.
//! - `dram=` is `dram_base`, an element index of `MEM` from the start of the program's DRAM
//!   region: a number, or `NAME`, `NAME+N` or `NAME-N` for the element `N` elements after the
//!   start of segment `NAME` (declared above the instruction), that is
//!   `offset(NAME) / element_bytes(MEM) + N`.
//! - `uops=BEGIN..END` is `uop_bgn` and `uop_end` (exclusive); `iter=OUT,IN` is
//!   `iter_out,iter_in`; `dst=`, `src=` and `wgt=` are the `*_factor_out,*_factor_in` pairs of
//!   the micro-op loop and default to `0,0`. `uops=` and `iter=` are required.
//! - `OP` is `min`, `max`, `add`, `shr` or `mul`, or on a config with the activation table
//!   (`ALU_LUT`) `lut` (table lookup) or `lutw` (table write), see [`crate::spec`] 8.3.
//!   `imm=V` (signed 16 bits) makes the second operand the immediate (`use_imm = 1`); without
//!   it the second operand is the tensor at `src` (`use_imm = 0`). `rawimm=V` keeps `use_imm = 0` but sets the unused `imm` field, so
//!   that any decoded instruction prints exactly.
//! - `reset` sets `reset_reg` (GEMM and ALU).
//! - `FLAGS` are the dependency-token flags `pop_prev`, `pop_next`, `push_prev` and
//!   `push_next`, in any order.
//!
//! Operands may come in any order. Every value is checked against the range of its field in
//! the config's layout ([`crate::layout::Layout::range`]; the message gives the range and the
//! field's width), and every instruction against the config as it is parsed
//! ([`crate::Codec::encode`]): an SRAM index beyond its buffer, a STORE from a buffer other
//! than OUT or an ALU `mul`, `lut` or `lutw` on a config without it is an error at the operand or word the
//! problem is about ([`crate::IsaError::field`]).
//!
//! The parser and the printer both follow one table of this syntax (mnemonics, the word after
//! them, operands with the fields they hold, flags), so that they cannot disagree.
//!
//! # Errors
//!
//! [`AsmError`] reports the first problem as `FILE:LINE:COL: message`, followed by the source
//! line and a caret under the column; the message names the offending token.
//!
//! # Printed form
//!
//! [`print_program`] writes `.config` (a preset name when the config equals a preset, else the
//! inline JSON object), then one `.buffer` or `.uops` per segment, then the instructions, each
//! with a `; #INDEX` comment. Segments of dtype `uop` print as `.uops` blocks when they have
//! contents made of micro-ops that re-encode to the same words, and as `.buffer NAME uop` with
//! hexadecimal words otherwise. Contents that are all zero print as `zeros`. LOAD/STORE
//! addresses print symbolically (`NAME` or `NAME+N`) when they fall inside a segment (see
//! [`Program::locate`]) and the instruction moves data (`x_size > 0`), numerically otherwise.

mod insns;
mod lex;
mod operands;
mod parse;
mod print;
mod segments;
mod syntax;

use std::fmt;
use std::path::PathBuf;

use crate::config::HwConfig;
use crate::insn::{Insn, Uop};
use crate::layout::ListedInsn;
use crate::program::Program;

/// Where a source text comes from and which config to assemble it for.
#[derive(Debug, Clone, Default)]
pub struct AsmContext {
    /// The name errors report (usually the path given by the user).
    pub file_name: String,
    /// The directory relative `.config` and `file "..."` paths are resolved against.
    pub base_dir: PathBuf,
    /// A config chosen outside the file; see the module documentation for how it combines
    /// with the file's `.config`.
    pub config: Option<HwConfig>,
}

/// An assembly error at a position of the source.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{col}: {message}\n{}", Snippet(self))]
pub struct AsmError {
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub col: usize,
    pub message: String,
    /// The text of the line, without its line break.
    pub source_line: String,
}

/// The source line and a caret under the column.
struct Snippet<'a>(&'a AsmError);

impl fmt::Display for Snippet<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = self.0;
        // Keep tabs so that the caret lines up in a terminal.
        let lead: String = e
            .source_line
            .chars()
            .take(e.col.saturating_sub(1))
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        write!(f, "{}\n{lead}^", e.source_line)
    }
}

impl AsmError {
    /// An error at byte `pos` of `src`.
    fn at(file: &str, src: &str, pos: usize, message: String) -> Self {
        let pos = floor_char_boundary(src, pos.min(src.len()));
        let (line, col) = line_col(src, pos);
        let start = src[..pos].rfind('\n').map_or(0, |i| i + 1);
        let end = src[pos..].find('\n').map_or(src.len(), |i| pos + i);
        AsmError {
            file: file.to_string(),
            line,
            col,
            message,
            source_line: src[start..end].trim_end_matches('\r').to_string(),
        }
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// 1-based line and column (in characters) of byte `pos`.
fn line_col(src: &str, pos: usize) -> (usize, usize) {
    let pos = floor_char_boundary(src, pos.min(src.len()));
    let before = &src[..pos];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[start..].chars().count() + 1)
}

/// Assembles a source text into a program.
pub fn parse_program(src: &str, ctx: &AsmContext) -> Result<Program, AsmError> {
    parse::parse_program(src, ctx)
}

/// The full, self-contained text of a program; [`parse_program`] reads it back unchanged.
pub fn print_program(p: &Program) -> String {
    print::print_program(p)
}

/// Instructions only, one per line with a `; #INDEX` comment, LOAD/STORE addresses as numbers.
/// Parsed with `cfg` as [`AsmContext::config`] it gives a program with these instructions and
/// no segments.
pub fn print_insns(cfg: &HwConfig, insns: &[Insn]) -> String {
    print::print_insns(cfg, insns)
}

/// A raw stream as [`Codec::list_stream`](crate::Codec::list_stream) lists it: like
/// [`print_insns`], with `invalid: WHY` after the index of every instruction the config
/// refuses, and a word whose fields spell no instruction (an unknown opcode, memory type or
/// ALU operation) as `.word 0x...`, which the assembler refuses, as it refuses every
/// invalid instruction. A listing with no invalid instruction is exactly `print_insns`'
/// text.
pub fn print_listing(listed: &[ListedInsn]) -> String {
    print::print_listing(listed)
}

/// Micro-ops, one `uop dst=.. src=.. wgt=..` line each.
pub fn print_uops(cfg: &HwConfig, uops: &[Uop]) -> String {
    print::print_uops(cfg, uops)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_characters_and_lines() {
        let src = "ab\n\tcé x\n";
        assert_eq!(line_col(src, 0), (1, 1));
        assert_eq!(line_col(src, 3), (2, 1));
        let x = src.find('x').unwrap();
        assert_eq!(line_col(src, x), (2, 5));
        let e = AsmError::at("f.s", src, x, "bad".into());
        assert_eq!(e.to_string(), "f.s:2:5: bad\n\tcé x\n\t   ^");
        let e = AsmError::at("f.s", src, src.len(), "end".into());
        assert_eq!((e.line, e.col, e.source_line.as_str()), (3, 1, ""));
    }
}
