"""The published forms the operator reads: the versioned JSON result, the compact termination
message, the headline fields, the warning codes and when each is raised.

May import ``core``; no torch, numpy or matplotlib.
"""
