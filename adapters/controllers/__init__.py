"""Controllers: one module per policy, each a mosaik simulator that reads measurements and
writes setpoints over time-shifted connections (found by the registry like any adapter)."""
