"""Compatibility: the views moved to `eagle_demo.view` (tokens, stats, charts, tree_chart, bench_view) and
`RunView` to `eagle_demo.metrics`; this module keeps the old names importable."""

from __future__ import annotations

from .metrics import RunView
from .view.bench_view import (BENCH_COLUMNS, MISSES_COLUMNS, bench_compare_figure, bench_compare_rows, bench_figure,
                              bench_misses_rows, bench_rows, bench_sweep_figure)
from .view.charts import (DEPTH_COLORS, Figure, acceptance_depth_figure, accepted_length_figure, empty_figure,
                          time_split_figure, tokens_time_figure)
from .view.stats import stats_html, summary
from .view.tokens import MAX_STYLED_DEPTH, Piece, TextCache, group_ids, rejected_children, token_html, token_pieces
from .view.tree_chart import tree_figure, tree_mask_trace

__all__ = ["RunView", "Piece", "TextCache", "token_pieces", "group_ids", "token_html", "rejected_children",
           "stats_html", "summary", "tokens_time_figure", "accepted_length_figure", "acceptance_depth_figure",
           "time_split_figure", "tree_figure", "tree_mask_trace", "empty_figure", "DEPTH_COLORS", "MAX_STYLED_DEPTH",
           "report_markdown", "bench_rows", "bench_figure", "bench_compare_rows", "bench_compare_figure",
           "bench_misses_rows", "bench_sweep_figure", "BENCH_COLUMNS", "MISSES_COLUMNS", "Figure"]


def report_markdown(report) -> str:
    """`AdaptationReport.to_markdown()`."""
    return report.to_markdown()
