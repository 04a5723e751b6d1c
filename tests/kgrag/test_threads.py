"""Query-serving commands run numpy's BLAS on one thread."""

from __future__ import annotations

import json
import subprocess
import sys

import kgrag.threads

SCRIPT = """
import json, numpy
from threadpoolctl import threadpool_info
before = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
from kgrag.threads import serve_queries
serve_queries()
after = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
print(json.dumps({"before": before, "after": after}))
"""


def test_serve_queries_limits_blas_for_the_process():
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "", "OPENBLAS_NUM_THREADS": "2"},
    )
    pools = json.loads(out.stdout)
    assert pools["before"] and all(n == 2 for n in pools["before"])
    assert all(n == 1 for n in pools["after"])


ARENAS = """
import ctypes, importlib.util, sys, tempfile, threading
spec = importlib.util.spec_from_file_location("threads", sys.argv[2])  # not the package
threads = importlib.util.module_from_spec(spec)
spec.loader.exec_module(threads)
threads.serve_queries(arenas=int(sys.argv[1]))
def work():
    blocks = [bytearray(4096) for _ in range(2000)]  # small blocks: the thread's arena
    done.wait()
done = threading.Event()
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads:
    t.start()
libc = ctypes.CDLL("libc.so.6")
libc.fopen.restype = ctypes.c_void_p
with tempfile.NamedTemporaryFile(suffix=".xml") as f:
    fp = libc.fopen(f.name.encode(), b"w")
    libc.malloc_info(0, ctypes.c_void_p(fp))
    libc.fclose(ctypes.c_void_p(fp))
    print(open(f.name).read().count("<heap nr="))
done.set()
"""


def test_serve_queries_caps_the_allocator_arenas():
    """Eight threads allocating get at most two arenas (glibc; MALLOC_ARENA_MAX unset)."""

    def heaps(arenas: int) -> int:
        out = subprocess.run(
            [sys.executable, "-c", ARENAS, str(arenas), kgrag.threads.__file__],
            capture_output=True,
            text=True,
            check=True,
            env={"PATH": ""},
        )
        return int(out.stdout)

    assert heaps(2) <= 2 < heaps(0)
