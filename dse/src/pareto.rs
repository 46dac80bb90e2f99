//! The Pareto front: the points no other point beats, every objective minimized. A point
//! dominates another when it is no worse in every objective and better in at least one;
//! equal points dominate neither, so both stay on the front.

/// Whether `a` dominates `b`.
pub fn dominates(a: &[f64], b: &[f64]) -> bool {
    debug_assert_eq!(a.len(), b.len());
    a.iter().zip(b).all(|(x, y)| x <= y) && a.iter().zip(b).any(|(x, y)| x < y)
}

/// For each point, whether it is on the front (no other point dominates it).
pub fn front(points: &[Vec<f64>]) -> Vec<bool> {
    points
        .iter()
        .map(|p| !points.iter().any(|q| dominates(q, p)))
        .collect()
}

/// The indices of the 2-objective front of `points` (x, y), in increasing x: the staircase a
/// plot draws.
pub fn staircase(points: &[(f64, f64)]) -> Vec<usize> {
    let as_vecs: Vec<Vec<f64>> = points.iter().map(|&(x, y)| vec![x, y]).collect();
    let on = front(&as_vecs);
    let mut idx: Vec<usize> = (0..points.len()).filter(|&i| on[i]).collect();
    idx.sort_by(|&a, &b| {
        points[a]
            .0
            .total_cmp(&points[b].0)
            .then(points[a].1.total_cmp(&points[b].1))
    });
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dominated_points_are_off_the_front() {
        // (latency, LUTs)
        let p = vec![
            vec![10.0, 100.0], // fastest
            vec![20.0, 50.0],  // a trade-off
            vec![20.0, 60.0],  // dominated by the one above
            vec![40.0, 40.0],  // smallest
            vec![50.0, 40.0],  // dominated: as small, slower
            vec![10.0, 100.0], // equal to the first: both stay
        ];
        assert_eq!(front(&p), [true, true, false, true, false, true]);
    }

    #[test]
    fn one_point_and_no_points() {
        assert_eq!(front(&[vec![1.0, 2.0]]), [true]);
        assert!(front(&[]).is_empty());
    }

    #[test]
    fn three_objectives_keep_a_point_best_in_any_one() {
        let p = vec![
            vec![1.0, 9.0, 9.0],
            vec![9.0, 1.0, 9.0],
            vec![9.0, 9.0, 1.0],
            vec![9.0, 9.0, 9.0],
        ];
        assert_eq!(front(&p), [true, true, true, false]);
    }

    #[test]
    fn the_staircase_runs_in_increasing_x() {
        let p = [(3.0, 1.0), (1.0, 3.0), (2.0, 2.0), (2.5, 2.5)];
        assert_eq!(staircase(&p), [1, 2, 0]);
    }
}
