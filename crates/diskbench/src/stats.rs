//! The statistics of a disk-bench run, as the paper reports them: the mean of
//! the per-file throughputs with its 99% confidence interval (Student's t,
//! exact for every sample size), the 5th and 95th percentiles, min and max,
//! and the worst 1-second and 10-second windows of the per-second series.

/// Summary of one sample (per-file throughputs, bytes per second).
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n - 1 in the denominator).
    pub std_dev: f64,
    /// 99% confidence interval of the mean: `mean ∓ t(0.995, n-1) · s/√n`,
    /// the lower bound at least 0 (a throughput is never negative; with two
    /// or three files t is large enough to pass below it).
    pub ci99: (f64, f64),
    pub p5: f64,
    pub p95: f64,
    pub min: f64,
    pub max: f64,
}

impl Summary {
    /// Summarises `xs`; `None` for fewer than two values (no interval).
    pub fn of(xs: &[f64]) -> Option<Summary> {
        let n = xs.len();
        if n < 2 || xs.iter().any(|x| !x.is_finite()) {
            return None;
        }
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1) as f64;
        let std_dev = var.sqrt();
        let half = t_quantile(0.995, (n - 1) as f64) * std_dev / (n as f64).sqrt();
        let mut sorted = xs.to_vec();
        sorted.sort_by(f64::total_cmp);
        Some(Summary {
            n,
            mean,
            std_dev,
            ci99: ((mean - half).max(0.0), mean + half),
            p5: percentile(&sorted, 0.05),
            p95: percentile(&sorted, 0.95),
            min: sorted[0],
            max: sorted[n - 1],
        })
    }
}

/// The `p` quantile (0..=1) of sorted values by linear interpolation between
/// closest ranks (Hyndman & Fan type 7: numpy's and R's default).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    match sorted.len() {
        0 => f64::NAN,
        1 => sorted[0],
        n => {
            let h = (n - 1) as f64 * p.clamp(0.0, 1.0);
            let lo = h.floor() as usize;
            let hi = (lo + 1).min(n - 1);
            sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
        }
    }
}

/// The smallest mean over `w` consecutive values (bytes per second of the
/// worst `w`-second window); `None` when the series is shorter than `w`.
pub fn worst_window(series: &[u64], w: usize) -> Option<f64> {
    if w == 0 || series.len() < w {
        return None;
    }
    let mut sum: u64 = series[..w].iter().sum();
    let mut min = sum;
    for i in w..series.len() {
        sum = sum + series[i] - series[i - w];
        min = min.min(sum);
    }
    Some(min as f64 / w as f64)
}

/// The `p` quantile of Student's t distribution with `df` degrees of freedom
/// (`p` in (0.5, 1)), by bisection on the exact distribution function.
pub fn t_quantile(p: f64, df: f64) -> f64 {
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    while t_cdf(hi, df) < p {
        hi *= 2.0;
        if hi > 1e12 {
            return f64::INFINITY;
        }
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if t_cdf(mid, df) < p {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo <= 1e-12 * hi {
            break;
        }
    }
    0.5 * (lo + hi)
}

/// P(T <= t) for Student's t with `df` degrees of freedom:
/// `1 - I_x(df/2, 1/2) / 2` with `x = df / (df + t²)` for t >= 0.
pub fn t_cdf(t: f64, df: f64) -> f64 {
    let x = df / (df + t * t);
    let tail = 0.5 * reg_inc_beta(x, df / 2.0, 0.5);
    if t >= 0.0 {
        1.0 - tail
    } else {
        tail
    }
}

/// The regularised incomplete beta function I_x(a, b), by its continued
/// fraction (modified Lentz), using the symmetry I_x(a,b) = 1 - I_{1-x}(b,a)
/// where the fraction converges slowly.
fn reg_inc_beta(x: f64, a: f64, b: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    if x < (a + 1.0) / (a + b + 2.0) {
        ln_front.exp() * beta_fraction(x, a, b) / a
    } else {
        1.0 - ln_front.exp() * beta_fraction(1.0 - x, b, a) / b
    }
}

fn beta_fraction(x: f64, a: f64, b: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let mut c = 1.0;
    let mut d = 1.0 - (a + b) * x / (a + 1.0);
    d = if d.abs() < TINY { TINY } else { d };
    d = 1.0 / d;
    let mut h = d;
    for m in 1..1000 {
        let m = m as f64;
        for num in [
            m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0)),
        ] {
            d = 1.0 + num * d;
            d = if d.abs() < TINY { TINY } else { d };
            c = 1.0 + num / c;
            c = if c.abs() < TINY { TINY } else { c };
            d = 1.0 / d;
            h *= d * c;
        }
        if (d * c - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, 9 terms: about 15 significant digits).
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x)Γ(1-x) = π / sin(πx).
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = G[0];
    let t = x + 7.5;
    for (i, g) in G.iter().enumerate().skip(1) {
        a += g / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs()
    }

    /// Two-sided 99% critical values of Student's t from the published
    /// tables (Abramowitz & Stegun 26.10; the normal's 2.5758 at infinity).
    #[test]
    fn t_quantiles_match_the_tables() {
        let table = [
            (1.0, 63.6567),
            (2.0, 9.9248),
            (3.0, 5.8409),
            (4.0, 4.6041),
            (5.0, 4.0321),
            (9.0, 3.2498),
            (10.0, 3.1693),
            (20.0, 2.8453),
            (29.0, 2.7564),
            (30.0, 2.7500),
            (60.0, 2.6603),
            (99.0, 2.6264),
            (120.0, 2.6174),
            (1e7, 2.5758),
        ];
        for (df, want) in table {
            let got = t_quantile(0.995, df);
            assert!(close(got, want, 2e-5), "df {df}: {got} != {want}");
        }
        assert!(close(t_quantile(0.975, 10.0), 2.2281, 2e-5));
        assert!(close(t_cdf(0.0, 5.0), 0.5, 1e-12));
        assert!(close(t_cdf(-2.0, 3.0) + t_cdf(2.0, 3.0), 1.0, 1e-12));
    }

    #[test]
    fn summary_of_known_sample() {
        // 1..=10: mean 5.5, s = sqrt(55/6) = 3.02765, t(0.995, 9) = 3.24984.
        let xs: Vec<f64> = (1..=10).map(f64::from).collect();
        let s = Summary::of(&xs).unwrap();
        assert_eq!(s.n, 10);
        assert!(close(s.mean, 5.5, 1e-12));
        assert!(close(s.std_dev, (55.0f64 / 6.0).sqrt(), 1e-12));
        let half = 3.249_835_5 * s.std_dev / 10f64.sqrt();
        assert!(close(s.ci99.0, 5.5 - half, 1e-6) && close(s.ci99.1, 5.5 + half, 1e-6), "{:?}", s.ci99);
        // numpy.percentile(range(1, 11), [5, 95]) = 1.45, 9.55
        assert!(close(s.p5, 1.45, 1e-12) && close(s.p95, 9.55, 1e-12), "{} {}", s.p5, s.p95);
        assert_eq!((s.min, s.max), (1.0, 10.0));
    }

    #[test]
    fn constant_sample_has_a_point_interval() {
        let s = Summary::of(&[7.0; 5]).unwrap();
        assert_eq!((s.mean, s.ci99, s.p5, s.p95, s.std_dev), (7.0, (7.0, 7.0), 7.0, 7.0, 0.0));
        assert!(Summary::of(&[1.0]).is_none());
        assert!(Summary::of(&[1.0, f64::NAN]).is_none());
    }

    #[test]
    fn two_values_use_t_with_one_degree_of_freedom() {
        // mean 2, s = sqrt(2), half = 63.6567 * sqrt(2) / sqrt(2) = 63.6567
        let s = Summary::of(&[1.0, 3.0]).unwrap();
        assert!(close(s.ci99.1 - 2.0, 63.6567, 1e-5), "{:?}", s.ci99);
        assert_eq!(s.ci99.0, 0.0, "the lower bound stops at 0");
        // Percentiles interpolate: 1 + 0.05 * 2, 1 + 0.95 * 2.
        assert!(close(s.p5, 1.1, 1e-12) && close(s.p95, 2.9, 1e-12));
    }

    #[test]
    fn worst_windows() {
        let series = [10, 10, 2, 10, 10, 10, 10, 10, 10, 10, 10, 4];
        assert_eq!(worst_window(&series, 1), Some(2.0));
        // Windows of 10: [0..10) = 92, [1..11) = 92, [2..12) = 86.
        assert_eq!(worst_window(&series, 10), Some(8.6));
        assert_eq!(worst_window(&series[..9], 10), None);
        assert_eq!(worst_window(&[], 1), None);
    }
}
