"""Hearing: voice activity, segmentation, ASR guards and coalescing audio into heard sentences."""
