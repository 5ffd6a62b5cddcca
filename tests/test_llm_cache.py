"""agents/llm/cache.py: the SQLite reply cache, across threads and processes."""

from __future__ import annotations

import subprocess
import sys
import threading

from test_llm_support import USER

from kernelwright.agents.llm import ResponseCache


def test_cache_key_separates_models_params_and_schemas():
    key = ResponseCache.key
    base = key("m", USER, {"temperature": 0.2}, None)
    assert base == key("m", list(USER), {"temperature": 0.2}, None)
    assert len({base, key("m2", USER, {"temperature": 0.2}, None)}) == 2
    assert len({base, key("m", USER, {"temperature": 0.7}, None)}) == 2
    assert len({base, key("m", USER, {"temperature": 0.2}, "Plan")}) == 2


def test_cache_is_wal_and_shared_by_threads(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    mode = cache._connection().execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"

    def write(i: int) -> None:
        for j in range(20):
            cache.put(f"k{i}-{j}", "m", {"text": str(j)})

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(cache) == 80 and cache.get("k3-19") == {"text": "19"}


_WRITER = """
import sys
from kernelwright.agents.llm import ResponseCache
cache = ResponseCache(sys.argv[1])
for j in range(40):
    cache.put(f"{sys.argv[2]}-{j}", "m", {"text": str(j)})
    assert cache.get(f"{sys.argv[2]}-{j}") == {"text": str(j)}
"""


def test_cache_is_safe_for_concurrent_processes(tmp_path):
    path = tmp_path / "shared.sqlite"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path), f"p{i}"], stderr=subprocess.PIPE
        )
        for i in range(3)
    ]
    errors = [p.communicate(timeout=60)[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errors
    assert len(ResponseCache(path)) == 120
