"""Text format of irkernel modules: printer and parser (round trip)."""
