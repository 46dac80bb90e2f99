//! Activation ranges by minimum error: below 8-bit activations, each float tensor's range is
//! the one whose quantization (rounding and clipping at the core's activation width) has the
//! least squared error over the calibration values, instead of the largest magnitude seen.
//! At 4 bits a few outliers would otherwise stretch the 15 levels over a range most values
//! never reach.

use crate::graph::{DType, Graph, Tensor};

use super::calibrate::Stats;

/// Values of a tensor kept for the search, at most (spread evenly over its elements and the
/// samples).
const MAX_VALUES: usize = 16384;

/// Candidate ranges: the largest magnitude down to a fifth of it, in 2% steps.
const STEPS: u32 = 40;

/// `stats`' largest magnitudes with each float tensor's range replaced by the one with the
/// least squared error at `[-qmax, qmax]` levels (the model's outputs keep theirs).
pub fn clip_ranges(g: &Graph, stats: &Stats, qmax: i32) -> Result<Vec<f32>, String> {
    let values = stats
        .activations
        .get_or_compute(|| sample_values(g, stats))?;
    let mut max_abs = stats.max_abs.clone();
    for (t, m) in max_abs.iter_mut().enumerate() {
        if *m <= 0.0 || g.outputs.contains(&t) || g.fact(t).dtype != DType::F32 {
            continue;
        }
        *m = min_error_range(&values[t], *m, f64::from(qmax)) as f32;
    }
    Ok(max_abs)
}

/// Up to [`MAX_VALUES`] values of every float tensor of `g` over the calibration samples.
fn sample_values(g: &Graph, stats: &Stats) -> Result<Vec<Vec<f32>>, String> {
    let mut values: Vec<Vec<f32>> = vec![Vec::new(); g.tensors.len()];
    let per_sample = MAX_VALUES / stats.inputs.len().max(1);
    for (i, x) in stats.inputs.iter().enumerate() {
        let vals = g
            .run(&[Tensor::F32(x.clone())])
            .map_err(|e| format!("activation ranges: running calibration sample {i}: {e}"))?;
        for (t, v) in vals.iter().enumerate() {
            let Some(Tensor::F32(a)) = v else {
                continue;
            };
            let step = a.len().div_ceil(per_sample.max(1)).max(1);
            values[t].extend(a.iter().step_by(step).copied().filter(|v| v.is_finite()));
        }
    }
    Ok(values)
}

/// The range among [`STEPS`] candidates from `max` down with the least squared error of
/// quantizing `xs` to `[-qmax, qmax]` steps of `range / qmax`.
fn min_error_range(xs: &[f32], max: f32, qmax: f64) -> f64 {
    let max = f64::from(max);
    let error = |c: f64| -> f64 {
        let s = c / qmax;
        xs.iter()
            .map(|&x| {
                let x = f64::from(x);
                (x - (x / s).round().clamp(-qmax, qmax) * s).powi(2)
            })
            .sum()
    };
    (0..=STEPS)
        .map(|k| max * (1.0 - 0.02 * f64::from(k)))
        .map(|c| (error(c), c))
        .fold(
            (f64::INFINITY, max),
            |best, c| if c.0 < best.0 { c } else { best },
        )
        .1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outlier_no_longer_sets_the_range_at_four_bits() {
        let mut xs: Vec<f32> = (0..1000).map(|i| (i % 100) as f32 / 100.0).collect();
        xs.push(10.0);
        let c = min_error_range(&xs, 10.0, 7.0);
        assert!(c < 5.0, "{c}");
        // Without outliers the largest magnitude stays (nothing to gain from clipping).
        let uniform: Vec<f32> = (0..=7).map(|i| i as f32).collect();
        assert_eq!(min_error_range(&uniform, 7.0, 7.0), 7.0);
    }
}
