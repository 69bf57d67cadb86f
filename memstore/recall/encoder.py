"""Sentence embeddings on the CPU with numpy: all-MiniLM-L6-v2, read from its own files.

Why: the keyword path finds the words a memory shares with the text, not what it means
("What pets does Nate have?" for "Nate adopted a dog named Max"). A small sentence encoder
closes much of that gap for English (see memstore/recall/semantic.py for how recall uses it).

Why numpy and not torch or onnxruntime: the model is six BERT layers of 384 wide; numpy
runs one short sentence in a few milliseconds, and it is the only dependency (the optional
`semantic` extra). The tokenizer (BERT's WordPiece, uncased) and the safetensors reader are
a few lines each, here, so that no other package is needed.

The model folder is the sentence-transformers layout: config.json, vocab.txt and
model.safetensors (float32).
"""

from __future__ import annotations

import json
import math
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

# What the model was trained with (sentence_bert_config.json): longer text is cut.
MAX_TOKENS = 256


class WordPiece:
    """BERT's uncased tokenizer: text cleaned, lower-cased, accents stripped, split on
    whitespace and punctuation (each Han character a word), then each word into the
    longest pieces of the vocabulary, the later ones marked ##."""

    def __init__(self, vocab: list[str]) -> None:
        self.ids = {piece: i for i, piece in enumerate(vocab)}
        self.unknown = self.ids["[UNK]"]
        self.start = self.ids["[CLS]"]
        self.end = self.ids["[SEP]"]

    def encode(self, text: str, max_tokens: int = MAX_TOKENS) -> list[int]:
        """[CLS] pieces [SEP], at most `max_tokens` in all."""
        ids: list[int] = []
        for word in _basic_words(text):
            ids.extend(self._pieces(word))
            if len(ids) >= max_tokens - 2:
                break
        return [self.start, *ids[: max_tokens - 2], self.end]

    def _pieces(self, word: str) -> list[int]:
        if len(word) > 100:
            return [self.unknown]
        pieces = []
        start = 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.ids:
                    pieces.append(self.ids[piece])
                    break
                end -= 1
            else:
                return [self.unknown]  # no piece fits: the whole word is unknown
            start = end
        return pieces


def _basic_words(text: str) -> list[str]:
    """BERT's basic tokenizer, uncased: the words and punctuation marks of `text`."""
    cleaned = []
    for char in text:
        code = ord(char)
        if code == 0 or code == 0xFFFD or _is_control(char):
            continue
        if _is_han(code):
            cleaned.append(f" {char} ")
        elif char.isspace():
            cleaned.append(" ")
        else:
            cleaned.append(char)
    words = []
    for word in "".join(cleaned).lower().split():
        # Accents stripped: decomposed, combining marks dropped.
        decomposed = unicodedata.normalize("NFD", word)
        word = "".join(c for c in decomposed if unicodedata.category(c) != "Mn")
        current = ""
        for char in word:
            if _is_punctuation(char):
                if current:
                    words.append(current)
                words.append(char)
                current = ""
            else:
                current += char
        if current:
            words.append(current)
    return words


def _is_control(char: str) -> bool:
    """Dropped, as BERT drops them: every "C" category (control, format, private use,
    unassigned) but the whitespace ones."""
    if char in "\t\n\r":
        return False
    return unicodedata.category(char).startswith("C")


def _is_punctuation(char: str) -> bool:
    code = ord(char)
    # All non-letter/number ASCII is punctuation to BERT, "^", "$" and "`" included.
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _is_han(code: int) -> bool:
    return (
        0x4E00 <= code <= 0x9FFF
        or 0x3400 <= code <= 0x4DBF
        or 0x20000 <= code <= 0x2A6DF
        or 0x2A700 <= code <= 0x2B73F
        or 0x2B740 <= code <= 0x2B81F
        or 0x2B820 <= code <= 0x2CEAF
        or 0xF900 <= code <= 0xFAFF
        or 0x2F800 <= code <= 0x2FA1F
    )


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a safetensors file: an 8-byte little-endian header length, a JSON
    header (dtype, shape, byte offsets per tensor), then the raw data."""
    import numpy as np

    dtypes = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
    with path.open("rb") as file:
        size = int.from_bytes(file.read(8), "little")
        header = json.loads(file.read(size))
        data = file.read()
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        array = np.frombuffer(data[start:end], dtype=dtypes[info["dtype"]])
        tensors[name] = array.reshape(info["shape"])
    return tensors


@dataclass(frozen=True)
class _Layer:
    query: tuple[np.ndarray, np.ndarray]
    key: tuple[np.ndarray, np.ndarray]
    value: tuple[np.ndarray, np.ndarray]
    attention_out: tuple[np.ndarray, np.ndarray]
    attention_norm: tuple[np.ndarray, np.ndarray]
    intermediate: tuple[np.ndarray, np.ndarray]
    output: tuple[np.ndarray, np.ndarray]
    output_norm: tuple[np.ndarray, np.ndarray]


class SentenceEncoder:
    """A BERT encoder with mean pooling: unit vectors whose dot product is the cosine
    similarity of two texts."""

    def __init__(self, folder: Path) -> None:
        import numpy as np

        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        vocab = (folder / "vocab.txt").read_text(encoding="utf-8").splitlines()
        self.tokenizer = WordPiece(vocab)
        weights = read_safetensors(folder / "model.safetensors")
        self.heads: int = config["num_attention_heads"]
        self.eps: float = config["layer_norm_eps"]
        self.dimension: int = config["hidden_size"]

        def pair(name: str, transpose: bool = True) -> tuple[np.ndarray, np.ndarray]:
            weight = weights[f"{name}.weight"].astype(np.float32)
            # Stored as (out, in); kept as (in, out) so that x @ weight needs no transpose.
            return (np.ascontiguousarray(weight.T) if transpose else weight), weights[
                f"{name}.bias"
            ].astype(np.float32)

        self.words = weights["embeddings.word_embeddings.weight"].astype(np.float32)
        self.positions = weights["embeddings.position_embeddings.weight"].astype(np.float32)
        self.token_type = weights["embeddings.token_type_embeddings.weight"][0].astype(np.float32)
        self.embedding_norm = pair("embeddings.LayerNorm", transpose=False)
        self.layers = [
            _Layer(
                *(
                    pair(f"encoder.layer.{i}.{part}", transpose=not part.endswith("LayerNorm"))
                    for part in (
                        "attention.self.query",
                        "attention.self.key",
                        "attention.self.value",
                        "attention.output.dense",
                        "attention.output.LayerNorm",
                        "intermediate.dense",
                        "output.dense",
                        "output.LayerNorm",
                    )
                )
            )
            for i in range(config["num_hidden_layers"])
        ]

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """One unit vector (float32) per text, in order."""
        import numpy as np

        ids = [self.tokenizer.encode(text) for text in texts]
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        # Batches of similar length, so that little is padding.
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            vectors[batch] = self._encode_batch([ids[i] for i in batch])
        return vectors

    def _encode_batch(self, ids: list[list[int]]) -> np.ndarray:
        import numpy as np

        length = max(len(row) for row in ids)
        tokens = np.zeros((len(ids), length), dtype=np.int64)
        mask = np.zeros((len(ids), length), dtype=np.float32)
        for i, row in enumerate(ids):
            tokens[i, : len(row)] = row
            mask[i, : len(row)] = 1.0
        x = self.words[tokens] + self.positions[:length] + self.token_type
        x = self._norm(x, self.embedding_norm)
        # Padding gets no attention: a large negative score before the softmax.
        bias = ((1.0 - mask) * -1e9)[:, None, None, :]
        for layer in self.layers:
            x = self._layer(x, layer, bias)
        pooled = (x * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norms, 1e-12)

    def _layer(self, x: np.ndarray, layer: _Layer, bias: np.ndarray) -> np.ndarray:
        import numpy as np

        batch, length, width = x.shape
        size = width // self.heads
        # Projections as one 2-D product over all tokens: numpy hands that to BLAS, and a
        # stacked (3-D) product is several times slower for short texts.
        flat = x.reshape(batch * length, width)

        def heads(projection: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
            y = flat @ projection[0] + projection[1]
            return y.reshape(batch, length, self.heads, size).transpose(0, 2, 1, 3)

        query, key, value = heads(layer.query), heads(layer.key), heads(layer.value)
        scores = query @ key.transpose(0, 1, 3, 2) / math.sqrt(size) + bias
        scores -= scores.max(axis=-1, keepdims=True)
        weights = np.exp(scores)
        weights /= weights.sum(axis=-1, keepdims=True)
        context = (weights @ value).transpose(0, 2, 1, 3).reshape(batch * length, width)
        attended = context @ layer.attention_out[0] + layer.attention_out[1]
        flat = self._norm(flat + attended, layer.attention_norm)
        hidden = _gelu(flat @ layer.intermediate[0] + layer.intermediate[1])
        out = hidden @ layer.output[0] + layer.output[1]
        return self._norm(flat + out, layer.output_norm).reshape(batch, length, width)

    def _norm(self, x: np.ndarray, weights: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        import numpy as np

        mean = x.mean(axis=-1, keepdims=True)
        variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        return (x - mean) / np.sqrt(variance + self.eps) * weights[0] + weights[1]


A5 = 1.061405429  # the last coefficient of 7.1.26


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, x * Phi(x), with erf from Abramowitz and Stegun 7.1.26 (error
    below 1.5e-7; numpy has no erf)."""
    import numpy as np

    z = np.abs(x) / math.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * A5))))
    erf = np.sign(x) * (1.0 - poly * np.exp(-z * z))
    return 0.5 * x * (1.0 + erf)
