"""The `pfar` command: a thin shell over the kernel's Python API and its control socket."""
