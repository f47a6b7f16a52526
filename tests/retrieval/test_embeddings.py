"""The embedding models (apps/retrieval/embeddings.py): which one a setting names, and the int8
ONNX Runtime backend against the torch model it is exported from. No database."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured

from apps.retrieval import embeddings
from apps.retrieval.embeddings import OnnxEmbedder, embedder, model_source, onnx_model_file

#: The least cosine between the int8 and the torch model's vector of a text: over every tool of the
#: `cloud3k` pool and its development queries the least measured is 0.991 (BENCHMARKS.md).
FLOOR = 0.98

TEXTS = [
    "find the subnets of my vpc",
    "x",
    "Ünïcödé — 東京 région",
    "Create Subnet (ec2 Amazon Elastic Compute Cloud) Creates a subnet in the specified VPC.",
    "list every bucket with its lifecycle rules " * 40,  # past the model's 256 tokens: cut alike
]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("embeddings")


@pytest.fixture(scope="module")
def int8(cache_dir: Path) -> OnnxEmbedder:
    return OnnxEmbedder(model_source("all-MiniLM-L6-v2-int8"), threads=1, cache_dir=cache_dir)


def test_the_int8_model_agrees_with_the_torch_model(int8: OnnxEmbedder) -> None:
    vectors = int8.encode(TEXTS)
    expected = embedder().encode(TEXTS)
    assert vectors.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    cosines = (vectors * expected).sum(axis=1)
    assert cosines.min() >= FLOOR, cosines
    # Related texts stay related: the nearest of each text is itself, in either model.
    assert list((vectors @ expected.T).argmax(axis=1)) == list(range(len(TEXTS)))


def test_a_query_is_embedded_as_documents_are(int8: OnnxEmbedder) -> None:
    batch = int8.encode(TEXTS)  # padded to the longest text of the batch
    for text, row in zip(TEXTS, batch, strict=True):
        assert np.allclose(int8.encode_soon(text).result(), row, atol=1e-4)


def test_the_export_is_made_once_and_again_when_the_weights_change(
    int8: OnnxEmbedder, cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = model_source("all-MiniLM-L6-v2-int8")
    made: list[Path] = []
    monkeypatch.setattr(embeddings, "_export_int8", lambda source, target: made.append(target) or target.write_bytes(b""))
    assert onnx_model_file(source, cache_dir).is_file()
    assert made == []  # the fixture's export is reused

    # A copy of the same files is the same model; a changed file is not.
    copy = tmp_path / "model"
    shutil.copytree(source.path, copy, copy_function=os.symlink)
    moved = embeddings.ModelSource(source.name, copy, "onnx-int8")
    assert onnx_model_file(moved, cache_dir) == onnx_model_file(source, cache_dir)
    assert made == []
    (copy / "config.json").unlink()
    (copy / "config.json").write_text((source.path / "config.json").read_text() + "\n")
    changed = onnx_model_file(moved, cache_dir)
    assert made == [changed]


def test_an_export_that_disagrees_with_the_torch_model_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embeddings, "AGREEMENT", 1.01)
    with pytest.raises(ImproperlyConfigured, match="agrees with the model to a cosine of only"):
        onnx_model_file(model_source("all-MiniLM-L6-v2-int8"), tmp_path)
    assert list(tmp_path.iterdir()) == []  # nothing half made is left to be loaded


def test_the_int8_model_loads_without_torch(int8: OnnxEmbedder, cache_dir: Path) -> None:
    script = (
        "import sys, pathlib; from apps.retrieval.embeddings import OnnxEmbedder, model_source; "
        "m = OnnxEmbedder(model_source('all-MiniLM-L6-v2-int8'), threads=1, cache_dir=pathlib.Path(sys.argv[1])); "
        "m.encode_soon('x').result(); print('torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", script, str(cache_dir)], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.stdout.strip() == "False"


def test_the_setting_picks_the_int8_model(int8: OnnxEmbedder, cache_dir: Path, settings, monkeypatch) -> None:  # noqa: ANN001
    settings.GATEWAY_EMBEDDING_MODEL = "all-MiniLM-L6-v2-int8"
    settings.GATEWAY_EMBEDDING_CACHE_DIR = cache_dir
    monkeypatch.setattr(embeddings, "_loaded", None)
    loaded = embedder()
    assert isinstance(loaded, OnnxEmbedder)
    assert loaded.name == "all-MiniLM-L6-v2-int8" and loaded.dimensions == 384


def test_a_bad_model_setting_is_named(settings, monkeypatch) -> None:  # noqa: ANN001
    settings.GATEWAY_EMBEDDING_MODEL = "all-MiniLM-L6-v3"
    monkeypatch.setattr(embeddings, "_loaded", None)
    with pytest.raises(ImproperlyConfigured, match=r"'all-MiniLM-L6-v3' is neither a known model \(all-MiniLM-L6-v2, "
                                                   r"all-MiniLM-L6-v2-int8\) nor a model directory"):
        embedder()


def test_an_int8_model_without_onnx_runtime_is_named(monkeypatch) -> None:  # noqa: ANN001
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    with pytest.raises(ImproperlyConfigured, match="'all-MiniLM-L6-v2-int8' needs the Python package 'onnxruntime'"):
        model_source("all-MiniLM-L6-v2-int8")
