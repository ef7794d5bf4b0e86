"""Pure data and maths: input limits, units, statistics, the roofline model, its ceilings and the
recommended batch, plausible values, model architectures and serving plans.

Imports no other layer of the package, and no torch, numpy or matplotlib.
"""
