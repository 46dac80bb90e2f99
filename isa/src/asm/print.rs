//! The printer: [`Program`] to canonical source text; instructions and micro-ops are written
//! by the syntax table the parser reads them with ([`super::syntax`]).

use std::fmt::Write as _;

use super::lex::{is_ident_char, is_ident_start};
use super::syntax::{self, Kind, UOP_MNEMONIC, UOP_OPERANDS};
use crate::config::{HwConfig, PRESETS};
use crate::insn::{Insn, MemInsn, Uop};
use crate::layout::{Codec, Field, ListedInsn};
use crate::program::{DType, Program, Segment};

/// Values per line of an inline initializer.
const VALUES_PER_LINE: usize = 16;

pub(super) fn print_program(p: &Program) -> String {
    let cfg = &p.config;
    let mut out = String::new();
    let _ = writeln!(out, "{}  ; {}", config_line(cfg), cfg.config_string());

    if !p.segments.is_empty() {
        out.push('\n');
        let codec = Codec::new(cfg);
        let align = Program::dram_align(cfg);
        let mut end = 0u64;
        let rows: Vec<SegRow> = p
            .segments
            .iter()
            .map(|s| {
                let canonical = end.next_multiple_of(align);
                end = end.max(s.range().end);
                let mut attrs = Vec::new();
                if s.role.input {
                    attrs.push("input".to_string());
                }
                if s.role.output {
                    attrs.push("output".to_string());
                }
                if s.offset != canonical {
                    attrs.push(format!("offset={}", s.offset));
                }
                SegRow {
                    name: quote_name(&s.name),
                    shape: shape_text(&s.shape),
                    attrs: attrs.join(" "),
                    uops: canonical_uops(&codec, s),
                }
            })
            .collect();
        // Align the columns of the .buffer lines.
        let buffers = || rows.iter().filter(|r| r.uops.is_none());
        let name_w = buffers().map(|r| r.name.chars().count()).max().unwrap_or(0);
        let shape_w = buffers().map(|r| r.shape.len()).max().unwrap_or(0);
        let attrs_w = buffers().map(|r| r.attrs.len()).max().unwrap_or(0);
        for (s, r) in p.segments.iter().zip(&rows) {
            let SegRow {
                name,
                shape,
                attrs,
                uops,
            } = r;
            if let Some(uops) = uops {
                let mut head = format!(".uops {name}");
                if s.shape != [uops.len()] {
                    head = format!("{head} {shape}");
                }
                if !attrs.is_empty() {
                    head = format!("{head} {attrs}");
                }
                let _ = writeln!(out, "{head}");
                for u in uops {
                    let _ = writeln!(out, "    {}", uop_text(u));
                }
                continue;
            }
            let mut head = format!(
                ".buffer {name:<name_w$} {:<3} {shape:<shape_w$}",
                s.dtype.name()
            );
            if attrs_w > 0 {
                head = format!("{head} {attrs:<attrs_w$}");
            }
            match &s.init {
                None => {
                    let _ = writeln!(out, "{}", head.trim_end());
                }
                Some(init) => {
                    let _ = writeln!(out, "{head} = {}", init_text(s.dtype, init));
                }
            }
        }
    }

    if !p.insns.is_empty() {
        out.push('\n');
        let lines: Vec<String> = p
            .insns
            .iter()
            .map(|i| {
                insn_text(i, &|m: &MemInsn| {
                    if m.x_size == 0 {
                        return m.dram_base.to_string();
                    }
                    match p.locate(m.memory_type, u64::from(m.dram_base)) {
                        Some((seg, 0)) => quote_name(&seg.name),
                        Some((seg, n)) => format!("{}+{n}", quote_name(&seg.name)),
                        None => m.dram_base.to_string(),
                    }
                })
            })
            .collect();
        push_numbered(&mut out, &lines);
    }
    out
}

pub(super) fn print_insns(_cfg: &HwConfig, insns: &[Insn]) -> String {
    let lines: Vec<String> = insns
        .iter()
        .map(|i| insn_text(i, &|m: &MemInsn| m.dram_base.to_string()))
        .collect();
    let mut out = String::new();
    push_numbered(&mut out, &lines);
    out
}

pub(super) fn print_listing(listed: &[ListedInsn]) -> String {
    let lines: Vec<String> = listed
        .iter()
        .map(|l| match &l.insn {
            Some(i) => insn_text(i, &|m: &MemInsn| m.dram_base.to_string()),
            // Not assembly the parser accepts: reassembling the listing fails on it.
            None => format!(".word {:#034x}", u128::from_le_bytes(l.word)),
        })
        .collect();
    let notes: Vec<String> = listed
        .iter()
        .map(|l| match &l.problem {
            Some(e) => format!(" invalid: {e}"),
            None => String::new(),
        })
        .collect();
    let mut out = String::new();
    push_numbered_with(&mut out, &lines, &notes);
    out
}

pub(super) fn print_uops(_cfg: &HwConfig, uops: &[Uop]) -> String {
    let mut out = String::new();
    for u in uops {
        let _ = writeln!(out, "{}", uop_text(u));
    }
    out
}

/// The parts of a segment's declaration.
struct SegRow {
    name: String,
    shape: String,
    attrs: String,
    /// The micro-ops, when the segment prints as a `.uops` block.
    uops: Option<Vec<Uop>>,
}

/// `.config NAME` for a preset, else `.config {JSON}` on one line.
fn config_line(cfg: &HwConfig) -> String {
    if let Some((name, _, _)) = PRESETS
        .iter()
        .find(|(name, _, _)| HwConfig::preset(name).ok().as_ref() == Some(cfg))
    {
        return format!(".config {name}");
    }
    let json = serde_json::from_str::<serde_json::Value>(&cfg.to_json())
        .map(|v| v.to_string())
        .unwrap_or_else(|_| cfg.to_json().replace('\n', " "));
    format!(".config {json}")
}

/// Lines followed by aligned `; #index` comments.
fn push_numbered(out: &mut String, lines: &[String]) {
    push_numbered_with(out, lines, &vec![String::new(); lines.len()]);
}

/// Lines followed by aligned `; #index` comments, each followed by its note.
fn push_numbered_with(out: &mut String, lines: &[String], notes: &[String]) {
    let width = lines.iter().map(String::len).max().unwrap_or(0);
    for (i, (line, note)) in lines.iter().zip(notes).enumerate() {
        let _ = writeln!(out, "{line:<width$}  ; #{i}{note}");
    }
}

/// A name as written in source: bare if it is an identifier, else quoted.
pub(super) fn quote_name(name: &str) -> String {
    let mut chars = name.chars();
    let bare = chars.next().is_some_and(is_ident_start) && chars.all(is_ident_char);
    if bare {
        return name.to_string();
    }
    let mut q = String::from("\"");
    for c in name.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            '\t' => q.push_str("\\t"),
            '\r' => q.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(q, "\\u{{{:x}}}", u32::from(c));
            }
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

fn shape_text(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    format!("[{}]", dims.join(", "))
}

/// The micro-ops of a `uop` segment if it prints as a `.uops` block: it has contents of the
/// right size, every word of which is a micro-op that encodes back to the same word.
fn canonical_uops(codec: &Codec, s: &Segment) -> Option<Vec<Uop>> {
    if s.dtype != DType::Uop {
        return None;
    }
    let init = s.init.as_ref()?;
    if init.len() as u64 != s.size() {
        return None;
    }
    init.chunks_exact(4)
        .map(|c| {
            let word: [u8; 4] = c.try_into().ok()?;
            let u = codec.decode_uop(&word);
            (codec.encode_uop(&u).ok()? == word).then_some(u)
        })
        .collect()
}

fn uop_text(u: &Uop) -> String {
    let mut s = UOP_MNEMONIC.to_string();
    for o in UOP_OPERANDS {
        let v = u.field(o.fields[0]).expect("micro-op fields");
        let _ = write!(s, " {}={v}", o.key);
    }
    s
}

/// An initializer after `= `: `zeros`, or the values in brackets.
fn init_text(dtype: DType, init: &[u8]) -> String {
    if !init.is_empty() && init.iter().all(|&b| b == 0) {
        return "zeros".into();
    }
    let values: Vec<String> = match dtype {
        DType::I8 => init.iter().map(|&b| (b as i8).to_string()).collect(),
        DType::U8 => init.iter().map(u8::to_string).collect(),
        DType::I16 => init
            .chunks_exact(2)
            .map(|c| i16::from_le_bytes([c[0], c[1]]).to_string())
            .collect(),
        DType::I32 => init
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]).to_string())
            .collect(),
        DType::U32 => init
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]).to_string())
            .collect(),
        DType::Uop => init
            .chunks_exact(4)
            .map(|c| format!("{:#010x}", u32::from_le_bytes([c[0], c[1], c[2], c[3]])))
            .collect(),
    };
    if values.len() <= VALUES_PER_LINE {
        return format!("[{}]", values.join(", "));
    }
    let width = values.iter().map(String::len).max().unwrap_or(0);
    let rows: Vec<String> = values
        .chunks(VALUES_PER_LINE)
        .map(|row| {
            let cells: Vec<String> = row.iter().map(|v| format!("{v:>width$}")).collect();
            format!("    {}", cells.join(", "))
        })
        .collect();
    format!("[\n{}\n]", rows.join(",\n"))
}

/// One instruction, written by the syntax table; `dram` renders a LOAD/STORE's `dram_base`.
fn insn_text(insn: &Insn, dram: &dyn Fn(&MemInsn) -> String) -> String {
    let syn = syntax::of(insn);
    let mut s = format!("{:<5}", syn.mnemonic);
    let value = |f: Field| insn.field(f).expect("the syntax names the format's fields");
    if let Some(f) = syn.selector.field() {
        let v = value(f);
        let (word, _) = syn
            .selector
            .words()
            .into_iter()
            .find(|w| w.1 == v)
            .expect("a typed instruction holds a valid selector");
        let _ = write!(s, " {word}");
    }
    for o in syn.operands {
        let values: Vec<i64> = o.fields.iter().map(|&f| value(f)).collect();
        if !syntax::printed(o, insn, &values) {
            continue;
        }
        let text = match (o.kind, insn) {
            (Kind::Addr, Insn::Load(m) | Insn::Store(m)) => dram(m),
            (Kind::Range, _) => format!("{}..{}", values[0], values[1]),
            _ => values
                .iter()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join(","),
        };
        let _ = write!(s, " {}={text}", o.key);
    }
    for f in syn.all_flags() {
        if value(f.field) != 0 {
            let _ = write!(s, " {}", f.word);
        }
    }
    s.trim_end().to_string()
}
