"""Header registry, the public set, trace and warnings (spec 5.10)."""
