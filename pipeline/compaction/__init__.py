"""Compaction: planning and writing rolling summaries that keep a long call inside its budget."""
