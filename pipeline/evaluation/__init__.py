"""Evaluation: session files, replay, WER and comparison reports for measuring the pipeline."""
