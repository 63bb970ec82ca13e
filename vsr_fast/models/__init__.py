"""Decision models that ship inside the package and answer System One questions in process.

Each model is a sub-package with a ``load()`` returning an object that
implements ``vsr_fast.systemone.runtime.DecisionModel``; nothing here is
imported until a deployment asks for it.
"""
