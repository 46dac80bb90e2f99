//! Choosing a [`Requant`] for a real multiplier.
//!
//! A quantized layer computes an int32 accumulator `acc` per output element and must output
//! `round(acc * M[c]) + zero_point` (clamped), where the real multiplier
//! `M[c] = s_x * s_w[c] / s_y` (input, weight and output scales) is typically 1e-4..1e-1.
//! The accelerator can only run [`Requant`]'s integer steps:
//!
//! ```text
//! v = acc >> pre                       (arithmetic shift: floor division by 2^pre)
//! v = v * mul[c]                       (int32, mul is an i16 immediate)
//! v = (v + 2^(shift-1)) >> shift       (round half up)
//! ```
//!
//! so `M[c]` is replaced by `M'[c] = mul[c] / 2^e` with `e = pre + shift`.
//!
//! # Derivation
//!
//! Write `acc = 2^pre * a + f` with `0 <= f < 2^pre`. The accelerator computes the real
//! number `a * mul / 2^shift = (acc - f) * M'` before rounding, so its deviation from the
//! exact `acc * M` is
//!
//! ```text
//! acc * (M' - M) - f * M'    with |.| <= R * |M' - M| / M  +  (2^pre - 1) * M'
//! ```
//!
//! where `R` bounds `|acc * M|` over the accumulators whose result is not clamped anyway
//! (`R = 128 + |zero_point| + 1`: beyond it both sides saturate). The first term is the
//! multiplier's relative precision (about `2^-15` when `mul` uses its 15 bits), the second the
//! bits the pre-shift drops (tiny, because `M` is small). If the deviation is below 1 LSB,
//! the result differs from the exactly rounded one by at most 1 (whatever the tie rule), and
//! only for accumulators whose real result lies within the deviation of a rounding boundary.
//!
//! Constraints: `1 <= mul <= 32767`; `shift <= 16` (30 with a clamp, below); and no int32
//! overflow for any accumulator the layer can produce. The worst case is computed per output channel from the
//! actual integer weights and bias and the input's known range
//! (`acc in [bias + sum min(w*x_lo, w*x_hi), bias + sum max(w*x_lo, w*x_hi)]`, see
//! [`conv_acc_ranges`]); the check is that `floor(acc / 2^pre) * mul + 2^(shift-1)` stays in
//! int32 at both ends of that range (the expression is monotonic in `acc`). Since
//! `floor(acc/2^pre) * mul ≈ acc * M * 2^shift`, overflow forces a smaller `shift` (fewer
//! multiplier bits); `pre` only trades multiplier bits against the dropped low bits.
//!
//! With an accumulator clamp ([`choose_requant_clamped`], [`Requant::acc_clamp`]) the
//! overflow check covers only the clamped range, the accumulators beyond which every output
//! saturates, so `pre` can stay 0 and `mul` keep its 15 bits, with `shift` up to 30.
//!
//! [`choose_requant`] tries every `(pre, shift)` in `0..=23 x 0..=16` and keeps the one with
//! the smallest deviation bound (ties: smaller `pre`). With [`MulRounding::Up`] (post-training
//! quantization, where the weight scales are ours to choose) `mul = ceil(M * 2^e)` and the
//! caller widens each channel's weight scale to make `M'` exact, so the multiplier term
//! becomes a (tiny) loss of weight resolution instead of an error.

use crate::qlayer::Requant;

/// How the multiplier is rounded to an integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MulRounding {
    /// `mul = round(M * 2^e)`: `M` is fixed (imported quantized models).
    Nearest,
    /// `mul = ceil(M * 2^e)`: the caller adjusts the weight scale so that `M' = mul / 2^e`
    /// exactly (post-training quantization).
    Up,
}

/// Inclusive range of a channel's int32 accumulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccRange {
    pub lo: i64,
    pub hi: i64,
}

/// A chosen requantization and its accuracy.
#[derive(Debug, Clone, PartialEq)]
pub struct RequantChoice {
    pub requant: Requant,
    /// `mul[c] / 2^(pre + shift)` per channel.
    pub effective: Vec<f64>,
    /// Largest `|M' - M| / M` over the channels.
    pub mul_rel_error: f64,
    /// Largest `(2^pre - 1) * M'` (output LSBs lost to the pre-shift).
    pub trunc_error: f64,
    /// Bound on the deviation (in output LSBs) from `acc * M` before rounding, for outputs
    /// that are not clamped: `R * mul_rel_error + trunc_error` (for [`MulRounding::Up`],
    /// only `trunc_error`, since the multiplier is exact after the weight-scale adjustment).
    pub deviation: f64,
}

/// Chooses `pre_shift`, `mul` and `shift` for the real multipliers `m` (one, or one per
/// output channel) and the per-channel accumulator ranges (one, or one per channel), with the
/// output `zero_point` and clamp `[lo, hi]`. With `pow2_only` every `mul` must be a power of
/// two (a configuration whose ALU has no multiplier realizes it as a shift).
pub fn choose_requant(
    m: &[f64],
    ranges: &[AccRange],
    rounding: MulRounding,
    pow2_only: bool,
    zero_point: i8,
    lo: i8,
    hi: i8,
) -> Result<RequantChoice, String> {
    choose(m, ranges, rounding, pow2_only, zero_point, lo, hi, false)
}

/// [`choose_requant`] with an accumulator clamp ([`Requant::acc_clamp`]): the pre-shifted
/// accumulator is clamped to `±B`, the smallest bound beyond which every output saturates
/// (`B * mul[c] / 2^shift >= 131 + |zero_point|` for every channel), so the overflow check
/// covers only `[-B, B]` instead of the worst-case accumulator, and the multiplier keeps all
/// its bits without a pre-shift (`shift` up to 30: the rounding constant then comes from a
/// splat row). The clamp is left out when the accumulator range lies within `±B` anyway.
pub fn choose_requant_clamped(
    m: &[f64],
    ranges: &[AccRange],
    rounding: MulRounding,
    pow2_only: bool,
    zero_point: i8,
    lo: i8,
    hi: i8,
) -> Result<RequantChoice, String> {
    choose(m, ranges, rounding, pow2_only, zero_point, lo, hi, true)
}

#[allow(clippy::too_many_arguments)]
fn choose(
    m: &[f64],
    ranges: &[AccRange],
    rounding: MulRounding,
    pow2_only: bool,
    zero_point: i8,
    lo: i8,
    hi: i8,
    clamp: bool,
) -> Result<RequantChoice, String> {
    if m.is_empty() {
        return Err("no multiplier".into());
    }
    if let Some(bad) = m.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
        return Err(format!(
            "requantization multiplier {bad} is not a positive number"
        ));
    }
    let r = 129.0 + f64::from(zero_point).abs();
    let range_of = |c: usize| {
        if ranges.len() == 1 {
            ranges[0]
        } else {
            ranges[c]
        }
    };
    let mut best: Option<(f64, RequantChoice)> = None;
    let mut why = String::from("no shift combination fits");
    let max_shift = if clamp { 30 } else { 16 };
    for pre in 0u8..=23 {
        for shift in (0u8..=max_shift).rev() {
            let e = i32::from(pre) + i32::from(shift);
            let scale = 2f64.powi(e);
            let mut muls = Vec::with_capacity(m.len());
            let mut ok = true;
            for &mc in m {
                let x = mc * scale;
                let mut mu = match rounding {
                    MulRounding::Nearest => x.round(),
                    MulRounding::Up => x.ceil(),
                };
                if pow2_only {
                    match rounding {
                        MulRounding::Up => mu = (mu.max(1.0) as u64).next_power_of_two() as f64,
                        MulRounding::Nearest => {
                            if mu != x || !(mu as u64).is_power_of_two() {
                                ok = false;
                                why = format!("multiplier {mc} is not a power of two (the config has no ALU multiplier)");
                                break;
                            }
                        }
                    }
                }
                if !(1.0..=32767.0).contains(&mu) {
                    ok = false;
                    break;
                }
                muls.push(mu as i64);
            }
            if !ok {
                continue;
            }
            // The clamp bound: beyond it every channel's output saturates.
            let bound = muls
                .iter()
                .map(|&mu| (((131 + i64::from(zero_point).abs()) << shift) + mu - 1) / mu)
                .max()
                .unwrap_or(0);
            let needed = clamp
                && (0..m.len().max(ranges.len())).any(|c| {
                    let rg = range_of(c);
                    (rg.lo >> pre) < -bound || (rg.hi >> pre) > bound
                });
            if needed && bound > i64::from(i32::MAX) {
                continue;
            }
            let clamped = |a: i64| if needed { a.clamp(-bound, bound) } else { a };
            // Overflow check at both ends of every channel's accumulator range.
            let rnd = if shift > 0 { 1i64 << (shift - 1) } else { 0 };
            let fits = (0..m.len().max(ranges.len())).all(|c| {
                let mu = muls[if muls.len() == 1 { 0 } else { c }];
                let rg = range_of(c);
                [clamped(rg.lo >> pre), clamped(rg.hi >> pre)]
                    .iter()
                    .all(|&a| {
                        let v = a * mu + rnd;
                        a * mu >= i64::from(i32::MIN) && v <= i64::from(i32::MAX)
                    })
                    && rg.lo >= i64::from(i32::MIN)
                    && rg.hi <= i64::from(i32::MAX)
            });
            if !fits {
                why = "the worst-case accumulator would overflow int32 even with the smallest multiplier".into();
                continue;
            }
            let effective: Vec<f64> = muls.iter().map(|&mu| mu as f64 / scale).collect();
            let mul_rel_error = m
                .iter()
                .zip(&effective)
                .map(|(a, b)| (b - a).abs() / a)
                .fold(0.0, f64::max);
            let pre_loss = f64::from((1u32 << pre) - 1);
            let trunc_error = effective
                .iter()
                .map(|&me| pre_loss * me)
                .fold(0.0, f64::max);
            let cost = r * mul_rel_error + trunc_error;
            let deviation = match rounding {
                MulRounding::Nearest => cost,
                MulRounding::Up => trunc_error,
            };
            if best.as_ref().is_none_or(|(c, _)| cost < *c) {
                let mul: Vec<i16> = if muls.iter().all(|&v| v == muls[0]) {
                    vec![muls[0] as i16]
                } else {
                    muls.iter().map(|&v| v as i16).collect()
                };
                best = Some((
                    cost,
                    RequantChoice {
                        requant: Requant {
                            pre_shift: pre,
                            acc_clamp: needed.then_some((-bound as i32, bound as i32)),
                            mul,
                            shift,
                            zero_point,
                            lo,
                            hi,
                        },
                        effective,
                        mul_rel_error,
                        trunc_error,
                        deviation,
                    },
                ));
            }
        }
    }
    best.map(|(_, c)| c).ok_or_else(|| {
        let (mn, mx) = m
            .iter()
            .fold((f64::INFINITY, 0f64), |(a, b), &v| (a.min(v), b.max(v)));
        format!("no requantization fits multiplier(s) {mn:.3e}..{mx:.3e}: {why}")
    })
}

/// Per-output-channel accumulator ranges of a convolution or dense layer with int8-domain
/// weights `w` (`[O, ...]`, flattened per channel), `bias`, and inputs in `[x_lo, x_hi]`.
pub fn conv_acc_ranges(
    w: &[i32],
    out_channels: usize,
    bias: &[i64],
    x_lo: i32,
    x_hi: i32,
) -> Vec<AccRange> {
    let per = w.len().checked_div(out_channels).unwrap_or(0);
    (0..out_channels)
        .map(|o| {
            let (mut lo, mut hi) = (bias[o], bias[o]);
            for &wv in &w[o * per..(o + 1) * per] {
                let a = i64::from(wv) * i64::from(x_lo);
                let b = i64::from(wv) * i64::from(x_hi);
                // Saturating: a range past i64 is as unrepresentable as one past i32.
                lo = lo.saturating_add(a.min(b));
                hi = hi.saturating_add(a.max(b));
            }
            AccRange { lo, hi }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_power_of_two_multiplier() {
        let c = choose_requant(
            &[0.25],
            &[AccRange {
                lo: -1000,
                hi: 1000,
            }],
            MulRounding::Nearest,
            false,
            0,
            -128,
            127,
        )
        .unwrap();
        assert_eq!(c.mul_rel_error, 0.0);
        assert_eq!(c.requant.pre_shift, 0);
        assert_eq!(c.deviation, 0.0);
        for acc in -1000..1000 {
            let want = ((acc as f64) * 0.25 + 0.5).floor().clamp(-128.0, 127.0) as i8;
            assert_eq!(c.requant.apply(acc, 0), want, "acc {acc}");
        }
    }

    #[test]
    fn small_multiplier_is_precise_and_never_overflows() {
        let m = [0.00123, 0.0031, 0.00077];
        let rg = [AccRange {
            lo: -3_000_000,
            hi: 2_500_000,
        }; 3];
        let c = choose_requant(&m, &rg, MulRounding::Nearest, false, 0, -128, 127).unwrap();
        assert!(c.deviation < 0.2, "{c:?}");
        assert!(c.requant.shift <= 16);
        for (ch, &mc) in m.iter().enumerate() {
            for acc in (-3_000_000..2_500_000).step_by(997) {
                let exact = (acc as f64 * mc).round().clamp(-128.0, 127.0) as i32;
                let got = i32::from(c.requant.apply(acc, ch));
                assert!(
                    (got - exact).abs() <= 1,
                    "ch {ch} acc {acc}: {got} vs {exact}"
                );
                // No wrap-around: compute without wrapping and compare.
                let v = i64::from(acc >> c.requant.pre_shift) * i64::from(c.requant.mul_of(ch));
                assert!(v + (1 << 15) < i64::from(i32::MAX) && v > i64::from(i32::MIN));
            }
        }
    }

    #[test]
    fn large_accumulators_force_a_smaller_shift() {
        let c = choose_requant(
            &[0.5],
            &[AccRange {
                lo: -(1 << 30),
                hi: 1 << 30,
            }],
            MulRounding::Nearest,
            false,
            0,
            -128,
            127,
        )
        .unwrap();
        let r = &c.requant;
        let v = i64::from((1i32 << 30) >> r.pre_shift) * i64::from(r.mul[0]);
        assert!(v + (1i64 << r.shift.saturating_sub(1)) <= i64::from(i32::MAX));
    }

    #[test]
    fn an_accumulator_clamp_keeps_the_multiplier_precise_and_saturates_exactly() {
        // A 3x3x16 convolution's worst-case accumulator with uint8-range inputs.
        let m = [0.0183, 0.0071];
        let rg = [AccRange {
            lo: -4_700_000,
            hi: 4_700_000,
        }; 2];
        let plain = choose_requant(&m, &rg, MulRounding::Nearest, false, -5, -128, 127).unwrap();
        let c =
            choose_requant_clamped(&m, &rg, MulRounding::Nearest, false, -5, -128, 127).unwrap();
        assert!(c.requant.acc_clamp.is_some(), "{c:?}");
        assert!(c.deviation * 4.0 < plain.deviation, "{c:?} vs {plain:?}");
        for (ch, &mc) in m.iter().enumerate() {
            for acc in (-4_700_000..4_700_000).step_by(611) {
                let exact = ((acc as f64 * mc).round() - 5.0).clamp(-128.0, 127.0) as i32;
                let got = i32::from(c.requant.apply(acc, ch));
                assert!(
                    (got - exact).abs() <= 1,
                    "ch {ch} acc {acc}: {got} vs {exact}"
                );
            }
            // The clamp's bound saturates, and nothing inside it overflows.
            let (lo, hi) = c.requant.acc_clamp.unwrap();
            assert_eq!(c.requant.apply(hi, ch), 127);
            assert_eq!(c.requant.apply(lo, ch), -128);
            let v = i64::from(hi) * i64::from(c.requant.mul_of(ch));
            assert!(v + (1 << (c.requant.shift - 1)) <= i64::from(i32::MAX));
        }
        // A range within the bound needs no clamp.
        let small = [AccRange { lo: -100, hi: 100 }];
        let c = choose_requant_clamped(&[0.01], &small, MulRounding::Nearest, false, 0, -128, 127)
            .unwrap();
        assert_eq!(c.requant.acc_clamp, None);
    }

    #[test]
    fn pow2_only_accepts_only_powers_of_two() {
        let rg = [AccRange { lo: -100, hi: 100 }];
        assert!(choose_requant(&[0.125], &rg, MulRounding::Nearest, true, 0, -128, 127).is_ok());
        assert!(choose_requant(&[0.3], &rg, MulRounding::Nearest, true, 0, -128, 127).is_err());
        let up = choose_requant(&[0.3], &rg, MulRounding::Up, true, 0, -128, 127).unwrap();
        assert!(up.requant.mul.iter().all(|&m| (m as u16).is_power_of_two()));
    }
}
