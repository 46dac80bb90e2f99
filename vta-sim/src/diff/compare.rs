//! Comparing one program's run on the RTL simulator with its run on the functional simulator,
//! and, when the outputs differ, finding the first STORE whose data differ: by bisecting over
//! the program with the later STOREs turned into syncs that keep their tokens. The report names
//! that STORE, the output byte and its DRAM address, the OUT/ACC row and lane, both values, and
//! the last compute instruction that wrote that row.

use drivers::{run_program, Device, ProgramRun, RunTimeout};
use isa::{HwConfig, Insn, MemType, Module, Program, Uop};

use super::gen;
use super::plant::Planted;
use super::DiffError;
use crate::rtl::{MemFaults, MemTiming, RtlDevice, Stalls};
use crate::FsimDevice;

/// One case of the campaign: a program and the memory it meets on the RTL.
#[derive(Clone, Debug)]
pub struct Case {
    pub cfg: HwConfig,
    pub program: Program,
    /// The RTL memory's latency and bandwidth.
    pub timing: MemTiming,
    /// Random AXI stalls on every channel, if any.
    pub stalls: Option<Stalls>,
    /// A planted fault: the RTL's result of STORE number `plant` corrupted (see
    /// [`Planted`]), to test the campaign itself.
    pub plant: Option<usize>,
}

impl Case {
    /// The case of program seed `seed` on `cfg`: the program, timing and stalls it draws.
    pub fn generated(cfg: &HwConfig, seed: u64) -> Result<Case, DiffError> {
        Ok(Case {
            cfg: cfg.clone(),
            program: gen::program(cfg, seed)?,
            timing: gen::timing(seed),
            stalls: gen::stalls(seed),
            plant: None,
        })
    }
}

/// A run both backends agree on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Agreement {
    /// The RTL's cycles.
    pub cycles: u64,
    pub instructions: usize,
    /// Whether the program stored anything but zeros (a program that stores only zeros tests
    /// little).
    pub nonzero: bool,
}

/// How the backends disagreed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MismatchKind {
    /// The functional simulator refused or failed the program (a generator bug).
    FsimFailed,
    /// The RTL run failed (a hang, a timeout, an AXI error) where fsim completed.
    RtlFailed,
    /// Output bytes differ.
    Outputs,
    /// Outputs agree, the spec's counters do not.
    Counters,
}

impl MismatchKind {
    pub const ALL: [MismatchKind; 4] = [
        MismatchKind::FsimFailed,
        MismatchKind::RtlFailed,
        MismatchKind::Outputs,
        MismatchKind::Counters,
    ];

    /// The kind as reproducer files and JSON reports write it.
    pub fn name(self) -> &'static str {
        match self {
            MismatchKind::FsimFailed => "fsim-failed",
            MismatchKind::RtlFailed => "rtl-failed",
            MismatchKind::Outputs => "outputs",
            MismatchKind::Counters => "counters",
        }
    }

    /// The kind of [`MismatchKind::name`].
    pub fn from_name(name: &str) -> Option<MismatchKind> {
        MismatchKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// A disagreement and what is known of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    pub kind: MismatchKind,
    /// For differing outputs, the first differing STORE's report; else the error or the two
    /// counter sets.
    pub detail: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.kind {
            MismatchKind::FsimFailed => "the functional simulator failed",
            MismatchKind::RtlFailed => "the RTL run failed",
            MismatchKind::Outputs => "outputs differ between fsim and rtl",
            MismatchKind::Counters => "counters differ between fsim and rtl",
        };
        write!(f, "{what}: {}", self.detail)
    }
}

/// Runs `case` on the functional simulator (checking races) and on `rtl` (its timing, stalls
/// and planted fault set for the run) and compares outputs byte for byte and counters exactly.
pub fn check(case: &Case, rtl: &mut RtlDevice) -> Result<Agreement, Mismatch> {
    let (cfg, p) = (&case.cfg, &case.program);
    rtl.sim_mut().set_timing(case.timing);
    rtl.sim_mut().set_faults(MemFaults {
        stalls: case.stalls,
        ..MemFaults::none()
    });
    let mut planted;
    let dev: &mut dyn Device = match case.plant {
        Some(store) => {
            planted = Planted { rtl, store };
            &mut planted
        }
        None => rtl,
    };
    let want = run(&mut FsimDevice::checking_races(cfg), p).map_err(|e| Mismatch {
        kind: MismatchKind::FsimFailed,
        detail: e,
    })?;
    let got = run(dev, p).map_err(|e| Mismatch {
        kind: MismatchKind::RtlFailed,
        detail: e,
    })?;
    if first_diff(&want, &got).is_some() {
        return Err(Mismatch {
            kind: MismatchKind::Outputs,
            detail: diagnose(cfg, p, dev),
        });
    }
    if want.report.counters != got.report.counters {
        return Err(Mismatch {
            kind: MismatchKind::Counters,
            detail: format!(
                "fsim {:?}, rtl {:?}",
                want.report.counters, got.report.counters
            ),
        });
    }
    Ok(Agreement {
        cycles: got.report.get("cycles").unwrap_or(0),
        instructions: p.insns.len(),
        nonzero: want.outputs.iter().any(|(_, d)| d.iter().any(|&b| b != 0)),
    })
}

fn run(dev: &mut dyn Device, p: &Program) -> Result<ProgramRun, String> {
    run_program(dev, p, &[], RunTimeout::default()).map_err(|e| e.to_string())
}

/// `p` with every STORE after the `keep` first ones turned into a sync with the same tokens:
/// the DRAM after the run is what the first `keep` STOREs wrote.
fn stores_upto(p: &Program, keep: usize) -> Program {
    let mut q = p.clone();
    let mut seen = 0;
    for insn in &mut q.insns {
        if let Insn::Store(m) = insn {
            if m.x_size > 0 {
                seen += 1;
                if seen > keep {
                    m.x_size = 0;
                }
            }
        }
    }
    q
}

/// The first differing output byte: (segment, byte offset).
pub fn first_diff(a: &ProgramRun, b: &ProgramRun) -> Option<(String, usize)> {
    for ((name, x), (_, y)) in a.outputs.iter().zip(&b.outputs) {
        if let Some(i) = x.iter().zip(y).position(|(u, v)| u != v) {
            return Some((name.clone(), i));
        }
    }
    None
}

/// Indices of the ACC rows a compute instruction writes (UOP contents from `uop_buf`).
fn acc_writes(insn: &Insn, uop_buf: &[Uop]) -> Vec<u32> {
    let lp = match insn {
        Insn::Load(m) if matches!(m.memory_type, MemType::Acc | MemType::Acc8) && m.x_size > 0 => {
            let w = m.x_pad_0 as u32 + m.x_size as u32 + m.x_pad_1 as u32;
            let h = m.y_pad_0 as u32 + m.y_size as u32 + m.y_pad_1 as u32;
            return (0..w * h).map(|e| m.sram_base as u32 + e).collect();
        }
        Insn::Gemm(gm) => gm.lp,
        Insn::Alu(al) => al.lp,
        _ => return vec![],
    };
    let mut v = vec![];
    for o in 0..lp.iter_out as u32 {
        for i in 0..lp.iter_in as u32 {
            for u in lp.uop_bgn..lp.uop_end {
                let uop = uop_buf.get(u as usize).copied().unwrap_or_default();
                v.push(uop.dst_idx + o * lp.dst_factor_out as u32 + i * lp.dst_factor_in as u32);
            }
        }
    }
    v
}

/// Finds and describes the first STORE whose data differ between the functional simulator
/// and `rtl` (any device: the campaign passes the RTL, perhaps with a planted fault).
pub fn diagnose(cfg: &HwConfig, p: &Program, rtl: &mut dyn Device) -> String {
    let stores: Vec<usize> = p
        .insns
        .iter()
        .enumerate()
        .filter(|(_, i)| matches!(i, Insn::Store(m) if m.x_size > 0))
        .map(|(k, _)| k)
        .collect();
    let differs = |keep: usize, rtl: &mut dyn Device| -> Option<(ProgramRun, ProgramRun)> {
        let q = stores_upto(p, keep);
        let f = run(&mut FsimDevice::new(cfg), &q).ok()?;
        let r = run(rtl, &q).ok()?;
        first_diff(&f, &r).map(|_| (f, r))
    };
    // Smallest number of STOREs whose data already differ.
    let (mut lo, mut hi) = (0usize, stores.len());
    if differs(hi, rtl).is_none() {
        return "the outputs of the full program differ, but no prefix of STOREs reproduces it \
                (a failing run?)"
            .into();
    }
    while lo + 1 < hi {
        let mid = (lo + hi) / 2;
        if differs(mid, rtl).is_some() {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    // The runs are deterministic (faults restart with every run), so this differs again.
    let Some((f, r)) = differs(hi, rtl) else {
        return format!("the outputs of the first {hi} STOREs differed once and not again (a nondeterministic run?)");
    };
    let (seg_name, byte) = first_diff(&f, &r).expect("differs");
    let seg = p
        .segment(&seg_name)
        .expect("an output is a segment of the program");
    let sk = stores[hi - 1];
    let Insn::Store(m) = p.insns[sk] else {
        unreachable!()
    };
    let eb = cfg.elem_bytes(MemType::Out) as u64;
    let elem = (seg.offset + byte as u64) / eb;
    let lane_bytes = (cfg.out_width() / 8).max(1) as u64;
    let lane = ((seg.offset + byte as u64) % eb) / lane_bytes;
    let rel = elem - m.dram_base as u64;
    let (row, col) = (rel / m.x_stride as u64, rel % m.x_stride as u64);
    let sram = m.sram_base as u64 + row * m.x_size as u64 + col;
    // The last compute instruction before the STORE that writes ACC row `sram`.
    let mut uop_buf = vec![Uop::default(); cfg.depth(MemType::Uop) as usize];
    let mut writer = None;
    for (k, insn) in p.insns[..sk].iter().enumerate() {
        if let Insn::Load(l) = insn {
            if l.memory_type == MemType::Uop && l.x_size > 0 {
                if let Some((s, at)) = p.locate(MemType::Uop, l.dram_base as u64) {
                    let uops = p.uops(s);
                    for j in 0..l.x_size as usize {
                        if let Some(u) = uops.get(at as usize + j) {
                            uop_buf[l.sram_base as usize + j] = *u;
                        }
                    }
                }
            }
        }
        if insn.module() == Module::Compute && acc_writes(insn, &uop_buf).contains(&(sram as u32)) {
            writer = Some(k);
        }
    }
    let text = |k: usize| {
        isa::asm::print_insns(cfg, &[p.insns[k]])
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_string()
    };
    format!(
        "first differing STORE: instruction {sk} ({}) of {} STOREs; output '{seg_name}' byte {byte} \
         (DRAM element {elem} of OUT at the program's offset {:#x}): OUT/ACC row {sram}, lane {lane}: \
         fsim {:#04x}, rtl {:#04x}; last writer of ACC row {sram}: {}",
        text(sk),
        stores.len(),
        seg.offset + byte as u64,
        f.outputs.iter().find(|o| o.0 == seg_name).unwrap().1[byte],
        r.outputs.iter().find(|o| o.0 == seg_name).unwrap().1[byte],
        writer
            .map(|k| format!("instruction {k} ({})", text(k)))
            .unwrap_or_else(|| "none before it".into())
    )
}
