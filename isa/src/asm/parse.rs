//! The assembler: source text to [`Program`].
//!
//! Tokens are recognized with `nom` parsers; a cursor over the whole source drives them
//! statement by statement and turns every failure into a message at a byte position, which
//! [`AsmError`] renders as `FILE:LINE:COL`.

use std::path::Path;

use nom::branch::alt;
use nom::bytes::complete::{tag_no_case, take_till, take_while, take_while1};
use nom::character::complete::{char, digit1, hex_digit1, one_of, satisfy};
use nom::combinator::{opt, recognize};
use nom::multi::many0_count;
use nom::sequence::preceded;
use nom::{IResult, Parser};

use super::{AsmContext, AsmError};
use crate::config::{HwConfig, PRESETS};
use crate::insn::{AluInsn, AluOp, DepFlags, GemmInsn, Insn, MemInsn, MemType, Uop, UopLoop};
use crate::layout::{Codec, Field, IsaError};
use crate::npy;
use crate::program::{DType, Program, Role};

/// The largest segment the assembler accepts, in bytes.
const MAX_SEGMENT_BYTES: u64 = 1 << 32;

/// An error at a byte position of the source.
struct Diag {
    pos: usize,
    msg: String,
}

type R<T> = Result<T, Diag>;

pub(super) fn parse_program(src: &str, ctx: &AsmContext) -> Result<Program, AsmError> {
    Assembler {
        cur: Cur { src, rest: src },
        ctx,
    }
    .run()
    .map_err(|d| AsmError::at(&ctx.file_name, src, d.pos, d.msg))
}

// ---------------------------------------------------------------------------------------------
// Tokens

fn is_space(c: char) -> bool {
    c == ' ' || c == '\t' || c == '\r'
}

pub(super) fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

pub(super) fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '.'
}

/// `; ...` or `# ...` up to (not including) the end of the line.
fn comment(i: &str) -> IResult<&str, &str> {
    recognize((one_of(";#"), take_till(|c| c == '\n'))).parse(i)
}

/// Spaces and comments, not newlines.
fn blank(i: &str) -> IResult<&str, usize> {
    many0_count(alt((take_while1(is_space), comment))).parse(i)
}

/// Spaces, comments and newlines.
fn blank_lines(i: &str) -> IResult<&str, usize> {
    many0_count(alt((take_while1(|c| is_space(c) || c == '\n'), comment))).parse(i)
}

/// `[A-Za-z_][A-Za-z0-9_.]*`
fn ident(i: &str) -> IResult<&str, &str> {
    recognize((satisfy(is_ident_start), take_while(is_ident_char))).parse(i)
}

/// A directive name: `.` followed by an identifier.
fn directive(i: &str) -> IResult<&str, &str> {
    recognize((char('.'), ident)).parse(i)
}

/// A preset name such as `wide-bus`.
fn preset_word(i: &str) -> IResult<&str, &str> {
    take_while1(|c: char| c.is_ascii_alphanumeric() || "_-.".contains(c)).parse(i)
}

/// An integer literal: optional `-`, then decimal digits or `0x` and hex digits.
/// Returns (negative, digits, radix).
fn int_literal(i: &str) -> IResult<&str, (bool, &str, u32)> {
    let (i, neg) = opt(char('-')).parse(i)?;
    let (i, (digits, radix)) = alt((
        preceded(tag_no_case("0x"), hex_digit1).map(|d| (d, 16)),
        digit1.map(|d| (d, 10)),
    ))
    .parse(i)?;
    Ok((i, (neg.is_some(), digits, radix)))
}

/// A cursor over the source.
struct Cur<'a> {
    src: &'a str,
    rest: &'a str,
}

impl<'a> Cur<'a> {
    fn pos(&self) -> usize {
        self.src.len() - self.rest.len()
    }

    fn eat<T>(
        &mut self,
        mut p: impl Parser<&'a str, Output = T, Error = nom::error::Error<&'a str>>,
    ) -> Option<T> {
        match p.parse(self.rest) {
            Ok((rest, v)) => {
                self.rest = rest;
                Some(v)
            }
            Err(_) => None,
        }
    }

    fn eat_char(&mut self, c: char) -> bool {
        match self.rest.strip_prefix(c) {
            Some(rest) => {
                self.rest = rest;
                true
            }
            None => false,
        }
    }

    fn eat_str(&mut self, s: &str) -> bool {
        match self.rest.strip_prefix(s) {
            Some(rest) => {
                self.rest = rest;
                true
            }
            None => false,
        }
    }

    fn peek(&self) -> Option<char> {
        self.rest.chars().next()
    }

    fn blank(&mut self) {
        self.eat(blank);
    }

    fn blank_lines(&mut self) {
        self.eat(blank_lines);
    }

    /// Skips spaces and a comment; true at the end of the line or of the file.
    fn at_eol(&mut self) -> bool {
        self.blank();
        self.rest.is_empty() || self.rest.starts_with('\n')
    }

    /// The next token, quoted, for messages.
    fn found(&self) -> String {
        if self.rest.is_empty() {
            return "end of file".into();
        }
        if self.rest.starts_with('\n') || self.rest.starts_with("\r\n") {
            return "end of line".into();
        }
        let end = self
            .rest
            .find(|c: char| c.is_whitespace() || c == ';' || c == '#')
            .unwrap_or(self.rest.len());
        let token = if end == 0 {
            &self.rest[..self.rest.chars().next().map_or(0, char::len_utf8)]
        } else {
            &self.rest[..end]
        };
        let shown: String = token.chars().take(40).collect();
        format!("'{shown}'")
    }

    fn err<T>(&self, msg: impl Into<String>) -> R<T> {
        Err(Diag {
            pos: self.pos(),
            msg: msg.into(),
        })
    }

    fn expected<T>(&self, what: &str) -> R<T> {
        self.err(format!("expected {what}, found {}", self.found()))
    }

    fn expect_char(&mut self, c: char, what: &str) -> R<()> {
        if self.eat_char(c) {
            Ok(())
        } else {
            self.expected(what)
        }
    }

    /// An operand or word must be followed by a space, a comment or the end of the line.
    fn end_token(&self) -> R<()> {
        match self.peek() {
            None | Some(' ' | '\t' | '\r' | '\n' | ';' | '#') => Ok(()),
            _ => self.err(format!("unexpected {}", self.found())),
        }
    }

    /// The end of a statement: only spaces and a comment may follow on its line.
    fn end_statement(&mut self) -> R<()> {
        if self.at_eol() {
            self.eat_char('\n');
            Ok(())
        } else {
            self.err(format!(
                "expected the end of the line, found {}",
                self.found()
            ))
        }
    }

    /// An integer literal with its position; `what` names it in the error.
    fn int(&mut self, what: &str) -> R<(i128, usize)> {
        let pos = self.pos();
        let Some((neg, digits, radix)) = self.eat(int_literal) else {
            return self.expected(what);
        };
        let magnitude = i128::from_str_radix(digits, radix).map_err(|_| Diag {
            pos,
            msg: format!("number '{}' is too large", &self.src[pos..self.pos()]),
        })?;
        Ok((if neg { -magnitude } else { magnitude }, pos))
    }

    /// A double-quoted string with `\\`, `\"`, `\n`, `\t`, `\r` and `\u{HEX}` escapes.
    fn string(&mut self) -> R<Option<String>> {
        let start = self.pos();
        if !self.eat_char('"') {
            return Ok(None);
        }
        let mut out = String::new();
        let mut chars = self.rest.char_indices();
        loop {
            let Some((i, c)) = chars.next() else {
                return Err(Diag {
                    pos: start,
                    msg: "unterminated string".into(),
                });
            };
            match c {
                '"' => {
                    self.rest = &self.rest[i + 1..];
                    return Ok(Some(out));
                }
                '\n' => {
                    return Err(Diag {
                        pos: start,
                        msg: "unterminated string (strings end on their line)".into(),
                    })
                }
                '\\' => {
                    let esc_pos = self.pos() + i;
                    let bad = |msg: String| Diag { pos: esc_pos, msg };
                    match chars.next().map(|(_, c)| c) {
                        Some('\\') => out.push('\\'),
                        Some('"') => out.push('"'),
                        Some('n') => out.push('\n'),
                        Some('t') => out.push('\t'),
                        Some('r') => out.push('\r'),
                        Some('u') => {
                            let tail = &self.rest[i + 2..];
                            let code = tail
                                .strip_prefix('{')
                                .and_then(|t| t.find('}').map(|e| &t[..e]))
                                .ok_or_else(|| bad("expected \\u{HEX} in a string".into()))?;
                            let ch = u32::from_str_radix(code, 16)
                                .ok()
                                .and_then(char::from_u32)
                                .ok_or_else(|| {
                                    bad(format!("'\\u{{{code}}}' is not a valid character"))
                                })?;
                            out.push(ch);
                            // Skip '{', the digits and '}'.
                            for _ in 0..code.chars().count() + 2 {
                                chars.next();
                            }
                        }
                        other => {
                            return Err(bad(format!(
                                "unknown escape '\\{}' in a string (valid: \\\\ \\\" \\n \\t \\r \\u{{HEX}})",
                                other.map(String::from).unwrap_or_default()
                            )))
                        }
                    }
                }
                c => out.push(c),
            }
        }
    }

    /// A segment name: an identifier or a string.
    fn name(&mut self, what: &str) -> R<(String, usize)> {
        let pos = self.pos();
        if let Some(s) = self.string()? {
            return Ok((s, pos));
        }
        match self.eat(ident) {
            Some(n) => Ok((n.to_string(), pos)),
            None => self.expected(what),
        }
    }
}

/// Checks that `v` lies in `lo..=hi`.
fn fit(v: i128, lo: i128, hi: i128, pos: usize, what: &str) -> R<i128> {
    if v < lo || v > hi {
        Err(Diag {
            pos,
            msg: format!("{v} is out of range for {what}: it must be between {lo} and {hi}"),
        })
    } else {
        Ok(v)
    }
}

// ---------------------------------------------------------------------------------------------
// Operands

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `N`
    Num,
    /// `OUT,IN`
    Pair,
    /// `BGN..END`
    Range,
    /// `Y0,Y1,X0,X1`
    Quad,
    /// `N`, `NAME`, `NAME+N` or `NAME-N`
    Addr,
}

#[derive(Debug, Clone)]
enum Val {
    Num(i128),
    Pair([(i128, usize); 2]),
    Quad([(i128, usize); 4]),
    Addr {
        name: Option<(String, usize)>,
        off: i128,
    },
}

struct Operand {
    key: &'static str,
    pos: usize,
    val: Val,
}

/// The operands of one statement.
struct Ops {
    what: String,
    items: Vec<Operand>,
    flags: Vec<(&'static str, usize)>,
    /// Position of the statement, for errors about missing operands.
    pos: usize,
}

impl Ops {
    fn get(&self, key: &str) -> Option<&Operand> {
        self.items.iter().find(|o| o.key == key)
    }

    fn has_flag(&self, f: &str) -> bool {
        self.flags.iter().any(|x| x.0 == f)
    }

    fn deps(&self) -> DepFlags {
        DepFlags {
            pop_prev: self.has_flag("pop_prev"),
            pop_next: self.has_flag("pop_next"),
            push_prev: self.has_flag("push_prev"),
            push_next: self.has_flag("push_next"),
        }
    }

    fn missing<T>(&self, key: &str, form: &str) -> R<T> {
        Err(Diag {
            pos: self.pos,
            msg: format!("{} needs {key}={form}", self.what),
        })
    }

    /// A scalar operand, range-checked.
    fn num(&self, key: &str, lo: i128, hi: i128, what: &str) -> R<Option<i128>> {
        match self.get(key) {
            Some(Operand {
                pos,
                val: Val::Num(v),
                ..
            }) => fit(*v, lo, hi, *pos + key.len() + 1, what).map(Some),
            _ => Ok(None),
        }
    }

    fn req_num(&self, key: &str, lo: i128, hi: i128, what: &str) -> R<i128> {
        match self.num(key, lo, hi, what)? {
            Some(v) => Ok(v),
            None => self.missing(key, "N"),
        }
    }

    /// A two-part operand (`OUT,IN` or `BGN..END`) as u16s; `names` name the parts.
    fn pair(&self, key: &str, names: [&str; 2]) -> R<Option<[u16; 2]>> {
        match self.get(key) {
            Some(Operand {
                val: Val::Pair(p), ..
            }) => {
                let a = fit(p[0].0, 0, 0xffff, p[0].1, names[0])? as u16;
                let b = fit(p[1].0, 0, 0xffff, p[1].1, names[1])? as u16;
                Ok(Some([a, b]))
            }
            _ => Ok(None),
        }
    }

    fn pair_or_zero(&self, key: &str, names: [&str; 2]) -> R<[u16; 2]> {
        Ok(self.pair(key, names)?.unwrap_or([0, 0]))
    }

    /// The position of the operand a codec error is about.
    fn blame(&self, e: &IsaError, fallback: usize) -> usize {
        use crate::layout::Field::*;
        let Some(field) = e.field() else {
            return fallback;
        };
        let key = match field {
            SramBase => "sram",
            DramBase => "dram",
            YSize => "y",
            XSize => "x",
            XStride => "stride",
            YPad0 | YPad1 | XPad0 | XPad1 => "pad",
            UopBgn | UopEnd => "uops",
            IterOut | IterIn => "iter",
            DstFactorOut | DstFactorIn | DstIdx => "dst",
            SrcFactorOut | SrcFactorIn | SrcIdx => "src",
            WgtFactorOut | WgtFactorIn | WgtIdx => "wgt",
            Imm => {
                if self.get("rawimm").is_some() {
                    "rawimm"
                } else {
                    "imm"
                }
            }
            _ => return fallback,
        };
        self.get(key).map_or(fallback, |o| o.pos)
    }
}

const DEP_FLAGS: [&str; 4] = ["pop_prev", "pop_next", "push_prev", "push_next"];
const LOOP_FLAGS: [&str; 5] = ["reset", "pop_prev", "pop_next", "push_prev", "push_next"];
const MEM_KEYS: [(&str, Kind); 6] = [
    ("sram", Kind::Num),
    ("dram", Kind::Addr),
    ("y", Kind::Num),
    ("x", Kind::Num),
    ("stride", Kind::Num),
    ("pad", Kind::Quad),
];
const GEMM_KEYS: [(&str, Kind); 5] = [
    ("uops", Kind::Range),
    ("iter", Kind::Pair),
    ("dst", Kind::Pair),
    ("src", Kind::Pair),
    ("wgt", Kind::Pair),
];
const ALU_KEYS: [(&str, Kind); 6] = [
    ("uops", Kind::Range),
    ("iter", Kind::Pair),
    ("dst", Kind::Pair),
    ("src", Kind::Pair),
    ("imm", Kind::Num),
    ("rawimm", Kind::Num),
];
const UOP_KEYS: [(&str, Kind); 3] = [("dst", Kind::Num), ("src", Kind::Num), ("wgt", Kind::Num)];

fn list_keys(keys: &[(&str, Kind)]) -> String {
    keys.iter()
        .map(|(k, _)| format!("{k}="))
        .collect::<Vec<_>>()
        .join(", ")
}

// ---------------------------------------------------------------------------------------------
// Statements

struct Assembler<'a> {
    cur: Cur<'a>,
    ctx: &'a AsmContext,
}

/// A `.uops` block being filled by the `uop` lines after it; always the last segment.
struct UopBlock {
    seg: usize,
    pos: usize,
    declared: Option<Vec<usize>>,
    count: usize,
}

struct State {
    prog: Program,
    codec: Codec,
    uops: Option<UopBlock>,
}

/// Where the file's `.config` came from, for messages.
struct FileConfig {
    cfg: HwConfig,
    spec: String,
    pos: usize,
}

/// Role words and `offset=N`, shared by `.buffer` and `.uops`.
struct SegAttrs {
    role: Role,
    offset: Option<u64>,
}

impl<'a> Assembler<'a> {
    fn run(mut self) -> R<Program> {
        // `.config` lines come first.
        let mut file_cfg: Option<FileConfig> = None;
        loop {
            self.cur.blank_lines();
            let pos = self.cur.pos();
            let mut probe = Cur {
                src: self.cur.src,
                rest: self.cur.rest,
            };
            if probe.eat(directive) != Some(".config") {
                break;
            }
            self.cur.rest = probe.rest;
            if let Some(first) = &file_cfg {
                let (line, _) = super::line_col(self.cur.src, first.pos);
                return Err(Diag {
                    pos,
                    msg: format!("a second .config (the first is on line {line})"),
                });
            }
            file_cfg = Some(self.config(pos)?);
            self.cur.end_statement()?;
        }
        let config = match (file_cfg, &self.ctx.config) {
            (None, None) => HwConfig::default(),
            (None, Some(c)) => c.clone(),
            (Some(f), None) => f.cfg,
            (Some(f), Some(c)) => {
                if f.cfg.isa_hash() != c.isa_hash() {
                    return Err(Diag {
                        pos: f.pos,
                        msg: format!(
                            "this file is written for config {} (.config {}) but the selected \
                             config is {}; their instruction sets differ",
                            f.cfg.config_string(),
                            f.spec,
                            c.config_string()
                        ),
                    });
                }
                c.clone()
            }
        };
        let mut st = State {
            codec: Codec::new(&config),
            prog: Program {
                config,
                insns: Vec::new(),
                segments: Vec::new(),
            },
            uops: None,
        };
        loop {
            self.cur.blank_lines();
            if self.cur.rest.is_empty() {
                break;
            }
            let pos = self.cur.pos();
            if let Some(d) = self.cur.eat(directive) {
                self.close_uops(&mut st)?;
                match d {
                    ".config" => {
                        return Err(Diag {
                            pos,
                            msg: ".config must come before any .buffer, .uops or instruction"
                                .into(),
                        })
                    }
                    ".buffer" => self.buffer(&mut st)?,
                    ".uops" => self.uops(&mut st, pos)?,
                    _ => {
                        return Err(Diag {
                            pos,
                            msg: format!(
                                "unknown directive '{d}' (expected .config, .buffer or .uops)"
                            ),
                        })
                    }
                }
            } else if let Some(word) = self.cur.eat(ident) {
                if word == "uop" {
                    self.uop_line(&mut st, pos)?;
                } else {
                    self.close_uops(&mut st)?;
                    let insn = self.insn(&st, word, pos)?;
                    st.prog.insns.push(insn);
                }
            } else {
                return self
                    .cur
                    .expected("a directive, an instruction or a micro-op");
            }
            self.cur.end_statement()?;
        }
        self.close_uops(&mut st)?;
        Ok(st.prog)
    }

    // -- .config -------------------------------------------------------------------------------

    fn config(&mut self, pos: usize) -> R<FileConfig> {
        self.cur.blank();
        let at = self.cur.pos();
        let fail = |msg: String| Diag { pos: at, msg };
        if self.cur.peek() == Some('{') {
            let text = self.json_object()?;
            let cfg =
                HwConfig::from_json_str(text, "inline JSON").map_err(|e| fail(e.to_string()))?;
            return Ok(FileConfig {
                cfg,
                spec: "{...}".into(),
                pos,
            });
        }
        if let Some(path) = self.cur.string()? {
            let full = self.ctx.base_dir.join(&path);
            let shown = full.display().to_string();
            let text = std::fs::read_to_string(&full)
                .map_err(|e| fail(format!("cannot read config file {shown}: {e}")))?;
            let cfg = HwConfig::from_json_str(&text, &shown).map_err(|e| fail(e.to_string()))?;
            return Ok(FileConfig {
                cfg,
                spec: format!("\"{path}\""),
                pos,
            });
        }
        let Some(word) = self.cur.eat(preset_word) else {
            return self.cur.expected(
                "a preset name, a quoted config file path or an inline JSON object after .config",
            );
        };
        let cfg = HwConfig::preset(word).map_err(|_| {
            fail(format!(
                "unknown preset '{word}' (presets: {}; quote a path to load a config file)",
                PRESETS.iter().map(|p| p.0).collect::<Vec<_>>().join(", ")
            ))
        })?;
        Ok(FileConfig {
            cfg,
            spec: word.to_string(),
            pos,
        })
    }

    /// A balanced `{...}` (JSON strings respected), possibly spanning lines.
    fn json_object(&mut self) -> R<&'a str> {
        let rest = self.cur.rest;
        let (mut depth, mut in_str, mut esc) = (0usize, false, false);
        for (i, c) in rest.char_indices() {
            if in_str {
                match (esc, c) {
                    (true, _) => esc = false,
                    (false, '\\') => esc = true,
                    (false, '"') => in_str = false,
                    _ => {}
                }
                continue;
            }
            match c {
                '"' => in_str = true,
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        self.cur.rest = &rest[i + 1..];
                        return Ok(&rest[..=i]);
                    }
                }
                _ => {}
            }
        }
        self.cur.err("unterminated JSON object: no matching '}'")
    }

    // -- segments ------------------------------------------------------------------------------

    fn segment_name(&mut self, st: &State) -> R<String> {
        self.cur.blank();
        let (name, pos) = self.cur.name("a segment name")?;
        if name.is_empty() {
            return Err(Diag {
                pos,
                msg: "a segment name cannot be empty".into(),
            });
        }
        if st.prog.segment(&name).is_some() {
            return Err(Diag {
                pos,
                msg: format!("segment '{name}' is declared twice"),
            });
        }
        self.cur.end_token()?;
        Ok(name)
    }

    fn shape(&mut self) -> R<Vec<usize>> {
        self.cur.expect_char('[', "a shape such as [2, 16]")?;
        let mut dims = Vec::new();
        loop {
            self.cur.blank_lines();
            if self.cur.eat_char(']') {
                return Ok(dims);
            }
            let (d, pos) = self.cur.int("a dimension")?;
            dims.push(fit(d, 0, i128::from(u32::MAX), pos, "a dimension")? as usize);
            self.cur.blank_lines();
            if !self.cur.eat_char(',') && self.cur.peek() != Some(']') {
                return self.cur.expected("',' or ']' in the shape");
            }
        }
    }

    /// Roles and `offset=`, up to `=` or the end of the line.
    fn seg_attrs(&mut self, st: &State) -> R<SegAttrs> {
        let mut attrs = SegAttrs {
            role: Role::default(),
            offset: None,
        };
        loop {
            if self.cur.at_eol() || self.cur.peek() == Some('=') {
                return Ok(attrs);
            }
            let pos = self.cur.pos();
            let dup = |w: &str| Diag {
                pos,
                msg: format!("'{w}' is given twice"),
            };
            match self.cur.eat(ident) {
                Some("input") => {
                    if attrs.role.input {
                        return Err(dup("input"));
                    }
                    attrs.role.input = true;
                }
                Some("output") => {
                    if attrs.role.output {
                        return Err(dup("output"));
                    }
                    attrs.role.output = true;
                }
                Some("offset") if self.cur.eat_char('=') => {
                    if attrs.offset.is_some() {
                        return Err(dup("offset"));
                    }
                    let (v, vpos) = self.cur.int("a byte offset")?;
                    let align = Program::dram_align(&st.prog.config);
                    let end = st.prog.dram_size();
                    let v = fit(v, 0, i128::from(u64::MAX), vpos, "offset")? as u64;
                    if v.next_multiple_of(align) != v || v < end {
                        return Err(Diag {
                            pos: vpos,
                            msg: format!(
                                "offset={v} must be a multiple of {align} (the DRAM alignment) \
                                 and at least {end} (the end of the segments before it)"
                            ),
                        });
                    }
                    attrs.offset = Some(v);
                }
                _ => {
                    self.cur.rest = &self.cur.src[pos..];
                    return self
                        .cur
                        .expected("input, output, offset=N, '=' or the end of the line");
                }
            }
            self.cur.end_token()?;
        }
    }

    fn byte_size(dtype: DType, shape: &[usize], pos: usize) -> R<usize> {
        let size = shape
            .iter()
            .try_fold(dtype.size() as u64, |acc, &d| acc.checked_mul(d as u64))
            .filter(|&s| s <= MAX_SEGMENT_BYTES);
        match size {
            Some(s) => Ok(s as usize),
            None => Err(Diag {
                pos,
                msg: format!(
                    "shape {shape:?} of {} is larger than the {} bytes a segment may hold",
                    dtype.name(),
                    MAX_SEGMENT_BYTES
                ),
            }),
        }
    }

    fn buffer(&mut self, st: &mut State) -> R<()> {
        let name = self.segment_name(st)?;
        self.cur.blank();
        let dpos = self.cur.pos();
        let dtype = match self.cur.eat(ident) {
            Some(w) => DType::from_name(w).ok_or_else(|| Diag {
                pos: dpos,
                msg: format!("unknown dtype '{w}' (expected i8, u8, i16, i32, u32 or uop)"),
            })?,
            None => return self.cur.expected("a dtype (i8, u8, i16, i32, u32 or uop)"),
        };
        self.cur.end_token()?;
        self.cur.blank();
        let spos = self.cur.pos();
        let shape = self.shape()?;
        let size = Self::byte_size(dtype, &shape, spos)?;
        let attrs = self.seg_attrs(st)?;
        let init = if self.cur.eat_char('=') {
            self.cur.blank();
            Some(self.initializer(dtype, &shape, size)?)
        } else {
            None
        };
        st.prog.push_segment(&name, dtype, shape, attrs.role, init);
        Self::place(st, &attrs);
        Ok(())
    }

    fn place(st: &mut State, attrs: &SegAttrs) {
        if let (Some(off), Some(seg)) = (attrs.offset, st.prog.segments.last_mut()) {
            seg.offset = off;
        }
    }

    fn initializer(&mut self, dtype: DType, shape: &[usize], size: usize) -> R<Vec<u8>> {
        let pos = self.cur.pos();
        if self.cur.peek() == Some('[') {
            return self.values(dtype, shape, size);
        }
        match self.cur.eat(ident) {
            Some("zeros") => Ok(vec![0; size]),
            Some("file") => {
                self.cur.blank();
                let ppos = self.cur.pos();
                let Some(path) = self.cur.string()? else {
                    return self.cur.expected("a quoted .npy file path after 'file'");
                };
                self.npy(&path, ppos, dtype, shape)
            }
            _ => {
                self.cur.rest = &self.cur.src[pos..];
                self.cur
                    .expected("'[' with values, file \"PATH.npy\" or zeros after '='")
            }
        }
    }

    fn values(&mut self, dtype: DType, shape: &[usize], size: usize) -> R<Vec<u8>> {
        let open = self.cur.pos();
        self.cur.eat_char('[');
        let (lo, hi) = match dtype {
            DType::I8 => (i128::from(i8::MIN), i128::from(i8::MAX)),
            DType::U8 => (0, i128::from(u8::MAX)),
            DType::I16 => (i128::from(i16::MIN), i128::from(i16::MAX)),
            DType::I32 => (i128::from(i32::MIN), i128::from(i32::MAX)),
            DType::U32 | DType::Uop => (0, i128::from(u32::MAX)),
        };
        // Grow with the text, not with a declared shape that the values may not fill.
        let mut out = Vec::with_capacity(size.min(1 << 16));
        let mut index = 0usize;
        loop {
            self.cur.blank_lines();
            if self.cur.eat_char(']') {
                break;
            }
            let (v, pos) = self.cur.int("a value or ']'")?;
            if v < lo || v > hi {
                return Err(Diag {
                    pos,
                    msg: format!(
                        "value {v} at index {index} does not fit {} (between {lo} and {hi})",
                        dtype.name()
                    ),
                });
            }
            match dtype.size() {
                1 => out.push(v as u8),
                2 => out.extend((v as u16).to_le_bytes()),
                _ => out.extend((v as u32).to_le_bytes()),
            }
            index += 1;
            self.cur.blank_lines();
            if !self.cur.eat_char(',') && self.cur.peek() != Some(']') {
                return self.cur.expected("',' or ']' in the values");
            }
        }
        let needed = size / dtype.size();
        if index != needed {
            return Err(Diag {
                pos: open,
                msg: format!("{index} values given but shape {shape:?} holds {needed}"),
            });
        }
        Ok(out)
    }

    fn npy(&mut self, path: &str, pos: usize, dtype: DType, shape: &[usize]) -> R<Vec<u8>> {
        let fail = |msg: String| Diag { pos, msg };
        let full = self.ctx.base_dir.join(Path::new(path));
        let arr = npy::read_file(&full).map_err(|e| fail(format!("cannot load {e}")))?;
        let want = npy::elem_of(dtype);
        if arr.elem != want {
            return Err(fail(format!(
                "{path} holds {} but the buffer is declared {} (which needs {want})",
                arr.elem,
                dtype.name()
            )));
        }
        if arr.shape != shape {
            return Err(fail(format!(
                "{path} has shape {:?} but the buffer is declared with shape {shape:?}",
                arr.shape
            )));
        }
        Ok(arr.data)
    }

    fn uops(&mut self, st: &mut State, pos: usize) -> R<()> {
        let name = self.segment_name(st)?;
        self.cur.blank();
        let declared = if self.cur.peek() == Some('[') {
            let spos = self.cur.pos();
            let shape = self.shape()?;
            Self::byte_size(DType::Uop, &shape, spos)?;
            Some(shape)
        } else {
            None
        };
        let attrs = self.seg_attrs(st)?;
        if self.cur.peek() == Some('=') {
            return self.cur.err(
                "a .uops segment takes its contents from the uop lines that follow it, not \
                 from an initializer (use .buffer NAME uop [N] = ... for raw words)",
            );
        }
        st.prog
            .push_segment(&name, DType::Uop, vec![0], attrs.role, Some(Vec::new()));
        Self::place(st, &attrs);
        st.uops = Some(UopBlock {
            seg: st.prog.segments.len() - 1,
            pos,
            declared,
            count: 0,
        });
        Ok(())
    }

    fn close_uops(&mut self, st: &mut State) -> R<()> {
        let Some(block) = st.uops.take() else {
            return Ok(());
        };
        if let Some(shape) = block.declared {
            let n: usize = shape.iter().product();
            if n != block.count {
                return Err(Diag {
                    pos: block.pos,
                    msg: format!(
                        "this .uops declares shape {shape:?} ({n} micro-ops) but {} uop lines \
                         follow it",
                        block.count
                    ),
                });
            }
            if let Some(seg) = st.prog.segments.get_mut(block.seg) {
                seg.shape = shape;
            }
        }
        Ok(())
    }

    fn uop_line(&mut self, st: &mut State, pos: usize) -> R<()> {
        let ops = self.operands("uop", pos, &UOP_KEYS, &[])?;
        let Some(block) = st.uops.as_mut() else {
            return Err(Diag {
                pos,
                msg: "a uop line must follow a .uops directive (or another uop line)".into(),
            });
        };
        let max = i128::from(u32::MAX);
        let uop = Uop {
            dst_idx: ops.num("dst", 0, max, "dst")?.unwrap_or(0) as u32,
            src_idx: ops.num("src", 0, max, "src")?.unwrap_or(0) as u32,
            wgt_idx: ops.num("wgt", 0, max, "wgt")?.unwrap_or(0) as u32,
        };
        let bytes = st.codec.encode_uop(&uop).map_err(|e| Diag {
            pos: ops.blame(&e, pos),
            msg: format!("{e} ({})", st.prog.config.config_string()),
        })?;
        if (block.count + 1) as u64 * 4 > MAX_SEGMENT_BYTES {
            return Err(Diag {
                pos,
                msg: "too many micro-ops in one .uops segment".into(),
            });
        }
        block.count += 1;
        if let Some(seg) = st.prog.segments.get_mut(block.seg) {
            seg.shape = vec![block.count];
            seg.init.get_or_insert_with(Vec::new).extend(bytes);
        }
        Ok(())
    }

    // -- instructions --------------------------------------------------------------------------

    /// Parses the operands of a statement until the end of its line.
    fn operands(
        &mut self,
        what: &str,
        pos: usize,
        keys: &[(&'static str, Kind)],
        flags: &[&'static str],
    ) -> R<Ops> {
        let mut ops = Ops {
            what: what.to_string(),
            items: Vec::new(),
            flags: Vec::new(),
            pos,
        };
        self.cur.end_token()?;
        loop {
            if self.cur.at_eol() {
                return Ok(ops);
            }
            let opos = self.cur.pos();
            let Some(word) = self.cur.eat(ident) else {
                return self.cur.expected("an operand (KEY=VALUE or a flag)");
            };
            let at = |msg: String| Diag { pos: opos, msg };
            let key = keys.iter().find(|k| k.0 == word);
            let flag = flags.iter().find(|f| **f == word);
            if self.cur.eat_char('=') {
                let Some(&(key, kind)) = key else {
                    return Err(at(if flag.is_some() {
                        format!("'{word}' is a flag and takes no value")
                    } else if keys.is_empty() {
                        format!("unknown key '{word}': {what} takes no KEY=VALUE operands")
                    } else {
                        format!(
                            "unknown key '{word}' for {what} (expected {})",
                            list_keys(keys)
                        )
                    }));
                };
                if let Some(first) = ops.get(key) {
                    let (_, col) = super::line_col(self.cur.src, first.pos);
                    return Err(at(format!(
                        "duplicate key '{key}' (already given at column {col})"
                    )));
                }
                let val = self.value(kind, key)?;
                ops.items.push(Operand {
                    key,
                    pos: opos,
                    val,
                });
            } else if let Some(&f) = flag {
                if ops.has_flag(f) {
                    return Err(at(format!("duplicate flag '{f}'")));
                }
                ops.flags.push((f, opos));
            } else if key.is_some() {
                return Err(at(format!("'{word}' needs a value: {word}=...")));
            } else {
                let mut expected: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
                expected.extend(keys.iter().map(|k| format!("{}=", k.0)));
                return Err(at(format!(
                    "unknown operand '{word}' for {what} (expected {})",
                    if expected.is_empty() {
                        "nothing".into()
                    } else {
                        expected.join(", ")
                    }
                )));
            }
            self.cur.end_token()?;
        }
    }

    fn value(&mut self, kind: Kind, key: &str) -> R<Val> {
        match kind {
            Kind::Num => Ok(Val::Num(self.cur.int(&format!("a number after {key}="))?.0)),
            Kind::Pair => {
                let a = self.cur.int(&format!("{key}=OUT,IN"))?;
                self.cur.expect_char(',', &format!("',' in {key}=OUT,IN"))?;
                let b = self.cur.int(&format!("{key}=OUT,IN"))?;
                Ok(Val::Pair([a, b]))
            }
            Kind::Range => {
                let a = self.cur.int(&format!("{key}=BEGIN..END"))?;
                if !self.cur.eat_str("..") {
                    return self.cur.expected(&format!("'..' in {key}=BEGIN..END"));
                }
                let b = self.cur.int(&format!("{key}=BEGIN..END"))?;
                Ok(Val::Pair([a, b]))
            }
            Kind::Quad => {
                let form = format!("{key}=Y0,Y1,X0,X1");
                let mut q = [(0, 0); 4];
                for (i, slot) in q.iter_mut().enumerate() {
                    if i > 0 {
                        self.cur.expect_char(',', &format!("',' in {form}"))?;
                    }
                    *slot = self.cur.int(&form)?;
                }
                Ok(Val::Quad(q))
            }
            Kind::Addr => {
                if matches!(self.cur.peek(), Some(c) if c.is_ascii_digit() || c == '-') {
                    return Ok(Val::Addr {
                        name: None,
                        off: self.cur.int("an address")?.0,
                    });
                }
                let (name, npos) = self.cur.name("an address (N, NAME, NAME+N or NAME-N)")?;
                let sign = if self.cur.eat_char('+') {
                    1
                } else if self.cur.eat_char('-') {
                    -1
                } else {
                    return Ok(Val::Addr {
                        name: Some((name, npos)),
                        off: 0,
                    });
                };
                let (n, _) = self.cur.int("an element offset")?;
                Ok(Val::Addr {
                    name: Some((name, npos)),
                    off: sign * n,
                })
            }
        }
    }

    fn insn(&mut self, st: &State, word: &str, pos: usize) -> R<Insn> {
        let cfg = &st.prog.config;
        let (insn, ops, word_pos) = match word {
            "load" | "store" => {
                self.cur.end_token()?;
                self.cur.blank();
                let mpos = self.cur.pos();
                let mt = match self.cur.eat(ident) {
                    Some(w) => MemType::from_name(w).ok_or_else(|| Diag {
                        pos: mpos,
                        msg: format!(
                            "unknown memory type '{w}' (expected uop, wgt, inp, acc, out or acc8)"
                        ),
                    })?,
                    None => {
                        return self.cur.expected(&format!(
                            "a memory type (uop, wgt, inp, acc, out or acc8) after '{word}'"
                        ))
                    }
                };
                let ops = self.operands(word, pos, &MEM_KEYS, &DEP_FLAGS)?;
                let u16_max = i128::from(u16::MAX);
                let sram = ops.req_num("sram", 0, u16_max, "sram (sram_base, 16 bits)")?;
                let dram = self.dram(st, &ops, mt)?;
                let y = ops.req_num("y", 0, u16_max, "y (y_size, 16 bits)")?;
                let x = ops.req_num("x", 0, u16_max, "x (x_size, 16 bits)")?;
                let stride = ops.req_num("stride", 0, u16_max, "stride (x_stride, 16 bits)")?;
                let mut pad = [0u8; 4];
                if let Some(Operand {
                    val: Val::Quad(q), ..
                }) = ops.get("pad")
                {
                    let names = ["y_pad_0", "y_pad_1", "x_pad_0", "x_pad_1"];
                    for i in 0..4 {
                        pad[i] = fit(q[i].0, 0, 15, q[i].1, names[i])? as u8;
                    }
                }
                let m = MemInsn {
                    deps: ops.deps(),
                    memory_type: mt,
                    sram_base: sram as u16,
                    dram_base: dram,
                    y_size: y as u16,
                    x_size: x as u16,
                    x_stride: stride as u16,
                    y_pad_0: pad[0],
                    y_pad_1: pad[1],
                    x_pad_0: pad[2],
                    x_pad_1: pad[3],
                };
                let insn = if word == "load" {
                    Insn::Load(m)
                } else {
                    Insn::Store(m)
                };
                (insn, ops, mpos)
            }
            "gemm" => {
                let ops = self.operands(word, pos, &GEMM_KEYS, &LOOP_FLAGS)?;
                let lp = Self::uop_loop(&ops)?;
                let [wo, wi] = ops.pair_or_zero("wgt", ["wgt_factor_out", "wgt_factor_in"])?;
                let insn = Insn::Gemm(GemmInsn {
                    deps: ops.deps(),
                    lp,
                    wgt_factor_out: wo,
                    wgt_factor_in: wi,
                });
                (insn, ops, pos)
            }
            "alu" => {
                self.cur.end_token()?;
                self.cur.blank();
                let opos = self.cur.pos();
                let op = match self.cur.eat(ident) {
                    Some(w) => AluOp::from_name(w).ok_or_else(|| Diag {
                        pos: opos,
                        msg: format!(
                            "unknown ALU operation '{w}' (expected min, max, add, shr or mul)"
                        ),
                    })?,
                    None => {
                        return self
                            .cur
                            .expected("an ALU operation (min, max, add, shr or mul) after 'alu'")
                    }
                };
                let ops = self.operands(word, pos, &ALU_KEYS, &LOOP_FLAGS)?;
                let lp = Self::uop_loop(&ops)?;
                let (lo, hi) = (i128::from(i16::MIN), i128::from(i16::MAX));
                let imm = ops.num("imm", lo, hi, "imm (16 bits, signed)")?;
                let raw = ops.num("rawimm", lo, hi, "rawimm (16 bits, signed)")?;
                if imm.is_some() && raw.is_some() {
                    let second = ops
                        .items
                        .iter()
                        .filter(|o| o.key == "imm" || o.key == "rawimm")
                        .map(|o| o.pos)
                        .max()
                        .unwrap_or(pos);
                    return Err(Diag {
                        pos: second,
                        msg: "imm= and rawimm= cannot both be given".into(),
                    });
                }
                let insn = Insn::Alu(AluInsn {
                    deps: ops.deps(),
                    lp,
                    op,
                    use_imm: imm.is_some(),
                    imm: imm.or(raw).unwrap_or(0) as i16,
                });
                (insn, ops, opos)
            }
            "finish" => {
                let ops = self.operands(word, pos, &[], &DEP_FLAGS)?;
                (Insn::Finish(ops.deps()), ops, pos)
            }
            _ => {
                return Err(Diag {
                    pos,
                    msg: format!(
                        "unknown mnemonic '{word}' (expected load, store, gemm, alu, finish, \
                         uop or a directive)"
                    ),
                })
            }
        };
        if let Err(e) = st.codec.encode(&insn) {
            let blame = match e.field() {
                Some(Field::MemoryType | Field::AluOpcode) => word_pos,
                _ => ops.blame(&e, pos),
            };
            return Err(Diag {
                pos: blame,
                msg: format!("{e} ({})", cfg.config_string()),
            });
        }
        Ok(insn)
    }

    fn uop_loop(ops: &Ops) -> R<UopLoop> {
        let Some([bgn, end]) = ops.pair("uops", ["uop_bgn", "uop_end"])? else {
            return ops.missing("uops", "BEGIN..END");
        };
        let Some([io, ii]) = ops.pair("iter", ["iter_out", "iter_in"])? else {
            return ops.missing("iter", "OUT,IN");
        };
        let [dout, din] = ops.pair_or_zero("dst", ["dst_factor_out", "dst_factor_in"])?;
        let [sout, sin] = ops.pair_or_zero("src", ["src_factor_out", "src_factor_in"])?;
        Ok(UopLoop {
            reset_reg: ops.has_flag("reset"),
            uop_bgn: bgn,
            uop_end: end,
            iter_out: io,
            iter_in: ii,
            dst_factor_out: dout,
            dst_factor_in: din,
            src_factor_out: sout,
            src_factor_in: sin,
        })
    }

    /// The `dram=` operand as an element index of `mt`.
    fn dram(&self, st: &State, ops: &Ops, mt: MemType) -> R<u32> {
        let Some(op) = ops.get("dram") else {
            return ops.missing("dram", "ADDRESS");
        };
        let vpos = op.pos + "dram=".len();
        let Val::Addr { name, off } = &op.val else {
            return Err(Diag {
                pos: vpos,
                msg: "expected an address".into(),
            });
        };
        let value = match name {
            None => *off,
            Some((name, npos)) => {
                let Some(seg) = st.prog.segment(name) else {
                    return Err(Diag {
                        pos: *npos,
                        msg: format!(
                            "no segment named '{name}' is declared before this instruction"
                        ),
                    });
                };
                let eb = u64::from(st.prog.config.elem_bytes(mt));
                if seg.offset % eb != 0 {
                    return Err(Diag {
                        pos: *npos,
                        msg: format!(
                            "segment '{name}' starts at byte {}, which is not a whole {}-byte {} \
                             element",
                            seg.offset,
                            eb,
                            mt.name()
                        ),
                    });
                }
                i128::from(seg.offset / eb) + off
            }
        };
        Ok(fit(
            value,
            0,
            i128::from(u32::MAX),
            vpos,
            &format!("dram (the {} element index, 32 bits)", mt.name()),
        )? as u32)
    }
}
