"""Reproducible training pipeline for the shipped tiny target/draft model pair."""
