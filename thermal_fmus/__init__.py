"""cosim's cooling FMUs: C sources (one folder per model) and the script that builds them."""
