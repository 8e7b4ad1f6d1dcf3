"""Large freed buffers go back to the system, so a refused request does not leave its memory resident.

glibc's malloc raises its mmap threshold to the size of each large block freed (up to 32 MiB): after
the first request decoded a few 1 MiB chunks, later ones come from a thread's heap arena, and a heap
only shrinks from its top — so every worker thread that once held a request's decoded data kept it
(measured: three arenas × the 256 MiB token share, 786 MiB resident after bombs that were all
refused). A fixed threshold (:data:`MMAP_THRESHOLD`) makes blocks that large mmap'd again, unmapped
when freed. Small objects (pymalloc's arenas, Arrow's own pool) are not affected. A no-op where the C
library is not glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 256 * 1024

log = logging.getLogger("ranklog.archive.allocator")


def return_large_blocks() -> bool:
    """Fix malloc's mmap threshold (see the module docstring); True when it took effect."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    done = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    if not done:
        log.debug("mallopt(M_MMAP_THRESHOLD) refused; freed large blocks may stay resident")
    return done
