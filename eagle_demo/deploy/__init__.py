"""Serving the loaded pair elsewhere: each engine's command line and, where an engine would misread the draft, an
adapted copy (`plan`); what vLLM reads from a draft against what is read here (`vllm`); what the engines guess for
a draft that names no aux layer ids (`aux_layers`); the n-gram draft's commands, no head (`ngram`)."""

from .plan import Plan, deployment_commands, plan_for, write_adapted_copy

__all__ = ["Plan", "plan_for", "deployment_commands", "write_adapted_copy"]
