//! ALU epilogues: [`Requant`] (and a bias add) as a sequence of exact ALU instructions.
//!
//! `Requant::apply` is, step by step, and each step is one ALU instruction over the tile
//! (ALU arithmetic wraps at 32 bits exactly as the reference's `wrapping_*` operations; the
//! shift is arithmetic, `isa::spec` section 8.2):
//!
//! | reference                          | ALU                                                        |
//! |------------------------------------|------------------------------------------------------------|
//! | `acc + bias[c]` (conv, dense)      | `ADD` tensor: per-channel table row                        |
//! | `v >> pre_shift`                   | `SHR` imm `pre_shift` (skipped when 0)                      |
//! | `clamp(v, acc_clamp)` (when set)   | `MAX`, `MIN`: imm, or tensor from a splat row when a bound does not fit the 16-bit immediate |
//! | `wrapping_mul(v, mul)`             | `MUL` imm (per tensor) or tensor (per-channel table); skipped when the multiplier is 1. Without `ALU_MUL`, a power of two `2^k` is `SHR -k` and 0 is `SHR -32` (exact: a left shift wraps like the product); other multipliers are refused |
//! | `wrapping_add(v, 1 << (shift-1))`  | `ADD` imm, or tensor from a splat row when the constant does not fit the 16-bit immediate (`shift > 15`) |
//! | `>> shift`                         | `SHR` imm `shift`                                           |
//! | `+ zero_point`                     | `ADD` imm (skipped when 0)                                  |
//! | `clamp(lo, hi)`                    | `MAX` imm `lo`, `MIN` imm `hi`; the int8 STORE then keeps the low 8 bits, which is exact inside `[lo, hi]` |
//!
//! Without a pre-shift (and an accumulator clamp), a bias and the rounding constant are one
//! table added after the multiplication (`(acc + b) * m + round == acc * m + (b * m + round)`
//! in wrapping arithmetic): one ALU instruction less.
//!
//! The reference itself is only defined for `pre_shift < 32`, `shift < 32` and `lo <= hi`
//! (larger shifts overflow in Rust); other values are refused as invalid.

use isa::{AluOp, HwConfig};

use super::BackendError;
use crate::qlayer::{QAdd, Requant};

/// The second operand of one epilogue instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpSrc {
    /// A 16-bit immediate.
    Imm(i16),
    /// Per-channel table `k`: the ACC row of the tile's channel block.
    Table(usize),
    /// Splat row `k`: one ACC row with every lane equal.
    Splat(usize),
    /// The shortcut's row of the same pixel and channel block (a residual add fused into a
    /// convolution, [`with_residual`]).
    Shortcut,
}

/// The rows one epilogue instruction writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpDst {
    /// The tile's accumulators.
    Acc,
    /// The shortcut rows loaded beside them ([`with_residual`]).
    Shortcut,
}

/// One ALU instruction of an epilogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpOp {
    pub op: AluOp,
    pub src: EpSrc,
    pub dst: EpDst,
}

/// An epilogue: its instructions and the ACC constants they read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Epilogue {
    pub ops: Vec<EpOp>,
    /// Per-channel tables (one value per channel), in table order.
    pub tables: Vec<Vec<i32>>,
    /// Splat rows, in order.
    pub splats: Vec<i32>,
}

impl Epilogue {
    /// ACC rows of constants a tile of `blocks` channel blocks needs.
    pub fn table_rows(&self, blocks: usize) -> usize {
        self.tables.len() * blocks + self.splats.len()
    }

    /// Cycles the epilogue takes to issue over one accumulator row, emitted as it is, with
    /// the rows in the inner loop: there every instruction streams, a table or splat row
    /// read once per pass ([`super::roofline::streamed_uops`]), so a row costs one cycle
    /// per instruction (the first micro-ops of each pass, per channel block, are left out),
    /// but two for the shortcut's (a tensor operand read anew for every row).
    pub fn issue_cycles(&self) -> usize {
        self.ops
            .iter()
            .map(|o| 1 + usize::from(o.src == EpSrc::Shortcut))
            .sum()
    }

    fn table(&mut self, values: Vec<i32>) -> EpSrc {
        self.tables.push(values);
        EpSrc::Table(self.tables.len() - 1)
    }

    fn splat(&mut self, v: i32) -> EpSrc {
        self.splats.push(v);
        EpSrc::Splat(self.splats.len() - 1)
    }

    fn op(&mut self, op: AluOp, src: EpSrc) {
        self.ops.push(EpOp {
            op,
            src,
            dst: EpDst::Acc,
        });
    }

    /// Whether it reads a shortcut ([`with_residual`]).
    pub fn has_shortcut(&self) -> bool {
        self.ops
            .iter()
            .any(|o| o.dst == EpDst::Shortcut || o.src == EpSrc::Shortcut)
    }
}

/// The epilogue of a convolution whose output only feeds residual add `add`: the
/// convolution's own epilogue `conv` (its int8 result stays in the accumulator rows), then
/// the add on those rows and the shortcut's (loaded into ACC beside them, sign-extended):
/// each operand times its multiplier, their sum, and the add's epilogue `add_ep` (its
/// constants after the convolution's). `conv_is_a`: the convolution's output is the add's
/// first operand. Exact: the same wrapping int32 steps as the two layers one after the other,
/// without the int8 round trip through DRAM (the int8 values are exact in ACC).
pub fn with_residual(
    cfg: &HwConfig,
    add: &QAdd,
    conv: Epilogue,
    add_ep: &Epilogue,
    conv_is_a: bool,
) -> Result<Epilogue, BackendError> {
    let (m_conv, m_short) = if conv_is_a {
        (add.mul_a, add.mul_b)
    } else {
        (add.mul_b, add.mul_a)
    };
    let mut ep = conv;
    for (m, dst) in [(m_conv, EpDst::Acc), (m_short, EpDst::Shortcut)] {
        if m != 1 {
            let (op, v) = mul_by(cfg, m).ok_or_else(|| no_mul(cfg, &add.name, m))?;
            ep.ops.push(EpOp {
                op,
                src: EpSrc::Imm(v),
                dst,
            });
        }
    }
    ep.op(AluOp::Add, EpSrc::Shortcut);
    let (t0, s0) = (ep.tables.len(), ep.splats.len());
    ep.tables.extend(add_ep.tables.iter().cloned());
    ep.splats.extend(add_ep.splats.iter().copied());
    for o in &add_ep.ops {
        let src = match o.src {
            EpSrc::Table(k) => EpSrc::Table(t0 + k),
            EpSrc::Splat(k) => EpSrc::Splat(s0 + k),
            other => other,
        };
        ep.ops.push(EpOp { src, ..*o });
    }
    Ok(ep)
}

/// Checks that `r` is a well-defined requantization of `channels` channels.
pub fn check_requant(layer: &str, r: &Requant, channels: usize) -> Result<(), BackendError> {
    let invalid = |reason: String| BackendError::InvalidLayer {
        layer: layer.into(),
        reason,
    };
    if r.mul.len() != 1 && r.mul.len() != channels {
        return Err(invalid(format!(
            "requant has {} multipliers for {channels} channels (expected 1 or {channels})",
            r.mul.len()
        )));
    }
    if r.pre_shift >= 32 || r.shift >= 32 {
        return Err(invalid(format!(
            "requant shifts must be below 32 (pre_shift {}, shift {}): the reference \
             overflows its int32 shift",
            r.pre_shift, r.shift
        )));
    }
    if r.lo > r.hi {
        return Err(invalid(format!(
            "requant clip range is empty (lo {} > hi {})",
            r.lo, r.hi
        )));
    }
    if let Some((lo, hi)) = r.acc_clamp.filter(|(lo, hi)| lo > hi) {
        return Err(invalid(format!(
            "requant accumulator clamp is empty (lo {lo} > hi {hi})"
        )));
    }
    Ok(())
}

/// The shift that multiplies like `m` without ALU MUL (`2^k` -> `-k`, `0` -> `-32`).
pub fn shift_for(m: i16) -> Option<i16> {
    if m == 0 {
        Some(-32)
    } else if m > 0 && (m as u16).is_power_of_two() {
        Some(-(m.trailing_zeros() as i16))
    } else {
        None
    }
}

/// The ALU instruction that multiplies by `m` exactly on this config: `MUL` imm, or without
/// ALU MUL the left shift that does ([`shift_for`]); `None` when neither can.
pub fn mul_by(cfg: &HwConfig, m: i16) -> Option<(AluOp, i16)> {
    if cfg.alu_mul {
        Some((AluOp::Mul, m))
    } else {
        shift_for(m).map(|s| (AluOp::Shr, s))
    }
}

/// ALU instructions with an immediate that set any accumulator row to zero: `MUL 0`, or
/// without MUL `MIN 0` then `MAX 0` (an accumulator reset on the ALU pipeline).
pub fn zeroing(cfg: &HwConfig) -> &'static [(AluOp, i16)] {
    if cfg.alu_mul {
        &[(AluOp::Mul, 0)]
    } else {
        &[(AluOp::Min, 0), (AluOp::Max, 0)]
    }
}

/// Plans the epilogue `requant(acc + bias)` for a layer of `channels` output channels.
/// `bias` is skipped when absent or all zero.
pub fn plan(
    cfg: &HwConfig,
    layer: &str,
    r: &Requant,
    bias: Option<&[i32]>,
    channels: usize,
) -> Result<Epilogue, BackendError> {
    super::check_out_range(cfg, layer, r.lo.into(), r.hi.into())?;
    plan_wide(cfg, layer, r, bias, channels)
}

/// [`plan`] for outputs of any int8 range: those of a convolution or dense layer whose
/// clamp is wider than the output lanes, stored as digit planes ([`super::out_digits`]).
pub fn plan_wide(
    cfg: &HwConfig,
    layer: &str,
    r: &Requant,
    bias: Option<&[i32]>,
    channels: usize,
) -> Result<Epilogue, BackendError> {
    check_requant(layer, r, channels)?;
    let mut ep = Epilogue::default();
    let bias = bias.filter(|b| b.iter().any(|&v| v != 0));
    // Without a pre-shift the bias moves behind the multiplication and takes the rounding
    // constant along: (acc + b) * m + round == acc * m + (b * m + round) modulo 2^32.
    let merged = bias.filter(|_| r.pre_shift == 0 && r.shift > 0 && r.acc_clamp.is_none());
    if let Some(bias) = bias.filter(|_| merged.is_none()) {
        let t = ep.table(bias.to_vec());
        ep.op(AluOp::Add, t);
    }
    if r.pre_shift > 0 {
        ep.op(AluOp::Shr, EpSrc::Imm(i16::from(r.pre_shift)));
    }
    if let Some((lo, hi)) = r.acc_clamp {
        for (op, bound) in [(AluOp::Max, lo), (AluOp::Min, hi)] {
            let src = match i16::try_from(bound) {
                Ok(imm) => EpSrc::Imm(imm),
                Err(_) => ep.splat(bound),
            };
            ep.op(op, src);
        }
    }
    let per_tensor = r.mul.iter().all(|&m| m == r.mul[0]);
    if per_tensor {
        let m = r.mul[0];
        if m != 1 {
            let (op, v) = mul_by(cfg, m).ok_or_else(|| no_mul(cfg, layer, m))?;
            ep.op(op, EpSrc::Imm(v));
        }
    } else if cfg.alu_mul {
        let t = ep.table(r.mul.iter().map(|&m| i32::from(m)).collect());
        ep.op(AluOp::Mul, t);
    } else {
        let shifts = r
            .mul
            .iter()
            .map(|&m| {
                shift_for(m)
                    .map(i32::from)
                    .ok_or_else(|| no_mul(cfg, layer, m))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let t = ep.table(shifts);
        ep.op(AluOp::Shr, t);
    }
    if r.shift > 0 {
        let round = 1i32 << (r.shift - 1);
        match (merged, i16::try_from(round)) {
            (Some(bias), _) => {
                let t = ep.table(
                    (0..channels)
                        .map(|c| {
                            // (a bias of the wrong length is refused by the layer's checks)
                            bias.get(c)
                                .copied()
                                .unwrap_or(0)
                                .wrapping_mul(i32::from(r.mul_of(c)))
                                .wrapping_add(round)
                        })
                        .collect(),
                );
                ep.op(AluOp::Add, t);
            }
            (None, Ok(imm)) => ep.op(AluOp::Add, EpSrc::Imm(imm)),
            (None, Err(_)) => {
                let s = ep.splat(round);
                ep.op(AluOp::Add, s);
            }
        }
        ep.op(AluOp::Shr, EpSrc::Imm(i16::from(r.shift)));
    }
    if r.zero_point != 0 {
        ep.op(AluOp::Add, EpSrc::Imm(i16::from(r.zero_point)));
    }
    ep.op(AluOp::Max, EpSrc::Imm(i16::from(r.lo)));
    ep.op(AluOp::Min, EpSrc::Imm(i16::from(r.hi)));
    Ok(ep)
}

fn no_mul(cfg: &HwConfig, layer: &str, m: i16) -> BackendError {
    BackendError::Unsupported {
        layer: layer.into(),
        config: cfg.config_string(),
        reason: format!(
            "the requant multiplier {m} needs ALU MUL, which this config lacks (ALU_MUL = \
             false); only 0 and positive powers of two can be applied as shifts"
        ),
    }
}

/// Applies `ep` to one value of channel `c` (and the shortcut's value `short` there, for an
/// epilogue [`with_residual`]) exactly as the ALU does (a model used by tests).
pub fn simulate(ep: &Epilogue, acc: i32, short: i32, c: usize) -> i32 {
    let mut rows = [acc, short];
    for o in &ep.ops {
        let y = match o.src {
            EpSrc::Imm(v) => i32::from(v),
            EpSrc::Table(t) => ep.tables[t][c],
            EpSrc::Splat(s) => ep.splats[s],
            EpSrc::Shortcut => rows[1],
        };
        let x = &mut rows[usize::from(o.dst == EpDst::Shortcut)];
        *x = alu(o.op, *x, y);
    }
    rows[0]
}

fn alu(op: AluOp, x: i32, y: i32) -> i32 {
    match op {
        AluOp::Min => x.min(y),
        AluOp::Max => x.max(y),
        AluOp::Add => x.wrapping_add(y),
        AluOp::Mul => x.wrapping_mul(y),
        AluOp::Shr => {
            // low 6 bits, signed
            let s = ((y << 26) >> 26) as i64;
            if s >= 0 {
                x >> s
            } else if -s >= 32 {
                0
            } else {
                x.wrapping_shl((-s) as u32)
            }
        }
        AluOp::Lut | AluOp::LutWrite => unreachable!("epilogues use no table operations"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rq(pre: u8, mul: Vec<i16>, shift: u8, zp: i8, lo: i8, hi: i8) -> Requant {
        Requant {
            pre_shift: pre,
            acc_clamp: None,
            mul,
            shift,
            zero_point: zp,
            lo,
            hi,
        }
    }

    const EDGE: [i32; 12] = [
        0,
        1,
        -1,
        i32::MAX,
        i32::MIN,
        i32::MAX - 1,
        i32::MIN + 1,
        1 << 30,
        -(1 << 30),
        32767,
        -32768,
        123_456_789,
    ];

    #[test]
    fn the_alu_sequence_matches_apply_on_edge_values() {
        let cfgs = [
            HwConfig::default(),
            HwConfig {
                alu_mul: false,
                ..HwConfig::default()
            },
        ];
        let cases = [
            rq(0, vec![1], 0, 0, -128, 127),
            rq(3, vec![-7], 5, -3, -100, 100),
            rq(31, vec![i16::MAX], 31, 127, -128, 127),
            rq(0, vec![i16::MIN], 16, 0, -128, 127),
            rq(1, vec![2, 0, 1, 16384], 17, 5, 0, 127),
            rq(0, vec![1024], 1, -128, -128, -128),
            Requant {
                acc_clamp: Some((-300, 200)),
                ..rq(0, vec![13001], 20, 3, -128, 127)
            },
            Requant {
                acc_clamp: Some((-1_000_000, 70_000)),
                ..rq(2, vec![5, 30000, 1, 2], 24, -7, -128, 127)
            },
        ];
        for cfg in &cfgs {
            for r in &cases {
                let ep = match plan(cfg, "t", r, Some(&[5, -9, 0, 1]), 4) {
                    Ok(ep) => ep,
                    Err(e) => {
                        assert!(!cfg.alu_mul, "{e}");
                        continue;
                    }
                };
                for &a in &EDGE {
                    for c in 0..4 {
                        let bias = [5, -9, 0, 1][c];
                        assert_eq!(
                            simulate(&ep, a, 0, c),
                            i32::from(r.apply(a.wrapping_add(bias), c)),
                            "{r:?} acc {a} channel {c}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn without_a_pre_shift_the_bias_carries_the_rounding_constant() {
        let ep = plan(
            &HwConfig::default(),
            "t",
            &rq(0, vec![3], 8, 0, -128, 127),
            Some(&[5, -9]),
            2,
        )
        .unwrap();
        let ops: Vec<AluOp> = ep.ops.iter().map(|o| o.op).collect();
        assert_eq!(
            ops,
            [AluOp::Mul, AluOp::Add, AluOp::Shr, AluOp::Max, AluOp::Min]
        );
        assert_eq!(ep.tables, vec![vec![5 * 3 + 128, -9 * 3 + 128]]);
        // with a pre-shift the bias stays in front
        let ep = plan(
            &HwConfig::default(),
            "t",
            &rq(2, vec![3], 8, 0, -128, 127),
            Some(&[5, -9]),
            2,
        )
        .unwrap();
        assert_eq!(ep.ops.len(), 7);
    }

    #[test]
    fn an_accumulator_clamp_comes_before_the_multiplier_and_keeps_the_bias_in_front() {
        let r = Requant {
            acc_clamp: Some((-40_000, 90)),
            ..rq(0, vec![3], 8, 0, -128, 127)
        };
        let ep = plan(&HwConfig::default(), "t", &r, Some(&[5, -9]), 2).unwrap();
        let ops: Vec<AluOp> = ep.ops.iter().map(|o| o.op).collect();
        assert_eq!(
            ops,
            [
                AluOp::Add,
                AluOp::Max,
                AluOp::Min,
                AluOp::Mul,
                AluOp::Add,
                AluOp::Shr,
                AluOp::Max,
                AluOp::Min
            ]
        );
        assert_eq!(ep.splats, vec![-40_000]);
        assert_eq!(ep.ops[2].src, EpSrc::Imm(90));
    }

    #[test]
    fn large_rounding_constants_use_a_splat_row() {
        let ep = plan(
            &HwConfig::default(),
            "t",
            &rq(0, vec![3], 16, 0, -128, 127),
            None,
            1,
        )
        .unwrap();
        assert_eq!(ep.splats, vec![1 << 15]);
        assert!(ep.tables.is_empty());
    }

    #[test]
    fn invalid_requants_are_refused() {
        let cfg = HwConfig::default();
        for r in [
            rq(32, vec![1], 0, 0, -128, 127),
            rq(0, vec![1], 32, 0, -128, 127),
            rq(0, vec![1], 0, 0, 5, 4),
            rq(0, vec![1, 2], 0, 0, -128, 127),
            Requant {
                acc_clamp: Some((1, 0)),
                ..rq(0, vec![1], 0, 0, -128, 127)
            },
        ] {
            assert!(matches!(
                plan(&cfg, "t", &r, None, 3),
                Err(BackendError::InvalidLayer { .. })
            ));
        }
    }

    #[test]
    fn without_mul_only_shifts_are_accepted() {
        let cfg = HwConfig {
            alu_mul: false,
            ..HwConfig::default()
        };
        let e = plan(&cfg, "t", &rq(0, vec![3], 0, 0, -128, 127), None, 1).unwrap_err();
        assert!(e.to_string().contains("ALU_MUL"), "{e}");
        let ep = plan(&cfg, "t", &rq(0, vec![8], 0, 0, -128, 127), None, 1).unwrap();
        assert_eq!(
            ep.ops[0],
            EpOp {
                op: AluOp::Shr,
                src: EpSrc::Imm(-3),
                dst: EpDst::Acc,
            }
        );
    }

    #[test]
    fn a_fused_residual_add_matches_the_two_layers() {
        let conv_rq = rq(0, vec![1234, -77], 20, -3, -128, 127);
        let bias = [1000, -50_000];
        let add = QAdd {
            name: "add".into(),
            mul_a: 11548,
            mul_b: -31974,
            requant: rq(0, vec![1], 15, 4, 0, 127),
        };
        for cfg in [
            HwConfig::default(),
            HwConfig {
                alu_mul: false,
                ..HwConfig::default()
            },
        ] {
            let add = if cfg.alu_mul {
                add.clone()
            } else {
                QAdd {
                    mul_a: 4,
                    mul_b: 1,
                    ..add.clone()
                }
            };
            let conv = if cfg.alu_mul {
                conv_rq.clone()
            } else {
                rq(0, vec![2], 3, 0, -128, 127)
            };
            let conv_ep = plan(&cfg, "c", &conv, Some(&bias), 2).unwrap();
            let add_ep = plan(&cfg, "add", &add.requant, None, 2).unwrap();
            for conv_is_a in [true, false] {
                let ep = with_residual(&cfg, &add, conv_ep.clone(), &add_ep, conv_is_a).unwrap();
                assert!(ep.has_shortcut());
                for (c, acc, short) in [(0, 123_456i32, -128i8), (1, -9_999_999, 127), (0, 0, 5)] {
                    let y = conv.apply(acc.wrapping_add(bias[c]), c);
                    let (a, b) = if conv_is_a { (y, short) } else { (short, y) };
                    let one = |v: i8| ndarray::Array4::from_elem((1, 1, 1, 1), v);
                    let want = add.reference(one(a).view(), one(b).view())[[0, 0, 0, 0]];
                    assert_eq!(
                        simulate(&ep, acc, i32::from(short), c),
                        i32::from(want),
                        "alu_mul {}, conv_is_a {conv_is_a}, channel {c}",
                        cfg.alu_mul
                    );
                }
            }
        }
    }
}
