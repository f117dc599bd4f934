"""The NVIDIA driver stack: the branch catalog and the package names of each OS family."""
