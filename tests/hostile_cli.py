"""Shared by the hostile-input tests: run the command line in process and read its output."""

from __future__ import annotations

from typer.testing import CliRunner

from planner.cli import app

runner = CliRunner()

# The config.json of Meta-Llama-3-8B (Hugging Face, meta-llama/Meta-Llama-3-8B), the keys the
# planner reads: a valid base that the hostile tests then break one value at a time.
LLAMA_CONFIG = {
    "model_type": "llama",
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 32,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "max_position_embeddings": 8192,
}


def flat(text: str) -> str:
    """The console wraps long lines at spaces; compare with every run of whitespace as one."""
    return " ".join(text.split())


def run(*args: str) -> tuple[int, str]:
    """Exit code and flattened output of `planner ARGS`; a Python exception fails the test."""
    r = runner.invoke(app, list(args))
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert "Traceback" not in r.output
    return r.exit_code, flat(r.output)
