"""Whole-forward capture: a model's forward traced once, its message-passing calls batched and rewritten.

``capture`` traces and replays a forward, ``heads`` batches parallel heads, ``passes`` rewrite the captured
fx graph, ``replay`` holds the run-time helpers the rewritten graph calls.
"""
