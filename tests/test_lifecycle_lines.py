"""The process's own lines (a reload's outcome, the stop) carry a time and a level like every log line, and a
reload's outcome is said once per process, not once by the log and again on stderr (trial 10b finding 9)."""
from __future__ import annotations

import os
import re
import signal

import yaml

from .procs import config, mock_upstream, router, wait_for_value, write_config

STAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} \S+ (INFO|WARNING|ERROR) vsr-fast: ")


def test_reload_and_stop_lines_are_stamped_and_said_once(tmp_path):
    with mock_upstream() as upstream:
        doc = config([{"name": "m", "backend_refs": [{"endpoint": f"{upstream.url}/v1"}]}],
                     [{"name": "d", "modelRefs": [{"model": "m"}]}])
        path = write_config(doc, str(tmp_path))
        with router(path) as proc:
            with open(path, "a") as f:
                f.write("bogus_top_level: 1\n")
            proc.signal(signal.SIGHUP)
            refused = wait_for_value(lambda: [x for x in proc.lines if "reload refused" in x], "the refusal")
            doc["recipes"][0]["decisions"][0]["name"] = "d2"
            with open(path + ".new", "w") as f:
                yaml.safe_dump(doc, f)
            os.replace(path + ".new", path)
            proc.signal(signal.SIGHUP)
            done = wait_for_value(lambda: [x for x in proc.lines if "reload done" in x], "the reload")
            proc.signal(signal.SIGTERM)
            assert proc.wait(60) == 0
        stopping = [x for x in proc.lines if "stopping" in x]
    assert len(refused) == 1 and STAMP.match(refused[0]) and " ERROR " in refused[0], proc.lines
    assert len([x for x in proc.lines if "does not load" in x]) == 1, proc.lines
    assert len(done) == 1 and STAMP.match(done[0]) and " INFO " in done[0], proc.lines
    assert stopping and all(STAMP.match(x) for x in stopping), stopping
