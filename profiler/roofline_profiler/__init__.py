"""Measure a device's decode roofline: bandwidth, peak matrix FLOP/s, the decode-GEMM batch sweep,
and from them the ridge point and the recommended minimum batch."""

__version__ = "0.1.0"
