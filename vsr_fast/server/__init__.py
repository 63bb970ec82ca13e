"""The trio server: the hot-path handler, the quart-trio routes, and process lifetime."""
