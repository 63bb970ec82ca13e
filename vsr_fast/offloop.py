"""Where body-sized work leaves the trio loop, and how many threads it may take (``server.pipeline.offload``).

Below the whole package, as a System One answer (``systemone.deployments``) is decoded off the loop past the
same size as a client's body, in the same two threads.
"""
from __future__ import annotations

import trio

# Where a thread hop pays: past ~10 times its own cost in loop time saved. Chat bodies are mostly under 64 KiB.
OFF_LOOP_BYTES = 256 * 1024
# Two threads at most: a flood of big bodies waits its turn instead of taking every worker thread.
OFF_LOOP_LIMITER = trio.CapacityLimiter(2)
