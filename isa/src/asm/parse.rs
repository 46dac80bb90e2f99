//! The assembler: source text to [`Program`]. This file drives the statements and reads
//! `.config`; tokens are in [`super::lex`], operands in [`super::operands`], segments in
//! [`super::segments`] and instructions in [`super::insns`]. Every failure is a message at a
//! byte position, which [`AsmError`] renders as `FILE:LINE:COL`.

use super::lex::{directive, ident, preset_word, Cur, Diag, R};
use super::syntax::UOP_MNEMONIC;
use super::{AsmContext, AsmError};
use crate::config::{HwConfig, PRESETS};
use crate::layout::Codec;
use crate::program::Program;

/// The largest segment the assembler accepts, in bytes.
pub(super) const MAX_SEGMENT_BYTES: u64 = 1 << 32;

pub(super) fn parse_program(src: &str, ctx: &AsmContext) -> Result<Program, AsmError> {
    Assembler {
        cur: Cur { src, rest: src },
        ctx,
    }
    .run()
    .map_err(|d| AsmError::at(&ctx.file_name, src, d.pos, d.msg))
}

pub(super) struct Assembler<'a> {
    pub cur: Cur<'a>,
    pub ctx: &'a AsmContext,
}

/// A `.uops` block being filled by the `uop` lines after it; always the last segment.
pub(super) struct UopBlock {
    pub seg: usize,
    pub pos: usize,
    pub declared: Option<Vec<usize>>,
    pub count: usize,
}

/// What the statements so far have built.
pub(super) struct State {
    pub prog: Program,
    pub codec: Codec,
    pub uops: Option<UopBlock>,
}

/// Where the file's `.config` came from, for messages.
struct FileConfig {
    cfg: HwConfig,
    spec: String,
    pos: usize,
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
                if word == UOP_MNEMONIC {
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
}
