"""The per-call compiler: a UDF call traced, built into an MP-DFG, optimized and lowered to a plan (``driver``)."""
