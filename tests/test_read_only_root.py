"""A read-only root file system (Kubernetes' ``readOnlyRootFilesystem: true``): the refusal to start names what
to change, the state directory (VSR_STATE_DIR) or the event journal (``event_stream: {backend: none}``), and the
shipped manifest gives the state directory and /tmp volumes of their own (trial 10b finding 7)."""
from __future__ import annotations

import os
import subprocess
import sys

import yaml

from .disk import small_disk
from .procs import ROOT


def test_an_unwritable_state_dir_is_refused_naming_the_fix():
    with small_disk(read_only=True) as ro:
        done = subprocess.run([sys.executable, "-m", "vsr_fast", "serve", "--config", "config/quickstart.yaml",
                               "--port", "0"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                              env={**os.environ, "VSR_STATE_DIR": str(ro / "state")})
    assert done.returncode == 2, done.stderr
    line = next(x for x in done.stderr.splitlines() if "refusing to start" in x)
    assert "Read-only file system" in line and "VSR_STATE_DIR" in line and "event_stream: {backend: none}" in line


def test_the_manifest_runs_with_a_read_only_root():
    docs = list(yaml.safe_load_all((ROOT / "deploy" / "kubernetes.yaml").read_text()))
    pod = next(d for d in docs if d and d.get("kind") == "Deployment")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    empty = {v["name"] for v in pod["volumes"] if "emptyDir" in v}
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    state = env.get("VSR_STATE_DIR", "/home/vsr/state")
    assert mounts.get(state) in empty and mounts.get("/tmp") in empty, (mounts, empty)
