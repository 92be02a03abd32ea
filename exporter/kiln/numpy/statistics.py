"""numpy's statistics: the nan* reductions, average, median, percentile/quantile, ptp, cov, corrcoef, histogram, bincount, digitize, count_nonzero."""
from __future__ import annotations

__all__: list[str] = []
