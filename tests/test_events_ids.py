"""Request and replay ids drawn from pooled OS randomness: the formats uuid4 and new_replay_id gave."""
import os
import re
import uuid

from vsr_fast.events import ids, new_replay_id


def test_a_request_id_is_a_uuid4_hex():
    seen = {ids.request_id() for _ in range(3 * ids.BLOCK)}       # across refills
    assert len(seen) == 3 * ids.BLOCK
    for rid in seen:
        u = uuid.UUID(rid)
        assert u.hex == rid and u.version == 4 and u.variant == uuid.RFC_4122


def test_a_replay_id_is_milliseconds_then_random_digits():
    ms = 1_796_244_755_488
    made = [ids.replay_id(ms) for _ in range(2 * ids.BLOCK)]
    assert len(set(made)) == len(made)
    assert all(re.fullmatch(r"[0-9a-f]{24}", r) and r[:12] == f"{ms:012x}" for r in made)
    assert re.fullmatch(r"[0-9a-f]{24}", new_replay_id())


def test_a_forked_child_does_not_reuse_the_parent_s_pool():
    ids.request_id()                  # the pool holds ids now
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:                      # the child: its first id, to the parent
        os.write(write, ids.request_id().encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 64).decode()
    os.waitpid(pid, 0)
    os.close(read)
    assert child != ids.request_id() and len(child) == 32
