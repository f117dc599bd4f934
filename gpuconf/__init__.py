"""gpuconf: declarative remediation for GPU servers."""

__version__ = "0.2.0"
