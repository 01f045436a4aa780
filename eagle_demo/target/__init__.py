"""Running a stock `transformers` target exactly: the runner the engines call (`runner`), its static cache and
graphs (`static`, `kv`), tree attention masks (`attention`, `windows`), the family's logit head and rotary limits
(`logit_head`, `rope_limit`), CPU layouts (`cpu_layout`, `fused_norms`), and the check at every load (`check`)."""
