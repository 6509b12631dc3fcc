"""Statistics: Welch's interval of a gap and its verdict, cosines and
relative differences.
"""

import math

import numpy as np

# Verdict: "same within noise" only when the interval lies inside this.
SAME_WITHIN = 1.0


def _t_quantile(df, q=0.975):
    """The Student t quantile (bisection on the regularized incomplete beta)."""
    if df > 1e6:
        return 1.959963984540054

    def cdf(t):
        x = df / (df + t * t)
        return 1.0 - 0.5 * _betainc(df / 2.0, 0.5, x)

    low, high = 0.0, 100.0
    for _ in range(200):
        mid = (low + high) / 2.0
        if cdf(mid) < q:
            low = mid
        else:
            high = mid
    return (low + high) / 2.0


def _betainc(a, b, x):
    """Regularized incomplete beta I_x(a, b) (continued fraction)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log(1.0 - x))
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - _betainc(b, a, 1.0 - x)
    f, c, d = 1.0, 1.0, 0.0
    for i in range(400):
        m = i // 2
        if i == 0:
            numerator = 1.0
        elif i % 2 == 0:
            numerator = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        else:
            numerator = -((a + m) * (a + b + m) * x
                          / ((a + 2 * m) * (a + 2 * m + 1)))
        d = 1.0 + numerator * d
        d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
        c = 1.0 + numerator / (c if abs(c) > 1e-300 else 1e-300)
        f *= c * d
        if abs(1.0 - c * d) < 1e-12:
            break
    return front * (f - 1.0) / a


def welch_interval(a, b, level=0.975):
    """`(mean(a) - mean(b), low, high)`: Welch's 95% interval of the gap."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    diff = float(a.mean() - b.mean())
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = math.sqrt(va + vb)
    if se == 0.0:
        return diff, diff, diff
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    half = _t_quantile(df, level) * se
    return diff, diff - half, diff + half


def verdict(low, high, margin=SAME_WITHIN):
    """"same within noise" when `[low, high]` lies inside `±margin`;
    "differs" when it excludes 0; else "can't tell"."""
    if -margin < low and high < margin:
        return "same within noise"
    if low > 0.0 or high < 0.0:
        return "differs"
    return "can't tell"


def cosine(a, b):
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0.0 and nb == 0.0:
        return 1.0
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(a @ b / (na * nb))


def relative_difference(a, b):
    """`|a - b| / max(|a|, |b|)`, elementwise (0 where both are 0)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    scale = np.maximum(np.abs(a), np.abs(b))
    return np.where(scale > 0, np.abs(a - b) / np.where(scale > 0, scale, 1), 0)
