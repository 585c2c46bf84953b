"""Benchmark harness: models x datasets x systems x {inference, training step}.

Modules, one job each:
  datasets     graphs and input features of the benchmark datasets (quick / full sizes)
  models       the gnnc reference layers as benchmarked, and their floor shapes
  pyg_models   the PyG built-in computing the same function, with parameters copied across
  dgl_models   DGL's built-ins with parameters copied across, and our UDFs run by DGL (peer side)
  systems      the registry of systems (eager, compiled, pyg, pyg-fast, pyg-compile, dgl, dgl-udf)
  peer         the peer interpreter (DGL on its own torch): found, cases exported, configurations launched
  peer_worker  one DGL configuration inside the peer interpreter (imports no gnnc)
  timing       the timed region, its memory and failures, shared by both interpreters
  devices      the device a run times on (cpu, cuda): its check, clock and memory meter
  equivalence  the gate: a system's outputs and input gradients against the eager oracle
  floor        bytes and FLOPs every configuration must move and run, and the floor time
  procfs       resident memory and its high-water mark from /proc, the memory cap
  machine      machine description and its measured copy bandwidth and matmul rate
  worker       what runs inside one subprocess: dataset build, oracle, check, timing, profile
  runner       the plan, the scratch folder, one subprocess per configuration, timeouts, OOM, JSON
  profiling    --profile: torch.profiler's top operators per system, one file per table row
  report       the Markdown table;  plots  the bar charts
  cli          the command line shared by ``bench/run.py`` and ``gnnc bench``
  world_programs / world_worker / world_gate  the world's layer code: wiring, one run, the gate
  zoo / zoo_peers / zoo_worker  ``--zoo``: world layers timed against DGL and same-function built-ins
"""
