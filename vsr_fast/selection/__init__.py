"""Selectors and executors: how a decision's models become the ones called."""
