"""Adapters: each outside library's one importer (OpenAI, Whisper, Redis, embeddings, audio, images, OCR)."""
