"""The performance model: flop counts and rates, tile sizes, the cost model dispatch prices paths with, the
measuring half of calibration, modelled devices and their profiles, and the simulated runtime and simulator that
run the algorithms' own task graphs on modelled time."""
