//! A self-contained runnable program: the config it was built for, its instruction stream, and
//! the DRAM region it runs in (named segments with types, shapes, roles and initial contents).
//!
//! Addresses are relative: the program's DRAM region starts at address 0 and every
//! `dram_base` counts elements from there. A driver places the region at a physical address
//! aligned to [`Program::dram_align`] and relocates each LOAD/STORE by adding
//! `physical base / element bytes` (see [`Program::relocated`]).

use crate::config::HwConfig;
use crate::insn::{Insn, MemInsn, MemType, Uop};
use crate::layout::Codec;

/// Element type of a DRAM segment, as seen by the host (and by `.npy` files).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    I8,
    U8,
    I16,
    I32,
    U32,
    /// Encoded 32-bit micro-ops.
    Uop,
}

impl DType {
    pub const ALL: [DType; 6] = [
        DType::I8,
        DType::U8,
        DType::I16,
        DType::I32,
        DType::U32,
        DType::Uop,
    ];
    pub fn name(self) -> &'static str {
        match self {
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::U32 => "u32",
            DType::Uop => "uop",
        }
    }
    pub fn from_name(s: &str) -> Option<Self> {
        DType::ALL.into_iter().find(|d| d.name() == s)
    }
    pub fn size(self) -> usize {
        match self {
            DType::I8 | DType::U8 => 1,
            DType::I16 => 2,
            DType::I32 | DType::U32 | DType::Uop => 4,
        }
    }
}

/// How the host uses a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Role {
    /// The user may supply its contents at run time (otherwise `init` is used).
    pub input: bool,
    /// Its contents are returned after the run.
    pub output: bool,
}

impl Role {
    pub const NONE: Role = Role {
        input: false,
        output: false,
    };
    pub const INPUT: Role = Role {
        input: true,
        output: false,
    };
    pub const OUTPUT: Role = Role {
        input: false,
        output: true,
    };
}

/// One named buffer in the program's DRAM region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub name: String,
    pub dtype: DType,
    /// Row-major shape; the segment holds `product(shape) * dtype.size()` bytes.
    pub shape: Vec<usize>,
    pub role: Role,
    /// Byte offset from the start of the region; a multiple of [`Program::dram_align`].
    pub offset: u64,
    /// Initial contents, little-endian, exactly `size()` bytes; `None` means zeros.
    pub init: Option<Vec<u8>>,
}

impl Segment {
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn size(&self) -> u64 {
        (self.len() * self.dtype.size()) as u64
    }
    /// Byte range in the region.
    pub fn range(&self) -> std::ops::Range<u64> {
        self.offset..self.offset + self.size()
    }
    /// [`Segment::size`], or `None` when the shape's byte count, or the segment's end
    /// (`offset + size`), does not fit 64 bits. [`Program::validate`] rejects such segments,
    /// so `size`, `len` and `range` never overflow on a validated program.
    pub fn checked_size(&self) -> Option<u64> {
        let elems = self
            .shape
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(u64::try_from(d).ok()?))?;
        let bytes = elems.checked_mul(self.dtype.size() as u64)?;
        usize::try_from(elems).ok()?;
        usize::try_from(bytes).ok()?;
        self.offset.checked_add(bytes)?;
        Some(bytes)
    }
}

/// A program: what `vta asm` produces and `vta sim` runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    pub config: HwConfig,
    pub insns: Vec<Insn>,
    /// In ascending, non-overlapping offset order.
    pub segments: Vec<Segment>,
}

impl Program {
    /// Alignment of the region and of every segment: the largest DRAM element of any memory
    /// type (so every segment start is a whole element index for all of them), at least 64.
    pub fn dram_align(cfg: &HwConfig) -> u64 {
        MemType::ALL
            .iter()
            .map(|&m| u64::from(cfg.elem_bytes(m)))
            .max()
            .unwrap_or(1)
            .max(64)
    }

    /// Bytes the region spans (end of the last segment, rounded up to the alignment).
    pub fn dram_size(&self) -> u64 {
        let align = Self::dram_align(&self.config);
        self.segments
            .iter()
            .map(|s| s.range().end)
            .max()
            .unwrap_or(0)
            .next_multiple_of(align)
    }

    /// Appends a segment at the next aligned offset and returns its offset.
    pub fn push_segment(
        &mut self,
        name: &str,
        dtype: DType,
        shape: Vec<usize>,
        role: Role,
        init: Option<Vec<u8>>,
    ) -> u64 {
        let offset = self.dram_size();
        self.segments.push(Segment {
            name: name.to_string(),
            dtype,
            shape,
            role,
            offset,
            init,
        });
        offset
    }

    pub fn segment(&self, name: &str) -> Option<&Segment> {
        self.segments.iter().find(|s| s.name == name)
    }

    /// The segment containing element `index` of memory type `m` (as a `dram_base` counts),
    /// with the element offset inside it.
    pub fn locate(&self, m: MemType, index: u64) -> Option<(&Segment, u64)> {
        let eb = u64::from(self.config.elem_bytes(m));
        let byte = index * eb;
        self.segments
            .iter()
            .find(|s| s.range().contains(&byte))
            .map(|s| (s, index - s.offset / eb))
    }

    /// The instruction stream with every LOAD/STORE `dram_base` moved to a region placed at
    /// physical byte address `base` (which must be a multiple of [`Program::dram_align`]).
    pub fn relocated(&self, base: u64) -> Result<Vec<Insn>, String> {
        let align = Self::dram_align(&self.config);
        if !base.is_multiple_of(align) {
            return Err(format!(
                "DRAM region base {base:#x} is not aligned to {align} bytes"
            ));
        }
        self.insns
            .iter()
            .enumerate()
            .map(|(i, insn)| {
                let mut insn = *insn;
                if let Insn::Load(m) | Insn::Store(m) = &mut insn {
                    let shift = base / u64::from(self.config.elem_bytes(m.memory_type));
                    let moved = u64::from(m.dram_base) + shift;
                    m.dram_base = u32::try_from(moved).map_err(|_| {
                        format!(
                            "instruction {i}: dram_base {moved:#x} after relocation to {base:#x} \
                             does not fit 32 bits"
                        )
                    })?;
                }
                Ok(insn)
            })
            .collect()
    }

    /// The instruction stream with every segment moved to its own physical byte address
    /// (`place(i)` for segment `i`, a multiple of [`Program::dram_align`]): each LOAD/STORE's
    /// whole DRAM footprint must lie inside one segment, and moves with it. This is how a
    /// runtime keeps weights in one buffer and activations in another, shared between programs.
    pub fn relocated_segments(&self, place: &dyn Fn(usize) -> u64) -> Result<Vec<Insn>, String> {
        let align = Self::dram_align(&self.config);
        self.insns
            .iter()
            .enumerate()
            .map(|(i, insn)| {
                let mut insn = *insn;
                let moves_data = |m: &MemInsn| m.y_size > 0 && m.x_size > 0;
                if let Insn::Load(m) | Insn::Store(m) = &mut insn {
                    if !moves_data(m) {
                        // A sync instruction: tokens only, its dram_base is never read.
                        return Ok(insn);
                    }
                    let eb = u64::from(self.config.elem_bytes(m.memory_type));
                    let first = u64::from(m.dram_base) * eb;
                    let last = (u64::from(m.dram_base)
                        + (u64::from(m.y_size) - 1) * u64::from(m.x_stride)
                        + u64::from(m.x_size))
                        * eb;
                    let (k, seg) = self
                        .segments
                        .iter()
                        .enumerate()
                        .find(|(_, s)| s.offset <= first && last <= s.range().end)
                        .ok_or_else(|| {
                            format!(
                                "instruction {i}: its DRAM bytes {first}..{last} are not inside \
                                 one segment, so the program cannot be split into placed segments"
                            )
                        })?;
                    let base = place(k);
                    if !base.is_multiple_of(align) {
                        return Err(format!(
                            "segment '{}' placed at {base:#x}, not aligned to {align} bytes",
                            seg.name
                        ));
                    }
                    let moved = (base + first - seg.offset) / eb;
                    m.dram_base = u32::try_from(moved).map_err(|_| {
                        format!(
                            "instruction {i}: dram_base {moved:#x} of segment '{}' placed at \
                             {base:#x} does not fit 32 bits",
                            seg.name
                        )
                    })?;
                }
                Ok(insn)
            })
            .collect()
    }

    /// Micro-ops of a `uop` segment, decoded.
    pub fn uops(&self, seg: &Segment) -> Vec<Uop> {
        let codec = Codec::new(&self.config);
        let zeros;
        let bytes = match &seg.init {
            Some(b) => b.as_slice(),
            None => {
                zeros = vec![0u8; seg.size() as usize];
                &zeros
            }
        };
        bytes
            .chunks_exact(4)
            .map(|c| codec.decode_uop(c.try_into().expect("4-byte chunk")))
            .collect()
    }

    /// Checks the invariants every consumer relies on: segment names unique and non-empty,
    /// offsets aligned, ascending and non-overlapping, initial data of the right size, and
    /// every instruction encodable under the config.
    pub fn validate(&self) -> Result<(), String> {
        let align = Self::dram_align(&self.config);
        let mut end = 0u64;
        let mut names = std::collections::HashSet::new();
        for (i, s) in self.segments.iter().enumerate() {
            if s.name.is_empty() {
                return Err(format!("segment {i} has an empty name"));
            }
            if s.checked_size().is_none() {
                return Err(format!(
                    "segment '{}' (shape {:?} of {}, at byte {}) is too large to address",
                    s.name,
                    s.shape,
                    s.dtype.name(),
                    s.offset
                ));
            }
            if !names.insert(s.name.as_str()) {
                return Err(format!("segment name '{}' is used twice", s.name));
            }
            if s.offset % align != 0 {
                return Err(format!(
                    "segment '{}' starts at byte {}, not a multiple of the {align}-byte alignment",
                    s.name, s.offset
                ));
            }
            if s.offset < end {
                return Err(format!(
                    "segment '{}' at byte {} overlaps the segment before it (which ends at {end})",
                    s.name, s.offset
                ));
            }
            if let Some(init) = &s.init {
                if init.len() as u64 != s.size() {
                    return Err(format!(
                        "segment '{}' has {} bytes of initial data but its shape needs {}",
                        s.name,
                        init.len(),
                        s.size()
                    ));
                }
            }
            end = s.range().end;
        }
        let codec = Codec::new(&self.config);
        for (i, insn) in self.insns.iter().enumerate() {
            codec
                .encode(insn)
                .map_err(|e| format!("instruction {i}: {e}"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::ProgramBuilder;

    /// A program reading `a` and writing `b`, with a gap segment between them.
    fn two_segment_program() -> Program {
        let cfg = HwConfig::default();
        let mut b = ProgramBuilder::new(&cfg);
        let a = b.input("a", DType::I8, vec![4, 16], vec![1; 64]);
        b.buffer("gap", DType::I8, vec![64], Role::default(), None);
        let out = b.output("b", DType::I8, vec![4, 16]);
        b.load_2d(MemType::Inp, 0, a, 1, 2, 1, 2);
        b.store_2d(0, out, 2, 1, 2, 2);
        b.finish().unwrap()
    }

    fn mem_bases(insns: &[Insn]) -> Vec<u32> {
        insns
            .iter()
            .filter_map(|i| match i {
                Insn::Load(m) | Insn::Store(m) if m.x_size > 0 => Some(m.dram_base),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn segments_move_independently() {
        let p = two_segment_program();
        let inp = u64::from(p.config.elem_bytes(MemType::Inp));
        let out = u64::from(p.config.elem_bytes(MemType::Out));
        let placed = [0x10_0000u64, 0, 0x20_0000];
        let moved = p.relocated_segments(&|k| placed[k]).unwrap();
        assert_eq!(
            mem_bases(&moved),
            vec![(0x10_0000 / inp + 1) as u32, (0x20_0000 / out + 2) as u32]
        );
        // One shared base is the special case `relocated` handles (sync instructions aside,
        // whose dram_base nobody reads).
        let same = p
            .relocated_segments(&|k| 0x4000 + p.segments[k].offset)
            .unwrap();
        assert_eq!(mem_bases(&same), mem_bases(&p.relocated(0x4000).unwrap()));
    }

    #[test]
    fn a_transfer_across_segments_is_refused() {
        let mut p = two_segment_program();
        for insn in &mut p.insns {
            if let Insn::Load(m) = insn {
                if m.memory_type == MemType::Inp && m.x_size > 0 {
                    m.y_size = 40; // runs past "a" into "gap"
                }
            }
        }
        let e = p.relocated_segments(&|k| p.segments[k].offset).unwrap_err();
        assert!(e.contains("not inside one segment"), "{e}");
    }

    #[test]
    fn a_misaligned_placement_is_refused() {
        let p = two_segment_program();
        let e = p.relocated_segments(&|_| 0x1001).unwrap_err();
        assert!(e.contains("not aligned"), "{e}");
    }
}
