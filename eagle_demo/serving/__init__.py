"""Serving the pair in real engines: vLLM's CPU build in its own virtualenv (`runtime`), its worker (run inside
that virtualenv), the harness that runs it, and the parity check against this playground."""
