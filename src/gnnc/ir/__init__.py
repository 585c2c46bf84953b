"""The MP-DFG (one message-passing call's fx graph), its operators, residency and shape rules, printer, cost model."""
