"""Run state and reports -> HTML and plotly figures. No model code and no Gradio here:
everything is a pure function of engine events (`eagle_demo.decoding.events`, collected in
`decoding.metrics.RunView`), benchmark reports, and a `decode(ids) -> str` callable.

- `tokens`: token provenance spans; `stats`: the run summary and the stats strip;
- `charts`: the live charts and the figure type; `tree_chart`: one round's draft tree and verify mask;
- `bench_view`: benchmark tables and charts. The adaptation report renders itself (`AdaptationReport.to_markdown`).
"""
