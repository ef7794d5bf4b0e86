"""Kopf operator that profiles GPU nodes and publishes their decode roofline.

It sits on the profiler's pure layers (``roofline_profiler.core`` and ``roofline_profiler.wire``)
and never on the measuring code, so it installs and runs without torch. Its own layers: ``run``
over ``decide`` over ``core``.
"""

__version__ = "0.1.0"
