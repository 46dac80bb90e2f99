//! Segment declarations: `.buffer` with its initializer (values, a `.npy` file or zeros) and
//! `.uops`, whose contents the `uop` lines after it supply.

use std::path::Path;

use super::lex::{fit, ident, Diag, R};
use super::parse::{Assembler, State, UopBlock, MAX_SEGMENT_BYTES};
use crate::npy;
use crate::program::{DType, Program, Role};

/// Role words and `offset=N`, shared by `.buffer` and `.uops`.
struct SegAttrs {
    role: Role,
    offset: Option<u64>,
}

impl Assembler<'_> {
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

    pub(super) fn buffer(&mut self, st: &mut State) -> R<()> {
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

    pub(super) fn uops(&mut self, st: &mut State, pos: usize) -> R<()> {
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

    pub(super) fn close_uops(&mut self, st: &mut State) -> R<()> {
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
}
