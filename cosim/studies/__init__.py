"""Studies of many runs: sweeps and Monte Carlo on Dask, hosting capacity, comparing runs.

:mod:`.executor` runs tasks on Dask (or in this process), :mod:`.variants` makes sweep
variants, :mod:`.sweep` runs them into one table, :mod:`.hosting` bisects the largest load
per bus, :mod:`.compare` puts runs' KPIs side by side.
"""
