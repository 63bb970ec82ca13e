"""System One: presets, the client that merges and sends questions, deployments, answer reuse."""
