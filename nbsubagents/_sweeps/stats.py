"""Reliability statistics for a sweep's repeats, with the standard library only (``math``, ``statistics``).

- ``wilson``: the Wilson score interval of a proportion (Wilson 1927; Agresti & Coull 1998 for why it beats the
  normal "Wald" interval at small n and rates near 0 or 1).
- ``newcombe``: the difference of two independent proportions with Newcombe's hybrid score interval (Newcombe
  1998, method 10), built from the two Wilson intervals.
- ``mean_interval``: a mean with its Student t interval, mean ± t(1 − α/2, n − 1) · s/√n.
- ``welch``: the difference of two means with Welch's t interval (Welch 1947; Satterthwaite's degrees of freedom).
- ``pass_at_k``: the unbiased estimator of "at least one of k tries passes", 1 − C(n−c, k)/C(n, k) (Chen et al.
  2021, "Evaluating Large Language Models Trained on Code", the HumanEval paper).
- ``pass_hat_k``: the estimator of "all of k tries pass", C(c, k)/C(n, k) (pass^k, Yao et al. 2024, τ-bench).

Student's t quantile comes from its distribution function, the regularized incomplete beta function (a continued
fraction, Numerical Recipes §6.4), inverted by bisection; it matches scipy's ``t.ppf`` to 1e-9.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence

__all__ = ["wilson", "newcombe", "mean_interval", "t_interval", "welch", "welch_of", "pass_at_k", "pass_hat_k",
           "t_quantile", "z_quantile"]

NAN = float("nan")


def z_quantile(ci: float) -> float:
    """The two-sided normal quantile of confidence ``ci`` (1.959964 for 0.95)."""
    return statistics.NormalDist().inv_cdf((1 + ci) / 2)


def wilson(successes: int, n: int, ci: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of ``successes`` out of ``n`` (NaNs when n is 0)."""
    if n <= 0:
        return NAN, NAN
    z = z_quantile(ci)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe(c1: int, n1: int, c2: int, n2: int, ci: float = 0.95) -> tuple[float, float, float]:
    """p1 − p2 and Newcombe's hybrid score interval for it (NaNs when a sample is empty)."""
    if n1 <= 0 or n2 <= 0:
        return NAN, NAN, NAN
    p1, p2 = c1 / n1, c2 / n2
    (l1, u1), (l2, u2) = wilson(c1, n1, ci), wilson(c2, n2, ci)
    d = p1 - p2
    return d, d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)


def mean_interval(values: Sequence[float], ci: float = 0.95) -> tuple[float, float, float]:
    """The mean of ``values`` and its Student t interval (the interval is NaN below two values)."""
    n = len(values)
    if n == 0:
        return NAN, NAN, NAN
    return t_interval(statistics.fmean(values), statistics.stdev(values) if n > 1 else NAN, n, ci)


def t_interval(mean: float, sd: float, n: int, ci: float = 0.95) -> tuple[float, float, float]:
    """``mean_interval`` from a sample's summary: its mean, standard deviation and size."""
    if n < 2:
        return (mean if n else NAN), NAN, NAN
    half = t_quantile(ci, n - 1) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def welch(a: Sequence[float], b: Sequence[float], ci: float = 0.95) -> tuple[float, float, float]:
    """mean(a) − mean(b) and Welch's t interval for it (NaN below two values on a side; a zero-width interval
    when both sides are constant)."""
    if not a or not b:
        return NAN, NAN, NAN
    return welch_of(statistics.fmean(a), statistics.variance(a) if len(a) > 1 else NAN, len(a),
                    statistics.fmean(b), statistics.variance(b) if len(b) > 1 else NAN, len(b), ci)


def welch_of(mean_a: float, var_a: float, n_a: int, mean_b: float, var_b: float, n_b: int,
             ci: float = 0.95) -> tuple[float, float, float]:
    """``welch`` from the two samples' summaries: mean, variance and size of each."""
    if n_a == 0 or n_b == 0:
        return NAN, NAN, NAN
    d = mean_a - mean_b
    if n_a < 2 or n_b < 2:
        return d, NAN, NAN
    va, vb = var_a / n_a, var_b / n_b
    se = math.sqrt(va + vb)
    if se == 0:
        return d, d, d
    df = (va + vb) ** 2 / (va * va / (n_a - 1) + vb * vb / (n_b - 1))
    half = t_quantile(ci, df) * se
    return d, d - half, d + half


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that at least one of ``k`` runs drawn from ``n`` (``c`` of them passing) passes."""
    if not 0 < k <= n:
        return NAN
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """The chance that all ``k`` runs drawn from ``n`` (``c`` of them passing) pass."""
    if not 0 < k <= n:
        return NAN
    return math.comb(c, k) / math.comb(n, k)


@functools.lru_cache(maxsize=4096)  # a comparison asks for the same few (ci, n − 1) again and again
def t_quantile(ci: float, df: float) -> float:
    """The two-sided Student t quantile: the t with P(|T| ≤ t) = ``ci`` for ``df`` degrees of freedom."""
    if not 0 < ci < 1 or not df > 0:
        raise ValueError(f"t_quantile needs 0 < ci < 1 and df > 0, got ci={ci!r}, df={df!r}")
    target = 1 - ci  # P(|T| > t) = I_{df/(df+t²)}(df/2, 1/2), falling in t
    low, high = 0.0, 1.0
    while _beta_inc(df / 2, 0.5, df / (df + high * high)) > target:
        high *= 2
    for _ in range(200):
        mid = (low + high) / 2
        if _beta_inc(df / 2, 0.5, df / (df + mid * mid)) > target:
            low = mid
        else:
            high = mid
        if high - low < 1e-12 * high:
            break
    return (low + high) / 2


def _beta_inc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1 - x) / b


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h
