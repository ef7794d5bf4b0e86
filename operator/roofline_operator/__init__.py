"""Kopf operator that profiles GPU nodes and publishes their decode roofline.

It sits on the profiler's pure result modules (``roofline_profiler.compact``) and never on the
measuring code, so it installs and runs without torch.
"""

__version__ = "0.1.0"
